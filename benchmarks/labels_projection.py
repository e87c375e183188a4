#!/usr/bin/env python3
"""Reading every label of a large shard dataset touches no image bytes (issue 31's projection).

Makes a list file of N records (one tiny real JPEG, N lines with labels i % 1000), converts it with
the packrec CLI, evicts the shard files from the page cache (posix_fadvise DONTNEED), then opens
the dataset and reads ds.labels twice (cold index, then warm), and counts with mincore which pages
of the payload region [64, keys_offset) are resident afterwards: 0 means no image byte was read.

    PYTHONPATH=build/python python3 benchmarks/labels_projection.py build/tools/packrec 1000000 /tmp/lp
"""
import ctypes
import json
import mmap
import os
import struct
import subprocess
import sys
import time

import numpy

import packrec

libc = ctypes.CDLL(None, use_errno=True)


def resident_pages(path, begin, end):
    """Pages of [begin, end) of `path` in the page cache (mincore over a fresh mapping)."""
    page = mmap.PAGESIZE
    size = os.path.getsize(path)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        pages = (size + page - 1) // page
        vec = (ctypes.c_ubyte * pages)()
        if libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        libc.munmap(ctypes.c_void_p(address), ctypes.c_size_t(size))
    finally:
        os.close(fd)
    first, last = begin // page, (end + page - 1) // page
    return sum(1 for p in range(first, last) if vec[p] & 1), last - first


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def main():
    cli, count, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    os.makedirs(work, exist_ok=True)
    image = os.path.join(work, "img.jpg")
    if not os.path.exists(image):
        subprocess.run([cli, "synth", os.path.join(work, "one"), "--classes", "1", "--per-class", "1",
                        "--width", "16", "--height", "16"], check=True, stdout=subprocess.DEVNULL)
        src = next(os.path.join(r, f) for r, _, fs in os.walk(os.path.join(work, "one")) for f in fs)
        os.rename(src, image)
    listing = os.path.join(work, "list.txt")
    with open(listing, "w") as f:
        for i in range(count):
            f.write(f"img.jpg {i % 1000}\n")
    out = os.path.join(work, "ds")
    start = time.perf_counter()
    convert_s = None
    done = os.path.join(out, "manifest.json")
    if not os.path.exists(done) or json.load(open(done))["record_count"] != count:  # else reused
        subprocess.run([cli, "convert", listing, out, "--root", work, "--overwrite", "--threads", "2"],
                       check=True, stdout=subprocess.DEVNULL)
        convert_s = round(time.perf_counter() - start, 1)
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    shards = [os.path.join(out, s["file"]) for s in manifest["shards"]]
    for path in shards:
        evict(path)
    start = time.perf_counter()
    ds = packrec.open(out)
    open_s = time.perf_counter() - start
    numpy.zeros(1)  # numpy imported before timing (pybind11 imports it at the first array)
    start = time.perf_counter()
    labels = ds.labels
    first_s = time.perf_counter() - start
    start = time.perf_counter()
    labels = ds.labels
    warm_s = time.perf_counter() - start
    assert len(labels) == count and int(labels[count - 1]) == (count - 1) % 1000
    resident = total = 0
    payload_bytes = 0
    for path in shards:
        with open(path, "rb") as f:
            f.seek(-64, os.SEEK_END)
            keys_offset = struct.unpack("<Q", f.read(8))[0]
        r, t = resident_pages(path, 64, keys_offset)
        resident += r
        total += t
        payload_bytes += keys_offset - 64
    print(json.dumps({
        "records": count, "shards": len(shards), "convert_s": convert_s,
        "open_s_cold": round(open_s, 3), "labels_s_first": round(first_s, 4), "labels_s_warm": round(warm_s, 4),
        "payload_region_bytes": payload_bytes, "payload_pages_resident_after": resident,
        "payload_pages_total": total}, indent=1))


if __name__ == "__main__":
    main()
