#!/usr/bin/env python3
"""Write the ONNX backend node-test models of the pinned `onnx` package to DIR/<test name>.onnx.

    python3 tools/corpus/node_corpus.py DIR

The oracle's truth for these models (`tests/fixtures/oracle/node-*.jsonl.gz`) was recorded with
onnx 1.23.2, so any other version is refused (exit 3): its test set differs. DIR is written
atomically: the models go to a sibling temporary folder, which is renamed to DIR once complete,
with a `.complete` stamp (onnx version, model count). A DIR that already has the stamp of the
pinned version is left as it is (exit 0), so the tests and `.ci/run` can both ask for it.

Exit codes: 0 written or already there; 3 no `onnx` or the wrong version; 1 anything else.
"""
import os
import shutil
import sys
import tempfile
import warnings

PINNED = "1.23.2"
# The node tests of onnx 1.23.2 that carry a model (the truth files hold one record each).
EXPECTED = 1884


def stamp_ok(folder):
    try:
        with open(os.path.join(folder, ".complete"), encoding="utf-8") as f:
            return f.read().split() == [PINNED, str(EXPECTED)]
    except OSError:
        return False


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 1
    out = os.path.abspath(argv[1])
    if stamp_ok(out):
        print(f"{out}: up to date (onnx {PINNED}, {EXPECTED} models)")
        return 0
    try:
        import onnx
        from onnx.backend.test.case.node import collect_testcases
    except ImportError as e:
        print(f"onnx {PINNED} is not installed for {sys.executable}: {e}", file=sys.stderr)
        return 3
    if onnx.__version__ != PINNED:
        print(
            f"{sys.executable} has onnx {onnx.__version__}; the node-test truth was recorded "
            f"with onnx {PINNED} (pip install onnx=={PINNED})",
            file=sys.stderr,
        )
        return 3
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=os.path.basename(out) + ".tmp-", dir=parent)
    try:
        n = 0
        with warnings.catch_warnings():
            # Some generators overflow casts on purpose; the models are what matter here.
            warnings.simplefilter("ignore")
            cases = collect_testcases(None)
        for case in cases:
            if case.model is None:
                continue
            onnx.save(case.model, os.path.join(tmp, case.name + ".onnx"))
            n += 1
        if n != EXPECTED:
            print(f"onnx {PINNED} gave {n} node-test models, expected {EXPECTED}", file=sys.stderr)
            return 1
        with open(os.path.join(tmp, ".complete"), "w", encoding="utf-8") as f:
            f.write(f"{PINNED} {n}\n")
        if os.path.isdir(out):
            if stamp_ok(out):  # written meanwhile by another process
                return 0
            shutil.rmtree(out)
        try:
            os.rename(tmp, out)
        except OSError:
            if not stamp_ok(out):
                raise
        print(f"{n} node-test models (onnx {PINNED}) in {out}")
        return 0
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
