#!/usr/bin/env python3
"""Rule fixtures for OL301/OL303/OL102/OL201, written the way exporters write these graphs:
TorchScript-style decoders (`bsz, q_len, _ = hidden.size()` taken before the projections, then
`Shape → Gather → Unsqueeze → Concat → Reshape` around them; GPT-2's Conv1D `view(-1, k)` + Gemm;
the `expand` pattern with `Where(Equal(shape, -1))`), scaled Q·Kᵀ scores plus a causal mask with
a rotary-embedding path beside it, and ONNX `Attention` at opsets 23/24 with and without
`is_causal`.

  python3 tools/probes/gen_findings.py OUT_DIR      # writes OUT_DIR/<CODE>/<name>.onnxtxt
                                                     # and OUT_DIR/models/<name>.onnx

The text form is what tests/it/rules.rs reads (a header of `# key: value` lines, then the model
in ONNX's textual syntax); the binary models are for tools/probes/apply_fixes.py.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, printer

F32, F16, I64, BOOL = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.BOOL


class G:
    def __init__(self, opset, dtype=F32):
        self.opset, self.dtype = opset, dtype
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.k = 0

    def name(self, base):
        self.k += 1
        return f"{base}_{self.k}"

    def const(self, value, dtype=I64, name=None):
        np_t = {F32: np.float32, F16: np.float16, I64: np.int64, BOOL: np.bool_}[dtype]
        n = name or self.name("c")
        self.inits.append(numpy_helper.from_array(np.array(value, dtype=np_t), n))
        return n

    def weight(self, shape, name=None):
        n = name or self.name("w")
        arr = ((np.arange(int(np.prod(shape))) % 11 - 5) * 0.02).reshape(shape)
        np_t = np.float16 if self.dtype == F16 else np.float32
        self.inits.append(numpy_helper.from_array(arr.astype(np_t), n))
        return n

    def op(self, op, ins, name=None, n_out=1, **attrs):
        name = name or self.name(op.lower())
        outs = [f"{name}_out{i}" if n_out > 1 else f"{name}_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def inp(self, name, dtype, shape):
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def out(self, value, dtype=None, shape=None):
        self.outputs.append(helper.make_tensor_value_info(value, self.dtype if dtype is None else dtype, shape))

    def model(self, ir=8):
        g = helper.make_graph(self.nodes, "main", self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)], ir_version=ir)
        onnx.checker.check_model(m)
        return m

    # TorchScript idioms.
    def dim(self, x, i, prefix):
        s = self.op("Shape", [x], f"{prefix}/Shape_{i}")
        return self.op("Gather", [s, self.const(i)], f"{prefix}/Gather_{i}", axis=0)

    def unsq(self, x, prefix):
        return self.op("Unsqueeze", [x, self.const([0])], self.name(f"{prefix}/Unsqueeze"))

    def linear(self, x, k, n, prefix):
        y = self.op("MatMul", [x, self.weight([k, n])], f"{prefix}/MatMul")
        return self.op("Add", [self.weight([n]), y], f"{prefix}/Add")


def attention_layer(g, hidden, mask, heads, hd, prefix, rotary=None):
    """`bsz, q_len, _ = hidden.size()`, then q/k/v views, scores, softmax, merge heads."""
    width = heads * hd
    bsz = g.unsq(g.dim(hidden, 0, prefix), prefix)
    q_len = g.unsq(g.dim(hidden, 1, prefix), prefix)
    view = g.op("Concat", [bsz, q_len, g.const([heads]), g.const([hd])], f"{prefix}/Concat", axis=0)
    qkv = []
    for which in ("q", "k", "v"):
        p = g.linear(hidden, width, width, f"{prefix}/{which}_proj")
        r = g.op("Reshape", [p, view], f"{prefix}/{which}/Reshape")
        qkv.append(g.op("Transpose", [r], f"{prefix}/{which}/Transpose", perm=[0, 2, 1, 3]))
    q, k, v = qkv
    if rotary is not None:
        cos, sin = rotary
        # q * cos + rotate_half(q) * sin, as exported: Slice halves, Neg, Concat.
        outs = []
        for name, x in (("q", q), ("k", k)):
            a = g.op("Slice", [x, g.const([0]), g.const([hd // 2]), g.const([3])], f"{prefix}/rot_{name}/Slice")
            b = g.op("Slice", [x, g.const([hd // 2]), g.const([hd]), g.const([3])], f"{prefix}/rot_{name}/Slice_1")
            nb = g.op("Neg", [b], f"{prefix}/rot_{name}/Neg")
            rh = g.op("Concat", [nb, a], f"{prefix}/rot_{name}/Concat", axis=-1)
            x1 = g.op("Mul", [x, cos], f"{prefix}/rot_{name}/Mul")
            x2 = g.op("Mul", [rh, sin], f"{prefix}/rot_{name}/Mul_1")
            outs.append(g.op("Add", [x1, x2], f"{prefix}/rot_{name}/Add"))
        q, k = outs
    kt = g.op("Transpose", [k], f"{prefix}/Transpose_k", perm=[0, 1, 3, 2])
    scores = g.op("MatMul", [q, kt], f"{prefix}/MatMul_qk")
    scaled = g.op("Div", [scores, g.const(float(np.sqrt(hd)), g.dtype)], f"{prefix}/Div")
    masked = g.op("Add", [scaled, mask], f"{prefix}/Add_mask")
    probs = g.op("Softmax", [masked], f"{prefix}/Softmax", axis=-1)
    ctx = g.op("MatMul", [probs, v], f"{prefix}/MatMul_pv")
    t = g.op("Transpose", [ctx], f"{prefix}/Transpose_out", perm=[0, 2, 1, 3])
    merge = g.op("Concat", [bsz, q_len, g.const([width])], f"{prefix}/Concat_1", axis=0)
    r = g.op("Reshape", [t, merge], f"{prefix}/Reshape_out")
    return g.linear(r, width, width, f"{prefix}/o_proj")


def causal_mask(g, ids, cast_to_cpu=False):
    """TorchScript's causal mask: positions → LessOrEqual → Where(0, -inf) → [1, 1, S, S]."""
    s = g.op("Shape", [ids], "mask/Shape")
    n = g.op("Gather", [s, g.const(1)], "mask/Gather", axis=0)
    r = g.op("Range", [g.const(0), n, g.const(1)], "mask/Range")
    if cast_to_cpu:
        # An int64 → int32 → int64 round trip through Cast-24 (no CUDA kernel in ORT 1.24.4).
        r = g.op("Cast", [g.op("Cast", [r], "mask/Cast32", to=TensorProto.INT32)], "mask/Cast64", to=TensorProto.INT64)
    row = g.op("Unsqueeze", [r, g.const([1])], "mask/Unsqueeze_row")
    col = g.op("Unsqueeze", [r, g.const([0])], "mask/Unsqueeze_col")
    allowed = g.op("LessOrEqual", [col, row], "mask/LessOrEqual")
    bias = g.op("Where", [allowed, g.const(0.0, g.dtype), g.const(-10000.0, g.dtype)], "mask/Where")
    return g.op("Unsqueeze", [bias, g.const([0, 1])], "mask/Unsqueeze_bias")


