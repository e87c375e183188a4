#!/usr/bin/env bash
# The main job on an embedded default: build packrec, make a synthetic ImageNet-like tree, convert
# it to every format (packrec shards, LMDB, HDF5), read each back, verify every checksum and decode
# every image, extract and compare byte for byte, print a table of size, conversion time and read
# throughput per format, export to WebDataset/TFRecord/RecordIO and import each back, read each
# from Python (packrec.open, packrec.Loader), then run
# `packrec bench --quick` over the tree and the three datasets (storage probe, access patterns,
# loader stages, bottleneck and recommendation), and the tree and shards once more on an emulated
# hard disk (`--storage hdd`, root only; skipped with the reason otherwise).
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
declare -A convert_s read_mbs size
for format in shard lmdb hdf5; do
  out="$work/dataset.$format"
  step "convert to $format"
  t0=$EPOCHREALTIME
  $packrec convert "$work/tree" "$out" --format "$format" --shard-size 16MiB
  convert_s[$format]=$(echo "$EPOCHREALTIME - $t0" | bc -l)
  step "info ($format)"
  $packrec info "$out"
  step "read every record sequentially, checksums on ($format)"
  line=$(build-release/benchmarks/packrec_read_bench "$out" --repeat 3)
  echo "$line"
  read_mbs[$format]=$(sed 's/.*MBps=\([0-9.]*\).*/\1/' <<<"$line")
  size[$format]=$(du -sh "$out" | cut -f1)
  step "verify --deep ($format): checksums + decode every image"
  $packrec verify --deep "$out"
  step "extract ($format) and compare with the original tree"
  $packrec extract "$out" "$work/restored.$format"
  diff -r "$work/tree" "$work/restored.$format"
  echo "byte-identical: $(find "$work/restored.$format" -type f | wc -l) files"
done

step "summary"
echo "tree: $(du -sh "$work/tree" | cut -f1) in $(find "$work/tree" -type f | wc -l) files"
printf '%-7s %10s %12s %18s\n' format "on disk" "convert s" "read MB/s (warm)"
for format in shard lmdb hdf5; do
  printf '%-7s %10s %12.2f %18s\n' "$format" "${size[$format]}" "${convert_s[$format]}" \
    "${read_mbs[$format]}"
done

step "interop: export to WebDataset, TFRecord, RecordIO; import each back; compare with the tree"
for format in wds tfrecord recordio; do
  $packrec convert "$work/tree" "$work/export.$format" --format "$format" --shard-size 16MiB -q
  $packrec convert "$work/export.$format" "$work/imported-$format" -q
  $packrec extract "$work/imported-$format" "$work/reimported-$format" >/dev/null
  diff -r "$work/tree" "$work/reimported-$format"
  echo "$format: $(ls "$work/export.$format" | tr '\n' ' ')-> byte-identical after import"
done
tar -tf "$work/export.wds/shard-000000.tar" | sed -n "1,3s/^/  GNU tar lists: /p"

step "from Python: packrec.open and packrec.Loader over every format (torch tensors, no copy)"
PYTHONPATH=build-release/python /usr/bin/python3 - "$work" <<'PY'
import sys, time
import packrec
work = sys.argv[1]
for fmt in ("shard", "lmdb", "hdf5"):
    ds = packrec.open(f"{work}/dataset.{fmt}")
    data, label, key = ds[len(ds) // 2]
    loader = packrec.Loader(ds, batch_size=100, threads=0, transform="train", seed=1)
    start, images = time.monotonic(), 0
    for batch, labels in loader:
        images += len(labels)
    rate = images / (time.monotonic() - start)
    print(f"{fmt:6} {len(ds)} records; ds[{len(ds) // 2}] = {key} (label {label}, {len(data)} bytes); "
          f"one train epoch: {images} images as {tuple(batch.shape)} {batch.dtype} batches, {rate:.0f} images/s")
PY

step "packrec bench --quick: is the data delivered fast enough? (loose files vs every format)"
$packrec bench "$work/tree" "$work/dataset.shard" "$work/dataset.lmdb" "$work/dataset.hdf5" \
  --quick --scratch "$work" --json "$work/bench.json"
step "packrec bench --storage hdd: the same tree and shards on an emulated 7,200 rpm disk"
# Root only (a loop device, a mount and a cgroup; all gone when the command ends): without root
# it exits 7 with the reason, and the demo goes on.
status=0
$packrec bench "$work/tree" "$work/dataset.shard" --quick --no-stages --readers 1 \
  --queue-depth 1 --storage hdd --json "$work/bench-hdd.json" -q |
  awk '/^emulated storage/ {table = 1} table && /^$/ {table = 0} table {print}
       /^  - emulated hdd/ {finding = 1; print; next} finding && /^    / {print; next} {finding = 0}' ||
  status=$?
case $status in
  0) ;;
  7) echo "skipped: packrec bench --storage needs root (and loop devices and a block I/O controller)" ;;
  *) exit "$status" ;;
esac
echo "all checks passed; outputs in $work (bench figures: $work/bench.json)"
echo "packrec and its Python module are in build-release/; to use them from your shell (README, Use):"
echo "  . scripts/env.sh"
