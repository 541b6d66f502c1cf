"""Optional bundling of libddstore.so into the package (metadata is in pyproject.toml).

    DDSTORE_BUNDLE=1 pip install ./python-ctypes          # ../target/release/libddstore.so
    DDSTORE_BUNDLE=/path/to/libddstore.so pip install ./python-ctypes

Without DDSTORE_BUNDLE the package is pure Python and finds the library at run
time (DDSTORE_LIBRARY, then the system search path).
"""

import os
import shutil

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLE = os.environ.get("DDSTORE_BUNDLE", "")
BUNDLING = BUNDLE not in ("", "0")


def bundled_source():
    if BUNDLE == "1":
        return os.path.join(HERE, "..", "target", "release", "libddstore.so")
    return BUNDLE


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        if BUNDLING:
            src = bundled_source()
            if not os.path.isfile(src):
                raise SystemExit(f"DDSTORE_BUNDLE: {src} does not exist (run `cargo build --release` first)")
            dst = os.path.join(self.build_lib, "pyddstore", "libddstore.so")
            shutil.copyfile(src, dst)  # follows symlinks: the real file goes in


class PlatformDistribution(Distribution):
    # A wheel carrying a shared library is not pure Python: tag it for this platform.
    def has_ext_modules(self):
        return BUNDLING


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=PlatformDistribution)
