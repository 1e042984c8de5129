#!/usr/bin/env python3
"""The real-world corpus (tests/fixtures/realworld/): models made the way users make them, with
public tools, from this repository's probes, the public corpus and a few architectures written here.

  python3 tools/realworld/gen.py OUT_DIR [SHARED_DIR]

Needs onnx==1.23.2, onnxruntime (CPU; its `quantization` and `transformers` packages), numpy,
sympy and onnxconverter-common (see tools/realworld/README.md for the venv). Deterministic: fixed
seeds, small dims; the whole set is a few MB.

Kinds (the file-name prefix says which):
  arch.*   architectures written here with onnx.helper: a convolutional detector with a decode
           head (Shape/Gather/Unsqueeze/Concat into Reshape), a CRNN recogniser with an LSTM,
           a streaming model with If/Loop subgraphs and state inputs, inputs declared `dim_value: -1`
  qdyn.*   onnxruntime.quantization.quantize_dynamic
  qdq.*    quantize_static, QuantFormat.QDQ (random calibration data)
  qop.*    quantize_static, QuantFormat.QOperator
  fp16.*   onnxconverter_common.float16.convert_float_to_float16
  ortopt.* onnxruntime.transformers.optimizer.optimize_model(use_gpu=True, opt_level=0)

`heldout.txt` lists the held-out half (by a hash of the name, so adding a model moves no other);
the differential test reports it apart.

  python3 tools/realworld/gen.py --unseen OUT_DIR [SHARED_DIR] [TSDECODERS_DIR]

adds only the unseen quantized models (`unseen()`, listed in `unseen.txt`): quantization settings
and sources the QDQ work of issue 16 was not tuned on (per-channel/reduce-range QDQ, QDQ of MatMul
only, QOperator with int8 activations, per-channel dynamic quantization; TorchScript decoders of
the TorchScript decoders of tools/tsexport/export.py and probes not quantized before). The test reports them as a third tally.
"""
import hashlib
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(16)


def w(name, shape, scale=0.1):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def c64(name, vals):
    return numpy_helper.from_array(np.array(vals, dtype=np.int64), name)


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def minus_one(value_info, axis):
    """Declares `dim_value: -1` (what some converters write for an unknown dim)."""
    d = value_info.type.tensor_type.shape.dim[axis]
    d.Clear()
    d.dim_value = -1
    return value_info


