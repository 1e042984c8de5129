#!/usr/bin/env python3
"""A node name repeated in both branches of an `If`, placed on a different provider in each, and
ORT's own answers for it (the `probes_if` fixture set).

  tools/probes/if_names.py [--models-only] [VERSIONS...]   (default 1.23.2 1.24.4 1.31.1)

ORT logs the placements of a whole session as one list per provider
(`VerifyEachNodeIsAssignedToAnEpImpl`, `framework/session_state.cc`, fills one `NodePlacementMap`
while it walks the main graph and, from each node, that node's subgraphs); the oracle reads
the lists into one map, so a repeated name keeps the provider of the list printed last. The
lists come out of a libstdc++ `unordered_map`: the provider whose first node comes later in
the walk is printed first. Two probes, so that each order is seen once:

- cuda_first: the main graph's first node (`first`, ReduceMax) is on CUDA, so the CPU list is
  printed first and the repeated name `shared` (ReduceSum on CUDA in then_branch, Det on the
  CPU in else_branch: CUDA has no Det kernel) reads as CUDA;
- cpu_first: the main graph's first node (`first`, Det) is on the CPU, so the CUDA list is
  printed first and `shared` reads as CPU.

Writes the models to tests/fixtures/probes/if/ and the oracle's records to
tests/fixtures/oracle/probes_if-<ort>-<level>.jsonl.gz (levels `disable` and `all`), read by
tests/it/placement.rs. Needs ../shared/oracle (ortstub.py, the stubbed onnxruntime-gpu wheels).
"""
import gzip
import json
import os
import sys

import onnx
from onnx import TensorProto as T
from onnx import helper as h

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("ONNX_LINT_SHARED", os.path.join(REPO, "..", "shared"))
OUT = os.path.join(REPO, "tests", "fixtures", "probes", "if")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "oracle")
KEEP = ("model", "ort", "level", "session", "error", "placement", "all_nodes_on", "memcpy", "copies")


def branch(name, node):
    return h.make_graph([node], name, [], [h.make_tensor_value_info(name + "_out", T.FLOAT, ["n"])])


def probe(first_op):
    axes = h.make_tensor("axes", T.INT64, [2], [1, 2])
    then_g = branch("then", h.make_node("ReduceSum", ["m", "axes"], ["then_out"], name="shared", keepdims=0))
    else_g = branch("else", h.make_node("Det", ["m"], ["else_out"], name="shared"))
    if first_op == "Det":
        first = h.make_node("Det", ["m"], ["f"], name="first")
    else:
        first = h.make_node("ReduceMax", ["m", "axes"], ["f"], name="first", keepdims=0)
    nodes = [
        first,
        h.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g),
    ]
    g = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("m", T.FLOAT, ["n", 2, 2]), h.make_tensor_value_info("c", T.BOOL, [])],
        [h.make_tensor_value_info("f", T.FLOAT, ["n"]), h.make_tensor_value_info("y", T.FLOAT, ["n"])],
        initializer=[axes],
    )
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)], ir_version=8)
    onnx.checker.check_model(m, full_check=True)
    return m


PROBES = {"cuda_first": probe("ReduceMax"), "cpu_first": probe("Det")}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    versions = args or ["1.23.2", "1.24.4", "1.31.1"]
    os.makedirs(OUT, exist_ok=True)
    for name, m in sorted(PROBES.items()):
        onnx.save(m, os.path.join(OUT, name + ".onnx"))
    print(f"{len(PROBES)} probes -> {OUT}")
    if "--models-only" in sys.argv:
        return
    sys.path.insert(0, os.path.join(SHARED, "oracle"))
    import ortstub

    for v in versions:
        ortstub.prepare(v)
        for level in ("disable", "all"):
            records = []
            for name in sorted(PROBES):
                r = ortstub.place(v, os.path.join(OUT, name + ".onnx"), level, keep_opt=False)
                r["model"] = f"if/{name}.onnx"
                r["ort"], r["level"] = v, level
                if r.get("error"):
                    r["error"] = r["error"][:400]
                records.append({k: r.get(k) for k in KEEP})
            dst = os.path.join(FIXTURES, f"probes_if-{v}-{level}.jsonl.gz")
            with gzip.GzipFile(dst, "wb", mtime=0) as f:
                for r in records:
                    f.write((json.dumps(r, sort_keys=True) + "\n").encode())
            print(f"{len(records)} records -> {dst}")


if __name__ == "__main__":
    main()
