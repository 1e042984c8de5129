#!/usr/bin/env python3
"""Generate kernel-tables/ort-<ver>.toml from the published onnxruntime-gpu wheel of a release.

    python3 tools/kernel-tables/generate.py 1.24.4 [1.25.1 ...] [--probe] [--date YYYY-MM-DD]

For each release: download the wheel once (cache: $KERNEL_TABLES_CACHE, default ~/.cache/onnx-lint-tables),
stub its CUDA dependencies (ortenv.py), ask ORT for its CUDA and CPU kernel registrations, its op
schema history and its highest opset per domain (enumerate_child.py), add the host-memory kernel
arguments (host_memory.py, optionally confirmed by probe.py), and write
    kernel-tables/ort-<ver>.toml                     the canonical table (format: kernel-tables/README.md)
    tests/fixtures/kernel-enum/ort-<ver>.json.gz     ORT's raw kernel enumeration, for tests/it/tables.rs
The TOML text written here must be byte-identical to what src/tables/format.rs writes; the Rust test
`tables_are_canonical` checks that.
"""
import argparse
import datetime
import gzip
import hashlib
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import host_memory  # noqa: E402
import ortenv  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
GENERATOR = "tools/kernel-tables/generate.py 1"
INT_MAX = 2147483647
PROVIDERS = ("CPUExecutionProvider", "CUDAExecutionProvider")


# ---------------------------------------------------------------------------------------------
# Named type sets

ELEM = {"float": "f32", "double": "f64", "float16": "f16", "bfloat16": "bf16", "bool": "bool", "string": "str",
        "complex64": "c64", "complex128": "c128", "float8e4m3fn": "f8e4m3fn", "float8e4m3fnuz": "f8e4m3fnuz",
        "float8e5m2": "f8e5m2", "float8e5m2fnuz": "f8e5m2fnuz", "float8e8m0": "f8e8m0", "float4e2m1": "f4e2m1"}
for _b in (2, 4, 8, 16, 32, 64):
    ELEM[f"int{_b}"] = f"i{_b}"
    ELEM[f"uint{_b}"] = f"u{_b}"


def abbrev(t):
    """Short, injective spelling of one ORT type string, or None for an unknown shape."""
    m = re.fullmatch(r"tensor\((\w+)\)", t)
    if m:
        return ELEM.get(m.group(1))
    for wrapper, prefix in (("seq", "seq"), ("optional", "opt")):
        if t.startswith(wrapper + "(") and t.endswith(")"):
            inner = abbrev(t[len(wrapper) + 1:-1])
            return prefix + inner if inner else None
    m = re.fullmatch(r"sparse_tensor\((\w+)\)", t)
    if m and m.group(1) in ELEM:
        return "sp" + ELEM[m.group(1)]
    m = re.fullmatch(r"map\((\w+), (.+)\)", t)
    if m and m.group(1) in ELEM:
        v = abbrev(m.group(2)) if "(" in m.group(2) else ELEM.get(m.group(2))
        return "map" + ELEM[m.group(1)] + v if v else None
    return None


def typeset_name(types):
    """Name of a set of two or more type strings: derived from its content only, so stable across releases.

    Up to three types: their short spellings joined by "_" ("f16_f32_f64"). More: a kind letter
    (t = tensors, s = sequences, o = optionals, x = mixed), the count and 6 hex digits of the sha256
    of the sorted, comma-joined type strings ("t13_4be1c2").
    """
    types = sorted(types)
    shorts = [abbrev(t) for t in types]
    if len(types) <= 3 and all(shorts):
        return "_".join(sorted(shorts))
    kinds = {t.split("(")[0] for t in types}
    kind = {"tensor": "t", "seq": "s", "optional": "o"}.get(kinds.pop(), "x") if len(kinds) == 1 else "x"
    digest = hashlib.sha256(",".join(types).encode()).hexdigest()[:6]
    return f"{kind}{len(types)}_{digest}"


class Typesets:
    def __init__(self):
        self.by_name = {}

    def ref(self, types):
        """The table spelling of a type list: the type itself when single, else "@name"."""
        types = sorted(types)
        if len(types) == 1:
            return types[0]
        name = typeset_name(types)
        prev = self.by_name.setdefault(name, types)
        if prev != types:
            raise SystemExit(f"type set name collision: {name}: {prev} vs {types}")
        return "@" + name


# ---------------------------------------------------------------------------------------------
# TOML spelling (kept in step with src/tables/format.rs)

BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def qstr(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def key(s):
    return s if BARE.match(s) else qstr(s)


def inline_types(constraints, ts):
    if not constraints:
        return "{}"
    return "{ " + ", ".join(f"{key(n)} = {qstr(ts.ref(t))}" for n, t in sorted(constraints.items())) + " }"


def int_list(xs):
    return "[" + ", ".join(str(x) for x in xs) + "]"


def str_list(xs):
    return "[" + ", ".join(qstr(x) for x in xs) + "]"


# ---------------------------------------------------------------------------------------------
# Rows

def norm_domain(d):
    return "ai.onnx" if d == "" else d


def kernel_row(k, ts):
    parts = [f"since = {k['since']}"]
    if k["until"] != INT_MAX:
        parts.append(f"until = {k['until']}")
    parts.append(f"types = {inline_types(k['types'], ts)}")
    if k.get("cpu_inputs"):
        parts.append(f"cpu_inputs = {int_list(k['cpu_inputs'])}")
    if k.get("cpu_outputs"):
        parts.append(f"cpu_outputs = {int_list(k['cpu_outputs'])}")
    if k.get("mem"):
        parts.append(f"mem = {qstr(k['mem'])}")
    return "{ " + ", ".join(parts) + " }"


def kernel_sort_key(k, ts):
    return (-k["since"], -k["until"], inline_types(k["types"], ts))


def param_str(p, min_arity):
    """"X: T" single, "B?: T" optional, "inputs*1: T" variadic with min arity 1; "~" after the marker
    when ORT reports the parameter as heterogeneous."""
    mark = {"Single": "", "Optional": "?", "Variadic": f"*{min_arity}"}[p["option"]]
    if not p["homogeneous"]:
        mark += "~"
    return f"{p['name']}{mark}: {p['type']}"


def arity_bounds(params, min_arities):
    """ONNX's OpSchema::Finalize count of (min, max) arguments for a formal parameter list."""
    lo = hi = 0
    for p, a in zip(params, min_arities):
        if p["option"] == "Single":
            hi += 1
            lo = hi
        elif p["option"] == "Optional":
            hi += 1
        else:
            lo = hi + a
            hi = INT_MAX
    return lo, hi


def derive_min_arity(params, reported_min):
    """ORT's Python API has no min_arity; recover it from the reported minimum count (only the last
    parameter can be variadic). Falls back to ONNX's default 1 when the count was set explicitly."""
    out = []
    for i, p in enumerate(params):
        if p["option"] == "Variadic":
            before = arity_bounds(params[:i], [0] * i)[1]
            a = reported_min - before
            out.append(a if a >= 0 else 1)
        else:
            out.append(0)
    return out


def schema_row(s, ts):
    ins_a = derive_min_arity(s["inputs"], s["min_input"])
    outs_a = derive_min_arity(s["outputs"], s["min_output"])
    parts = [f"since = {s['since']}"]
    if s["deprecated"]:
        parts.append("deprecated = true")
    parts.append(f"inputs = {str_list([param_str(p, a) for p, a in zip(s['inputs'], ins_a)])}")
    parts.append(f"outputs = {str_list([param_str(p, a) for p, a in zip(s['outputs'], outs_a)])}")
    parts.append(f"types = {inline_types(s['types'], ts)}")
    if arity_bounds(s["inputs"], ins_a) != (s["min_input"], s["max_input"]):
        parts.append(f"n_inputs = {int_list([s['min_input'], s['max_input']])}")
    if arity_bounds(s["outputs"], outs_a) != (s["min_output"], s["max_output"]):
        parts.append(f"n_outputs = {int_list([s['min_output'], s['max_output']])}")
    return "{ " + ", ".join(parts) + " }"


def check_param_spelling(s):
    for p in s["inputs"] + s["outputs"]:
        if ": " in p["name"] or re.search(r"(\?|\*\d+)~?$", p["name"]) or p["name"].endswith("~"):
            raise SystemExit(f"parameter name {p['name']!r} of {s['op']} cannot be spelled unambiguously")


# ---------------------------------------------------------------------------------------------
# The table

def apply_host_memory(kernels, probed):
    """Attach cpu_inputs/cpu_outputs/mem to CUDA rows. `probed` maps a row key to the probe's verdict
    (cpu_inputs, cpu_outputs) for the arguments it could test, or is empty."""
    disagreements = []
    for k in kernels:
        if k["provider"] != "CUDAExecutionProvider":
            continue
        hit = host_memory.lookup(norm_domain(k["domain"]), k["op"], k["since"])
        ins, outs, src = hit if hit else ([], [], None)
        p = probed.get(row_key(k))
        mem = [src] if src else []
        if p is not None:
            tested_in, cpu_in, tested_out, cpu_out = p
            # The probe is ORT itself: where it tested an argument, its verdict wins.
            new_ins = sorted((set(ins) - set(tested_in)) | set(cpu_in))
            new_outs = sorted((set(outs) - set(tested_out)) | set(cpu_out))
            if (new_ins, new_outs) != (ins, outs):
                disagreements.append((row_key(k), (ins, outs), (new_ins, new_outs)))
            ins, outs = new_ins, new_outs
            mem.append("probe")
        k["cpu_inputs"], k["cpu_outputs"] = ins, outs
        if mem and (ins or outs or "probe" in mem):
            k["mem"] = "+".join(mem)
    return disagreements


def row_key(k):
    return (k["provider"], norm_domain(k["domain"]), k["op"], k["since"], k["until"],
            json.dumps({n: sorted(t) for n, t in sorted(k["types"].items())}))


def render(meta, enum, probe_info):
    ts = Typesets()
    kernel_lines, schema_lines = [], []
    by_group = {}
    for k in enum["kernels"]:
        by_group.setdefault((k["provider"], norm_domain(k["domain"])), {}).setdefault(k["op"], []).append(k)
    for (prov, dom) in sorted(by_group):
        kernel_lines.append("")
        kernel_lines.append(f"[kernels.{prov}.{qstr(dom)}]")
        for op in sorted(by_group[(prov, dom)]):
            rows = sorted(by_group[(prov, dom)][op], key=lambda k: kernel_sort_key(k, ts))
            kernel_lines.append(f"{key(op)} = [")
            kernel_lines.extend(f"  {kernel_row(k, ts)}," for k in rows)
            kernel_lines.append("]")
    sch = {}
    for s in enum["schemas"]:
        check_param_spelling(s)
        sch.setdefault(norm_domain(s["domain"]), {}).setdefault(s["op"], []).append(s)
    for dom in sorted(sch):
        schema_lines.append("")
        schema_lines.append(f"[schemas.{qstr(dom)}]")
        for op in sorted(sch[dom]):
            rows = sorted(sch[dom][op], key=lambda s: -s["since"])
            schema_lines.append(f"{key(op)} = [")
            schema_lines.extend(f"  {schema_row(s, ts)}," for s in rows)
            schema_lines.append("]")
    out = [f"# ONNX Runtime {meta['ort']}: kernel registrations and op schemas, as ORT itself reports them.",
           "# Generated by tools/kernel-tables/generate.py; do not edit by hand. Format: kernel-tables/README.md.",
           "",
           "[release]",
           f"ort = {qstr(meta['ort'])}",
           f"wheel = {qstr(meta['wheel'])}",
           f"sha256 = {qstr(meta['sha256'])}",
           f"generator = {qstr(meta['generator'])}",
           f"date = {qstr(meta['date'])}",
           "",
           "[opsets]"]
    out += [f"{qstr(norm_domain(d))} = {v}" for d, v in sorted(enum["opsets"].items(), key=lambda kv: norm_domain(kv[0]))]
    out += ["", "[memory]"]
    sources = dict(host_memory.SOURCES)
    if probe_info:
        sources["probe"] = probe_info
    out += [f"{key(n)} = {qstr(v)}" for n, v in sorted(sources.items())]
    out += ["", "[typesets]"]
    out += [f"{key(n)} = {str_list(t)}" for n, t in sorted(ts.by_name.items())]
    return "\n".join(out + kernel_lines + schema_lines) + "\n"


def write_fixture(ver, enum):
    """ORT's raw enumeration (kernels as reported, opsets), gzip'd deterministically."""
    doc = {"ort": ver, "opsets": enum["opsets"],
           "kernels": sorted(({k: v for k, v in kr.items() if k in ("provider", "domain", "op", "since", "until", "types")}
                              for kr in enum["kernels"]),
                             key=lambda k: (k["provider"], k["domain"], k["op"], k["since"], k["until"],
                                            json.dumps(k["types"], sort_keys=True)))}
    path = os.path.join(REPO, "tests", "fixtures", "kernel-enum", f"ort-{ver}.json.gz")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as g:
            g.write(raw)
    return path


def enumerate_release(ver):
    d, wheel, sha = ortenv.prepare(ver)
    out = os.path.join(d, "enumeration.json")
    with open(os.path.join(HERE, "enumerate_child.py")) as f:
        p = ortenv.run_child(ver, f.read(), out)
    if p.returncode != 0:
        raise SystemExit(f"enumeration of {ver} failed:\n{p.stderr[-4000:]}")
    with open(out) as f:
        enum = json.load(f)
    if enum["ort"] != ver:
        raise SystemExit(f"wheel for {ver} reports version {enum['ort']}")
    return enum, wheel, sha


def generate(ver, date, probe):
    enum, wheel, sha = enumerate_release(ver)
    probed, probe_info = {}, None
    if probe:
        import probe as probe_mod
        probed, probe_info = probe_mod.run(ver, enum)
    disagreements = apply_host_memory(enum["kernels"], probed)
    for key_, old, new in disagreements:
        print(f"  probe overrides sources for {key_[:5]}: {old} -> {new}", file=sys.stderr)
    meta = {"ort": ver, "wheel": wheel, "sha256": sha, "generator": GENERATOR, "date": date}
    text = render(meta, enum, probe_info)
    path = os.path.join(REPO, "kernel-tables", f"ort-{ver}.toml")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    fx = write_fixture(ver, enum)
    n = {p: sum(1 for k in enum["kernels"] if k["provider"] == p) for p in PROVIDERS}
    print(f"{ver}: {path} ({len(text)} bytes), {fx}; kernels {n}, schemas {len(enum['schemas'])}, "
          f"opsets {enum['opsets']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("versions", nargs="+")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--probe", action="store_true", help="confirm host-memory arguments with probe models")
    a = ap.parse_args()
    for v in a.versions:
        generate(v, a.date, a.probe)


if __name__ == "__main__":
    main()
