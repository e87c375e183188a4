#!/usr/bin/env python3
"""`packrec bench --storage` for real: a loop device, ext4, and the kernel's block I/O throttle.

Checks, on a tree of loose JPEGs and its shard dataset under a custom device (8 MB/s, 150 reads/s):
- loose files read at random from a cold cache, and the shard read in order, each within 20% of
  what the profile's limits give the reads that reached the device (bytes and reads, as the
  controller counted them), and the shard's lead over loose files within 20% of what the limits
  imply;
- the JSON validates against docs/bench.schema.json;
- nothing stays behind: no loop device holding an image, no cgroup, no mount point, including
  after a run killed with SIGKILL in the middle (the kernel tears down the mount namespace; the
  next run removes the killed one's empty cgroup and mount point);
- without root, the run says why and exits 7 (skipped), touching nothing.

Usage: storage_emulation_check.py PACKREC_CLI SCHEMA WORK_DIR
Exit 77 (skipped) where emulation cannot run: not root, no loop devices, no blkio/io controller.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

cli, schema_path, work = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
tree = os.path.join(work, "tree")
dataset = os.path.join(work, "ds.pkr")
subprocess.run([cli, "synth", tree, "--classes", "10", "--per-class", "100", "--seed", "9"],
               check=True, stdout=subprocess.DEVNULL)
subprocess.run([cli, "convert", "-q", tree, dataset, "--format", "shard"], check=True)
PROFILE = "bps=8MB,iops=150"
small = ["--quick", "--readers", "1", "--queue-depth", "4", "--probe-size", "16MiB",
         "--threads", "2", "--batch", "16", "--size", "32", "--repeats", "1",
         "--max-records", "1000"]


def bench(*extra, **kwargs):
    return subprocess.run([cli, "bench", tree, dataset, *small, *extra], capture_output=True,
                          text=True, **kwargs)


def leftovers():
    """Loop devices holding one of our images, and our cgroups and mount points."""
    loops = []
    for backing in glob.glob("/sys/block/loop*/loop/backing_file"):
        with open(backing) as f:
            if "packrec-storage-image" in f.read():
                loops.append(backing)
    cgroups = glob.glob("/sys/fs/cgroup/**/packrec-bench-*", recursive=True)
    tmp = os.environ.get("TMPDIR") or "/tmp"
    mounts = glob.glob(os.path.join(tmp, "packrec-storage-*"))
    return loops, cgroups, mounts


if os.geteuid() != 0:
    run = bench("--storage", "hdd", "--no-stages")
    assert run.returncode == 7, (run.returncode, run.stderr)
    assert "needs root" in run.stderr and "sudo" in run.stderr, run.stderr
    print("skipped: emulated storage needs root; the refusal was checked")
    sys.exit(77)

before = leftovers()
probe = bench("--storage", PROFILE, "--no-stages", "--no-probe", "--no-cold")
if probe.returncode == 7:
    print("skipped:", probe.stderr.strip())
    sys.exit(77)
assert probe.returncode == 0, probe.stderr

# Without root the same command is refused, with the reason, and nothing is made.
nobody = shutil.which("setpriv")
if nobody:
    run = subprocess.run([nobody, "--reuid", "65534", "--regid", "65534", "--clear-groups", cli,
                          "bench", tree, "--storage", "hdd", "--no-stages", "-q"],
                         capture_output=True, text=True)
    assert run.returncode == 7, (run.returncode, run.stderr)
    assert "needs root" in run.stderr, run.stderr

# Killed in the middle of its measurements: the kernel tears the device down.
killed = subprocess.Popen([cli, "bench", tree, dataset, *small, "--storage", PROFILE,
                           "--no-stages"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                          text=True)
for line in killed.stderr:
    if "files: random, cold" in line:
        break
killed.send_signal(signal.SIGKILL)
killed.wait()
deadline = time.time() + 20
while leftovers()[0] and time.time() < deadline:
    time.sleep(0.2)
loops, cgroups, mounts = leftovers()
assert not loops, f"a loop device still holds the killed run's image: {loops}"
print(f"after SIGKILL: no loop device; left for the next run: {cgroups + mounts}")

out = os.path.join(work, "emulated.json")
run = bench("--storage", PROFILE, "--json", out)
assert run.returncode == 0, run.stderr
print(run.stdout)
assert leftovers() == before, f"left behind: {leftovers()} (before: {before})"
wide = [line for line in run.stdout.splitlines() if len(line) > 100]
assert not wide, wide
with open(out) as f:
    report = json.load(f)
try:
    import jsonschema
    with open(schema_path) as f:
        validator = jsonschema.Draft202012Validator(json.load(f))
    errors = sorted(validator.iter_errors(report), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
except ImportError:
    print("jsonschema not installed: schema not checked")

assert report["emulated_storage"]["read_bytes_per_s"] == 8_000_000
assert report["emulated_storage"]["read_iops"] == 150
assert report["machine"]["data_filesystem"] == "ext4"
assert report["machine"]["data_device"].startswith("/dev/loop")


def row(source, order):
    found = [r for r in report["access"] if r["source"] == source and r["order"] == order
             and r["cache"] == "cold" and r["engine"] == "threads" and r["concurrency"] == 1]
    assert len(found) == 1, found
    r = found[0]
    assert r["device_reads"]["requests"] > 0 and r["limits_seconds"] > 0, r
    predicted = r["records"] / r["limits_seconds"]
    print(f"{source} {order} cold: {r['records_per_s']:.0f} records/s, the limits give "
          f"{predicted:.0f} (by {r['limited_by']}), "
          f"{r['device_reads']['requests'] / r['records']:.2f} device reads a record")
    assert 0.8 <= r["records_per_s"] / predicted <= 1.2, (r, predicted)
    return r["records_per_s"], predicted


files_measured, files_predicted = row("files", "random")
shard_measured, shard_predicted = row("shard", "sequential")
lead, implied = shard_measured / files_measured, shard_predicted / files_predicted
print(f"shard in order over loose files at random: {lead:.1f}x, the limits imply {implied:.1f}x")
assert 0.8 <= lead / implied <= 1.2, (lead, implied)
assert lead > 3, lead
# Warm rows never reach the device: left out. A cold epoch of the loader ran with each shuffle.
assert all(r["cache"] == "cold" for r in report["access"]), report["access"]
epochs = [s for s in report["stages"] if s["stage"] == "epoch cold"]
assert [s["note"].split(",")[0] for s in epochs] == ["shuffle global", "shuffle windowed"], epochs
assert all(s["images"] > 0 for s in epochs), epochs
assert any("emulated custom" in line and "the limits imply" in line
           for line in report["findings"]), report["findings"]
print("ok")
