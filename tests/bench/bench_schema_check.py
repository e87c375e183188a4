#!/usr/bin/env python3
"""Validates `packrec bench --json` against docs/bench.schema.json with jsonschema (Debian
python3-jsonschema), and checks the CLI's flags: bad values exit 2 and write nothing.

Usage: bench_schema_check.py PACKREC_CLI SCHEMA WORK_DIR
Exit 77 (skipped) without jsonschema.
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import jsonschema
except ImportError:
    print("skipped: python3-jsonschema is not installed")
    sys.exit(77)

cli, schema_path, work = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
tree = os.path.join(work, "tree")
subprocess.run([cli, "synth", tree, "--classes", "3", "--per-class", "10", "--seed", "4"],
               check=True, stdout=subprocess.DEVNULL)
datasets = []
for fmt, name in (("shard", "ds.pkr"), ("lmdb", "ds.lmdb"), ("hdf5", "ds.h5")):
    out = os.path.join(work, name)
    subprocess.run([cli, "convert", "-q", tree, out, "--format", fmt], check=True,
                   stdout=subprocess.DEVNULL)
    datasets.append(out)
scratch = os.path.join(work, "scratch")
os.makedirs(scratch)
small = ["--quick", "--max-records", "30", "--seconds", "0.05", "--probe-size", "4MiB",
         "--threads", "2", "--batch", "8", "--size", "64", "--readers", "1,2",
         "--queue-depth", "4", "--scratch", scratch, "-q"]

with open(schema_path) as f:
    schema = json.load(f)
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)


def bench(extra, name):
    out = os.path.join(work, name)
    run = subprocess.run([cli, "bench", tree, *datasets, *small, "--json", out, *extra],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "bottleneck: " in run.stdout and "recommendation:" in run.stdout, run.stdout
    # The table fits 100 columns (the access table's paths aside: none is printed).
    wide = [line for line in run.stdout.splitlines() if len(line) > 100]
    assert not wide, wide
    with open(out) as f:
        report = json.load(f)
    errors = sorted(validator.iter_errors(report), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    # Advice as data: every knob with its value and where it is set.
    assert all(item["knob"] and item["value"] and item["set_with"] for item in report["advice"])
    return report


report = bench([], "full.json")
assert report["storage"]["ran"] is True
sources = {row["source"] for row in report["access"]}
assert sources == {"files", "shard", "lmdb", "hdf5"}, sources
cold = [row for row in report["access"] if row["cache"] == "cold"]
assert cold and all(row["eviction"]["verified"] for row in cold), \
    [(r["source"], r["eviction"]) for r in cold if not r["eviction"]["verified"]]
assert os.listdir(scratch) == [], os.listdir(scratch)

report = bench(["--no-probe", "--no-cold", "--no-stages"], "warm.json")
assert report["storage"] == {"ran": False, "skipped": report["storage"]["skipped"]}
assert all(row["cache"] == "warm" and row["device_bandwidth_share"] is None
           for row in report["access"])
assert report["stages"] == [] and report["gpu_status"].startswith("not measured: ")

# Bad flags: exit 2, a message naming the flag, no JSON written.
bad = [["--readers", "0"], ["--readers", "x"], ["--batch", "0"], ["--batch", "-3"],
       ["--consumer-rate", "0"], ["--consumer-rate", "abc"], ["--seconds", "-1"],
       ["--probe-size", "18446744073709551616"], ["--queue-depth", "0"], ["--threads", ""],
       ["--size", "0"], ["--max-records", "0"]]
for flags in bad:
    out = os.path.join(work, "bad.json")
    run = subprocess.run([cli, "bench", tree, "--json", out, *flags], capture_output=True,
                         text=True)
    assert run.returncode == 2, (flags, run.returncode, run.stderr)
    assert flags[0] in run.stderr, (flags, run.stderr)
    assert not os.path.exists(out), flags
# A --json path that cannot be written fails at once (exit 6), before any measurement.
run = subprocess.run([cli, "bench", tree, *small, "--json", os.path.join(work, "no", "dir.json")],
                     capture_output=True, text=True, timeout=10)
assert run.returncode == 6 and "no/dir.json" in run.stderr, (run.returncode, run.stderr)
assert run.stdout == "", run.stdout
run = subprocess.run([cli, "bench", os.path.join(work, "missing")], capture_output=True, text=True)
assert run.returncode == 3 and "missing" in run.stderr, (run.returncode, run.stderr)
print(f"bench JSON valid against {os.path.basename(schema_path)}; {len(bad)} bad flags refused")
