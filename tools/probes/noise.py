#!/usr/bin/env python3
"""No noise: on every model the oracle records with 0 copies, the linter must report nothing at
warn or deny (findings that cost nothing belong to the opt-in `zero-cost` group).

  python3 tools/probes/noise.py BIN TRUTH.jsonl[.gz] MODELS_DIR [TRUTH MODELS_DIR ...]

Prints each violation and a summary line per truth file; exits 1 on any violation.
"""
import gzip
import json
import os
import subprocess
import sys


def records(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def main():
    bin_ = sys.argv[1]
    pairs = list(zip(sys.argv[2::2], sys.argv[3::2]))
    bad = 0
    for truth, root in pairs:
        checked = noisy = 0
        for r in records(truth):
            if r.get("session") != "ok" or r.get("copies"):
                continue
            model = os.path.join(root, r["model"])
            if not os.path.exists(model):
                continue
            out = subprocess.run([bin_, "onnx-lint", "--format", "json", "--ort", r["ort"],
                                  "--opt-level", r["level"], model],
                                 capture_output=True, text=True, check=False, cwd="/tmp").stdout
            try:
                d = json.loads(out)
            except json.JSONDecodeError:
                continue
            if isinstance(d, list):
                d = d[0]
            checked += 1
            loud = [f for f in d.get("findings", []) if f["severity"] in ("warn", "deny")]
            if loud:
                noisy += 1
                codes = sorted({f["code"] for f in loud})
                print(f"  {r['model']} ({r['ort']} {r['level']}): {len(loud)} findings at warn/deny: {', '.join(codes)}; "
                      f"we predict {d['summary']['copies']} copies")
        bad += noisy
        print(f"{truth}: {checked} models with 0 copies, {noisy} with findings at warn/deny")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
