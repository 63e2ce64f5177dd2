"""tracejit.errors: the C library's error codes as exceptions, named as TensorFlow's."""
from . import _tracejit as _c


class TracejitError(Exception):
    """Any error the C library reports; the message is its own."""


class InvalidArgumentError(TracejitError, ValueError):
    pass


class ResourceExhaustedError(TracejitError, MemoryError):
    pass


class FailedPreconditionError(TracejitError):
    pass


class UnimplementedError(TracejitError, NotImplementedError):
    pass


_c._set_error_classes({
    _c.ERR_INVALID: InvalidArgumentError,
    _c.ERR_DTYPE: InvalidArgumentError,
    _c.ERR_SHAPE: InvalidArgumentError,
    _c.ERR_RUNTIME: InvalidArgumentError,
    _c.ERR_OOM: ResourceExhaustedError,
    _c.ERR_STATE: FailedPreconditionError,
    _c.ERR_UNSUPPORTED: UnimplementedError,
})
