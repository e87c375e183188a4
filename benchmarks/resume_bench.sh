#!/usr/bin/env bash
# Mid-epoch resumption (issue 9): the time to resume at 90% of an epoch of a 50,000-record
# dataset against the time to read that 90%, same run, same dataset, for read-only batches
# (transform none) and decoded ones (eval), RUNS times each; medians.
# Usage: benchmarks/resume_bench.sh [BUILD_DIR] [RECORDS] [RUNS] [WIDTH HEIGHT OUTPUT_SIZE]
set -euo pipefail
build=${1:-build-release}
records=${2:-50000}
runs=${3:-3}
width=${4:-96}
height=${5:-84}
size=${6:-64}
packrec="$build/tools/packrec"
bench="$build/benchmarks/packrec_resume_bench"
[[ -x $packrec && -x $bench ]] || { echo "build first: $packrec or $bench missing" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/packrec-resume-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=benchmarks/common.sh
source "$(dirname "$0")/common.sh"
field() { sed -n "s/^\(.* \)\{0,1\}$1=\([0-9.a-z]*\).*/\2/p"; }

# Small images by default (about 96 x 84), so that 50,000 of them synthesise and convert in
# seconds here.
"$packrec" synth "$work/tree" --classes 100 --per-class $((records / 100)) --seed 9 \
  --width "$width" --height "$height" >/dev/null
"$packrec" convert "$work/tree" "$work/ds" -q >/dev/null
rm -rf "$work/tree"
cat "$work"/ds/* >/dev/null  # warm: both sides read from the page cache

printf '%-10s %8s %10s %14s %16s %13s %14s %16s %11s\n' transform records "read 90%" "resume" \
  "resume+batch" "resume/read" "+batch/read" "fresh 1st batch" "same batch"
for transform in none eval; do
  lines=()
  for ((r = 0; r < runs; r++)); do
    lines+=("$("$bench" "$work/ds" --transform "$transform" --threads 2 --batch 256 --size "$size")")
  done
  m() { printf '%s\n' "${lines[@]}" | field "$1" | median; }
  same=$(printf '%s\n' "${lines[@]}" | field same_next_batch | sort -u | tr '\n' ' ')
  printf '%-10s %8s %9.3fs %13.6fs %15.6fs %12.3f%% %13.3f%% %15.6fs %11s\n' "$transform" \
    "$(m records)" "$(m read_seconds)" "$(m resume_seconds)" "$(m resume_first_batch_seconds)" \
    "$(echo "$(m resume_share) * 100" | bc -l)" "$(echo "$(m first_batch_share) * 100" | bc -l)" \
    "$(m start_first_batch_seconds)" "$same"
done
echo "resume/read: creating the loader at the saved position / reading the 90% it skips;"
echo "+batch/read: the same plus its first batch (which the uninterrupted run reads too);"
echo "fresh 1st batch: a new loader's first batch at the start of the epoch, for comparison"
printf 'order lookup by position (global shuffle): %s ns/record at 1.28M records, %s ns at 2e9\n' \
  "$(m lookup_ns_1281167)" "$(m lookup_ns_2000000000)"
