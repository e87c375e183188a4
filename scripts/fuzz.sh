#!/usr/bin/env bash
# Builds the fuzz targets with clang + libFuzzer (ASan + UBSan, build-fuzz/) and runs each for
# SECONDS (default 30), starting from its seed corpus in tests/fuzz/corpus/<target>/.
#   scripts/fuzz.sh            # every target, 30 s each
#   scripts/fuzz.sh 15 fuzz_image fuzz_manifest
#   scripts/fuzz.sh --ci       # a fixed number of executions per target (about 10 s each here)
# The mutation seed is PACKREC_FUZZ_SEED (default 1; 0 picks one at random). --ci's fixed
# execution counts make a run do the same amount of work on a slow machine as on a fast one (a
# timed run goes as far as the machine's speed takes it). Runs are not repeatable bit for bit
# across builds: another checkout path gives another binary, and the mutations follow its
# coverage. A crash stops with its input in build-fuzz/crashes/<target>/. Once the bug is fixed,
# copy that file into tests/fuzz/corpus/<target>/: the normal tests replay every file there.
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${PACKREC_FUZZ_SEED:-1}
# fuzz_hdf5_file is left out of --ci: it feeds raw bytes to libhdf5's own parser, which finds
# hangs and huge allocations inside the library (docs/reliability.md); packrec cannot fix those,
# and a CI that fails on them says nothing about packrec. fuzz_hdf5_reader covers packrec's part.
declare -A ci_runs=([fuzz_manifest]=200000 [fuzz_manifest_lies]=30000 [fuzz_shard_reader]=20000
                    [fuzz_lmdb_value]=1000000 [fuzz_lmdb_pages]=20000 [fuzz_image]=400000
                    [fuzz_hdf5_reader]=5000 [fuzz_import_source]=15000)
ci=0
seconds=30
if [[ ${1:-} == --ci ]]; then
  ci=1
  shift
elif [[ $# -gt 0 ]]; then
  seconds=$1
  shift
fi
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(fuzz_manifest fuzz_manifest_lies fuzz_shard_reader fuzz_lmdb_value fuzz_lmdb_pages
           fuzz_image fuzz_hdf5_reader fuzz_import_source)
  [[ $ci == 1 ]] || targets+=(fuzz_hdf5_file)
fi
scripts/install-deps.sh
. scripts/compiler-cache.sh
# -O2 for the executions' speed (at -O1 fuzz_image ran far slower); -g1: a crash's stack keeps
# file and line.
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DPACKREC_FUZZ=ON -DPACKREC_WITH_CUDA=OFF -DPACKREC_BUILD_PYTHON=OFF \
  -DPACKREC_BUILD_BENCHMARKS=OFF "${compiler_cache_args[@]}" >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"
# A small quarantine: HDF5 churns through big buffers, and the default one counts as RSS.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:quarantine_size_mb=64 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for target in "${targets[@]}"; do
  # The corpus grows in build-fuzz, not in the tree: only inputs worth keeping are copied back.
  corpus=build-fuzz/corpus/$target
  crashes=build-fuzz/crashes/$target
  mkdir -p "$corpus" "$crashes"
  cp -n tests/fuzz/corpus/"$target"/* "$corpus"/
  if [[ $ci == 1 ]]; then
    budget=-runs=${ci_runs[$target]}
    echo "== $target: ${ci_runs[$target]} executions"
  else
    budget=-max_total_time=$seconds
    echo "== $target: ${seconds} s"
  fi
  options=$ASAN_OPTIONS
  if [[ $target == fuzz_hdf5_file ]]; then
    # libhdf5 leaks in some of its own error paths on malformed files (one frame deep into the
    # library, nothing packrec holds): leaks are not counted. And it allocates a metadata entry
    # at the size the file claims before checking it; glibc fails an impossible size and HDF5
    # reports the failure as an error, so ASan is told to fail it the same way, not to abort.
    # Sizes that can be allocated are still caught by -rss_limit_mb (libFuzzer's malloc limit).
    options=$options:detect_leaks=0:allocator_may_return_null=1
  fi
  if ! ASAN_OPTIONS=$options build-fuzz/tests/"$target" -seed="$seed" "$budget" -rss_limit_mb=2048 -timeout=10 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$crashes/" "$corpus" \
      2>build-fuzz/"$target".log; then
    status=1
    tail -60 build-fuzz/"$target".log
    echo "$target: crashed; the input is in $crashes/"
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" build-fuzz/"$target".log |
    sed "s/^/$target /"
done
exit $status
