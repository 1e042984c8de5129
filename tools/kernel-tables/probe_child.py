"""Runs inside the stubbed release (see probe.py): builds probe models and creates ORT sessions.

argv[1]: JSON {"models": [{"id": str, "opset": int, "nodes": [probe, ...]}]}, where a probe is
    {"key": str, "domain": str, "op": str, "types": {constraint: [types]}, "inputs": [i, ...] | null}
("inputs": which formal inputs to fill; null = all). For every model it prints to stderr
    @@MODEL <id>            then ORT's verbose session log, then
    @@DONE <id> ok|fail <message>
and, before the log, one line per probe node describing what was wired:
    @@NODE <id> <node name> <json: key, tested inputs {index: value}, tested outputs {index: value}>
A probe node N gets each filled input from its own CPU-only producer (com.microsoft ExpandDims, or
Optional -> OptionalGetElement from opset 15), and each output goes to a CPU-only consumer. With the
CUDA provider listed first, ORT inserts MemcpyFromHost after an input value exactly when N's kernel
reads that input from device memory, and MemcpyToHost before an output exactly when it writes that
output to device memory.
"""
import json
import sys

import onnx
from onnx import TensorProto, helper

import onnxruntime as ort
from onnxruntime.capi import _pybind_state as C

ELEM = {"float": TensorProto.FLOAT, "double": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
        "bfloat16": TensorProto.BFLOAT16, "int8": TensorProto.INT8, "int16": TensorProto.INT16,
        "int32": TensorProto.INT32, "int64": TensorProto.INT64, "uint8": TensorProto.UINT8,
        "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32, "uint64": TensorProto.UINT64,
        "bool": TensorProto.BOOL, "string": TensorProto.STRING}
for _name in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "INT4", "UINT4", "FLOAT4E2M1",
              "FLOAT8E8M0", "INT2", "UINT2", "COMPLEX64", "COMPLEX128"):
    if hasattr(TensorProto, _name):
        ELEM[_name.lower()] = getattr(TensorProto, _name)
EXPAND_DIMS = {"float", "double", "int64", "uint64", "int32", "uint32", "int16", "uint16", "int8", "uint8",
               "float16", "bfloat16", "bool", "string"}
# Attributes without which ORT would not place the node on CUDA or could not create it.
EXTRA_ATTRS = {"GRU": {"hidden_size": 1, "linear_before_reset": 1}, "LSTM": {"hidden_size": 1},
               "RNN": {"hidden_size": 1}}
PREFERRED = ["tensor(float)", "tensor(int64)", "tensor(int32)", "tensor(bool)", "tensor(float16)", "seq(tensor(float))"]


def type_proto(t):
    if t.startswith("tensor(") and t.endswith(")"):
        e = t[7:-1]
        return helper.make_tensor_type_proto(ELEM[e], None) if e in ELEM else None
    if t.startswith("seq(") and t.endswith(")"):
        inner = type_proto(t[4:-1])
        return helper.make_sequence_type_proto(inner) if inner else None
    if t.startswith("optional(") and t.endswith(")"):
        inner = type_proto(t[9:-1])
        return helper.make_optional_type_proto(inner) if inner else None
    return None


def pick(types):
    for p in PREFERRED:
        if p in types:
            return p
    usable = [t for t in sorted(types) if type_proto(t) is not None]
    return usable[0] if usable else None


SCHEMAS = {}
for _s in C.get_all_operator_schema():
    SCHEMAS.setdefault((_s.domain or "ai.onnx", _s.name), []).append(_s)


def _allowed(domain, op, param):
    s = max(SCHEMAS.get((domain, op), []), key=lambda s: s.since_version, default=None)
    if s is None:
        return set()
    return {t for c in s.type_constraints if c.type_param_str == param for t in c.allowed_type_strs}


# What the CPU-only producers accept: the schema and the CPU kernel must both allow the type.
EXPAND_DIMS_TYPES = {t for t in _allowed("com.microsoft", "ExpandDims", "T")
                     if t.startswith("tensor(") and t[7:-1] in EXPAND_DIMS}