def torchscript_decoder(opset=17, layers=1, rotary=False, cast_to_cpu=False):
    g = G(opset)
    ids = g.inp("input_ids", I64, ["batch", "seq"])
    emb = g.op("Gather", [g.weight([32, 16]), ids], "embed/Gather", axis=0)
    mask = causal_mask(g, ids, cast_to_cpu)
    rot = None
    if rotary:
        pos = g.op("Range", [g.const(0), g.dim(ids, 1, "rotary"), g.const(1)], "rotary/Range")
        cos = g.op("Gather", [g.weight([64, 8]), pos], "rotary/Gather_cos", axis=0)
        sin = g.op("Gather", [g.weight([64, 8]), pos], "rotary/Gather_sin", axis=0)
        rot = (cos, sin)
    h = emb
    for i in range(layers):
        h = g.op("Add", [h, attention_layer(g, h, mask, 2, 8, f"layers.{i}/attn", rot)], f"layers.{i}/Add")
    g.out(h, shape=["batch", "seq", 16])
    return g.model()


def gpt2_conv1d():
    """GPT-2's Conv1D: `x.view(-1, x.size(-1))`, Gemm, `view(size_out)` with size_out from x."""
    g = G(17)
    x = g.inp("hidden", F32, ["batch", "seq", 16])
    s = g.op("Shape", [x], "c_fc/Shape")
    last = g.op("Squeeze", [g.op("Slice", [s, g.const([-1]), g.const([2**62]), g.const([0])], "c_fc/Slice")], "c_fc/Squeeze")
    flat = g.op("Concat", [g.const([-1]), g.op("Unsqueeze", [last, g.const([0])], "c_fc/Unsqueeze")], "c_fc/Concat", axis=0)
    x2 = g.op("Reshape", [x, flat], "c_fc/Reshape")
    y = g.op("Gemm", [x2, g.weight([16, 32]), g.weight([32])], "c_fc/Gemm")
    b = g.op("Unsqueeze", [g.dim(x, 0, "c_fc"), g.const([0])], "c_fc/Unsqueeze_1")
    t = g.op("Unsqueeze", [g.dim(x, 1, "c_fc"), g.const([0])], "c_fc/Unsqueeze_2")
    out = g.op("Concat", [b, t, g.const([32])], "c_fc/Concat_1", axis=0)
    g.out(g.op("Reshape", [y, out], "c_fc/Reshape_1"), shape=["batch", "seq", 32])
    return g.model()


