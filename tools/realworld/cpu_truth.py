#!/usr/bin/env python3
"""CPU-only truth: what the CPU `onnxruntime` package of a release does with a model at a level,
as the same record shape the stubbed-GPU oracle writes (../shared/oracle/ortstub.py's
`parse_log` reads the verbose session log), plus `nodes`: the names of the nodes of the session
graph ORT saves (`optimized_model_filepath`; every graph, Memcpy excluded), which is what a
CPU-only prediction can be checked against by name.

  cpu_truth.py --ort-root DIR --releases 1.23.2,1.31.1 --levels disable,all OUT_DIR SET=MODEL_DIR...

`DIR/<release>` is a `pip install --no-deps --target` of `onnxruntime==<release>` (the CPU
wheel). Level `all` depends on the machine: ORT's NCHWc transformer uses MLAS's block size, 16
with AVX-512F and 8 on other x86-64 CPUs, and the tests compare the fixtures with predictions for
block 16 (`placer::RECORDED_NCHWC_BLOCK`); so `all` is recorded only on an AVX-512F machine
(`--any-cpu` overrides; block-8 truth belongs in tests/fixtures/nchwc, see nchwc_block.py).
Writes `OUT_DIR/cpu-<set>-<release>-<level>.jsonl.gz`, sorted by model, `model` relative to
MODEL_DIR. One child process per release creates every session (stderr is redirected per
session to read its log), so a release's thousand sessions take seconds, not minutes.
"""
import argparse
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile

CHILD = r'''
import json, os, sys
import onnxruntime as ort
ort.set_default_logger_severity(0)
jobs = json.load(open(sys.argv[1]))
levels = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
saved = os.dup(2)
out = open(sys.argv[2], "w")
for model, level, log, opt in jobs:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)
    so = ort.SessionOptions(); so.log_severity_level = 0; so.log_verbosity_level = 0
    so.graph_optimization_level = levels[level]
    so.optimized_model_filepath = opt
    try:
        ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        status = "@@SESSION_OK"
    except Exception as e:
        status = "@@SESSION_FAIL " + str(e).replace("\n", " ")[:2000]
    os.dup2(saved, 2)
    os.close(fd)
    with open(log, "a") as f:
        f.write("\n" + status + "\n")
    out.write(json.dumps([model, level]) + "\n"); out.flush()
'''


def node_names(path):
    import onnx

    m = onnx.load(path, load_external_data=False)
    names = []

    def walk(g):
        for n in g.node:
            if n.op_type not in ("MemcpyFromHost", "MemcpyToHost"):
                names.append(n.name)
            for a in n.attribute:
                if a.HasField("g"):
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)

    walk(m.graph)
    return sorted(names)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ort-root", required=True)
    ap.add_argument("--releases", required=True)
    ap.add_argument("--levels", default="disable,basic,extended,all")
    ap.add_argument("--oracle", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../shared/oracle"))
    ap.add_argument("--any-cpu", action="store_true", help="record level all without AVX-512F")
    ap.add_argument("out")
    ap.add_argument("sets", nargs="+")
    a = ap.parse_args()
    if "all" in a.levels.split(",") and not a.any_cpu:
        with open("/proc/cpuinfo") as f:
            if "avx512f" not in f.read().split():
                sys.exit("cpu_truth.py: no AVX-512F here (MLAS NCHWc block 8, not the fixtures' 16): "
                         "level all would not be the truth the tests expect (--any-cpu to record anyway)")
    sys.path.insert(0, a.oracle)
    import ortstub  # parse_log: the oracle's own reading of ORT's log

    work = tempfile.mkdtemp()
    for release in a.releases.split(","):
        for spec in a.sets:
            name, root = spec.split("=", 1)
            # Not the oracle's transient optimised models (`<model>.ort<v>.<level>.opt.onnx`, written
            # next to the model while record.sh runs).
            models = sorted(m for m in glob.glob(os.path.join(root, "**", "*.onnx"), recursive=True)
                            if not m.endswith(".opt.onnx"))
            jobs = []
            for level in a.levels.split(","):
                for i, m in enumerate(models):
                    tag = f"{level}-{i}"
                    jobs.append([m, level, os.path.join(work, tag + ".log"), os.path.join(work, tag + ".opt.onnx")])
            jf = os.path.join(work, "jobs.json")
            json.dump(jobs, open(jf, "w"))
            done = os.path.join(work, "done.jsonl")
            env = dict(os.environ, PYTHONPATH=os.path.join(a.ort_root, release))
            p = subprocess.run([sys.executable, "-c", CHILD, jf, done], env=env, capture_output=True, text=True)
            if p.returncode != 0:
                sys.stderr.write(p.stderr[-3000:])
            by_level = {}
            for m, level, log, opt in jobs:
                text = open(log, errors="replace").read() if os.path.exists(log) else ""
                r = ortstub.parse_log(text)
                if r["session"] is None:
                    r["session"], r["error"] = "crash", f"no log (child exit {p.returncode})"
                if r.get("error"):  # no machine's paths in the fixtures
                    r["error"] = r["error"].replace(os.path.abspath(root) + "/", "").replace(root + "/", "")[:400]
                r["nodes"] = node_names(opt) if r["session"] == "ok" and os.path.exists(opt) else None
                for f in (log, opt):
                    if os.path.exists(f):
                        os.remove(f)
                r.update(model=os.path.relpath(m, root), ort=release, level=level, ep="cpu")
                keep = ("model", "ort", "level", "ep", "session", "error", "placement", "all_nodes_on", "memcpy",
                        "nodes")
                by_level.setdefault(level, []).append({k: r.get(k) for k in keep})
            for level, records in by_level.items():
                dst = os.path.join(a.out, f"cpu-{name}-{release}-{level}.jsonl.gz")
                records.sort(key=lambda r: r["model"])
                with gzip.GzipFile(dst, "wb", mtime=0) as f:
                    for r in records:
                        f.write((json.dumps(r, sort_keys=True) + "\n").encode())
                print(f"{len(records)} records -> {dst}", flush=True)


if __name__ == "__main__":
    main()
