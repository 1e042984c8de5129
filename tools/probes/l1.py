#!/usr/bin/env python3
"""Level-1 probe models and ORT's own answers for them (the `probes_l1` fixture set).

  tools/probes/l1.py [--models-only] [VERSIONS...]   (default 1.23.2 1.24.4 1.31.1)

Writes the models to tests/fixtures/probes/l1/ and the oracle's records to
tests/fixtures/oracle/probes_l1-<ort>-<level>.jsonl.gz (levels `disable` and `all`), read by
tests/it/placement.rs. Needs ../shared/oracle (ortstub.py, the stubbed onnxruntime-gpu wheels)
and onnx + numpy. Every probe ends in a CPU-only `Hardmax`, so that the graph is split between
CUDA and CPU and the oracle names every node: the names of fused and shared nodes are compared.

What the probes pin down (ConstantSharing, CSE, ReshapeFusion, MatMulAddFusion, DivMulFusion,
FuseReluClip, GemmTransposeFusion, GemmSumFusion, PadFusion):
- cs_*: equal constant initializers of up to 8 elements (any rank, float/float16/double/int32/
  int64) are merged, keeping the last registered name; 9 elements, other types, other shapes
  and NaN are not; CSE then merges the nodes reading them.
- cse_tensor_attr_*: ConstantOfShape nodes whose `value` is in `float_data` merge from 1.25.
- rs_*: FuseContiguousReshapes chains (Reshape/Squeeze/Unsqueeze; opset 19/21 from 1.25 on),
  cut after the last static shape, graph outputs, name collisions.
- mm_*: MatMulAddFusion with 2-D, N-D (Reshape pair) and dynamic inputs, bias shapes, types.
- dm_*: DivMulFusion (`Mul(x, Div(1, b))` -> `Div(x, b)`), rc_*: FuseReluClip,
  gt_*: GemmTransposeFusion (also after MatMulAddFusion), gs_*: GemmSumFusion, pf_*: PadFusion.
"""
import gzip
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("ONNX_LINT_SHARED", os.path.join(REPO, "..", "shared"))
OUT = os.path.join(REPO, "tests", "fixtures", "probes", "l1")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "oracle")
KEEP = ("model", "ort", "level", "session", "error", "placement", "all_nodes_on", "memcpy", "copies")

rng = np.random.default_rng(7)
PROBES = {}


def vi(name, shape, t=T.FLOAT):
    return h.make_tensor_value_info(name, t, shape)


