"""Writes pyddstore/_ddstore_ffi.py: cffi's out-of-line ABI module for libddstore.

    python python-ctypes/pyddstore/_ffi_build.py [OUT_DIR] [--header include/ddstore.h]

The declarations are include/ddstore.h itself (pyddstore/_header.py turns it
into cffi cdef source), so a function added to the header needs no second
declaration here. ABI mode (set_source(..., None)): the result is a Python
file holding cffi's parsed types; nothing is compiled, now or at import, and
calls go through libffi. setup.py runs this at build time (build_py);
run-tests.sh runs it for the source tree. OUT_DIR defaults to python-ctypes/,
so the module lands in python-ctypes/pyddstore/ (git ignores it).

For the source tree it also compiles pyddstore/_fastcall.c (PyDDStore.get's
compiled path) next to it with the C compiler Python was built with; where
that fails, it says so and pyddstore runs without it. setup.py builds the
same file as an optional setuptools extension.
"""

import argparse
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig

MODULE = "pyddstore._ddstore_ffi"
HERE = os.path.dirname(os.path.abspath(__file__))


def _header_module():
    # By path: this file also runs as a script and from setup.py, outside the package.
    spec = importlib.util.spec_from_file_location("_pyddstore_header", os.path.join(HERE, "_header.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_ffi(header_text=None, module=MODULE):
    """A cffi FFI declaring the C API of `header_text` (default: the source tree's header)."""
    from cffi import FFI
    header = _header_module()
    ffi = FFI()
    ffi.cdef(header.cdef(header_text if header_text is not None else header.read()))
    ffi.set_source(module, None)
    return ffi


def write(out_dir, header_path=None):
    """Writes OUT_DIR/pyddstore/_ddstore_ffi.py; returns its path."""
    header = _header_module()
    ffi = make_ffi(header.read(header_path))
    path = os.path.join(out_dir, *MODULE.split(".")) + ".py"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    ffi.emit_python_code(tmp)
    os.replace(tmp, path)  # never a half-written module for a concurrent import
    return path


def build_fastcall(out_dir):
    """Compiles pyddstore/_fastcall.c into OUT_DIR/pyddstore/; its path, or
    None (with the compiler's complaint on stderr) where that fails."""
    src = os.path.join(HERE, "_fastcall.c")
    out = os.path.join(out_dir, "pyddstore", "_fastcall" + sysconfig.get_config_var("EXT_SUFFIX"))
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    tmp = out + ".tmp"
    cmd = cc + ["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-I", sysconfig.get_paths()["include"], src,
                "-o", tmp]
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as exc:
        done = subprocess.CompletedProcess(cmd, 1, str(exc))
    if done.returncode != 0:
        print(f"pyddstore: could not compile {src} (get() takes the cffi path): {' '.join(cmd)}\n{done.stdout}",
              file=sys.stderr)
        return None
    os.replace(tmp, out)  # never a half-written module for a concurrent import
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", nargs="?", default=os.path.dirname(HERE))
    ap.add_argument("--header", default=os.environ.get("DDSTORE_HEADER") or None)
    args = ap.parse_args(argv)
    print(write(args.out_dir, args.header))
    fast = build_fastcall(args.out_dir)
    if fast:
        print(fast)


if __name__ == "__main__":
    sys.exit(main())
