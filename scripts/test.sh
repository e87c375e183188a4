#!/usr/bin/env bash
# Builds packrec with warnings as errors and runs the whole test suite.
#   scripts/test.sh              # build/ , RelWithDebInfo (-O2 -g1)
#   scripts/test.sh --sanitize   # build-asan/ , AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/test.sh --tsan       # build-tsan/ , ThreadSanitizer, the concurrency tests only
# Extra arguments after `--` go to ctest (e.g. -- -L format). The long-running fault tests carry
# the label `stress` and run only when asked: scripts/test.sh -- -L stress
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
. scripts/compiler-cache.sh
build=build
# Line tables only (-g1): backtraces, perf and gdb's `bt` still name function, file and line; a
# translation unit compiles in 0.63-0.75x the time it takes at -g (no variables or types in the
# debug info). For a debugging session with variables: a build of your own at -g.
cmake_args=(-DPACKREC_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
            -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" "${compiler_cache_args[@]}")
# The sanitizer builds compile at -O1 -g1: the build takes about half as long as at -O2 -g (CI's
# longest step; 447 s against 807 s for build-asan on a 2-core VM, the tests' time unchanged).
sanitizer_flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
if [[ ${1:-} == --sanitize ]]; then
  build=build-asan
  cmake_args+=(-DPACKREC_SANITIZE=ON -DPACKREC_BUILD_BENCHMARKS=OFF "${sanitizer_flags[@]}")
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  shift
fi
if [[ ${1:-} == --tsan ]]; then
  # Only what runs threads against one reader or writer: the rest of the suite adds build time,
  # not races.
  cmake -S . -B build-tsan -DPACKREC_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPACKREC_TSAN=ON \
    "${sanitizer_flags[@]}" "${compiler_cache_args[@]}" -DPACKREC_BUILD_BENCHMARKS=OFF \
    -DPACKREC_BUILD_PYTHON=OFF -DPACKREC_WITH_CUDA=OFF >/dev/null
  cmake --build build-tsan -j "$(nproc)" --target concurrency_tests
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  ctest --test-dir build-tsan -j "$(nproc)" --output-on-failure -L concurrency
  exit
fi
[[ ${1:-} == -- ]] && shift
cmake -S . -B "$build" "${cmake_args[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)"
# Without a label choice of the caller's, everything but the stress label.
select=(-LE stress)
for arg in "$@"; do [[ $arg == -L* ]] && select=(); done
ctest --test-dir "$build" -j "$(nproc)" --output-on-failure "${select[@]}" "$@"
if [[ $build == build ]]; then
  echo "to use the packrec CLI and Python module just built from your shell (README, Use):"
  echo "  . scripts/env.sh"
fi
