#!/usr/bin/env bash
# packrec bench beside the tools users would otherwise use, in one invocation on one tree:
#   - torchvision ImageFolder + DataLoader (train transforms) at the same worker counts as the
#     packrec loader's threads
#   - python-lmdb and h5py readers of the same LMDB and HDF5 files (random order, warm)
#   - cat and tar of the loose files and of the shards (sequential, warm)
# Prints a markdown table of ratios (> 1.0: packrec faster), the machine and the command; writes
# the bench JSON and charts (benchmarks/plot_bench.py) into OUT_DIR.
# Installs python3-torchvision and python3-matplotlib when missing.
# Usage: benchmarks/bench_peers.sh [BUILD_DIR] [IMAGES] [OUT_DIR] [WORKERS...]
set -euo pipefail
build=${1:-build-release}
images=${2:-10000}
out=${3:-out/bench-peers}
shift $(($# < 3 ? $# : 3))
workers=("$@")
((${#workers[@]})) || workers=(1 2)
packrec="$build/tools/packrec"
[[ -x $packrec ]] || { echo "build first: $packrec missing" >&2; exit 2; }
python=/usr/bin/python3
missing=()
$python -c "import torchvision" 2>/dev/null || missing+=(python3-torchvision)
$python -c "import matplotlib" 2>/dev/null || missing+=(python3-matplotlib)
if ((${#missing[@]})); then
  sudo=(); ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi
here=$(dirname "$0")
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/packrec-peers.XXXXXX")
trap 'rm -rf "$work"' EXIT
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

"$packrec" synth "$work/tree" --classes 20 --per-class $((images / 20)) --seed 11 >/dev/null
"$packrec" convert -q "$work/tree" "$work/ds.pkr" >/dev/null
"$packrec" convert -q "$work/tree" "$work/ds.lmdb" --format lmdb >/dev/null
"$packrec" convert -q "$work/tree" "$work/ds.h5" --format hdf5 >/dev/null
sync

rows=()
for w in "${workers[@]}"; do
  json="$out/bench-threads$w.json"
  "$packrec" bench "$work/tree" "$work/ds.pkr" "$work/ds.lmdb" "$work/ds.h5" --threads "$w" \
    --readers "$w" --scratch "$work" --json "$json" -q >"$out/bench-threads$w.txt"
  torch=$($python "$here/torchvision_baseline.py" "$work/tree" train "$w" 256 3 | field images_per_s)
  pipeline=$($python -c "import json,sys; r=json.load(open(sys.argv[1])); print(round([s for s in r['stages'] if s['stage']=='pipeline' and s['sweep']==''][0]['images_per_s']))" "$json")
  rows+=("| train pipeline, $w workers/threads (images/s) | torchvision ImageFolder + DataLoader(num_workers=$w) | $torch | $pipeline | $(ratio "$pipeline" "$torch")x |")
done
# The reader comparisons: the bench's warm rows at one reader, like the one-process peers.
json="$out/bench-threads${workers[0]}.json"
warm() {  # SOURCE ORDER -> records/s and MB/s of the bench's warm row at the fewest readers
  $python -c "
import json, sys
r = json.load(open(sys.argv[1]))
rows = [a for a in r['access'] if a['source'] == sys.argv[2] and a['order'] == sys.argv[3]
        and a['cache'] == 'warm' and a['engine'] == 'threads']
best = min(rows, key=lambda a: a['concurrency'])
print(round(best['records_per_s']), round(best['mb_per_s']))" "$json" "$1" "$2"
}
read -r lmdb_rps _ < <(warm lmdb random)
read -r h5_rps _ < <(warm hdf5 random)
py_lmdb=$($python "$here/python_readers.py" lmdb "$work/ds.lmdb" | field records_per_s)
py_h5=$($python "$here/python_readers.py" h5py "$work/ds.h5" | field records_per_s)
rows+=("| LMDB, random order, warm (records/s) | python-lmdb, txn.get per record | $py_lmdb | $lmdb_rps | $(ratio "$lmdb_rps" "$py_lmdb")x |")
rows+=("| HDF5, random order, warm (records/s) | h5py, data[offsets[i]:offsets[i+1]] | $py_h5 | $h5_rps | $(ratio "$h5_rps" "$py_h5")x |")

cat_mbs() {  # fastest of three warm runs of a command reading BYTES
  local bytes=$1; shift
  local best=0 t0 t1
  for _ in 1 2 3; do
    t0=$EPOCHREALTIME; "$@" >/dev/null; t1=$EPOCHREALTIME
    best=$(awk -v b="$bytes" -v t="$(echo "$t1 - $t0" | bc -l)" -v m="$best" 'BEGIN {v = b / 1e6 / t; printf "%.0f\n", (v > m) ? v : m}')
  done
  echo "$best"
}
tree_bytes=$(find "$work/tree" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
shard_bytes=$(cat "$work"/ds.pkr/shard-*.pkr | wc -c)
read -r _ files_mbs < <(warm files sequential)
read -r _ shard_mbs < <(warm shard sequential)
tar_mbs=$(cat_mbs "$tree_bytes" sh -c "tar cf - -C '$work' tree | cat")
cat_shard_mbs=$(cat_mbs "$shard_bytes" cat "$work"/ds.pkr/shard-*.pkr)
rows+=("| loose files, sequential, warm (MB/s) | tar cf - tree \\| cat | $tar_mbs | $files_mbs | $(ratio "$files_mbs" "$tar_mbs")x |")
rows+=("| shards, sequential, warm (MB/s) | cat shard-*.pkr | $cat_shard_mbs | $shard_mbs | $(ratio "$shard_mbs" "$cat_shard_mbs")x |")

$python "$here/plot_bench.py" "$out" "$out/bench-threads${workers[-1]}.json" >/dev/null
echo "images: $images, $(nproc) cores, $(uname -r), $($python -c "import json,sys; m=json.load(open(sys.argv[1]))['machine']; print(m['cpu_model'] + ', ' + m['data_filesystem'] + ' on ' + m['data_device'])" "$json")"
echo "command: benchmarks/bench_peers.sh $build $images $out ${workers[*]}"
echo
echo "| workload | peer | peer | packrec | packrec / peer |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "bench tables: $out/bench-threads*.txt; charts: $out/{access,scaling,stages}.png"
