"""Confirm host-memory kernel arguments per release by asking ORT where it inserts copies.

For every CUDA registration in ai.onnx and com.microsoft (except the Memcpy ops themselves), a probe
node of that op is built with the row's own types and with the model opset set to the row's `since`
(probe_child.py). Each filled input comes from a CPU-only producer and each output goes to a CPU-only
consumer; ORT's MemcpyTransformer log then tells, per argument, whether the kernel reads or writes it
in device memory (a copy is inserted) or in host memory (no copy). Nodes that ORT does not place on
CUDA, or that do not load (a required attribute we cannot fill sensibly, inference errors), leave
their arguments untested. Many probe nodes share one model; a model that fails to load is split in
halves until the failing nodes are isolated; an isolated node is retried with only its required
inputs, and with each optional input on its own.
"""
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ortenv  # noqa: E402

SKIP_OPS = {"MemcpyFromHost", "MemcpyToHost"}
DOMAINS = {"": "ai.onnx", "com.microsoft": "com.microsoft"}
MAX_NODES = 48
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def row_key(k):
    # Same as generate.row_key (kept here to avoid an import cycle).
    dom = "ai.onnx" if k["domain"] == "" else k["domain"]
    return (k["provider"], dom, k["op"], k["since"], k["until"],
            json.dumps({n: sorted(t) for n, t in sorted(k["types"].items())}))


def parse_run(stderr):
    """Split one child's stderr into per-model records."""
    models, cur = {}, None
    for raw in stderr.splitlines():
        line = ANSI.sub("", raw)
        if line.startswith("@@MODEL "):
            cur = {"nodes": {}, "placed": {}, "from_host": set(), "to_host": set(), "done": None, "ep": None,
                   "has_placement": False}
            models[line.split()[1]] = cur
            continue
        if cur is None:
            continue
        if line.startswith("@@NODE "):
            _, _mid, name, rest = line.split(" ", 3)
            cur["nodes"][name] = json.loads(rest)
        elif line.startswith("@@DONE "):
            cur["done"] = line.split(" ", 3)[2]
        m = re.search(r"Node\(s\) placed on \[(\w+)\]", line)
        if m:
            cur["ep"] = m.group(1)
            cur["has_placement"] = True
            continue
        if re.search(r"All nodes placed on \[(\w+)\]", line):
            cur["has_placement"] = True
        m = re.search(r"VerifyEachNodeIsAssignedToAnEp\]\s{2,}(\S+) \((.*)\)\s*$", line)
        if m and cur["ep"]:
            cur["placed"][m.group(2)] = cur["ep"]
        m = re.search(r"Add MemcpyFromHost after (\S+) for", line)
        if m:
            cur["from_host"].add(m.group(1))
        m = re.search(r"Add MemcpyToHost before (\S+) for", line)
        if m:
            cur["to_host"].add(m.group(1))
    return models


def run_models(ver, models):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"models": models}, f)
        path = f.name
    try:
        with open(os.path.join(HERE, "probe_child.py")) as f:
            p = ortenv.run_child(ver, f.read(), path, timeout=1800)
    finally:
        os.remove(path)
    return parse_run(p.stderr)


def optional_inputs(schemas, probe, opset):
    cands = [s for s in schemas.get((probe["domain"], probe["op"]), []) if s["since"] <= opset]
    if not cands:
        return [], []
    s = max(cands, key=lambda s: s["since"])
    req = [i for i, p in enumerate(s["inputs"]) if p["option"] != "Optional"]
    opt = [i for i, p in enumerate(s["inputs"]) if p["option"] == "Optional"]
    return req, opt


def probe_opset(schemas, k, max_onnx):
    """The highest ai.onnx opset at which a node of the row's op still resolves to a since-version the
    row matches (higher opsets make more CPU-only producers available); the row's since if none."""
    if k["domain"] != "":
        return max_onnx
    history = sorted(s["since"] for s in schemas.get(("ai.onnx", k["op"]), []))
    best = k["since"]
    for opset in range(k["since"], max_onnx + 1):
        resolved = max((v for v in history if v <= opset), default=None)
        if resolved is None:
            continue
        open_ended = k["until"] == 2147483647
        if (resolved == k["since"]) if open_ended else (k["since"] <= resolved <= k["until"]):
            best = opset
    return best


