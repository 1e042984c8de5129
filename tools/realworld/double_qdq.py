#!/usr/bin/env python3
"""The DoubleQDQPairsRemover fixture (tests/it/double_qdq.rs): `Q1 -> DQ1 [-> Cast] -> Q2 -> DQ2`
chains whose `Q2` feeds one or several DQs, and what the CPU wheels' level-1 (`basic`) session
graph keeps of them.

  double_qdq.py OUT_DIR --ort-root DIR --releases 1.23.2,1.24.4,1.31.1

`DIR/<release>` is a `pip install --no-deps --target` of the `onnxruntime` CPU wheel. Writes the
models and `truth.json` (per release and model, the sorted node names of the saved session graph).
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
    inits = [nh.from_array(np.array(v, dtype=d), n) for n, v, d in [
        ("s1", 0.1, np.float32), ("s2", 0.2, np.float32), ("s3", 0.3, np.float32), ("s9", 0.7, np.float32),
        ("z1", 3, np.uint8), ("z2", 5, np.uint8), ("z3", 7, np.uint8)]]
    inits += [nh.from_array(np.array([[2]], dtype=np.uint8), "w"), nh.from_array(np.array([[4]], dtype=np.uint8), "w2")]
    nodes = [h.make_node("Relu", ["X"], ["r"], name="relu"),
             h.make_node("QuantizeLinear", ["r", "s1", "z1"], ["q1"], name="q1"),
             h.make_node("DequantizeLinear", ["q1", "s1", "z1"], ["d1"], name="d1")]
    src = "d1"
    if variant == "cast":
        nodes.append(h.make_node("Cast", ["d1"], ["c"], to=T.FLOAT, name="cast"))
        src = "c"
    nodes += [h.make_node("QuantizeLinear", [src, "s2", "z2"], ["q2"], name="q2"),
              h.make_node("DequantizeLinear", ["q2", "s2", "z2"], ["d2"], name="d2"),
              h.make_node("DequantizeLinear", ["w", "s3", "z3"], ["dw"], name="dw"),
              h.make_node("Mul", ["d2", "dw"], ["m1"], name="mul1"),
              h.make_node("QuantizeLinear", ["m1", "s3", "z3"], ["o1"], name="qo1")]
    outputs = [h.make_tensor_value_info("o1", T.UINT8, None)]
    if variant in ("shared", "cast"):
        # d2 read by two QDQ node units: EnsureUniqueDQForNodeUnit gives the second its own DQ.
        nodes += [h.make_node("DequantizeLinear", ["w2", "s3", "z3"], ["dw2"], name="dw2"),
                  h.make_node("Mul", ["d2", "dw2"], ["m2"], name="mul2"),
                  h.make_node("QuantizeLinear", ["m2", "s3", "z3"], ["o2"], name="qo2")]
        outputs.append(h.make_tensor_value_info("o2", T.UINT8, None))
    elif variant == "otherscale":
        # Q2 also read by a DQ with another scale: not a pair.
        nodes.append(h.make_node("DequantizeLinear", ["q2", "s9", "z2"], ["d3"], name="d3"))
        outputs.append(h.make_tensor_value_info("d3", T.FLOAT, None))
    elif variant == "notdq":
        # Q2 also read by a node that is not a DQ.
        nodes.append(h.make_node("Identity", ["q2"], ["i2"], name="id"))
        nodes.append(h.make_node("Cast", ["i2"], ["y2"], to=T.FLOAT, name="cast2"))
        outputs.append(h.make_tensor_value_info("y2", T.FLOAT, None))
    g = h.make_graph(nodes, variant, [h.make_tensor_value_info("X", T.FLOAT, [4, 4])], outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], producer_name="double_qdq.py")
    m.ir_version = 8
    return m


CHILD = r'''
import json, sys, onnx, onnxruntime as ort
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
so.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
print(json.dumps({"ort": ort.__version__, "nodes": sorted(n.name for n in onnx.load(sys.argv[2]).graph.node)}))
'''

VARIANTS = ["single", "shared", "cast", "otherscale", "notdq"]


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
