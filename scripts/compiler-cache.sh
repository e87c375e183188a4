# shellcheck shell=bash
# Sourced by scripts/test.sh and scripts/fuzz.sh: compile through ccache (Debian's, installed by
# install-deps.sh) when it is there. CMake is given it as the compiler launcher; the cache is keyed
# on paths relative to the checkout (CCACHE_BASEDIR, CCACHE_NOHASHDIR), so a fresh clone elsewhere
# (CI's) reuses what an earlier build compiled. PACKREC_NO_CCACHE=1 turns it off.
# Sets `compiler_cache_args` for cmake's command line.
compiler_cache_args=()
if [[ -z ${PACKREC_NO_CCACHE:-} ]] && command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
  compiler_cache_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
