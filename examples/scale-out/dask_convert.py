#!/usr/bin/env python3
"""A partitioned conversion on a Dask distributed cluster: one task per part, then one merge
task, through the Python bindings. Debian: apt-get install python3-distributed.

    dask_convert.py SRC PARTS_DIR OUT --parts 16 --scheduler tcp://HOST:8786
    dask_convert.py SRC PARTS_DIR OUT --parts 4 --local-workers 2   # a LocalCluster here

Every task lists SRC itself (the same sorted listing everywhere) and converts only its part into
PARTS_DIR/part-IIIII-of-NNNNN.pkr on storage every worker sees. When a worker dies mid-part
(killed, out of memory, its machine lost), the scheduler runs its task again on another worker
(up to distributed.scheduler.allowed-failures times, 3 by default): the part is redone from
scratch, finished parts are left alone ("already complete"). The conversion runs in the worker
process itself, not in a child, so a killed worker leaves no conversion behind that would hold
the part's lock. The merge waits for every part, joins them into OUT and verifies it. Tested on
a LocalCluster with a worker killed at random points (tests/scale_out/test_dask.py).
"""
import argparse
import os
import uuid

import distributed

import packrec


def convert_part(src, parts_dir, index, count, options):
    """One part; runs on a worker. Returns what the merge and a reader of the log want."""
    stats = packrec.convert(src, parts_dir, part=(index, count), shuffle=True, seed=1,
                            on_error="skip", **options)
    return {"part": index, "records": stats["records_written"],
            "already_complete": stats["already_complete"], "pid": os.getpid(),
            "seconds": stats["elapsed_seconds"]}


def merge_parts(out, parts_dir, parts):
    """Runs on a worker once every part is done (`parts` are their results)."""
    stats = packrec.merge(out, [parts_dir], remove_parts=True)
    report = packrec.open(out).verify()
    if not report["ok"]:
        raise RuntimeError(f"{out} does not verify: {report['problems'][:3]}")
    return {**stats, "converted": parts}


def convert(client, src, parts_dir, out, count, **options):
    """Submits the parts and the merge to `client`'s cluster and waits for the merge. options:
    more packrec.convert arguments, the same for every part (threads, format, resize_short).
    Returns the merge's stats with every part's result under "converted"."""
    src, parts_dir, out = os.fspath(src), os.fspath(parts_dir), os.fspath(out)
    # Keys the dashboard reads ("packrec-part-3-of-16-..."), unique to this call.
    run = uuid.uuid4().hex[:12]
    parts = [client.submit(convert_part, src, parts_dir, index, count, options,
                           key=f"packrec-part-{index}-of-{count}-{run}")
             for index in range(count)]
    merged = client.submit(merge_parts, out, parts_dir, parts, key=f"packrec-merge-{run}")
    return merged.result()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src")
    parser.add_argument("parts_dir")
    parser.add_argument("out")
    parser.add_argument("--parts", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="convert threads per part")
    parser.add_argument("--resize-short", type=int, default=0)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--scheduler", help="a running cluster's scheduler address")
    where.add_argument("--local-workers", type=int, help="start a LocalCluster of N processes")
    args = parser.parse_args()
    if args.scheduler:
        client = distributed.Client(args.scheduler)
    else:
        cluster = distributed.LocalCluster(n_workers=args.local_workers, threads_per_worker=1,
                                           processes=True, dashboard_address=None)
        client = distributed.Client(cluster)
    with client:
        stats = convert(client, args.src, args.parts_dir, args.out, args.parts,
                        threads=args.threads, resize_short=args.resize_short)
    for part in stats["converted"]:
        print(f"part {part['part']}/{args.parts}: {part['records']} records"
              + (" (already complete)" if part["already_complete"] else ""))
    print(f"merged {stats['parts']} parts: {stats['records']} records into {args.out}")


if __name__ == "__main__":
    main()