def model(graph, opset=17, extra=()):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def detector(declared_minus_one):
    """Backbone (Conv/BN-free/Relu/MaxPool), a 1x1 prediction conv and a YOLO-style decode head:
    the box tensor is reshaped to [N, anchors*H*W, 6] with a shape built from Shape/Gather/
    Unsqueeze/Concat, then split into xy/wh/conf and decoded with Sigmoid/Exp/Mul/Add."""
    x = vi("images", F32, ["batch", 3, 32, 32])
    if declared_minus_one:
        minus_one(x, 0)
    inits = [w("c1.w", [8, 3, 3, 3]), w("c1.b", [8]), w("c2.w", [16, 8, 3, 3]), w("c2.b", [16]),
             w("head.w", [18, 16, 1, 1]), w("head.b", [18]),
             c64("zero", [0]), c64("minus1", [-1]), c64("six", [6]), c64("axes0", [0]),
             numpy_helper.from_array(np.array(8.0, np.float32), "stride"),
             c64("s0", [0]), c64("s2", [2]), c64("s4", [4]), c64("s6", [6]), c64("ax2", [2])]
    n = [
        helper.make_node("Conv", ["images", "c1.w", "c1.b"], ["c1"], name="/backbone/conv1/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="/backbone/act1/Relu"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="/backbone/pool1/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "c2.w", "c2.b"], ["c2"], name="/backbone/conv2/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="/backbone/act2/Relu"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="/backbone/pool2/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p2", "head.w", "head.b"], ["h"], name="/head/Conv"),
        helper.make_node("Shape", ["h"], ["h_shape"], name="/head/Shape"),
        helper.make_node("Gather", ["h_shape", "zero"], ["n0"], name="/head/Gather", axis=0),
        helper.make_node("Squeeze", ["n0", "axes0"], ["n_scalar"], name="/head/Squeeze"),
        helper.make_node("Unsqueeze", ["n_scalar", "axes0"], ["n"], name="/head/Unsqueeze"),
        helper.make_node("Concat", ["n", "minus1", "six"], ["box_shape"], name="/head/Concat", axis=0),
        helper.make_node("Transpose", ["h"], ["ht"], name="/head/Transpose", perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["ht", "box_shape"], ["boxes"], name="/head/Reshape"),
        helper.make_node("Slice", ["boxes", "s0", "s2", "ax2"], ["xy"], name="/decode/Slice"),
        helper.make_node("Slice", ["boxes", "s2", "s4", "ax2"], ["wh"], name="/decode/Slice_1"),
        helper.make_node("Slice", ["boxes", "s4", "s6", "ax2"], ["conf"], name="/decode/Slice_2"),
        helper.make_node("Sigmoid", ["xy"], ["xy_s"], name="/decode/Sigmoid"),
        helper.make_node("Mul", ["xy_s", "stride"], ["xy_d"], name="/decode/Mul"),
        helper.make_node("Exp", ["wh"], ["wh_e"], name="/decode/Exp"),
        helper.make_node("Mul", ["wh_e", "stride"], ["wh_d"], name="/decode/Mul_1"),
        helper.make_node("Sigmoid", ["conf"], ["conf_s"], name="/decode/Sigmoid_1"),
        helper.make_node("Concat", ["xy_d", "wh_d", "conf_s"], ["detections"], name="/decode/Concat", axis=2),
    ]
    out = vi("detections", F32, ["batch", "boxes", 6])
    return model(helper.make_graph(n, "detector", [x], [out], inits))


def crnn():
    """Conv feature extractor, columns as a sequence (Transpose/Reshape), a bidirectional LSTM,
    a linear classifier and LogSoftmax (CTC-style recogniser)."""
    hidden = 8
    x = vi("image", F32, ["batch", 1, 8, "width"])
    inits = [w("conv.w", [4, 1, 3, 3]), w("conv.b", [4]),
             w("lstm.W", [2, 4 * hidden, 16]), w("lstm.R", [2, 4 * hidden, hidden]), w("lstm.B", [2, 8 * hidden]),
             w("fc.w", [2 * hidden, 10]), w("fc.b", [10]),
             c64("seq_shape", [0, 0, -1]), c64("fc_shape", [0, 0, 2 * hidden])]
    n = [
        helper.make_node("Conv", ["image", "conv.w", "conv.b"], ["c"], name="/cnn/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="/cnn/Relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="/cnn/MaxPool", kernel_shape=[2, 1], strides=[2, 1]),
        # [N, C, H, W] -> [W, N, C, H] -> [W, N, C*H]
        helper.make_node("Transpose", ["p"], ["t"], name="/rnn/Transpose", perm=[3, 0, 1, 2]),
        helper.make_node("Reshape", ["t", "seq_shape"], ["seq"], name="/rnn/Reshape"),
        helper.make_node("LSTM", ["seq", "lstm.W", "lstm.R", "lstm.B"], ["y", "", ""], name="/rnn/LSTM",
                         hidden_size=hidden, direction="bidirectional"),
        # [W, 2, N, H] -> [W, N, 2, H] -> [W, N, 2H]
        helper.make_node("Transpose", ["y"], ["yt"], name="/rnn/Transpose_1", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["yt", "fc_shape"], ["feat"], name="/rnn/Reshape_1"),
        helper.make_node("MatMul", ["feat", "fc.w"], ["logits0"], name="/fc/MatMul"),
        helper.make_node("Add", ["logits0", "fc.b"], ["logits"], name="/fc/Add"),
        helper.make_node("LogSoftmax", ["logits"], ["log_probs"], name="/ctc/LogSoftmax", axis=2),
    ]
    out = vi("log_probs", F32, ["width", "batch", 10])
    return model(helper.make_graph(n, "crnn", [x], [out], inits))


