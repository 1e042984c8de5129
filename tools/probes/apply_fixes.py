#!/usr/bin/env python3
"""Checks OL301's proven constants: applies every `replace-input-with-constant` and
`collapse-reshape` fix the linter emits, and the `unflatten-gemm` rewrites (by hand, with onnx) and compares CPU onnxruntime outputs of the original and the fixed
model, bit for bit, at several dim values.

  python3 tools/probes/apply_fixes.py [--lint BIN] [--ort 1.31.1] [--opt-level all] MODEL.onnx...

Prints one line per model: OL301 findings, how many carry a fix, how many provably have no
constant (cause `shape chain: no constant exists`), outputs identical or not; with --unproven,
every finding without a fix (node and why).
Exits 1 when any output differs or a fixed model fails where the original runs.
"""
import argparse
import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ort.set_default_logger_severity(3)


def findings(bin_, model, release, level):
    # Every OL301 finding, the zero-cost group included.
    out = subprocess.run(
        [bin_, "onnx-lint", "--format", "json", "--ort", release, "--opt-level", level,
         "--warn", "zero-cost", model],
        capture_output=True, text=True, check=False).stdout
    d = json.loads(out)
    if isinstance(d, list):
        d = d[0]
    if "findings" not in d:
        sys.exit(f"{model}: the linter gave no findings: {d.get('error')}")
    return [f for f in d["findings"] if f["code"] == "OL301"]


def graphs(g):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from graphs(a.g)
            for sub in a.graphs:
                yield from graphs(sub)


def unflatten_gemm(g, fx):
    """Reshape → Gemm → Reshape becomes MatMul + Add on the unflattened input."""
    by = {n.name: n for n in g.node}
    fl, gm, un = by[fx["flatten"]], by[fx["gemm"]], by[fx["unflatten"]]
    mm = onnx.helper.make_node("MatMul", [fl.input[0], gm.input[1]], [gm.output[0] + "_3d"], name=gm.name)
    new = [mm]
    if len(gm.input) > 2 and gm.input[2]:
        new.append(onnx.helper.make_node("Add", [mm.output[0], gm.input[2]], [un.output[0]], name=gm.name + "/bias"))
    else:
        mm.output[0] = un.output[0]
    nodes = []
    for n in g.node:
        if n.name in (fl.name, un.name):
            continue
        nodes.extend(new if n.name == gm.name else [n])
    del g.node[:]
    g.node.extend(nodes)


def apply(model, fixes):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for k, fx in enumerate(fixes):
        if fx["kind"] == "unflatten-gemm":
            for g in graphs(m.graph):
                if g.name == fx["graph"]:
                    unflatten_gemm(g, fx)
            continue
        for g in graphs(m.graph):
            if g.name != fx["graph"]:
                continue
            for n in g.node:
                if n.name == fx["node"]:
                    name = f"onnx_lint_fix_{k}"
                    g.initializer.append(numpy_helper.from_array(np.array(fx["values"], dtype=np.int64), name))
                    if fx["kind"] == "collapse-reshape":
                        # Read the value before the views, with the shape proven against it.
                        n.input[0] = fx["data"]
                        n.input[1] = name
                    else:
                        n.input[fx["input"]] = name
    return m


def feeds(model, dims, rng):
    out = {}
    for i in model.graph.input:
        if i.name in {t.name for t in model.graph.initializer}:
            continue
        tt = i.type.tensor_type
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
            else:
                # Distinct values for distinct names, so that a dim mixed up with another shows.
                shape.append(dims.setdefault(d.dim_param or i.name, 2 + len(dims)))
        dt = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dt, np.integer):
            if "mask" in i.name:
                v = np.ones(shape, dtype=dt)
            else:
                v = rng.integers(0, 8, size=shape).astype(dt)
        elif dt == np.bool_:
            v = np.ones(shape, dtype=dt)
        else:
            v = rng.standard_normal(shape).astype(dt)
        out[i.name] = v
    return out


def run(model, feed):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lint", default="target/debug/cargo-onnx-lint")
    ap.add_argument("--ort", default="1.31.1")
    ap.add_argument("--opt-level", default="all")
    ap.add_argument("--unproven", action="store_true", help="list every finding without a fix")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    bad = 0
    total = proven = impossible = rewrites = 0
    for path in a.models:
        fs = findings(a.lint, path, a.ort, a.opt_level)
        fixes = [f["fix"] for f in fs if f.get("fix")]
        # Structural rewrites (no constant exists) are applied too but not counted as proven.
        structural = [fx for fx in fixes if fx["kind"] == "unflatten-gemm"]
        none = [f for f in fs if f["cause"] == "shape chain: no constant exists"]
        total += len(fs)
        proven += len(fixes) - len(structural)
        impossible += len(none)
        rewrites += len(structural)
        if a.unproven:
            for f in fs:
                if not f.get("fix") or f in none:
                    proof = [e for e in f["evidence"] if e.startswith("proof:")]
                    why = proof[0] if f in none and proof else f["help"]
                    print(f"  unproven {path.split('/')[-1]} {f['node']}: {f['cause']}: {why}")
        model = onnx.load(path)
        fixed = apply(model, fixes)
        rng = np.random.default_rng(0)
        same = True
        note = ""
        for dims in ({}, {"batch": 2, "seq": 5, "sequence": 5, "sequence_length": 5, "batch_size": 2},
                     {"batch": 3, "seq": 7, "sequence": 7, "sequence_length": 7, "batch_size": 3},
                     {"batch": 1, "seq": 1, "sequence": 1, "sequence_length": 1, "batch_size": 1}):
            feed = feeds(model, dims, rng)
            try:
                want = run(model, feed)
            except Exception as e:  # the original itself does not run at these dims
                note = f" (original fails at {dims}: {str(e)[:60]})"
                continue
            try:
                got = run(fixed, feed)
            except Exception as e:
                same = False
                note = f" (fixed model fails at {dims}: {str(e)[:200]})"
                break
            for x, y in zip(want, got):
                if x.shape != y.shape or x.tobytes() != y.tobytes():
                    same = False
                    note = f" (output differs at {dims})"
        if not same:
            bad += 1
        print(f"{path}: OL301 {len(fs)}, proven {len(fixes) - len(structural)}, "
              f"no constant exists {len(none)} ({len(structural)} with an unflatten-gemm fix), "
              f"outputs {'bit-identical' if same else 'DIFFER'}{note}")
    pct = 100 * proven / total if total else 0
    print(f"total: {proven}/{total} ({pct:.0f}%) OL301 findings carry a proven constant; "
          f"{impossible} provably have none ({rewrites} of them with an unflatten-gemm fix); "
          f"{total - proven - impossible} unproven")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
