#!/usr/bin/env python3
"""The transpose optimizer's 1.31 cost rule (tests/it/transpose_cancel.rs): a Transpose pushed
towards another one it does not cancel, through nodes whose outputs have one reader or several,
with and without Q/DQ pairs on the way, and what the CPU wheels' level-1 (`basic`) session graph
keeps of it.

  transpose_cancel.py OUT_DIR --ort-root DIR --releases 1.24.4,1.30.0,1.31.1

`DIR/<release>` is a `pip install --no-deps --target` of the `onnxruntime` CPU wheel. Writes the
models and `truth.json` (per release and model, the sorted node names of the saved session graph,
and the saved graph's Transposes as `name: input -> readers`).

Each model is a chain written as `value = Op(inputs)`; `T` is a Transpose with perm [0,2,1,3]
(its own inverse), `Tm` one with [0,1,3,2] (merges with `T` into a third perm), `Tr`/`Tri` the
pair [0,2,3,1]/[0,3,1,2]; `Slice` takes the first 8 of the last axis; `x` is a float input
[1,5,2,24] (`u8:` models: a uint8 one). The variants (every reader of a DQ gets its own DQ from
`EnsureUniqueDQForNodeUnit` before the optimizer runs, so a Q read through a DQ by two nodes has
two readers):
- `slice_two_readers`: T -> Slice -> {Neg, Relu} -> Add -> Tm.
- `slice_q_dq_two_readers`: T -> Slice -> Q -> DQ -> {Neg, Relu} -> Add -> Tm.
- `slice_q_two_dqs`: T -> Slice -> Q -> {DQ -> Neg, DQ -> Relu} -> Add -> Tm.
- `slice_q_dq_neg_two_readers`: T -> Slice -> Q -> DQ -> Neg -> {Relu, Sigmoid} -> Add -> Tm.
- `neg_two_readers`: T -> Neg -> {Relu, Sigmoid} -> Add -> Tm.
- `slice_neg_two_readers`: T -> Slice -> Neg -> {Relu, Sigmoid} -> Add -> Tm.
- `shared_transpose`: T -> {Relu, Sigmoid} -> Add -> Tm.
- `u8_dq_two_readers`: T(uint8) -> DQ -> {Neg, Relu} -> Add -> Tm.
- `u8_dq_q_dq_two_readers`: T(uint8) -> DQ -> Q -> DQ -> {Neg, Relu} -> Add -> Tm.
- `split_one_reader_each`: T -> Split -> {Neg, Relu} -> Add -> Tm.
- `slice_graph_output`: T -> Slice (also a graph output) -> Neg -> Tm.
- `chain`: T -> Slice -> Q -> DQ -> Neg -> Tm.
- `no_transpose_after`: T -> Slice -> Neg.
- `cancel_two_readers`: T -> Slice -> Q -> DQ -> {Neg, Relu} -> Add -> T (cancels).
- `cancel_inverse`, `merge_same`: Tr -> Neg -> {Relu, Sigmoid} -> Add -> Tri (cancels) / Tr (merges).
- `cancel_one_branch`: T -> Neg -> {Relu -> T (cancels), Sigmoid (graph output)}.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

PERMS = {"T": [0, 2, 1, 3], "Tm": [0, 1, 3, 2], "Tr": [0, 2, 3, 1], "Tri": [0, 3, 1, 2]}

VARIANTS = {
    "slice_two_readers": "t=T(x); s=Slice(t); a=Neg(s); b=Relu(s); c=Add(a,b); y=Tm(c); out y",
    "slice_q_dq_two_readers": "t=T(x); s=Slice(t); q=Q(s); e=DQ(q); a=Neg(e); b=Relu(e); c=Add(a,b); y=Tm(c); out y",
    "slice_q_two_dqs": "t=T(x); s=Slice(t); q=Q(s); e=DQ(q); f=DQ(q); a=Neg(e); b=Relu(f); c=Add(a,b); y=Tm(c); "
                       "out y",
    "slice_q_dq_neg_two_readers": "t=T(x); s=Slice(t); q=Q(s); e=DQ(q); n=Neg(e); a=Relu(n); b=Sigmoid(n); "
                                  "c=Add(a,b); y=Tm(c); out y",
    "neg_two_readers": "t=T(x); n=Neg(t); a=Relu(n); b=Sigmoid(n); c=Add(a,b); y=Tm(c); out y",
    "slice_neg_two_readers": "t=T(x); s=Slice(t); n=Neg(s); a=Relu(n); b=Sigmoid(n); c=Add(a,b); y=Tm(c); out y",
    "shared_transpose": "t=T(x); a=Relu(t); b=Sigmoid(t); c=Add(a,b); y=Tm(c); out y",
    "u8_dq_two_readers": "u8: t=T(x); e=DQ(t); a=Neg(e); b=Relu(e); c=Add(a,b); y=Tm(c); out y",
    "u8_dq_q_dq_two_readers": "u8: t=T(x); e=DQ(t); q=Q(e); d=DQ(q); a=Neg(d); b=Relu(d); c=Add(a,b); y=Tm(c); "
                              "out y",
    "split_one_reader_each": "t=T(x); a=Split(t); n=Neg(a); r=Relu(a_1); c=Add(n,r); y=Tm(c); out y",
    "slice_graph_output": "t=T(x); s=Slice(t); n=Neg(s); y=Tm(n); out s, y",
    "chain": "t=T(x); s=Slice(t); q=Q(s); e=DQ(q); n=Neg(e); y=Tm(n); out y",
    "no_transpose_after": "t=T(x); s=Slice(t); n=Neg(s); out n",
    "cancel_two_readers": "t=T(x); s=Slice(t); q=Q(s); e=DQ(q); a=Neg(e); b=Relu(e); c=Add(a,b); y=T(c); out y",
    "cancel_inverse": "t=Tr(x); n=Neg(t); a=Relu(n); b=Sigmoid(n); c=Add(a,b); y=Tri(c); out y",
    "merge_same": "t=Tr(x); n=Neg(t); a=Relu(n); b=Sigmoid(n); c=Add(a,b); y=Tr(c); out y",
    "cancel_one_branch": "t=T(x); n=Neg(t); a=Relu(n); b=Sigmoid(n); y=T(a); out y, b",
}


def model(text):
    u8 = text.startswith("u8:")
    text = text[3:] if u8 else text
    ints = [("ax3", [3]), ("c0", [0]), ("c8", [8])]
    inits = [nh.from_array(np.array(v, dtype=np.int64), n) for n, v in ints]
    inits += [nh.from_array(np.array(0.1, dtype=np.float32), "sc"), nh.from_array(np.array(128, dtype=np.uint8), "zp")]
    types = {"x": T.UINT8 if u8 else T.FLOAT}
    nodes, outs = [], []
    for stmt in text.split(";"):
        stmt = stmt.strip()
        if stmt.startswith("out "):
            outs = [o.strip() for o in stmt[4:].split(",")]
            continue
        o, rhs = (p.strip() for p in stmt.split("="))
        op, args = re.match(r"(\w+)\((.*)\)", rhs).groups()
        args = [a.strip() for a in args.split(",")]
        name, t = o.upper(), types[args[0]]
        if op in PERMS:
            nodes.append(h.make_node("Transpose", args, [o], perm=PERMS[op], name=name))
        elif op == "DQ":
            nodes.append(h.make_node("DequantizeLinear", [args[0], "sc", "zp"], [o], name=name))
            t = T.FLOAT
        elif op == "Q":
            nodes.append(h.make_node("QuantizeLinear", [args[0], "sc", "zp"], [o], name=name))
            t = T.UINT8
        elif op == "Slice":
            nodes.append(h.make_node("Slice", [args[0], "c0", "c8", "ax3"], [o], name=name))
        elif op == "Split":
            nodes.append(h.make_node("Split", args, [o, o + "_1"], axis=3, num_outputs=2, name=name))
            types[o + "_1"] = t
        else:
            nodes.append(h.make_node(op, args, [o], name=name))
        types[o] = t
    g = h.make_graph(nodes, "transpose_cancel", [h.make_tensor_value_info("x", types["x"], [1, 5, 2, 24])],
                     [h.make_tensor_value_info(o, types[o], None) for o in outs], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)], producer_name="transpose_cancel.py")
    m.ir_version = 8
    return m


CHILD = r'''
import json, sys, onnx, onnxruntime as ort
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
so.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
g = onnx.load(sys.argv[2]).graph
readers = lambda v: [n.name for n in g.node if v in n.input] or ["(graph output)"]
transposes = [f"{n.name}: {n.input[0]} -> {', '.join(readers(n.output[0]))}" for n in g.node if n.op_type == "Transpose"]
print(json.dumps({"ort": ort.__version__, "nodes": sorted(n.name for n in g.node), "transposes": transposes}))
'''


def main():
    out = sys.argv[1]
    args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    os.makedirs(out, exist_ok=True)
    site = os.path.dirname(os.path.dirname(onnx.__file__))
    records = []
    for v, text in VARIANTS.items():
        path = os.path.join(out, f"{v}.onnx")
        onnx.save(model(text), path)
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
