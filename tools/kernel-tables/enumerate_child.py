"""Runs inside the stubbed release (see ortenv.run_child): asks ORT for its kernels, schemas and opsets.

Writes one JSON document to argv[1]:
    {"ort": version string, "kernels": [...], "schemas": [...], "opsets": {domain: int}}
Kernels are those of CUDAExecutionProvider and CPUExecutionProvider, with ORT's own strings; the ONNX
domain is reported by ORT as "" and kept that way here (the table writer normalises it).
"""
import json
import re
import sys

import onnx
from onnx import helper

import onnxruntime as ort
from onnxruntime.capi import _pybind_state as C

PROVIDERS = ("CUDAExecutionProvider", "CPUExecutionProvider")


def kernels():
    out = []
    for k in C.get_all_opkernel_def():
        if k.provider not in PROVIDERS:
            continue
        out.append({"provider": k.provider, "domain": k.domain, "op": k.op_name,
                    "since": k.version_range[0], "until": k.version_range[1],
                    "types": {n: list(t) for n, t in k.type_constraints.items()}})
    return out


def param(p):
    return {"name": p.name, "type": p.typeStr, "option": str(p.option).split(".")[-1],
            "homogeneous": bool(p.isHomogeneous)}


def schemas():
    out = []
    for s in C.get_all_operator_schema():
        out.append({"domain": s.domain, "op": s.name, "since": s.since_version, "deprecated": bool(s.deprecated),
                    "inputs": [param(p) for p in s.inputs], "outputs": [param(p) for p in s.outputs],
                    "types": {t.type_param_str: list(t.allowed_type_strs) for t in s.type_constraints},
                    "min_input": s.min_input, "max_input": s.max_input,
                    "min_output": s.min_output, "max_output": s.max_output})
    return out


SUPPORT = re.compile(r"Current official support for domain (\S*) is till opset (\d+)")


def max_opsets(domains):
    """Highest opset ORT accepts per domain, from its own refusal of an absurdly new one.

    A model importing domain D at version 10000 fails to load with "... Current official support for
    domain D is till opset M." when D has a last released version; a domain without one (ORT's
    internal domains) is accepted at any version and is recorded as the newest since-version of its
    schemas instead (`accepts_any` lists those).
    """
    result, accepts_any = {}, []
    for domain in sorted(domains):
        imports = [helper.make_opsetid("", 17)] if domain != "" else []
        imports.append(helper.make_opsetid(domain, 10000))
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
        model = helper.make_model(graph, opset_imports=imports, ir_version=8)
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            accepts_any.append(domain)
        except Exception as e:  # noqa: BLE001 - we parse ORT's message
            m = SUPPORT.search(str(e))
            if not m:
                raise SystemExit(f"unexpected error probing domain {domain!r}: {e}")
            result[domain] = int(m.group(2))
    return result, accepts_any


def main():
    ks, ss = kernels(), schemas()
    domains = {s["domain"] for s in ss}
    opsets, accepts_any = max_opsets(domains)
    for d in accepts_any:
        opsets[d] = max(s["since"] for s in ss if s["domain"] == d)
    doc = {"ort": ort.__version__, "kernels": ks, "schemas": ss, "opsets": opsets, "accepts_any_opset": accepts_any}
    with open(sys.argv[1], "w") as f:
        json.dump(doc, f)
    print(len(ks), len(ss), opsets)


if __name__ == "__main__":
    main()
