"""Exceptions raised by pyddstore.

Every error is a :class:`DDStoreError` *and* the builtin exception that
DDStore 3.0's ``PyDDStore`` raised in the same situation, so code written for
DDStore (``except IndexError``, ``except ValueError``, ...) keeps working and
new code can catch everything from this package with one clause.
"""

# Status codes of the C API (dds_status in include/ddstore.h).
DDS_OK = 0
DDS_ERR_INVALID_ARGUMENT = 1
DDS_ERR_UNKNOWN_VARIABLE = 2
DDS_ERR_DUPLICATE_VARIABLE = 3
DDS_ERR_INDEX_OUT_OF_RANGE = 4
DDS_ERR_MISMATCH = 5
DDS_ERR_BAD_STATE = 6
DDS_ERR_UNSUPPORTED = 7
DDS_ERR_MPI = 8
DDS_ERR_FABRIC = 9
DDS_ERR_GPU = 10
DDS_ERR_TIMEOUT = 11
DDS_ERR_NO_MEMORY = 12
DDS_ERR_IO = 13
DDS_ERR_INTERNAL = 14


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


def error_for(status, message):
    """The exception for a failed C call (an unknown code becomes InternalError)."""
    cls = BY_STATUS.get(status)
    if cls is None:
        exc = InternalError(f"{message} (unknown status {status})")
        exc.status = status
        return exc
    return cls(message)


__all__ = [name for name, obj in globals().items()
           if isinstance(obj, type) and issubclass(obj, DDStoreError)]
