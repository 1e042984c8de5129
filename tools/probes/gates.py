#!/usr/bin/env python3
"""Release-gate probes and ORT's own answers for them (the `probes_gates` fixture set).

  tools/probes/gates.py [--models-only] [VERSIONS...]   (default 1.24.4 1.25.1 1.31.1)

Each probe isolates one behaviour that changed between bundled releases, so that the release
gate in the simulator is pinned by ORT's own answer on both sides of it. Writes the models to
tests/fixtures/probes/gates/ and the oracle's records to
tests/fixtures/oracle/probes_gates-<ort>-<level>.jsonl.gz (levels `disable` and `all`), read by
tests/it/placement.rs. Needs ../shared/oracle (ortstub.py, the stubbed onnxruntime-gpu wheels).

- cast_lossy_to_bool: Cast(float->int32) -> Cast(int32->bool). RemoveDuplicateCastTransformer
  removed the first Cast until 1.25 and keeps it from 1.26 (onnxruntime issue 28089; the CPU
  wheels 1.25.1 and 1.26.0 show the same step, as their saved optimised models do).
- cast_cross_ep: Cast(int32->int64) on CUDA -> Cast(int64->string), which only the CPU has.
  Removed until 1.24, kept from 1.25 (onnxruntime PR 27363: no Cast fusion across providers).
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
OUT = os.path.join(REPO, "tests", "fixtures", "probes", "gates")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "oracle")
KEEP = ("model", "ort", "level", "session", "error", "placement", "all_nodes_on", "memcpy", "copies")


def model(nodes, inputs, outputs):
    g = h.make_graph(nodes, "g", inputs, outputs)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


PROBES = {
    "cast_lossy_to_bool": model(
        [
            h.make_node("Cast", ["x"], ["a"], name="cast_lossy", to=T.INT32),
            h.make_node("Cast", ["a"], ["b"], name="cast_bool", to=T.BOOL),
            h.make_node("Not", ["b"], ["y"], name="not"),
        ],
        [h.make_tensor_value_info("x", T.FLOAT, ["n"])],
        [h.make_tensor_value_info("y", T.BOOL, ["n"])],
    ),
    "cast_cross_ep": model(
        [
            h.make_node("Neg", ["x"], ["xn"], name="neg"),
            h.make_node("Cast", ["xn"], ["a"], name="cast_cuda", to=T.INT64),
            h.make_node("Cast", ["a"], ["b"], name="cast_string", to=T.STRING),
        ],
        [h.make_tensor_value_info("x", T.INT32, ["n"])],
        [h.make_tensor_value_info("b", T.STRING, ["n"])],
    ),
}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    versions = args or ["1.24.4", "1.25.1", "1.31.1"]
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
                r["model"] = f"gates/{name}.onnx"
                r["ort"], r["level"] = v, level
                if r.get("error"):
                    r["error"] = r["error"][:400]
                records.append({k: r.get(k) for k in KEEP})
            dst = os.path.join(FIXTURES, f"probes_gates-{v}-{level}.jsonl.gz")
            with gzip.GzipFile(dst, "wb", mtime=0) as f:
                for r in records:
                    f.write((json.dumps(r, sort_keys=True) + "\n").encode())
            print(f"{len(records)} records -> {dst}")


if __name__ == "__main__":
    main()
