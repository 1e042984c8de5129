#!/usr/bin/env python3
"""The fixture of tests/it/dead_shape_inputs.rs: a `Shape` that constant folding replaces, and the
nodes above it that only it read. `Shape(Concat(Unsqueeze(Gather(Shape(x))), c))` has a known
output shape (the Concat of a 1-element and a 2-element vector), so ORT folds it; its chain of
producers is then removed bottom-up (`RemoveNodesWithOneOutputBottomUp`), up to a node another
consumer still reads. Three variants: nothing else reads the chain (`plain`), a `Neg` also reads
the Unsqueeze (`unsqueeze_read`), a `Neg` also reads the Gather (`gather_read`).

  dead_shape_inputs.py OUT_DIR --ort-root DIR --releases 1.23.2,1.24.4,1.31.1

`DIR/<release>` is a `pip install --no-deps --target` of the `onnxruntime` CPU wheel. Writes the
models and `truth.json` (per release and model, the sorted node names of the session graph ORT
saved at level `basic`).
"""
import json
import os
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto as T
from onnx import helper as h


def model(variant):
    nodes = [
        h.make_node("Shape", ["x"], ["xs"], name="shape_x"),
        h.make_node("Gather", ["xs", "zero"], ["g"], name="gather", axis=0),
        h.make_node("Unsqueeze", ["g", "axes"], ["u"], name="unsqueeze"),
        h.make_node("Concat", ["u", "c"], ["cat"], name="concat", axis=0),
        h.make_node("Shape", ["cat"], ["s"], name="shape_cat"),
        h.make_node("Add", ["s", "one"], ["y"], name="add"),
    ]
    outputs = [h.make_tensor_value_info("y", T.INT64, [1])]
    if variant == "unsqueeze_read":
        nodes.append(h.make_node("Neg", ["u"], ["un"], name="neg"))
        outputs.append(h.make_tensor_value_info("un", T.INT64, [1]))
    elif variant == "gather_read":
        nodes.append(h.make_node("Neg", ["g"], ["gn"], name="neg"))
        outputs.append(h.make_tensor_value_info("gn", T.INT64, []))
    inits = [h.make_tensor("zero", T.INT64, [], [0]), h.make_tensor("axes", T.INT64, [1], [0]),
             h.make_tensor("c", T.INT64, [2], [5, 6]), h.make_tensor("one", T.INT64, [1], [1])]
    g = h.make_graph(nodes, variant, [h.make_tensor_value_info("x", T.FLOAT, ["n", 4])], outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], producer_name="dead_shape_inputs.py")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


CHILD = r'''
import json, sys, onnx, onnxruntime as ort
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
so.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
print(json.dumps({"ort": ort.__version__, "nodes": sorted(n.name for n in onnx.load(sys.argv[2]).graph.node)}))
'''

VARIANTS = ["plain", "unsqueeze_read", "gather_read"]


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
