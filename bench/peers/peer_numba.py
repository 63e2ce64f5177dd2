"""peer_numba.py — numba: the workloads written as @njit loops (parallel=True with prange over 2
threads where the loop is parallel), np.dot (BLAS) for the matmuls. numba has no eager mode; its
"first call" compiles for the argument types, and a new shape of the same dtype and rank does not
recompile (reported as such)."""
import time

import common
from common import Runner, WORKLOADS, TANH_A, TANH_B, TANH_C
import numba
from numba import njit, prange
import numpy as np

numba.set_num_threads(common.THREADS)
R = Runner("numba", common.dist_versions("numba", "llvmlite"))
R.versions["numba_threading_layer"] = numba.config.THREADING_LAYER
E = "numba @njit"
f32 = np.float32


@njit
def add2(a, b):
    return a + b


@njit
def power(x):
    r = np.eye(10, dtype=np.int32)
    t = np.empty((10, 10), dtype=np.int32)
    for _ in range(100):
        for i in range(10):
            for j in range(10):
                acc = np.uint64(0)
                for k in range(10):
                    acc += np.uint64(np.int64(x[i, k])) * np.uint64(np.int64(r[k, j]))
                t[i, j] = np.int32(np.uint32(acc & np.uint64(0xFFFFFFFF)))
        r[:, :] = t
    return r


@njit(parallel=True)
def conv(x, w, b):
    oh, ow, c, fo = x.shape[1] - 2, x.shape[2] - 2, x.shape[3], w.shape[3]
    out = np.empty((1, oh, ow, fo), dtype=np.float32)
    for i in prange(oh):
        for j in range(ow):
            acc = b.copy()
            for kh in range(3):
                for kw in range(3):
                    for ci in range(c):
                        xv = x[0, i + kh, j + kw, ci]
                        for f in range(fo):
                            acc[f] += xv * w[kh, kw, ci, f]
            out[0, i, j, :] = acc
    return out


@njit(parallel=True)
def poly(x):
    y = np.empty_like(x)
    for i in prange(x.size):
        v = x[i]
        y[i] = (v * f32(2) + f32(1)) * v - f32(3)
    return y


@njit(parallel=True)
def tanh_chain(x):
    y = np.empty_like(x)
    for i in prange(x.size):
        v = x[i]
        y[i] = np.tanh(v * f32(TANH_A) + f32(TANH_B)) * f32(TANH_C) - v
    return y


@njit
def matmul(a, b):
    return np.dot(a, b)


@njit(parallel=True)
def dense(x, w, b):
    y = np.dot(x, w)
    for i in prange(y.shape[0]):
        for j in range(y.shape[1]):
            y[i, j] = max(y[i, j] + b[j], f32(0))
    return y


@njit(parallel=True)
def softmax(x):
    y = np.empty_like(x)
    for i in prange(x.shape[0]):
        m = x[i, 0]
        for j in range(x.shape[1]):
            m = max(m, x[i, j])
        s = f32(0)
        for j in range(x.shape[1]):
            e = np.exp(x[i, j] - m)
            y[i, j] = e
            s += e
        for j in range(x.shape[1]):
            y[i, j] /= s
    return y


def fresh_chain():
    def chain(x):
        y = x
        for _ in range(common.CHAIN_STEPS):
            y = y * f32(1.0001) - f32(0.5)
        return y
    return chain


BODIES = {"call_overhead": add2, "power_10x10_i32": power, "conv2d_200x200x100": conv,
          "ew_poly_2e24": poly, "ew_tanh_2e24": tanh_chain, "dense_bias_relu_1024": dense,
          "softmax_4096": softmax}
for n in common.MATMUL_SIZES:
    BODIES[f"matmul_f32_{n}"] = matmul
for name, fn in BODIES.items():
    if R.wants(name):
        args = WORKLOADS[name].inputs
        note = "np.dot (BLAS)" if "matmul" in name or "dense" in name else ""
        R.time(name, E, "compiled", lambda fn=fn, args=args: lambda: fn(*args), note=note)

x16 = WORKLOADS["first_call_50op"].inputs[0]
x32 = WORKLOADS["retrace_50op"].inputs[0]
R.first_call("first_call_50op", E,
             lambda: common.timed_first(lambda: njit(fresh_chain()), lambda f: f(x16)))


def retrace():
    f = njit(fresh_chain())
    f(x16)
    n0 = len(f.signatures)
    t0 = time.perf_counter()
    out = f(x32)
    secs = time.perf_counter() - t0
    assert len(f.signatures) == n0  # same dtype and rank: no new specialization
    return secs, out


R.first_call("retrace_50op", E, retrace, note="no recompile: specializes on dtype/rank, not shape")


# --- control flow: plain loops and ifs in @njit code (what a C programmer would write) -----------
@njit
def while_tanh(x0):
    x = x0.copy()
    while True:
        s = 0.0
        for i in range(x.size):
            s += x[i]
        if not s > common.WT_LIMIT:
            return x
        for i in range(x.size):
            x[i] = np.tanh(x[i])


@njit
def rnn(xs, h0, W, U, b):
    h = h0.copy()
    for t in range(xs.shape[0]):
        h = np.tanh(np.dot(xs[t], W) + np.dot(h, U) + b)
    return h


@njit
def fizzbuzz(n):
    c = np.zeros(4, np.int64)
    for i in range(1, n + 1):
        if i % 15 == 0:
            c[0] += 1
        elif i % 3 == 0:
            c[1] += 1
        elif i % 5 == 0:
            c[2] += 1
        else:
            c[3] += 1
    return c


for name, fn in [("while_tanh", while_tanh), ("rnn_scan", rnn), ("fizzbuzz_1e5", fizzbuzz)]:
    if R.wants(name):
        args = WORKLOADS[name].inputs
        R.time(name, E, "compiled", lambda fn=fn, args=args: lambda: fn(*args),
               note="np.dot (BLAS)" if name == "rnn_scan" else "")
R.save()
