"""Turning the caller's array into what the C API takes: a pointer and sizes.

One function, :func:`extract`, looks at every buffer that crosses into the
library, so the rules (accepted dtypes, contiguity, GPU memory) live in one
place. Device buffers are described here; whether the library can reach
them is decided by the store (PyDDStore._device), which asks the library.
The store's read paths keep a shortcut for the common case (a numpy array
that passes every rule); anything else comes here.
"""

import numpy as np

from ._args import DTYPE_NAMES
from ._errors import ArgumentTypeError, InvalidArgumentError, UnsupportedDtypeError
from ._lib import ffi

# The accepted element types as numpy dtypes (host buffers).
HOST_DTYPES = frozenset(np.dtype(n) for n in DTYPE_NAMES)


_from_buffer = ffi.from_buffer
_cast = ffi.cast


def pointer(arr):
    """A `void *` to a C-contiguous ndarray's first byte (cffi keeps the array
    alive while the pointer lives). Several times cheaper than
    ``arr.ctypes.data`` or ``__array_interface__`` (docs/dev/performance.md)."""
    return _from_buffer(arr)


def device_pointer(addr):
    """A `void *` holding the integer address of device memory."""
    return _cast("void *", addr)


def address(ptr_or_array):
    """The integer address of a cdata pointer or of an ndarray's data."""
    if isinstance(ptr_or_array, np.ndarray):
        ptr_or_array = _from_buffer(ptr_or_array)
    return int(_cast("uintptr_t", ptr_or_array))


def is_gpu(obj):
    """True for device memory: torch CUDA/HIP tensors and __cuda_array_interface__ objects."""
    if getattr(obj, "is_cuda", False) is True:
        return True
    # torch raises AttributeError for the CPU tensors' property, so hasattr is enough.
    return hasattr(obj, "__cuda_array_interface__")


def _gpu_buffer(obj, what):
    """(ptr, nbytes, itemsize, rows, row_elems, True) of a device buffer (ptr: a cdata `void *`)."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):  # torch
        dtype = str(obj.dtype).replace("torch.", "")
        if dtype not in DTYPE_NAMES:
            raise UnsupportedDtypeError(f"unsupported dtype: {obj.dtype}")
        if not obj.is_contiguous():
            raise InvalidArgumentError(f"{what} must be contiguous (call .contiguous() on the tensor)")
        shape, itemsize, ptr = tuple(obj.shape), obj.element_size(), obj.data_ptr()
    else:
        cai = obj.__cuda_array_interface__
        shape, itemsize, ptr = tuple(cai["shape"]), np.dtype(cai["typestr"]).itemsize, cai["data"][0]
        strides = cai.get("strides")
        if strides is not None and tuple(strides) != _c_strides(shape, itemsize):
            raise InvalidArgumentError(f"{what} must be C-contiguous (got strides {tuple(strides)} for shape {shape})")
    if not shape:
        raise InvalidArgumentError(f"{what} must have at least one dimension (its rows)")
    rows = shape[0]
    elems = int(np.prod(shape, dtype=np.int64))
    row_elems = elems // rows if rows else int(np.prod(shape[1:], dtype=np.int64))
    return device_pointer(ptr), elems * itemsize, itemsize, rows, row_elems, True


def _c_strides(shape, itemsize):
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def stream_of(obj):
    """The CUDA stream a read into device buffer `obj` is ordered on: torch's
    current stream of the tensor's device; None (the library's synchronous
    default) for other objects and for the legacy default stream."""
    if hasattr(obj, "data_ptr") and getattr(obj, "is_cuda", False):
        import torch
        handle = torch.cuda.current_stream(obj.device).cuda_stream
        return handle or None
    return None


def extract(obj, what="arr", writable=False, check_dtype=True):
    """Returns (ptr, nbytes, itemsize, rows, row_elems, is_gpu) for `obj`.

    ptr is a cdata `void *` (see :func:`address` for its integer value);
    rows is shape[0]; row_elems is the number of elements per row (the
    product of shape[1:], so zero-row arrays still describe their rows).
    Host memory is never copied: a pointer to the caller's data is returned.
    """
    if not isinstance(obj, np.ndarray):
        if is_gpu(obj):
            return _gpu_buffer(obj, what)
        if hasattr(obj, "__array_interface__"):
            obj = np.asarray(obj)  # a view of the caller's memory, not a copy
        elif hasattr(obj, "dtype"):
            # e.g. a CPU torch tensor: DDStore 3.0 refuses it on its dtype.
            raise UnsupportedDtypeError(
                f"unsupported dtype: {obj.dtype} ({type(obj).__name__}; pass a numpy array, "
                "e.g. tensor.numpy())"
            )
        else:
            raise ArgumentTypeError(
                f"{what} must be a numpy array (or expose __array_interface__), "
                f"got {type(obj).__name__}"
            )
    if check_dtype and obj.dtype not in HOST_DTYPES:
        raise UnsupportedDtypeError(f"unsupported dtype: {obj.dtype}")
    flags = obj.flags
    if not flags.c_contiguous:
        raise InvalidArgumentError(
            f"{what} must be C-contiguous (got strides {obj.strides} for shape {obj.shape}); "
            "use numpy.ascontiguousarray"
        )
    if writable and not flags.writeable:
        raise InvalidArgumentError(f"{what} is read-only; reads need a writable array")
    nbytes = obj.nbytes
    ptr = _from_buffer(obj)
    shape = obj.shape
    if not shape:
        raise InvalidArgumentError(f"{what} must have at least one dimension (its rows)")
    rows = shape[0]
    if rows:
        row_elems = obj.size // rows
    else:
        row_elems = 1
        for n in shape[1:]:
            row_elems *= n
    return ptr, nbytes, obj.itemsize, rows, row_elems, False
