#!/usr/bin/env python3
"""Writes kernel-tables/attributes/ort-<ver>.txt: the attributes of every op schema a release bundles.

ORT verifies each node's attributes against its schema when it loads a model (ONNX's
OpSchema::Verify): an attribute the schema does not declare fails the load with "Unrecognized
attribute", a missing required one with "Required attribute ... is missing". The kernel tables
(generate.py) do not carry attributes; this companion file does, one line per schema version:

    <domain> <op> <since>: <attr> <attr>! ...      (a trailing ! marks a required attribute)

Usage: attributes.py VERSION...   (uses the same wheel cache and stubs as generate.py)
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import ortenv  # noqa: E402


def generate(ver):
    d, _, _ = ortenv.prepare(ver)
    out = os.path.join(d, "attributes.json")
    with open(os.path.join(HERE, "attributes_child.py")) as f:
        p = ortenv.run_child(ver, f.read(), out)
    if p.returncode != 0:
        raise SystemExit(f"attribute enumeration of {ver} failed:\n{p.stderr[-4000:]}")
    with open(out) as f:
        rows = json.load(f)
    lines = [f"# ONNX Runtime {ver}: attributes of every op schema it bundles (tools/kernel-tables/attributes.py).",
             "# <domain> <op> <since>: <attribute>... ; a trailing ! marks a required attribute."]
    body = set()
    for r in rows:
        dom = r["domain"] or "ai.onnx"
        attrs = " ".join(n + ("!" if req else "") for n, req in r["attrs"])
        body.add(f"{dom} {r['op']} {r['since']}: {attrs}".rstrip())
    path = os.path.join(REPO, "kernel-tables", "attributes", f"ort-{ver}.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines + sorted(body)) + "\n")
    print(f"{ver}: {path}, {len(body)} schemas")


if __name__ == "__main__":
    for v in sys.argv[1:]:
        generate(v)
