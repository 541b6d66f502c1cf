"""Exceptions raised by pyddstore.

Every error is a :class:`DDStoreError` *and* the builtin exception that
DDStore 3.0's ``PyDDStore`` raised in the same situation, so code written for
DDStore (``except IndexError``, ``except ValueError``, ...) keeps working and
new code can catch everything from this package with one clause.
"""

import re

# Status codes of the C API (dds_status in include/ddstore.h), generated
# into _constants.py by scripts/gen-bindings.py.
from ._constants import (  # noqa: F401  (part of this module's interface)
    DDS_OK, DDS_ERR_INVALID_ARGUMENT, DDS_ERR_UNKNOWN_VARIABLE, DDS_ERR_DUPLICATE_VARIABLE,
    DDS_ERR_INDEX_OUT_OF_RANGE, DDS_ERR_MISMATCH, DDS_ERR_BAD_STATE, DDS_ERR_UNSUPPORTED, DDS_ERR_MPI,
    DDS_ERR_FABRIC, DDS_ERR_GPU, DDS_ERR_TIMEOUT, DDS_ERR_NO_MEMORY, DDS_ERR_IO, DDS_ERR_INTERNAL,
)


class DDStoreError(Exception):
    """Base of every pyddstore error.

    ``status`` is the C status code (``None`` for errors detected in Python
    before the library was called).
    """

    status = None


# -- errors the C library reports ------------------------------------------

class InvalidArgumentError(DDStoreError, ValueError):
    status = DDS_ERR_INVALID_ARGUMENT


class UnknownVariableError(DDStoreError, IndexError):
    status = DDS_ERR_UNKNOWN_VARIABLE


class DuplicateVariableError(DDStoreError, ValueError):
    status = DDS_ERR_DUPLICATE_VARIABLE


class IndexOutOfRangeError(DDStoreError, IndexError):
    status = DDS_ERR_INDEX_OUT_OF_RANGE


class MismatchError(DDStoreError, ValueError):
    status = DDS_ERR_MISMATCH


class BadStateError(DDStoreError, RuntimeError):
    status = DDS_ERR_BAD_STATE


# NotImplementedError is itself a RuntimeError, so this also satisfies code
# that expects DDStore's RuntimeError for an unavailable method or role.
class UnsupportedError(DDStoreError, NotImplementedError):
    status = DDS_ERR_UNSUPPORTED


class MPIError(DDStoreError, RuntimeError):
    status = DDS_ERR_MPI


class FabricError(DDStoreError, RuntimeError):
    status = DDS_ERR_FABRIC


class GPUError(DDStoreError, RuntimeError):
    status = DDS_ERR_GPU


class DDStoreTimeoutError(DDStoreError, RuntimeError, TimeoutError):
    status = DDS_ERR_TIMEOUT


class NoMemoryError(DDStoreError, RuntimeError):
    status = DDS_ERR_NO_MEMORY


class HandshakeIOError(DDStoreError, RuntimeError):
    status = DDS_ERR_IO


class InternalError(DDStoreError, RuntimeError):
    status = DDS_ERR_INTERNAL


# -- errors detected in Python ----------------------------------------------

class UnsupportedDtypeError(DDStoreError, NotImplementedError):
    """A buffer whose element type the store cannot hold."""


class ArgumentTypeError(DDStoreError, TypeError):
    """An argument of the wrong Python type (name not a str, ...)."""


class GPUBufferError(DDStoreError, RuntimeError):
    """A buffer that presents itself as device memory but that the library cannot reach."""


class LibraryNotFoundError(DDStoreError, OSError):
    """libddstore.so could not be loaded; the message lists what was tried."""


BY_STATUS = {
    cls.status: cls
    for cls in (
        InvalidArgumentError, UnknownVariableError, DuplicateVariableError,
        IndexOutOfRangeError, MismatchError, BadStateError, UnsupportedError,
        MPIError, FabricError, GPUError, DDStoreTimeoutError, NoMemoryError,
        HandshakeIOError, InternalError,
    )
}


# Errors detected in Python that fail a collective call on every rank
# (dds_fail_collective): the failing rank's message starts with the class
# name, so every rank raises the same class (error_for).
PY_DETECTED = {cls.__name__: cls for cls in (UnsupportedDtypeError, ArgumentTypeError, GPUBufferError)}
PY_STATUS = {UnsupportedDtypeError: DDS_ERR_UNSUPPORTED, GPUBufferError: DDS_ERR_GPU}


def collective_message(exc):
    """What a rank that failed `exc` before a collective call tells the
    others: its message, led by its class when Python detected it."""
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ in PY_DETECTED else text


def collective_status(exc):
    """The status a rank that failed `exc` before a collective call
    contributes (the library's own for its classes)."""
    return getattr(exc, "status", None) or PY_STATUS.get(type(exc)) or DDS_ERR_INVALID_ARGUMENT


_LED_BY_CLASS = re.compile(r"^\w+: rank \d+: (\w+): ")


def error_for(status, message):
    """The exception for a failed C call (an unknown code becomes InternalError).
    A collective failed by a rank's Python-side check raises that check's
    class on every rank."""
    led = _LED_BY_CLASS.match(message)
    if led and led.group(1) in PY_DETECTED:
        return PY_DETECTED[led.group(1)](message)
    cls = BY_STATUS.get(status)
    if cls is None:
        exc = InternalError(f"{message} (unknown status {status})")
        exc.status = status
        return exc
    return cls(message)


__all__ = [name for name, obj in globals().items()
           if isinstance(obj, type) and issubclass(obj, DDStoreError)]
