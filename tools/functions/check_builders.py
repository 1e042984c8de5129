#!/usr/bin/env python3
"""Write ONNX's own context-dependent function bodies for a set of probe nodes, so that the Rust
builders (src/placer/functions/builders.rs) can be compared with them by a unit test.

    python3 tools/functions/check_builders.py tests/fixtures/functions/builders.txt
    # Attention, with the ONNX release an ORT release bundles (pip install onnx==1.20.1 in a venv):
    python3 tools/functions/check_builders.py --attention tests/fixtures/functions/attention-onnx1.20.txt

Each case is a line `#case <op> since=<v> opset=<v> inputs=<t>,... outputs=<n> attrs=<a>,...`
(input types: an element type name, `seq(<elem>)`, or `-` for a missing input; attributes:
`name:i:<int>`, `name:f:<float>`, `name:s:<string>`, `name:ints:<a>|<b>`), followed by the body's
nodes in a canonical one-line form (see `canon` here and in the Rust test), or `declined` when
ONNX's builder returns false.
"""
import datetime
import sys

import onnx
import onnx.defs
from onnx import helper, TensorProto

CASES = [
    ("CastLike", 15, 15, ["float", "float16"], 1, []),
    ("CastLike", 21, 21, ["float", "int8"], 1, [("saturate", "i", 0)]),
    ("CastLike", 24, 24, ["float16", "float"], 1, []),
    ("CastLike", 25, 25, ["float", "bfloat16"], 1, []),
    ("Clip", 13, 13, ["float", "-", "float"], 1, []),
    ("Clip", 13, 13, ["int8", "int8", "int8"], 1, []),
    ("Celu", 12, 12, ["float"], 1, [("alpha", "f", 2.0)]),
    ("Softmax", 13, 13, ["float"], 1, [("axis", "i", 1)]),
    ("Softmax", 13, 18, ["float"], 1, []),
    ("LogSoftmax", 13, 18, ["float"], 1, [("axis", "i", 2)]),
    ("Gelu", 20, 20, ["float16"], 1, [("approximate", "s", "tanh")]),
    ("Gelu", 20, 22, ["float"], 1, []),
    ("NegativeLogLikelihoodLoss", 13, 13, ["float", "int64"], 1, []),
    ("NegativeLogLikelihoodLoss", 22, 22, ["float", "int64", "float"], 1, [("reduction", "s", "sum")]),
    ("NegativeLogLikelihoodLoss", 22, 22, ["float16", "int64"], 1, [("ignore_index", "i", -1)]),
    ("NegativeLogLikelihoodLoss", 13, 17, ["double", "int32", "double"], 1,
     [("ignore_index", "i", 2), ("reduction", "s", "none")]),
    ("SoftmaxCrossEntropyLoss", 13, 13, ["float", "int64"], 1, []),
    ("SoftmaxCrossEntropyLoss", 13, 17, ["float", "int64", "float"], 2,
     [("ignore_index", "i", 0), ("reduction", "s", "sum")]),
    ("Bernoulli", 15, 15, ["double"], 1, []),
    ("Bernoulli", 22, 22, ["float"], 1, [("dtype", "i", 9), ("seed", "f", 1.5)]),
    ("CenterCropPad", 18, 18, ["float", "int64"], 1, []),
    ("CenterCropPad", 18, 18, ["float", "int64"], 1, [("axes", "ints", [0, 1])]),
    ("LayerNormalization", 17, 17, ["float16", "float16", "float16"], 3, [("axis", "i", 1)]),
    ("LayerNormalization", 17, 18, ["float", "float"], 1, [("epsilon", "f", 0.001)]),
    ("LayerNormalization", 17, 22, ["bfloat16", "bfloat16", "bfloat16"], 2, [("stash_type", "i", 16), ("axis", "i", -2)]),
    ("LayerNormalization", 17, 18, ["float", "float"], 1, [("stash_type", "i", 11)]),
    ("GroupNormalization", 18, 18, ["float", "float", "float"], 1, [("num_groups", "i", 2)]),
    ("GroupNormalization", 21, 21, ["float16", "float16", "float16"], 1,
     [("num_groups", "i", 4), ("epsilon", "f", 0.001)]),
    ("GroupNormalization", 21, 21, ["float", "float", "float"], 1, []),
    ("GroupNormalization", 21, 21, ["float", "float", "float"], 1, [("num_groups", "i", 2), ("stash_type", "i", 6)]),
]