def variants(schemas, probe, opset):
    """Single-node models of `probe` with only its required inputs, and with each optional one."""
    req, opt = optional_inputs(schemas, probe, opset)
    if not opt:
        return []
    return [{"id": "", "opset": opset, "nodes": [dict(probe, inputs=v)]} for v in [req] + [req + [j] for j in opt]]


def run(ver, enum, log=print):
    """Probe release `ver`. Returns ({row_key: (tested_in, cpu_in, tested_out, cpu_out)}, description)."""
    max_onnx = enum["opsets"][""]
    schemas = {}
    for s in enum["schemas"]:
        schemas.setdefault((DOMAINS.get(s["domain"], s["domain"]), s["op"]), []).append(s)
    rows = [k for k in enum["kernels"] if k["provider"] == "CUDAExecutionProvider" and k["domain"] in DOMAINS
            and k["op"] not in SKIP_OPS]
    keys = {json.dumps(row_key(k)): k for k in rows}
    groups = {}
    for kj, k in keys.items():
        opset = probe_opset(schemas, k, max_onnx)
        groups.setdefault(opset, []).append({"key": kj, "domain": DOMAINS[k["domain"]], "op": k["op"],
                                             "types": k["types"], "inputs": None})
    pending, n = [], 0
    for opset, probes in sorted(groups.items()):
        for i in range(0, len(probes), MAX_NODES):
            pending.append({"id": f"m{n}", "opset": opset, "nodes": probes[i:i + MAX_NODES]})
            n += 1
    results = {}  # key -> [tested_in set, cpu_in set, tested_out set, cpu_out set]
    sessions = 0
    while pending:
        out = run_models(ver, pending)
        sessions += len(pending)
        nxt = []
        for model in pending:
            rec = out.get(model["id"])
            if rec and rec["has_placement"]:
                for name, info in rec["nodes"].items():
                    if rec["placed"].get(name) != "CUDAExecutionProvider":
                        # ORT may refuse a node for one of its optional inputs (LSTM's peephole):
                        # retry with only the required inputs, and with each optional one.
                        probe_ = next(p for p in model["nodes"] if p["key"] == info["key"])
                        if probe_["inputs"] is None:
                            nxt.extend(variants(schemas, probe_, model["opset"]))
                        continue
                    r = results.setdefault(info["key"], [set(), set(), set(), set()])
                    for i, v in info["in"].items():
                        r[0].add(int(i))
                        if v not in rec["from_host"]:
                            r[1].add(int(i))
                    for k, v in info["out"].items():
                        r[2].add(int(k))
                        if v not in rec["to_host"]:
                            r[3].add(int(k))
                continue
            nodes = model["nodes"]
            if len(nodes) > 1:
                half = len(nodes) // 2
                for part in (nodes[:half], nodes[half:]):
                    nxt.append({"id": "", "opset": model["opset"], "nodes": part})
            elif nodes[0]["inputs"] is None:
                nxt.extend(variants(schemas, nodes[0], model["opset"]))
        for i, m in enumerate(nxt):
            m["id"] = f"m{n + i}"
        n += len(nxt)
        pending = nxt
    probed = {}
    for kj, r in results.items():
        probed[tuple(json.loads(kj))] = (sorted(r[0]), sorted(r[1]), sorted(r[2]), sorted(r[3]))
    log(f"  probe {ver}: {len(probed)} of {len(rows)} CUDA registrations placed on CUDA and probed, "
        f"{sessions} sessions")
    info = (f"ORT {ver} itself, with tools/kernel-tables/probe.py: per registration, a probe node whose inputs come "
            f"from CPU-only producers and whose outputs go to CPU-only consumers; no Memcpy = host memory. "
            f"{len(probed)} of {len(rows)} CUDA registrations probed")
    return probed, info