OPTIONAL_TYPES = _allowed("ai.onnx", "Optional", "V") & _allowed("ai.onnx", "OptionalGetElement", "V")


def schema_for(domain, op, opset):
    cands = [s for s in SCHEMAS.get((domain, op), []) if s.since_version <= opset]
    return max(cands, key=lambda s: s.since_version) if cands else None


def cast_types(opset):
    """Tensor types a Cast from/to string can produce/consume at `opset` (a CUDA Cast never takes
    strings, so such a Cast always runs on the CPU)."""
    s = schema_for("ai.onnx", "Cast", opset) if opset >= 13 else None
    if s is None:
        return set()
    t1 = {t for c in s.type_constraints if c.type_param_str == "T1" for t in c.allowed_type_strs}
    t2 = {t for c in s.type_constraints if c.type_param_str == "T2" for t in c.allowed_type_strs}
    if "tensor(string)" not in t1 or "tensor(string)" not in t2:
        return set()
    return {t for t in t1 & t2 if t != "tensor(string)" and t[7:-1] in ELEM}


def control_flow_bodies(op, bound):
    """Trivial bodies for If (one float output) and Loop (one loop-carried value of the bound type V)."""
    if op == "If":
        def branch(tag):
            c = helper.make_node("Constant", [], [f"{tag}_out"],
                                 value=helper.make_tensor(f"{tag}_v", TensorProto.FLOAT, [1], [1.0]))
            return helper.make_graph([c], tag, [], [helper.make_tensor_value_info(f"{tag}_out", TensorProto.FLOAT,
                                                                                  [1])])
        return {"then_branch": branch("then"), "else_branch": branch("else")}
    if op == "Loop":
        v = type_proto(bound.get("V") or "tensor(float)")
        body = helper.make_graph(
            [helper.make_node("Identity", ["b_cond"], ["b_cond_out"]), helper.make_node("Identity", ["b_v"], ["b_v_out"])],
            "body",
            [helper.make_tensor_value_info("b_iter", TensorProto.INT64, []),
             helper.make_tensor_value_info("b_cond", TensorProto.BOOL, []), helper.make_value_info("b_v", v)],
            [helper.make_tensor_value_info("b_cond_out", TensorProto.BOOL, []), helper.make_value_info("b_v_out", v)])
        return {"body": body}
    return {}


def attr_value(name, atype, out_elem):
    T = C.schemadef.OpSchema.AttrType
    if name == "to" and atype == T.INT:
        return out_elem if out_elem is not None else TensorProto.FLOAT
    return {T.INT: 1, T.FLOAT: 1.0, T.STRING: "", T.INTS: [1], T.FLOATS: [1.0], T.STRINGS: [""],
            T.TENSOR: helper.make_tensor("t", TensorProto.FLOAT, [1], [1.0])}.get(atype)


