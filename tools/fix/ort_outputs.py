#!/usr/bin/env python3
"""Runs two ONNX models on CPU onnxruntime with the same random inputs and says whether every
output is bit-identical. Used by tests/it/fix.rs to prove that `--fix` kept the model's numerics.

    python3 tools/fix/ort_outputs.py BEFORE.onnx AFTER.onnx [--seed N] [--runs K]

Prints one JSON object: {"equal": bool, "outputs": n, "runs": k, "differ": [names], "ort": version}.
Exit 0: equal; 1: some output differs; 2: a session failed; 3: onnxruntime or numpy is missing.
Symbolic dims are bound to small sizes (batch 1, sequence 3, past 2, else 0; a `a + b` expression
is the sum); integer inputs get values in [0, 4) (attention masks: all ones) so that ids index any
table. When the model before the fix cannot run with its declared past key/value shapes (the tiny
mobius gemma4 exports declare one shape for layers with different KV heads), both models get the
shapes their attention nodes read (derived with `onnx` shape inference) before the comparison.
"""
import atexit
import json
import os
import shutil
import sys
import tempfile

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:  # pragma: no cover
    print(json.dumps({"error": f"missing: {e}"}))
    sys.exit(3)

SIZES = {"batch": 1, "batch_size": 1}
# Past-sequence sizes tried in order: some decoders (sliding-window layers) only run with no past.
PASTS = [2, 0]
PAST = [PASTS[0]]


def dim_value(d):
    if isinstance(d, int) and d >= 0:
        return d
    if d is None:
        return 2
    name = str(d)
    if "+" in name:
        return sum(dim_value(p.strip()) for p in name.split("+"))
    if name in SIZES:
        return SIZES[name]
    if "past" in name:
        return PAST[0]
    if "seq" in name or "len" in name:
        return 3
    return 2


TYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_,
}


# Shapes that replace declared ones (see `kv_shapes`), by input name.
OVERRIDES = {}


def kv_shapes(path):
    """Past key/value inputs shaped as their attention node reads them: some exports declare one
    shape for every layer while a layer has another KV head count or head size. Needs `onnx`."""
    try:
        import onnx
        from onnx import helper, shape_inference
    except ImportError:
        return {}
    m = shape_inference.infer_shapes(onnx.load(path))
    dims = {v.name: [d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim]
            for v in list(m.graph.value_info) + list(m.graph.input)}
    inputs = {i.name for i in m.graph.input}
    out = {}
    for n in m.graph.node:
        past = {"Attention": (4, 5), "GroupQueryAttention": (3, 4)}.get(n.op_type)
        if past is None:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        kv = attrs.get("kv_num_heads")
        key = dims.get(n.input[1]) if len(n.input) > 1 else None
        if not kv or not key or len(key) != 3 or not isinstance(key[2], int):
            continue
        for k in past:
            if k < len(n.input) and n.input[k] in inputs:
                batch, _, seq, _ = dims[n.input[k]]
                out[n.input[k]] = [batch, kv, seq, key[2] // kv]
    return out


def relaxed(path, overrides, tmp):
    """A copy of the model whose declared input shapes are `overrides` (the same edit is made to
    both models compared, so the comparison stays before-vs-after)."""
    import onnx
    m = onnx.load(path)
    for i in m.graph.input:
        if i.name in overrides:
            shape = i.type.tensor_type.shape
            for d, v in zip(shape.dim, overrides[i.name]):
                if isinstance(v, int):
                    d.Clear(); d.dim_value = v
                else:
                    d.Clear(); d.dim_param = v
    out = os.path.join(tmp, os.path.basename(path) + (".b" if os.path.exists(os.path.join(tmp, os.path.basename(path))) else ""))
    onnx.save(m, out)
    return out


def feeds(sess, rng):
    out = {}
    for i in sess.get_inputs():
        shape = [dim_value(d) for d in OVERRIDES.get(i.name, i.shape)]
        t = TYPES.get(i.type)
        if t is None:
            raise SystemExit(f"unsupported input type {i.type}")
        if "mask" in i.name:
            out[i.name] = np.ones(shape, dtype=t)
        elif np.issubdtype(t, np.integer):
            out[i.name] = rng.integers(0, 4, size=shape).astype(t)
        elif t is np.bool_:
            out[i.name] = rng.integers(0, 2, size=shape).astype(t)
        else:
            out[i.name] = rng.standard_normal(shape).astype(t)
    return out


def main():
    args = sys.argv[1:]
    seed, runs = 0, 3
    if "--seed" in args:
        k = args.index("--seed"); seed = int(args[k + 1]); del args[k:k + 2]
    if "--runs" in args:
        k = args.index("--runs"); runs = int(args[k + 1]); del args[k:k + 2]
    a, b = args
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sa = ort.InferenceSession(a, so, providers=["CPUExecutionProvider"])
        sb = ort.InferenceSession(b, so, providers=["CPUExecutionProvider"])
    except Exception as e:
        print(json.dumps({"error": f"session: {e}"}))
        sys.exit(2)
    names = [o.name for o in sa.get_outputs()]
    # The first binding of past sizes (declared shapes, then KV shapes as the attention nodes
    # read them) under which the model before the fix runs.
    attempts = [({}, past) for past in PASTS]
    attempts += [(kv_shapes(a), past) for past in PASTS]
    tmp = tempfile.mkdtemp(prefix="ort_outputs_")
    atexit.register(shutil.rmtree, tmp, True)
    for overrides, past in attempts:
        OVERRIDES.clear()
        OVERRIDES.update(overrides)
        PAST[0] = past
        try:
            if overrides:
                sa = ort.InferenceSession(relaxed(a, overrides, tmp), so, providers=["CPUExecutionProvider"])
                sb = ort.InferenceSession(relaxed(b, overrides, tmp), so, providers=["CPUExecutionProvider"])
            sa.run(None, feeds(sa, np.random.default_rng(seed)))
            break
        except Exception as e:
            error = e
    else:
        print(json.dumps({"error": f"run: {error}"}))
        sys.exit(2)
    rng = np.random.default_rng(seed)
    differ = set()
    for _ in range(runs):
        f = feeds(sa, rng)
        try:
            ya = sa.run(None, f)
            yb = sb.run(names, f)
        except Exception as e:
            print(json.dumps({"error": f"run: {e}"}))
            sys.exit(2)
        for n, x, y in zip(names, ya, yb):
            x, y = np.asarray(x), np.asarray(y)
            if x.shape != y.shape or x.dtype != y.dtype or x.tobytes() != y.tobytes():
                differ.add(n)
    print(json.dumps({"equal": not differ, "outputs": len(names), "runs": runs,
                      "differ": sorted(differ), "past": PAST[0],
                      "overrides": OVERRIDES, "ort": ort.__version__}))
    sys.exit(0 if not differ else 1)


if __name__ == "__main__":
    main()
