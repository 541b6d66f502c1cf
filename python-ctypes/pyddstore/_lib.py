"""Loading libddstore.so through cffi, with the declarations of include/ddstore.h.

The C API is declared once, by the header: pyddstore/_ffi_build.py turns it
into cffi's out-of-line ABI module pyddstore/_ddstore_ffi.py at build time
(setup.py; run-tests.sh for the source tree). ABI mode compiles nothing,
at build time or at import: calls go through libffi, with cffi converting
the arguments in C, which costs a fraction of what ctypes does
(docs/dev/performance.md, "The Python binding's cost per call"). In a source
tree without the generated module, the same declarations are built from
the header at first use (cffi parses it; still no compiler).

Every call releases the GIL while C runs (cffi always does), as the ctypes
binding before it did, so a rank waiting in a collective call for a late
peer does not stop the process's other Python threads.

Nothing here imports mpi4py or initialises MPI: loading the library only maps
it (and libmpi) into the process.
"""

import ctypes.util
import glob
import os
import threading

from ._errors import LibraryNotFoundError


_NO_CFFI = "pyddstore needs cffi (pip install cffi; `pip install ./python-ctypes` installs it)"


def _make_ffi():
    try:
        from ._ddstore_ffi import ffi
        return ffi, "generated"
    except ImportError as exc:
        if getattr(exc, "name", None) == "_cffi_backend":
            raise LibraryNotFoundError(_NO_CFFI) from None
        # Not generated (a source tree), or by a cffi this one cannot read.
    from . import _ffi_build, _header
    path = _header.find()
    if path is None:
        raise LibraryNotFoundError(
            "pyddstore/_ddstore_ffi.py is missing and no ddstore.h is there to build it from: install the "
            "package with pip, or run python-ctypes/pyddstore/_ffi_build.py")
    try:
        return _ffi_build.make_ffi(_header.read(path)), "header"
    except ImportError:
        raise LibraryNotFoundError(_NO_CFFI) from None


ffi, FFI_SOURCE = _make_ffi()  # FFI_SOURCE: "generated" (the built module) or "header" (parsed now)
NULL = ffi.NULL
# The declarations over the running program: the constants, and the names of
# the functions (which resolve only in libddstore itself).
_DECLARED = ffi.dlopen(None)


def __getattr__(name):
    """The header's integer constants (DDS_METHOD_MPI, ...), without loading the library."""
    if name.startswith("DDS_"):
        try:
            value = getattr(_DECLARED, name)
        except AttributeError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- finding the library ----------------------------------------------------

ENV_VAR = "DDSTORE_LIBRARY"
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
SYSTEM_NAMES = ("libddstore.so.0", "libddstore.so")


def candidates(environ=os.environ, package_dir=PACKAGE_DIR, system_names=SYSTEM_NAMES):
    """Paths or names to try, in order.

    An explicit DDSTORE_LIBRARY is the only candidate: silently falling back
    to another copy would hide a typo and load a library the user did not ask for.
    """
    explicit = environ.get(ENV_VAR)
    if explicit:
        return [explicit]
    found = sorted(glob.glob(os.path.join(package_dir, "libddstore.so*")))
    bundled = [p for p in found if os.path.isfile(p)]
    system = []
    by_linker = ctypes.util.find_library("ddstore")
    if by_linker and system_names:
        system.append(by_linker)
    system.extend(n for n in system_names if n not in system)
    return bundled + system


# The functions a library must have: every dds_* of the header.
REQUIRED = tuple(sorted(n for n in dir(_DECLARED) if n.startswith("dds_")))


# RTLD_NODELETE: cffi closes a library when its handle is collected, at the
# latest at interpreter exit, while MPI's finalize hooks and libfabric's
# threads may still run code of libddstore; the library stays mapped, as
# ctypes always left it.
_DLOPEN_FLAGS = ffi.RTLD_NOW | ffi.RTLD_LOCAL | ffi.RTLD_NODELETE


def open_library(names):
    """Loads the first of `names` that loads and has every function of the
    header; otherwise raises LibraryNotFoundError."""
    tried = []
    for name in names:
        try:
            lib = ffi.dlopen(name, _DLOPEN_FLAGS)
        except OSError as exc:
            tried.append(f"  {name}: {exc}")
            continue
        missing = [f for f in REQUIRED if not _has(lib, f)]
        if missing:
            raise LibraryNotFoundError(f"{name} lacks {', '.join(missing)}: is it an older libddstore?")
        return lib, name
    hint = (
        f"set {ENV_VAR} to the path of libddstore.so, install the library on the "
        "system search path (make install), or install the package with pip, which "
        "bundles it (see python-ctypes/README.md)"
    )
    if not tried:
        tried.append("  (no candidates)")
    raise LibraryNotFoundError("could not load libddstore; tried:\n" + "\n".join(tried) + "\n" + hint)


def _has(lib, name):
    try:
        getattr(lib, name)
    except AttributeError:
        return False
    return True


_lock = threading.Lock()
_lib = None
_path = None


def load():
    """The process-wide library handle (loaded on first use)."""
    global _lib, _path
    if _lib is None:
        with _lock:
            if _lib is None:
                lib, path = open_library(candidates())
                _path = path
                _lib = lib
    return _lib


def library_path():
    """What was loaded (a path or a soname), or None before the first load."""
    return _path


def last_error(lib):
    msg = lib.dds_last_error()
    return ffi.string(msg).decode("utf-8", "replace") if msg else ""


def string(ptr):
    """A `const char *` result as str ("" for NULL)."""
    return ffi.string(ptr).decode("utf-8", "replace") if ptr else ""
