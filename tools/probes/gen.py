#!/usr/bin/env python3
"""Probe models for the level-2/3 fusions: small transformer layers written the way real exporters
write them (torch.onnx TorchScript and dynamo, optimum, tf2onnx, onnxscript), with dynamic batch and
sequence dims so that shape chains stay in the graph and ORT splits nodes between CUDA and the CPU
(then it logs every node's placement by name).

  python3 tools/probes/gen.py OUT_DIR

The models are deterministic (fixed seed); tests/fixtures/probes/ holds them, and
tests/fixtures/oracle/probes-<ort>-<level>.jsonl.gz ORT's answers (tools/probes/record.sh).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, F16, I64, I32 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.INT32
NP = {F32: np.float32, F16: np.float16}


class B:
    """A tiny graph builder: `op` appends a node and returns its output names."""

    def __init__(self, opset, dtype=F32, ms=True):
        self.opset, self.dtype, self.ms = opset, dtype, ms
        self.nodes, self.inits, self.inputs, self.outputs, self.vi = [], [], [], [], []
        self.k = 0
        self.cache = {}

    def uniq(self, base):
        self.k += 1
        return f"{base}_{self.k}"

    def const(self, value, dtype=None, name=None):
        dtype = self.dtype if dtype is None else dtype
        arr = np.array(value, dtype={F32: np.float32, F16: np.float16, I64: np.int64, I32: np.int32}[dtype])
        key = (arr.tobytes(), arr.shape, dtype)
        if name is None and key in self.cache:
            return self.cache[key]
        n = name or self.uniq("onnx::Const")
        self.inits.append(numpy_helper.from_array(arr, n))
        if name is None:
            self.cache[key] = n
        return n

    def weight(self, name, shape):
        # A short repeating pattern: distinct per weight, and it compresses to almost nothing in git.
        self.k += 1
        arr = ((np.arange(int(np.prod(shape))) % 13 - 6 + self.k % 7) * 0.01).reshape(shape).astype(NP[self.dtype])
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def op(self, op, ins, name, n_out=1, domain="", out=None, **attrs):
        outs = out if out is not None else [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=name, domain=domain, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def inp(self, name, dtype, shape):
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def outp(self, name, dtype=None, shape=None):
        self.outputs.append(helper.make_tensor_value_info(name, self.dtype if dtype is None else dtype, shape))

    def unsq(self, x, axes, name):
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.const(axes, I64)], name)
        return self.op("Unsqueeze", [x], name, axes=axes)

    def reduce_mean(self, x, name, axes=(-1,)):
        if self.opset >= 18:
            return self.op("ReduceMean", [x, self.const(list(axes), I64)], name, keepdims=1)
        return self.op("ReduceMean", [x], name, axes=list(axes), keepdims=1)

    def split(self, x, n, axis, name, size):
        if self.opset >= 13:
            return self.op("Split", [x, self.const([size] * n, I64)], name, n_out=n, axis=axis)
        return self.op("Split", [x], name, n_out=n, axis=axis, split=[size] * n)

    def slice(self, x, starts, ends, axes, name, steps=None):
        ins = [x, starts, ends, axes] + ([steps] if steps else [])
        return self.op("Slice", ins, name)

    def dim(self, x, i, name):
        """torch's `x.size(i)` as a 0-D int64: Shape -> Gather."""
        s = self.op("Shape", [x], f"{name}/Shape")
        return self.op("Gather", [s, self.const(i, I64)], f"{name}/Gather", axis=0)

    def model(self, path, ir=8):
        g = helper.make_graph(self.nodes, "main_graph", self.inputs, self.outputs, self.inits, value_info=self.vi)
        imports = [helper.make_opsetid("", self.opset)]
        if self.ms:
            imports.append(helper.make_opsetid("com.microsoft", 1))
        m = helper.make_model(g, opset_imports=imports, producer_name="probe", ir_version=ir)
        if not any(n.op_type == "SimplifiedLayerNormalization" for n in self.nodes):  # an ORT-defined op
            onnx.checker.check_model(m)
        onnx.save(m, path)


# ---------------------------------------------------------------------------------- building blocks

def layer_norm(b, x, p, hidden, style):
    """LayerNorm: the op (opset >= 17) or the decomposed form older exporters emit."""
    g, be = b.weight(f"{p}.weight", [hidden]), b.weight(f"{p}.bias", [hidden])
    if style == "op":
        return b.op("LayerNormalization", [x, g, be], f"/{p}/LayerNormalization", axis=-1, epsilon=1e-12)
    mean = b.reduce_mean(x, f"/{p}/ReduceMean")
    d = b.op("Sub", [x, mean], f"/{p}/Sub")
    if style == "decomposed-cast":  # fp16 model computing the statistics in fp32
        d = b.op("Cast", [d], f"/{p}/Cast", to=F32)
    two = b.const(2.0, F32 if style == "decomposed-cast" else None)
    if style == "decomposed-mul":  # tf2onnx writes x*x
        sq = b.op("Mul", [d, d], f"/{p}/Mul_sq")
    else:
        sq = b.op("Pow", [d, two], f"/{p}/Pow")
    var = b.reduce_mean(sq, f"/{p}/ReduceMean_1")
    eps = b.const(1e-12, F32 if style == "decomposed-cast" else None)
    ve = b.op("Add", [var, eps], f"/{p}/Add")
    sd = b.op("Sqrt", [ve], f"/{p}/Sqrt")
    if style == "decomposed-cast":
        dd = b.op("Div", [d, sd], f"/{p}/Div")
        n = b.op("Cast", [dd], f"/{p}/Cast_1", to=b.dtype)
    else:
        n = b.op("Div", [d, sd], f"/{p}/Div")
    m = b.op("Mul", [n, g], f"/{p}/Mul")
    return b.op("Add", [m, be], f"/{p}/Add_1")


