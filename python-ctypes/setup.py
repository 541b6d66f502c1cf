"""Building pyddstore (metadata is in pyproject.toml): cffi's declarations
from include/ddstore.h, and libddstore.so inside the package.

    pip install ./python-ctypes                  # builds the library with cargo and bundles it
    DDSTORE_BUNDLE=/path/to/libddstore.so pip install ./python-ctypes   # bundles that file
    DDSTORE_BUNDLE=0 pip install ./python-ctypes # no library: found at run time

The default runs `cargo build --release --lib` in the repository (the
directory above this one). cargo honours CARGO_TARGET_DIR (point it at an
existing build to reuse it) and the library's build script MPICC (the MPI
to build against, e.g. MPICC=mpicc.openmpi). A plain cargo call rather than
setuptools-rust: the library is a C-ABI cdylib with its own soname, not a
Python extension module, and this needs no build dependency beyond cargo.

One small extension module is built beside it, optionally:
pyddstore/_fastcall.c, PyDDStore.get's compiled path. Where no C compiler
works, pip says so and the package takes the cffi path for every call.
"""

import importlib.util
import os
import shutil
import subprocess

from setuptools import Distribution, Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUNDLE = os.environ.get("DDSTORE_BUNDLE", "").strip()
BUNDLING = BUNDLE != "0"


def _ffi_build():
    spec = importlib.util.spec_from_file_location("_pyddstore_ffi_build",
                                                  os.path.join(HERE, "pyddstore", "_ffi_build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cargo_library():
    """Builds libddstore with cargo; its path."""
    if not os.path.isfile(os.path.join(REPO, "Cargo.toml")):
        raise SystemExit(f"pyddstore: no Cargo.toml in {REPO} to build libddstore from; set "
                         "DDSTORE_BUNDLE=/path/to/libddstore.so or DDSTORE_BUNDLE=0")
    cargo = shutil.which("cargo")
    if not cargo:
        raise SystemExit("pyddstore: cargo not found (install Rust: https://rustup.rs), or set "
                         "DDSTORE_BUNDLE=/path/to/libddstore.so or DDSTORE_BUNDLE=0")
    subprocess.run([cargo, "build", "--release", "--lib"], cwd=REPO, check=True)
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    return os.path.join(target if os.path.isabs(target) else os.path.join(REPO, target), "release", "libddstore.so")


class BuildPy(build_py):
    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "pyddstore")
        # The header travels with the package (the import-time fallback of a
        # cffi whose version cannot read the generated module), and the module.
        header = os.environ.get("DDSTORE_HEADER") or os.path.join(REPO, "include", "ddstore.h")
        shutil.copyfile(header, os.path.join(pkg, "ddstore.h"))
        _ffi_build().write(self.build_lib, header)
        if BUNDLING:
            src = BUNDLE if BUNDLE not in ("", "1") else cargo_library()
            if not os.path.isfile(src):
                raise SystemExit(f"pyddstore: {src} does not exist")
            shutil.copyfile(src, os.path.join(pkg, "libddstore.so"))  # follows symlinks: the real file goes in


class PlatformDistribution(Distribution):
    # A wheel carrying a shared library is not pure Python: tag it for this platform.
    def has_ext_modules(self):
        return BUNDLING or super().has_ext_modules()


setup(cmdclass={"build_py": BuildPy}, distclass=PlatformDistribution,
      ext_modules=[Extension("pyddstore._fastcall", ["pyddstore/_fastcall.c"], optional=True)])
