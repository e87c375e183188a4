#!/usr/bin/env bash
# Import throughput (issue 10): packrec convert from each foreign source into shards against
# `cat` of the same source files (to /dev/null, and copied to a file + sync as a writing peer),
# warm cache, RUNS rounds alternating, medians; and the converter's peak RSS at 1x and 4x the
# images, to show it streams (RSS does not grow with the source).
# Usage: benchmarks/import_bench.sh [BUILD_DIR] [IMAGES] [RUNS]
set -euo pipefail
build=${1:-build-release}
images=${2:-4000}
runs=${3:-3}
packrec="$build/tools/packrec"
[[ -x $packrec ]] || { echo "build first: $packrec missing" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/packrec-import-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
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
sources=(wds tfrecord recordio mds caffe)
declare -A samples
for ((r = 0; r < runs; r++)); do
  for s in "${sources[@]}"; do
    mapfile -t files < <(source_files "$s" "$work/a")
    cat "${files[@]}" >/dev/null  # warm
    t0=$(now); cat "${files[@]}" >/dev/null; samples[$s.cat]+="$(echo "$(now) - $t0" | bc -l) "
    rm -f "$work/copy"; sync
    t0=$(now); cat "${files[@]}" >"$work/copy"; sync "$work/copy"
    samples[$s.copy]+="$(echo "$(now) - $t0" | bc -l) "
    rm -rf "$work/out"; sync
    # shellcheck disable=SC2046
    t0=$(now); "$packrec" convert "$work/a/$(basename "$(dirname "${files[0]}")")" "$work/out" \
      -q $(source_flags "$s") >/dev/null
    samples[$s.import]+="$(echo "$(now) - $t0" | bc -l) "
  done
done
rm -f "$work/copy"
bytes_of() { du -cb "$@" | tail -1 | cut -f1; }
echo "import throughput, $images images, warm cache, medians of $runs ($(nproc) cores)"
printf '%-9s %9s %10s %10s %10s %9s %9s\n' source MB "cat MB/s" "copy MB/s" "import MB/s" "vs cat" "vs copy"
for s in "${sources[@]}"; do
  mapfile -t files < <(source_files "$s" "$work/a")
  mb=$(echo "$(bytes_of "${files[@]}") / 1000000" | bc -l)
  cat_s=$(echo "${samples[$s.cat]}" | tr ' ' '\n' | grep . | median)
  copy_s=$(echo "${samples[$s.copy]}" | tr ' ' '\n' | grep . | median)
  import_s=$(echo "${samples[$s.import]}" | tr ' ' '\n' | grep . | median)
  printf '%-9s %9.1f %10.0f %10.0f %10.0f %8.2fx %8.2fx\n' "$s" "$mb" \
    "$(echo "$mb / $cat_s" | bc -l)" "$(echo "$mb / $copy_s" | bc -l)" \
    "$(echo "$mb / $import_s" | bc -l)" "$(echo "$cat_s / $import_s" | bc -l)" \
    "$(echo "$copy_s / $import_s" | bc -l)"
done

# Peak RSS: the same sources at 4x the images; a streaming import stays flat.
make_sources "$work/b" $((images * 4))
echo
echo "peak RSS of packrec convert (KiB): $images vs $((images * 4)) images"
for s in "${sources[@]}"; do
  rss=()
  for set in a b; do
    mapfile -t files < <(source_files "$s" "$work/$set")
    rm -rf "$work/out"
    # shellcheck disable=SC2046
    rss+=("$(/usr/bin/time -f %M "$packrec" convert "$work/$set/$(basename "$(dirname "${files[0]}")")" \
      "$work/out" -q $(source_flags "$s") 2>&1 >/dev/null | tail -1)")
  done
  mb_b=$(echo "$(bytes_of $(source_files "$s" "$work/b")) / 1000000" | bc -l)
  printf '%-9s %9s %9s   (source of %.0f MB at 4x)\n' "$s" "${rss[0]}" "${rss[1]}" "$mb_b"
done