def rms_norm(b, x, p, hidden, style):
    """RMSNorm as Llama/T5/Qwen exporters write it."""
    w = b.weight(f"{p}.weight", [hidden])
    if style == "op":
        return b.op("SimplifiedLayerNormalization", [x, w], f"/{p}/SimplifiedLayerNormalization", axis=-1, epsilon=1e-6)
    if style == "rmsop":
        return b.op("RMSNormalization", [x, w], f"/{p}/RMSNormalization", axis=-1, epsilon=1e-6)
    h = x
    if style in ("cast", "cast-recip"):
        h = b.op("Cast", [x], f"/{p}/Cast", to=F32)
    cdt = F32 if style in ("cast", "cast-recip") else None
    sq = b.op("Pow", [h, b.const(2.0, cdt)], f"/{p}/Pow")
    var = b.reduce_mean(sq, f"/{p}/ReduceMean")
    ve = b.op("Add", [var, b.const(1e-6, cdt)], f"/{p}/Add")
    sd = b.op("Sqrt", [ve], f"/{p}/Sqrt")
    if style in ("recip", "cast-recip"):
        r = b.op("Reciprocal", [sd], f"/{p}/Reciprocal")
        n = b.op("Mul", [h, r], f"/{p}/Mul")
    else:
        n = b.op("Div", [h, sd], f"/{p}/Div")
    if style in ("cast", "cast-recip"):
        n = b.op("Cast", [n], f"/{p}/Cast_1", to=b.dtype)
    return b.op("Mul", [w, n], f"/{p}/Mul_1")


def linear(b, x, p, din, dout, bias=True):
    w = b.weight(f"{p}.weight_T", [din, dout])
    y = b.op("MatMul", [x, w], f"/{p}/MatMul")
    if bias:
        y = b.op("Add", [b.weight(f"{p}.bias", [dout]), y], f"/{p}/Add")
    return y


def gelu(b, x, p, style):
    if style == "erf":
        d = b.op("Div", [x, b.const(1.4142135381698608)], f"/{p}/Div")
        e = b.op("Erf", [d], f"/{p}/Erf")
        a = b.op("Add", [e, b.const(1.0)], f"/{p}/Add")
        m = b.op("Mul", [x, a], f"/{p}/Mul")
        return b.op("Mul", [m, b.const(0.5)], f"/{p}/Mul_1")
    if style == "tanh":
        m0 = b.op("Mul", [b.const(0.5), x], f"/{p}/Mul")
        p3 = b.op("Pow", [x, b.const(3.0)], f"/{p}/Pow")
        m1 = b.op("Mul", [b.const(0.044715), p3], f"/{p}/Mul_1")
        a0 = b.op("Add", [x, m1], f"/{p}/Add")
        m2 = b.op("Mul", [b.const(0.7978845608028654), a0], f"/{p}/Mul_2")
        t = b.op("Tanh", [m2], f"/{p}/Tanh")
        a1 = b.op("Add", [b.const(1.0), t], f"/{p}/Add_1")
        return b.op("Mul", [m0, a1], f"/{p}/Mul_3")
    if style == "op":
        return b.op("Gelu", [x], f"/{p}/Gelu")
    if style == "silu":
        s = b.op("Sigmoid", [x], f"/{p}/Sigmoid")
        return b.op("Mul", [x, s], f"/{p}/Mul")
    if style == "relu":
        return b.op("Relu", [x], f"/{p}/Relu")
    raise ValueError(style)


def heads_reshape(b, x, p, heads, hd, style):
    """[B, S, H*D] -> [B, H, S, D], the shape written from Shape ops (torch TS) or a constant."""
    if style == "shape":
        bsz = b.dim(x, 0, f"/{p}/b")
        seq = b.dim(x, 1, f"/{p}/s")
        ub = b.unsq(bsz, [0], f"/{p}/Unsqueeze")
        us = b.unsq(seq, [0], f"/{p}/Unsqueeze_1")
        shape = b.op("Concat", [ub, us, b.const([heads], I64), b.const([hd], I64)], f"/{p}/Concat", axis=0)
    else:
        shape = b.const([0, 0, heads, hd], I64) if style == "zero" else b.const([0, -1, heads, hd], I64)
    r = b.op("Reshape", [x, shape], f"/{p}/Reshape")
    return b.op("Transpose", [r], f"/{p}/Transpose", perm=[0, 2, 1, 3])


def merge_heads(b, x, p, hidden, style):
    t = b.op("Transpose", [x], f"/{p}/Transpose_o", perm=[0, 2, 1, 3])
    if style == "shape":
        bsz = b.dim(t, 0, f"/{p}/ob")
        seq = b.dim(t, 1, f"/{p}/os")
        ub = b.unsq(bsz, [0], f"/{p}/Unsqueeze_o")
        us = b.unsq(seq, [0], f"/{p}/Unsqueeze_o1")
        shape = b.op("Concat", [ub, us, b.const([hidden], I64)], f"/{p}/Concat_o", axis=0)
    else:
        shape = b.const([0, 0, hidden], I64) if style == "zero" else b.const([0, -1, hidden], I64)
    return b.op("Reshape", [t, shape], f"/{p}/Reshape_o")


# ---------------------------------------------------------------------------------- encoders

