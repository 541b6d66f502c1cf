"""pyddstore: DDStore 3.0's Python API over libddstore (cffi, declared by include/ddstore.h).

``import pyddstore`` is cheap and does not import mpi4py or start MPI, so a
program can import torch first. The store class is loaded on first access of
``pyddstore.PyDDStore``.
"""

from ._errors import *  # noqa: F401,F403  (the exception classes)
from ._errors import __all__ as _error_names

try:
    from importlib.metadata import PackageNotFoundError, version as _dist_version
    try:
        __version__ = _dist_version("pyddstore")
    except PackageNotFoundError:
        __version__ = "unknown"
except ImportError:  # pragma: no cover
    __version__ = "unknown"

_LAZY = ("PyDDStore", "PyDDstoreVarinfo")

__all__ = ["PyDDStore", "PyDDstoreVarinfo", "__version__",
           "library_path", "library_version", "settings", "split_ragged", *_error_names]


def __getattr__(name):
    if name in _LAZY:
        from . import _core
        value = getattr(_core, name)
        globals()[name] = value  # later accesses skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def split_ragged(flat, lengths):
    """Views of `flat` (samples back to back, as get_ragged_batch returns
    them), one per sample."""
    from ._ragged import split
    return split(flat, lengths)


def library_path():
    """Path (or soname) of the libddstore that is loaded, loading it if needed."""
    from . import _lib
    _lib.load()
    return _lib.library_path()


def settings():
    """The settings a store created now with default options would use, as
    the library resolves them from the environment (a dict: method, role,
    batch_mode, gpu, gpu_staging, profiling, node_local, mpi_progress,
    handshake_dir). A store's own: ``PyDDStore.settings``."""
    from ._core import settings
    return settings()


def library_version():
    """Version string reported by the loaded libddstore."""
    from . import _lib
    return _lib.string(_lib.load().dds_version())
