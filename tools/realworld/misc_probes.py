"""Probes of the `misc` helper's mechanisms (issue 16), with the truth they were recorded with.

tests/it/transpose_shapes.rs (unseen3/ortopt.unet): ORT's broadcast handler (`NormalizeInputRanks`,
onnx_transpose_optimization.cc) pushes a Transpose through `Add` only when every input's rank is known, so the outputs of ORT's diffusion
contrib ops (NhwcConv, GroupNorm, SkipGroupNorm, BiasAdd, BiasSplitGelu) and of `Resize` need
their shape inference. Each chain is `op -> Transpose -> Add(., Transpose(input)) -> Transpose`:
with the ranks known, the Transposes cancel.

tests/it/constant_sharing_order.rs (unseen2/ortopt-fp16.clip): ConstantSharing keeps the first of
equal initializers in the iteration order of ORT's initializer map (a libstdc++
std::unordered_map): twelve or fourteen initializers, two of them equal, read by a Mul and a Sub.

tests/it/saved_model.rs (unseen2/whl.silero-vad at disable): the saved optimised model keeps each
subgraph as loaded (its Constant nodes too) unless some transformation changed any graph.

    python tools/realworld/misc_probes.py tests/fixtures/misc_probes > tests/fixtures/misc_probes/truth.jsonl
        writes <dir>/<probe>.onnx, then prints one JSON line per probe, release, level and
        provider list: the stubbed-GPU oracle's placement (/work/shared/oracle/ortstub.py) and
        the CPU wheels' (/work/venvs/ort-cpu/<release>), each with the nodes of the optimised
        model ORT saved (the CPU lines also every graph's node names, "saved names").

The texts are the `const NAME: &str = r#"..."#;` of those test files (ONNX's text syntax); the
CPU sessions print (node, op, inputs) of the optimised graph.
"""
import json
import os
import re
import subprocess
import sys

import onnx
import onnx.parser

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = [os.path.join(HERE, "..", "..", "tests", "it", f)
         for f in ("transpose_shapes.rs", "constant_sharing_order.rs", "saved_model.rs")]
ORACLE = os.environ.get("ORTSTUB", "/work/shared/oracle")
ORACLE_PY = os.environ.get("ORACLE_PYTHON", "/work/venvs/oracle/bin/python")
CPU_ROOT = os.environ.get("ORT_CPU_ROOT", "/work/venvs/ort-cpu")
RELEASES = ["1.23.2", "1.24.4", "1.31.1"]

CPU_SESSION = r'''
import sys, onnxruntime as ort, onnx
path, level, opt = sys.argv[1:4]
so = ort.SessionOptions()
so.graph_optimization_level = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}[level]
so.optimized_model_filepath = opt
ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
m = onnx.load(opt)
print([(n.name, n.op_type, list(n.input)) for n in m.graph.node])
print("saved names", sorted([n.name for n in m.graph.node] + [x.name for n in m.graph.node
      for a in n.attribute if a.type == onnx.AttributeProto.GRAPH for x in a.g.node]))
'''


def probes():
    """The `const NAME: &str = r#"..."#;` texts of the test file."""
    out = {}
    for test in TESTS:
        out.update(re.findall(r'const (\w+): &str = r#"(.*?)"#;', open(test).read(), re.S))
    return out


def oracle(v, path, level):
    sys.path.insert(0, ORACLE)
    import ortstub  # noqa: E402

    opt = path + f".{v}.{level}.opt.onnx"
    p = subprocess.run([ortstub.PY, "-c", ortstub.PLACE, path, level, opt], capture_output=True,
                       text=True, env=ortstub.child_env(v))
    rec = ortstub.parse_log(p.stderr + p.stdout)
    m = onnx.load(opt)
    os.remove(opt)
    return rec["all_nodes_on"] or rec["placement"], [(n.name, n.op_type, list(n.input)) for n in m.graph.node]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, text in probes().items():
        path = os.path.join(out, name.lower() + ".onnx")
        onnx.save(onnx.parser.parse_model(text), path)
        for v in RELEASES:
            for level in ["disable", "basic", "all"]:
                placed, nodes = oracle(v, path, level)
                print(json.dumps({"probe": name, "ort": v, "level": level, "ep": "cuda",
                                  "placed": placed, "nodes": sorted(nodes)}))
                env = dict(os.environ, PYTHONPATH=os.path.join(CPU_ROOT, v))
                p = subprocess.run([ORACLE_PY, "-c", CPU_SESSION, path, level, path + ".cpu.opt.onnx"],
                                   capture_output=True, text=True, env=env)
                cpu = p.stdout.strip() or (p.stderr.strip().splitlines() or [""])[-1][:200]
                if os.path.exists(path + ".cpu.opt.onnx"):
                    os.remove(path + ".cpu.opt.onnx")
                print(json.dumps({"probe": name, "ort": v, "level": level, "ep": "cpu", "nodes": cpu}))


if __name__ == "__main__":
    main()
