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
- padding_mask.op17.onnx: transformers' padding mask as TorchScript exports it (the flattened
  mask indexed by `batch_idx * seq + kv_idx`, flattened with `Reshape(-1)`, viewed back to the
  index's shape): collapse-reshape.
- repeat_kv.op17.onnx: Llama's `repeat_kv` (`batch, kv, slen, hd = x.shape`, expand, reshape), whose
  four `Shape → Gather`s ORT turns into one `Split` at `all`: replace-input-with-constant.
- gpt2_conv1d.op17.onnx: GPT-2's `Conv1D` as TorchScript exports it (`view(-1, k)`, `Gemm`,
  `view(bsz, q_len, n)`), whose second view no constant can give: unflatten-gemm (unsafe).
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


class Torch:
    """Nodes named and numbered as TorchScript exports name them (`/m/.../Op_k`), constants as
    `Constant` nodes."""

    def __init__(self, scope):
        self.scope, self.nodes, self.count = scope, [], {}

    def __call__(self, op, inputs, n_out=1, **attrs):
        k = self.count.get(op, 0)
        self.count[op] = k + 1
        name = f"{self.scope}/{op}" + (f"_{k}" if k else "")
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value):
        return self("Constant", [], value=numpy_helper.from_array(np.array(value, dtype=np.int64)))


def torch_model(t, inputs, outputs):
    graph = helper.make_graph(t.nodes, "main_graph", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             producer_name="pytorch", producer_version="2.15.0", ir_version=8)


def padding_mask():
    t = Torch("/m/model")
    mask = t("Cast", ["attention_mask"], to=TensorProto.BOOL)
    seq = t("Gather", [t("Shape", [mask]), t.const(1)], axis=0)
    bsz = t("Gather", [t("Shape", ["input_ids"]), t.const(0)], axis=0)
    b_idx = t("Range", [t.const(0), t("Cast", [bsz], to=TensorProto.INT64), t.const(1)])
    kv_idx = t("Range", [t.const(0), t("Cast", [seq], to=TensorProto.INT64), t.const(1)])
    b4 = t("Unsqueeze", [t("Unsqueeze", [t("Unsqueeze", [b_idx, t.const([1])]), t.const([2])]), t.const([3])])
    kv4 = t("Unsqueeze", [t("Unsqueeze", [t("Unsqueeze", [kv_idx, t.const([0])]), t.const([1])]), t.const([2])])
    seq_1 = t("Gather", [t("Shape", [mask]), t.const([1])], axis=0)
    flat = t("Flatten", [mask], axis=2)
    index = t("Add", [kv4, t("Mul", [b4, seq_1])])
    picked = t("Gather", [flat, index], axis=0)
    index_shape = t("Shape", [index])
    flat_1 = t("Reshape", [picked, t.const([-1])], allowzero=0)
    view = t("Reshape", [flat_1, t("Concat", [index_shape], axis=0)], allowzero=0)
    t("Cast", [view], to=TensorProto.FLOAT)
    t.nodes[-1].output[0] = "mask"
    return torch_model(
        t,
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", 1, 1, "sequence"])],
    )


def repeat_kv():
    kv, rep, hd = 2, 2, 8
    t = Torch("/m/model/layers.0/self_attn")
    k = t("Transpose", ["key"], perm=[0, 2, 1, 3])
    dims = [t("Gather", [t("Shape", [k]), t.const(i)], axis=0) for i in range(4)]
    u = [t("Unsqueeze", [d, t.const([0])]) for d in dims]
    target = t("Reshape", [t("Concat", [u[0], u[1], t.const([rep]), u[2], u[3]], axis=0), t.const([-1])], allowzero=0)
    ones = t("ConstantOfShape", [t("Shape", [target])], value=numpy_helper.from_array(np.array([1], dtype=np.int64)))
    is_neg = t("Equal", [target, t("Mul", [ones, t.const(-1)])])
    expanded = t("Expand", [t("Unsqueeze", [k, t.const([2])]), t("Where", [is_neg, ones, target])])
    heads = t("Mul", [dims[1], t.const(rep)])
    shape = t("Concat", [t("Unsqueeze", [dims[0], t.const([0])]), t("Unsqueeze", [heads, t.const([0])]),
                         t("Unsqueeze", [dims[2], t.const([0])]), t("Unsqueeze", [dims[3], t.const([0])])], axis=0)
    t("Reshape", [expanded, shape], allowzero=0)
    t.nodes[-1].output[0] = "key_states"
    return torch_model(
        t,
        [helper.make_tensor_value_info("key", TensorProto.FLOAT, ["batch", "sequence", kv, hd])],
        [helper.make_tensor_value_info("key_states", TensorProto.FLOAT, ["batch", kv * rep, "sequence", hd])],
    )


def gpt2_conv1d():
    k, n = 16, 32
    t = Torch("/m/transformer/h.0/mlp/c_fc")
    x = "hidden_states"
    bsz = t("Gather", [t("Shape", [x]), t.const(0)], axis=0)
    q_len = t("Gather", [t("Shape", [x]), t.const(1)], axis=0)
    last = t("Slice", [t("Shape", [x]), t.const([-1]), t.const([9223372036854775807]), t.const([0])])
    flat_shape = t("Concat", [t.const([-1]), t("Unsqueeze", [t("Squeeze", [last, t.const([0])]), t.const([0])])], axis=0)
    flat = t("Reshape", [x, flat_shape], allowzero=0)
    gemm = t("Gemm", [flat, "m.transformer.h.0.mlp.c_fc.weight", "m.transformer.h.0.mlp.c_fc.bias"], alpha=1.0, beta=1.0)
    view = t("Concat", [t("Unsqueeze", [bsz, t.const([0])]), t("Unsqueeze", [q_len, t.const([0])]), t.const([n])], axis=0)
    t("Reshape", [gemm, view], allowzero=0)
    t.nodes[-1].output[0] = "h"
    m = torch_model(
        t,
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "sequence", k])],
        [helper.make_tensor_value_info("h", TensorProto.FLOAT, ["batch", "sequence", n])],
    )
    m.graph.initializer.extend([w("m.transformer.h.0.mlp.c_fc.weight", k, n), w("m.transformer.h.0.mlp.c_fc.bias", n)])
    return m


def main():
    os.makedirs(OUT, exist_ok=True)
    models = {
        "lower_opset.op24.onnx": block(24, 24, "lower_opset"),
        "function_opset.op23.onnx": block(23, 24, "function_opset"),
        "shape_chain.op17.onnx": shape_chain(),
        "padding_mask.op17.onnx": padding_mask(),
        "repeat_kv.op17.onnx": repeat_kv(),
        "gpt2_conv1d.op17.onnx": gpt2_conv1d(),
    }
    for name, m in models.items():
        onnx.checker.check_model(m) if "function_opset" not in name else None
        path = os.path.join(OUT, name)
        with open(path, "wb") as f:
            f.write(m.SerializeToString(deterministic=True))
        print(path)


if __name__ == "__main__":
    main()