def expand_pattern():
    """TorchScript's `expand`: the target's -1 entries replaced through Where(Equal(shape, -1))."""
    g = G(17)
    m = g.inp("attention_mask", I64, ["batch", "seq"])
    x = g.op("Unsqueeze", [g.op("Unsqueeze", [m, g.const([1])], "Unsqueeze_1"), g.const([2])], "Unsqueeze_2")
    b = g.op("Unsqueeze", [g.dim(m, 0, "expand"), g.const([0])], "expand/Unsqueeze_b")
    t = g.op("Unsqueeze", [g.dim(m, 1, "expand"), g.const([0])], "expand/Unsqueeze_t")
    target = g.op("Concat", [b, g.const([1]), t, t], "expand/Concat", axis=0)
    shape_of = g.op("Shape", [target], "expand/Shape_t")
    minus = g.op("Mul", [g.op("ConstantOfShape", [shape_of], "expand/ConstantOfShape",
                              value=numpy_helper.from_array(np.array([1], np.int64))), g.const(-1)], "expand/Mul")
    eq = g.op("Equal", [target, minus], "expand/Equal")
    ones = g.op("ConstantOfShape", [shape_of], "expand/ConstantOfShape_1", value=numpy_helper.from_array(np.array([1], np.int64)))
    fixed = g.op("Where", [eq, ones, target], "expand/Where")
    g.out(g.op("Expand", [x, fixed], "expand/Expand"), dtype=I64, shape=["batch", 1, "seq", "seq"])
    return g.model()


def reshape_allowzero():
    """A Reshape with allowzero = 1: 0 means an empty dim there, so only -1 can stand in."""
    g = G(17)
    x = g.inp("x", F32, ["n", 64])
    n = g.op("Unsqueeze", [g.dim(x, 0, "az"), g.const([0])], "az/Unsqueeze")
    shp = g.op("Concat", [n, g.const([4]), g.const([16])], "az/Concat", axis=0)
    g.out(g.op("Reshape", [x, shp], "az/Reshape", allowzero=1), shape=["n", 4, 16])
    return g.model(ir=8)


