"""The first part of the Python package: tensors, operators, NumPy without copies, functions that
trace once per signature, and C errors as Python exceptions."""
import numpy as np
import pytest

import tracejit as tj


def test_constant_shape_dtype_repr():
    t = tj.constant([1, 2, 3])
    assert t.shape == (3,)
    assert t.dtype == "int32"
    assert repr(t) == "tj.Tensor([1 2 3], shape=(3,), dtype=int32)"
    f = tj.constant([[1.5, 2.0]], dtype="float64")
    assert f.shape == (1, 2) and f.dtype == "float64"
    assert tj.zeros([2, 3]).dtype == "float32"
    np.testing.assert_array_equal(tj.ones([2], dtype="int64").numpy(), [1, 1])


def test_operators_match_numpy():
    a = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    b = np.linspace(1, 2, 6, dtype=np.float32).reshape(2, 3)
    x, y = tj.constant(a), tj.constant(b)
    np.testing.assert_allclose((x + y).numpy(), a + b)
    np.testing.assert_allclose((x - 1).numpy(), a - 1)
    np.testing.assert_allclose((2 * x).numpy(), 2 * a)
    np.testing.assert_allclose((x / y).numpy(), a / b, rtol=1e-6)
    np.testing.assert_allclose((x // y).numpy(), a // b)
    np.testing.assert_allclose((x % y).numpy(), np.mod(a, b), rtol=1e-6)
    np.testing.assert_allclose((x ** 2).numpy(), a ** 2)
    np.testing.assert_allclose((-x).numpy(), -a)
    np.testing.assert_allclose(abs(x).numpy(), abs(a))
    np.testing.assert_allclose((x @ tj.constant(b.T)).numpy(), a @ b.T, rtol=1e-6)
    np.testing.assert_array_equal((x < y).numpy(), a < b)
    np.testing.assert_allclose(tj.reduce_sum(x, axis=1).numpy(), a.sum(axis=1), rtol=1e-6)
    assert float(tj.reduce_sum(tj.constant([1.0, 2.0]))) == 3.0


def test_numpy_shares_memory():
    t = tj.constant(np.arange(1 << 20, dtype=np.float32))
    a = np.asarray(t)
    b = np.asarray(t)
    assert a.dtype == np.float32 and a.shape == (1 << 20,)
    assert np.shares_memory(a, b)  # both views of the tensor's own memory
    assert not a.flags.writeable  # tensors are immutable
    del t  # the arrays keep the tensor alive
    assert a[12345] == 12345.0


def test_function_traces_once_per_signature():
    calls = []

    @tj.function
    def f(x, y):
        calls.append(1)  # runs while tracing only
        return tj.tanh(x @ y) + 1

    x = tj.constant([[1.0, 2.0]])
    w = tj.ones([2, 2])
    r1 = f(x, w)
    r2 = f(tj.constant([[3.0, 4.0]]), w)
    np.testing.assert_allclose(r1.numpy(), np.tanh([[3.0, 3.0]]) + 1, rtol=1e-6)
    np.testing.assert_allclose(r2.numpy(), np.tanh([[7.0, 7.0]]) + 1, rtol=1e-6)
    assert f.experimental_get_tracing_count() == 1 and len(calls) == 1
    f(tj.constant([[1.0, 2.0], [3.0, 4.0]]), w)  # a new shape: traced again
    assert f.experimental_get_tracing_count() == 2


def test_function_returns_tuples():
    @tj.function
    def g(x):
        return x + 1, x * 2

    a, b = g(tj.constant([1.0, 2.0]))
    np.testing.assert_allclose(a.numpy(), [2.0, 3.0])
    np.testing.assert_allclose(b.numpy(), [2.0, 4.0])


def test_errors_are_exceptions():
    with pytest.raises(tj.errors.InvalidArgumentError, match="matmul"):
        tj.constant([[1.0, 2.0]]) @ tj.constant([[1.0, 2.0]])
    with pytest.raises(TypeError):
        tj.constant([1.0]) + object()

    @tj.function
    def bad(x):
        raise KeyError("inside the trace")

    with pytest.raises(KeyError, match="inside the trace"):
        bad(tj.constant([1.0]))
    with pytest.raises(KeyError):  # a failed trace is not cached: it runs (and raises) again
        bad(tj.constant([1.0]))


def test_symbolic_tensor_as_bool_is_an_error():
    @tj.function
    def h(x):
        if x > 0:  # no AutoGraph yet: a Python bool of a traced tensor
            return x
        return -x

    with pytest.raises(tj.errors.FailedPreconditionError, match="Python bool"):
        h(tj.constant(1.0))


def test_threads_call_one_function():
    """The GIL is let go around compiled calls: threads run one function at once, each getting
    its own results (and a trace's Python runs with the GIL taken back)."""
    import threading

    @tj.function
    def f(x):
        return tj.reduce_sum(tj.tanh(x) * x)

    xs = [tj.constant(np.linspace(-1, 1, 1000, dtype=np.float32) * (k + 1)) for k in range(8)]
    want = [float(np.sum(np.tanh(np.asarray(x)) * np.asarray(x))) for x in xs]
    got = [None] * len(xs)

    def run(k):
        for _ in range(50):
            got[k] = float(f(xs[k]))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert f.experimental_get_tracing_count() == 1


def test_references_stay_flat():
    """Calls and operators leave no reference behind: the arguments' counts are unchanged."""
    import sys

    @tj.function
    def g(x, y):
        return x * y + 1

    x, y = tj.constant([1.0, 2.0]), tj.constant([3.0, 4.0])
    g(x, y)
    before = (sys.getrefcount(x), sys.getrefcount(y))
    for _ in range(1000):
        r = g(x, y)
        s = x + y
        a = np.asarray(r)
    del r, s, a
    assert (sys.getrefcount(x), sys.getrefcount(y)) == before


def test_python_values_are_static_arguments():
    """A Python bool, int, float or str argument is baked into the trace and keyed by its value:
    a new value traces again, the same one does not (tf.function's rule, S4); the traced
    function sees the Python value."""
    seen = []

    @tj.function
    def scale(x, n, name):
        seen.append((n, name))
        return x * n

    x = tj.constant([1.0, 2.0])
    np.testing.assert_allclose(scale(x, 2, "a").numpy(), [2.0, 4.0])
    np.testing.assert_allclose(scale(x, 2, "a").numpy(), [2.0, 4.0])
    np.testing.assert_allclose(scale(x, 3, "a").numpy(), [3.0, 6.0])
    scale(x, 3, "b")
    assert seen == [(2, "a"), (3, "a"), (3, "b")]
    assert scale.experimental_get_tracing_count() == 3
    assert isinstance(seen[0][0], int) and isinstance(seen[0][1], str)


def test_stubs_name_what_the_module_has():
    """The type stubs are installed beside the package and name only what it exports."""
    import ast
    import pathlib

    stub = pathlib.Path(tj.__file__).with_name("__init__.pyi")
    assert stub.exists() and stub.with_name("py.typed").exists()
    names = {n.name for n in ast.parse(stub.read_text()).body
             if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert names <= set(dir(tj)), names - set(dir(tj))
    assert {"Tensor", "function", "constant", "reduce_sum"} <= names
