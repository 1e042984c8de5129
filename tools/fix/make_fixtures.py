#!/usr/bin/env python3
"""Writes the `--fix` fixture models into tests/fixtures/fix/ (one per fix kind), the way exporters
write these graphs. Deterministic: re-running it gives the same bytes (seeded weights).

    /work/venv/bin/python tools/fix/make_fixtures.py    # needs onnx and numpy

- lower_opset.op24.onnx: a decoder-style block stamped ai.onnx 24 (Reshape-24, Transpose-24,
  Cast-24, Shape-24 have no CUDA kernel in ORT 1.24.4), with a model-local function at 24:
  `--fix` lowers both to 23 (set-opset-import).
- function_opset.op23.onnx: a model at 23 whose local function (no schema, so ORT inlines it)
  still imports 24, as mobius' opset-23 exports do: set-function-opset-import.
- shape_chain.op17.onnx: the TorchScript `bsz, q_len, _ = hidden.size()` chain feeding a Reshape
  after a projection: replace-input-with-constant.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "fix")
rng = np.random.default_rng(7)


def w(name, *shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.1, name)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def scale_function(opset):
    # y = Cast(Reshape(x, shape) * x_scale) : a body with ops that changed at 24.
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Mul", ["r", "r"], ["m"]),
        helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT),
    ]
    return helper.make_function(
        "local", "ReshapeSquare", ["x", "shape"], ["y"], nodes,
        [helper.make_opsetid("", opset)],
    )


def block(model_opset, function_opset, name):
    hidden = 32
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"], name="q_proj/MatMul"),
        helper.make_node("Reshape", ["q", "heads_shape"], ["q4"], name="attn/Reshape"),
        helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3], name="attn/Transpose"),
        helper.make_node("Transpose", ["qt"], ["q4b"], perm=[0, 2, 1, 3], name="attn/Transpose_back"),
        helper.make_node("Reshape", ["q4b", "flat_shape"], ["q3"], name="attn/Reshape_back"),
        helper.make_node("ReshapeSquare", ["q3", "flat_shape"], ["sq"], domain="local", name="fn/ReshapeSquare"),
        helper.make_node("Cast", ["sq"], ["y"], to=TensorProto.FLOAT, name="out/Cast"),
    ]
    graph = helper.make_graph(
        nodes, "main",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", hidden])],
        [w("wq", hidden, hidden), i64("heads_shape", [0, 0, 4, 8]), i64("flat_shape", [0, 0, hidden])],
    )
    graph.doc_string = "fixture for cargo onnx-lint --fix"
    m = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", model_opset), helper.make_opsetid("local", 1)],
        functions=[scale_function(function_opset)],
        producer_name="make_fixtures.py",
        ir_version=10,
    )
    m.metadata_props.append(onnx.StringStringEntryProto(key="fixture", value=name))
    return m


def shape_chain():
    hidden, heads = 32, 4
    nodes = [
        helper.make_node("Shape", ["x"], ["x_shape"], name="/Shape"),
        helper.make_node("Gather", ["x_shape", "zero"], ["bsz"], axis=0, name="/Gather"),
        helper.make_node("Gather", ["x_shape", "one"], ["q_len"], axis=0, name="/Gather_1"),
        helper.make_node("MatMul", ["x", "wq"], ["q"], name="/q_proj/MatMul"),
        helper.make_node("Unsqueeze", ["bsz", "axes0"], ["bsz_1"], name="/Unsqueeze"),
        helper.make_node("Unsqueeze", ["q_len", "axes0"], ["q_len_1"], name="/Unsqueeze_1"),
        helper.make_node("Concat", ["bsz_1", "q_len_1", "heads", "head_dim"], ["view_shape"], axis=0, name="/Concat"),
        helper.make_node("Reshape", ["q", "view_shape"], ["q4"], name="/Reshape"),
        helper.make_node("Transpose", ["q4"], ["y"], perm=[0, 2, 1, 3], name="/Transpose"),
    ]
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", heads, "seq", hidden // heads])],
        [
            w("wq", hidden, hidden),
            numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
            numpy_helper.from_array(np.array(1, dtype=np.int64), "one"),
            i64("axes0", [0]),
            i64("heads", [heads]),
            i64("head_dim", [hidden // heads]),
        ],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="pytorch", producer_version="2.5.0", ir_version=8)
    return m


def main():
    os.makedirs(OUT, exist_ok=True)
    models = {
        "lower_opset.op24.onnx": block(24, 24, "lower_opset"),
        "function_opset.op23.onnx": block(23, 24, "function_opset"),
        "shape_chain.op17.onnx": shape_chain(),
    }
    for name, m in models.items():
        onnx.checker.check_model(m) if "function_opset" not in name else None
        path = os.path.join(OUT, name)
        with open(path, "wb") as f:
            f.write(m.SerializeToString(deterministic=True))
        print(path)


if __name__ == "__main__":
    main()
