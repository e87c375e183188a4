#!/usr/bin/env python3
"""The Python readers users would write, for benchmarks/bench_peers.sh: every record of a
packrec LMDB with python-lmdb, or of a packrec HDF5 file with h5py, in a seeded random order (an
epoch of a shuffled sampler), warm cache, best of three passes, one byte per cache line touched
like packrec bench does.

Usage: python_readers.py lmdb|h5py PATH
Prints records_per_s and mb_per_s.
"""
import random
import sys
import time


def touch(data):
    return sum(memoryview(data)[::64])  # one byte per cache line, as packrec bench does


def read_lmdb(path):
    import lmdb
    env = lmdb.open(path, readonly=True, lock=False, subdir=True)
    with env.begin() as txn:
        count = sum(1 for key in txn.cursor().iternext(values=False) if len(key) == 8)
    order = list(range(count))
    random.Random(7).shuffle(order)

    def epoch():
        total = 0
        with env.begin(buffers=True) as txn:
            for index in order:
                value = txn.get(index.to_bytes(8, "big"))
                touch(value)
                total += len(value)
        return count, total
    return epoch


def read_h5py(path):
    import h5py
    f = h5py.File(path, "r")
    data, offsets = f["data"], f["offsets"][:]
    count = len(offsets) - 1
    order = list(range(count))
    random.Random(7).shuffle(order)

    def epoch():
        total = 0
        for index in order:
            value = data[offsets[index]:offsets[index + 1]]
            touch(value)
            total += len(value)
        return count, total
    return epoch


def main():
    kind, path = sys.argv[1], sys.argv[2]
    epoch = read_lmdb(path) if kind == "lmdb" else read_h5py(path)
    epoch()  # warm
    best = None
    for _ in range(3):
        start = time.perf_counter()
        records, total = epoch()
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    print(f"reader={kind} records_per_s={records / best:.1f} mb_per_s={total / 1e6 / best:.1f}")


main()
