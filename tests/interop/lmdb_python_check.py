#!/usr/bin/env python3
"""Reads a packrec LMDB dataset with python-lmdb (Debian python3-lmdb), a peer we did not write.

Usage: lmdb_python_check.py PACKREC_CLI WORK_DIR
Converts a synthetic tree with the packrec CLI, then checks with python-lmdb alone that every
record's key, label and bytes match the original files, and with python-xxhash (Debian
python3-xxhash) that each value's payload and header checksums are the documented ones. Exit 77
(skipped) without python-lmdb or python-xxhash.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import lmdb
    import xxhash
except ImportError as missing:
    print(f"skipped: {missing.name} is not installed (python3-lmdb, python3-xxhash)")
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
HEADER = struct.Struct("<4sBBBBIIIHBxQQQ")  # docs/formats/lmdb.md, version 2: 48 bytes
assert HEADER.size == 48
seen = 0
with env.begin() as txn:
    manifest = json.loads(bytes(txn.get(b"\xffpackrec.manifest")))
    assert manifest["format"] == "packrec-lmdb", manifest["format"]
    assert manifest["format_version"] == 2, manifest["format_version"]
    assert manifest["classes"] == classes, manifest["classes"]
    for key, value in txn.cursor():
        if len(key) != 8:
            assert key == b"\xffpackrec.manifest", key
            continue
        index = int.from_bytes(key, "big")
        (magic, version, encoding, channels, flags, label, width, height, key_size, subsampling,
         checksum, raw_size, header_checksum) = HEADER.unpack_from(value)
        assert magic == b"PKRV" and version == 2, (magic, version)
        key_bytes = bytes(value[48:48 + key_size])
        path = key_bytes.decode()
        payload = bytes(value[48 + key_size:])
        # The checksums as documented: the payload's, seeded with the index; the header's over
        # its first 40 bytes, then the key.
        assert xxhash.xxh64_intdigest(payload, seed=index) == checksum, path
        first = xxhash.xxh64_intdigest(bytes(value[:40]), seed=index)
        assert xxhash.xxh64_intdigest(key_bytes, seed=first) == header_checksum, path
        with open(os.path.join(tree, path), "rb") as original:
            assert payload == original.read(), path
        assert label == classes.index(path.split("/")[0]), (path, label)
        assert encoding == 1 and raw_size == len(payload) and width > 0 and height > 0
        assert index == seen, (index, seen)
        seen += 1
assert seen == manifest["record_count"] == 45, (seen, manifest["record_count"])
print(f"python-lmdb read {seen} records, bytes and labels identical, checksums as documented")