def streaming():
    """A streaming encoder step: state inputs, an If on a `reset` flag (then: zeros, else: the
    carried state), a Loop over the chunk's frames that updates the state, and the new state out."""
    d = 8
    x = vi("chunk", F32, [1, "frames", d])
    st = vi("state", F32, [1, d])
    reset = vi("reset", BOOL, [])
    inits = [w("cell.w", [d, d]), w("in.w", [d, d]), c64("one", [1]), c64("ax1", [1])]
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["state", "zero_f"], ["then_out"], name="/reset/then/Mul")],
        "then_branch", [], [vi("then_out", F32, [1, d])],
        [numpy_helper.from_array(np.array(0.0, np.float32), "zero_f")])
    else_g = helper.make_graph(
        [helper.make_node("Identity", ["state"], ["else_out"], name="/reset/else/Identity")],
        "else_branch", [], [vi("else_out", F32, [1, d])])
    body = helper.make_graph(
        [
            helper.make_node("Gather", ["chunk", "i"], ["frame"], name="/loop/body/Gather", axis=1),
            helper.make_node("MatMul", ["frame", "in.w"], ["fi"], name="/loop/body/MatMul"),
            helper.make_node("MatMul", ["h_in", "cell.w"], ["hh"], name="/loop/body/MatMul_1"),
            helper.make_node("Add", ["fi", "hh"], ["pre"], name="/loop/body/Add"),
            helper.make_node("Tanh", ["pre"], ["h_out"], name="/loop/body/Tanh"),
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="/loop/body/Identity"),
        ],
        "loop_body",
        [vi("i", I64, []), vi("cond_in", BOOL, []), vi("h_in", F32, [1, d])],
        [vi("cond_out", BOOL, []), vi("h_out", F32, [1, d]), vi("h_scan_out", F32, [1, d])],
    )
    body.node.append(helper.make_node("Identity", ["h_out"], ["h_scan_out"], name="/loop/body/Identity_1"))
    n = [
        helper.make_node("If", ["reset"], ["h0"], name="/reset/If", then_branch=then_g, else_branch=else_g),
        helper.make_node("Shape", ["chunk"], ["cs"], name="/loop/Shape"),
        helper.make_node("Gather", ["cs", "ax1"], ["frames1"], name="/loop/Gather", axis=0),
        helper.make_node("Squeeze", ["frames1"], ["frames"], name="/loop/Squeeze"),
        helper.make_node("Constant", [], ["true"], name="/loop/Constant",
                         value=numpy_helper.from_array(np.array(True), "t")),
        helper.make_node("Loop", ["frames", "true", "h0"], ["new_state", "states"], name="/loop/Loop", body=body),
        helper.make_node("Squeeze", ["states", "ax1"], ["enc"], name="/out/Squeeze"),
    ]
    outs = [vi("new_state", F32, [1, d]), vi("enc", F32, ["frames", d])]
    return model(helper.make_graph(n, "streaming", [x, st, reset], outs, inits))


def flatten_head():
    """A classifier whose flatten is written as Shape->Cast->Slice->Concat->Reshape (tf2onnx and
    older exporters), with the batch input declared `dim_value: -1`."""
    x = minus_one(vi("x", F32, ["n", 4, 4, 4]), 0)
    inits = [w("fc.w", [64, 5]), w("fc.b", [5]), c64("s0", [0]), c64("s1", [1]), c64("m1", [-1])]
    n = [
        helper.make_node("Relu", ["x"], ["r"], name="Relu"),
        helper.make_node("Shape", ["r"], ["sh"], name="Shape"),
        helper.make_node("Cast", ["sh"], ["sh64"], name="Cast", to=I64),
        helper.make_node("Slice", ["sh64", "s0", "s1"], ["n"], name="Slice"),
        helper.make_node("Concat", ["n", "m1"], ["flat_shape"], name="Concat", axis=0),
        helper.make_node("Reshape", ["r", "flat_shape"], ["flat"], name="Reshape"),
        helper.make_node("MatMul", ["flat", "fc.w"], ["mm"], name="MatMul"),
        helper.make_node("Add", ["mm", "fc.b"], ["logits"], name="Add"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="Softmax", axis=1),
    ]
    out = vi("probs", F32, [-1, 5])
    return model(helper.make_graph(n, "flatten_head", [x], [out], inits))


