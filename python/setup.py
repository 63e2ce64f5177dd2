"""Builds tracejit's C extension against the C library built by the repository's CMake.

TJ_BUILD_DIR names a CMake tree that has built the `tracejit` target (the test script passes its
own); without it the library is configured and built in python/build/cmake (Release). The shared
library is copied into the package beside the extension, which finds it through $ORIGIN: the
installed package needs nothing else of the build tree.
"""
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def library_dir():
    given = os.environ.get("TJ_BUILD_DIR")
    if given:
        return Path(given).resolve()
    build = HERE / "build" / "cmake"
    subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                           "-DTJ_BUILD_BENCH=OFF"])
    subprocess.check_call(["cmake", "--build", str(build), "--target", "tracejit", "-j",
                           str(os.cpu_count() or 2)])
    return build


class BuildWithLibrary(build_ext):
    def run(self):
        lib = library_dir()
        so = lib / "libtracejit.so.0"
        if not so.exists():
            raise RuntimeError(f"tracejit: {so} not found: build the CMake target `tracejit` first")
        for ext in self.extensions:
            ext.library_dirs.append(str(lib))
        super().run()
        dest = Path(self.build_lib) / "tracejit"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(so.resolve(), dest / "libtracejit.so.0")
        if self.inplace:
            shutil.copyfile(so.resolve(), HERE / "tracejit" / "libtracejit.so.0")


setup(
    ext_modules=[
        Extension(
            "tracejit._tracejit",
            sources=["src/_tracejit.c"],
            include_dirs=[str(ROOT / "include")],
            libraries=[":libtracejit.so.0"],
            runtime_library_dirs=["$ORIGIN"],
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-missing-field-initializers"],
        )
    ],
    cmdclass={"build_ext": BuildWithLibrary},
)
