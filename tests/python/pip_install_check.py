#!/usr/bin/env python3
"""pip install . into a fresh virtual environment, offline, with what Debian provides; then the
installed package (not the source or build tree) converts, reads and loads.

Usage: pip_install_check.py SOURCE_DIR WORK_DIR [PREBUILT_MODULE]

With PREBUILT_MODULE (the build tree's _packrec*.so), setup.py installs that module instead of
compiling the library inside pip (PACKREC_PREBUILT_EXTENSION): the packaging is what is checked
(pyproject.toml, setup.py, the package's files, an import from the venv), in seconds. Without it,
pip builds the extension from source as a user's `pip install .` does (ctest
python.pip_install_from_source).
"""
import os
import pathlib
import shutil
import subprocess
import sys

source, work = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)
venv = work / "venv"
subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
python = venv / "bin" / "python"
# What is checked is the packaging, not the code (the main build tests that), so the module is
# built for speed: host-only (the CUDA path is the same C++ as the main build's) and at -O0 (a
# whole library build inside pip; 0.63-0.75x the compile time of -O3). No index: the build must
# not need the network.
env = dict(os.environ, PIP_NO_INDEX="1", PYTHONPATH="",
           PACKREC_CMAKE_ARGS="-DPACKREC_WITH_CUDA=OFF -DCMAKE_CXX_FLAGS_RELEASE=-O0")
if len(sys.argv) > 3:
    env["PACKREC_PREBUILT_EXTENSION"] = sys.argv[3]
subprocess.run([python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                str(source)], check=True, env=env, cwd=work)
check = r"""
import pathlib, sys
import packrec, packrec.torch
assert pathlib.Path(packrec.__file__).resolve().is_relative_to(pathlib.Path(sys.prefix).resolve()), packrec.__file__
packrec.synth("tree", classes=2, per_class=10, seed=1, width=96, height=80)
assert packrec.convert("tree", "ds.pkr")["records_written"] == 20
ds = packrec.open("ds.pkr")
assert len(ds) == 20 and ds[0][2].startswith(ds.classes[0])
images, labels = next(iter(packrec.Loader(ds, batch_size=8, size=32)))
assert tuple(images.shape) == (8, 32, 32, 3)
print("installed packrec", packrec.__version__, "at", packrec.__file__)
"""
subprocess.run([python, "-c", check], check=True, env=env, cwd=work)
