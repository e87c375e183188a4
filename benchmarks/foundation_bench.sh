#!/usr/bin/env bash
# Format benchmarks, side by side in one run on the same files:
#   1. pass-through conversion (packrec convert, which fsyncs) to shards and to LMDB vs `tar cf` +
#      sync of the same tree, and vs a straightforward python-lmdb script (when python3-lmdb is
#      installed)
#   2. warm sequential read of every record (packrec_read_bench) vs `cat` of the data files
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
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

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

shard_bytes=$(cat "$work"/ds/shard-*.pkr | wc -c)
cat "$work"/ds/shard-*.pkr >/dev/null
lmdb_bytes=$(wc -c <"$work/db/data.mdb")
cat "$work/db/data.mdb" >/dev/null
hdf5_bytes=$(wc -c <"$work/data.h5")
cat "$work/data.h5" >/dev/null
cath5_times=() readh5_times=()
cat_times=() read_times=() inner_times=() raw_times=() catdb_times=() readdb_times=()
for ((r = 0; r < runs; r++)); do
  t0=$EPOCHREALTIME; cat "$work"/ds/shard-*.pkr >/dev/null; t1=$EPOCHREALTIME
  cat_times+=("$(echo "$t1 - $t0" | bc -l)")
  t0=$EPOCHREALTIME; "$read_bench" "$work/ds" >"$work/read.out"; t1=$EPOCHREALTIME
  read_times+=("$(echo "$t1 - $t0" | bc -l)")
  inner_times+=("$(sed 's/.* seconds=\([0-9.]*\).*/\1/' "$work/read.out")")
  t0=$EPOCHREALTIME; "$read_bench" "$work/ds" --no-verify >/dev/null; t1=$EPOCHREALTIME
  raw_times+=("$(echo "$t1 - $t0" | bc -l)")
  t0=$EPOCHREALTIME; cat "$work/db/data.mdb" >/dev/null; t1=$EPOCHREALTIME
  catdb_times+=("$(echo "$t1 - $t0" | bc -l)")
  t0=$EPOCHREALTIME; "$read_bench" "$work/db" >/dev/null; t1=$EPOCHREALTIME
  readdb_times+=("$(echo "$t1 - $t0" | bc -l)")
  t0=$EPOCHREALTIME; cat "$work/data.h5" >/dev/null; t1=$EPOCHREALTIME
  cath5_times+=("$(echo "$t1 - $t0" | bc -l)")
  t0=$EPOCHREALTIME; "$read_bench" "$work/data.h5" >/dev/null; t1=$EPOCHREALTIME
  readh5_times+=("$(echo "$t1 - $t0" | bc -l)")
done
cat_s=$(printf '%s\n' "${cat_times[@]}" | median)
read_s=$(printf '%s\n' "${read_times[@]}" | median)
inner_s=$(printf '%s\n' "${inner_times[@]}" | median)
raw_s=$(printf '%s\n' "${raw_times[@]}" | median)
catdb_s=$(printf '%s\n' "${catdb_times[@]}" | median)
readdb_s=$(printf '%s\n' "${readdb_times[@]}" | median)
cath5_s=$(printf '%s\n' "${cath5_times[@]}" | median)
readh5_s=$(printf '%s\n' "${readh5_times[@]}" | median)

mb() { echo "scale=1; $1 / 1000000 / $2" | bc -l; }
ratio() { echo "scale=2; $1 / $2" | bc -l; }
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
echo "| warm sequential read of every record, checksums off (whole process) | cat shards | $cat_s | $raw_s | $(ratio "$cat_s" "$raw_s")x ($(mb "$shard_bytes" "$raw_s") MB/s vs $(mb "$shard_bytes" "$cat_s") MB/s) |"
echo "| warm sequential read, checksums on (whole process) | cat shards | $cat_s | $read_s | $(ratio "$cat_s" "$read_s")x ($(mb "$shard_bytes" "$read_s") MB/s vs $(mb "$shard_bytes" "$cat_s") MB/s) |"
echo "| LMDB: warm sequential read of every record, checksums on (whole process) | cat data.mdb | $catdb_s | $readdb_s | $(ratio "$catdb_s" "$readdb_s")x ($(mb "$lmdb_bytes" "$readdb_s") MB/s vs $(mb "$lmdb_bytes" "$catdb_s") MB/s) |"
echo "| HDF5: warm sequential read of every record, checksums on (whole process) | cat data.h5 | $cath5_s | $readh5_s | $(ratio "$cath5_s" "$readh5_s")x ($(mb "$hdf5_bytes" "$readh5_s") MB/s vs $(mb "$hdf5_bytes" "$cath5_s") MB/s) |"
echo "| warm sequential read, checksums on (read loop only, no process start or open) | cat shards | $cat_s | $inner_s | $(ratio "$cat_s" "$inner_s")x ($(mb "$shard_bytes" "$inner_s") MB/s) |"
