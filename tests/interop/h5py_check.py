#!/usr/bin/env python3
"""Reads a packrec HDF5 dataset with h5py (Debian python3-h5py), a peer we did not write.

Usage: h5py_check.py PACKREC_CLI WORK_DIR
Converts a synthetic tree with the packrec CLI to HDF5, then checks with h5py alone that every
record's key, label and bytes match the original files (docs/formats/hdf5.md), and with
python-xxhash that /checksums and /meta_checksums hold the documented hashes. Then the pixels
layout: h5py's images[i] must equal the pixels packrec's decoder produced (packrec extract writes
them as PPM; the C++ tests check those against a fresh decode of each source). Exit 77 (skipped)
without h5py.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import h5py
    import xxhash
except ImportError as missing:
    print(f"skipped: {missing.name} is not installed (python3-h5py, python3-xxhash)")
    sys.exit(77)

cli, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
tree, dataset = os.path.join(work, "tree"), os.path.join(work, "data.h5")
subprocess.run([cli, "synth", tree, "--classes", "3", "--per-class", "15", "--seed", "6"],
               check=True, stdout=subprocess.DEVNULL)
subprocess.run([cli, "convert", "-q", tree, dataset, "--format", "hdf5"],
               check=True, stdout=subprocess.DEVNULL)

classes = sorted(d for d in os.listdir(tree) if os.path.isdir(os.path.join(tree, d)))
with h5py.File(dataset, "r") as f:
    manifest = json.loads(f.attrs["packrec_manifest"])
    assert manifest["format"] == "packrec-hdf5", manifest["format"]
    assert manifest["format_version"] == 2, manifest["format_version"]
    meta = {name: f[name][:] for name in ("width", "height", "channels", "encoding", "flags",
                                          "raw_sizes", "checksums", "meta_checksums")}
    stored_classes = [c.decode() if isinstance(c, bytes) else c for c in f.attrs["classes"]]
    assert stored_classes == classes, stored_classes
    data, offsets, labels, keys = f["data"], f["offsets"][:], f["labels"][:], f["keys"]
    assert data.dtype == "uint8" and data.id.get_offset() is not None  # contiguous, mappable
    n = len(labels)
    assert n == manifest["record_count"] == 45 and len(offsets) == n + 1
    for i in range(n):
        key = keys[i].decode() if isinstance(keys[i], bytes) else keys[i]
        payload = data[offsets[i]:offsets[i + 1]].tobytes()
        with open(os.path.join(tree, key), "rb") as original:
            assert payload == original.read(), key
        assert labels[i] == classes.index(key.split("/")[0]), (key, labels[i])
        assert meta["width"][i] > 0 and meta["height"][i] > 0
        assert xxhash.xxh64_intdigest(payload, seed=i) == meta["checksums"][i], key
        # /meta_checksums: the 28 bytes of the record's other metadata, then the key.
        fixed = struct.pack("<qIIBBBxQ", int(labels[i]), int(meta["width"][i]),
                            int(meta["height"][i]), int(meta["channels"][i]),
                            int(meta["encoding"][i]), int(meta["flags"][i]),
                            int(meta["raw_sizes"][i]))
        seed = xxhash.xxh64_intdigest(fixed, seed=i)
        assert xxhash.xxh64_intdigest(key.encode(), seed=seed) == meta["meta_checksums"][i], key
print(f"h5py read {n} records, bytes and labels identical, checksums as documented")

pixels, extracted = os.path.join(work, "pixels.h5"), os.path.join(work, "pixels-out")
subprocess.run([cli, "convert", "-q", tree, pixels, "--format", "hdf5", "--hdf5-layout", "pixels",
                "--size", "24", "40", "--compress", "deflate"], check=True, stdout=subprocess.DEVNULL)
subprocess.run([cli, "extract", pixels, extracted], check=True, stdout=subprocess.DEVNULL)
with h5py.File(pixels, "r") as f:
    images, labels, keys = f["images"], f["labels"][:], f["keys"]
    assert images.shape == (45, 24, 40, 3) and images.dtype == "uint8", images.shape
    assert images.chunks == (1, 24, 40, 3) and images.compression == "gzip", images.chunks
    for i in range(len(labels)):
        key = keys[i].decode() if isinstance(keys[i], bytes) else keys[i]
        assert labels[i] == classes.index(key.split("/")[0]), (key, labels[i])
        with open(os.path.join(extracted, os.path.splitext(key)[0] + ".ppm"), "rb") as ppm:
            decoded = ppm.read()
        header = b"P6\n40 24\n255\n"
        assert decoded.startswith(header), key
        assert images[i].tobytes() == decoded[len(header):], key
print(f"h5py read {len(labels)} images of the pixels layout, identical to packrec's decode")
