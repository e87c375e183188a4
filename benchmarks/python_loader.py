#!/usr/bin/env python3
"""packrec.Loader from Python, timed as benchmarks/loader_bench.cc times the C++ loader: images/s
over the epochs after the first, taking each batch as a torch tensor (zero-copy) and touching it.

Usage: python_loader.py DATASET train|eval THREADS BATCH PREFETCH EPOCHS
"""
import sys
import time

import packrec

path, mode = sys.argv[1], sys.argv[2]
threads, batch, prefetch, epochs = map(int, sys.argv[3:7])
loader = packrec.Loader(path, batch_size=batch, threads=threads, prefetch=prefetch, transform=mode,
                        size=224, output="torch")
images, start = 0, None
for epoch in range(epochs):
    if epoch == 1:
        images, start = 0, time.monotonic()
    for x, y in loader:
        images += x.shape[0]
seconds = time.monotonic() - start
print(f"mode=packrec-python transform={mode} threads={threads} images_per_s={images / seconds:.1f} seconds={seconds:.3f}")
