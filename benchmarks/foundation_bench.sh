#!/usr/bin/env bash
# Format benchmarks, side by side in one run on the same files:
#   1. pass-through conversion (packrec convert, which fsyncs) to shards and to LMDB vs `tar cf` +
#      sync of the same tree, and vs a straightforward python-lmdb script (when python3-lmdb is
#      installed)
#   2. warm sequential read of every record (packrec_read_bench) of each format vs `cat` of its
#      data files (whole process) and vs the same read() loop in a process (read loop only)
# Prints a markdown table of medians and ratios (> 1.0 means packrec is faster).
# Usage: benchmarks/foundation_bench.sh [BUILD_DIR] [IMAGES] [RUNS]
set -euo pipefail
build=${1:-build-release}
images=${2:-10000}
runs=${3:-5}
packrec="$build/tools/packrec"
read_bench="$build/benchmarks/packrec_read_bench"
[[ -x $packrec && -x $read_bench ]] || { echo "build first: $packrec or $read_bench missing" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/packrec-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Timestamps come from bash 5's $EPOCHREALTIME: no fork inside a timed span.
# shellcheck source=benchmarks/common.sh
source "$(dirname "$0")/common.sh"

classes=20
"$packrec" synth "$work/tree" --classes $classes --per-class $((images / classes)) --seed 1 >/dev/null
tree_bytes=$(du -sb "$work/tree" | cut -f1)
find "$work/tree" -type f -exec cat {} + >/dev/null  # warm the page cache for both contenders

python=/usr/bin/python3  # Debian's, which has python3-lmdb
have_python_lmdb=0 have_h5py=0
"$python" -c "import lmdb" 2>/dev/null && have_python_lmdb=1
"$python" -c "import h5py" 2>/dev/null && have_h5py=1

tar_times=() convert_times=() lmdb_times=() pylmdb_times=() hdf5_times=() h5py_times=()
for ((r = 0; r < runs; r++)); do
  rm -f "$work/tree.tar"; sync
  t0=$EPOCHREALTIME; tar cf "$work/tree.tar" -C "$work" tree; sync; t1=$EPOCHREALTIME
  tar_times+=("$(echo "$t1 - $t0" | bc -l)")
  rm -rf "$work/ds"; sync
  t0=$EPOCHREALTIME; "$packrec" convert "$work/tree" "$work/ds" --quiet --threads 2 >/dev/null; sync; t1=$EPOCHREALTIME
  convert_times+=("$(echo "$t1 - $t0" | bc -l)")
  rm -rf "$work/db"; sync
  t0=$EPOCHREALTIME; "$packrec" convert "$work/tree" "$work/db" --format lmdb --quiet --threads 2 >/dev/null; sync; t1=$EPOCHREALTIME
  lmdb_times+=("$(echo "$t1 - $t0" | bc -l)")
  rm -f "$work/data.h5"; sync
  t0=$EPOCHREALTIME; "$packrec" convert "$work/tree" "$work/data.h5" --format hdf5 --quiet --threads 2 >/dev/null; sync; t1=$EPOCHREALTIME
  hdf5_times+=("$(echo "$t1 - $t0" | bc -l)")
  if ((have_h5py)); then
    rm -f "$work/py.h5"; sync
    t0=$EPOCHREALTIME; "$python" "$(dirname "$0")/python_h5py_baseline.py" "$work/tree" "$work/py.h5"; sync; t1=$EPOCHREALTIME
    h5py_times+=("$(echo "$t1 - $t0" | bc -l)")
  fi
  if ((have_python_lmdb)); then
    rm -rf "$work/pydb"; sync
    t0=$EPOCHREALTIME; "$python" "$(dirname "$0")/python_lmdb_baseline.py" "$work/tree" "$work/pydb"; sync; t1=$EPOCHREALTIME
    pylmdb_times+=("$(echo "$t1 - $t0" | bc -l)")
  fi
done
tar_s=$(printf '%s\n' "${tar_times[@]}" | median)
convert_s=$(printf '%s\n' "${convert_times[@]}" | median)
lmdb_s=$(printf '%s\n' "${lmdb_times[@]}" | median)
hdf5_s=$(printf '%s\n' "${hdf5_times[@]}" | median)


mb() { echo "scale=1; $1 / 1000000 / $2" | bc -l; }
ratio() { echo "scale=2; $1 / $2" | bc -l; }

# Warm sequential read of every record, per format, alternating with its baselines:
#   whole process: `cat FILES` vs `packrec_read_bench DATASET` (checksums on), process start and
#     open included (packrec's start loads libhdf5 and its ~40 shared libraries, ~20 ms here);
#   read loop: the same read() loop as cat inside a process (`packrec_read_bench --raw FILES`) vs
#     packrec's ForEach, checksums off (every byte still touched) and on; open not included.
read_rows=()
bench_reads() {  # NAME DATASET FILES...
  local name=$1 dataset=$2; shift 2
  local bytes; bytes=$(cat "$@" | wc -c)
  cat "$@" >/dev/null
  local cat_t=() whole_t=() raw_t=() off_t=() on_t=()
  for ((r = 0; r < runs; r++)); do
    t0=$EPOCHREALTIME; cat "$@" >/dev/null; t1=$EPOCHREALTIME
    cat_t+=("$(echo "$t1 - $t0" | bc -l)")
    t0=$EPOCHREALTIME; "$read_bench" "$dataset" >"$work/read.out"; t1=$EPOCHREALTIME
    whole_t+=("$(echo "$t1 - $t0" | bc -l)")
    on_t+=("$(sed 's/.* seconds=\([0-9.]*\).*/\1/' "$work/read.out")")
    "$read_bench" --raw "$@" >"$work/raw.out"
    raw_t+=("$(sed 's/.* seconds=\([0-9.]*\).*/\1/' "$work/raw.out")")
    "$read_bench" "$dataset" --no-verify >"$work/read.out"
    off_t+=("$(sed 's/.* seconds=\([0-9.]*\).*/\1/' "$work/read.out")")
  done
  local cat_s whole_s raw_s off_s on_s
  cat_s=$(printf '%s\n' "${cat_t[@]}" | median)
  whole_s=$(printf '%s\n' "${whole_t[@]}" | median)
  raw_s=$(printf '%s\n' "${raw_t[@]}" | median)
  off_s=$(printf '%s\n' "${off_t[@]}" | median)
  on_s=$(printf '%s\n' "${on_t[@]}" | median)
  read_rows+=("| $name: read loop, checksums off | read() loop as cat, in process | $raw_s | $off_s | $(ratio "$raw_s" "$off_s")x ($(mb "$bytes" "$off_s") MB/s vs $(mb "$bytes" "$raw_s") MB/s) |")
  read_rows+=("| $name: read loop, checksums on | read() loop as cat, in process | $raw_s | $on_s | $(ratio "$raw_s" "$on_s")x ($(mb "$bytes" "$on_s") MB/s) |")
  read_rows+=("| $name: whole process, checksums on | cat | $cat_s | $whole_s | $(ratio "$cat_s" "$whole_s")x ($(mb "$bytes" "$whole_s") MB/s vs $(mb "$bytes" "$cat_s") MB/s) |")
}
bench_reads shards "$work/ds" "$work"/ds/shard-*.pkr
bench_reads LMDB "$work/db" "$work/db/data.mdb"
bench_reads HDF5 "$work/data.h5" "$work/data.h5"

echo "images: $images ($(echo "scale=1; $tree_bytes / 1048576" | bc) MiB), runs: $runs (median), $(nproc) cores, $(uname -r)"
echo
echo "| workload | baseline | baseline s | packrec s | packrec / baseline throughput |"
echo "|---|---|---|---|---|"
echo "| pass-through convert to shards (fsync) | tar cf + sync | $tar_s | $convert_s | $(ratio "$tar_s" "$convert_s")x ($(mb "$tree_bytes" "$convert_s") MB/s vs $(mb "$tree_bytes" "$tar_s") MB/s) |"
echo "| pass-through convert to LMDB (fsync) | tar cf + sync | $tar_s | $lmdb_s | $(ratio "$tar_s" "$lmdb_s")x ($(mb "$tree_bytes" "$lmdb_s") MB/s) |"
echo "| pass-through convert to HDF5 (fsync) | tar cf + sync | $tar_s | $hdf5_s | $(ratio "$tar_s" "$hdf5_s")x ($(mb "$tree_bytes" "$hdf5_s") MB/s) |"
if ((have_h5py)); then
  h5py_s=$(printf '%s\n' "${h5py_times[@]}" | median)
  echo "| pass-through convert to HDF5 | h5py vlen-uint8 script (benchmarks/python_h5py_baseline.py) + sync | $h5py_s | $hdf5_s | $(ratio "$h5py_s" "$hdf5_s")x |"
fi
if ((have_python_lmdb)); then
  pylmdb_s=$(printf '%s\n' "${pylmdb_times[@]}" | median)
  echo "| pass-through convert to LMDB | python-lmdb script (benchmarks/python_lmdb_baseline.py) + sync | $pylmdb_s | $lmdb_s | $(ratio "$pylmdb_s" "$lmdb_s")x |"
fi
printf '%s\n' "${read_rows[@]}"
