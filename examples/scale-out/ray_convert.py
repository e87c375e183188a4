#!/usr/bin/env python3
"""A partitioned conversion with Ray: one task per part, then one merge, through the Python
bindings. `ray` is not packaged in Debian: `pip install ray` in a venv that has packrec.

    ray_convert.py SRC PARTS_DIR OUT --parts 16 [--address auto]

Every task lists SRC itself (the same sorted listing everywhere) and converts only its part into
PARTS_DIR/part-IIIII-of-NNNNN.pkr on shared storage. Ray retries a failed task; a retried part is
redone from scratch and finished parts are left alone. Not run under Ray by the tests here
(ray is not in Debian): tests/python/test_scale_out.py runs it only where ray is importable.
"""
import argparse

import ray

import packrec


@ray.remote(num_cpus=2, max_retries=3)
def convert_part(src, parts_dir, index, count, threads):
    stats = packrec.convert(src, parts_dir, part=(index, count), shuffle=True, seed=1,
                            threads=threads, on_error="skip")
    return index, stats["records_written"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src")
    parser.add_argument("parts_dir")
    parser.add_argument("out")
    parser.add_argument("--parts", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--address", default=None, help="a running cluster ('auto'), or local")
    args = parser.parse_args()
    ray.init(address=args.address)
    done = ray.get([convert_part.remote(args.src, args.parts_dir, i, args.parts, args.threads)
                    for i in range(args.parts)])
    print(f"converted {sum(n for _, n in done)} records in {len(done)} parts")
    stats = packrec.merge(args.out, [args.parts_dir], remove_parts=True)
    print(f"merged {stats['parts']} parts: {stats['records']} records into {args.out}")


if __name__ == "__main__":
    main()
