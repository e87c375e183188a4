#!/usr/bin/env python3
"""Rewrites WebDataset tars with two more members per sample, as real datasets carry them (a
caption, a feature array): KEY.txt (200 bytes) and KEY.npy (KB kibibytes of random bytes), for
benchmarks/import_ab.sh (WDS_EXTRA_KB). An importer makes records only from the image and label
members; this measures what the others cost it.

Usage: add_wds_members.py IN_DIR OUT_DIR KB
"""
import glob
import io
import os
import sys
import tarfile

source, out, kib = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(out)
noise = os.urandom(1 << 20)
extras = (("txt", 200), ("npy", kib * 1024))
written = 0


def add_extras(tar, key):
    global written
    for extension, size in extras:
        info = tarfile.TarInfo(f"{key}.{extension}")
        info.size = size
        start = (written * 4099) % (len(noise) - size)
        tar.addfile(info, io.BytesIO(noise[start:start + size]))
        written += 1


for path in sorted(glob.glob(os.path.join(source, "*.tar"))):
    with tarfile.open(path) as tar_in, \
            tarfile.open(os.path.join(out, os.path.basename(path)), "w",
                         format=tarfile.GNU_FORMAT) as tar_out:
        key = None
        for member in tar_in:
            this_key = member.name.split(".")[0]
            if key is not None and this_key != key:
                add_extras(tar_out, key)
            key = this_key
            tar_out.addfile(member, tar_in.extractfile(member) if member.isfile() else None)
        if key is not None:
            add_extras(tar_out, key)