def build(model, log):
    opset = model["opset"]
    nodes, inits, ginputs, goutputs = [], [], [], []
    inits.append(helper.make_tensor("axis0", TensorProto.INT32, [], [0]))
    via_cast = cast_types(opset)
    for n, probe in enumerate(model["nodes"]):
        domain = probe["domain"]
        s = schema_for(domain, probe["op"], opset if domain == "ai.onnx" else 1)
        if s is None:
            raise SystemExit(f"no schema for {probe}")
        bound = {}

        schema_allowed = {t.type_param_str: set(t.allowed_type_strs) for t in s.type_constraints}

        def type_of(param):
            ts = param.typeStr
            if ts in probe["types"]:
                kernel = set(probe["types"][ts])
                both = kernel & schema_allowed.get(ts, kernel)
                return bound.setdefault(ts, pick(sorted(both or kernel)))
            if ts in schema_allowed:
                return bound.setdefault(ts, pick(sorted(schema_allowed[ts])))
            return ts

        name = f"n{n}"
        ins, tested_in = [], {}
        for i, p in enumerate(s.inputs):
            fill = probe["inputs"] is None or i in probe["inputs"]
            optional = str(p.option).endswith("Optional")
            if not fill and optional:
                ins.append("")
                continue
            t = type_of(p)
            tp = type_proto(t) if t else None
            if tp is None:
                raise SystemExit(f"untyped input {i} of {probe['op']}")
            g = f"g{n}_{i}"
            ginputs.append(helper.make_value_info(g, tp))
            v = f"p{n}_{i}"
            if opset >= 18 and t in OPTIONAL_TYPES:
                nodes.append(helper.make_node("Optional", [g], [f"q{n}_{i}"], name=f"Q{n}_{i}"))
                nodes.append(helper.make_node("OptionalGetElement", [f"q{n}_{i}"], [v], name=f"P{n}_{i}"))
                tested_in[i] = v
            elif t in EXPAND_DIMS_TYPES:
                nodes.append(helper.make_node("ExpandDims", [g, "axis0"], [v], name=f"P{n}_{i}",
                                              domain="com.microsoft"))
                tested_in[i] = v
            elif t in via_cast:
                ginputs[-1] = helper.make_value_info(g, type_proto("tensor(string)"))
                nodes.append(helper.make_node("Cast", [g], [v], name=f"P{n}_{i}", to=ELEM[t[7:-1]]))
                tested_in[i] = v
            else:
                v = g  # a graph input: fed by the session, not by a node, so nothing is learnt
            ins.append(v)
        while ins and ins[-1] == "":
            ins.pop()
        outs, tested_out, out_elem = [], {}, None
        for k, p in enumerate(s.outputs):
            t = type_of(p)
            o = f"o{n}_{k}"
            outs.append(o)
            if k == 0 and t and t.startswith("tensor(") and t[7:-1] in ELEM:
                out_elem = ELEM[t[7:-1]]
            c = f"c{n}_{k}"
            if opset >= 15 and t in OPTIONAL_TYPES:
                nodes.append(helper.make_node("Optional", [o], [c], name=f"C{n}_{k}"))
                tested_out[k] = o
            elif t in EXPAND_DIMS_TYPES:
                nodes.append(helper.make_node("ExpandDims", [o, "axis0"], [c], name=f"C{n}_{k}",
                                              domain="com.microsoft"))
                tested_out[k] = o
            elif t in via_cast:
                nodes.append(helper.make_node("Cast", [o], [c], name=f"C{n}_{k}", to=TensorProto.STRING))
                tested_out[k] = o
            else:
                c = o
            goutputs.append(helper.make_value_info(c, onnx.TypeProto()))
        attrs = dict(EXTRA_ATTRS.get(probe["op"], {}))
        attrs.update(control_flow_bodies(probe["op"], bound))
        for a in s.attributes.values():
            if a.required and a.name not in attrs:
                val = attr_value(a.name, a.type, out_elem)
                if val is None:
                    raise SystemExit(f"cannot fill attribute {a.name} of {probe['op']}")
                attrs[a.name] = val
        nodes.append(helper.make_node(probe["op"], ins, outs, name=name,
                                      domain="" if domain == "ai.onnx" else domain, **attrs))
        log(f"@@NODE {model['id']} {name} " + json.dumps({"key": probe["key"], "in": tested_in, "out": tested_out}))
    graph = helper.make_graph(nodes, "probe", ginputs, goutputs, initializer=inits)
    imports = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=imports, ir_version=10)


def main():
    with open(sys.argv[1]) as f:
        job = json.load(f)

    def log(line):
        sys.stderr.flush()
        print(line, file=sys.stderr, flush=True)

    for model in job["models"]:
        log(f"@@MODEL {model['id']}")
        try:
            proto = build(model, log)
            so = ort.SessionOptions()
            so.log_severity_level = 0
            so.log_verbosity_level = 0
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            ort.InferenceSession(proto.SerializeToString(), so,
                                 providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
            log(f"@@DONE {model['id']} ok")
        except BaseException as e:  # noqa: BLE001 - every failure is a result here
            log(f"@@DONE {model['id']} fail " + str(e).replace("\n", " ")[:500])


if __name__ == "__main__":
    main()
