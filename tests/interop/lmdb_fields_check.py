#!/usr/bin/env python3
"""Reads every field of a packrec LMDB dataset with python-lmdb alone, by the documented layout
(docs/formats/lmdb.md, version 3; docs/formats/fields.md), without importing packrec.

Usage: lmdb_fields_check.py PACKREC_CLI WORK_DIR
Makes an image folder whose images have side files (.txt captions, .json metadata) and a
metadata.jsonl with boxes (N x 4) and labels, converts it with the packrec CLI to LMDB, then for
every record reads its value and its fields value with python-lmdb, checks the documented
checksums with python-xxhash and compares every field with the files it came from. Exit 77
(skipped) without python-lmdb, python-xxhash or Pillow.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fields_tree  # noqa: E402 - beside this script

try:
    import lmdb
    import xxhash
    from PIL import Image
except ImportError as missing:
    print(f"skipped: {missing.name} is not installed (python3-lmdb, python3-xxhash, python3-pil)")
    sys.exit(77)

cli, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
tree, dataset = os.path.join(work, "tree"), os.path.join(work, "ds")
expected = fields_tree.make_tree(tree, Image)  # key -> {field: value as the files hold it}
subprocess.run([cli, "convert", "-q", tree, dataset, "--format", "lmdb", "--commit-records", "3"], check=True)

env = lmdb.open(dataset, readonly=True, lock=False)
with env.begin() as txn:
    manifest = json.loads(bytes(txn.get(b"\xffpackrec.manifest")))
    assert manifest["format_version"] == 3, manifest["format_version"]
    schema = manifest["fields"]
    names = [field["name"] for field in schema]
    assert names == ["json", "txt", "boxes", "labels"], names
    assert env.stat()["entries"] == 2 * manifest["record_count"] + 1
    seen = 0
    for index in range(manifest["record_count"]):
        value = txn.get(index.to_bytes(8, "big"))
        key_size = struct.unpack_from("<H", value, 20)[0]
        key = bytes(value[48:48 + key_size]).decode()
        fields_value = txn.get(index.to_bytes(8, "big") + b"\x01")
        assert fields_value[:4] == b"PKRF" and fields_value[4:8] == b"\0\0\0\0"
        block = bytes(fields_value[16:])
        assert xxhash.xxh64_intdigest(block, seed=index) == struct.unpack_from("<Q", fields_value, 8)[0]
        want = expected[key]
        for f, spec in enumerate(schema):
            offset, size, checksum = struct.unpack_from("<IIQ", block, 16 * f)
            if offset == 0xFFFFFFFF:
                assert spec["name"] not in want, (key, spec["name"])
                continue
            assert offset % 8 == 0
            data = block[offset:offset + size]
            assert xxhash.xxh64_intdigest(data) == checksum
            got = fields_tree.decode(spec, data)
            assert got == want[spec["name"]], (key, spec["name"], got, want[spec["name"]])
        seen += 1
assert seen == len(expected) == 8
print(f"python-lmdb read all {len(names)} fields of {seen} records by the documented layout")
