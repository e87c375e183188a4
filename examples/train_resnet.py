#!/usr/bin/env python3
"""A few training steps of a small torchvision ResNet on CPU, fed by torchvision's ImageFolder +
DataLoader or by packrec, switched with one flag; prints images/s for the loader alone and for
training.

    examples/train_resnet.py --loader torchvision --data tree/
    examples/train_resnet.py --loader packrec --data data.pkr      # made by packrec convert
    examples/train_resnet.py --loader packrec --data tree/         # converts tree/ first

Both run the same train transform (RandomResizedCrop + horizontal flip + normalize) with the
same number of worker threads/processes. Run with PYTHONPATH=build/python for a build tree.
"""
import argparse
import os
import tempfile
import time

import torch
import torchvision

import packrec

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--loader", choices=["torchvision", "packrec"], required=True)
parser.add_argument("--data", required=True, help="image folder (or, for packrec, a dataset)")
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--size", type=int, default=112, help="crop size (224 for ImageNet)")
parser.add_argument("--device", default="cuda" if packrec.gpu_available()[0] else "cpu")
args = parser.parse_args()


def torchvision_batches():
    normalize = torchvision.transforms.Normalize(packrec.IMAGENET_MEAN, packrec.IMAGENET_STD)
    transform = torchvision.transforms.Compose([
        torchvision.transforms.RandomResizedCrop(args.size),
        torchvision.transforms.RandomHorizontalFlip(),
        torchvision.transforms.ToTensor(), normalize])
    dataset = torchvision.datasets.ImageFolder(args.data, transform=transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.workers, drop_last=True,
                                         persistent_workers=args.workers > 0)
    while True:
        for images, labels in loader:
            yield images.to(args.device), labels.to(args.device), len(dataset.classes)


def packrec_batches():
    path = args.data
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "manifest.json")):
        path = os.path.join(tempfile.mkdtemp(prefix="packrec-example-"), "data.pkr")
        packrec.convert(args.data, path)
    loader = packrec.Loader(path, batch_size=args.batch_size, threads=args.workers,
                            transform="train", size=args.size, drop_last=True, normalize=True,
                            device=args.device if args.device != "cpu" else None)
    classes = max(1, len(loader.dataset.classes) or loader.dataset.info()["label_count"])
    while True:
        for images, labels in loader:
            yield images, labels, classes


batches = packrec_batches() if args.loader == "packrec" else torchvision_batches()
images, labels, classes = next(batches)  # starts the workers; not timed
model = torchvision.models.resnet18(num_classes=classes).to(args.device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()

loaded = train_images = 0
load_seconds = train_seconds = 0.0
for step in range(args.steps):
    start = time.monotonic()
    images, labels, _ = next(batches)
    load_seconds += time.monotonic() - start
    start = time.monotonic()
    optimizer.zero_grad()
    loss = loss_fn(model(images), labels)
    loss.backward()
    optimizer.step()
    train_seconds += time.monotonic() - start
    loaded += len(labels)
    print(f"step {step}: loss {loss.item():.3f}")
print(f"loader={args.loader} workers={args.workers} batch={args.batch_size} size={args.size} "
      f"device={args.device} waiting_for_data_images_per_s={loaded / max(load_seconds, 1e-9):.1f} "
      f"training_images_per_s={loaded / (load_seconds + train_seconds):.1f}")