def probe(name, nodes, inputs, inits, out, out_type=T.FLOAT, opset=17, ir=8):
    """A probe whose value `out` goes through a CPU-only Hardmax into the graph output `z`."""
    if out_type != T.FLOAT:
        nodes = nodes + [h.make_node("Cast", [out], ["out_f"], name="to_float", to=T.FLOAT)]
        out = "out_f"
    nodes = nodes + [h.make_node("Hardmax", [out], ["z"], name="cpu_hardmax")]
    g = h.make_graph(nodes, name, inputs, [vi("z", None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = ir
    PROBES[name] = m


def f32(name, *shape):
    return nh.from_array(rng.random(shape, dtype=np.float32), name)


def i64(name, v):
    return nh.from_array(np.array(v, np.int64), name)


def const(name, v, dt):
    return nh.from_array(np.array(v, dt), name)


# ---------------------------------------------------------------- ConstantSharing + CSE
def sharing(name, a, b, shape, t=T.FLOAT, op="Add"):
    probe(name, [h.make_node(op, ["x", "ka"], ["a"], name="op_a"), h.make_node(op, ["x", "kb"], ["b"], name="op_b"),
                 h.make_node(op, ["a", "b"], ["y"], name="fin")],
          [vi("x", shape, t)], [a, b], "y", out_type=t)


sharing("cs_scalar", const("ka", 1.5, np.float32), const("kb", 1.5, np.float32), [2, 3])
sharing("cs_scalar_differ", const("ka", 1.5, np.float32), const("kb", 2.5, np.float32), [2, 3])
sharing("cs_rank_differ", const("ka", [1.5], np.float32), const("kb", 1.5, np.float32), [2, 3])
sharing("cs_f16", const("ka", 1.5, np.float16), const("kb", 1.5, np.float16), [2, 3], T.FLOAT16)
sharing("cs_f64", const("ka", [1.5, 2], np.float64), const("kb", [1.5, 2], np.float64), [2, 2], T.DOUBLE)
sharing("cs_i32", const("ka", [3, 4], np.int32), const("kb", [3, 4], np.int32), [2, 2], T.INT32)
sharing("cs_i64_8", const("ka", list(range(8)), np.int64), const("kb", list(range(8)), np.int64), [8], T.INT64)
sharing("cs_i64_9", const("ka", list(range(9)), np.int64), const("kb", list(range(9)), np.int64), [9], T.INT64)
sharing("cs_f32_2x4", const("ka", np.arange(8).reshape(2, 4), np.float32),
        const("kb", np.arange(8).reshape(2, 4), np.float32), [2, 4])
sharing("cs_f32_3x3", const("ka", np.arange(9).reshape(3, 3), np.float32),
        const("kb", np.arange(9).reshape(3, 3), np.float32), [3, 3])
sharing("cs_nan", const("ka", np.nan, np.float32), const("kb", np.nan, np.float32), [2, 3])
sharing("cs_neg_zero", const("ka", -0.0, np.float32), const("kb", 0.0, np.float32), [2, 3], op="Mul")
sharing("cs_u8", const("ka", [1, 2], np.uint8), const("kb", [1, 2], np.uint8), [2], T.UINT8)
probe("cs_five", [h.make_node("Add", ["x", f"k{c}"], [f"o{c}"], name=f"add_{c}") for c in "badce"]
      + [h.make_node("Sum", [f"o{c}" for c in "badce"], ["y"], name="sum")],
      [vi("x", [2, 3])], [const(f"k{c}", 2.5, np.float32) for c in "badce"], "y")
probe("cs_const_node", [h.make_node("Constant", [], ["kc"], name="kconst", value=nh.from_array(np.array(2.0, np.float32))),
                        h.make_node("Add", ["x", "ka"], ["a"], name="op_a"), h.make_node("Add", ["x", "kc"], ["c"], name="op_c"),
                        h.make_node("Add", ["a", "c"], ["y"], name="fin")],
      [vi("x", [2, 3])], [const("ka", 2.0, np.float32)], "y")
# A shared scalar that is also a graph output keeps its own name and is not merged.
g = h.make_graph([h.make_node("Add", ["x", "ka"], ["a"], name="op_a"), h.make_node("Add", ["x", "kb"], ["b"], name="op_b"),
                  h.make_node("Add", ["a", "b"], ["y"], name="fin"), h.make_node("Hardmax", ["y"], ["z"], name="cpu_hardmax")],
                 "cs_graph_output", [vi("x", [2, 3])], [vi("z", None), vi("kb", [])],
                 [const("ka", 1.0, np.float32), const("kb", 1.0, np.float32)])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
m.ir_version = 8
PROBES["cs_graph_output"] = m


def cos_pair(name, raw, opset):
    value = nh.from_array(np.array([0.02], np.float32)) if raw else h.make_tensor("", T.FLOAT, [1], [0.02])
    nodes = [h.make_node("ConstantOfShape", [s], [w], name=f"cos_{w}", value=value) for s, w in (("sa", "Wa"), ("sb", "Wb"))]
    nodes += [h.make_node("Conv", ["x1", "Wa"], ["c1"], name="conv_a", pads=[1, 1, 1, 1]),
              h.make_node("Conv", ["x2", "Wb"], ["c2"], name="conv_b", pads=[1, 1, 1, 1]),
              h.make_node("Add", ["c1", "c2"], ["y"], name="add")]
    probe(name, nodes, [vi("x1", [1, 3, 8, 8]), vi("x2", [1, 3, 8, 8])],
          [i64("sa", [4, 3, 3, 3]), i64("sb", [4, 3, 3, 3])], "y", opset=opset)


cos_pair("cse_tensor_attr_raw", True, 9)
cos_pair("cse_tensor_attr_float_data", False, 9)

# ---------------------------------------------------------------- ReshapeFusion
probe("rs_chain_squeeze", [h.make_node("Unsqueeze", ["x", "ax0"], ["u"], name="uq"), h.make_node("Reshape", ["u", "s1"], ["r"], name="rs"),
                           h.make_node("Unsqueeze", ["r", "ax0"], ["u2"], name="uq2"), h.make_node("Squeeze", ["u2", "ax0"], ["y"], name="sq")],
      [vi("x", [2, 3])], [i64("ax0", [0]), i64("s1", [3, 2])], "y")
probe("rs_chain_dynamic", [h.make_node("Reshape", ["x", "s1"], ["r"], name="rsA"), h.make_node("Unsqueeze", ["r", "ax0"], ["u"], name="uqA"),
                           h.make_node("Reshape", ["u", "s2"], ["y"], name="rsB")],
      [vi("x", ["N", 3])], [i64("ax0", [0]), i64("s1", [-1]), i64("s2", [-1, 3])], "y")
probe("rs_chain_collision", [h.make_node("Reshape", ["x", "s1"], ["r"], name="rsA"), h.make_node("Reshape", ["r", "s2"], ["r2"], name="rsB"),
                             h.make_node("Relu", ["r2"], ["r3"], name="rsA_new_reshape"), h.make_node("Reshape", ["r3", "s1"], ["r4"], name="rsC"),
                             h.make_node("Reshape", ["r4", "s2"], ["y"], name="rsD")],
      [vi("x", [2, 3])], [i64("s1", [6]), i64("s2", [3, 2])], "y")
for op in (17, 19, 21):
    probe(f"rs_chain_op{op}", [h.make_node("Reshape", ["x", "s1"], ["r"], name="rsA"), h.make_node("Reshape", ["r", "s2"], ["y"], name="rsB")],
          [vi("x", [2, 3, 4])], [i64("s1", [6, 4]), i64("s2", [0, -1])], "y", opset=op)
probe("rs_chain_after_fold", [h.make_node("Concat", ["c1", "c2"], ["s"], name="cc", axis=0), h.make_node("Reshape", ["x", "s"], ["r"], name="rsA"),
                              h.make_node("Reshape", ["r", "s2"], ["y"], name="rsB")],
      [vi("x", [2, 3, 4])], [i64("c1", [6]), i64("c2", [4]), i64("s2", [0, -1])], "y")
probe("rs_subgraph_dead_chain",
      [h.make_node("Split", ["x", "sp"], ["q", "k"], name="split", axis=2),
       h.make_node("Shape", ["q"], ["sh2"], name="shape_2"), h.make_node("Shape", ["q"], ["sh3"], name="shape_3"),
       h.make_node("Gather", ["sh2", "g0"], ["d0"], name="gather_0", axis=0), h.make_node("Gather", ["sh3", "g1"], ["d1"], name="gather_1", axis=0),
       h.make_node("Unsqueeze", ["d0", "ax0"], ["u0"], name="unsq_0"), h.make_node("Unsqueeze", ["d1", "ax0"], ["u1"], name="unsq_1"),
       h.make_node("Concat", ["u0", "u1", "c4", "c2"], ["shape"], name="concat", axis=0),
       h.make_node("Reshape", ["q", "shape"], ["r"], name="reshape"), h.make_node("Relu", ["k"], ["rk"], name="relu"),
       h.make_node("Reshape", ["rk", "shape2"], ["rk2"], name="reshape_k"), h.make_node("Add", ["r", "rk2"], ["y"], name="add")],
      [vi("x", ["B", "S", 16])], [i64("sp", [8, 8]), i64("g0", 0), i64("g1", 1), i64("ax0", [0]), i64("c4", [4]), i64("c2", [2]),
                                  i64("shape2", [0, 0, 4, 2])], "y")

# ---------------------------------------------------------------- MatMulAddFusion
def mm(name, x, w, b, bias_first=False, t=T.FLOAT, extra_use=False):
    nodes = [h.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
             h.make_node("Add", ["B", "m"] if bias_first else ["m", "B"], ["y"], name="add")]
    if extra_use:
        nodes.append(h.make_node("Mul", ["m", "y"], ["y2"], name="mul"))
    probe(name, nodes, [vi("x", x, t)], [w, b], "y2" if extra_use else "y", out_type=t)


mm("mm_2d", [4, 8], f32("W", 8, 16), f32("B", 16))
mm("mm_2d_bias_first", [4, 8], f32("W", 8, 16), f32("B", 1, 16), bias_first=True)
mm("mm_2d_dynamic", ["N", 8], f32("W", 8, 16), f32("B", 16))
mm("mm_2d_bias_m1", [4, 8], f32("W", 8, 16), f32("B", 4, 1))
mm("mm_2d_two_uses", [4, 8], f32("W", 8, 16), f32("B", 16), extra_use=True)
mm("mm_1d", [8], f32("W", 8, 16), f32("B", 16))
mm("mm_3d_dynamic", ["N", 4, 8], f32("W", 8, 16), f32("B", 16))
mm("mm_4d_bias_2d", [2, 3, 4, 8], f32("W", 8, 16), f32("B", 1, 16))
mm("mm_3d_f16", [2, 4, 8], nh.from_array(rng.random((8, 16)).astype(np.float16), "W"),
   nh.from_array(rng.random(16).astype(np.float16), "B"), t=T.FLOAT16)
mm("mm_2d_int", [4, 8], i64("W", np.ones((8, 16), np.int64)), i64("B", np.ones(16, np.int64)), t=T.INT64)
probe("mm_3d_chain", [h.make_node("MatMul", ["x", "W"], ["m"], name="mm"), h.make_node("Add", ["m", "B"], ["a"], name="add"),
                      h.make_node("MatMul", ["a", "W2"], ["m2"], name="mm2"), h.make_node("Add", ["m2", "B2"], ["y"], name="add2")],
      [vi("x", [2, 4, 8])], [f32("W", 8, 16), f32("B", 16), f32("W2", 16, 8), f32("B2", 8)], "y")
ln = [h.make_node("LayerNormalization", ["x", "g", "bb"], ["ln"], name="ln", axis=-1)]
for q in "qkv":
    ln += [h.make_node("MatMul", ["ln", "W" + q], ["m" + q], name="mm_" + q), h.make_node("Add", ["m" + q, "B" + q], ["a" + q], name="add_" + q)]
ln += [h.make_node("Add", ["aq", "ak"], ["s1"], name="s1"), h.make_node("Add", ["s1", "av"], ["o"], name="s2"),
       h.make_node("MatMul", ["o", "Wo"], ["mo"], name="mm_o"), h.make_node("Add", ["mo", "Bo"], ["ao"], name="add_o"),
       h.make_node("Add", ["ao", "x"], ["res"], name="resadd"), h.make_node("Add", ["res", "ln"], ["y"], name="lnadd")]
probe("mm_attention_block", ln, [vi("x", [2, 4, 8])],
      [f32("g", 8), f32("bb", 8)] + sum([[f32("W" + q, 8, 8), f32("B" + q, 8)] for q in "qkvo"], []), "y")


# ---------------------------------------------------------------- DivMulFusion, FuseReluClip
rms = [h.make_node("Pow", ["x", "two"], ["p"], name="pow"), h.make_node("ReduceMean", ["p"], ["rm"], name="rmean", axes=[-1]),
       h.make_node("Add", ["rm", "eps"], ["ae"], name="addeps"), h.make_node("Sqrt", ["ae"], ["sq"], name="sqrt"),
       h.make_node("Div", ["one", "sq"], ["rs"], name="div"), h.make_node("Mul", ["x", "rs"], ["n"], name="mul"),
       h.make_node("Add", ["n", "w"], ["y"], name="addw")]  # Add, not Mul: no level-2 SimplifiedLayerNorm
probe("dm_rms_norm", rms, [vi("x", [2, 4, 8])], [const("two", 2.0, np.float32), const("eps", 1e-6, np.float32),
                                                  const("one", 1.0, np.float32), const("w", np.ones(8), np.float32)], "y")
probe("dm_not_one", [h.make_node("Div", ["one", "x"], ["rs"], name="div"), h.make_node("Mul", ["rs", "x"], ["y"], name="mul")],
      [vi("x", [2, 3])], [const("one", 2.0, np.float32)], "y")
probe("dm_one_1d", [h.make_node("Div", ["one", "x"], ["rs"], name="div"), h.make_node("Mul", ["rs", "x"], ["y"], name="mul")],
      [vi("x", [2, 3])], [const("one", [1.0], np.float32)], "y")
probe("dm_two_uses", [h.make_node("Div", ["one", "x"], ["rs"], name="div"), h.make_node("Mul", ["rs", "x"], ["m"], name="mul"),
                      h.make_node("Add", ["m", "rs"], ["y"], name="add")], [vi("x", [2, 3])], [const("one", 1.0, np.float32)], "y")
probe("dm_int64", [h.make_node("Div", ["one", "x"], ["rs"], name="div"), h.make_node("Mul", ["x", "rs"], ["y"], name="mul")],
      [vi("x", [2, 3], T.INT64)], [const("one", 1, np.int64)], "y", out_type=T.INT64)
for nm, lo in (("rc_negative_min", -1.0), ("rc_positive_min", 1.0)):
    probe(nm, [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Clip", ["r", "lo", "hi"], ["y"], name="clip")],
          [vi("x", [2, 3])], [const("lo", lo, np.float32), const("hi", 6.0, np.float32)], "y")
probe("rc_no_min", [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Clip", ["r", "", "hi"], ["y"], name="clip")],
      [vi("x", [2, 3])], [const("hi", 6.0, np.float32)], "y")
probe("rc_clip6", [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Clip", ["r"], ["y"], name="clip", min=-1.0, max=6.0)],
      [vi("x", [2, 3])], [], "y", opset=6)
probe("rc_min_input", [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Clip", ["r", "lo"], ["y"], name="clip")],
      [vi("x", [2, 3]), vi("lo", [])], [], "y")
probe("rc_two_uses", [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Clip", ["r", "lo"], ["c"], name="clip"),
                      h.make_node("Add", ["c", "r"], ["y"], name="add")], [vi("x", [2, 3])], [const("lo", -1.0, np.float32)], "y")


# ---------------------------------------------------------------- GemmTransposeFusion, GemmSumFusion
ax1 = i64("ax1", [1])
probe("gt_input_a", [h.make_node("Transpose", ["x"], ["xt"], name="tr", perm=[1, 0]), h.make_node("Gemm", ["xt", "W", "B"], ["y"], name="gemm")],
      [vi("x", [8, 4])], [f32("W", 8, 16), f32("B", 16)], "y")
probe("gt_output", [h.make_node("Gemm", ["x", "W"], ["g"], name="gemm"), h.make_node("Transpose", ["g"], ["y"], name="tr", perm=[1, 0])],
      [vi("x", [4, 8])], [f32("W", 8, 16)], "y")
probe("gt_after_matmul_add", [h.make_node("Transpose", ["x"], ["xt"], name="tr", perm=[1, 0]), h.make_node("MatMul", ["xt", "W"], ["m"], name="mm"),
                              h.make_node("Add", ["m", "B"], ["y"], name="add")], [vi("x", [8, 4])], [f32("W", 8, 16), f32("B", 16)], "y")
probe("gt_transpose_two_uses", [h.make_node("Transpose", ["x"], ["xt"], name="tr", perm=[1, 0]), h.make_node("Gemm", ["xt", "W", "B"], ["g"], name="gemm"),
                                h.make_node("Relu", ["xt"], ["r"], name="relu"), h.make_node("ReduceSum", ["r", "ax1"], ["rs"], name="rsum"),
                                h.make_node("ReduceSum", ["g", "ax1"], ["gs"], name="gsum"), h.make_node("Add", ["rs", "gs"], ["y"], name="add")],
      [vi("x", [8, 4])], [f32("W", 8, 16), f32("B", 16), ax1], "y")
probe("gt_all_three", [h.make_node("Transpose", ["x"], ["xt"], name="trx", perm=[1, 0]), h.make_node("Transpose", ["w"], ["wt"], name="trw", perm=[1, 0]),
                       h.make_node("Gemm", ["xt", "wt"], ["g"], name="gemm"), h.make_node("Transpose", ["g"], ["y"], name="tro", perm=[1, 0])],
      [vi("x", [8, 4]), vi("w", [16, 8])], [], "y")
for nm, shape in (("gs_2d", [4, 16]), ("gs_1d", [16]), ("gs_3d", [2, 4, 16])):
    probe(nm, [h.make_node("Gemm", ["x", "W"], ["g"], name="gemm"), h.make_node("Sum", ["g", "b"], ["y"], name="sum")],
          [vi("x", [4, 8]), vi("b", shape)], [f32("W", 8, 16)], "y")
probe("gs_with_c", [h.make_node("Gemm", ["x", "W", "B"], ["g"], name="gemm"), h.make_node("Sum", ["g", "b"], ["y"], name="sum")],
      [vi("x", [4, 8]), vi("b", [4, 16])], [f32("W", 8, 16), f32("B", 16)], "y")
probe("gs_three_inputs", [h.make_node("Gemm", ["x", "W"], ["g"], name="gemm"), h.make_node("Sum", ["g", "b", "b"], ["y"], name="sum")],
      [vi("x", [4, 8]), vi("b", [4, 16])], [f32("W", 8, 16)], "y")


# ---------------------------------------------------------------- PadFusion
XC = vi("x", [1, 3, 8, 8])
sp = [0, 0, 1, 1, 0, 0, 1, 1]
probe("pf_conv", [h.make_node("Pad", ["x", "p"], ["xp"], name="pad"), h.make_node("Conv", ["xp", "W"], ["y"], name="conv")],
      [XC], [f32("W", 4, 3, 3, 3), i64("p", sp)], "y")
probe("pf_maxpool", [h.make_node("Pad", ["x", "p"], ["xp"], name="pad"), h.make_node("MaxPool", ["xp"], ["y"], name="mp", kernel_shape=[2, 2])],
      [XC], [i64("p", sp)], "y")
probe("pf_avgpool", [h.make_node("Pad", ["x", "p"], ["xp"], name="pad"), h.make_node("AveragePool", ["xp"], ["y"], name="ap", kernel_shape=[2, 2])],
      [XC], [i64("p", sp)], "y")
probe("pf_channel_pad", [h.make_node("Pad", ["x", "p"], ["xp"], name="pad"), h.make_node("Conv", ["xp", "W"], ["y"], name="conv")],
      [XC], [f32("W", 4, 5, 3, 3), i64("p", [0, 1, 1, 1, 0, 1, 1, 1])], "y")
probe("pf_value_one", [h.make_node("Pad", ["x", "p", "cv"], ["xp"], name="pad"), h.make_node("Conv", ["xp", "W"], ["y"], name="conv")],
      [XC], [f32("W", 4, 3, 3, 3), i64("p", sp), const("cv", 1.0, np.float32)], "y")
probe("pf_reflect", [h.make_node("Pad", ["x", "p"], ["xp"], name="pad", mode="reflect"), h.make_node("Conv", ["xp", "W"], ["y"], name="conv")],
      [XC], [f32("W", 4, 3, 3, 3), i64("p", sp)], "y")
probe("pf_auto_pad", [h.make_node("Pad", ["x", "p"], ["xp"], name="pad"), h.make_node("Conv", ["xp", "W"], ["y"], name="conv", auto_pad="SAME_UPPER")],
      [XC], [f32("W", 4, 3, 3, 3), i64("p", sp)], "y")
probe("pf_opset2", [h.make_node("Pad", ["x"], ["xp"], name="pad", pads=sp), h.make_node("Conv", ["xp", "W"], ["y"], name="conv")],
      [XC], [f32("W", 4, 3, 3, 3)], "y", opset=9)


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
                r["model"] = f"l1/{name}.onnx"
                r["ort"], r["level"] = v, level
                if r.get("error"):
                    r["error"] = r["error"][:400]
                records.append({k: r.get(k) for k in KEEP})
            dst = os.path.join(FIXTURES, f"probes_l1-{v}-{level}.jsonl.gz")
            with gzip.GzipFile(dst, "wb", mtime=0) as f:
                for r in records:
                    f.write((json.dumps(r, sort_keys=True) + "\n").encode())
            print(f"{len(records)} records -> {dst}")


if __name__ == "__main__":
    main()