def bert(path, opset=13, dtype=F32, ln="decomposed", act="erf", shapes="shape", layers=2, hidden=16, heads=2,
         embed=True, mask="float", transpose_k=True, scale="div", token_type=True):
    b = B(opset, dtype)
    hd = hidden // heads
    ids = b.inp("input_ids", I64, ["batch", "seq"])
    am = b.inp("attention_mask", I64, ["batch", "seq"])
    if embed:
        we = b.weight("embeddings.word_embeddings.weight", [100, hidden])
        x = b.op("Gather", [we, ids], "/embeddings/word_embeddings/Gather")
        if token_type:
            tt = b.inp("token_type_ids", I64, ["batch", "seq"])
            te = b.weight("embeddings.token_type_embeddings.weight", [2, hidden])
            t = b.op("Gather", [te, tt], "/embeddings/token_type_embeddings/Gather")
            x = b.op("Add", [x, t], "/embeddings/Add")
        # position_ids = arange(seq) sliced from a buffer with a Shape-derived end
        seq = b.dim(ids, 1, "/embeddings")
        end = b.unsq(seq, [0], "/embeddings/Unsqueeze")
        pos_buf = b.const([list(range(64))], I64, name="embeddings.position_ids")
        pid = b.slice(pos_buf, b.const([0], I64), end, b.const([1], I64), "/embeddings/Slice")
        pe = b.weight("embeddings.position_embeddings.weight", [64, hidden])
        p = b.op("Gather", [pe, pid], "/embeddings/position_embeddings/Gather")
        x = b.op("Add", [x, p], "/embeddings/Add_1")
        x = layer_norm(b, x, "embeddings/LayerNorm", hidden, ln)
    else:
        x = b.inp("hidden_states", dtype, ["batch", "seq", hidden])
    # extended mask: (1 - mask[:, None, None, :]) * -10000
    u = b.unsq(am, [1], "/Unsqueeze")
    u = b.unsq(u, [2], "/Unsqueeze_1")
    if mask == "float":
        c = b.op("Cast", [u], "/Cast", to=dtype)
        s = b.op("Sub", [b.const(1.0), c], "/Sub")
        bias = b.op("Mul", [s, b.const(-10000.0)], "/Mul")
    else:  # distilbert: masked_fill via Equal/Where
        e = b.op("Equal", [u, b.const(0, I64)], "/Equal")
        bias = b.op("Where", [e, b.const(-3.0e4 if dtype == F16 else -1e9), b.const(0.0)], "/Where")
    for i in range(layers):
        p = f"encoder/layer.{i}/attention/self"
        q = linear(b, x, f"{p}/query", hidden, hidden)
        k = linear(b, x, f"{p}/key", hidden, hidden)
        v = linear(b, x, f"{p}/value", hidden, hidden)
        qh = heads_reshape(b, q, f"{p}/q", heads, hd, shapes)
        vh = heads_reshape(b, v, f"{p}/v", heads, hd, shapes)
        if transpose_k:
            kh = heads_reshape(b, k, f"{p}/k", heads, hd, shapes)
            kt = b.op("Transpose", [kh], f"/{p}/Transpose_k", perm=[0, 1, 3, 2])
        else:  # key reshaped straight to [B, H, D, S]
            r = b.op("Reshape", [k, b.const([0, 0, heads, hd], I64)], f"/{p}/k/Reshape")
            kt = b.op("Transpose", [r], f"/{p}/k/Transpose", perm=[0, 2, 3, 1])
        sc = b.op("MatMul", [qh, kt], f"/{p}/MatMul")
        if scale == "div":
            sc = b.op("Div", [sc, b.const(float(np.sqrt(hd)))], f"/{p}/Div")
        else:
            sc = b.op("Mul", [sc, b.const(float(1 / np.sqrt(hd)))], f"/{p}/Mul")
        sc = b.op("Add", [sc, bias], f"/{p}/Add")
        pr = b.op("Softmax", [sc], f"/{p}/Softmax", axis=-1 if opset >= 13 else 3)
        ctx = b.op("MatMul", [pr, vh], f"/{p}/MatMul_1")
        ctx = merge_heads(b, ctx, p, hidden, shapes)
        po = f"encoder/layer.{i}/attention/output"
        o = linear(b, ctx, f"{po}/dense", hidden, hidden)
        o = b.op("Add", [o, x], f"/{po}/Add")
        x = layer_norm(b, o, f"{po}/LayerNorm", hidden, ln)
        pi = f"encoder/layer.{i}/intermediate"
        h = linear(b, x, f"{pi}/dense", hidden, 4 * hidden)
        h = gelu(b, h, f"{pi}/intermediate_act_fn", act)
        pf = f"encoder/layer.{i}/output"
        o = linear(b, h, f"{pf}/dense", 4 * hidden, hidden)
        o = b.op("Add", [o, x], f"/{pf}/Add")
        x = layer_norm(b, o, f"{pf}/LayerNorm", hidden, ln)
    b.op("Identity", [x], "/Identity_out", out=["last_hidden_state"])
    b.outp("last_hidden_state", shape=["batch", "seq", hidden])
    # pooler: first token -> dense -> tanh
    g = b.op("Gather", [x, b.const(0, I64)], "/pooler/Gather", axis=1)
    pl = linear(b, g, "pooler/dense", hidden, hidden)
    b.op("Tanh", [pl], "/pooler/activation/Tanh", out=["pooler_output"])
    b.outp("pooler_output", shape=["batch", hidden])
    b.model(path)


def vit(path, opset=17, dtype=F32, ln="op", layers=1, hidden=16, heads=2):
    b = B(opset, dtype)
    hd = hidden // heads
    px = b.inp("pixel_values", dtype, ["batch", 3, 32, 32])
    cw = b.weight("patch.weight", [hidden, 3, 8, 8])
    cb = b.weight("patch.bias", [hidden])
    c = b.op("Conv", [px, cw, cb], "/embeddings/patch_embeddings/projection/Conv", kernel_shape=[8, 8], strides=[8, 8])
    bsz = b.dim(c, 0, "/embeddings/patch_embeddings")
    fl = b.op("Reshape", [c, b.const([0, hidden, -1], I64)], "/embeddings/patch_embeddings/Reshape")
    t = b.op("Transpose", [fl], "/embeddings/patch_embeddings/Transpose", perm=[0, 2, 1])
    cls = b.weight("cls_token", [1, 1, hidden])
    ub = b.unsq(bsz, [0], "/embeddings/Unsqueeze")
    es = b.op("Concat", [ub, b.const([1, hidden], I64)], "/embeddings/Concat", axis=0)
    ce = b.op("Expand", [cls, es], "/embeddings/Expand")
    x = b.op("Concat", [ce, t], "/embeddings/Concat_1", axis=1)
    x = b.op("Add", [x, b.weight("pos", [1, 17, hidden])], "/embeddings/Add")
    for i in range(layers):
        p = f"encoder/layer.{i}"
        h = layer_norm(b, x, f"{p}/layernorm_before", hidden, ln)
        q = linear(b, h, f"{p}/attention/query", hidden, hidden)
        k = linear(b, h, f"{p}/attention/key", hidden, hidden)
        v = linear(b, h, f"{p}/attention/value", hidden, hidden)
        qh = heads_reshape(b, q, f"{p}/q", heads, hd, "shape")
        kh = heads_reshape(b, k, f"{p}/k", heads, hd, "shape")
        vh = heads_reshape(b, v, f"{p}/v", heads, hd, "shape")
        kt = b.op("Transpose", [kh], f"/{p}/Transpose_k", perm=[0, 1, 3, 2])
        sc = b.op("MatMul", [qh, kt], f"/{p}/attention/MatMul")
        sc = b.op("Div", [sc, b.const(float(np.sqrt(hd)))], f"/{p}/attention/Div")
        pr = b.op("Softmax", [sc], f"/{p}/attention/Softmax", axis=-1)
        ctx = b.op("MatMul", [pr, vh], f"/{p}/attention/MatMul_1")
        ctx = merge_heads(b, ctx, p, hidden, "shape")
        o = linear(b, ctx, f"{p}/attention/output/dense", hidden, hidden)
        x = b.op("Add", [o, x], f"/{p}/Add")
        h = layer_norm(b, x, f"{p}/layernorm_after", hidden, ln)
        h = linear(b, h, f"{p}/intermediate/dense", hidden, 4 * hidden)
        h = gelu(b, h, f"{p}/intermediate/act", "erf")
        o = linear(b, h, f"{p}/output/dense", 4 * hidden, hidden)
        x = b.op("Add", [o, x], f"/{p}/Add_1")
    x = layer_norm(b, x, "layernorm", hidden, ln)
    b.op("Identity", [x], "/Identity_out", out=["last_hidden_state"])
    b.outp("last_hidden_state", shape=["batch", 17, hidden])
    b.model(path)