# Attention-23/24 changed between ONNX releases; ORT bundles ONNX 1.18 (1.23, opset 23) and 1.20
# (1.24, opset 25), so these cases are written with that ONNX installed, tagged with the release's
# highest opset (`release=`), which is how the Rust side picks the builder.
ATTENTION_CASES = [
    ("Attention", 23, 23, ["bfloat16", "bfloat16", "bfloat16"], 1, [("is_causal", "i", 1)]),
    ("Attention", 23, 23, ["float16", "float16", "float16", "bool"], 1, [("q_num_heads", "i", 4), ("kv_num_heads", "i", 2)]),
    ("Attention", 23, 23, ["float", "float", "float", "float", "float", "float"], 4,
     [("scale", "f", 0.5), ("softcap", "f", 2.0), ("qk_matmul_output_mode", "i", 2), ("softmax_precision", "i", 1)]),
    ("Attention", 23, 23, ["float", "float", "float", "-", "float", "float"], 3, [("is_causal", "i", 1)]),
]
ATTENTION_CASES_24 = [
    ("Attention", 24, 24, ["bfloat16", "bfloat16", "bfloat16"], 1, [("is_causal", "i", 1)]),
    ("Attention", 24, 24, ["bfloat16", "bfloat16", "bfloat16", "float", "-", "-", "int64"], 1, []),
    ("Attention", 24, 25, ["float16", "float16", "float16", "bool", "float16", "float16"], 3,
     [("q_num_heads", "i", 4), ("kv_num_heads", "i", 4), ("is_causal", "i", 1)]),
]
RELEASE_OPSET = {"1.18": 23, "1.19": 24, "1.20": 25, "1.21": 26}

ELEM = {"float": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "double": TensorProto.DOUBLE,
        "int8": TensorProto.INT8, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
        "bfloat16": TensorProto.BFLOAT16, "bool": TensorProto.BOOL}


def canon_attr(a):
    if a.ref_attr_name:
        return f"{a.name}=@{a.ref_attr_name}"
    T = onnx.AttributeProto
    if a.type == T.INT:
        v = str(a.i)
    elif a.type == T.FLOAT:
        v = "f" + str(int(round(a.f * 1e6)))
    elif a.type == T.STRING:
        v = "s" + a.s.decode()
    elif a.type == T.INTS:
        v = "[" + ",".join(map(str, a.ints)) + "]"
    elif a.type == T.TENSOR:
        v = f"T{a.t.data_type}" + "[" + ",".join(map(str, a.t.dims)) + "]"
    elif a.type == T.GRAPH:
        v = "G"
    else:
        v = "?"
    return f"{a.name}={v}"


def canon(n):
    attrs = ";".join(sorted(canon_attr(a) for a in n.attribute))
    return f"{','.join(n.output)}={n.op_type}<{attrs}>({','.join(n.input)})"


def main():
    args = [a for a in sys.argv[1:] if a != "--attention"]
    if len(args) != 1:
        raise SystemExit(__doc__)
    release = ""
    cases = CASES
    if "--attention" in sys.argv:
        v = ".".join(onnx.__version__.split(".")[:2])
        release = f" release={RELEASE_OPSET[v]}"
        cases = ATTENTION_CASES + (ATTENTION_CASES_24 if RELEASE_OPSET[v] >= 24 else [])
    out = [f"# ONNX context-dependent function bodies for probe nodes; onnx {onnx.__version__}; "
           f"{datetime.date.today().isoformat()}. Generated by tools/functions/check_builders.py.", ""]
    for op, since, opset, inputs, nout, attrs in cases:
        schema = onnx.defs.get_schema(op, since, "")
        if schema.since_version != since or opset > onnx.defs.onnx_opset_version():
            continue  # an older ONNX (to compare releases) lacks this version
        names = [f"i{k}" if t != "-" else "" for k, t in enumerate(inputs)]
        outs = [f"o{k}" for k in range(nout)]
        node = helper.make_node(op, names, outs, **{n: v for n, _, v in attrs})
        types = []
        for t in inputs:
            if t == "-":
                types.append(onnx.TypeProto())
            elif t.startswith("seq("):
                types.append(helper.make_sequence_type_proto(helper.make_tensor_type_proto(ELEM[t[4:-1]], None)))
            else:
                types.append(helper.make_tensor_type_proto(ELEM[t], None))
        spec_attrs = ",".join(f"{n}:{k}:{'|'.join(map(str, v)) if k == 'ints' else v}" for n, k, v in attrs)
        out.append(f"#case {op} since={since} opset={opset} inputs={','.join(inputs)} outputs={nout} "
                   f"attrs={spec_attrs}{release}")
        # ORT asks for the graph's opset and gets the builder with the greatest key not above it
        # (the check of the ops it references is ignored for built bodies); Python only serves
        # exact keys, so ask for that key. The opset import is the only difference.
        key = max(k for k in schema.context_dependent_function_opset_versions if k <= opset)
        try:
            b = schema.get_context_dependent_function_with_opset_version(
                key, node.SerializeToString(), [t.SerializeToString() for t in types])
            f = onnx.FunctionProto()
            f.ParseFromString(b)
            if not f.node and not f.input:
                raise ValueError("the builder returned false")
            out.append("inputs " + ",".join(f.input) + " outputs " + ",".join(f.output))
            out.extend(canon(n) for n in f.node)
        except Exception as e:  # noqa: BLE001 - ONNX raises on a declined build
            out.append("declined")
        out.append("")
    with open(args[0], "w") as fh:
        fh.write("\n".join(out))
    print(f"{len(cases)} cases -> {args[0]}")


if __name__ == "__main__":
    main()
