#!/usr/bin/env bash
# Installs packrec's build and test dependencies from Debian 12 by package name, only when one is
# missing (so repeated runs cost nothing). Needs root or sudo for apt-get.
set -euo pipefail
packages=(
  g++ cmake make pkg-config git bc clang-format
  ccache  # scripts/test.sh and fuzz.sh compile through it: a rebuild or a second CI run reuses objects
  # scripts/fuzz.sh: clang with libFuzzer and its sanitizer runtimes
  clang libclang-rt-14-dev
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libopencv-imgproc-dev libstb-dev libzstd-dev libxxhash-dev
  libtiff-dev libgif-dev  # BMP, PPM/PGM (stb_image), TIFF and GIF inputs, transcoded at convert time
  libwebp-dev  # WebP images, stored as WebP and decoded by libwebp
  libisal-dev  # CRC-32C (ISA-L's crc32_iscsi), TFRecord's framing
  libcli11-dev nlohmann-json3-dev doctest-dev
  libsimdjson-dev  # JSON fields checked fast (lib/storage/json_check.h), nlohmann's rules kept
  libjemalloc-dev  # the CLI's allocator (tools/CMakeLists.txt)
  libarchive-dev libprotobuf-dev protobuf-compiler zstd tar
  liblmdb-dev libhdf5-dev liburing-dev python3 python3-lmdb python3-h5py python3-protobuf python3-jsonschema
  python3-xxhash  # the interop checks verify the documented checksums independently
  # the Python bindings (python/), their tests, pip install . and examples/train_resnet.py
  pybind11-dev python3-dev python3-numpy python3-pytest python3-torch python3-torchvision python3-pil
  python3-venv python3-pip python3-setuptools python3-wheel
  python3-matplotlib  # benchmarks/plot_bench.py (README, Use)
  # tests/scale_out/: a real single-node Slurm cluster and Dask's distributed scheduler
  slurm-wlm munge python3-distributed
  # datasets at URLs (lib/storage/object_store.h); tests/remote/ serves them with nginx
  libcurl4-openssl-dev nginx-light
  libssl-dev  # MD5 (OpenSSL's libcrypto): imports from URLs checked against S3's ETag
)
# tests/remote/: the S3 server (s3rver, from the npm registry) needs Node.js and npm
if ! command -v npm >/dev/null 2>&1; then packages+=(nodejs npm); fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]} > 0)); then
  echo "installing: ${missing[*]}" >&2
  sudo=()
  if ((EUID != 0)); then sudo=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The S3 server the remote tests start (versions pinned by its package-lock.json).
s3server="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/remote/s3server"
if [[ ! -x "$s3server/node_modules/.bin/s3rver" ]]; then
  (cd "$s3server" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
