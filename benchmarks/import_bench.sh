#!/usr/bin/env bash
# Import throughput (issue 10): packrec convert from each foreign source into shards against
# `cat` of the same source files to /dev/null and copied to a file beside the output (`cat >
# FILE`: the least a converter must do, read and write the bytes), side by side, RUNS rounds
# alternating, medians:
# cold (the source's pages evicted with posix_fadvise(DONTNEED) before each read: the storage's
# speed) and warm (page cache: memory bandwidth, where cat does nothing but copy). Sources live
# in TMPDIR (the storage measured); outputs go to OUT_TMP (default /dev/shm) so the import's own
# writes do not share that disk. Then the converter's peak anonymous memory (RssAnon, sampled
# every 5 ms; file-backed mapped pages are page cache, not the converter's) at 1x and 4x the
# images: a streaming import stays flat.
# Usage: [TMPDIR=/data] [OUT_TMP=/dev/shm] benchmarks/import_bench.sh [BUILD_DIR] [IMAGES] [RUNS]
set -euo pipefail
build=${1:-build-release}
images=${2:-4000}
runs=${3:-3}
packrec="$build/tools/packrec"
[[ -x $packrec ]] || { echo "build first: $packrec missing" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/packrec-import-bench.XXXXXX")
out_dir=$(mktemp -d "${OUT_TMP:-/dev/shm}/packrec-import-out.XXXXXX")
trap 'rm -rf "$work" "$out_dir"' EXIT
# shellcheck source=benchmarks/common.sh
source "$here/common.sh"
# Peak RssAnon (KiB) of a command, sampled from /proc every 5 ms.
peak_anon() {
  "$@" >/dev/null 2>&1 &
  local pid=$! peak=0 now_kib
  while kill -0 "$pid" 2>/dev/null; do
    now_kib=$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    ((${now_kib:-0} > peak)) && peak=$now_kib
    sleep 0.005
  done
  wait "$pid"
  echo "$peak"
}
now() { date +%s.%N; }

make_sources() {  # DIR IMAGES
  local dir=$1 n=$2
  "$packrec" synth "$dir/tree" --classes 20 --per-class $((n / 20)) --seed 5 >/dev/null
  for format in wds tfrecord recordio; do
    "$packrec" convert "$dir/tree" "$dir/$format" --format "$format" --shard-size 64MiB -q
  done
  "$packrec" convert "$dir/tree" "$dir/caffe" --format lmdb --lmdb-values caffe-datum -q
  /usr/bin/python3 "$here/make_mds.py" "$dir/tree" "$dir/mds"
}
# The files a source is read from, for cat.
source_files() {
  case $1 in
    wds) ls "$2"/wds/*.tar ;;
    tfrecord) ls "$2"/tfrecord/*.tfrecord ;;
    recordio) ls "$2"/recordio/*.rec ;;
    mds) ls "$2"/mds/*.mds ;;
    caffe) echo "$2/caffe/data.mdb" ;;
  esac
}
source_flags() { [[ $1 == caffe ]] && echo "--from caffe-lmdb" || true; }

make_sources "$work/a" "$images"
# The same sources at 4x the images (about 1 GB each): timed too, since at 250 MB the start and
# finish of a run weigh on it and the host may still hold a small source in its own cache; and
# the peak memory check below.
make_sources "$work/b" $((images * 4))
sources=(wds tfrecord recordio mds caffe)
time_it() { local t0; t0=$(now); "$@" >/dev/null; echo "$(now) - $t0" | bc -l; }
import_cmd() {  # SOURCE SET
  local -a files
  mapfile -t files < <(source_files "$1" "$work/$2")
  rm -rf "$out_dir/out"
  # shellcheck disable=SC2046
  echo "$packrec" convert "$(dirname "${files[0]}")" "$out_dir/out" -q $(source_flags "$1")
}
bytes_of() { du -cb "$@" | tail -1 | cut -f1; }
time_set() {  # SET IMAGES
  local set=$1 count=$2 r s mb
  local -A samples
  local -a files import
  for ((r = 0; r < runs; r++)); do
    for s in "${sources[@]}"; do
      mapfile -t files < <(source_files "$s" "$work/$set")
      read -r -a import < <(import_cmd "$s" "$set")
      evict "${files[@]}"; samples[$s.cat_cold]+="$(time_it cat "${files[@]}") "
      evict "${files[@]}"; rm -f "$out_dir/copy"
      samples[$s.copy_cold]+="$(time_it sh -c 'cat "$@" >"$0"' "$out_dir/copy" "${files[@]}") "
      rm -f "$out_dir/copy"
      evict "${files[@]}"; rm -rf "$out_dir/out"; samples[$s.import_cold]+="$(time_it "${import[@]}") "
      cat "${files[@]}" >/dev/null
      samples[$s.cat_warm]+="$(time_it cat "${files[@]}") "
      rm -rf "$out_dir/out"; samples[$s.import_warm]+="$(time_it "${import[@]}") "
    done
  done
  med() { echo "${samples[$1]}" | tr ' ' '\n' | grep . | median; }
  echo "import throughput, $count images, medians of $runs ($(nproc) cores); sources in $work/$set, outputs in $out_dir"
  printf '%-9s %7s | %9s %9s %11s %7s %7s | %9s %11s %7s\n' source MB "cold cat" "cold copy" \
    "cold import" "/cat" "/copy" "warm cat" "warm import" "/cat"
  for s in "${sources[@]}"; do
    mapfile -t files < <(source_files "$s" "$work/$set")
    mb=$(echo "$(bytes_of "${files[@]}") / 1000000" | bc -l)
    printf '%-9s %7.1f | %7.0f/s %7.0f/s %9.0f/s %6.2fx %6.2fx | %7.0f/s %9.0f/s %6.2fx   (MB/s)\n' \
      "$s" "$mb" "$(echo "$mb / $(med "$s.cat_cold")" | bc -l)" \
      "$(echo "$mb / $(med "$s.copy_cold")" | bc -l)" "$(echo "$mb / $(med "$s.import_cold")" | bc -l)" \
      "$(echo "$(med "$s.cat_cold") / $(med "$s.import_cold")" | bc -l)" \
      "$(echo "$(med "$s.copy_cold") / $(med "$s.import_cold")" | bc -l)" \
      "$(echo "$mb / $(med "$s.cat_warm")" | bc -l)" "$(echo "$mb / $(med "$s.import_warm")" | bc -l)" \
      "$(echo "$(med "$s.cat_warm") / $(med "$s.import_warm")" | bc -l)"
  done
}
time_set a "$images"
echo
time_set b $((images * 4))

# Peak memory: the same sources at 4x the images; a streaming import stays flat.
echo
echo "peak RssAnon of packrec convert (KiB): $images vs $((images * 4)) images"
for s in "${sources[@]}"; do
  rss=()
  for set in a b; do
    read -r -a import < <(import_cmd "$s" "$set")
    rss+=("$(peak_anon "${import[@]}")")
  done
  mb_b=$(echo "$(bytes_of $(source_files "$s" "$work/b")) / 1000000" | bc -l)
  printf '%-9s %9s %9s   (source of %.0f MB at 4x)\n' "$s" "${rss[0]}" "${rss[1]}" "$mb_b"
done
