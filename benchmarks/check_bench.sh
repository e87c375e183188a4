#!/usr/bin/env bash
# Does `packrec bench` measure what it says? Runs it on a benchmark tree and, in the same run and on
# the same files, the independent tools that measure the same things:
#   - fio (Debian's) for the storage probe: sequential 1 MiB reads, random 4 KiB reads at depth 1
#     (psync) and 32 (io_uring), O_DIRECT, on a scratch file of the same size in the same
#     directory;
#   - for warm sequential reads: cat of the shard files, and a plain open/pread/close loop in
#     Python over the loose files in listing order (cat is unfit for small files, see below).
# Each pair must agree within 15%; prints a markdown table and exits 1 when one does not.
# Installs fio when missing.
# Usage: benchmarks/check_bench.sh [BUILD_DIR] [IMAGES] [WORK_DIR]
#   WORK_DIR (default: a temp dir under $TMPDIR) must be on the filesystem to measure.
set -euo pipefail
build=${1:-build-release}
images=${2:-10000}
packrec="$build/tools/packrec"
[[ -x $packrec ]] || { echo "build first: $packrec missing" >&2; exit 2; }
if ! command -v fio >/dev/null; then
  sudo=(); ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q fio >/dev/null
fi
if [[ -n ${3:-} ]]; then
  work=$3; mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/packrec-check.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
rm -rf "$work/tree" "$work/ds" "$work/scratch"
mkdir -p "$work/scratch"
probe_mib=1024
seconds=3

"$packrec" synth "$work/tree" --classes 20 --per-class $((images / 20)) --seed 9 >/dev/null
"$packrec" convert -q "$work/tree" "$work/ds" >/dev/null
sync

mapfile -t files < <(/usr/bin/python3 - "$work/tree" <<'PY'
import os, sys
root = sys.argv[1]
exts = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
for cls in sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))):
    for dirpath, dirnames, names in sorted(os.walk(os.path.join(root, cls), followlinks=True)):
        dirnames.sort()
        for name in sorted(names):
            if name.lower().endswith(exts):
                print(os.path.join(dirpath, name))
PY
)
printf '%s\n' "${files[@]}" >"$work/files.txt"

fio_common=(--filename="$work/scratch/fio.dat" --size=${probe_mib}M --direct=1
            --output-format=json --group_reporting)
fio_field() { /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['jobs'][0]['read']['$1'])"; }
cat_mbs() {  # FILES... -> MB/s of the fastest of three warm cats (the bench takes its best of 3)
  local bytes t0 t1 times=()
  bytes=$(cat "$@" | wc -c)
  for _ in 1 2 3; do
    t0=$EPOCHREALTIME; cat "$@" >/dev/null; t1=$EPOCHREALTIME
    times+=("$(echo "$t1 - $t0" | bc -l)")
  done
  printf '%s\n' "${times[@]}" | sort -g | head -1 | awk -v b="$bytes" '{print b / 1e6 / $1}'
}
# cat allocates a fresh 128 KiB buffer with mmap for every file it opens (strace: one mmap and
# munmap per file), so on small files it measures its own page faults more than the reads. For
# loose files the independent reader is a plain os.open/os.readinto/os.close loop in Python.
py_files_mbs() {
  /usr/bin/python3 - "$work/files.txt" <<'PY'
import os, sys, time
paths = open(sys.argv[1]).read().split("\n")[:-1]
buffer = bytearray(1 << 20)
view = [memoryview(buffer)]
best = 0
for _ in range(3):
    start = time.perf_counter()
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        offset = 0
        while (got := os.preadv(fd, view, offset)) > 0:
            offset += got
            if got < len(buffer):
                break
        total += offset
        os.close(fd)
    best = max(best, total / 1e6 / (time.perf_counter() - start))
print(best)
PY
}

