"""Loading libddstore.so and declaring its C API for ctypes.

The declarations below mirror include/ddstore.h by hand; tests/test_signatures.py
parses the header and fails when the two drift apart.

Nothing here imports mpi4py or initialises MPI: loading the library only maps
it (and libmpi) into the process.
"""

import ctypes
import ctypes.util
import glob
import os
import threading

from ._errors import LibraryNotFoundError

# -- constants --------------------------------------------------------------

DDS_METHOD_MPI = 0
DDS_METHOD_FABRIC = 1
DDS_METHOD_SPLIT = 2
DDS_ROLE_CORE = 0
DDS_ROLE_EXTRA = 1
DDS_GPU_ENV = -1
DDS_BATCH_ENV = -1
DDS_BATCH_COLLECTIVE = 0
DDS_BATCH_ONESIDED = 1
DDS_GPU_OFF = 0
DDS_GPU_AUTO = 1
DDS_GPU_REQUIRE = 2
DDS_MEM_HOST = 0
DDS_MEM_CUDA = 1
DDS_MEM_ROCM = 2
DDS_PATH_HOST_ONLY = 0
DDS_PATH_STAGED = 1
DDS_PATH_GPUDIRECT = 2
DDS_PATH_REFUSED = 3
# dds_fail_collective's `call`: the collective a failing rank takes part in.
DDS_CALL_ADD = 1  # dds_add or dds_init
DDS_CALL_GET_BATCH = 2
DDS_CALL_REMOVE = 3
DDS_CALL_EPOCH_BEGIN = 4
DDS_CALL_EPOCH_END = 5
DDS_CALL_WAIT_EXTRAS = 6

# -- structs (field order and types as in ddstore.h) ------------------------


class DdsOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("method", ctypes.c_int32),
        ("role", ctypes.c_int32),
        ("width", ctypes.c_int32),
        ("n_core", ctypes.c_int32),
        ("handshake_dir", ctypes.c_char_p),
        ("fabric_provider", ctypes.c_char_p),
        ("fabric_iface", ctypes.c_char_p),
        ("nic_map", ctypes.c_char_p),
        ("gpu", ctypes.c_int32),
        ("gpu_staging", ctypes.c_int32),
        ("batch_mode", ctypes.c_int32),
    ]


class DdsVarInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("item_size", ctypes.c_int32),
        ("total_rows", ctypes.c_int64),
        ("local_rows", ctypes.c_int64),
        ("row_elems", ctypes.c_int64),
        ("row_bytes", ctypes.c_int64),
        ("method", ctypes.c_int32),
        ("n_ranks", ctypes.c_int32),
        ("transport", ctypes.c_char * 64),
        ("node_local", ctypes.c_int32),
        ("node_ranks", ctypes.c_int32),
        ("device_path", ctypes.c_int32),
    ]


