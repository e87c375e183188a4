#!/usr/bin/env python3
"""The straightforward h5py converter packrec's HDF5 writer is measured against: walk the tree,
store each file as one element of a variable-length uint8 dataset, labels beside it.
Usage: python_h5py_baseline.py TREE OUT.h5"""
import os
import sys

import h5py
import numpy as np

tree, out = sys.argv[1], sys.argv[2]
classes = sorted(d for d in os.listdir(tree) if os.path.isdir(os.path.join(tree, d)))
files = []
for label, name in enumerate(classes):
    for root, _, names in sorted(os.walk(os.path.join(tree, name))):
        files += [(os.path.join(root, n), label) for n in sorted(names)]
with h5py.File(out, "w") as f:
    images = f.create_dataset("images", (len(files),), dtype=h5py.vlen_dtype(np.uint8))
    labels = f.create_dataset("labels", (len(files),), dtype=np.int64)
    for i, (path, label) in enumerate(files):
        with open(path, "rb") as image:
            images[i] = np.frombuffer(image.read(), dtype=np.uint8)
        labels[i] = label
    f.flush()
os.sync()
