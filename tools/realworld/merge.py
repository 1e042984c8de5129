#!/usr/bin/env python3
"""Merge oracle records into an existing fixture: records of NEW (a .jsonl.gz) replace those of the
same model in BASE (a .jsonl.gz, rewritten in place), the result sorted by model, gzip'd without a
timestamp as slim.py and cpu_truth.py write them.

  merge.py BASE.jsonl.gz NEW.jsonl.gz
"""
import gzip
import json
import os
import sys


def read(path):
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    base, new = sys.argv[1], sys.argv[2]
    records = {r["model"]: r for r in (read(base) if os.path.exists(base) else [])}
    for r in read(new):
        records[r["model"]] = r
    tmp = base + ".tmp"
    with gzip.GzipFile(tmp, "wb", mtime=0) as f:
        for model in sorted(records):
            f.write((json.dumps(records[model], sort_keys=True) + "\n").encode())
    os.replace(tmp, base)
    print(f"{len(records)} records -> {base}")


if __name__ == "__main__":
    main()
