"""peer_numpy.py — numpy (eager only, OpenBLAS for matmul) on every workload, plus the memcpy
bandwidth baseline of the elementwise chains (np.copyto of 2^24 f32 into a preallocated array,
counted as bytes read + written like the chains). The convolution is im2col + matmul."""
import common
from common import Runner, WORKLOADS, TANH_A, TANH_B, TANH_C
import numpy as np

R = Runner("numpy", {})
W = {k: w.inputs if R.wants(k) else None for k, w in WORKLOADS.items() if k not in (
    "first_call_50op", "retrace_50op")}
E = "numpy"


def conv(x, w, b):
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(-1, 900)
    return (cols @ w.reshape(900, 100) + b).reshape(1, 198, 198, 100)


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def power(x):
    r = np.eye(10, dtype=np.int32)
    for _ in range(100):
        r = x @ r
    return r


if R.wants("call_overhead"):
    a, b = W["call_overhead"]
    R.time("call_overhead", E, "eager", lambda: lambda: np.add(a, b))
if R.wants("power_10x10_i32"):
    (x,) = W["power_10x10_i32"]
    R.time("power_10x10_i32", E, "eager", lambda: lambda: power(x))
if R.wants("conv2d_200x200x100"):
    x, w, b = W["conv2d_200x200x100"]
    R.time("conv2d_200x200x100", E, "eager", lambda: lambda: conv(x, w, b), note="im2col+matmul")
if R.wants("ew_poly_2e24") or R.wants("ew_tanh_2e24"):
    (x,) = WORKLOADS["ew_poly_2e24"].inputs
    R.time("ew_poly_2e24", E, "eager", lambda: lambda: (x * 2 + 1) * x - 3)
    R.time("ew_tanh_2e24", E, "eager",
           lambda: lambda: np.tanh(x * np.float32(TANH_A) + np.float32(TANH_B))
           * np.float32(TANH_C) - x)
    # memcpy baseline: recorded under the poly workload's name with impl "memcpy"
    dst = np.empty_like(x)
    R.time("ew_poly_2e24", "memcpy (np.copyto)", "baseline",
           lambda: lambda: np.copyto(dst, x), check=False, note="bandwidth baseline")
for n in common.MATMUL_SIZES:
    k = f"matmul_f32_{n}"
    if R.wants(k):
        a, b = W[k]
        R.time(k, E, "eager", lambda: lambda: a @ b)
if R.wants("dense_bias_relu_1024"):
    x, w, b = W["dense_bias_relu_1024"]
    R.time("dense_bias_relu_1024", E, "eager", lambda: lambda: np.maximum(x @ w + b, 0))
if R.wants("softmax_4096"):
    (x,) = W["softmax_4096"]
    R.time("softmax_4096", E, "eager", lambda: lambda: softmax(x))


def while_tanh(x):
    while float(np.sum(x)) > common.WT_LIMIT:
        x = np.tanh(x)
    return x


def rnn(xs, h0, W, U, b):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ W + h @ U + b)
    return h


for name, fn in [("while_tanh", while_tanh), ("rnn_scan", rnn)]:
    if R.wants(name):
        args = WORKLOADS[name].inputs
        R.time(name, E, "eager", lambda fn=fn, args=args: lambda: fn(*args), note="Python loop")
R.unsupported("fizzbuzz_1e5", E, "eager", "a scalar loop: no array formulation")
R.save()
