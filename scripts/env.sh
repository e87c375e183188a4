# shellcheck shell=bash
# Source it, do not run it:   . scripts/env.sh
# Puts the `packrec` CLI on PATH and lets `python3 -c 'import packrec'` find the module, from the
# build the set-up made: build-release/ (scripts/demo.sh) or build/ (scripts/test.sh), the one
# built last where both are. PACKREC_BUILD_DIR names another build tree. Nothing is installed or copied:
# a rebuild is picked up as it is, and a new shell without this line is as before.
# (A set-up that ran `pip install .` in a venv has the module there; this is for a build tree.)
__packrec_root=$(cd "$(dirname "$(realpath "${BASH_SOURCE[0]:-$0}")")/.." && pwd)
__packrec_build=${PACKREC_BUILD_DIR:-}
if [ -z "$__packrec_build" ]; then
  for __packrec_candidate in build-release build; do
    __packrec_candidate=$__packrec_root/$__packrec_candidate
    if [ -f "$__packrec_candidate/tools/packrec" ] && { [ -z "$__packrec_build" ] ||
      [ "$__packrec_candidate/tools/packrec" -nt "$__packrec_build/tools/packrec" ]; }; then
      __packrec_build=$__packrec_candidate
    fi
  done
fi
if [ -z "$__packrec_build" ] || [ ! -f "$__packrec_build/tools/packrec" ]; then
  echo "scripts/env.sh: no packrec build found (run scripts/demo.sh or scripts/test.sh first," \
    "or set PACKREC_BUILD_DIR to a build tree)" >&2
  unset __packrec_root __packrec_build __packrec_candidate
  return 1 2>/dev/null || exit 1
fi
export PATH="$__packrec_build/tools${PATH:+:$PATH}"
if [ -d "$__packrec_build/python/packrec" ]; then
  export PYTHONPATH="$__packrec_build/python${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "scripts/env.sh: $__packrec_build has no Python module (configured with" \
    "-DPACKREC_BUILD_PYTHON=OFF?); packrec is on PATH" >&2
fi
unset __packrec_root __packrec_build __packrec_candidate
