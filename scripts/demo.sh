#!/usr/bin/env bash
# The main job on an embedded default: build packrec, make a synthetic ImageNet-like tree, convert
# it to packrec shards, read it back, verify every checksum and decode every image, extract it and
# compare byte for byte, then print a summary with the measured rates.
#   scripts/demo.sh [WORK_DIR]     (default: ./out/demo)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DPACKREC_BUILD_TESTS=OFF >/dev/null
cmake --build build-release -j "$(nproc)" >/dev/null
packrec=build-release/tools/packrec
work=${1:-out/demo}
rm -rf "$work"
mkdir -p "$work"

step() { printf '\n== %s\n' "$*"; }
step "synth: 20 classes x 100 images"
$packrec synth "$work/tree" --classes 20 --per-class 100 --seed 2026
step "convert to packrec shards (pass-through, 16 MiB shards)"
$packrec convert "$work/tree" "$work/dataset" --shard-size 16MiB
step "info"
$packrec info "$work/dataset"
step "read every record sequentially (checksums on)"
build-release/benchmarks/packrec_read_bench "$work/dataset" --repeat 3
step "verify --deep (checksums + decode every image)"
$packrec verify --deep "$work/dataset"
step "extract and compare with the original tree"
$packrec extract "$work/dataset" "$work/restored"
diff -r "$work/tree" "$work/restored" && echo "byte-identical: $(find "$work/restored" -type f | wc -l) files"
step "summary"
echo "tree:    $(du -sh "$work/tree" | cut -f1) in $(find "$work/tree" -type f | wc -l) files"
echo "dataset: $(du -sh "$work/dataset" | cut -f1) in $(ls "$work"/dataset/*.pkr | wc -l) shard files + manifest.json"
echo "all checks passed; outputs in $work"
