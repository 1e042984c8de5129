#!/usr/bin/env python3
"""Paired whole-process timing of two commands, A and B, run alternately (A B A B ...), so that
both see the same machine load. Each run's CPU time (user + sys of the child, from wait4's
rusage), wall time and peak RSS are recorded; the report gives the median of each and the
median of the per-pair ratios B/A, which is the figure to quote on a busy machine.

  ab.py [--runs N] [--warmup W] [--same-output] -- CMD_A... -- CMD_B...

`--same-output` also checks that A and B print the same bytes on stdout (two builds of `place`
that must agree). `{ort}` in a command is replaced by a python one-liner that creates a CPU
onnxruntime session: `ab.py -- place M --format json -- {ort} M all` (python: $ONNX_LINT_PYTHON,
else python3).
"""
import os
import statistics
import subprocess
import sys
import time

ORT = r'''
import sys, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}[sys.argv[2]]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
'''


def expand(cmd):
    if cmd and cmd[0] == "{ort}":
        py = os.environ.get("ONNX_LINT_PYTHON", "python3")
        return [py, "-c", ORT] + cmd[1:]
    return cmd


def run(cmd):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        sys.exit(f"ab.py: {' '.join(cmd[:3])} ... exited {os.waitstatus_to_exitcode(status)}")
    return ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss / 1024.0, out


def main():
    args = sys.argv[1:]
    runs, warm, same = 9, 1, False
    while args and args[0] != "--":
        a = args.pop(0)
        if a == "--runs":
            runs = int(args.pop(0))
        elif a == "--warmup":
            warm = int(args.pop(0))
        elif a == "--same-output":
            same = True
        else:
            sys.exit(__doc__)
    if not args or "--" not in args[1:]:
        sys.exit(__doc__)
    args.pop(0)
    split = args.index("--")
    a, b = expand(args[:split]), expand(args[split + 1:])
    for _ in range(warm):
        run(a), run(b)
    ra, rb, ratios = [], [], []
    for _ in range(runs):
        x, y = run(a), run(b)
        if same and x[3] != y[3]:
            sys.exit("ab.py: A and B printed different output")
        ra.append(x), rb.append(y)
        ratios.append((y[0] / x[0] if x[0] else float("nan"), y[1] / x[1] if x[1] else float("nan")))
    med = lambda rows, i: statistics.median(r[i] for r in rows)
    print(f"A: cpu {med(ra, 0) * 1e3:.1f} ms, wall {med(ra, 1) * 1e3:.1f} ms, peak {max(r[2] for r in ra):.0f} MiB")
    print(f"B: cpu {med(rb, 0) * 1e3:.1f} ms, wall {med(rb, 1) * 1e3:.1f} ms, peak {max(r[2] for r in rb):.0f} MiB")
    print(f"B/A, median of {runs} pairs: cpu {statistics.median(r[0] for r in ratios):.3f}, "
          f"wall {statistics.median(r[1] for r in ratios):.3f}")


if __name__ == "__main__":
    main()
