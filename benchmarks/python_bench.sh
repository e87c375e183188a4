#!/usr/bin/env bash
# Issue 7's benchmark, side by side in one run on the same tree: the train pipeline
# (RandomResizedCrop 224 + flip, batches of 256) with 2 threads/workers through
#   1. packrec's C++ loader (benchmarks/loader_bench.cc)
#   2. packrec.Loader from Python, batches as torch tensors (benchmarks/python_loader.py)
#   3. torchvision ImageFolder + DataLoader(num_workers=2) (benchmarks/torchvision_baseline.py)
# each timed over the epochs after the first; rounds alternate, medians reported.
# Usage: benchmarks/python_bench.sh [BUILD_DIR] [IMAGES] [ROUNDS] [WORKERS]
set -euo pipefail
build=${1:-build-release}
images=${2:-2000}
rounds=${3:-3}
workers=${4:-2}
here=$(cd "$(dirname "$0")" && pwd)
packrec="$build/tools/packrec"
bench="$build/benchmarks/packrec_loader_bench"
[[ -x $packrec && -x $bench && -d $build/python/packrec ]] ||
  { echo "build first (with the Python bindings): $build" >&2; exit 2; }
export PYTHONPATH=$(cd "$build/python" && pwd)
python=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/packrec-python-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=benchmarks/common.sh
source "$(dirname "$0")/common.sh"
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
ratio() { printf "%.2f" "$(echo "$1 / $2" | bc -l)"; }

"$packrec" synth "$work/tree" --classes 10 --per-class $((images / 10)) --seed 3 >/dev/null
"$packrec" convert "$work/tree" "$work/ds" -q >/dev/null
find "$work/tree" -type f -exec cat {} + >/dev/null
declare -A samples
for ((r = 0; r < rounds; r++)); do
  samples[cpp]+="$("$bench" loader "$work/ds" --transform train --threads "$workers" --batch 256 --prefetch 4 --epochs 3 | field images_per_s) "
  samples[python]+="$($python "$here/python_loader.py" "$work/ds" train "$workers" 256 4 3 | field images_per_s) "
  samples[torch]+="$($python "$here/torchvision_baseline.py" "$work/tree" train "$workers" 256 3 | field images_per_s) "
done
m() { printf '%s\n' ${samples[$1]} | median; }
echo "images: $images, rounds: $rounds (median), $(nproc) cores, $(uname -r), torch $($python -c 'import torch; print(torch.__version__)')"
echo
echo "| train pipeline, batches of 256, $workers threads/workers (images/s) | images/s | vs C++ loader | vs torchvision |"
echo "|---|---|---|---|"
echo "| packrec C++ Loader (packrec_loader_bench) | $(m cpp) | 1.00x | $(ratio "$(m cpp)" "$(m torch)")x |"
echo "| packrec.Loader from Python, torch tensors | $(m python) | $(ratio "$(m python)" "$(m cpp)")x | $(ratio "$(m python)" "$(m torch)")x |"
echo "| torchvision ImageFolder + DataLoader(num_workers=$workers) | $(m torch) | $(ratio "$(m torch)" "$(m cpp)")x | 1.00x |"
