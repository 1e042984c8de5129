#!/usr/bin/env python3
"""Compare a recorded enumeration fixture with the oracle's `kernels` output for the same release.

    python3 /work/shared/oracle/ortstub.py kernels 1.24.4 /tmp/k.json
    python3 tools/kernel-tables/check_oracle.py 1.24.4 /tmp/k.json
    python3 /work/shared/oracle/ortstub.py schemas 1.24.4 /tmp/s.json
    python3 tools/kernel-tables/check_oracle.py 1.24.4 /tmp/k.json --schemas /tmp/s.json

Compares the CUDA and CPU registrations as multisets of (provider, domain, op, since, until, types as
sets); prints differences and what the oracle lists for other providers. With --schemas, also
compares the oracle's schema list with the generator's cached enumeration of that release (name,
domain, since, deprecated, formal parameters, type constraints).
"""
import collections
import gzip
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def keyed(rows):
    return collections.Counter(
        (r["provider"], r["domain"] or "ai.onnx", r["op"], r["since"], r["until"],
         json.dumps({n: sorted(t) for n, t in sorted(r["types"].items())})) for r in rows)


def main():
    ver, oracle_path = sys.argv[1], sys.argv[2]
    with gzip.open(os.path.join(REPO, "tests", "fixtures", "kernel-enum", f"ort-{ver}.json.gz")) as f:
        ours = json.load(f)["kernels"]
    with open(oracle_path) as f:
        theirs = json.load(f)
    others = collections.Counter(r["provider"] for r in theirs
                                 if r["provider"] not in ("CUDAExecutionProvider", "CPUExecutionProvider"))
    theirs = [r for r in theirs if r["provider"] in ("CUDAExecutionProvider", "CPUExecutionProvider")]
    a, b = keyed(ours), keyed(theirs)
    only_ours, only_theirs = a - b, b - a
    print(f"{ver}: ours {sum(a.values())}, oracle {sum(b.values())} (CUDA+CPU); other providers in oracle: "
          f"{dict(others)}; only ours {sum(only_ours.values())}, only oracle {sum(only_theirs.values())}")
    for k in list(only_ours)[:10]:
        print("  only ours:", k[:5])
    for k in list(only_theirs)[:10]:
        print("  only oracle:", k[:5])
    bad = bool(only_ours or only_theirs)
    if "--schemas" in sys.argv:
        bad |= not same_schemas(ver, sys.argv[sys.argv.index("--schemas") + 1])
    return 1 if bad else 0


def same_schemas(ver, oracle_path):
    cache = os.environ.get("KERNEL_TABLES_CACHE", os.path.expanduser("~/.cache/onnx-lint-tables"))
    with open(os.path.join(cache, ver, "enumeration.json")) as f:
        ours = json.load(f)["schemas"]
    with open(oracle_path) as f:
        theirs = json.load(f)

    def key(s):
        params = [[(p["name"], p["type"], p["option"], p["homogeneous"]) for p in s[io]] for io in ("inputs", "outputs")]
        return json.dumps([s["domain"] or "ai.onnx", s["op"], s["since"], s["deprecated"], params,
                           {n: sorted(t) for n, t in sorted(s["types"].items())}])

    a, b = collections.Counter(map(key, ours)), collections.Counter(map(key, theirs))
    print(f"{ver}: schemas ours {sum(a.values())}, oracle {sum(b.values())}, only ours {sum((a - b).values())}, "
          f"only oracle {sum((b - a).values())}")
    return a == b


if __name__ == "__main__":
    sys.exit(main())
