"""Builds vellum._C with the project's CMake (target vellum_python) for `pip install`.

The CMake build lives in build/pip (kept between installs, so a reinstall only rebuilds what
changed); VELLUM_PIP_BUILD_DIR chooses another folder, CMAKE_BUILD_PARALLEL_LEVEL the jobs, and
VELLUM_PIP_CMAKE_ARGS adds configure arguments (after the defaults, so they win: the venv install
test builds with the test build's flags, so that ccache serves its objects).
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


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        build_dir = pathlib.Path(os.environ.get("VELLUM_PIP_BUILD_DIR", ROOT / "build" / "pip"))
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release", "-DVELLUM_BUILD_TESTS=OFF", "-DVELLUM_BUILD_BENCH=OFF",
            f"-DPython_EXECUTABLE={sys.executable}",
        ]
        if shutil.which("ccache"):
            configure.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        configure += shlex.split(os.environ.get("VELLUM_PIP_CMAKE_ARGS", ""))
        subprocess.run(configure, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "vellum_python", "-j", jobs],
                       check=True)
        built = list((build_dir / "python" / "vellum").glob("_C*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one vellum/_C*.so in {build_dir / 'python'}, found {built}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


setup(ext_modules=[Extension("vellum._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
