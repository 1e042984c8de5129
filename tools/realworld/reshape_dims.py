#!/usr/bin/env python3
"""The ReshapeFusion symbolic-dims fixture (tests/it/reshape_dims.rs): `Reshape(r, Concat(
Unsqueeze(Gather(Shape(a), 0)), Unsqueeze(Gather(Shape(a), 1)), [2], [8]))` where the Shape reads
another value `a` than the Reshape's `r`, and what the CPU wheels' level-1 (`basic`) session graph
keeps of the shape chain.

  reshape_dims.py OUT_DIR --ort-root DIR --releases 1.23.2,1.24.4,1.25.1,1.28.0,1.31.1

`DIR/<release>` is a `pip install --no-deps --target` of the `onnxruntime` CPU wheel. Writes the
models and `truth.json` (per release and model, the sorted node names of the saved session graph).

ORT's shape inference keeps a `value_info`'s declared `dim_param` over the one it infers, and gives
a broadcast of two different symbols an unknown dim; a Concat part whose Shape does not match the
Reshape's input dim counts as a one-element part (-1), and two -1s stop the fusion. Variants:
- `both_lost`: `r = Add(x, a)` with `a` declared `[ua, ub, 16]` against `x`'s `[batch, seq, 16]`:
  both dims of `r` are unknown, both parts unmatched.
- `one_lost`: `a` declared `[ua, seq, 16]`: `r`'s dim 1 is `seq`, dim 0 unknown: one -1.
- `both_kept`: `a` declared `[batch, seq, 16]`: every dim matches.
- `dq_declared`: the quantized form: the Reshape reads `q = QuantizeLinear(a)` (`a` declared
  `[batch, seq, 16]`) and the Shape reads `DequantizeLinear(q)`, declared `[ua, ub, 16]` (as in
  QOperator models, where a Shape reads the DQ of the tensor a Reshape reads).
- `dq_inferred`: the same with the DQ output undeclared: it takes `q`'s dims.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def model(variant):
    inits = [nh.from_array(np.array(v, dtype=np.int64), n) for n, v in [
        ("i0", 0), ("i1", 1), ("ax", [0]), ("c2", [2]), ("c8", [8])]]
    inits += [nh.from_array(np.array(0.1, dtype=np.float32), "s"),
              nh.from_array(np.array(128, dtype=np.uint8), "z")]
    declared = {"both_lost": ["ua", "ub", 16], "one_lost": ["ua", "seq", 16],
                "both_kept": ["batch", "seq", 16]}.get(variant, ["batch", "seq", 16])
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu")]
    if not variant.startswith("dq"):
        nodes.append(h.make_node("Add", ["x", "a"], ["r"], name="add"))
    value_info = [h.make_tensor_value_info("a", T.FLOAT, declared)]
    shape_of, data = "a", "r"
    if variant.startswith("dq"):
        nodes += [h.make_node("QuantizeLinear", ["a", "s", "z"], ["rq"], name="q"),
                  h.make_node("DequantizeLinear", ["rq", "s", "z"], ["rd"], name="dq"),
                  h.make_node("Sigmoid", ["rd"], ["rs"], name="sig")]
        shape_of, data = "rd", "rq"
        if variant == "dq_declared":
            value_info.append(h.make_tensor_value_info("rd", T.FLOAT, ["ua", "ub", 16]))
    nodes += [h.make_node("Shape", [shape_of], ["sh0"], name="shape0"),
              h.make_node("Shape", [shape_of], ["sh1"], name="shape1"),
              h.make_node("Gather", ["sh0", "i0"], ["g0"], axis=0, name="gather0"),
              h.make_node("Gather", ["sh1", "i1"], ["g1"], axis=0, name="gather1"),
              h.make_node("Unsqueeze", ["g0", "ax"], ["u0"], name="unsqueeze0"),
              h.make_node("Unsqueeze", ["g1", "ax"], ["u1"], name="unsqueeze1"),
              h.make_node("Concat", ["u0", "u1", "c2", "c8"], ["shape"], axis=0, name="concat"),
              h.make_node("Reshape", [data, "shape"], ["y"], name="reshape")]
    outputs = [h.make_tensor_value_info("y", T.UINT8 if variant.startswith("dq") else T.FLOAT, None)]
    if variant.startswith("dq"):
        outputs.append(h.make_tensor_value_info("rs", T.FLOAT, None))
    g = h.make_graph(nodes, variant, [h.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", 16])],
                     outputs, inits, value_info=value_info)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8

    return m


CHILD = r'''
import json, sys, onnx, onnxruntime as ort
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
so.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
print(json.dumps({"ort": ort.__version__, "nodes": sorted(n.name for n in onnx.load(sys.argv[2]).graph.node)}))
'''

VARIANTS = ["both_lost", "one_lost", "both_kept", "dq_declared", "dq_inferred"]


def main():
    out = sys.argv[1]
    args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    os.makedirs(out, exist_ok=True)
    site = os.path.dirname(os.path.dirname(onnx.__file__))
    records = []
    for v in VARIANTS:
        path = os.path.join(out, f"{v}.onnx")
        onnx.save(model(v), path)
        for r in args["--releases"].split(","):
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(args["--ort-root"], r), site]))
            with tempfile.TemporaryDirectory() as d:
                res = subprocess.run([sys.executable, "-c", CHILD, path, os.path.join(d, "o.onnx")],
                                     env=env, check=True, capture_output=True, text=True).stdout
            rec = json.loads(res.strip().splitlines()[-1])
            rec["model"] = f"{v}.onnx"
            records.append(rec)
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
