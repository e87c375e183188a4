#!/usr/bin/env python3
"""Writes an MDS dataset (MosaicML Streaming's layout: index.json + shard.NNNNN.mds) of an image
folder, for benchmarks/import_bench.sh; without the streaming package, from its published layout.

Usage: make_mds.py TREE OUT [SHARD_BYTES]
Columns: image (jpeg), label (int), filename (str), sorted by name as MDSWriter sorts them.
"""
import json
import os
import struct
import sys

tree, out = sys.argv[1], sys.argv[2]
limit = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 26
os.makedirs(out)
classes = sorted(d for d in os.listdir(tree) if os.path.isdir(os.path.join(tree, d)))
columns = [("filename", "str", None), ("image", "jpeg", None), ("label", "int", 8)]
shards, samples, size = [], [], 0


def flush():
    global samples, size
    if not samples:
        return
    config = json.dumps({"format": "mds", "size_limit": limit}, sort_keys=True).encode()
    offsets, at = [], 4 + 4 * (len(samples) + 1) + len(config)
    for sample in samples:
        offsets.append(at)
        at += len(sample)
    offsets.append(at)
    name = f"shard.{len(shards):05d}.mds"
    with open(os.path.join(out, name), "wb") as f:
        f.write(struct.pack("<I", len(samples)) + struct.pack(f"<{len(offsets)}I", *offsets))
        f.write(config)
        f.writelines(samples)
    shards.append({"column_encodings": [c[1] for c in columns],
                   "column_names": [c[0] for c in columns],
                   "column_sizes": [c[2] for c in columns], "compression": None, "format": "mds",
                   "hashes": [], "raw_data": {"basename": name, "bytes": at, "hashes": {}},
                   "samples": len(samples), "size_limit": limit, "version": 2, "zip_data": None})
    samples, size = [], 0


for label, name in enumerate(classes):
    for file in sorted(os.listdir(os.path.join(tree, name))):
        with open(os.path.join(tree, name, file), "rb") as f:
            data = f.read()
        key = f"{name}/{file}".encode()
        sample = struct.pack("<II", len(key), len(data)) + key + data + struct.pack("<q", label)
        if size + len(sample) > limit:
            flush()
        samples.append(sample)
        size += len(sample)
flush()
with open(os.path.join(out, "index.json"), "w") as f:
    json.dump({"shards": shards, "version": 2}, f)