def attention_op(opset, is_causal, dtype=F16, causal_chain=False):
    """ONNX Attention (3-D inputs) after q/k/v projections, with an additive float mask built
    from the attention_mask by compare → Where (and, with `causal_chain`, TorchScript's causal
    mask from the sequence length added to it)."""
    g = G(opset, dtype)
    x = g.inp("hidden", dtype, ["batch", "seq", 16])
    am = g.inp("attention_mask", I64, ["batch", "seq"])
    keep = g.op("Equal", [am, g.const(1)], "mask/Equal")
    pad = g.op("Where", [keep, g.const(0.0, dtype), g.const(-10000.0, dtype)], "mask/Where_pad")
    bias4 = g.op("Unsqueeze", [pad, g.const([1, 2])], "mask/Unsqueeze")
    if causal_chain:
        bias4 = g.op("Add", [bias4, causal_mask(g, am)], "mask/Add")
    q = g.op("MatMul", [x, g.weight([16, 16])], "q_proj/MatMul")
    k = g.op("MatMul", [x, g.weight([16, 8])], "k_proj/MatMul")
    v = g.op("MatMul", [x, g.weight([16, 8])], "v_proj/MatMul")
    attrs = {"q_num_heads": 2, "kv_num_heads": 1}
    if is_causal:
        attrs["is_causal"] = 1
    y = g.op("Attention", [q, k, v, bias4], "attn/Attention", **attrs)
    g.out(g.op("MatMul", [y, g.weight([16, 16])], "o_proj/MatMul"), shape=["batch", "seq", 16])
    return g.model(ir=10)


