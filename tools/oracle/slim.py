#!/usr/bin/env python3
"""Turn oracle records (JSON lines from ../shared/oracle/ortstub.py or batch.py) into the project's
golden fixtures: only the fields the differential test compares, gzip'd, one record per line,
sorted by model.

  slim.py IN.jsonl OUT.jsonl.gz

`model` is made relative to the corpus (`mobius/x.onnx`, `node/test_abs.onnx`).
"""
import gzip, json, sys

KEEP = ("model", "ort", "level", "session", "error", "placement", "all_nodes_on", "memcpy", "copies")


def rel(model):
    m = model.replace("\\", "/")
    for marker in ("corpus/", "models/"):
        if marker in m:
            m = m.rsplit(marker, 1)[-1]
    return m


def main():
    src, dst = sys.argv[1], sys.argv[2]
    records = []
    for line in open(src):
        if not line.strip():
            continue
        r = json.loads(line)
        r["model"] = rel(r["model"])
        if r.get("error"):
            r["error"] = r["error"][:400]
        records.append({k: r.get(k) for k in KEEP})
    records.sort(key=lambda r: r["model"])
    with gzip.GzipFile(dst, "wb", mtime=0) as f:
        for r in records:
            f.write((json.dumps(r, sort_keys=True) + "\n").encode())
    print(f"{len(records)} records -> {dst}")


if __name__ == "__main__":
    main()
