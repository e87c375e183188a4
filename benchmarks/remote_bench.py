#!/usr/bin/env python3
"""The train pipeline (packrec.Loader: read, decode, random crop, resize) over a shard dataset
served by nginx and by s3rver on 127.0.0.1, with 0, 1, 10 and 50 ms added to every request by
the tests' forwarding proxy, against the same dataset on local disk, measured side by side in
one run. Also: requests per batch after coalescing, the prefetch depth each latency needs, and
a second epoch through the disk cache against local disk.

    /usr/bin/python3 benchmarks/remote_bench.py [--images 4096] [--repeats 3]

Needs the build's Python module on PYTHONPATH (build/python) and the remote tests' servers
(scripts/install-deps.sh). Prints a Markdown table; docs/benchmarks.md has a run.
"""
import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "python"))

import packrec  # noqa: E402
import remote_servers  # noqa: E402
from remote_servers import DelayProxy  # noqa: E402

BATCH = 256


def epoch_rate(path, prefetch=4, threads=2, epoch=0, shuffle="global"):
    """Images per second of one epoch of the train pipeline."""
    loader = packrec.Loader(path, batch_size=BATCH, threads=threads, transform="train", size=160,
                            prefetch=prefetch, seed=1, shuffle=shuffle, shuffle_window=1024)
    loader.set_epoch(epoch)
    start = time.perf_counter()
    images = 0
    for batch_images, _ in loader:
        images += len(batch_images)
    return images / (time.perf_counter() - start)


def median_rate(path, repeats, **kwargs):
    return statistics.median(epoch_rate(path, epoch=i, **kwargs) for i in range(repeats))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="packrec-remote-bench-"))
    tree = work / "tree"
    classes = 8
    packrec.synth(tree, classes=classes, per_class=args.images // classes, seed=3, width=500,
                  height=375)
    local = work / "www" / "ds.pkr"
    packrec.convert(tree, local, shard_size=16 << 20, threads=2)
    nginx = remote_servers.Nginx(work / "www", work / "nginx")
    s3 = remote_servers.S3rver(work / "s3", "bench")
    remote_servers.upload_tree(s3.url, "bench", "ds.pkr", local)
    records = len(packrec.open(local))
    size = sum(f["size_bytes"] for f in packrec.open(local).info()["files"])
    shards = len(packrec.open(local).info()["files"])
    print(f"{records} images, {size / 2**20:.0f} MiB in {shards} shards of 16 MiB; batch {BATCH}, "
          f"2 loader threads, train transform to 160x160, {args.repeats} epochs each, medians; "
          f"latency added by a TCP forwarder in its own process\n")
    proxies = []
    try:
        local_rate = {mode: median_rate(local, args.repeats, shuffle=mode)
                      for mode in ("global", "windowed")}
        print(f"local disk (page cache warm): {local_rate['global']:.0f} images/s global shuffle, "
              f"{local_rate['windowed']:.0f} windowed\n")
        print("| server | added latency | shuffle | images/s | vs local | requests per batch | "
              "MiB per batch |")
        print("|---|---|---|---|---|---|---|")
        for name, upstream in (("nginx", nginx.url), ("s3rver", s3.url)):
            for delay in (0, 1, 10, 50):
                proxy = DelayProxy(upstream, delay)
                proxies.append(proxy)
                if name == "nginx":
                    url = proxy.url + "/ds.pkr"
                else:
                    os.environ.update({"AWS_ENDPOINT_URL": proxy.url,
                                       "AWS_REGION": remote_servers.REGION,
                                       "AWS_ACCESS_KEY_ID": remote_servers.ACCESS_KEY,
                                       "AWS_SECRET_ACCESS_KEY": remote_servers.SECRET_KEY})
                    url = "s3://bench/ds.pkr"
                for mode in ("global", "windowed"):
                    rate = median_rate(url, args.repeats, shuffle=mode)
                    loader = packrec.Loader(url, batch_size=BATCH, threads=2, transform="train",
                                            size=160, seed=1, shuffle=mode, shuffle_window=1024)
                    opened = loader.stats()["remote_requests"]  # manifest, headers, indexes
                    for _ in loader:
                        pass
                    sent = loader.stats()["remote_requests"] - opened
                    mib = loader.stats()["remote_bytes"] / 2**20 / len(loader)
                    print(f"| {name} | {delay} ms | {mode} | {rate:.0f} | "
                          f"{rate / local_rate[mode]:.2f}x | {sent / len(loader):.1f} | "
                          f"{mib:.1f} |", flush=True)
                proxy.stop()
                proxies.remove(proxy)
        print("\n| added latency | shuffle | prefetch 1 | prefetch 2 | prefetch 4 | prefetch 8 |")
        print("|---|---|---|---|---|---|")
        for delay in (10, 50):
            proxy = DelayProxy(nginx.url, delay)
            proxies.append(proxy)
            for mode in ("global", "windowed"):
                rates = [median_rate(proxy.url + "/ds.pkr", 1, prefetch=p, shuffle=mode)
                         for p in (1, 2, 4, 8)]
                print(f"| {delay} ms | {mode} | " +
                      " | ".join(f"{r / local_rate[mode]:.2f}x" for r in rates) + " |", flush=True)
            proxy.stop()
            proxies.remove(proxy)
        proxy = DelayProxy(nginx.url, 10)
        proxies.append(proxy)
        os.environ["PACKREC_CACHE_DIR"] = str(work / "cache")
        os.environ["PACKREC_CACHE_SIZE"] = str(4 * size)
        first = epoch_rate(proxy.url + "/ds.pkr", epoch=0)
        second = epoch_rate(proxy.url + "/ds.pkr", epoch=1)
        print(f"\nthrough the cache at 10 ms, global shuffle: first epoch {first:.0f} images/s "
              f"({first / local_rate['global']:.2f}x local), second {second:.0f} images/s "
              f"({second / local_rate['global']:.2f}x local)")
    finally:
        for proxy in proxies:
            proxy.stop()
        nginx.stop()
        s3.stop()


if __name__ == "__main__":
    main()
