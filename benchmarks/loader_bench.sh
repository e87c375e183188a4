#!/usr/bin/env bash
# Decode and loader benchmarks, side by side in one run on the same files (issue 4):
#   1. one-thread JPEG decode of a typical file vs tjbench (libjpeg-turbo's own benchmark)
#   2. the loader (train: RandomResizedCrop 224 + flip; eval: resize 256 + center crop 224;
#      uint8 batches of 256, 2 threads) vs torchvision ImageFolder + DataLoader(num_workers=2)
#      with the standard transforms, both timed over the epochs after the first
#   3. the loader vs decode alone on the same threads (what I/O, batching and copies cost)
#   4. the loader's peak RSS vs prefetch x batch bytes + 100 MiB
# Installs what it compares against (libjpeg-turbo-progs, python3-torchvision) when missing.
# Usage: benchmarks/loader_bench.sh [BUILD_DIR] [IMAGES] [RUNS]
set -euo pipefail
build=${1:-build-release}
images=${2:-2000}
runs=${3:-3}
packrec="$build/tools/packrec"
bench="$build/benchmarks/packrec_loader_bench"
[[ -x $packrec && -x $bench ]] || { echo "build first: $packrec or $bench missing" >&2; exit 2; }
missing=()
command -v tjbench >/dev/null || missing+=(libjpeg-turbo-progs)
/usr/bin/python3 -c "import torchvision" 2>/dev/null || missing+=(python3-torchvision)
if ((${#missing[@]})); then
  sudo=(); ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/packrec-loader-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=benchmarks/common.sh
source "$(dirname "$0")/common.sh"
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
ratio() { echo "scale=2; $1 / $2" | bc -l; }

"$packrec" synth "$work/tree" --classes 10 --per-class $((images / 10)) --seed 3 >/dev/null
"$packrec" convert "$work/tree" "$work/ds" -q >/dev/null
find "$work/tree" -type f -exec cat {} + >/dev/null
# The typical file: the median size.
typical=$(find "$work/tree" -type f -printf '%s %p\n' | sort -n | awk '{a[NR]=$2} END {print a[int((NR+1)/2)]}')

declare -A samples
add() { samples[$1]+="$2 "; }
for ((r = 0; r < runs; r++)); do
  add tjbench "$(tjbench "$typical" -rgb -benchtime 3 -warmup 1 -quiet 2>/dev/null | awk 'NF {v=$NF} END {print v}')"
  add decode "$("$bench" decode "$typical" --seconds 3 | field mpixels_per_s)"
  for t in train eval; do
    add "decode-only-$t" "$("$bench" decode-only "$work/ds" --transform $t --threads 2 | field images_per_s)"
    out=$("$bench" loader "$work/ds" --transform $t --threads 2 --batch 256 --prefetch 4 --epochs 3)
    add "loader-$t" "$(echo "$out" | field images_per_s)"
    add "rss-$t" "$(echo "$out" | field peak_rss_mib)"
    budget=$(echo "$out" | field rss_budget_mib)
    add "torch-$t" "$(/usr/bin/python3 "$(dirname "$0")/torchvision_baseline.py" "$work/tree" $t 2 256 3 | field images_per_s)"
  done
done
m() { printf '%s\n' ${samples[$1]} | median; }

echo "images: $images, typical file $(stat -c %s "$typical") bytes ($(identify -format '%wx%h' "$typical" 2>/dev/null || echo JPEG)), runs: $runs (median), $(nproc) cores, $(uname -r)"
echo
echo "| workload | baseline | baseline | packrec | packrec / baseline |"
echo "|---|---|---|---|---|"
echo "| decode one JPEG to RGB, 1 thread (Mpixels/s) | tjbench -rgb | $(m tjbench) | $(m decode) | $(ratio "$(m decode)" "$(m tjbench)")x |"
for t in train eval; do
  echo "| $t pipeline, uint8 batches of 256, 2 threads (images/s) | torchvision ImageFolder + DataLoader(num_workers=2) | $(m torch-$t) | $(m loader-$t) | $(ratio "$(m loader-$t)" "$(m torch-$t)")x |"
  echo "| $t: loader vs decode alone, 2 threads (images/s) | read + decode every record, no batches | $(m decode-only-$t) | $(m loader-$t) | $(ratio "$(m loader-$t)" "$(m decode-only-$t)")x |"
  echo "| $t: loader peak RSS (MiB) | budget: prefetch x batch bytes + 100 MiB | $budget | $(m rss-$t) | $(ratio "$(m rss-$t)" "$budget")x of budget |"
done
