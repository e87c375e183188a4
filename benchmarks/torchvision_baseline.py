#!/usr/bin/env python3
"""The torchvision baseline for benchmarks/loader_bench.sh: ImageFolder + DataLoader with the
standard ImageNet transforms, as a training script would use them.

Usage: torchvision_baseline.py TREE train|eval WORKERS BATCH EPOCHS
Prints images_per_s over the epochs after the first (the first starts the workers and warms up),
to compare with packrec's loader measured the same way.
"""
import sys
import time

import torch
import torchvision
from torchvision import transforms

tree, mode, workers, batch, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
if mode == "train":
    transform = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                    transforms.ToTensor(), normalize])
else:
    transform = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                                    transforms.ToTensor(), normalize])
torch.set_num_threads(1)
dataset = torchvision.datasets.ImageFolder(tree, transform=transform)
loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=(mode == "train"),
                                     num_workers=workers, persistent_workers=workers > 0)
images, start = 0, None
for epoch in range(epochs):
    if epoch == 1:
        images, start = 0, time.monotonic()
    for x, y in loader:
        images += x.shape[0]
seconds = time.monotonic() - start
print(f"mode=torchvision transform={mode} workers={workers} images_per_s={images / seconds:.1f} seconds={seconds:.3f}")
