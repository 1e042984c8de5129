#!/usr/bin/env python3
"""Cross-check the Rust text view against ONNX's own printer and parser (onnx >= 1.16).

  python3 tests/it/text_crosscheck.py onnx-text MODELS_DIR OUT_DIR
      writes OUT_DIR/<stem>.txt = "# model: <path>" + onnx.printer.to_text(model) for every
      *.onnx under MODELS_DIR; then `ONNX_LINT_ONNX_TEXT=OUT_DIR cargo test --test it text`
      parses them with the Rust parser and compares the graphs.
  python3 tests/it/text_crosscheck.py parse LISTINGS_DIR
      parses every *.onnxtxt listing (written by `ONNX_LINT_DUMP_LISTINGS=DIR cargo test --test
      it text`) with onnx.parser and reports which ONNX's parser rejects, and why.
"""
import collections, os, sys
import onnx, onnx.parser, onnx.printer


def onnx_text(src, out):
    os.makedirs(out, exist_ok=True)
    n = 0
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith(".onnx"):
                continue
            path = os.path.join(root, f)
            m = onnx.load(path, load_external_data=False)
            with open(os.path.join(out, f[:-5] + ".txt"), "w") as fh:
                fh.write(f"# model: {os.path.abspath(path)}\n")
                fh.write(onnx.printer.to_text(m))
            n += 1
    print(n, "listings written to", out)


def parse(d):
    ok, why = 0, collections.Counter()
    examples = {}
    for f in sorted(os.listdir(d)):
        if not f.endswith(".onnxtxt"):
            continue
        text = open(os.path.join(d, f)).read()
        try:
            onnx.parser.parse_model(text)
            ok += 1
        except Exception as e:  # onnx raises ParseError
            msg = str(e).splitlines()
            key = msg[-1] if msg else "?"
            why[key] += 1
            examples.setdefault(key, (f, "\n".join(msg[:3])))
    print(ok, "accepted by onnx.parser;", sum(why.values()), "rejected")
    for k, c in why.most_common():
        print(f"  {c:5} {k}    e.g. {examples[k][0]}: {examples[k][1]!r}")


if __name__ == "__main__":
    if sys.argv[1] == "onnx-text":
        onnx_text(sys.argv[2], sys.argv[3])
    else:
        parse(sys.argv[2])
