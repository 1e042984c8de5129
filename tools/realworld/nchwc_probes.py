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

- `nhwc_transpose.onnx`: an NHWC-to-NCHW `Transpose` (perm `[0, 3, 1, 2]`) read by one
  convolution alone is folded into its `ReorderInput` (`channels_last`) and goes; read by two
  convolutions, by a convolution and a `Relu`, or also a graph output, it stays;
- `activations.onnx`: element-wise nodes of a pooled NCHWc value: `Relu`/`Sigmoid`/`Tanh` keep
  the layout in every release, from 1.25 `HardSigmoid` and the com.microsoft `QuickGelu` (any
  alpha) and `Gelu` too (`LeakyRelu`, `Softplus` never); behind a convolution that took an
  `Add`, `HardSigmoid` is fused into it from 1.25, `QuickGelu` never;
- `hard_swish.onnx`: from 1.31 a `HardSigmoid` (alpha 1/6, beta 0.5) of a convolution and a
  `Mul` of the two (either order) become the convolution's `HardSwish` activation, when the
  convolution's output has just those two readers, the `HardSigmoid`'s the `Mul`, and the `Mul`'s
  output is no graph output (other alphas, more readers, a graph output: not fused);
- `dim_symbols.onnx`: an `Add` of two convolutions whose batch dim is the graph input's `N` only
  through a `FusedConv` (Conv + Clip) on one side and a squeeze-excitation `Mul` (its gate through
  `ReduceMean`, `Conv`, `Sigmoid`) on the other is fused into a convolution, not reshaped.

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

    def save(name, nodes, inputs, outputs, inits, ms=False):
        g = h.make_graph(nodes, name, inputs, [vi(o, None) for o in outputs], inits)
        opsets = [h.make_opsetid("", 13)] + ([h.make_opsetid("com.microsoft", 1)] if ms else [])
        m = h.make_model(g, opset_imports=opsets, producer_name="nchwc_probes.py")
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

    def nhwc(name):
        return vi(name, ["N", 8, 8, 16])

    def tr(x, y, name):
        return h.make_node("Transpose", [x], [y], perm=[0, 3, 1, 2], name=name)

    save("nhwc_transpose", [
        tr("A", "ta", "tr_single"), h.make_node("Conv", ["ta", "W1"], ["ya"], name="conv_single"),
        tr("B", "tb", "tr_two_convs"), h.make_node("Conv", ["tb", "W2"], ["yb1"], name="conv_two1"),
        h.make_node("Conv", ["tb", "W3"], ["yb2"], name="conv_two2"),
        tr("C", "tc", "tr_conv_relu"), h.make_node("Conv", ["tc", "W4"], ["yc1"], name="conv_relu"),
        h.make_node("Relu", ["tc"], ["yc2"], name="relu_c"),
        tr("D", "td", "tr_output"), h.make_node("Conv", ["td", "W5"], ["yd"], name="conv_output"),
        h.make_node("Relu", ["E"], ["re"], name="relu_e"), tr("re", "te", "tr_of_relu"),
        h.make_node("Conv", ["te", "W6"], ["ye"], name="conv_of_relu"),
    ], [nhwc("A"), nhwc("B"), nhwc("C"), nhwc("D"), nhwc("E")],
        ["ya", "yb1", "yb2", "yc1", "yc2", "yd", "td", "ye"],
        [w(f"W{k}", 16, 16, 1, 1) for k in range(1, 7)])

    acts = [("Relu", "", {}), ("Sigmoid", "", {}), ("Tanh", "", {}), ("LeakyRelu", "", {}),
            ("HardSigmoid", "", {}), ("Softplus", "", {}), ("QuickGelu", "com.microsoft", {}),
            ("QuickGelu", "com.microsoft", {"alpha": 1.0}), ("Gelu", "com.microsoft", {})]
    nodes = [h.make_node("MaxPool", ["X"], ["p"], kernel_shape=[1, 1], name="pool")]
    nodes += [h.make_node(op, ["p"], [f"a{k}"], name=f"act{k}_{op}", domain=d, **at)
              for k, (op, d, at) in enumerate(acts)]
    outs = [f"a{k}" for k in range(len(acts))]
    for op, d in [("HardSigmoid", ""), ("QuickGelu", "com.microsoft")]:
        nodes += [h.make_node("Conv", ["X", f"Wa{op}"], [f"ca{op}"], name=f"conv_a_{op}"),
                  h.make_node("Conv", ["X", f"Wb{op}"], [f"cb{op}"], name=f"conv_b_{op}"),
                  h.make_node("Add", [f"ca{op}", f"cb{op}"], [f"s{op}"], name=f"add_{op}"),
                  h.make_node(op, [f"s{op}"], [f"y{op}"], name=f"after_add_{op}", domain=d)]
        outs.append(f"y{op}")
    save("activations", nodes, [vi("X", ["N", 16, 8, 8])], outs,
         [w(f"W{s}{op}", 16, 16, 1, 1) for op in ("HardSigmoid", "QuickGelu") for s in "ab"],
         ms=True)

    nodes, outs, inits = [], [], []

    def hs_case(k, alpha=1 / 6, swap=False, conv_reader=False, hs_reader=False, mul_output=False,
                mul_readers=1):
        x, c, g, y = f"X{k}", f"c{k}", f"g{k}", f"y{k}"
        inits.append(w(f"W{k}", 16, 16, 1, 1))
        nodes.extend([h.make_node("Conv", [x, f"W{k}"], [c], name=f"conv{k}"),
                      h.make_node("HardSigmoid", [c], [g], alpha=alpha, beta=0.5, name=f"hs{k}"),
                      h.make_node("Mul", [g, c] if swap else [c, g], [y], name=f"mul{k}")])
        for r in range(mul_readers):
            nodes.append(h.make_node("Relu", [y], [f"r{k}_{r}"], name=f"relu{k}_{r}"))
            outs.append(f"r{k}_{r}")
        for flag, v in ((conv_reader, c), (hs_reader, g)):
            if flag:
                nodes.append(h.make_node("Sigmoid", [v], [v + "_s"], name=v + "_reader"))
                outs.append(v + "_s")
        if mul_output:
            outs.append(y)

    cases = [{}, {"swap": True}, {"alpha": 0.2}, {"conv_reader": True}, {"hs_reader": True},
             {"mul_output": True}, {"mul_readers": 2}]
    for k, kw in enumerate(cases):
        hs_case(k, **kw)
    save("hard_swish", nodes, [vi(f"X{k}", ["N", 16, 8, 8]) for k in range(len(cases))], outs, inits)

    save("dim_symbols", [
        h.make_node("Conv", ["X", "W1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        h.make_node("Clip", ["c1", "lo", "hi"], ["k1"], name="clip1"),
        h.make_node("Conv", ["k1", "W2"], ["a"], name="conv2"),
        h.make_node("ReduceMean", ["X"], ["m"], axes=[2, 3], keepdims=1, name="se_mean"),
        h.make_node("Conv", ["m", "W3"], ["e"], name="se_conv"),
        h.make_node("Sigmoid", ["e"], ["gate"], name="se_gate"),
        h.make_node("Mul", ["X", "gate"], ["xs"], name="se_mul"),
        h.make_node("Conv", ["xs", "W4"], ["b"], name="conv4"),
        h.make_node("Add", ["a", "b"], ["s"], name="add"),
        h.make_node("Relu", ["s"], ["y"], name="relu"),
    ], [vi("X", ["N", 16, 8, 8])], ["y"],
        [w("W1", 16, 16, 3, 3), w("W2", 16, 16, 1, 1), w("W3", 16, 16, 1, 1), w("W4", 16, 16, 1, 1),
         nh.from_array(np.array(0, np.float32), "lo"), nh.from_array(np.array(6, np.float32), "hi")])


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


def main(write_models=None):
    """Writes the probes (`write_models`, this file's own by default) and their truth.json; also
    the driver of tools/realworld/nhwc_probes.py."""
    out = sys.argv[2]
    args = dict(zip(sys.argv[3::2], sys.argv[4::2]))
    os.makedirs(out, exist_ok=True)
    (write_models or models)(out)
    records = [record(os.path.join(out, m), os.path.join(args["--ort-root"], r))
               for m in sorted(f for f in os.listdir(out) if f.endswith(".onnx"))
               for r in args["--releases"].split(",")]
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
