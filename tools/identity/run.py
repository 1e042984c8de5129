#!/usr/bin/env python3
"""The identity harness: a refactor that must not change a single output byte.

It runs one build of `cargo-onnx-lint` over a fixed set of models (the repository's fixtures and
examples, the shared public corpus, a sample of ONNX's node tests) at every combination of ORT
release x optimisation level x provider list, for `place --format json` and the lint's
`--format json`, and keeps every run's stdout, stderr and exit code. Given a baseline (the same
runs of the binary before the refactor), it says which runs differ: a refactor is byte-identical
when none does.

    # once, before the refactor: copy the models (so that their paths, which the outputs
    # name, stay put) and record the baseline
    tools/identity/run.py snapshot --models /work/team/seam-baseline/models
    tools/identity/run.py record --bin target/release/cargo-onnx-lint \
        --models /work/team/seam-baseline/models --out /work/team/seam-baseline/base
    # after each step
    tools/identity/run.py record --bin target/release/cargo-onnx-lint \
        --models /work/team/seam-baseline/models --out /tmp/identity-now \
        --compare /work/team/seam-baseline/base

`--ep` lists the provider lists to run (default `cuda,cpu`); `--ort` and `--levels` likewise.
Runs go in batches of models (one process per batch), on `--jobs` processes at a time, from an
empty working folder (no configuration file is picked up) with colour off.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
NODE_CORPUS = pathlib.Path(os.environ.get("ONNX_LINT_NODE_CORPUS", "/work/node-corpus-1.23.2"))
SHARED_CORPUS = pathlib.Path("/work/shared/corpus/models")
SUFFIXES = (".onnx", ".onnxtxt")


def snapshot(dest: pathlib.Path, node_every: int) -> None:
    """Copies the model sources under `dest` (fixtures and examples whole: models may have
    external data beside them)."""
    if dest.exists():
        sys.exit(f"{dest} exists: remove it first (the baseline's paths must stay what they were)")
    dest.mkdir(parents=True)
    shutil.copytree(REPO / "tests" / "fixtures", dest / "fixtures", symlinks=True)
    shutil.copytree(REPO / "examples", dest / "examples", symlinks=True)
    if SHARED_CORPUS.is_dir():
        shutil.copytree(SHARED_CORPUS, dest / "corpus", symlinks=True)
    if NODE_CORPUS.is_dir():
        nodes = sorted(p for p in NODE_CORPUS.iterdir() if p.suffix == ".onnx")
        (dest / "node").mkdir()
        for p in nodes[::node_every]:
            shutil.copy2(p, dest / "node" / p.name)


def models(root: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))


def batches(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def run_one(binary: str, cwd: str, cmd: str, ort: str, level: str, ep: str, files, out: pathlib.Path):
    args = [binary]
    if cmd == "place":
        args.append("place")
    args += ["--format", "json", "--ort", ort, "--opt-level", level, "--ep", ep]
    args += [str(f) for f in files]
    env = dict(os.environ, NO_COLOR="1", CLICOLOR_FORCE="", FORCE_COLOR="")
    env.pop("CLICOLOR_FORCE")
    env.pop("FORCE_COLOR")
    r = subprocess.run(args, cwd=cwd, capture_output=True, env=env, timeout=1800)
    out.with_suffix(".out").write_bytes(r.stdout)
    out.with_suffix(".err").write_bytes(r.stderr)
    out.with_suffix(".rc").write_text(f"{r.returncode}\n")
    return out


def record(a) -> int:
    root = pathlib.Path(a.models).resolve()
    files = models(root)
    if not files:
        sys.exit(f"no models under {root}")
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    binary = str(pathlib.Path(a.bin).resolve())
    cwd = tempfile.mkdtemp(prefix="identity-cwd-")
    jobs = []
    for cmd in a.commands.split(","):
        for ort in a.ort.split(","):
            for level in a.levels.split(","):
                for ep in a.ep.split(","):
                    d = out / f"{cmd}-{ort}-{level}-{ep}"
                    d.mkdir(exist_ok=True)
                    for k, b in enumerate(batches(files, a.batch)):
                        jobs.append((cmd, ort, level, ep, b, d / f"{k:04d}"))
    print(f"{len(files)} models, {len(jobs)} runs", flush=True)
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futs = [pool.submit(run_one, binary, cwd, *j) for j in jobs]
        for f in concurrent.futures.as_completed(futs):
            f.result()
    os.rmdir(cwd)
    print(f"recorded {len(jobs)} runs ({len(files)} models x configurations) in {out}")
    if a.compare:
        return compare(pathlib.Path(a.compare), out)
    return 0


def digest(p: pathlib.Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def compare(base: pathlib.Path, now: pathlib.Path) -> int:
    names = sorted(p.relative_to(base) for p in base.rglob("*") if p.is_file())
    have = sorted(p.relative_to(now) for p in now.rglob("*") if p.is_file())
    missing = sorted(set(names) - set(have))
    extra = sorted(set(have) - set(names))
    differ = [n for n in names if n not in missing and digest(base / n) != digest(now / n)]
    runs = sum(1 for n in names if n.suffix == ".rc")
    for n in missing:
        print(f"MISSING {n}")
    for n in extra:
        print(f"EXTRA {n}")
    for n in differ:
        print(f"DIFFERS {n}")
    print(
        f"compared {runs} runs ({len(names)} files): {len(differ)} differ, "
        f"{len(missing)} missing, {len(extra)} extra"
    )
    return 1 if differ or missing or extra else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("snapshot", help="copy the models to a folder of their own")
    s.add_argument("--models", required=True)
    s.add_argument("--node-every", type=int, default=6, help="every Nth node test (sorted)")
    r = sub.add_parser("record", help="run a binary over the models; compare with a baseline")
    r.add_argument("--bin", required=True)
    r.add_argument("--models", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--compare", help="a baseline recorded the same way")
    r.add_argument("--ort", default="1.20.2,1.23.2,1.24.4,1.28.0,1.31.1")
    r.add_argument("--levels", default="disable,all")
    r.add_argument("--ep", default="cuda,cpu")
    r.add_argument("--commands", default="place,lint")
    r.add_argument("--batch", type=int, default=40)
    r.add_argument("--jobs", type=int, default=2)
    c = sub.add_parser("compare", help="compare two recorded folders")
    c.add_argument("base")
    c.add_argument("now")
    a = ap.parse_args()
    if a.what == "snapshot":
        snapshot(pathlib.Path(a.models), a.node_every)
        return 0
    if a.what == "compare":
        return compare(pathlib.Path(a.base), pathlib.Path(a.now))
    return record(a)


if __name__ == "__main__":
    sys.exit(main())
