#!/usr/bin/env bash
# The same data on every emulated device (`packrec bench --storage`), side by side: for each
# profile, loose files at random and each packed format in order and at random from a cold cache,
# against what the profile's limits give the reads that reached the device, and a cold epoch of
# the loader. Root only (loop device, mount, cgroup). Prints a Markdown table (docs/benchmarks.md).
#   sudo benchmarks/storage_profiles.sh BUILD TREE DATASET... [-- BENCH_FLAGS...]
#   e.g. sudo benchmarks/storage_profiles.sh build out/demo/tree out/demo/dataset.shard
set -euo pipefail
build=$1
shift
inputs=()
while (($#)) && [[ $1 != -- ]]; do
  inputs+=("$1")
  shift
done
[[ ${1:-} == -- ]] && shift
# The reports stay in $STORAGE_PROFILES_OUT when it is set (PROFILE.json, PROFILE.txt).
if [[ -n ${STORAGE_PROFILES_OUT:-} ]]; then
  work=$STORAGE_PROFILES_OUT
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
for profile in hdd sata-ssd nvme cloud-gp3; do
  echo "packrec bench ${inputs[*]} --quick --storage $profile $*" >&2
  "$build/tools/packrec" bench "${inputs[@]}" --quick --storage "$profile" --json "$work/$profile.json" \
    -q "$@" >"$work/$profile.txt"
done
python3 - "$work" <<'PY'
import json, sys

def cold(report, source, order, engine="threads", readers=1):
    for row in report["access"]:
        if (row["source"], row["order"], row["cache"], row["engine"], row["concurrency"]) == \
                (source, order, "cold", engine, readers):
            return row
    return None

def cell(row):
    if row is None or not row["limits_seconds"]:
        return "-"
    predicted = row["records"] / row["limits_seconds"]
    short = "*" if row["limits_seconds"] < 1 else ""
    return f"{row['records_per_s']:,.0f} / {predicted:,.0f}{short}"

print("| profile | loose files, random | " + " | ".join(
    f"{f}, in order | {f}, random" for f in ("shard", "lmdb", "hdf5")) +
      " | shard lead (limits) | epoch cold, global / windowed |")
print("|---" * 10 + "|")
for profile in ("hdd", "sata-ssd", "nvme", "cloud-gp3"):
    with open(f"{sys.argv[1]}/{profile}.json") as f:
        report = json.load(f)
    files = cold(report, "files", "random")
    cells = [cell(files)]
    for fmt in ("shard", "lmdb", "hdf5"):
        cells += [cell(cold(report, fmt, "sequential")), cell(cold(report, fmt, "random"))]
    shard = cold(report, "shard", "sequential")
    lead = "-"
    if files and shard and files["records_per_s"] and files["limits_seconds"] and shard["limits_seconds"]:
        implied = (shard["records"] / shard["limits_seconds"]) / (files["records"] / files["limits_seconds"])
        lead = f"{shard['records_per_s'] / files['records_per_s']:.1f}x ({implied:.1f}x)"
    epochs = [s for s in report["stages"] if s["stage"] == "epoch cold"]
    epoch = " / ".join(f"{s['images_per_s']:,.0f}" for s in epochs) or "-"
    print(f"| {profile} | " + " | ".join(cells) + f" | {lead} | {epoch} |")
PY
