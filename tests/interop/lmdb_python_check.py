#!/usr/bin/env python3
"""Reads a packrec LMDB dataset with python-lmdb (Debian python3-lmdb), a peer we did not write.

Usage: lmdb_python_check.py PACKREC_CLI WORK_DIR
Converts a synthetic tree with the packrec CLI, then checks with python-lmdb alone that every
record's key, label and bytes match the original files. Exit 77 (skipped) without python-lmdb.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import lmdb
except ImportError:
    print("skipped: python3-lmdb is not installed")
    sys.exit(77)

cli, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
tree, dataset = os.path.join(work, "tree"), os.path.join(work, "ds")
subprocess.run([cli, "synth", tree, "--classes", "3", "--per-class", "15", "--seed", "5"],
               check=True, stdout=subprocess.DEVNULL)
subprocess.run([cli, "convert", "-q", tree, dataset, "--format", "lmdb", "--commit-records", "7"],
               check=True, stdout=subprocess.DEVNULL)

classes = sorted(d for d in os.listdir(tree) if os.path.isdir(os.path.join(tree, d)))
env = lmdb.open(dataset, readonly=True, lock=False, subdir=True)
HEADER = struct.Struct("<4sBBBBIIIHBxQQ")  # docs/formats/lmdb.md, 40 bytes
assert HEADER.size == 40
seen = 0
with env.begin() as txn:
    manifest = json.loads(bytes(txn.get(b"\xffpackrec.manifest")))
    assert manifest["format"] == "packrec-lmdb", manifest["format"]
    assert manifest["classes"] == classes, manifest["classes"]
    for key, value in txn.cursor():
        if len(key) != 8:
            assert key == b"\xffpackrec.manifest", key
            continue
        index = int.from_bytes(key, "big")
        (magic, version, encoding, channels, flags, label, width, height, key_size, subsampling,
         checksum, raw_size) = HEADER.unpack_from(value)
        assert magic == b"PKRV" and version == 1, (magic, version)
        path = bytes(value[40:40 + key_size]).decode()
        payload = bytes(value[40 + key_size:])
        with open(os.path.join(tree, path), "rb") as original:
            assert payload == original.read(), path
        assert label == classes.index(path.split("/")[0]), (path, label)
        assert encoding == 1 and raw_size == len(payload) and width > 0 and height > 0
        assert index == seen, (index, seen)
        seen += 1
assert seen == manifest["record_count"] == 45, (seen, manifest["record_count"])
print(f"python-lmdb read {seen} records, bytes and labels identical")
