"""Checking every scalar, name and index array before it crosses into C.

ctypes converts a Python int to ``int32_t``/``int64_t``/``size_t`` by
wrapping it silently (2**64 + 5 becomes 5), truncates a ``char *`` at the
first NUL, and numpy's casts wrap or truncate index arrays. So every value
is checked here against the C parameter's type first, and refused with a
DDStoreError subclass that names the argument.

The rules (docs/python.md, "Arguments"):

* An integer argument is a Python ``int`` or anything with ``__index__``
  (numpy integer scalars of every width). ``bool`` and ``numpy.bool_`` are
  refused (ArgumentTypeError): a flag passed as a row number is a bug.
  Floats, None and strings are refused (ArgumentTypeError, a TypeError).
* A value outside the C type's range is refused before the call:
  IndexOutOfRangeError (an IndexError) for row numbers, InvalidArgumentError
  (a ValueError) for sizes and counts.
* A name is a ``str`` whose UTF-8 encoding has no NUL byte (and no lone
  surrogate); the library refuses names over 255 bytes.
* Indices are a one-dimensional array (or sequence) of integers: an integer
  dtype, or Python ints; floats, bools, None, strings and values outside
  int64 are refused. An int64 ndarray is passed as it is (no copy, no
  per-element work).
"""

import operator

import numpy as np

from ._errors import ArgumentTypeError, IndexOutOfRangeError, InvalidArgumentError

# The element types DDStore 3.0 accepts, by their numpy (and torch) names:
# the one list every dtype check of the package reads (the store itself
# only cares about the item size).
DTYPE_NAMES = ("bool", "uint8", "int32", "int64", "float32", "float64")

I32 = (-(1 << 31), (1 << 31) - 1)
I64 = (-(1 << 63), (1 << 63) - 1)
I64_MIN, I64_MAX = I64

_INT64 = np.dtype(np.int64)
_ndarray = np.ndarray
_bools = (bool, np.bool_)


def to_int(value, what, bounds=I64, cls=InvalidArgumentError):
    """`value` as a Python int within `bounds` (inclusive), or a DDStoreError."""
    if type(value) is not int:
        if isinstance(value, _bools):
            raise ArgumentTypeError(f"{what} must be an int, got a bool ({value!r})")
        try:
            value = operator.index(value)
        except TypeError:
            raise ArgumentTypeError(f"{what} must be an int, got {type(value).__name__} ({value!r})") from None
    lo, hi = bounds
    if not lo <= value <= hi:
        raise cls(f"{what}={value} is outside the range the C API takes ([{lo}, {hi}])")
    return value


def row(value, what):
    """A row number (int64): IndexOutOfRangeError when outside int64."""
    return to_int(value, what, I64, IndexOutOfRangeError)


def cname(name):
    """The C string of a variable name: UTF-8, no NUL."""
    if type(name) is not str:
        if not isinstance(name, str):
            raise ArgumentTypeError(f"name must be a str, got {type(name).__name__}")
        name = str(name)
    return cstring(name, "name")


def cstring(value, what):
    """A str argument as a C string: UTF-8 without NUL, or InvalidArgumentError."""
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            f"{what} {value!r} cannot be encoded as UTF-8 ({exc.reason} at position {exc.start})") from None
    if b"\0" in encoded:
        raise InvalidArgumentError(
            f"{what} {value!r} contains a NUL character (at position {value.index(chr(0))}), "
            "which a C string cannot hold")
    return encoded


def safe_cname(name):
    """A C string standing for `name` when reporting a failure (never raises;
    None, i.e. NULL, when `name` is not a str)."""
    if isinstance(name, str):
        b = name.encode("utf-8", "replace").replace(b"\0", b"?")[:255]
        return b or b"?"
    return None


def indices(value):
    """A C-contiguous 1-D int64 array of `value` (see the module's rules)."""
    if type(value) is _ndarray and value.dtype == _INT64:
        if value.ndim != 1:
            raise InvalidArgumentError(f"indices must be one-dimensional, got shape {value.shape}")
        return value if value.flags.c_contiguous else np.ascontiguousarray(value)
    if not isinstance(value, _ndarray):
        if isinstance(value, (str, bytes)) or value is None or isinstance(value, (int, float, np.generic)):
            raise ArgumentTypeError(f"indices must be a sequence of ints, got {type(value).__name__} ({value!r})")
        if isinstance(value, (list, tuple)):
            for k, v in enumerate(value):
                if isinstance(v, _bools):
                    raise ArgumentTypeError(f"indices[{k}] must be an int, got a bool ({v!r})")
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ArgumentTypeError(f"indices must be a sequence of ints: {exc}") from None
    else:
        arr = value
    if arr.ndim != 1:
        raise InvalidArgumentError(f"indices must be one-dimensional, got shape {arr.shape}")
    kind = arr.dtype.kind
    if arr.size == 0 and kind != "O":
        return np.zeros(0, np.int64)  # [] is float64 to numpy
    if kind == "i":
        return np.ascontiguousarray(arr, dtype=np.int64)
    if kind == "u":
        if arr.dtype.itemsize == 8:
            big = np.flatnonzero(arr > np.uint64(I64_MAX))
            if big.size:
                k = int(big[0])
                raise IndexOutOfRangeError(
                    f"indices[{k}]={int(arr[k])} is outside the range the C API takes (int64)")
        return np.ascontiguousarray(arr, dtype=np.int64)
    if kind == "O":
        out = np.empty(arr.shape[0], np.int64)
        for k, v in enumerate(arr):
            out[k] = to_int(v, f"indices[{k}]", I64, IndexOutOfRangeError)
        return out
    raise ArgumentTypeError(f"indices must be integers, got an array of {arr.dtype}")


# The words the library accepts for its on/off variables (src/config.rs,
# `switch`); the same set here, so "off" means off on both sides.
_ON = frozenset(("1", "on", "true", "yes"))
_OFF = frozenset(("0", "off", "false", "no"))


def env_switch(var, default, environ=None):
    """An on/off environment variable read by the Python layer: unset or
    empty is `default`; anything outside the documented words is refused."""
    import os
    raw = (os.environ if environ is None else environ).get(var, "")
    value = raw.strip().lower()
    if not value:
        return default
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise InvalidArgumentError(f"{var}={raw!r} is not one of 1/0, on/off, true/false, yes/no")


def env_int(var, default, lo, hi, environ=None):
    """An integer environment variable read by the Python layer, in [lo, hi]."""
    import os
    raw = (os.environ if environ is None else environ).get(var, "")
    if not raw.strip():
        return default
    try:
        value = int(raw.strip(), 10)
    except ValueError:
        raise InvalidArgumentError(f"{var}={raw!r} is not a whole number") from None
    if not lo <= value <= hi:
        raise InvalidArgumentError(f"{var}={value} is outside [{lo}, {hi}]")
    return value