def whisper_enc(path, opset=17, dtype=F32, ln="op", hidden=16, heads=2):
    b = B(opset, dtype)
    hd = hidden // heads
    feat = b.inp("input_features", dtype, ["batch", 8, 32])
    c = b.op("Conv", [feat, b.weight("conv1.weight", [hidden, 8, 3]), b.weight("conv1.bias", [hidden])],
             "/conv1/Conv", kernel_shape=[3], pads=[1, 1])
    c = gelu(b, c, "gelu", "erf")
    c = b.op("Conv", [c, b.weight("conv2.weight", [hidden, hidden, 3]), b.weight("conv2.bias", [hidden])],
             "/conv2/Conv", kernel_shape=[3], pads=[1, 1], strides=[2])
    c = gelu(b, c, "gelu_1", "erf")
    x = b.op("Transpose", [c], "/Transpose", perm=[0, 2, 1])
    x = b.op("Add", [x, b.weight("embed_positions.weight", [16, hidden])], "/Add")
    p = "layers.0"
    h = layer_norm(b, x, f"{p}/self_attn_layer_norm", hidden, ln)
    q = linear(b, h, f"{p}/self_attn/q_proj", hidden, hidden)
    q = b.op("Mul", [q, b.const(float(hd ** -0.5))], f"/{p}/self_attn/Mul")
    k = linear(b, h, f"{p}/self_attn/k_proj", hidden, hidden, bias=False)
    v = linear(b, h, f"{p}/self_attn/v_proj", hidden, hidden)
    qh = heads_reshape(b, q, f"{p}/q", heads, hd, "shape")
    kh = heads_reshape(b, k, f"{p}/k", heads, hd, "shape")
    vh = heads_reshape(b, v, f"{p}/v", heads, hd, "shape")
    kt = b.op("Transpose", [kh], f"/{p}/Transpose_k", perm=[0, 1, 3, 2])
    sc = b.op("MatMul", [qh, kt], f"/{p}/self_attn/MatMul")
    pr = b.op("Softmax", [sc], f"/{p}/self_attn/Softmax", axis=-1)
    ctx = b.op("MatMul", [pr, vh], f"/{p}/self_attn/MatMul_1")
    ctx = merge_heads(b, ctx, p, hidden, "shape")
    o = linear(b, ctx, f"{p}/self_attn/out_proj", hidden, hidden)
    x = b.op("Add", [x, o], f"/{p}/Add")
    h = layer_norm(b, x, f"{p}/final_layer_norm", hidden, ln)
    h = linear(b, h, f"{p}/fc1", hidden, 4 * hidden)
    h = gelu(b, h, f"{p}/activation_fn", "erf")
    h = linear(b, h, f"{p}/fc2", 4 * hidden, hidden)
    x = b.op("Add", [x, h], f"/{p}/Add_1")
    x = layer_norm(b, x, "layer_norm", hidden, ln)
    b.op("Identity", [x], "/Identity_out", out=["last_hidden_state"])
    b.outp("last_hidden_state", shape=["batch", 16, hidden])
    b.model(path)


# ---------------------------------------------------------------------------------- decoders

