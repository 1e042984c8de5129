#!/usr/bin/env python3
"""Probe models for ORT's NCHWc transformer (tests/it/nchwc_block.rs, `nchwc_probes_agree_with_ort`),
each isolating one mechanism, and what the CPU `onnxruntime` wheels make of them at level `all`:

- `dim_params.onnx`: an `Add` of two NCHWc convolutions whose symbolic shapes come from
  different sources (one reads its 4-channel NCHW input directly) is fused into a convolution
  when ONNX inference gives both the same batch `dim_param` (`N` and `N`), and goes through
  `Reshape`s when it does not (`N` and `M`);
- `in_channels.onnx`: an ungrouped `Conv` with a block or more of input channels is converted
  when they are a multiple of 4 (20), not otherwise (18);
- `reshapes.onnx`: two `Add`s whose spatial dims cannot be shown equal, at 16 and 32 channels,
  share one split and one unsplit `Reshape` shape initializer (`GenerateNodeArgName("Reshape")`
  called twice in all);
- `branch_order.onnx`: three Conv+Relu branches of a pooled value, concatenated, the second
  behind a `Softplus` (NCHW), the third behind another `Conv` and a `Softplus`:
  `ConvActivationFusion` walks ORT's topological order (the last branch first) and appends the
  `FusedConv`s in that order, so the NCHWc walk, which meets a node's inputs from the highest
  index down, reaches the first branch first; the `_token_<k>` of the `ReorderInput`s between
  follow that order.

Channels are multiples of 16 (the 4-channel input excepted), so MLAS's block size (8 or 16)
changes nothing but what the record says; the record holds the machine's block size
(`avx512f` in /proc/cpuinfo: 16, else 8) and runs natively.

  nchwc_probes.py all OUT_DIR --ort-root DIR --releases 1.23.2,1.24.4,1.25.1,1.28.0,1.31.1
"""
import json
import os
import subprocess
import sys
import tempfile


def models(out):
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(16)

    def w(name, *shape):
        return nh.from_array(rng.random(shape, dtype=np.float32) - 0.5, name)

    def vi(name, shape):
        return h.make_tensor_value_info(name, T.FLOAT, shape)

    def save(name, nodes, inputs, outputs, inits):
        g = h.make_graph(nodes, name, inputs, [vi(o, None) for o in outputs], inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="nchwc_probes.py")
        m.ir_version = 8
        onnx.save(m, os.path.join(out, name + ".onnx"))

    save("dim_params", [
        h.make_node("Conv", ["X", "Wa"], ["a"], name="conv_a"),
        h.make_node("Conv", ["Y", "Wb"], ["b"], name="conv_b"),
        h.make_node("Add", ["a", "b"], ["s"], name="add_same"),
        h.make_node("Relu", ["s"], ["y1"], name="relu_same"),
        h.make_node("Conv", ["X", "Wc"], ["c"], name="conv_c"),
        h.make_node("Conv", ["Z", "Wd"], ["d"], name="conv_d"),
        h.make_node("Add", ["c", "d"], ["t"], name="add_other"),
        h.make_node("Relu", ["t"], ["y2"], name="relu_other"),
    ], [vi("X", ["N", 16, 8, 8]), vi("Y", ["N", 4, 8, 8]), vi("Z", ["M", 4, 8, 8])], ["y1", "y2"],
        [w("Wa", 16, 16, 1, 1), w("Wb", 16, 4, 1, 1), w("Wc", 16, 16, 1, 1), w("Wd", 16, 4, 1, 1)])

    save("in_channels", [
        h.make_node("Conv", ["X", "W20"], ["a"], name="conv20"),
        h.make_node("Relu", ["a"], ["y1"], name="relu20"),
        h.make_node("Conv", ["Y", "W18"], ["b"], name="conv18"),
        h.make_node("Relu", ["b"], ["y2"], name="relu18"),
    ], [vi("X", [1, 20, 8, 8]), vi("Y", [1, 18, 8, 8])], ["y1", "y2"],
        [w("W20", 16, 20, 1, 1), w("W18", 16, 18, 1, 1)])

    save("reshapes", [
        h.make_node("Conv", ["X", "W1"], ["a"], name="conv_a"),
        h.make_node("Conv", ["Y", "W2"], ["b"], name="conv_b"),
        h.make_node("Add", ["a", "b"], ["y1"], name="add16"),
        h.make_node("Conv", ["X", "W3"], ["c"], name="conv_c"),
        h.make_node("Conv", ["Y", "W4"], ["d"], name="conv_d"),
        h.make_node("Add", ["c", "d"], ["y2"], name="add32"),
    ], [vi("X", [1, 16, "H", "W"]), vi("Y", [1, 16, "H", "W"])], ["y1", "y2"],
        [w("W1", 16, 16, 1, 1), w("W2", 16, 16, 1, 1), w("W3", 32, 16, 1, 1), w("W4", 32, 16, 1, 1)])

    save("branch_order", [
        h.make_node("MaxPool", ["X"], ["p"], kernel_shape=[1, 1], name="pool"),
        h.make_node("Conv", ["p", "W0"], ["c0"], name="conv0"),
        h.make_node("Relu", ["c0"], ["r0"], name="relu0"),
        h.make_node("Softplus", ["p"], ["q1"], name="softplus1"),
        h.make_node("Conv", ["q1", "W1"], ["c1"], name="conv1"),
        h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        h.make_node("Conv", ["p", "W2"], ["c2"], name="conv2"),
        h.make_node("Softplus", ["c2"], ["q2"], name="softplus2"),
        h.make_node("Conv", ["q2", "V2"], ["e2"], name="conv2b"),
        h.make_node("Relu", ["e2"], ["r2"], name="relu2"),
        h.make_node("Concat", ["r0", "r1", "r2"], ["y"], axis=1, name="cat"),
    ], [vi("X", [1, 16, 8, 8])], ["y"],
        [w("W0", 16, 16, 1, 1), w("W1", 16, 16, 1, 1), w("W2", 32, 16, 1, 1), w("V2", 16, 32, 1, 1)])


CHILD = r'''
import json, sys, onnx, onnxruntime as ort
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
so.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
g = onnx.load(sys.argv[2]).graph
print(json.dumps({"ort": ort.__version__, "nodes": sorted([n.name, (n.domain or "ai.onnx") + ":" + n.op_type] for n in g.node)}))
'''


def machine_block():
    with open("/proc/cpuinfo") as f:
        return 16 if " avx512f" in f.read() else 8


def record(path, ort_dir):
    import onnx

    site = os.path.dirname(os.path.dirname(onnx.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ort_dir, site]))
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([sys.executable, "-c", CHILD, path, os.path.join(d, "opt.onnx")], env=env,
                             check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    r["model"] = os.path.basename(path)
    r["block"] = machine_block()
    return r


def main():
    out = sys.argv[2]
    args = dict(zip(sys.argv[3::2], sys.argv[4::2]))
    os.makedirs(out, exist_ok=True)
    models(out)
    records = [record(os.path.join(out, m), os.path.join(args["--ort-root"], r))
               for m in sorted(f for f in os.listdir(out) if f.endswith(".onnx"))
               for r in args["--releases"].split(",")]
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
