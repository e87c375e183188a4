#!/usr/bin/env python3
"""One `packrec convert` against the same conversion as a real Slurm array of 4 tasks and the
merge job (tests/scale_out/slurm_cluster.py: a single-node cluster with 2 CPUs on 127.0.0.1),
on the same warm tree, RUNS rounds; medians. Needs root, slurm-wlm and munge.

    benchmarks/slurm_array_bench.py BUILD_DIR [IMAGES] [RUNS] [--resize-short N]

Every packrec command inside the jobs runs through a wrapper that records its own wall time, so
the table separates packrec's time from Slurm's (submission, scheduling, job start-up). Every
merged dataset is compared with the single conversion, file for file.
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
sys.path.insert(0, os.fspath(ROOT / "tests" / "scale_out"))
from slurm_cluster import SlurmCluster  # noqa: E402

WRAPPER = """#!/usr/bin/env bash
# Runs packrec and appends "<subcommand> <part or -> <seconds>" to $TIMES.
start=$(date +%s.%N)
"{packrec}" "$@"
status=$?
part=-
for ((i = 1; i < $#; i++)); do [[ ${{!i}} == --part ]] && {{ j=$((i + 1)); part=${{!j}}; }}; done
echo "$1 $part $(echo "$(date +%s.%N) - $start" | bc -l)" >> "$TIMES"
exit $status
"""


def files(path):
    return {p.relative_to(path): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build")
    parser.add_argument("images", type=int, nargs="?", default=2000)
    parser.add_argument("runs", type=int, nargs="?", default=3)
    parser.add_argument("--resize-short", type=int, default=0)
    args = parser.parse_args()
    packrec = pathlib.Path(args.build).resolve() / "tools" / "packrec"
    work = pathlib.Path(tempfile.mkdtemp(prefix="packrec-slurm-bench-"))
    flags = ["--resize-short", str(args.resize_short)] if args.resize_short else []
    cluster = SlurmCluster(work / "cluster")
    try:
        subprocess.run([packrec, "synth", work / "tree", "--classes", "20", "--per-class",
                        str(args.images // 20), "--seed", "5"], check=True, capture_output=True)
        subprocess.run(f"cat {work}/tree/*/* > /dev/null", shell=True, check=True)  # warm
        wrapper = work / "packrec-timed"
        wrapper.write_text(WRAPPER.format(packrec=packrec))
        wrapper.chmod(0o755)
        cluster.start()
        rows = {"single": [], "array": [], "parts": [], "merge_job": [], "merge": []}
        for run in range(args.runs):
            for sub in ("single.pkr", "parts", "train.pkr"):
                shutil.rmtree(work / sub, ignore_errors=True)
            (work / "times").unlink(missing_ok=True)
            subprocess.run(["sync"])
            start = time.monotonic()
            subprocess.run([packrec, "convert", work / "tree", work / "single.pkr", "--shuffle",
                            "--seed", "1", "--on-error", "skip", "-q", "--threads", "2", *flags],
                           check=True)
            rows["single"].append(time.monotonic() - start)
            env = {"SRC": os.fspath(work / "tree"), "PARTS": os.fspath(work / "parts"),
                   "OUT": os.fspath(work / "train.pkr"), "PACKREC": os.fspath(wrapper),
                   "CONVERT_FLAGS": " ".join(flags), "TIMES": os.fspath(work / "times")}
            subprocess.run(["sync"])
            start = time.monotonic()
            array = cluster.sbatch("--array=0-3", "--cpus-per-task=1", "--mem=100M",
                                   f"--chdir={work}", ROOT / "examples/scale-out/convert-array.sbatch",
                                   env=env)
            assert set(cluster.wait(array).values()) == {"COMPLETED"}
            rows["array"].append(time.monotonic() - start)
            start = time.monotonic()
            merge = cluster.sbatch(f"--dependency=afterok:{array}", "--cpus-per-task=1",
                                   "--mem=100M", f"--chdir={work}",
                                   ROOT / "examples/scale-out/merge.sbatch", env=env)
            assert cluster.wait(merge)[merge] == "COMPLETED"
            rows["merge_job"].append(time.monotonic() - start)
            times = [line.split() for line in (work / "times").read_text().splitlines()]
            rows["parts"].append(statistics.median(float(t) for c, p, t in times if c == "convert"))
            rows["merge"].append(sum(float(t) for c, p, t in times if c == "merge"))
            assert files(work / "train.pkr") == files(work / "single.pkr"), "merged != single"
        size = sum(p.stat().st_size for p in (work / "tree").rglob("*") if p.is_file())
        median = {k: statistics.median(v) for k, v in rows.items()}
        print(f"{args.images} images, {size / 1e6:.0f} MB, {'--resize-short ' + str(args.resize_short) if flags else 'no re-encoding'}, "
              f"{args.runs} runs (medians); every merged dataset identical to the single one")
        print("| run | seconds | vs one convert |")
        print("|---|---|---|")
        print(f"| one `convert`, 2 threads | {median['single']:.2f} | 1.00x |")
        print(f"| `sbatch --array=0-3` (1 CPU each, 2 at a time), submit to last task done | "
              f"{median['array']:.2f} | {median['single'] / median['array']:.2f}x |")
        print(f"| of which one part's `packrec convert` (median) | {median['parts']:.2f} | |")
        print(f"| merge job (`--dependency=afterok`), submit to done | {median['merge_job']:.2f} | |")
        print(f"| of which `packrec merge` | {median['merge']:.2f} | "
              f"{median['merge'] / median['single']:.0%} of one convert |")
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