def gpt2(path, opset=13, dtype=F32, ln="op", act="tanh", hidden=16, heads=2, layers=2, past=True):
    b = B(opset, dtype)
    hd = hidden // heads
    ids = b.inp("input_ids", I64, ["batch", "seq"])
    pids = b.inp("position_ids", I64, ["batch", "seq"])
    am = b.inp("attention_mask", I64, ["batch", "total"])
    x = b.op("Gather", [b.weight("wte.weight", [100, hidden]), ids], "/transformer/wte/Gather")
    pe = b.op("Gather", [b.weight("wpe.weight", [64, hidden]), pids], "/transformer/wpe/Gather")
    x = b.op("Add", [x, pe], "/transformer/Add")
    u = b.unsq(am, [1], "/transformer/Unsqueeze")
    u = b.unsq(u, [2], "/transformer/Unsqueeze_1")
    c = b.op("Cast", [u], "/transformer/Cast", to=dtype)
    s = b.op("Sub", [b.const(1.0), c], "/transformer/Sub")
    mbias = b.op("Mul", [s, b.const(-10000.0)], "/transformer/Mul")
    causal = "transformer.h.bias"
    b.inits.append(numpy_helper.from_array(np.tril(np.ones((1, 1, 64, 64))).astype(bool), causal))
    for i in range(layers):
        p = f"transformer/h.{i}"
        h = layer_norm(b, x, f"{p}/ln_1", hidden, ln)
        qkv = linear(b, h, f"{p}/attn/c_attn", hidden, 3 * hidden)
        q, k, v = b.split(qkv, 3, 2, f"/{p}/attn/Split", hidden)
        qh = heads_reshape(b, q, f"{p}/attn/q", heads, hd, "shape")
        kh = heads_reshape(b, k, f"{p}/attn/k", heads, hd, "shape")
        vh = heads_reshape(b, v, f"{p}/attn/v", heads, hd, "shape")
        if past:
            pk = b.inp(f"past_key_values.{i}.key", dtype, ["batch", heads, "past", hd])
            pv = b.inp(f"past_key_values.{i}.value", dtype, ["batch", heads, "past", hd])
            kh = b.op("Concat", [pk, kh], f"/{p}/attn/Concat_k", axis=-2)
            vh = b.op("Concat", [pv, vh], f"/{p}/attn/Concat_v", axis=-2)
            b.op("Identity", [kh], f"/{p}/attn/Identity_k", out=[f"present.{i}.key"])
            b.op("Identity", [vh], f"/{p}/attn/Identity_v", out=[f"present.{i}.value"])
            b.outp(f"present.{i}.key", shape=["batch", heads, "total", hd])
            b.outp(f"present.{i}.value", shape=["batch", heads, "total", hd])
        kt = b.op("Transpose", [kh], f"/{p}/attn/Transpose_k", perm=[0, 1, 3, 2])
        w = b.op("MatMul", [qh, kt], f"/{p}/attn/MatMul")
        w = b.op("Div", [w, b.const(float(np.sqrt(hd)))], f"/{p}/attn/Div")
        # causal slice: bias[:, :, k-q:k, :k]
        ql = b.dim(qh, 2, f"/{p}/attn/ql")
        kl = b.dim(kh, 2, f"/{p}/attn/kl")
        st = b.op("Sub", [kl, ql], f"/{p}/attn/Sub")
        st = b.unsq(st, [0], f"/{p}/attn/Unsqueeze_st")
        en = b.unsq(kl, [0], f"/{p}/attn/Unsqueeze_en")
        cm = b.slice(causal, st, en, b.const([2], I64), f"/{p}/attn/Slice")
        cm = b.slice(cm, b.const([0], I64), en, b.const([3], I64), f"/{p}/attn/Slice_1")
        w = b.op("Where", [cm, w, b.const(-3.0e4 if dtype == F16 else -1e9)], f"/{p}/attn/Where")
        w = b.op("Add", [w, mbias], f"/{p}/attn/Add")
        pr = b.op("Softmax", [w], f"/{p}/attn/Softmax", axis=-1 if opset >= 13 else 3)
        ctx = b.op("MatMul", [pr, vh], f"/{p}/attn/MatMul_1")
        ctx = merge_heads(b, ctx, f"{p}/attn", hidden, "shape")
        o = linear(b, ctx, f"{p}/attn/c_proj", hidden, hidden)
        x = b.op("Add", [o, x], f"/{p}/Add")
        h = layer_norm(b, x, f"{p}/ln_2", hidden, ln)
        h = linear(b, h, f"{p}/mlp/c_fc", hidden, 4 * hidden)
        h = gelu(b, h, f"{p}/mlp/act", act)
        h = linear(b, h, f"{p}/mlp/c_proj", 4 * hidden, hidden)
        x = b.op("Add", [x, h], f"/{p}/Add_1")
    x = layer_norm(b, x, "transformer/ln_f", hidden, ln)
    lg = b.op("MatMul", [x, b.weight("lm_head.weight_T", [hidden, 100])], "/lm_head/MatMul", out=["logits"])
    b.outp("logits", shape=["batch", "seq", 100])
    b.model(path)


