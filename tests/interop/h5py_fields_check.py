#!/usr/bin/env python3
"""Reads every field of a packrec HDF5 dataset with h5py alone, by the documented layout
(docs/formats/hdf5.md, version 3), without importing packrec.

Usage: h5py_fields_check.py PACKREC_CLI WORK_DIR
Makes an image folder whose images have side files (.txt captions, .json metadata) and a
metadata.jsonl with boxes (N x 4) and labels, converts it with the packrec CLI to HDF5, then
reads every field's /fields/<name>/ datasets with h5py, checks the documented checksums with
python-xxhash and compares every field with the files it came from. Exit 77 (skipped) without
h5py, python-xxhash or Pillow.
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
    import h5py
    import xxhash
    from PIL import Image
except ImportError as missing:
    print(f"skipped: {missing.name} is not installed (python3-h5py, python3-xxhash, python3-pil)")
    sys.exit(77)

cli, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
tree, dataset = os.path.join(work, "tree"), os.path.join(work, "ds.h5")
expected = fields_tree.make_tree(tree, Image)  # key -> {field: value as the files hold it}
subprocess.run([cli, "convert", "-q", tree, dataset, "--format", "hdf5"], check=True)

with h5py.File(dataset, "r") as f:
    manifest = json.loads(f.attrs["packrec_manifest"])
    assert manifest["format_version"] == 3, manifest["format_version"]
    schema = manifest["fields"]
    names = [field["name"] for field in schema]
    assert names == ["json", "txt", "boxes", "labels"], names
    keys = [bytes(k).decode() if isinstance(k, bytes) else k for k in f["keys"][:]]
    for spec in schema:
        group = f["fields"][spec["name"]]
        values, offsets = group["values"][:].tobytes(), group["offsets"][:]
        present, checksums = group["present"][:], group["checksums"][:]
        for index, key in enumerate(keys):
            want = expected[key].get(spec["name"])
            if not present[index]:
                assert want is None, (key, spec["name"])
                assert offsets[index] == offsets[index + 1]
                continue
            data = values[offsets[index]:offsets[index + 1]]
            assert xxhash.xxh64_intdigest(data, seed=index) == int(checksums[index])
            got = fields_tree.decode(spec, data)
            assert got == want, (key, spec["name"], got, want)
    assert len(keys) == len(expected) == 8
print(f"h5py read all {len(names)} fields of {len(keys)} records by the documented layout")
