#!/usr/bin/env python3
"""The NCHWc block-size fixture (tests/it/nchwc_block.rs): a small convolution model whose
channels are multiples of 8 but not of 16, and what ORT's CPU provider makes of it at level
`all` with either MLAS NCHWc block size.

MLAS picks the block size from the CPU (16 with AVX-512F, 8 on other x86-64 CPUs) and has no
switch, so the block-8 truth comes from running the same CPU wheel under `qemu-x86_64 -cpu
Haswell` (user-mode emulation of a CPU without AVX-512; Debian package `qemu-user`), the
block-16 truth from running it natively on an AVX-512 machine.

  nchwc_block.py model OUT.onnx
  nchwc_block.py record MODEL.onnx ORT_DIR BLOCK          # prints one JSON record
  nchwc_block.py all OUT_DIR --ort-root DIR --releases 1.24.4,1.31.1   # model + truth.json

`ORT_DIR` is a `pip install --no-deps --target` of the `onnxruntime` CPU wheel; the record is
the names and ops of the nodes of the session graph ORT saves (`optimized_model_filepath`).
"""
import json
import os
import subprocess
import sys
import tempfile


def model(out):
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(16)

    def w(name, *shape):
        return nh.from_array(rng.random(shape, dtype=np.float32), name)

    inits = [w("W1", 40, 24, 3, 3), w("B1", 40), w("W2", 40, 40, 1, 1), w("W3", 40, 40, 1, 1),
             w("W4", 16, 80, 1, 1), w("B4", 16)]
    nodes = [
        h.make_node("Conv", ["X", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        h.make_node("MaxPool", ["r1"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        h.make_node("Conv", ["p", "W2"], ["c2"], name="conv2"),
        h.make_node("Conv", ["p", "W3"], ["c3"], name="conv3"),
        h.make_node("Add", ["c2", "c3"], ["s"], name="add"),
        h.make_node("GlobalAveragePool", ["s"], ["y"], name="gap"),
        h.make_node("Concat", ["p", "c2"], ["cat"], axis=1, name="concat"),
        h.make_node("Conv", ["cat", "W4", "B4"], ["y2"], name="conv4"),
    ]
    g = h.make_graph(nodes, "nchwc_block", [h.make_tensor_value_info("X", T.FLOAT, [1, 24, 16, 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, None),
                      h.make_tensor_value_info("y2", T.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="nchwc_block.py")
    m.ir_version = 8
    onnx.save(m, out)


CHILD = r'''
import json, sys, onnx, onnxruntime as ort
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
so.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
g = onnx.load(sys.argv[2]).graph
print(json.dumps({"ort": ort.__version__, "nodes": sorted([n.name, (n.domain or "ai.onnx") + ":" + n.op_type] for n in g.node)}))
'''


def record(path, ort_dir, block):
    import onnx

    site = os.path.dirname(os.path.dirname(onnx.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ort_dir, site]))
    cmd = [sys.executable, "-c", CHILD, path]
    if block == 8:
        # The interpreter itself, not a venv's launcher: qemu reports itself as /proc/self/exe.
        cmd = ["qemu-x86_64", "-cpu", "Haswell", os.path.realpath(sys.executable), "-c", CHILD, path]
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(cmd + [os.path.join(d, "opt.onnx")], env=env, check=True,
                             capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    r["block"] = block
    return r


def main():
    if sys.argv[1] == "model":
        model(sys.argv[2])
    elif sys.argv[1] == "record":
        print(json.dumps(record(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
    elif sys.argv[1] == "all":
        out = sys.argv[2]
        args = dict(zip(sys.argv[3::2], sys.argv[4::2]))
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, "blocks.onnx")
        model(path)
        records = [record(path, os.path.join(args["--ort-root"], r), b)
                   for r in args["--releases"].split(",") for b in (16, 8)]
        with open(os.path.join(out, "truth.json"), "w") as f:
            json.dump(records, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