def rotate_half(b, x, p, hd, style):
    if style == "slice":
        half = hd // 2
        x1 = b.slice(x, b.const([0], I64), b.const([half], I64), b.const([-1], I64), f"/{p}/Slice")
        x2 = b.slice(x, b.const([half], I64), b.const([2 ** 62], I64), b.const([-1], I64), f"/{p}/Slice_1")
    else:
        x1, x2 = b.split(x, 2, -1, f"/{p}/Split", hd // 2)
    n = b.op("Neg", [x2], f"/{p}/Neg")
    return b.op("Concat", [n, x1], f"/{p}/Concat", axis=-1)


def llama(path, opset=14, dtype=F32, rms="pow", hidden=16, heads=4, kv_heads=2, layers=2, rot="slice",
          mask="where", shapes="shape", act="silu", ms=True):
    b = B(opset, dtype, ms=ms)
    hd = hidden // heads
    ids = b.inp("input_ids", I64, ["batch", "seq"])
    am = b.inp("attention_mask", I64, ["batch", "total"])
    pids = b.inp("position_ids", I64, ["batch", "seq"])
    x = b.op("Gather", [b.weight("embed_tokens.weight", [100, hidden]), ids], "/model/embed_tokens/Gather")
    cos_c = b.weight("cos_cached", [64, hd])
    sin_c = b.weight("sin_cached", [64, hd])
    cos = b.op("Gather", [cos_c, pids], "/model/rotary/Gather")
    sin = b.op("Gather", [sin_c, pids], "/model/rotary/Gather_1")
    cos = b.unsq(cos, [1], "/model/rotary/Unsqueeze")
    sin = b.unsq(sin, [1], "/model/rotary/Unsqueeze_1")
    # 4-D additive mask from the 2-D attention mask
    u = b.unsq(am, [1, 2], "/model/Unsqueeze")
    c = b.op("Cast", [u], "/model/Cast", to=dtype)
    s = b.op("Sub", [b.const(1.0), c], "/model/Sub")
    if mask == "where":
        cb = b.op("Cast", [s], "/model/Cast_1", to=TensorProto.BOOL)
        mbias = b.op("Where", [cb, b.const(-3.0e4 if dtype == F16 else -3.4e38), s], "/model/Where")
    else:
        mbias = b.op("Mul", [s, b.const(-10000.0)], "/model/Mul")
    rep = heads // kv_heads
    for i in range(layers):
        p = f"model/layers.{i}"
        h = rms_norm(b, x, f"{p}/input_layernorm", hidden, rms)
        q = linear(b, h, f"{p}/self_attn/q_proj", hidden, hidden, bias=False)
        k = linear(b, h, f"{p}/self_attn/k_proj", hidden, kv_heads * hd, bias=False)
        v = linear(b, h, f"{p}/self_attn/v_proj", hidden, kv_heads * hd, bias=False)
        qh = heads_reshape(b, q, f"{p}/self_attn/q", heads, hd, shapes)
        kh = heads_reshape(b, k, f"{p}/self_attn/k", kv_heads, hd, shapes)
        vh = heads_reshape(b, v, f"{p}/self_attn/v", kv_heads, hd, shapes)
        ra = f"{p}/self_attn/rot"
        qr = b.op("Add", [b.op("Mul", [qh, cos], f"/{ra}/Mul"),
                          b.op("Mul", [rotate_half(b, qh, f"{ra}/q", hd, rot), sin], f"/{ra}/Mul_1")], f"/{ra}/Add")
        kr = b.op("Add", [b.op("Mul", [kh, cos], f"/{ra}/Mul_2"),
                          b.op("Mul", [rotate_half(b, kh, f"{ra}/k", hd, rot), sin], f"/{ra}/Mul_3")], f"/{ra}/Add_1")
        pk = b.inp(f"past_key_values.{i}.key", dtype, ["batch", kv_heads, "past", hd])
        pv = b.inp(f"past_key_values.{i}.value", dtype, ["batch", kv_heads, "past", hd])
        kc = b.op("Concat", [pk, kr], f"/{p}/self_attn/Concat_k", axis=2)
        vc = b.op("Concat", [pv, vh], f"/{p}/self_attn/Concat_v", axis=2)
        b.op("Identity", [kc], f"/{p}/self_attn/Identity_k", out=[f"present.{i}.key"])
        b.op("Identity", [vc], f"/{p}/self_attn/Identity_v", out=[f"present.{i}.value"])
        b.outp(f"present.{i}.key", shape=["batch", kv_heads, "total", hd])
        b.outp(f"present.{i}.value", shape=["batch", kv_heads, "total", hd])
        # repeat_kv: [B, kv, T, D] -> unsqueeze(2) -> expand -> reshape [B, kv*rep, T, D]
        outs = []
        for nm, t in (("k", kc), ("v", vc)):
            rp = f"{p}/self_attn/repeat_{nm}"
            us = b.unsq(t, [2], f"/{rp}/Unsqueeze")
            bsz = b.dim(t, 0, f"/{rp}/b")
            tl = b.dim(t, 2, f"/{rp}/t")
            ub, ut = b.unsq(bsz, [0], f"/{rp}/Unsqueeze_b"), b.unsq(tl, [0], f"/{rp}/Unsqueeze_t")
            es = b.op("Concat", [ub, b.const([kv_heads, rep], I64), ut, b.const([hd], I64)], f"/{rp}/Concat", axis=0)
            ex = b.op("Expand", [us, es], f"/{rp}/Expand")
            rs = b.op("Concat", [ub, b.const([heads], I64), ut, b.const([hd], I64)], f"/{rp}/Concat_1", axis=0)
            outs.append(b.op("Reshape", [ex, rs], f"/{rp}/Reshape"))
        kt = b.op("Transpose", [outs[0]], f"/{p}/self_attn/Transpose_k", perm=[0, 1, 3, 2])
        w = b.op("MatMul", [qr, kt], f"/{p}/self_attn/MatMul")
        w = b.op("Div", [w, b.const(float(np.sqrt(hd)))], f"/{p}/self_attn/Div")
        w = b.op("Add", [w, mbias], f"/{p}/self_attn/Add")
        pr = b.op("Softmax", [w], f"/{p}/self_attn/Softmax", axis=-1 if opset >= 13 else 3)
        if dtype == F16:
            pass
        ctx = b.op("MatMul", [pr, outs[1]], f"/{p}/self_attn/MatMul_1")
        ctx = merge_heads(b, ctx, f"{p}/self_attn", hidden, shapes)
        o = linear(b, ctx, f"{p}/self_attn/o_proj", hidden, hidden, bias=False)
        x = b.op("Add", [x, o], f"/{p}/Add")
        h = rms_norm(b, x, f"{p}/post_attention_layernorm", hidden, rms)
        g = linear(b, h, f"{p}/mlp/gate_proj", hidden, 2 * hidden, bias=False)
        up = linear(b, h, f"{p}/mlp/up_proj", hidden, 2 * hidden, bias=False)
        a = gelu(b, g, f"{p}/mlp/act_fn", act)
        m = b.op("Mul", [a, up], f"/{p}/mlp/Mul")
        d = linear(b, m, f"{p}/mlp/down_proj", 2 * hidden, hidden, bias=False)
        x = b.op("Add", [x, d], f"/{p}/Add_1")
    x = rms_norm(b, x, "model/norm", hidden, rms)
    b.op("MatMul", [x, b.weight("lm_head.weight_T", [hidden, 100])], "/lm_head/MatMul", out=["logits"])
    b.outp("logits", shape=["batch", "seq", 100])
    b.model(path)


def t5_enc(path, opset=13, dtype=F32, rms="pow", hidden=16, heads=2):
    b = B(opset, dtype)
    hd = hidden // heads
    ids = b.inp("input_ids", I64, ["batch", "seq"])
    am = b.inp("attention_mask", I64, ["batch", "seq"])
    x = b.op("Gather", [b.weight("shared.weight", [100, hidden]), ids], "/encoder/embed_tokens/Gather")
    u = b.unsq(am, [1], "/encoder/Unsqueeze")
    u = b.unsq(u, [2], "/encoder/Unsqueeze_1")
    c = b.op("Cast", [u], "/encoder/Cast", to=dtype)
    s = b.op("Sub", [b.const(1.0), c], "/encoder/Sub")
    mbias = b.op("Mul", [s, b.const(-3.0e4 if dtype == F16 else -3.4e38)], "/encoder/Mul")
    pbias = b.weight("relative_bias", [1, heads, 1, 1])
    mbias = b.op("Add", [pbias, mbias], "/encoder/Add")
    for i in range(2):
        p = f"encoder/block.{i}/layer.0"
        h = rms_norm(b, x, f"{p}/layer_norm", hidden, rms)
        q = linear(b, h, f"{p}/SelfAttention/q", hidden, hidden, bias=False)
        k = linear(b, h, f"{p}/SelfAttention/k", hidden, hidden, bias=False)
        v = linear(b, h, f"{p}/SelfAttention/v", hidden, hidden, bias=False)
        qh = heads_reshape(b, q, f"{p}/q", heads, hd, "shape")
        kh = heads_reshape(b, k, f"{p}/k", heads, hd, "shape")
        vh = heads_reshape(b, v, f"{p}/v", heads, hd, "shape")
        kt = b.op("Transpose", [kh], f"/{p}/Transpose_k", perm=[0, 1, 3, 2])
        w = b.op("MatMul", [qh, kt], f"/{p}/SelfAttention/MatMul")
        w = b.op("Add", [w, mbias], f"/{p}/SelfAttention/Add")
        pr = b.op("Softmax", [w], f"/{p}/SelfAttention/Softmax", axis=-1 if opset >= 13 else 3)
        ctx = b.op("MatMul", [pr, vh], f"/{p}/SelfAttention/MatMul_1")
        ctx = merge_heads(b, ctx, f"{p}/SelfAttention", hidden, "shape")
        o = linear(b, ctx, f"{p}/SelfAttention/o", hidden, hidden, bias=False)
        x = b.op("Add", [x, o], f"/{p}/Add")
        p = f"encoder/block.{i}/layer.1"
        h = rms_norm(b, x, f"{p}/layer_norm", hidden, rms)
        h = linear(b, h, f"{p}/DenseReluDense/wi", hidden, 4 * hidden, bias=False)
        h = b.op("Relu", [h], f"/{p}/DenseReluDense/act/Relu")
        h = linear(b, h, f"{p}/DenseReluDense/wo", 4 * hidden, hidden, bias=False)
        x = b.op("Add", [x, h], f"/{p}/Add")
    x = rms_norm(b, x, "encoder/final_layer_norm", hidden, rms)
    b.op("Identity", [x], "/Identity_out", out=["last_hidden_state"])
    b.outp("last_hidden_state", shape=["batch", "seq", hidden])
    b.model(path)


def mlp_blocks(path, opset=13, dtype=F32):
    """Gemm/Conv/MatMul + activation, dropout, gather-slicing: the smaller fusions."""
    b = B(opset, dtype)
    x = b.inp("x", dtype, ["batch", 16])
    ids = b.inp("ids", I64, ["batch", "seq"])
    h = b.op("Gemm", [x, b.weight("fc1.weight", [32, 16]), b.weight("fc1.bias", [32])], "/fc1/Gemm", transB=1)
    h = b.op("Relu", [h], "/act1/Relu")
    h = b.op("Gemm", [h, b.weight("fc2.weight", [32, 32]), b.weight("fc2.bias", [32])], "/fc2/Gemm", transB=1)
    h = b.op("Sigmoid", [h], "/act2/Sigmoid")
    h = b.op("MatMul", [h, b.weight("fc3.weight", [32, 32])], "/fc3/MatMul")
    h = b.op("Relu", [h], "/act3/Relu")
    b.op("Identity", [h], "/out/Identity", out=["y"])
    b.outp("y", shape=["batch", 32])
    img = b.inp("img", dtype, ["batch", 3, 16, 16])
    c = b.op("Conv", [img, b.weight("conv.weight", [8, 3, 3, 3]), b.weight("conv.bias", [8])], "/conv/Conv",
             kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    c = b.op("Relu", [c], "/conv/Relu")
    c = b.op("Conv", [c, b.weight("conv2.weight", [8, 8, 3, 3])], "/conv2/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    c = b.op("Add", [c, b.weight("conv2.bias_b", [1, 8, 1, 1])], "/conv2/Add")
    c = b.op("Relu", [c], "/conv2/Relu")
    c = b.op("Conv", [c, b.weight("conv3.weight", [8, 8, 1, 1])], "/conv3/Conv", kernel_shape=[1, 1])
    c = b.op("LeakyRelu", [c], "/conv3/LeakyRelu", alpha=0.1)
    b.op("Identity", [c], "/out/Identity_1", out=["z"])
    b.outp("z", shape=["batch", 8, 16, 16])
    # shape -> gather(0), gather(1), gather(2) as GatherSliceToSplit / GatherToSlice would see them
    sh = b.op("Shape", [ids], "/s/Shape")
    g0 = b.op("Gather", [sh, b.const(0, I64)], "/s/Gather", axis=0)
    g1 = b.op("Gather", [sh, b.const(1, I64)], "/s/Gather_1", axis=0)
    rng = b.op("Range", [b.const(0, I64), g1, b.const(1, I64)], "/s/Range")
    e = b.op("Gather", [sh, rng], "/s/Gather_2", axis=0)
    cc = b.op("Concat", [b.unsq(g0, [0], "/s/Unsqueeze"), b.unsq(g1, [0], "/s/Unsqueeze_1")], "/s/Concat", axis=0)
    b.op("Identity", [cc], "/s/Identity", out=["shape_out"])
    b.outp("shape_out", I64, [2])
    b.op("Identity", [e], "/s/Identity_1", out=["range_out"])
    b.outp("range_out", I64, ["n"])
    # qkv [B, S, 3*H] -> reshape [B, S, 3, H] -> gather on axis 2 (GatherSliceToSplit)
    qkv = b.inp("qkv", dtype, ["batch", "seq", 24])
    r = b.op("Reshape", [qkv, b.const([0, 0, 3, 8], I64)], "/qkv/Reshape")
    outs = []
    for j in range(3):
        outs.append(b.op("Gather", [r, b.const(j, I64)], f"/qkv/Gather_{j}", axis=2))
    a = b.op("Add", [outs[0], outs[1]], "/qkv/Add")
    a = b.op("Mul", [a, outs[2]], "/qkv/Mul")
    b.op("Identity", [a], "/qkv/Identity", out=["qkv_out"])
    b.outp("qkv_out", shape=["batch", "seq", 8])
    # bias + dropout + residual (BiasDropoutFusion needs training-mode dropout; inference leaves it)
    dr = b.inp("dr", dtype, ["batch", "seq", 8])
    d = b.op("Add", [dr, b.weight("drop.bias", [8])], "/drop/Add")
    d = b.op("Dropout", [d], "/drop/Dropout")
    d = b.op("Add", [d, dr], "/drop/Add_1")
    b.op("Identity", [d], "/drop/Identity", out=["drop_out"])
    b.outp("drop_out", shape=["batch", "seq", 8])
    b.model(path)


def skip_ln(path, bias_first=True, fmt=1, dims=("batch", "seq", 16), layers=3):
    """Bias Add + residual Add + LayerNormalization (the SkipLayerNorm formats), with the bias
    on either side of the Add, and a CPU-only Unique so that the placement is logged."""
    b = B(17)
    x = b.inp("x", F32, list(dims))
    for i in range(layers):
        p = f"l{i}"
        mm = b.op("MatMul", [x, b.weight(f"{p}.W", [16, 16])], f"/{p}/dense/MatMul")
        bias = b.weight(f"{p}.b", [16])
        ab = b.op("Add", [bias, mm] if bias_first else [mm, bias], f"/{p}/dense/Add")
        s = b.op("Add", [ab, x] if fmt == 1 else [x, ab], f"/{p}/Add")
        x = layer_norm(b, s, f"{p}/LayerNorm", 16, "op")
    b.op("Identity", [x], "/out/Identity", out=["y"])
    b.outp("y", shape=list(dims))
    u = b.inp("u", F32, [5])
    b.op("Unique", [u], "/Unique", out=["uo"])
    b.outp("uo", shape=["n"])
    b.model(path)


def all_probes(out):
    os.makedirs(out, exist_ok=True)
    probes = {
        # BERT-like encoders
        "bert.ts.op12.ln-decomposed.f32": lambda p: bert(p, opset=12),
        "bert.ts.op13.ln-decomposed.f32": lambda p: bert(p, opset=13),
        "bert.ts.op14.ln-decomposed-mul.f32": lambda p: bert(p, opset=14, ln="decomposed-mul", scale="mul"),
        "bert.ts.op13.ln-decomposed.f16": lambda p: bert(p, opset=13, dtype=F16),
        "bert.ts.op13.ln-decomposed-cast.f16": lambda p: bert(p, opset=13, dtype=F16, ln="decomposed-cast"),
        "bert.ts.op17.ln-op.f32": lambda p: bert(p, opset=17, ln="op"),
        "bert.ts.op17.ln-op.f16": lambda p: bert(p, opset=17, ln="op", dtype=F16),
        "bert.dynamo.op18.ln-op.f32": lambda p: bert(p, opset=18, ln="op", shapes="const"),
        "bert.op18.ln-decomposed.f32": lambda p: bert(p, opset=18, shapes="zero"),
        "bert.op20.ln-op.gelu-op.f32": lambda p: bert(p, opset=20, ln="op", act="op"),
        "bert.op20.ln-decomposed.gelu-erf.f32": lambda p: bert(p, opset=20, ln="decomposed"),
        "distilbert.op13.ln-decomposed.f32": lambda p: bert(p, opset=13, mask="where", token_type=False),
        "distilbert.op17.ln-op.f16": lambda p: bert(p, opset=17, ln="op", mask="where", token_type=False, dtype=F16),
        "roberta.op14.tanh-gelu.f32": lambda p: bert(p, opset=14, act="tanh", transpose_k=False),
        "bert.noembed.op13.f32": lambda p: bert(p, opset=13, embed=False),
        "vit.op17.ln-op.f32": lambda p: vit(p, opset=17),
        "vit.op13.ln-decomposed.f32": lambda p: vit(p, opset=13, ln="decomposed"),
        "vit.op17.ln-op.f16": lambda p: vit(p, opset=17, dtype=F16),
        "whisper-enc.op17.f32": lambda p: whisper_enc(p),
        "whisper-enc.op14.ln-decomposed.f16": lambda p: whisper_enc(p, opset=14, dtype=F16, ln="decomposed"),
        # decoders
        "gpt2.ts.op13.ln-decomposed.f32": lambda p: gpt2(p, opset=13, ln="decomposed"),
        "gpt2.ts.op17.ln-op.f32": lambda p: gpt2(p, opset=17, ln="op"),
        "gpt2.ts.op17.ln-op.f16": lambda p: gpt2(p, opset=17, ln="op", dtype=F16),
        "gpt2.op14.nopast.erf.f32": lambda p: gpt2(p, opset=14, ln="decomposed", act="erf", past=False),
        "llama.ts.op14.rms-pow.f32": lambda p: llama(p, opset=14),
        "llama.ts.op14.rms-cast.f16": lambda p: llama(p, opset=14, dtype=F16, rms="cast"),
        "llama.op17.rms-recip.f32": lambda p: llama(p, opset=17, rms="recip", rot="split"),
        "llama.op17.rms-cast-recip.f16": lambda p: llama(p, opset=17, dtype=F16, rms="cast-recip", mask="mul"),
        "llama.dynamo.op18.rms-pow.f32": lambda p: llama(p, opset=18, shapes="zero"),
        "qwen.op18.rms-cast.f16": lambda p: llama(p, opset=18, dtype=F16, rms="cast", shapes="const"),
        "phi.op14.rms-pow.gelu-tanh.f32": lambda p: llama(p, opset=14, act="tanh", kv_heads=4),
        "llama.op23.rmsop.f32": lambda p: llama(p, opset=23, rms="rmsop", shapes="zero"),
        "llama.op17.simplified-op.f16": lambda p: llama(p, opset=17, dtype=F16, rms="op"),
        "t5-enc.op13.rms-pow.f32": lambda p: t5_enc(p),
        "t5-enc.op13.rms-cast.f16": lambda p: t5_enc(p, dtype=F16, rms="cast"),
        # SkipLayerNorm formats (ORT 1.25 added the bias-first form)
        "skipln.bias-first.f1": lambda p: skip_ln(p, True, 1),
        "skipln.bias-first.f2": lambda p: skip_ln(p, True, 2),
        "skipln.bias-second.f1": lambda p: skip_ln(p, False, 1),
        "skipln.bias-second.f2.static": lambda p: skip_ln(p, False, 2, dims=(2, 4, 16)),
        # small fusions
        "blocks.op13.f32": lambda p: mlp_blocks(p, opset=13),
        "blocks.op17.f16": lambda p: mlp_blocks(p, opset=17, dtype=F16),
    }
    for name, make in probes.items():
        make(os.path.join(out, f"{name}.onnx"))
    print(f"{len(probes)} probe models -> {out}")


if __name__ == "__main__":
    all_probes(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/probes")