class DdsCounters(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("profiling", ctypes.c_uint32),
        ("calls", ctypes.c_uint64),
        ("rows", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("rows_local", ctypes.c_uint64),
        ("rows_remote", ctypes.c_uint64),
        ("lock_wait_ns", ctypes.c_uint64),
        ("mr_ns", ctypes.c_uint64),
        ("mr_miss", ctypes.c_uint64),
        ("read_ns", ctypes.c_uint64),
        ("cq_ns", ctypes.c_uint64),
        ("req_bytes_sent", ctypes.c_uint64),
        ("req_bytes_recv", ctypes.c_uint64),
    ]


# Header struct name -> ctypes class (used by the signature test too).
STRUCTS = {
    "dds_options": DdsOptions,
    "dds_var_info": DdsVarInfo,
    "dds_counters": DdsCounters,
}

# -- functions --------------------------------------------------------------

_status = ctypes.c_int  # enum dds_status
_store = ctypes.c_void_p  # struct dds_store * (opaque)
_str = ctypes.c_char_p
_ptr = ctypes.c_void_p  # data buffers and index arrays go as plain addresses
_i32, _i64, _size = ctypes.c_int32, ctypes.c_int64, ctypes.c_size_t

# name -> (restype, argtypes)
FUNCTIONS = {
    "dds_version": (_str, ()),
    "dds_status_string": (_str, (_i32,)),
    "dds_last_error": (_str, ()),
    "dds_options_init": (_status, (ctypes.POINTER(DdsOptions),)),
    "dds_create": (_status, (ctypes.c_int, ctypes.POINTER(DdsOptions), ctypes.POINTER(_store))),
    "dds_destroy": (_status, (_store,)),
    "dds_epoch_begin": (_status, (_store,)),
    "dds_epoch_end": (_status, (_store,)),
    "dds_join": (_status, (_store, _str)),
    "dds_join_expect": (_status, (_store, _str, _i64, _i32)),
    "dds_remove": (_status, (_store, _str)),
    "dds_extra_done": (_status, (_store,)),
    "dds_wait_extras": (_status, (_store, _i64, _i64)),
    "dds_init": (_status, (_store, _str, _i64, _i64, _i32)),
    "dds_add": (_status, (_store, _str, _ptr, _size, _i64, _i64, _i32)),
    "dds_update": (_status, (_store, _str, _ptr, _size, _i64)),
    "dds_info": (_status, (_store, _str, ctypes.POINTER(DdsVarInfo))),
    "dds_profile": (_status, (_store, _str, ctypes.POINTER(DdsCounters))),
    "dds_get": (_status, (_store, _str, _ptr, _size, _i64, _i64)),
    "dds_get_batch": (_status, (_store, _str, _ptr, _size, _ptr, _i64)),
    "dds_register_recv": (_status, (_store, _str, _ptr, _size)),
    "dds_unregister_recv": (_status, (_store, _str, _ptr)),
    "dds_get_stream": (_status, (_store, _str, _ptr, _size, _i64, _i64, _ptr)),
    "dds_get_batch_stream": (_status, (_store, _str, _ptr, _size, _ptr, _i64, _ptr)),
    "dds_pointer_kind": (_status, (_ptr, ctypes.POINTER(_i32), ctypes.POINTER(_i32))),
    "dds_gpu_available": (_status, (ctypes.POINTER(_i32),)),
    "dds_fail_collective": (_status, (_store, _i32, _str, _i32, _str)),
    "dds_get_batch_start": (_status, (_store, _str, _ptr, _size, _ptr, _i64, ctypes.POINTER(_ptr))),
    "dds_request_test": (_status, (_ptr, ctypes.POINTER(ctypes.c_int))),
    "dds_request_wait": (_status, (_ptr,)),
    "dds_request_free": (_status, (_ptr,)),
}

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


def open_library(names):
    """Loads the first of `names` that loads; otherwise raises LibraryNotFoundError."""
    tried = []
    for name in names:
        try:
            # CDLL (not PyDLL) releases the GIL for the duration of every call.
            return ctypes.CDLL(name), name
        except OSError as exc:
            tried.append(f"  {name}: {exc}")
    hint = (
        f"set {ENV_VAR} to the path of libddstore.so, install the library on the "
        "system search path (make install), or bundle it into the package "
        "(see python-ctypes/README.md)"
    )
    if not tried:
        tried.append("  (no candidates)")
    raise LibraryNotFoundError("could not load libddstore; tried:\n" + "\n".join(tried) + "\n" + hint)


def declare(lib):
    """Sets restype/argtypes of every function; a missing symbol is an error."""
    for name, (restype, argtypes) in FUNCTIONS.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryNotFoundError(f"{lib._name} lacks {name}: is it an older libddstore?") from None
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


_lock = threading.Lock()
_lib = None
_path = None


def load():
    """The process-wide library handle (loaded and declared on first use)."""
    global _lib, _path
    if _lib is None:
        with _lock:
            if _lib is None:
                lib, path = open_library(candidates())
                _path = path
                _lib = declare(lib)
    return _lib


def library_path():
    """What was loaded (a path or a soname), or None before the first load."""
    return _path


def last_error(lib):
    msg = lib.dds_last_error()
    return msg.decode("utf-8", "replace") if msg else ""
