#!/usr/bin/env python3
"""Imports that keep captions and JSON (issue 32) against image-only imports, side by side.

Two WebDataset sources are made from one synth tree with Python's tarfile: image-only samples
(jpg + cls) and img2dataset-like ones (jpg + cls + txt caption + json metadata). Each is also
exported to TFRecord by packrec (the fields become features) and imported from its .tfrecord
files. `packrec convert SRC OUT` runs on each, alternating, RUNS rounds after a warm-up, on warm
page cache and cold (the source's pages evicted before each import); medians. Throughput is source bytes per second, so a source with more bytes is not
counted slower for having them; the ratio with / without fields is what is reported. Then the
peak anonymous memory (RssAnon, sampled every 5 ms) of the import with fields at 1x and 4x the
samples: it must stay flat.

Usage: import_fields_bench.py PACKREC_CLI [IMAGES] [RUNS]
"""
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

cli = sys.argv[1]
images = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
work = tempfile.mkdtemp(prefix="packrec-fields-bench.", dir=os.environ.get("TMPDIR", "/tmp"))
out_root = tempfile.mkdtemp(prefix="packrec-fields-out.", dir=os.environ.get("OUT_TMP", "/dev/shm"))


def run(*args):
    subprocess.run([cli, *args], check=True, stdout=subprocess.DEVNULL)


def make_wds(tree, out, with_fields, copies=1):
    os.makedirs(out)
    files = []
    for name in sorted(os.listdir(tree)):
        for file in sorted(os.listdir(os.path.join(tree, name))):
            files.append((name, os.path.join(tree, name, file)))
    classes = sorted({name for name, _ in files})
    per_tar, tar, count = 1000, None, 0
    for copy in range(copies):
        for i, (name, path) in enumerate(files):
            if count % per_tar == 0:
                if tar:
                    tar.close()
                tar = tarfile.open(os.path.join(out, f"{count // per_tar:06d}.tar"), "w",
                                   format=tarfile.USTAR_FORMAT)
            key = f"{count:09d}"
            with open(path, "rb") as f:
                members = {"jpg": f.read(), "cls": str(classes.index(name)).encode()}
            if with_fields:
                members["txt"] = (f"a photo of a {name} number {i}, taken outdoors on a sunny "
                                  f"day").encode()
                members["json"] = json.dumps({
                    "url": f"https://example.com/images/{name}/{i}.jpg", "key": key,
                    "status": "success", "error_message": None, "width": 256, "height": 192,
                    "original_width": 1024, "original_height": 768, "exif": "{}",
                    "sha256": f"{i:064x}", "caption": members["txt"].decode()}).encode()
            for suffix, data in members.items():
                info = tarfile.TarInfo(f"{key}.{suffix}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            count += 1
    tar.close()


def source_bytes(paths):
    return sum(os.path.getsize(p) for p in paths)


def evict(files):
    """The files' pages dropped from the page cache (as import_bench.sh does): a cold read."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def timed_import(spec, files, cold=False):
    if cold:
        evict(files)
    out = os.path.join(out_root, "out.pkr")
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    run("convert", spec, out, "-q")
    seconds = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    return source_bytes(files) / seconds / 2**20


def peak_anon_kib(args):
    process = subprocess.Popen([cli, *args], stdout=subprocess.DEVNULL)
    peak = 0
    while process.poll() is None:
        try:
            with open(f"/proc/{process.pid}/status") as f:
                for line in f:
                    if line.startswith("RssAnon"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.005)
    assert process.returncode == 0
    return peak


try:
    tree = os.path.join(work, "tree")
    run("synth", tree, "--classes", "20", "--per-class", str(images // 20), "--seed", "5")
    sources = {}
    for kind in ("image-only", "with fields"):
        wds = os.path.join(work, kind.replace(" ", "-"), "wds")
        make_wds(tree, wds, kind == "with fields")
        tars = sorted(os.path.join(wds, f) for f in os.listdir(wds))
        sources[("wds", kind)] = (os.path.join(wds, "*.tar"), tars)
        shard = os.path.join(work, kind.replace(" ", "-"), "shard")
        run("convert", os.path.join(wds, "*.tar"), shard, "-q")
        tf = os.path.join(work, kind.replace(" ", "-"), "tf")
        run("convert", shard, tf, "--format", "tfrecord", "--shard-size", "64MiB", "-q")
        records = sorted(os.path.join(tf, f) for f in os.listdir(tf) if f.endswith(".tfrecord"))
        sources[("tfrecord", kind)] = (os.path.join(tf, "*.tfrecord"), records)
    results = {(cache, key): [] for key in sources for cache in ("warm", "cold")}
    for key, (spec, files) in sources.items():
        timed_import(spec, files)  # warm the page cache
    for _ in range(runs):
        for cache in ("warm", "cold"):
            for key, (spec, files) in sources.items():
                results[(cache, key)].append(timed_import(spec, files, cache == "cold"))
        for key, (spec, files) in sources.items():
            timed_import(spec, files)  # the next round's warm imports find the pages cached
    print(f"{images} samples, {runs} rounds alternating, medians (source MiB/s); cold: the "
          f"source's pages evicted (posix_fadvise DONTNEED) before each import:")
    for cache in ("warm", "cold"):
        for source in ("wds", "tfrecord"):
            plain_runs = results[(cache, (source, "image-only"))]
            rich_runs = results[(cache, (source, "with fields"))]
            plain = statistics.median(plain_runs)
            rich = statistics.median(rich_runs)
            per_round = sorted(r / p for r, p in zip(rich_runs, plain_runs))
            print(f"  {cache} {source:9s} image-only {plain:7.1f}  with txt+json {rich:7.1f}  "
                  f"ratio {rich / plain:.3f} (rounds {per_round[0]:.2f}..{per_round[-1]:.2f})")
    big = os.path.join(work, "big")
    make_wds(tree, big, True, copies=4)
    one = peak_anon_kib(["convert", sources[("wds", "with fields")][0],
                         os.path.join(out_root, "m1"), "-q"])
    four = peak_anon_kib(["convert", os.path.join(big, "*.tar"), os.path.join(out_root, "m4"),
                          "-q"])
    print(f"  peak RssAnon with fields: {one / 1024:.1f} MiB at 1x, {four / 1024:.1f} MiB at 4x")
finally:
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out_root, ignore_errors=True)