# Rounds alternate the bench and its yardsticks so machine noise hits both; medians.
rounds=5
declare -A samples best
keep() { samples[$1]+="$2 "; }
for ((r = 0; r < rounds; r++)); do
  "$packrec" bench "$work/tree" "$work/ds" --no-stages --no-cold --readers 1 --queue-depth 1 \
    --max-records "$images" --seconds 30 --probe-size $((probe_mib << 20)) \
    --scratch "$work/scratch" --json "$work/bench.json" -q >/dev/null
  read -r b_seq b_qd1 b_qd32 b_files b_shards < <(/usr/bin/python3 - "$work/bench.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
s = report["storage"]
def warm_seq(source):
    return [r for r in report["access"] if r["source"] == source and r["order"] == "sequential"
            and r["cache"] == "warm" and r["concurrency"] == 1][0]["mb_per_s"]
print(s["sequential_mb_per_s"], s["random_iops_qd1"], s["random_iops"], warm_seq("files"),
      warm_seq("shard"))
PY
)
  keep bench_seq "$b_seq"; keep bench_qd1 "$b_qd1"; keep bench_qd32 "$b_qd32"
  keep bench_files "$b_files"; keep bench_shards "$b_shards"
  fio --name=prep --rw=write --bs=1M "${fio_common[@]}" >/dev/null
  keep fio_seq "$(fio --name=seq --rw=read --bs=1M --ioengine=psync "${fio_common[@]}" | fio_field bw_bytes | awk '{print $1 / 1e6}')"
  keep fio_qd1 "$(fio --name=qd1 --rw=randread --bs=4k --ioengine=psync --runtime=$seconds --time_based "${fio_common[@]}" | fio_field iops)"
  keep fio_qd32 "$(fio --name=qd32 --rw=randread --bs=4k --ioengine=io_uring --iodepth=32 --runtime=$seconds --time_based "${fio_common[@]}" | fio_field iops)"
  rm -f "$work/scratch/fio.dat"
  keep py_files "$(py_files_mbs)"
  keep cat_shards "$(cat_mbs "$work"/ds/shard-*.pkr)"
done

for key in "${!samples[@]}"; do
  best[$key]=$(printf '%s\n' ${samples[$key]} | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
done
/usr/bin/python3 - "$work/bench.json" "$rounds" "${best[fio_seq]}" "${best[bench_seq]}" \
  "${best[fio_qd1]}" "${best[bench_qd1]}" "${best[fio_qd32]}" "${best[bench_qd32]}" \
  "${best[py_files]}" "${best[bench_files]}" "${best[cat_shards]}" "${best[bench_shards]}" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
rounds = int(sys.argv[2])
v = list(map(float, sys.argv[3:]))
s = report["storage"]
print(f"medians of {rounds} alternating rounds")
pairs = [
    ("device sequential read, 1 MiB, O_DIRECT (MB/s)", "fio --rw=read --bs=1M --direct=1", v[0], v[1]),
    ("device random read, 4 KiB, depth 1 (IOPS)", "fio --rw=randread --bs=4k --ioengine=psync", v[2], v[3]),
    ("device random read, 4 KiB, depth 32 (IOPS)", "fio --rw=randread --bs=4k --ioengine=io_uring --iodepth=32", v[4], v[5]),
    ("loose files, sequential, warm, 1 reader (MB/s)", "os.open + preadv + os.close per file, Python", v[6], v[7]),
    ("shards, sequential, warm, 1 reader (MB/s)", "cat shard-*.pkr", v[8], v[9]),
]
print(f"machine: {report['machine']['cpu_model']}, {report['machine']['cores']} cores, "
      f"{report['machine']['data_filesystem']} on {report['machine']['data_device']}; "
      f"probe file {s['file_bytes'] >> 20} MiB, direct I/O: {s['direct_io']}")
print()
print("| figure | independent tool | tool | packrec bench | bench / tool | within 15% |")
print("|---|---|---|---|---|---|")
ok = True
for name, tool, theirs, ours in pairs:
    ratio = ours / theirs
    agree = abs(ratio - 1) <= 0.15
    ok &= agree
    print(f"| {name} | {tool} | {theirs:,.0f} | {ours:,.0f} | {ratio:.2f} | {'yes' if agree else 'NO'} |")
sys.exit(0 if ok else 1)
PY
