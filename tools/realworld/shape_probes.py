#!/usr/bin/env python3
"""The shape probes (tests/it/shape_probes.rs): small models that isolate what the
torchvision detectors and DETR of unseen3 (issue 16) showed, and what ORT does with them at
level `basic`, from the CPU wheels (node names of the saved session graph, every graph) and from
the stubbed-GPU oracle (`placement`, `all_nodes_on`, `memcpy`); `unsqueeze_names` at
`extended`.

  shape_probes.py OUT_DIR --ort-root DIR --releases 1.23.2,1.24.4,1.31.1 \
      [--oracle PYTHON ORTSTUB]

`DIR/<release>` is a `pip install --no-deps --target` of the `onnxruntime` CPU wheel; `--oracle`
names the oracle's Python and `ortstub.py` (../shared/oracle/). Writes the models and
`truth.json`.

- `shape_ops`: ONNX shape inference gives a shape (a rank at least) to the outputs of `Resize`
  with a run-time `sizes`, `Pad` with run-time `pads`, `GatherND`, `ConvTranspose`, `RoiAlign`,
  `Shape` of a value with no shape, and `If` (the union of its branches' outputs: a shape when
  both have the same rank, none otherwise). Each output goes through `Add(out, 0)`, which
  `NoopElimination` removes only when the other input has a shape: ORT removes every `noop_*`
  but `noop_if_diff`.
- `reshape_ranks`: `Reshape(b, Concat(Unsqueeze(Gather(Shape(a), 0)), Unsqueeze(Gather(Shape(a),
  1)), [-1]))` with `a` `[batch, seq, 8]` and `b` `[batch, seq, 4, 2]`: from 1.29 ReshapeFusion
  compares the gathered dim alone, whatever the ranks (1.31.1 fuses to `[0, 0, -1]`).
- `expand_symbol`: the same Reshape of `Add(e, e)`, `e = Expand(c, Concat(Unsqueeze(Gather(
  Shape(q), 0)), Unsqueeze(Gather(Shape(q), 1)), [8]))`, `q` and `a` both `[batch, seq, 8]`: an
  Expand whose shape is built at run time has unknown dims for ORT (no data propagation), so no
  release fuses it.
- `unsqueeze_names`: `UnsqueezeElimination` generates `UnsqueezeElimination_c` for each Unsqueeze
  of the constant `c` before it finds no `axes` attribute (opset 13+): the second one advances
  the name counter, and the Squeezes GatherSliceToSplitFusion adds at `extended` are named one
  step later (`Squeeze_token_3` and `Squeeze_token_6`).
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


def i64(name, v):
    return nh.from_array(np.array(v, dtype=np.int64), name)


def f32(name, v):
    return nh.from_array(np.array(v, dtype=np.float32), name)


def noop(src, name, zero="zero"):
    """`Relu(Add(src, 0))` (int64 values: `Cast(Add(src, 0))`), output `name`."""
    tail = h.make_node("Cast", [f"{name}_a"], [name], name=f"{name}_out", to=T.FLOAT) \
        if zero == "zero64" else h.make_node("Relu", [f"{name}_a"], [name], name=f"{name}_out")
    return [h.make_node("Add", [src, zero], [f"{name}_a"], name=name), tail]


def branch(name, dims):
    c = h.make_node("Constant", [], [f"{name}_v"], name=f"{name}_c",
                    value=nh.from_array(np.ones(dims, np.float32), f"{name}_t"))
    r = h.make_node("Relu", [f"{name}_v"], [f"{name}_o"], name=f"{name}_relu")
    return h.make_graph([c, r], name, [], [h.make_tensor_value_info(f"{name}_o", T.FLOAT, None)])


def shape_ops():
    inits = [f32("zero", 0.0), i64("zero64", 0), f32("w", np.full([3, 2, 3, 3], 0.1))]
    ins = [h.make_tensor_value_info("x", T.FLOAT, [1, 3, "h", "w"]),
           h.make_tensor_value_info("sizes", T.INT64, [4]),
           h.make_tensor_value_info("pads", T.INT64, [8]),
           h.make_tensor_value_info("data", T.FLOAT, ["n", 4]),
           h.make_tensor_value_info("idx", T.INT64, ["m", 1]),
           h.make_tensor_value_info("rois", T.FLOAT, ["k", 4]),
           h.make_tensor_value_info("bidx", T.INT64, ["k"]),
           h.make_tensor_value_info("u", T.FLOAT, None),
           h.make_tensor_value_info("cond", T.BOOL, [])]
    nodes = [h.make_node("Resize", ["x", "", "", "sizes"], ["resized"], name="resize", mode="nearest"),
             h.make_node("Pad", ["x", "pads"], ["padded"], name="pad"),
             h.make_node("GatherND", ["data", "idx"], ["gathered"], name="gathernd"),
             h.make_node("ConvTranspose", ["x", "w"], ["convt"], name="convtranspose"),
             h.make_node("RoiAlign", ["x", "rois", "bidx"], ["pooled"], name="roialign",
                         output_height=2, output_width=2),
             h.make_node("Shape", ["u"], ["ushape"], name="shape"),
             h.make_node("If", ["cond"], ["if_same"], name="if_same",
                         then_branch=branch("same_then", [2, 3]), else_branch=branch("same_else", [4, 3])),
             h.make_node("If", ["cond"], ["if_diff"], name="if_diff",
                         then_branch=branch("diff_then", [2, 3]), else_branch=branch("diff_else", [3]))]
    outs = []
    for src, name, zero in [("resized", "noop_resize", "zero"), ("padded", "noop_pad", "zero"),
                            ("gathered", "noop_gathernd", "zero"), ("convt", "noop_convtranspose", "zero"),
                            ("pooled", "noop_roialign", "zero"), ("ushape", "noop_shape", "zero64"),
                            ("if_same", "noop_if_same", "zero"), ("if_diff", "noop_if_diff", "zero")]:
        nodes += noop(src, name, zero)
        outs.append(h.make_tensor_value_info(name, T.FLOAT, None))
    g = h.make_graph(nodes, "shape_ops", ins, outs, inits)
    return g


def dim_part(src, k, p):
    return [h.make_node("Shape", [src], [f"{p}_s"], name=f"{p}_shape"),
            h.make_node("Gather", [f"{p}_s", f"i{k}"], [f"{p}_g"], name=f"{p}_gather", axis=0),
            h.make_node("Unsqueeze", [f"{p}_g", "ax0"], [f"{p}_u"], name=f"{p}_unsqueeze")]


def reshape_ranks():
    inits = [i64("i0", 0), i64("i1", 1), i64("ax0", [0]), i64("m1", [-1])]
    nodes = dim_part("a", 0, "p0") + dim_part("a", 1, "p1")
    nodes += [h.make_node("Concat", ["p0_u", "p1_u", "m1"], ["shp"], name="concat", axis=0),
              h.make_node("Reshape", ["b", "shp"], ["y"], name="reshape")]
    ins = [h.make_tensor_value_info("a", T.FLOAT, ["batch", "seq", 8]),
           h.make_tensor_value_info("b", T.FLOAT, ["batch", "seq", 4, 2])]
    return h.make_graph(nodes, "reshape_ranks", ins, [h.make_tensor_value_info("y", T.FLOAT, None)], inits)


def expand_symbol():
    inits = [i64("i0", 0), i64("i1", 1), i64("ax0", [0]), i64("m1", [-1]), i64("c8", [8]),
             f32("c", np.ones([1, 1, 8]))]
    nodes = dim_part("q", 0, "e0") + dim_part("q", 1, "e1")
    nodes += [h.make_node("Concat", ["e0_u", "e1_u", "c8"], ["eshape"], name="expand_concat", axis=0),
              h.make_node("Expand", ["c", "eshape"], ["e"], name="expand"),
              h.make_node("Add", ["e", "e"], ["e2"], name="add")]
    nodes += dim_part("a", 0, "p0")
    nodes += [h.make_node("Concat", ["p0_u", "m1"], ["shp"], name="concat", axis=0),
              h.make_node("Reshape", ["e2", "shp"], ["y"], name="reshape")]
    ins = [h.make_tensor_value_info("a", T.FLOAT, ["batch", "seq", 8]),
           h.make_tensor_value_info("q", T.FLOAT, ["batch", "seq", 8])]
    return h.make_graph(nodes, "expand_symbol", ins, [h.make_tensor_value_info("y", T.FLOAT, None)], inits)


def unsqueeze_names():
    """Three Gathers splitting `x` (GatherSliceToSplitFusion at `extended` names its Squeezes
    from the graph's counter) after two Unsqueezes of the same constant `c`."""
    inits = [i64("i0", 0), i64("i1", 1), i64("i2", 2), i64("ax0", [0]), i64("ax1", [1]),
             i64("c", [3, 4])]
    nodes = [h.make_node("Gather", ["x", f"i{k}"], [f"g{k}"], name=f"gather{k}", axis=0) for k in range(3)]
    nodes += [h.make_node("Unsqueeze", ["c", "ax0"], ["u0"], name="unsqueeze0"),
              h.make_node("Unsqueeze", ["c", "ax1"], ["u1"], name="unsqueeze1"),
              h.make_node("Add", ["u0", "u1"], ["s"], name="add")]
    ins = [h.make_tensor_value_info("x", T.FLOAT, [3, "n"])]
    outs = [h.make_tensor_value_info(v, T.FLOAT, None) for v in ("g0", "g1", "g2")]
    outs.append(h.make_tensor_value_info("s", T.INT64, None))
    return h.make_graph(nodes, "unsqueeze_names", ins, outs, inits)


MODELS = {"shape_ops": shape_ops, "reshape_ranks": reshape_ranks, "expand_symbol": expand_symbol,
          "unsqueeze_names": unsqueeze_names}
LEVELS = {"unsqueeze_names": "extended"}

CHILD = r'''
import json, sys, onnx, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                               "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED}[sys.argv[3]]
so.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
names = []
def walk(g):
    for n in g.node:
        names.append(n.name)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH: walk(a.g)
walk(onnx.load(sys.argv[2]).graph)
print(json.dumps({"ort": ort.__version__, "nodes": sorted(names)}))
'''


def main():
    out = sys.argv[1]
    args = {}
    rest = sys.argv[2:]
    while rest:
        if rest[0] == "--oracle":
            args["--oracle"] = rest[1:3]
            rest = rest[3:]
        else:
            args[rest[0]] = rest[1]
            rest = rest[2:]
    os.makedirs(out, exist_ok=True)
    site = os.path.dirname(os.path.dirname(onnx.__file__))
    records = []
    for name, make in MODELS.items():
        level = LEVELS.get(name, "basic")
        m = h.make_model(make(), opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 8
        path = os.path.join(out, f"{name}.onnx")
        onnx.save(m, path)
        for r in args["--releases"].split(","):
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(args["--ort-root"], r), site]))
            with tempfile.TemporaryDirectory() as d:
                res = subprocess.run([sys.executable, "-c", CHILD, path, os.path.join(d, "o.onnx"), level],
                                     env=env, check=True, capture_output=True, text=True).stdout
            rec = json.loads(res.strip().splitlines()[-1])
            rec["model"] = f"{name}.onnx"
            rec["level"] = level
            if "--oracle" in args:
                py, stub = args["--oracle"]
                res = subprocess.run([py, stub, "place", r, path, "--level", level],
                                     check=True, capture_output=True, text=True).stdout
                o = json.loads(res)
                rec["cuda"] = {k: o.get(k) for k in ("session", "placement", "all_nodes_on", "memcpy")}
            records.append(rec)
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
