"""Builds the _packrec extension with the project's own CMake build (pyproject.toml has the rest).

Extra CMake arguments come from the PACKREC_CMAKE_ARGS environment variable, e.g.
PACKREC_CMAKE_ARGS="-DPACKREC_WITH_CUDA=OFF" for a host-only module.
"""
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        # A module already built by this project's CMake build (the test suite's packaging check
        # sets it to the build tree's, so that CI does not compile the library a fourth time):
        # installed as it is. Unset, as for users, the extension is built from source below.
        prebuilt = os.environ.get("PACKREC_PREBUILT_EXTENSION")
        if prebuilt:
            shutil.copyfile(prebuilt, target)
            return
        build_dir = pathlib.Path(self.build_temp).resolve() / "cmake"
        build_dir.mkdir(parents=True, exist_ok=True)
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}",
            "-DPACKREC_BUILD_PYTHON=ON",
            "-DPACKREC_BUILD_TESTS=OFF",
            "-DPACKREC_BUILD_BENCHMARKS=OFF",
            *shlex.split(os.environ.get("PACKREC_CMAKE_ARGS", "")),
        ]
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "packrec_python",
                        "-j", str(os.cpu_count() or 1)], check=True)
        built = next((build_dir / "python" / "packrec").glob("_packrec*.so"))
        shutil.copyfile(built, target)


setup(
    ext_modules=[CMakeExtension("packrec._packrec")],
    cmdclass={"build_ext": CMakeBuild},
    # Beside, not inside, the CMake build directories at the repository root.
    options={"build": {"build_base": "build-pip"}},
)
