#!/usr/bin/env python3
"""Writing to and importing from URLs, side by side with local disk in one run: `packrec convert`
of an image tree into a local shard dataset against the same conversion into s3rver on 127.0.0.1
(shards uploaded as they are sealed, the manifest last), and an import of WebDataset tars from
local disk against the same tars from nginx (downloaded two files ahead of the importer), each
with 0 and 10 ms added to every request by the tests' TCP forwarder.

    /usr/bin/python3 benchmarks/remote_write_bench.py [--images 4096] [--repeats 3]

Needs build/tools/packrec (or PACKREC_CLI) and the remote tests' servers
(scripts/install-deps.sh). Prints a Markdown table; docs/benchmarks.md has a run.
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import remote_servers  # noqa: E402
from remote_servers import DelayProxy  # noqa: E402

CLI = os.environ.get("PACKREC_CLI", str(ROOT / "build" / "tools" / "packrec"))


def timed(*args, env=None):
    start = time.perf_counter()
    subprocess.run([CLI, *map(str, args)], check=True, capture_output=True,
                   env={**os.environ, **(env or {})})
    return time.perf_counter() - start


def median_seconds(repeats, make_args, env=None, before=None):
    runs = []
    for i in range(repeats):
        if before:
            before(i)
        runs.append(timed(*make_args(i), env=env))
    return statistics.median(runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="packrec-remote-write-bench-"))
    tree = work / "tree"
    timed("synth", tree, "--classes", "8", "--per-class", args.images // 8, "--seed", "3",
          "--width", "500", "--height", "375")
    www = work / "www"
    timed("convert", tree, www / "wds", "--format", "wds", "--shard-size", "16MiB")
    size = sum(p.stat().st_size for p in (www / "wds").glob("*.tar"))
    nginx = remote_servers.Nginx(www, work / "nginx")
    s3 = remote_servers.S3rver(work / "s3", "bench")
    s3_env = {"AWS_REGION": remote_servers.REGION, "AWS_ACCESS_KEY_ID": remote_servers.ACCESS_KEY,
              "AWS_SECRET_ACCESS_KEY": remote_servers.SECRET_KEY,
              "PACKREC_STAGING_DIR": str(work / "staging")}
    print(f"{args.images} images, {size / 2**20:.0f} MiB; shards and tars of 16 MiB; "
          f"{args.repeats} runs each, medians; latency added by a TCP forwarder in its own "
          f"process\n")
    print("| what | where | added latency | seconds | vs local |")
    print("|---|---|---|---|---|")

    def clear(path):
        return lambda _: shutil.rmtree(path, ignore_errors=True)

    local_write = median_seconds(
        args.repeats, lambda i: ("convert", tree, work / "local.pkr", "--shard-size", "16MiB",
                                 "--overwrite"))
    print(f"| convert tree -> shard | local disk | - | {local_write:.2f} | 1.00x |")
    local_import = median_seconds(
        args.repeats, lambda i: ("convert", f"{www}/wds/shard-*.tar", work / "imp.pkr",
                                 "--overwrite"))
    proxies = []
    try:
        for delay in (0, 10):
            proxy = DelayProxy(s3.url, delay)
            proxies.append(proxy)
            env = {**s3_env, "AWS_ENDPOINT_URL": proxy.url}
            seconds = median_seconds(
                args.repeats, lambda i: ("convert", tree, "s3://bench/ds", "--shard-size",
                                         "16MiB", "--overwrite"), env=env)
            print(f"| convert tree -> shard | s3rver | {delay} ms | {seconds:.2f} | "
                  f"{seconds / local_write:.2f}x |", flush=True)
        print(f"| import wds tars -> shard | local disk | - | {local_import:.2f} | 1.00x |")
        for delay in (0, 10):
            proxy = DelayProxy(nginx.url, delay)
            proxies.append(proxy)
            count = len(list((www / "wds").glob("*.tar")))
            spec = f"{proxy.url}/wds/shard-{{000000..{count - 1:06d}}}.tar"
            seconds = median_seconds(
                args.repeats, lambda i: ("convert", spec, work / "imp.pkr", "--overwrite"))
            print(f"| import wds tars -> shard | nginx | {delay} ms | {seconds:.2f} | "
                  f"{seconds / local_import:.2f}x |", flush=True)
    finally:
        for proxy in proxies:
            proxy.stop()
        nginx.stop()
        s3.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
