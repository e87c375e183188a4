#!/usr/bin/env python3
"""The train pipeline with and without record fields, side by side (issue 31's benchmarks).

    python3 benchmarks/loader_fields_ab.py OLD_PYTHONPATH NEW_PYTHONPATH PACKREC_CLI WORK [IMAGES] [ROUNDS]

Makes IMAGES synthetic JPEGs (packrec synth, 400 x 350 on average) in 10 classes with a
metadata.jsonl giving each a caption and 1-4 boxes, converts the tree twice with the new CLI
(without the metadata: an image-only dataset; with it: a dataset with fields), then runs one
epoch of packrec.Loader (transform train, 224 x 224, batch 64, global shuffle, 2 threads,
numpy output) in a fresh process per measurement, alternating, ROUNDS times:
  old  image-only dataset, the build before fields (OLD_PYTHONPATH)
  new  the same dataset, this build
  new  the dataset with fields, image and label only
  new  the dataset with fields, caption and boxes requested
and prints the median images/s of each with the ratios to the first two.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys

RUN = r"""
import sys, time, packrec
requested = tuple(f for f in sys.argv[2].split(",") if f)
extra = {"fields": requested} if requested else {}  # the build before fields has no such option
loader = packrec.Loader(sys.argv[1], batch_size=64, threads=2, transform="train", size=224, seed=1,
                        output="numpy", **extra)
start = time.perf_counter()
n = 0
for batch in loader:
    n += len(batch[1])
print(n / (time.perf_counter() - start))
"""


def main():
    old_path, new_path, cli, work = sys.argv[1:5]
    images = int(sys.argv[5]) if len(sys.argv) > 5 else 2000
    rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 5
    tree = os.path.join(work, "tree")
    if not os.path.isdir(tree):
        subprocess.run([cli, "synth", tree, "--classes", "10", "--per-class", str(images // 10), "--seed", "3"],
                       check=True, stdout=subprocess.DEVNULL)
    plain, fields = os.path.join(work, "plain.pkr"), os.path.join(work, "fields.pkr")
    subprocess.run([cli, "convert", "-q", "--overwrite", tree, plain], check=True)
    rows = []
    for cls in sorted(os.listdir(tree)):
        for i, name in enumerate(sorted(os.listdir(os.path.join(tree, cls)))):
            boxes = [[10.0 * b, 20.0, 100.0 + b, 150.5] for b in range(1 + i % 4)]
            rows.append({"file_name": f"{cls}/{name}", "caption": f"a synthetic photo {i} of class {cls}",
                         "boxes": boxes})
    with open(os.path.join(tree, "metadata.jsonl"), "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    try:
        subprocess.run([cli, "convert", "-q", "--overwrite", tree, fields], check=True)
    finally:
        os.remove(os.path.join(tree, "metadata.jsonl"))
    cases = [("old, image-only dataset", old_path, plain, ""),
             ("new, image-only dataset", new_path, plain, ""),
             ("new, dataset with fields, image + label", new_path, fields, ""),
             ("new, dataset with fields, + caption + boxes", new_path, fields, "caption,boxes")]
    results = {name: [] for name, *_ in cases}
    for _ in range(rounds):
        for name, path, dataset, requested in cases:
            env = dict(os.environ, PYTHONPATH=path)
            out = subprocess.run([sys.executable, "-c", RUN, dataset, requested], env=env, check=True,
                                 capture_output=True, text=True).stdout
            results[name].append(float(out.strip().splitlines()[-1]))
    medians = {name: statistics.median(values) for name, values in results.items()}
    base_old, base_new = medians[cases[0][0]], medians[cases[1][0]]
    print(f"{images} images, {rounds} rounds, median images/s (all rounds)")
    for name, median in medians.items():
        spread = ", ".join(f"{v:.0f}" for v in results[name])
        print(f"{name:48s} {median:8.0f}  x{median / base_old:.3f} of old  x{median / base_new:.3f} of new  [{spread}]")


if __name__ == "__main__":
    main()