def llama_torchscript(layers=2, heads=4, kv_heads=2, hd=8):
    """An evaluation model, not a fixture: a Llama-style decoder as the TorchScript exporter
    writes it, with a KV cache (past_key/past_value inputs, Concat), grouped-query attention
    (repeat_kv: Unsqueeze → Expand → Reshape), rotary embeddings from a cos/sin cache sliced to
    the total length, and RMSNorm decomposed (Pow → ReduceMean → Add → Sqrt → Div)."""
    g = G(17)
    width, kv_width = heads * hd, kv_heads * hd
    ids = g.inp("input_ids", I64, ["batch", "seq"])
    h = g.op("Gather", [g.weight([32, width]), ids], "embed/Gather", axis=0)
    seq = g.dim(ids, 1, "pos")
    outs = []
    for i in range(layers):
        p = f"layers.{i}"
        pk = g.inp(f"past_key.{i}", F32, ["batch", kv_heads, "past", hd])
        pv = g.inp(f"past_value.{i}", F32, ["batch", kv_heads, "past", hd])
        past = g.dim(pk, 2, f"{p}/past")
        total = g.op("Add", [past, seq], f"{p}/Add_total")
        # RMSNorm.
        var = g.op("ReduceMean", [g.op("Pow", [h, g.const(2.0, F32)], f"{p}/Pow")], f"{p}/ReduceMean", axes=[-1], keepdims=1)
        x = g.op("Div", [h, g.op("Sqrt", [g.op("Add", [var, g.const(1e-6, F32)], f"{p}/Add_eps")], f"{p}/Sqrt")], f"{p}/Div_norm")
        x = g.op("Mul", [x, g.weight([width])], f"{p}/Mul_norm")
        bsz = g.unsq(g.dim(x, 0, p), p)
        q_len = g.unsq(g.dim(x, 1, p), p)
        def heads_view(y, n, tag):
            shp = g.op("Concat", [bsz, q_len, g.const([n]), g.const([hd])], f"{p}/{tag}/Concat", axis=0)
            r = g.op("Reshape", [y, shp], f"{p}/{tag}/Reshape")
            return g.op("Transpose", [r], f"{p}/{tag}/Transpose", perm=[0, 2, 1, 3])
        q = heads_view(g.op("MatMul", [x, g.weight([width, width])], f"{p}/q_proj"), heads, "q")
        k = heads_view(g.op("MatMul", [x, g.weight([width, kv_width])], f"{p}/k_proj"), kv_heads, "k")
        v = heads_view(g.op("MatMul", [x, g.weight([width, kv_width])], f"{p}/v_proj"), kv_heads, "v")
        # Rotary: cos[:total], then the last q_len positions.
        end = g.op("Unsqueeze", [total, g.const([0])], f"{p}/Unsqueeze_total")
        cos = g.op("Slice", [g.weight([64, hd]), g.const([0]), end, g.const([0])], f"{p}/Slice_cos")
        sin = g.op("Slice", [g.weight([64, hd]), g.const([0]), end, g.const([0])], f"{p}/Slice_sin")
        start = g.op("Unsqueeze", [past, g.const([0])], f"{p}/Unsqueeze_past")
        cos = g.op("Slice", [cos, start, end, g.const([0])], f"{p}/Slice_cos_1")
        sin = g.op("Slice", [sin, start, end, g.const([0])], f"{p}/Slice_sin_1")
        rot = []
        for name, t in (("q", q), ("k", k)):
            a = g.op("Slice", [t, g.const([0]), g.const([hd // 2]), g.const([3])], f"{p}/rot_{name}/Slice")
            b = g.op("Slice", [t, g.const([hd // 2]), g.const([hd]), g.const([3])], f"{p}/rot_{name}/Slice_1")
            rh = g.op("Concat", [g.op("Neg", [b], f"{p}/rot_{name}/Neg"), a], f"{p}/rot_{name}/Concat", axis=-1)
            rot.append(g.op("Add", [g.op("Mul", [t, cos], f"{p}/rot_{name}/Mul"),
                                    g.op("Mul", [rh, sin], f"{p}/rot_{name}/Mul_1")], f"{p}/rot_{name}/Add"))
        q, k = rot
        k = g.op("Concat", [pk, k], f"{p}/Concat_k", axis=2)
        v = g.op("Concat", [pv, v], f"{p}/Concat_v", axis=2)
        outs += [k, v]
        # repeat_kv: x[:, :, None].expand(b, kvh, n_rep, s, d).reshape(b, kvh * n_rep, s, d).
        def repeat(t, tag):
            u = g.op("Unsqueeze", [t, g.const([2])], f"{p}/{tag}/Unsqueeze")
            b_ = g.unsq(g.dim(t, 0, f"{p}/{tag}"), f"{p}/{tag}")
            s_ = g.unsq(g.dim(t, 2, f"{p}/{tag}"), f"{p}/{tag}")
            tgt = g.op("Concat", [b_, g.const([kv_heads]), g.const([heads // kv_heads]), s_, g.const([hd])], f"{p}/{tag}/Concat", axis=0)
            e = g.op("Expand", [u, tgt], f"{p}/{tag}/Expand")
            shp = g.op("Concat", [b_, g.const([heads]), s_, g.const([hd])], f"{p}/{tag}/Concat_1", axis=0)
            return g.op("Reshape", [e, shp], f"{p}/{tag}/Reshape")
        k, v = repeat(k, "repeat_k"), repeat(v, "repeat_v")
        scores = g.op("Div", [g.op("MatMul", [q, g.op("Transpose", [k], f"{p}/Transpose_kt", perm=[0, 1, 3, 2])], f"{p}/MatMul_qk"),
                              g.const(float(np.sqrt(hd)), F32)], f"{p}/Div")
        probs = g.op("Softmax", [scores], f"{p}/Softmax", axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v], f"{p}/MatMul_pv")], f"{p}/Transpose_out", perm=[0, 2, 1, 3])
        merge = g.op("Concat", [bsz, q_len, g.const([width])], f"{p}/Concat_out", axis=0)
        o = g.op("MatMul", [g.op("Reshape", [ctx, merge], f"{p}/Reshape_out"), g.weight([width, width])], f"{p}/o_proj")
        h = g.op("Add", [h, o], f"{p}/Add_residual")
    g.out(h, shape=["batch", "seq", width])
    for i, o in enumerate(outs):
        g.out(o, shape=["batch", kv_heads, "total", hd])
    return g.model()


def write_text(path, header, model):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for line in header:
            f.write(f"# {line}\n")
        f.write(printer.to_text(model))
        f.write("\n")


def main():
    out = sys.argv[1]
    gen = "tools/probes/gen_findings.py"
    cases = [
        ("OL301/torchscript_decoder", torchscript_decoder(), [
            "ort: 1.31.1", "rules: zero-cost=warn", "dims: batch=1, seq=2048",
            f"A TorchScript decoder layer ({gen}): `bsz, q_len, _ = hidden.size()` before the q/k/v",
            "projections; every view is proven ([0, 0, 2, 8], [0, 0, 16]). Nothing is copied at",
            "1.31.1, so the findings are in the zero-cost group (enabled here)."]),
        ("OL301/ok_torchscript_decoder_zero_cost", torchscript_decoder(), [
            "ort: 1.31.1",
            "The same decoder by default: no chain causes a copy, so OL301 stays quiet."]),
        ("OL301/torchscript_decoder_copies", torchscript_decoder(opset=24), [
            "ort: 1.24.4", "dims: batch=1, seq=2048",
            "The decoder at opset 24 on ORT 1.24.4: Shape-24/Gather/Concat of the chains run on the",
            "CPU (no CUDA kernel for these since-versions), so chains cause copies: warn by default."]),
        ("OL301/gpt2_conv1d_gemm", gpt2_conv1d(), [
            "ort: 1.31.1", "rules: zero-cost=warn",
            "GPT-2's Conv1D: view(-1, k), Gemm, view(bsz, q_len, n). The first view is proven; the",
            "second splits batch·seq back into two dims, which no constant can express."]),
        ("OL301/expand_where_equal", expand_pattern(), [
            "ort: 1.31.1", "rules: zero-cost=warn",
            "TorchScript's expand: Where(Equal(shape, -1), 1, shape), evaluated (no dim is -1). Element",
            "2 broadcasts the input's 1 to seq: no constant can say that, and the finding says so."]),
        ("OL301/reshape_allowzero", reshape_allowzero(), [
            "ort: 1.31.1", "level: disable", "rules: zero-cost=warn",
            "allowzero = 1: 0 would mean an empty dim, so the copied dim becomes -1 (the only open one)."]),
        ("OL303/torchscript_scaled_scores_rotary", torchscript_decoder(opset=24, rotary=True, cast_to_cpu=True), [
            "ort: 1.24.4", "dims: batch=1, seq=2048",
            "Scaled Q·Kᵀ scores (Div) plus a causal mask, a rotary-embedding path beside them: the",
            "mask is the Where's output, the chain is the mask's, and the mask is the first value."]),
        ("OL303/attention_is_causal", attention_op(24, True, F32, causal_chain=True), [
            "ort: 1.25.1", "dims: batch=1, seq=2048",
            "ONNX Attention-24 that already has is_causal = 1 with a float padding mask: the help",
            "must not recommend is_causal = 1 again."]),
        ("OL303/attention_float_mask", attention_op(23, False, F32, causal_chain=True), [
            "ort: 1.25.1", "dims: batch=1, seq=2048",
            "ONNX Attention-23 without is_causal: padding and causal float masks from compare → Where."]),
        ("OL102/attention_first_release", attention_op(23, False), [
            "ort: 1.24.4", "dims: batch=1, seq=2048",
            "Attention-23 has no CUDA kernel in ORT 1.24.4; the finding names the first bundled",
            "release whose CUDA table has one for its since-version and types."]),
        ("OL201/attention_copies_bytes", attention_op(23, False), [
            "ort: 1.24.4", "dims: batch=1, seq=2048",
            "Copies around a CPU Attention: each has bytes_expr over the model's dims and its value at",
            "batch = 1, seq = 2048, and names the OL102 finding that causes it."]),
    ]
    # Evaluation models (tools/probes/apply_fixes.py), not rule fixtures.
    os.makedirs(os.path.join(out, "models"), exist_ok=True)
    onnx.save(llama_torchscript(), os.path.join(out, "models", "eval_llama_torchscript.onnx"))
    for name, model, header in cases:
        write_text(os.path.join(out, name + ".onnxtxt"), header, model)
        os.makedirs(os.path.join(out, "models"), exist_ok=True)
        onnx.save(model, os.path.join(out, "models", os.path.basename(name) + ".onnx"))


if __name__ == "__main__":
    main()
