"""Runs inside the stubbed release (see ortenv.run_child): every op schema's attributes.

Writes one JSON document to argv[1]: [{"domain", "op", "since", "attrs": [[name, required], ...]}].
"""
import json
import sys

from onnxruntime.capi import _pybind_state as C

out = []
for s in C.get_all_operator_schema():
    attrs = sorted((name, bool(a.required)) for name, a in s.attributes.items())
    out.append({"domain": s.domain or "ai.onnx", "op": s.name, "since": s.since_version, "attrs": attrs})
json.dump(out, open(sys.argv[1], "w"))
print(len(out))
