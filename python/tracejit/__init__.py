"""tracejit: tf.function-style tracing and compilation, over the C library's public API.

    import tracejit as tj

    @tj.function
    def f(x, y):
        return tj.tanh(x @ y) + 1

    f(tj.constant([[1.0, 2.0]]), tj.ones([2, 2]))   # traced and compiled once per signature

Tensors share their memory with NumPy (np.asarray(t) copies nothing) and print as TensorFlow's.
"""
import functools
import inspect

from . import errors
from ._tracejit import (Tensor, cast, constant, exp, log, matmul, maximum, minimum, ones, relu,
                        reduce_sum, sqrt, tanh, zeros)
from ._tracejit import _Function

__all__ = ["Tensor", "function", "constant", "zeros", "ones", "cast", "exp", "log", "tanh",
           "relu", "sqrt", "matmul", "maximum", "minimum", "reduce_sum", "errors"]


class Function:
    """A Python function traced into a graph per input signature, compiled and cached."""

    def __init__(self, fn, backend=None):
        functools.update_wrapper(self, fn)
        params = inspect.signature(fn).parameters.values()
        if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
            raise TypeError("tracejit.function: positional tensor arguments only, for now")
        self._fn = fn
        self._impl = _Function(fn, len(inspect.signature(fn).parameters), fn.__name__, backend)

    def __call__(self, *args):
        return self._impl(*args)

    def experimental_get_tracing_count(self):
        return self._impl.experimental_get_tracing_count()


def function(fn=None, *, backend=None):
    """@tj.function or @tj.function(backend="cpu"): as tf.function(jit_compile=True)."""
    if fn is None:
        return lambda f: Function(f, backend)
    return Function(fn, backend)
