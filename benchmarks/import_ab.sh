#!/usr/bin/env bash
# Two packrec binaries importing the same sources, alternating, medians: the side-by-side check for
# a change to the import (docs/benchmarks.md, issue 10). Warm (page cache), or with COLD=1 the
# source's pages evicted (posix_fadvise DONTNEED) before every run, `cat` of the same files timed
# the same way beside them. Sources as import_bench.sh makes them (IMAGES synthetic images as wds,
# tfrecord, recordio, MDS and a Caffe LMDB); outputs in OUT_TMP (default /dev/shm). Extra
# arguments go to every `packrec convert`, e.g. `--resize-short 64 --quality 85` for an import
# that re-encodes.
# With PERF=1 it also runs each binary once per source under `perf record` and prints the CPU
# seconds of every thread (named: packrec-read, -prep, -wbehind, -fetch; the main thread lays
# out the output; the write-behind threads, one per output file in turn, are summed) and the
# source MB/s its busiest thread would allow alone: on a machine with
# cores to spare, the import's ceiling, which a 2-core VM cannot show by timing.
# With WDS_EXTRA_KB=N every wds sample also carries a 200-byte `txt` and an N KiB `npy` member
# (benchmarks/add_wds_members.py), which no record is made from.
# Usage: benchmarks/import_ab.sh OLD_PACKREC NEW_PACKREC [IMAGES] [RUNS] [-- CONVERT_FLAGS...]
set -euo pipefail
old=$1 new=$2
images=${3:-8000}
runs=${4:-5}
shift $(($# < 4 ? $# : 4))
[[ ${1:-} == -- ]] && shift
for binary in "$old" "$new"; do [[ -x $binary ]] || { echo "not executable: $binary" >&2; exit 2; }; done
work=$(mktemp -d "${TMPDIR:-/tmp}/packrec-import-ab.XXXXXX")
out=$(mktemp -d "${OUT_TMP:-/dev/shm}/packrec-import-ab-out.XXXXXX")
trap 'rm -rf "$work" "$out"' EXIT
"$new" synth "$work/tree" --classes 20 --per-class $((images / 20)) --seed 5 >/dev/null
for format in wds tfrecord recordio; do
  "$new" convert "$work/tree" "$work/$format" --format "$format" --shard-size 64MiB -q >/dev/null
done
"$new" convert "$work/tree" "$work/caffe" --format lmdb --lmdb-values caffe-datum -q >/dev/null
python3 "$(dirname "$0")/make_mds.py" "$work/tree" "$work/mds"
if [[ -n ${WDS_EXTRA_KB:-} ]]; then
  python3 "$(dirname "$0")/add_wds_members.py" "$work/wds" "$work/wds-extra" "$WDS_EXTRA_KB"
  rm -rf "$work/wds"
  mv "$work/wds-extra" "$work/wds"
fi
# shellcheck source=benchmarks/common.sh
source "$(dirname "$0")/common.sh"
# CPU seconds per thread of one import (perf samples at 4 kHz) and the busiest thread's ceiling.
threads() {
  local binary=$1 source=$2
  shift 2
  rm -rf "$out/p"
  perf record -q -o "$work/perf.data" -F 4000 "$binary" convert "$work/$source" "$out/p" -q "$@" \
    >/dev/null 2>&1
  perf report -i "$work/perf.data" --no-children -g none --sort pid --stdio -n 2>/dev/null |
    awk -v mb="$(du -sm --apparent-size "$work/$source" | cut -f1)" '/^ +[0-9]/ {
      sub(/^[0-9]+:/, "", $3); s = $2 / 4000; total += s
      # One write-behind thread per output file, one file after the other: one stage.
      if ($3 == "packrec-wbehind") { behind += s; next }
      if (s > max) max = s
      line = line sprintf(" %s %.3f", $3, s) }
      END { if (behind > 0) line = line sprintf(" packrec-wbehind(all files) %.3f", behind)
            if (behind > max) max = behind
            printf "cpu s:%s; total %.3f, busiest %.3f -> %.0f MB/s\n", line, total, max, mb / max }'
}
mode=warm
[[ ${COLD:-0} == 1 ]] && mode=cold
echo "$mode import, $images images, medians of $runs alternating runs ($(nproc) cores); flags: ${*:-none}"
for source in wds tfrecord recordio mds caffe; do
  from=()
  [[ $source == caffe ]] && from=(--from caffe-lmdb)
  mapfile -t files < <(find "$work/$source" -name '*.tar' -o -name '*.tfrecord' -o -name '*.rec' \
    -o -name '*.mds' -o -name data.mdb | sort)
  declare -A times=([cat]="" [old]="" [new]="")
  for ((r = 0; r < runs; r++)); do
    for which in cat old new; do
      [[ $mode == cold ]] && evict "${files[@]}"
      [[ $mode == warm && $which == cat ]] && continue
      binary=$old
      [[ $which == new ]] && binary=$new
      rm -rf "$out/o"
      start=$(date +%s.%N)
      if [[ $which == cat ]]; then
        cat "${files[@]}" >/dev/null
      else
        "$binary" convert "$work/$source" "$out/o" -q "${from[@]}" "$@" >/dev/null
      fi
      times[$which]+="$(echo "$(date +%s.%N) - $start" | bc -l) "
    done
  done
  o=$(echo "${times[old]}" | tr ' ' '\n' | grep . | median)
  n=$(echo "${times[new]}" | tr ' ' '\n' | grep . | median)
  printf '%-9s old %7.3f s   new %7.3f s   old/new %5.2fx' "$source" "$o" "$n" "$(echo "$o / $n" | bc -l)"
  if [[ $mode == cold ]]; then
    c=$(echo "${times[cat]}" | tr ' ' '\n' | grep . | median)
    printf '   cat %7.3f s   cat/old %5.2fx   cat/new %5.2fx' "$c" "$(echo "$c / $o" | bc -l)" \
      "$(echo "$c / $n" | bc -l)"
  fi
  echo
  if [[ ${PERF:-0} == 1 ]]; then
    echo "  old $(threads "$old" "$source" "${from[@]}" "$@")"
    echo "  new $(threads "$new" "$source" "${from[@]}" "$@")"
  fi
done
