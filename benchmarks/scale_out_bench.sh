#!/usr/bin/env bash
# Partitioned conversion (issue 8): one convert on all cores against N parts converted at the
# same time (cores shared out), then the merge, on the same warm tree, RUNS rounds; medians.
# Usage: [CONVERT_FLAGS='--resize-short 160'] benchmarks/scale_out_bench.sh [BUILD_DIR] [IMAGES] [RUNS]
set -euo pipefail
build=${1:-build-release}
images=${2:-4000}
runs=${3:-3}
read -r -a flags <<<"${CONVERT_FLAGS:-}"
packrec="$build/tools/packrec"
[[ -x $packrec ]] || { echo "build first: $packrec missing" >&2; exit 2; }
cores=$(nproc)
work=$(mktemp -d "${TMPDIR:-/tmp}/packrec-scale-out-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=benchmarks/common.sh
source "$(dirname "$0")/common.sh"
now() { date +%s.%N; }

"$packrec" synth "$work/tree" --classes 20 --per-class $((images / 20)) --seed 5 >/dev/null
bytes=$(du -sb "$work/tree" | cut -f1)
find "$work/tree" -type f -exec cat {} + >/dev/null  # warm: every run reads from page cache

declare -A samples
add() { samples[$1]+="$2 "; }
for ((r = 0; r < runs; r++)); do
  rm -rf "$work/single" "$work/parts" "$work/merged"
  sync  # every timed step starts with no earlier write still being flushed
  t0=$(now)
  "$packrec" convert "$work/tree" "$work/single" -q --threads "$cores" "${flags[@]}" >/dev/null
  add single "$(echo "$(now) - $t0" | bc -l)"
  for parts in 1 2; do
    rm -rf "$work/parts" "$work/merged"
    threads=$(( cores / parts > 0 ? cores / parts : 1 ))
    sync
    t0=$(now)
    pids=()
    for ((i = 0; i < parts; i++)); do
      "$packrec" convert "$work/tree" "$work/parts" --part "$i/$parts" -q --threads "$threads" \
        "${flags[@]}" >/dev/null &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    sync
    t1=$(now)
    "$packrec" merge "$work/merged" "$work/parts" >/dev/null
    t2=$(now)
    add "parts$parts" "$(echo "$t1 - $t0" | bc -l)"
    add "merge$parts" "$(echo "$t2 - $t1" | bc -l)"
    cmp -s "$work/single/manifest.json" "$work/merged/manifest.json" || {
      echo "merged manifest differs from the single conversion" >&2; exit 1; }
  done
done
m() { printf '%s\n' ${samples[$1]} | median; }
printf '%s images, %s MB, %s cores, warm page cache, medians of %s, convert flags: %s\n' \
  "$images" "$((bytes / 1000000))" "$cores" "$runs" "${CONVERT_FLAGS:-none}"
printf '%-34s %10s %12s %10s\n' run seconds images/s "vs single"
single=$(m single)
printf '%-34s %10.2f %12.0f %10s\n' "convert (one process, $cores threads)" "$single" \
  "$(echo "$images / $single" | bc -l)" 1.00x
for parts in 1 2; do
  p=$(m "parts$parts"); g=$(m "merge$parts")
  printf '%-34s %10.2f %12.0f %9.2fx\n' "$parts part(s) at once, $((cores / parts)) thread(s) each" \
    "$p" "$(echo "$images / $p" | bc -l)" "$(echo "$single / $p" | bc -l)"
  printf '%-34s %10.2f %12.0f %10s\n' "  then merge ($parts part(s))" "$g" \
    "$(echo "$images / $g" | bc -l)" "$(echo "scale=0; $bytes / 1000000 / $g" | bc -l) MB/s"
done
