#!/usr/bin/env python3
"""Probe models for ORT's NhwcTransformer and the transpose optimizer's run after it
(tests/it/nhwc_transformer.rs), and what the CPU `onnxruntime` wheels make of them at level `all`:

- `qdq_chain.onnx`: three chained QDQ convolutions (DQ -> Conv -> Q, fused into QLinearConv at
  level 2) and a QDQ GlobalAveragePool (QLinearGlobalAveragePool). Wrapping each QLinearConv in
  Transposes (`WrapTransposesAroundNode`), `TransposeInput` cancels against the output Transpose of
  the convolution before, so a chained convolution draws three `_token_<k>` names, not four
  (`<name>_token_<k>` of the channels-last copies); the transpose optimizer then pushes the last
  Transpose through the pool (`HandleQLinearPoolOp`: `channels_last` flipped), whose new Transpose
  after it is named by the counter at that point.

- `qdq_resize.onnx`: a QDQ convolution, then a `Resize` (nearest, constant `scales`) between a DQ
  and a Q, which the QDQ selectors turn into a uint8 Resize: the transpose optimizer's cost check
  keeps the convolution's output Transpose before it (`OrtEPCostCheck` pushes only a linear
  8-bit Resize; the float Resize of unseen3/qdqkeep.tv.deeplabv3 is pushed through,
  `EPAwareHandleResize`). Measured and not simulated: a linear one is pushed in 1.23.2/1.24.4,
  and from 1.28 (1.25.1 not) the QDQ selectors keep a linear Resize float.

  nhwc_probes.py all OUT_DIR --ort-root DIR --releases 1.23.2,1.24.4,1.31.1
"""
import os
import sys


def models(out):
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(16)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(nh.from_array(arr, name))
        return name

    def q(x, y, scale, name):
        s = const(f"{name}_s", np.array(scale, np.float32))
        z = const(f"{name}_z", np.array(128, np.uint8))
        nodes.append(h.make_node("QuantizeLinear", [x, s, z], [y], name=name))
        return s, z

    def dq(x, s, z, y, name):
        nodes.append(h.make_node("DequantizeLinear", [x, s, z], [y], name=name))

    s, z = q("X", "xq", 0.05, "q_in")
    dq("xq", s, z, "xf", "dq_in")
    cur = "xf"
    for k in range(3):
        w = const(f"w{k}", rng.integers(-64, 64, (16, 16, 3, 3), dtype=np.int8))
        ws = const(f"w{k}_s", np.array(0.01, np.float32))
        wz = const(f"w{k}_z", np.array(0, np.int8))
        dq(w, ws, wz, f"w{k}f", f"dq_w{k}")
        b = const(f"b{k}", rng.integers(-100, 100, (16,), dtype=np.int32))
        bs = const(f"b{k}_s", np.array(0.05 * 0.01 if k == 0 else 0.1 * 0.01, np.float32))
        bz = const(f"b{k}_z", np.array(0, np.int32))
        dq(b, bs, bz, f"b{k}f", f"dq_b{k}")
        nodes.append(h.make_node("Conv", [cur, f"w{k}f", f"b{k}f"], [f"c{k}"], pads=[1, 1, 1, 1],
                                 name=f"conv{k}"))
        s, z = q(f"c{k}", f"c{k}q", 0.1, f"q_c{k}")
        dq(f"c{k}q", s, z, f"c{k}f", f"dq_c{k}")
        cur = f"c{k}f"
    nodes.append(h.make_node("GlobalAveragePool", [cur], ["p"], name="gap"))
    s, z = q("p", "pq", 0.1, "q_p")
    dq("pq", s, z, "Y", "dq_p")
    g = h.make_graph(nodes, "qdq_chain", [h.make_tensor_value_info("X", T.FLOAT, [1, 16, 8, 8])],
                     [h.make_tensor_value_info("Y", T.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="nhwc_probes.py")
    m.ir_version = 8
    onnx.save(m, os.path.join(out, "qdq_chain.onnx"))

    inits, nodes = [], []
    s, z = q("X", "xq", 0.05, "q_in")
    dq("xq", s, z, "xf", "dq_in")
    w = const("w", rng.integers(-64, 64, (16, 16, 1, 1), dtype=np.int8))
    ws = const("w_s", np.array(0.01, np.float32))
    wz = const("w_z", np.array(0, np.int8))
    dq(w, ws, wz, "wf", "dq_w")
    nodes.append(h.make_node("Conv", ["xf", "wf"], ["c"], name="conv"))
    s, z = q("c", "cq", 0.1, "q_c")
    dq("cq", s, z, "cf", "dq_c")
    scales = const("scales", np.array([1, 1, 2, 2], np.float32))
    nodes.append(h.make_node("Resize", ["cf", "", scales], ["r"], mode="nearest", name="resize"))
    s, z = q("r", "rq", 0.1, "q_r")
    dq("rq", s, z, "Y", "dq_r")
    g = h.make_graph(nodes, "qdq_resize", [h.make_tensor_value_info("X", T.FLOAT, [1, 16, 8, 8])],
                     [h.make_tensor_value_info("Y", T.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="nhwc_probes.py")
    m.ir_version = 8
    onnx.save(m, os.path.join(out, "qdq_resize.onnx"))


# The CPU-wheel recording (ORT's saved optimised graph, node names and ops) is nchwc_probes.py's.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nchwc_probes  # noqa: E402


if __name__ == "__main__":
    nchwc_probes.main(models)
