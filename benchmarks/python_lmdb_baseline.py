#!/usr/bin/env python3
"""The straightforward python-lmdb converter packrec's LMDB writer is measured against: walk the
tree, one put per file (index key, raw bytes as value), commit every 1,000 puts, map size guessed
from the tree's size. Usage: python_lmdb_baseline.py TREE OUT"""
import os
import sys

import lmdb

tree, out = sys.argv[1], sys.argv[2]
files = []
for root, _, names in sorted(os.walk(tree)):
    files += [os.path.join(root, name) for name in sorted(names)]
total = sum(os.path.getsize(path) for path in files)
env = lmdb.open(out, map_size=2 * total + (64 << 20))
txn = env.begin(write=True)
for index, path in enumerate(files):
    with open(path, "rb") as f:
        txn.put(index.to_bytes(8, "big"), f.read())
    if index % 1000 == 999:
        txn.commit()
        txn = env.begin(write=True)
txn.commit()
env.sync(True)
env.close()
