#!/usr/bin/env python3
"""Export every static function body that ONNX's schemas define, as one text file.

    python3 tools/functions/export.py kernel-tables/functions/onnx-functions.txt

The output is what `src/placer/functions.rs` embeds: ORT inlines a node that no execution
provider took when its op has a function body (docs/ort-placement.md 4.6), and these are the
bodies of the ops whose body does not depend on the node (`OpSchema::GetFunction`). Ops whose
body is built from the node's attributes and input types (context-dependent functions) are
built in Rust; `--check-cd` prints ONNX's builder output for a few probe nodes so those
builders can be compared by hand.

Format: a provenance header of `#` lines, then one block per (domain, op, since_version,
function opset version), each preceded by a line

    #@ <domain> <op> since=<since_version> opset=<function opset version>

and holding the FunctionProto in ONNX's textual syntax (`onnx.printer.to_text`). Attribute
defaults of the schema are added to the function as `attribute_proto` entries (ORT fills a
node's missing attributes with the schema's defaults before it inlines, so a body that refers to
an attribute the node omits sees the default). Blocks are sorted, so the file diffs cleanly
between ONNX releases.
"""
import datetime
import sys

import numpy as np
import onnx
import onnx.defs
import onnx.parser
import onnx.printer


def function_of(schema, version):
    f = onnx.FunctionProto()
    f.ParseFromString(schema.get_function_with_opset_version(version))
    # Attributes with a schema default move from `attribute` to `attribute_proto`.
    defaults = {}
    for name, a in schema.attributes.items():
        if a.default_value is not None and a.default_value.name:
            defaults[name] = a.default_value
    # Every attribute with a default, referenced or not: some bodies refer to attributes that
    # their `attribute` list does not name (AffineGrid's `align_corners`).
    plain = [n for n in f.attribute if n not in defaults]
    del f.attribute[:]
    f.attribute.extend(plain)
    for n in sorted(defaults):
        f.attribute_proto.append(defaults[n])
    return f


def attr_value(a):
    """An attribute default in the textual syntax (the types schema defaults of functions use)."""
    T = onnx.AttributeProto
    def flt(x):
        t = str(np.float32(x))
        return t if any(c in t for c in ".eEn") else t + ".0"
    if a.type == T.INT:
        return f"int = {a.i}"
    if a.type == T.FLOAT:
        return f"float = {flt(a.f)}"
    if a.type == T.INTS:
        return "ints = [" + ", ".join(str(i) for i in a.ints) + "]"
    if a.type == T.FLOATS:
        return "floats = [" + ", ".join(flt(f) for f in a.floats) + "]"
    if a.type == T.STRING:
        return 'string = "' + a.s.decode().replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise SystemExit(f"attribute default of type {a.type} not handled: {a.name}")


def text_of(f):
    """onnx.printer.to_text, with the attribute list (and its defaults) in the signature: the
    printer leaves out `attribute_proto`, ONNX's parser reads `<name: type = value>`."""
    text = onnx.printer.to_text(f).strip()
    attrs = list(f.attribute) + [f"{a.name}: {attr_value(a)}" for a in f.attribute_proto]
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith(f.name + " "):
            head = line[len(f.name) + 1:]
            if head.startswith("<"):
                head = head[head.index(">") + 1:]
            sig = f"<{', '.join(attrs)}>" if attrs else ""
            lines[i] = f"{f.name} {sig}{head}"
            break
    else:
        raise SystemExit(f"no signature line in the text of {f.name}")
    out = "\n".join(lines)
    # The text must read back as the same function.

    back = onnx.parser.parse_function(out)
    if [n.SerializeToString() for n in back.node] != [n.SerializeToString() for n in f.node] and \
            onnx.printer.to_text(back) != onnx.printer.to_text(f):
        raise SystemExit(f"{f.name}: text does not read back")
    if sorted(back.attribute) != sorted(f.attribute) or len(back.attribute_proto) != len(f.attribute_proto):
        raise SystemExit(f"{f.name}: attributes do not read back")
    return out


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    blocks = []
    for s in onnx.defs.get_all_schemas_with_history():
        if not s.has_function:
            continue
        domain = s.domain or "ai.onnx"
        for v in s.function_opset_versions:
            f = function_of(s, v)
            text = text_of(f)
            blocks.append(((domain, s.name, s.since_version, v), text))
    blocks.sort()
    out = [
        "# Static function bodies of ONNX operator schemas (OpSchema::GetFunction), one block per",
        "# (domain, op, since_version, function opset version). Generated; do not edit by hand.",
        f"# generator: tools/functions/export.py; onnx {onnx.__version__}; "
        f"{datetime.date.today().isoformat()}; {len(blocks)} bodies",
        "# source: onnx.defs.get_all_schemas_with_history(), schema.get_function_with_opset_version(v),",
        "# printed by onnx.printer.to_text; schema attribute defaults added as attribute_proto.",
        "",
    ]
    for (domain, op, since, v), text in blocks:
        out.append(f"#@ {domain} {op} since={since} opset={v}")
        out.append(text)
        out.append("")
    with open(sys.argv[1], "w") as fh:
        fh.write("\n".join(out))
    print(f"{len(blocks)} bodies -> {sys.argv[1]}")


if __name__ == "__main__":
    main()
