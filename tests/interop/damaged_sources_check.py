#!/usr/bin/env python3
"""Random damage to every import source: packrec convert must never crash, never report an
internal error, never leave a half-written dataset, and what it does write must verify.

Usage: damaged_sources_check.py PACKREC_CLI WORK_DIR [ROUNDS]

Sources (exported by packrec, MDS by benchmarks/make_mds.py, a Caffe LMDB by packrec's
caffe-datum writer read with --from caffe-lmdb) are damaged ROUNDS times each with a fixed seed:
bytes flipped, a stretch zeroed, the file cut at a random offset, or all three. Each damaged copy
is converted with --on-error skip. Allowed outcomes: exit 0 (and `packrec verify` passes on the
result, with fewer or equal records) or a documented error code (3 input, 5 corrupt, 6 I/O) with
a message and no output left behind. Under the sanitizer build this is also an ASan/UBSan run of
every importer on hostile input.
"""
import json
import os
import random
import shutil
import subprocess
import sys

cli, work = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 25
here = os.path.dirname(os.path.abspath(__file__))
make_mds = os.path.join(here, "..", "..", "benchmarks", "make_mds.py")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def run(*args):
    return subprocess.run([cli, *args], capture_output=True, text=True)


tree = os.path.join(work, "tree")
assert run("synth", tree, "--classes", "2", "--per-class", "6", "--seed", "3").returncode == 0
sources = {}
for fmt in ("wds", "tfrecord", "recordio"):
    out = os.path.join(work, fmt)
    assert run("convert", "-q", tree, out, "--format", fmt, "--shard-size", "40000").returncode == 0
    sources[fmt] = (out, [])
subprocess.run([sys.executable, make_mds, tree, os.path.join(work, "mds"), "60000"], check=True)
sources["mds"] = (os.path.join(work, "mds"), [])
caffe = os.path.join(work, "caffe")
assert run("convert", "-q", tree, caffe, "--format", "lmdb",
           "--lmdb-values", "caffe-datum").returncode == 0
os.remove(os.path.join(caffe, "packrec-manifest.json"))  # now only a Caffe database
sources["caffe-lmdb"] = (caffe, ["--from", "caffe-lmdb"])

rng = random.Random(int(os.environ.get("PACKREC_DAMAGE_SEED", "2026")))
outcomes = {}
for name, (source, flags) in sources.items():
    data_files = sorted(f for f in os.listdir(source)
                        if not f.endswith((".json", ".idx", ".lst")) or f == "index.json")
    total_records = 12
    for r in range(rounds):
        copy = os.path.join(work, f"{name}-damaged")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(source, copy)
        target = os.path.join(copy, rng.choice(data_files))
        with open(target, "rb") as f:
            blob = bytearray(f.read())
        how = rng.choice(("flip", "zero", "cut", "all"))
        if how in ("flip", "all") and blob:
            for _ in range(rng.randint(1, 8)):
                blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
        if how in ("zero", "all") and blob:
            at = rng.randrange(len(blob))
            blob[at:at + rng.randint(1, 512)] = bytes(len(blob[at:at + 512]))[:len(blob[at:at + 512])]
        if how in ("cut", "all") and blob:
            blob = blob[:rng.randrange(len(blob))]
        with open(target, "wb") as f:
            f.write(blob)
        out = os.path.join(work, f"{name}-out")
        shutil.rmtree(out, ignore_errors=True)
        result = run("convert", "-q", copy, out, "--on-error", "skip", *flags)
        where = f"{name} round {r} ({how} {os.path.basename(target)})"
        assert result.returncode >= 0, f"{where}: killed by signal {-result.returncode}\n{result.stderr}"
        assert "Sanitizer" not in result.stderr, f"{where}:\n{result.stderr}"
        assert result.returncode in (0, 3, 5, 6), f"{where}: exit {result.returncode}\n{result.stderr}"
        outcomes[result.returncode] = outcomes.get(result.returncode, 0) + 1
        if result.returncode == 0:
            verify = run("verify", out)
            assert verify.returncode == 0, f"{where}: the result does not verify\n{verify.stdout}"
            info = json.loads(run("info", out, "--json").stdout)
            assert info["records"] <= total_records, where
        else:
            assert result.stderr.strip(), f"{where}: failed without a message"
            assert not os.path.exists(out), f"{where}: a failed convert left {out}"

print(f"damaged sources: {rounds} rounds x {len(sources)} sources, exit codes {outcomes}")
