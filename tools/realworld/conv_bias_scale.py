#!/usr/bin/env python3
"""The QDQ Conv bias-scale fixture (tests/it/conv_bias_scale.rs): `DQ(x) -> Conv(DQ(w), DQ(b)) -> Q`
groups whose int32 bias is dequantized with a scale that is, or is not, `x_scale * w_scale`, and
what the CPU wheels' level-2 (`extended`) session graph keeps of them (a `QLinearConv`, or the
Conv with its Q/DQ nodes).

  conv_bias_scale.py OUT_DIR --ort-root DIR --releases 1.24.4,1.26.0,1.27.0,1.31.1

`DIR/<release>` is a `pip install --no-deps --target` of the `onnxruntime` CPU wheel. Writes the
models and `truth.json` (per release and model, the sorted node names of the saved session graph).

Variants (uint8 activations, int8 weights; `e` is `x_scale * w_scale`, per output channel):
- `match_pc`: per-channel weight scales, bias scale `e` per channel.
- `match_pt`: per-tensor weight scale, scalar bias scale `e`.
- `pc_bscalar_same`: per-channel weight scales all equal, scalar bias scale `e`.
- `pc_bscalar_differ`: per-channel weight scales that differ, scalar bias scale `e[0]`.
- `pt_bpc`: per-tensor weight scale, per-channel bias scale (`M` copies of `e`).
- `up_0p5`, `down_2`: per-channel, bias scale `e * 1.005` and `e * 0.98`.
- `big_r1p0099`, `big_r1p01005`, `big_r0p99005`, `big_r0p98995`: input scale 2, weight scales 1..4
  (so that the absolute tolerance does not matter), bias scale `e * r`: 1% of `e` accepts the first
  and third; 1% of the larger scale would accept the second too, 1% of the bias scale not the third.
- `tiny_r1p5`, `tiny_plus_0p9u`, `tiny_plus_1p1u`: input scale 1e-4, weight scales 1e-4..4e-4 (`e`
  about 1e-8), bias scale `e * 1.5`, `e + 0.9e-6`, `e + 1.1e-6` (an absolute tolerance of 1e-6).
- `one_off_2`: per-channel, one channel's bias scale 2% above `e`.
- `x_scale_1d`: per-channel, the input scale a one-element 1-D tensor.
- `b_scale_input`: per-channel, the bias scale a graph input (not a constant initializer).
- `shared_identity`: two Convs in a row whose second reads the first's bias DQ through an
  Identity (as `quantize_static` writes equal biases): one bias scale, two input scales.
- `shared_dq`: the same with the second Conv reading the first's bias DQ directly.
- `shared_init`: two Convs with one int32 bias initializer, each its own bias DQ and right scale.
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

C, M = 3, 4


def f32(v):
    return np.array(v, dtype=np.float32)


def conv_unit(k, x_dq, x_scale, w_scale, b_scale, bias_name, y_scale, inits, nodes, bias_dq=True):
    """A Conv `conv{k}` reading `x_dq`, its weight and bias DQs; returns its Q output."""
    w = np.arange(M * C * 9, dtype=np.int64).reshape(M, C, 3, 3) % 7 - 3
    inits += [nh.from_array(w.astype(np.int8), f"w{k}"), nh.from_array(w_scale, f"ws{k}"),
              nh.from_array(np.zeros(w_scale.shape, dtype=np.int8), f"wz{k}"),
              nh.from_array(f32(y_scale), f"ys{k}"), nh.from_array(np.array(128, dtype=np.uint8), f"yz{k}")]
    nodes.append(h.make_node("DequantizeLinear", [f"w{k}", f"ws{k}", f"wz{k}"], [f"wd{k}"], axis=0,
                             name=f"dq_w{k}"))
    b_in = bias_name
    if bias_dq:
        if b_scale is not None:
            inits.append(nh.from_array(b_scale, f"bs{k}"))
        inits.append(nh.from_array(np.zeros(np.shape(b_scale) if b_scale is not None else (M,), dtype=np.int32),
                                   f"bz{k}"))
        nodes.append(h.make_node("DequantizeLinear", [bias_name, f"bs{k}", f"bz{k}"], [f"bd{k}"], axis=0,
                                 name=f"dq_b{k}"))
        b_in = f"bd{k}"
    nodes += [h.make_node("Conv", [x_dq, f"wd{k}", b_in], [f"c{k}"], pads=[1, 1, 1, 1], name=f"conv{k}"),
              h.make_node("QuantizeLinear", [f"c{k}", f"ys{k}", f"yz{k}"], [f"q{k}"], name=f"q{k}")]
    return f"q{k}"


def model(variant):
    xs = f32(0.02)
    wpc = f32([0.01, 0.02, 0.03, 0.04])
    if variant.startswith("big_"):
        xs, wpc = f32(2.0), f32([1.0, 2.0, 3.0, 4.0])
    elif variant.startswith("tiny_"):
        xs, wpc = f32(1e-4), f32([1e-4, 2e-4, 3e-4, 4e-4])
    wpt = f32(0.015)
    inits = [nh.from_array(np.array([5, -3, 0, 7], dtype=np.int32), "b"),
             nh.from_array(f32([0.02]) if variant == "x_scale_1d" else xs, "xs"),
             nh.from_array(np.array([128], dtype=np.uint8) if variant == "x_scale_1d"
                           else np.array(128, dtype=np.uint8), "xz")]
    inputs = [h.make_tensor_value_info("x", T.FLOAT, [1, C, 8, 8])]
    nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="q_x"),
             h.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dq_x")]
    factor = {"up_0p5": 1.005, "down_2": 0.98,
              "big_r1p0099": 1.0099, "big_r1p01005": 1.01005, "big_r0p99005": 0.99005, "big_r0p98995": 0.98995,
              "tiny_r1p5": 1.5}.get(variant, 1.0)
    plus = {"tiny_plus_0p9u": 0.9e-6, "tiny_plus_1p1u": 1.1e-6}.get(variant, 0.0)
    if variant in ("match_pt", "pt_bpc"):
        ws = wpt
    elif variant == "pc_bscalar_same":
        ws = f32([0.015] * M)
    else:
        ws = wpc
    e = (xs * ws).astype(np.float32)
    if variant in ("match_pt",):
        bs = e
    elif variant in ("pc_bscalar_same", "pc_bscalar_differ"):
        bs = f32(e[0])
    elif variant == "pt_bpc":
        bs = f32([e] * M)
    else:
        bs = (e * np.float32(factor) + np.float32(plus)).astype(np.float32)
    if variant == "one_off_2":
        bs = bs.copy()
        bs[2] *= np.float32(1.02)
    if variant == "b_scale_input":
        inputs.append(h.make_tensor_value_info("bs0", T.FLOAT, [M]))
        bs = None
    out = conv_unit(0, "xd", xs, ws, bs, "b", 0.5, inits, nodes)
    outputs = [h.make_tensor_value_info(out, T.UINT8, [1, M, 8, 8])]
    if variant.startswith("shared"):
        # A second Conv on the first's dequantized output: its input scale is the first's
        # output scale (0.5), so the first's bias scale is 25 times too small for it.
        nodes.append(h.make_node("DequantizeLinear", [out, "ys0", "yz0"], ["xd1"], name="dq_x1"))
        outputs = []
        if variant == "shared_init":
            b1 = (f32(0.5) * ws).astype(np.float32)
            out1 = conv_unit(1, "xd1", f32(0.5), ws, b1, "b", 0.25, inits, nodes)
        else:
            if variant == "shared_identity":
                nodes.append(h.make_node("Identity", ["bd0"], ["bd0_id"], name="bias_identity"))
                b_in = "bd0_id"
            else:
                b_in = "bd0"
            out1 = conv_unit(1, "xd1", f32(0.5), ws, None, b_in, 0.25, inits, nodes, bias_dq=False)
        outputs.append(h.make_tensor_value_info(out1, T.UINT8, [1, M, 8, 8]))
    g = h.make_graph(nodes, variant, inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], producer_name="conv_bias_scale.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


CHILD = r'''
import json, sys, onnx, onnxruntime as ort
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
so.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
print(json.dumps({"ort": ort.__version__, "nodes": sorted(n.name for n in onnx.load(sys.argv[2]).graph.node)}))
'''

VARIANTS = ["match_pc", "match_pt", "pc_bscalar_same", "pc_bscalar_differ", "pt_bpc", "up_0p5", "down_2",
            "one_off_2", "x_scale_1d", "b_scale_input", "shared_identity", "shared_dq", "shared_init",
            "big_r1p0099", "big_r1p01005", "big_r0p99005", "big_r0p98995", "tiny_r1p5", "tiny_plus_0p9u",
            "tiny_plus_1p1u"]


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