def feeds_for(m, seed=0):
    """Random inputs matching a model's declared inputs (symbolic dims: 2; ids: small ints)."""
    rng = np.random.default_rng(seed)
    inits = {i.name for i in m.graph.initializer}
    feeds = {}
    for i in m.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        # Decoders: `total` = `past` + `seq`.
        sizes = {"total": 4, "past": 2, "seq": 2}
        shape = [d.dim_value if d.dim_value > 0 else sizes.get(d.dim_param, 2) for d in t.shape.dim]
        if t.elem_type == I64:
            feeds[i.name] = rng.integers(0, 2, size=shape).astype(np.int64)
        elif t.elem_type == BOOL:
            feeds[i.name] = np.array(False) if not shape else np.zeros(shape, bool)
        elif t.elem_type == TensorProto.INT32:
            feeds[i.name] = rng.integers(0, 3, size=shape).astype(np.int32)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


# The unseen quantized models: (kind, stem, source, quantize_static/quantize_dynamic options).
UNSEEN_KINDS = {
    # QDQ, per-channel weights, reduce_range (uint8 activations).
    "qdqpc": dict(static=True, quant_format="QDQ", per_channel=True, reduce_range=True),
    # QDQ of the MatMuls only.
    "qdqmm": dict(static=True, quant_format="QDQ", op_types_to_quantize=["MatMul"]),
    # QOperator with int8 activations.
    "qops8": dict(static=True, quant_format="QOperator", activation="QInt8"),
    # Dynamic, per-channel weights.
    "qdynpc": dict(static=False, per_channel=True),
    # Plain settings on sources never quantized before.
    "qdq": dict(static=True, quant_format="QDQ"),
    "qop": dict(static=True, quant_format="QOperator"),
    "qdyn": dict(static=False),
}


def quantize_unseen(src, dst, kind):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self, m):
            self.data = iter([feeds_for(m, s) for s in range(3)])

        def get_next(self):
            return next(self.data, None)

    o = UNSEEN_KINDS[kind]
    if not o["static"]:
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8, per_channel=o.get("per_channel", False))
        return
    m = onnx.load(src)
    quantize_static(src, dst, Reader(m),
                    quant_format=getattr(QuantFormat, o["quant_format"]),
                    activation_type=getattr(QuantType, o.get("activation", "QUInt8")),
                    weight_type=QuantType.QInt8,
                    per_channel=o.get("per_channel", False),
                    reduce_range=o.get("reduce_range", False),
                    op_types_to_quantize=o.get("op_types_to_quantize"),
                    extra_options={"ActivationSymmetric": True} if o.get("activation") == "QInt8" else None)


def unseen(out, shared, tsdecoders):
    """Writes the unseen quantized models into `out` and lists them in `out/unseen.txt`."""
    probes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/fixtures/probes")
    jobs = [
        ("qdqpc", "vit.op13", os.path.join(probes, "vit.op13.ln-decomposed.f32.onnx")),
        ("qdqpc", "tsd.codegen.L2", os.path.join(tsdecoders, "codegen.L2.ts.op17.onnx")),
        ("qdqmm", "distilbert.op13", os.path.join(probes, "distilbert.op13.ln-decomposed.f32.onnx")),
        ("qops8", "detector", os.path.join(out, "arch.detector.onnx")),
        ("qops8", "tsd.gemma.L2", os.path.join(tsdecoders, "gemma.L2.ts.op17.onnx")),
        ("qdynpc", "roberta.op14", os.path.join(probes, "roberta.op14.tanh-gelu.f32.onnx")),
        ("qdq", "tsd.bloom.L2", os.path.join(tsdecoders, "bloom.L2.ts.op17.onnx")),
        ("qop", "tsd.gpt_neox.L2", os.path.join(tsdecoders, "gpt_neox.L2.ts.op17.onnx")),
        ("qdyn", "tsd.falcon.L2", os.path.join(tsdecoders, "falcon.L2.ts.op17.onnx")),
    ]
    made = []
    for kind, stem, src in jobs:
        dst = os.path.join(out, f"{kind}.{stem}.onnx")
        if not os.path.exists(src):
            print(f"skip {kind}.{stem}: {src} missing", file=sys.stderr)
            continue
        try:
            quantize_unseen(src, dst, kind)
            made.append(os.path.basename(dst))
        except Exception as e:  # a tool refusing a model is a fact, not a fixture
            print(f"skip {kind}.{stem}: {type(e).__name__}: {str(e)[:160]}", file=sys.stderr)
            if os.path.exists(dst):
                os.remove(dst)
    with open(os.path.join(out, "unseen.txt"), "w") as fh:
        fh.write("# Quantized models the QDQ work of issue 16 was not tuned on (tools/realworld/gen.py --unseen).\n")
        fh.write("".join(f + "\n" for f in sorted(made)))
    print(f"{len(made)} unseen models", file=sys.stderr)


