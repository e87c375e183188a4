#!/usr/bin/env bash
# The checks that need a CUDA device, in one run: the GPU tests (also under compute-sanitizer when
# it is installed), `packrec bench --quick` with its GPU rows over a sample tree and its three
# formats, a longer bench of the shard dataset, and the Python loader's device="cuda" test when
# the `packrec` module imports. Everything it prints also goes to OUT/gpu_check.log.
#
#   scripts/gpu_check.sh [BUILD_DIR [OUT_DIR]]   (default: build, gpu-check-out)
#
# BUILD_DIR is a build with CUDA (PACKREC_HAVE_CUDA=1): scripts/test.sh makes one where the
# toolkit is at /usr/local/cuda. Exits non-zero when a test fails or no device is found.
# IMPORT_BENCH=1 also runs the import benchmark (issue 10: import against `cat`; `RUNS` rounds,
# default 3), which needs the GPU machine's cores rather than its GPU: about 3 minutes on 2 cores.
set -uo pipefail
build=${1:-build}
out=${2:-gpu-check-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee "$out/gpu_check.log") 2>&1
packrec=$build/tools/packrec
tests=$build/tests/pipeline_tests
failed=0
step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%T)"; }
run() {
  "$@"
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAILED (exit $rc): $*"
    failed=1
  fi
  return $rc
}
# run, with the output to OUT/NAME.txt and its last LINES lines shown.
run_quiet() {
  local name=$1 lines=$2
  shift 2
  run "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  tail -n "$lines" "$out/$name.txt"
  return $rc
}

step "device"
nvidia-smi -L || { echo "no NVIDIA device"; exit 2; }
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current \
  --format=csv || true
"$packrec" --version

step "GPU tests"
# Fails if any case only skipped: on a GPU machine a skip means the device was not usable.
run_quiet gpu_tests 12 "$tests" -tc='gpu*' -d
grep "skipped\|gpu: " "$out/gpu_tests.txt"
if grep -q "skipped: no CUDA device" "$out/gpu_tests.txt"; then
  echo "FAILED: the GPU tests skipped on a GPU machine"
  failed=1
fi
step "the other loader tests, with pinned memory from CUDA"
run_quiet pipeline_tests 3 "$tests"

if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck synccheck; do
    step "compute-sanitizer --tool $tool: GPU tests"
    run_quiet "sanitizer_$tool" 6 compute-sanitizer --tool "$tool" --error-exitcode 9 \
      $([ "$tool" = memcheck ] && echo --leak-check full) "$tests" -tc='gpu*'
  done
else
  echo "(compute-sanitizer not installed: skipped)"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step "sample tree and its three formats"
run "$packrec" synth "$work/tree" --classes 20 --per-class 100 --seed 2026 >/dev/null
for format in shard lmdb hdf5; do
  run "$packrec" convert "$work/tree" "$work/dataset.$format" --format "$format" -q
done

step "packrec bench --quick (GPU rows)"
run "$packrec" bench "$work/tree" "$work/dataset.shard" "$work/dataset.lmdb" "$work/dataset.hdf5" \
  --quick --scratch "$work" --json "$out/bench_quick.json" -q

step "packrec bench, shard dataset, full stage sweep (no storage probe)"
run timeout 150 "$packrec" bench "$work/dataset.shard" --no-probe --seconds 0.5 \
  --json "$out/bench_shard.json" -q

if [ "${IMPORT_BENCH:-0}" = 1 ]; then
  step "import against cat: benchmarks/import_bench.sh $build 8000 ${RUNS:-3}"
  run_quiet import_bench 30 timeout 420 benchmarks/import_bench.sh "$build" 8000 "${RUNS:-3}"
fi

if python3 -c "import packrec" 2>/dev/null; then
  step "Python: the loader's device=\"cuda\" tensors"
  run_quiet python_tests 15 python3 -m pytest -q -p no:cacheprovider tests/python/test_loader.py -k "cuda or device or errors"
else
  echo "(the packrec Python module does not import here: Python checks skipped)"
fi

step "done"
[ $failed -eq 0 ] && echo "gpu_check: all passed" || echo "gpu_check: FAILURES above"
exit $failed
