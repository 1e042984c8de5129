#!/usr/bin/env python3
"""The fixture of tests/it/dq_matmul_nbits.rs: `DequantizeLinear(weight) -> MatMul` (or `Gemm`)
groups, and which of them ORT's `DQMatMulToMatMulNBits` rule (QDQSelectorActionTransformer)
turns into `com.microsoft` `MatMulNBits`, release by release, on the CPU and on CUDA.

  dq_matmul_nbits.py OUT_DIR --ort-root DIR --releases 1.22.0,...,1.31.1 [--oracle-releases 1.23.2,1.24.4,1.31.1]

`DIR/<release>` is a `pip install --no-deps --target` of the `onnxruntime` CPU wheel; the CUDA
sessions come from the stubbed-GPU oracle (../shared/oracle/ortstub.py, `ORTSTUB_PY` a Python
with numpy and onnx). Writes the models and `truth.json`: per CPU release and model the sorted
`op:name` of the session graph ORT saved at level `extended` (the fused node keeps the MatMul's
name, so the op tells them apart), and per oracle release and model the oracle's record at
`extended` (the CUDA sessions). From 1.27 a weight or scale initializer another node also reads
is not fused (onnxruntime PR 28326; `uint4_shared_dq`, `uint4_shared_scale`). The CPU wheels 1.19.2-1.21.1 fuse too (their error names the
transposed weight `w_T`) but fail to save the optimised model ("Data of TensorProto ... should be
stored in ... _ORT_MEM_ADDR_"), so they are not recorded. The float16 model is recorded on CUDA
only: on the CPU its `MatMul` is left to the inserted Casts, and from 1.25 the rule also takes
such a node no provider claimed (onnxruntime PR 27640), which the simulator does not model.
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

K, N = 64, 32
HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("ONNX_LINT_SHARED", os.path.join(HERE, "..", "..", "..", "shared"))


def model(name, wtype=T.UINT4, zp=True, block=32, axis=0, scale_t=T.FLOAT, op="MatMul", q_after=False,
          bias=False, explicit_axis=True, gemm_attrs=None, gemm_bias=False, shared=None, n=N):
    # `n`: the weight's columns (a square weight lets a `transB` Gemm be valid).
    rng = np.random.default_rng(0)
    lo, hi = {T.UINT4: (0, 15), T.INT4: (-8, 7), T.UINT8: (0, 255), T.INT8: (-128, 127)}[wtype]
    inits = [h.make_tensor("w", wtype, [K, n], rng.integers(lo, hi + 1, size=K * n).tolist())]
    if axis == 0 and block:
        sdims = [(K + block - 1) // block, n]
    elif axis == 1 or (axis == 0 and n == K and not block):
        sdims = [n]  # per channel (along axis 0 only with a square weight: [K] == [N])
    else:
        sdims = []
    count = int(np.prod(sdims)) if sdims else 1
    np_scale = np.float16 if scale_t == T.FLOAT16 else np.float32
    inits.append(h.make_tensor("s", scale_t, sdims, (rng.random(count) * 0.1 + 0.01).astype(np_scale).tolist()))
    dq_in = ["w", "s"]
    if zp:
        inits.append(h.make_tensor("z", wtype, sdims, [max(lo, min(hi, 3))] * count))
        dq_in.append("z")
    attrs = {}
    if explicit_axis:
        attrs["axis"] = axis
    if block and axis == 0:
        attrs["block_size"] = block
    nodes = [h.make_node("DequantizeLinear", dq_in, ["wd"], name="dq", **attrs)]
    if op == "MatMul":
        nodes.append(h.make_node("MatMul", ["x", "wd"], ["y0"], name="mm"))
        if shared == "dq":
            # one DQ read by two MatMuls: EnsureUniqueDQForNodeUnit gives the second its own copy
            nodes.append(h.make_node("MatMul", ["x", "wd"], ["y2"], name="mm2"))
        elif shared == "scale":
            # a second weight and DQ that share the first's scale and zero point
            inits.append(h.make_tensor("w2", wtype, [K, n], rng.integers(lo, hi + 1, size=K * n).tolist()))
            nodes.append(h.make_node("DequantizeLinear", ["w2"] + dq_in[1:], ["wd2"], name="dq2", **attrs))
            nodes.append(h.make_node("MatMul", ["x", "wd2"], ["y2"], name="mm2"))
    else:
        gin = ["x", "wd"]
        if gemm_bias:
            inits.append(nh.from_array(np.full(n, 0.5, dtype=np_scale), "gb"))
            gin.append("gb")
        nodes.append(h.make_node("Gemm", gin, ["y0"], name="mm", **(gemm_attrs or {})))
    last = "y0"
    if shared:
        nodes.append(h.make_node("Add", [last, "y2"], ["y3"], name="sum"))
        last = "y3"
    if bias:
        inits.append(nh.from_array(np.zeros(n, dtype=np_scale), "b"))
        nodes.append(h.make_node("Add", [last, "b"], ["y1"], name="add"))
        last = "y1"
    if q_after:
        inits.append(h.make_tensor("qs", T.FLOAT, [], [0.1]))
        inits.append(h.make_tensor("qz", T.UINT8, [], [128]))
        nodes.append(h.make_node("QuantizeLinear", [last, "qs", "qz"], ["yq"], name="q"))
        nodes.append(h.make_node("DequantizeLinear", ["yq", "qs", "qz"], ["y"], name="dqo"))
    else:
        nodes.append(h.make_node("Relu", [last], ["y"], name="relu"))
    xshape = [4, K] if op == "Gemm" else ["b", 4, K]
    yshape = [4, n] if op == "Gemm" else ["b", 4, n]
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", scale_t, xshape)],
                     [h.make_tensor_value_info("y", scale_t, yshape)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 21)], producer_name="dq_matmul_nbits.py")
    m.ir_version = 10
    onnx.checker.check_model(m, full_check=True)
    return m


MODELS = {
    "uint4_zp": {},
    "uint4_nozp": {"zp": False},
    "int4_zp": {"wtype": T.INT4},
    "int4_nozp": {"wtype": T.INT4, "zp": False},
    "uint4_bias": {"bias": True},
    "uint4_shared_dq": {"shared": "dq"},
    "uint4_shared_scale": {"shared": "scale"},
    "uint4_blk16": {"block": 16},
    "uint4_blk8": {"block": 8},
    "uint4_blk48": {"block": 48},
    "uint4_noaxis": {"explicit_axis": False},
    "uint4_q_after": {"q_after": True},
    "uint8_blk32": {"wtype": T.UINT8},
    "int8_blk32": {"wtype": T.INT8},
    "uint4_perchannel": {"axis": 1, "block": 0},
    "uint4_perchannel_axis0": {"axis": 0, "block": 0, "n": K},
    "uint4_pertensor_nozp": {"axis": 0, "block": 0, "zp": False},
    "uint4_pertensor": {"axis": 0, "block": 0},
    "uint4_gemm": {"op": "Gemm"},
    "uint4_gemm_bias": {"op": "Gemm", "gemm_bias": True},
    "uint4_gemm_transb": {"op": "Gemm", "gemm_attrs": {"transB": 1}, "n": K},
    "uint4_gemm_alpha": {"op": "Gemm", "gemm_attrs": {"alpha": 2.0}},
    "uint4_fp16": {"scale_t": T.FLOAT16},
}
CUDA_ONLY = {"uint4_fp16"}

CHILD = r'''
import json, sys, onnx, onnxruntime as ort
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
so.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
print(json.dumps({"ort": ort.__version__,
                  "nodes": sorted(n.op_type + ":" + n.name for n in onnx.load(sys.argv[2]).graph.node)}))
'''


def main():
    out = sys.argv[1]
    args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    os.makedirs(out, exist_ok=True)
    site = os.path.dirname(os.path.dirname(onnx.__file__))
    records = []
    for name, kw in MODELS.items():
        onnx.save(model(name, **kw), os.path.join(out, f"{name}.onnx"))
    for name in MODELS:
        if name in CUDA_ONLY:
            continue
        path = os.path.join(out, f"{name}.onnx")
        for r in args["--releases"].split(","):
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(args["--ort-root"], r), site]))
            with tempfile.TemporaryDirectory() as d:
                res = subprocess.run([sys.executable, "-c", CHILD, path, os.path.join(d, "o.onnx")],
                                     env=env, check=True, capture_output=True, text=True).stdout
            rec = json.loads(res.strip().splitlines()[-1])
            rec["ep"] = "cpu"
            rec["model"] = f"{name}.onnx"
            records.append(rec)
    if args.get("--oracle-releases"):
        sys.path.insert(0, os.path.join(SHARED, "oracle"))
        import ortstub
        for v in args["--oracle-releases"].split(","):
            ortstub.prepare(v)
            for name in MODELS:
                r = ortstub.place(v, os.path.join(out, f"{name}.onnx"), "extended", keep_opt=False)
                records.append({"ort": v, "ep": "cuda", "model": f"{name}.onnx", "session": r["session"],
                                "placement": r["placement"], "all_nodes_on": r["all_nodes_on"],
                                "memcpy": r["memcpy"]})
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