def quantized(src, out_dir, stem, kinds):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self, m):
            self.data = iter([feeds_for(m, s) for s in range(3)])

        def get_next(self):
            return next(self.data, None)

    m = onnx.load(src)
    made = []
    for kind in kinds:
        dst = os.path.join(out_dir, f"{kind}.{stem}.onnx")
        try:
            if kind == "qdyn":
                quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
            elif kind == "qdq":
                quantize_static(src, dst, Reader(m), quant_format=QuantFormat.QDQ,
                                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            elif kind == "qdq8":
                quantize_static(src, dst, Reader(m), quant_format=QuantFormat.QDQ,
                                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                                extra_options={"ActivationSymmetric": True})
            elif kind == "qop":
                quantize_static(src, dst, Reader(m), quant_format=QuantFormat.QOperator,
                                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            made.append(dst)
        except Exception as e:  # a tool refusing a model is a fact, not a fixture
            print(f"skip {kind}.{stem}: {type(e).__name__}: {str(e)[:160]}", file=sys.stderr)
            if os.path.exists(dst):
                os.remove(dst)
    return made


def fp16(src, dst, keep_io_types):
    from onnxconverter_common import float16

    m = onnx.load(src)
    m16 = float16.convert_float_to_float16(m, keep_io_types=keep_io_types, disable_shape_infer=False)
    onnx.save(m16, dst)
    return dst


def ortopt(src, dst, model_type, num_heads, hidden):
    from onnxruntime.transformers import optimizer

    opt = optimizer.optimize_model(src, model_type=model_type, num_heads=num_heads, hidden_size=hidden,
                                   opt_level=0, use_gpu=True)
    opt.save_model_to_file(dst)
    return dst


def main():
    if sys.argv[1] == "--unseen":
        here = os.path.dirname(os.path.abspath(__file__))
        shared = sys.argv[3] if len(sys.argv) > 3 else os.path.join(here, "../../../shared")
        unseen(sys.argv[2], shared, sys.argv[4] if len(sys.argv) > 4 else "target/tsdecoders")
        return
    out = sys.argv[1]
    shared = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "../../../shared")
    here = os.path.dirname(os.path.abspath(__file__))
    probes = os.path.join(here, "../../tests/fixtures/probes")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".onnx"):
            os.remove(os.path.join(out, f))
    tmp = tempfile.mkdtemp()
    arch = {
        "arch.detector": detector(False),
        "arch.detector.dimminus1": detector(True),
        "arch.crnn-lstm": crnn(),
        "arch.streaming-if-loop": streaming(),
        "arch.flatten-head.dimminus1": flatten_head(),
    }
    for name, m in arch.items():
        onnx.save(m, os.path.join(out, name + ".onnx"))
    # Quantize the architectures, some probes and some public models.
    sources = {
        "detector": os.path.join(out, "arch.detector.onnx"),
        "crnn-lstm": os.path.join(out, "arch.crnn-lstm.onnx"),
        "flatten-head": os.path.join(out, "arch.flatten-head.dimminus1.onnx"),
        "vit.op17": os.path.join(probes, "vit.op17.ln-op.f32.onnx"),
        "vit.op13": os.path.join(probes, "vit.op13.ln-decomposed.f32.onnx"),
        "bert.ts.op17": os.path.join(probes, "bert.ts.op17.ln-op.f32.onnx"),
        "whisper-enc.op17": os.path.join(probes, "whisper-enc.op17.f32.onnx"),
        "llama.op17": os.path.join(probes, "llama.op17.rms-recip.f32.onnx"),
        "gpt2.ts.op17": os.path.join(probes, "gpt2.ts.op17.ln-op.f32.onnx"),
        "zoo.conv2d": os.path.join(shared, "corpus/models/zoo/pytorch-converted__test_Conv2d.onnx"),
        "zoo.linear": os.path.join(shared, "corpus/models/zoo/pytorch-converted__test_Linear.onnx"),
    }
    for stem, src in sources.items():
        if not os.path.exists(src):
            print(f"skip {stem}: {src} missing", file=sys.stderr)
            continue
        kinds = ["qdyn", "qdq", "qop"]
        if stem in ("detector", "vit.op17", "bert.ts.op17"):
            kinds.append("qdq8")
        quantized(src, out, stem, kinds)
    # fp16 conversions (keep_io_types both ways).
    for stem, src, keep in [
        ("detector", sources["detector"], True),
        ("crnn-lstm", sources["crnn-lstm"], False),
        ("vit.op17", sources["vit.op17"], True),
        ("bert.ts.op17", sources["bert.ts.op17"], True),
        ("whisper-enc.op17", sources["whisper-enc.op17"], False),
        ("gpt2.ts.op17", sources["gpt2.ts.op17"], True),
        ("streaming-if-loop", os.path.join(out, "arch.streaming-if-loop.onnx"), False),
    ]:
        try:
            fp16(src, os.path.join(out, f"fp16{'-io32' if keep else ''}.{stem}.onnx"), keep)
        except Exception as e:
            print(f"skip fp16.{stem}: {type(e).__name__}: {str(e)[:160]}", file=sys.stderr)
    # ORT's transformer optimizer (the Python fusions only; use_gpu=True as users run it).
    for stem, src, kind, heads, hidden in [
        ("bert.ts.op17", sources["bert.ts.op17"], "bert", 0, 0),
        ("bert.ts.op13", os.path.join(probes, "bert.ts.op13.ln-decomposed.f32.onnx"), "bert", 0, 0),
        ("bert.public.ts.op17", os.path.join(shared, "corpus/models/torch/bert.ts.op17.onnx"), "bert", 0, 0),
        ("gpt2.ts.op17", sources["gpt2.ts.op17"], "gpt2", 0, 0),
        ("gpt2.public.ts.op17", os.path.join(shared, "corpus/models/torch/gpt2.ts.op17.onnx"), "gpt2", 0, 0),
        ("vit.op17", sources["vit.op17"], "vit", 0, 0),
    ]:
        try:
            dst = ortopt(src, os.path.join(out, f"ortopt.{stem}.onnx"), kind, heads, hidden)
            if stem == "bert.ts.op17":
                fp16(dst, os.path.join(out, f"ortopt-fp16.{stem}.onnx"), True)
        except Exception as e:
            print(f"skip ortopt.{stem}: {type(e).__name__}: {str(e)[:160]}", file=sys.stderr)
    # Held-out half: by a hash of the name, so adding a model does not move the others.
    names = sorted(f for f in os.listdir(out) if f.endswith(".onnx"))
    held = [f for f in names if int(hashlib.sha256(f.encode()).hexdigest(), 16) % 2 == 1]
    with open(os.path.join(out, "heldout.txt"), "w") as fh:
        fh.write("# The held-out half of the real-world corpus (tools/realworld/gen.py): measured, not tuned on.\n")
        fh.write("".join(f + "\n" for f in held))
    print(f"{len(names)} models, {len(held)} held out", file=sys.stderr)


if __name__ == "__main__":
    main()
