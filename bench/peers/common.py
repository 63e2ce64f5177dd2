"""common.py — shared by the peer benchmarks (bench/peers/peer_*.py): the thread setup (2 threads
for everyone, set before any framework is imported), the workloads (shapes, dtypes, seeded inputs,
float64/exact numpy references and tolerances, bytes and flops), the timer (warm-up excluded,
median/min/max over repeated runs) and the JSON writer. Every peer checks its first output against
the reference before timing; a peer whose result differs is recorded as "failed", not timed."""
import os

THREADS = 2
# Before numpy or any framework loads its thread pools.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
             "TF_NUM_INTRAOP_THREADS"):
    os.environ[_var] = str(THREADS)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
try:  # pin the process to THREADS CPUs: pools sized from the schedulable CPUs (XLA) follow
    _cpus = sorted(os.sched_getaffinity(0))[:THREADS]
    os.sched_setaffinity(0, _cpus)
except (AttributeError, OSError):
    pass

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import numpy as np  # noqa: E402

EW_N = 1 << 24
MATMUL_SIZES = (256, 512, 1024, 2048)
CHAIN_STEPS = 25  # 50 ops: 25 x (mul, sub), as tracejit's compile_50op
TANH_A, TANH_B, TANH_C = 0.7, 0.1, 1.3  # as bench/bench_cpu.c


def replace_section(path, begin, end, section):
    """Writes section (which starts with begin and ends with end) into the markdown file at path
    in place of the text between the markers, or appended when they are missing."""
    text = open(path).read() if os.path.exists(path) else "# tracejit and its peers\n\n"
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    with open(path, "w") as f:
        f.write(text)


def _rng(seed):
    return np.random.default_rng(seed)


def power_ref(x, n=100):
    """x^n by n chained int32 matmuls with wrap-around, computed exactly in int64 then wrapped."""
    r = np.eye(x.shape[0], dtype=np.int64)
    x64 = x.astype(np.int64)
    for _ in range(n):
        r = (x64 @ r).astype(np.uint32).astype(np.int32).astype(np.int64)
    return r.astype(np.int32)


def conv_ref(x, w, b):
    """Valid 2-D convolution, NHWC input, HWIO filter, stride 1, plus bias, in float64."""
    n, h, wd, c = x.shape
    kh, kw, _, f = w.shape
    win = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (kh, kw), axis=(1, 2))
    # win: [n, h-kh+1, w-kw+1, c, kh, kw]
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(-1, kh * kw * c)
    y = cols @ w.astype(np.float64).reshape(kh * kw * c, f) + b
    return y.reshape(n, h - kh + 1, wd - kw + 1, f)


def chain_ref(x):
    y = x.copy()
    for _ in range(CHAIN_STEPS):
        y = y * np.float32(1.0001) - np.float32(0.5)
    return y


def softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class Workload:
    """name, inputs (numpy arrays), a lazily computed reference, a tolerance, bytes and flops.
    per: a function giving the number of loop iterations a call runs (the reference's), when the
    unit is per iteration: the timer divides each call's time by it."""

    def __init__(self, name, title, make_inputs, ref, tol, unit, nbytes=None, flops=None,
                 per=None):
        self.name, self.title, self.unit = name, title, unit
        self._make, self._ref_fn, self.tol = make_inputs, ref, tol
        self.nbytes, self.flops, self._per = nbytes, flops, per
        self._inputs = self._ref = None

    @property
    def per(self):
        return self._per() if self._per else 1

    @property
    def inputs(self):
        if self._inputs is None:
            self._inputs = self._make()
        return self._inputs

    @property
    def ref(self):
        if self._ref is None:
            self._ref = self._ref_fn(*self.inputs)
        return self._ref

    def check(self, out):
        """(ok, error, text): exact for integers; ("elem", rtol, atol): |out - ref| <= atol +
        rtol * |ref| element by element; ("max", rtol, atol): max |out - ref| <= atol + rtol *
        max |ref| (reductions, whose rounding error scales with the whole row)."""
        out = np.asarray(out)
        ref = self.ref
        if out.shape != ref.shape:
            return False, None, f"shape {list(out.shape)} != {list(ref.shape)}"
        if self.tol is None:
            bad = int(np.count_nonzero(out != ref))
            return bad == 0, float(bad), f"{bad} elements differ (exact match required)"
        kind, rtol, atol = self.tol
        diff = np.abs(out.astype(np.float64) - ref)
        err = float(np.max(diff))
        if kind == "elem":
            bad = int(np.count_nonzero(diff > atol + rtol * np.abs(ref)))
            return bad == 0, err, f"{bad} elements beyond tolerance, max abs error {err:.3g}"
        lim = atol + rtol * float(np.max(np.abs(ref)))
        return err <= lim, err, f"max abs error {err:.3g} (limit {lim:.3g})"

    def tol_text(self):
        if self.tol is None:
            return "exact"
        kind, rtol, atol = self.tol
        scale = "|ref|" if kind == "elem" else "max|ref|"
        return f"|err| <= {atol:g} + {rtol:g}*{scale}"


def _power_inputs():
    return (((np.arange(100) * 7 + 3) % 5 - 2).astype(np.int32).reshape(10, 10),)


def _conv_inputs():
    r = _rng(3)
    x = r.uniform(-1, 1, (1, 200, 200, 100)).astype(np.float32)
    w = (r.uniform(-1, 1, (3, 3, 100, 100)) / 30.0).astype(np.float32)
    b = r.uniform(-1, 1, (100,)).astype(np.float32)
    return x, w, b


def _matmul_inputs(n):
    def make():
        r = _rng(n)
        return (r.uniform(-1, 1, (n, n)).astype(np.float32),
                r.uniform(-1, 1, (n, n)).astype(np.float32))
    return make


def _dense_inputs():
    r = _rng(7)
    return (r.uniform(-1, 1, (1024, 1024)).astype(np.float32),
            (r.uniform(-1, 1, (1024, 1024)) / 32).astype(np.float32),
            r.uniform(-1, 1, (1024,)).astype(np.float32))


def _dense_ref(x, w, b):
    return np.maximum(x.astype(np.float64) @ w + b, 0)


def _ew_inputs():
    return (_rng(11).uniform(-3, 3, EW_N).astype(np.float32),)  # as bench/bench_cpu.c


def _poly_ref(x):
    x = x.astype(np.float64)
    return (x * 2 + 1) * x - 3


def _tanh_ref(x):
    x = x.astype(np.float64)
    return np.tanh(x * TANH_A + TANH_B) * TANH_C - x


# shapes_sweep (issue 26): relu(x @ W + b), W [256, 128], called once at each batch size 1..100
# by a function made fresh (as bench/bench_cpu.c's shapes_sweep): the total time of the 100
# calls, a compile or a retrace per new size included; the last call's output is checked
SWEEP_K, SWEEP_N, SWEEP_SIZES = 256, 128, tuple(range(1, 101))


def _sweep_inputs():
    r = _rng(9)
    return (r.uniform(-1, 1, (SWEEP_SIZES[-1], SWEEP_K)).astype(np.float32),
            (r.uniform(-1, 1, (SWEEP_K, SWEEP_N)) / 16).astype(np.float32),
            r.uniform(-1, 1, (SWEEP_N,)).astype(np.float32))


def _chain_inputs(n):
    return lambda: (np.ones(n, dtype=np.float32),)


# --- control flow (issue 10; as bench/bench_control.c) -------------------------------------------
WT_N, WT_LIMIT = 1000, 30.0  # while sum(x) > 30: x = tanh(x), x: f32[1000] in [0, 1)
RNN_T, RNN_B, RNN_H = 100, 32, 128  # h = tanh(x_t W + h U + b), 100 steps
FB_N = 100000  # fizzbuzz over 1..10^5 counting into 4 loop variables
_wt_iters = []


def _while_tanh_inputs():
    return ((((np.arange(WT_N) * 7919) % 1000).astype(np.float32) / np.float32(1000)),)


def while_tanh_ref(x):
    """The f32 loop with numpy's tanh and a float64 sum, as bench_control.c's C loop; records its
    iteration count (the per-iteration divisor for everyone)."""
    x, it = x.copy(), 0
    while float(np.sum(x, dtype=np.float64)) > WT_LIMIT:
        x = np.tanh(x)
        it += 1
    _wt_iters[:] = [it]
    return x.astype(np.float64)


def rnn_inputs():
    i = np.arange(RNN_T * RNN_B * RNN_H)
    xs = (((i * 31) % 17).astype(np.float32) / np.float32(17) - np.float32(0.5))
    j = np.arange(2 * RNN_H * RNN_H)
    w = ((((j * 13) % 23).astype(np.float32) / np.float32(23) - np.float32(0.5)) * np.float32(0.1))
    return (xs.reshape(RNN_T, RNN_B, RNN_H), np.zeros((RNN_B, RNN_H), np.float32),
            w[:RNN_H * RNN_H].reshape(RNN_H, RNN_H), w[RNN_H * RNN_H:].reshape(RNN_H, RNN_H),
            np.zeros(RNN_H, np.float32))


def rnn_ref(xs, h0, W, U, b):
    h = h0.astype(np.float64)
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t].astype(np.float64) @ W + h @ U + b)
    return h


def fizzbuzz_ref(n):
    i = np.arange(1, int(n) + 1)
    fb = i % 15 == 0
    fz = (i % 3 == 0) & ~fb
    bz = (i % 5 == 0) & ~fb
    return np.array([fb.sum(), fz.sum(), bz.sum(), len(i) - fb.sum() - fz.sum() - bz.sum()],
                    np.int64)


# --- training steps (issue 11): the seed's CNN at batch 50 with Adam 1e-3, and a 64x784 -> 256 ->
# 10 MLP with SGD 0.1. Every peer starts from these weights (Glorot uniform and zeros, as Keras),
# returns the loss its step computed (before the update), and the first call is checked against
# the float64 loss at these weights. Adam is Keras' (TF >= 2.11): alpha = lr sqrt(1 - b2^t) /
# (1 - b1^t), m += (g - m)(1 - b1), v += (g^2 - v)(1 - b2), w -= m alpha / (sqrt(v) + 1e-7).
ADAM = (1e-3, 0.9, 0.999, 1e-7)
MLP_B, MLP_I, MLP_H, MLP_O, MLP_LR = 64, 784, 256, 10, 0.1


def _glorot(rng, shape):
    recept = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    lim = np.sqrt(6.0 / (shape[-2] * recept + shape[-1] * recept))
    return rng.uniform(-lim, lim, shape).astype(np.float32)


def cnn_inputs():
    rng = _rng(21)
    w = [_glorot(rng, (5, 5, 1, 32)), np.zeros(32, np.float32), _glorot(rng, (5, 5, 32, 64)),
         np.zeros(64, np.float32), _glorot(rng, (3136, 1024)), np.zeros(1024, np.float32),
         _glorot(rng, (1024, 10)), np.zeros(10, np.float32)]
    x = rng.uniform(0, 1, (50, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, 50).astype(np.int32)
    return (x, y, *w)


def _pool2(h):
    n, hh, ww, c = h.shape
    return h.reshape(n, hh // 2, 2, ww // 2, 2, c).max(axis=(2, 4))


def cnn_ref(x, y, w1, b1, w2, b2, w3, b3, w4, b4):
    """The loss at the initial weights in float64 (SAME 5x5 convolutions: pad 2)."""
    pad = ((0, 0), (2, 2), (2, 2), (0, 0))
    h = _pool2(np.maximum(conv_ref(np.pad(x, pad), w1, b1), 0))
    h = _pool2(np.maximum(conv_ref(np.pad(h, pad), w2, b2), 0))
    h = np.maximum(h.reshape(h.shape[0], -1) @ w3.astype(np.float64) + b3, 0)
    lg = h @ w4.astype(np.float64) + b4
    p = np.exp(lg - lg.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return np.float64(np.mean(-np.log(p[np.arange(len(y)), y])))


def mlp_inputs():
    rng = _rng(22)
    x = rng.uniform(0, 1, (MLP_B, MLP_I)).astype(np.float32)
    y = rng.integers(0, MLP_O, MLP_B).astype(np.int32)
    return (x, y, _glorot(rng, (MLP_I, MLP_H)), np.zeros(MLP_H, np.float32),
            _glorot(rng, (MLP_H, MLP_O)), np.zeros(MLP_O, np.float32))


def mlp_ref(x, y, w1, b1, w2, b2):
    h = np.maximum(x.astype(np.float64) @ w1 + b1, 0)
    lg = h @ w2.astype(np.float64) + b2
    m = lg.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(lg - m).sum(axis=1))
    return np.float64(np.mean(lse - lg[np.arange(len(y)), y]))


F32 = ("elem", 1e-5, 1e-6)  # elementwise f32: (kind, rtol, atol)
RED = ("max", 1e-4, 0.0)  # matmul, dense, conv: f32 sums of up to 2048 products
WORKLOADS = {w.name: w for w in [
    Workload("call_overhead", "call overhead, add of two f32[1]",
             lambda: (np.array([1], np.float32), np.array([2], np.float32)),
             lambda a, b: a + b, ("elem", 0.0, 0.0), "ns"),
    Workload("power_10x10_i32", "power(x, 100), 10x10 int32 (S25)", _power_inputs, power_ref,
             None, "us", flops=100 * 2 * 1000),
    Workload("conv2d_200x200x100", "Conv2D 100 filters 3x3, [1,200,200,100] f32 (S25)",
             _conv_inputs, conv_ref, RED, "ms", flops=2 * 198 * 198 * 100 * 900),
    Workload("ew_poly_2e24", "y = (x*2+1)*x-3, 2^24 f32", _ew_inputs, _poly_ref, F32, "ms",
             nbytes=8 * EW_N),
    Workload("ew_tanh_2e24", "y = tanh(x*a+b)*c - x, 2^24 f32", _ew_inputs, _tanh_ref, F32, "ms",
             nbytes=8 * EW_N),
    *[Workload(f"matmul_f32_{n}", f"matmul f32 {n}x{n}", _matmul_inputs(n),
               lambda a, b: a.astype(np.float64) @ b, RED, "ms", flops=2 * n ** 3)
      for n in MATMUL_SIZES],
    Workload("dense_bias_relu_1024", "relu(x@W+b), 1024 f32", _dense_inputs, _dense_ref,
             RED, "ms", flops=2 * 1024 ** 3),
    Workload("softmax_4096", "row softmax 4096x4096 f32",
             lambda: (_rng(5).uniform(-4, 4, (4096, 4096)).astype(np.float32),), softmax_ref,
             ("elem", 1e-4, 1e-9), "ms", nbytes=8 * 4096 * 4096),
    Workload("first_call_50op", "first call (trace+compile+run), 50-op chain f32[16]",
             _chain_inputs(16), chain_ref, F32, "ms"),
    Workload("retrace_50op", "retrace for a new shape, 50-op chain f32[16] -> f32[32]",
             _chain_inputs(32), chain_ref, F32, "ms"),
    Workload("shapes_sweep", "relu(x@W+b), W 256x128, a fresh function called at batch sizes "
             "1..100 (one call each): total", _sweep_inputs, _dense_ref, RED, "ms"),
    # a different tanh or sum order may stop one iteration earlier or later: 3e-4 relative
    Workload("while_tanh", "while sum(x) > 30: x = tanh(x), f32[1000] (S16), per iteration",
             _while_tanh_inputs, while_tanh_ref, ("elem", 2e-3, 1e-6), "ns",
             per=lambda: (WORKLOADS["while_tanh"].ref, _wt_iters[0])[1]),
    Workload("rnn_scan", "tanh RNN, batch 32, hidden 128, 100 steps (S19, scan)", rnn_inputs,
             rnn_ref, ("max", 1e-4, 1e-6), "ms", flops=2 * 2 * RNN_B * RNN_H * RNN_H * RNN_T),
    Workload("cnn_train_step_b50", "the seed's CNN, one training step (forward, gradients, Adam), "
             "batch 50 (S22)", cnn_inputs, cnn_ref, ("elem", 1e-4, 1e-6), "ms"),
    Workload("mlp_train_step", "MLP 64x784 -> 256 relu -> 10, softmax cross-entropy, SGD 0.1, "
             "one step", mlp_inputs, mlp_ref, ("elem", 1e-4, 1e-6), "ms"),
    Workload("fizzbuzz_1e5", "fizzbuzz counts over 1..10^5, branches in a loop (S17), per "
             "iteration", lambda: (np.int64(FB_N),), fizzbuzz_ref, None, "ns", per=lambda: FB_N),
]}
UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class Runner:
    """Runs one peer's implementations, checks and times them, writes bench/out/peers/PEER.json."""

    def __init__(self, peer, versions):
        ap = argparse.ArgumentParser()
        ap.add_argument("--quick", action="store_true")
        ap.add_argument("--out", default=None)
        ap.add_argument("--only", default="", help="comma-separated workload names")
        a = ap.parse_args()
        self.peer, self.quick = peer, a.quick
        self.only = set(filter(None, a.only.split(",")))
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.out = a.out or os.path.join(root, "bench", "out", "peers", f"{peer}.json")
        self.reps = 5 if self.quick else 15
        self.target = 0.05 if self.quick else 0.2  # seconds per timed sample
        self.versions = dict(versions, numpy=np.__version__, python=platform.python_version())
        self.records = []

    def wants(self, workload):
        return not self.only or workload in self.only

    def _add(self, w, impl, mode, status, **kw):
        rec = dict(workload=w.name, peer=self.peer, impl=impl, mode=mode, status=status,
                   unit=w.unit, tol=w.tol_text(), **kw)
        self.records.append(rec)
        shown = rec.get("median")
        shown = f"{shown:12.4g} {w.unit}" if shown is not None else f"{'':12} {status}"
        msg = rec.get("note", "") if status != "ok" else ""
        print(f"  {w.name:22} {impl:30} {mode:8} {shown}  {msg}"[:160], flush=True)

    def unsupported(self, name, impl, mode, why):
        if self.wants(name):
            self._add(WORKLOADS[name], impl, mode, "unsupported", note=why)

    def time(self, name, impl, mode, make, to_numpy=np.asarray, note="", check=True):
        """make() -> fn; fn() runs the workload once and returns its output. The first call is
        checked against the reference (unless check=False: baselines) and is warm-up; then reps
        samples of n calls each."""
        if not self.wants(name):
            return
        w = WORKLOADS[name]
        try:
            fn = make()
            ok, err, text = w.check(to_numpy(fn())) if check else (True, None, "")
            if not ok:
                self._add(w, impl, mode, "failed", max_err=err, note=text)
                return
            fn()
            t0 = time.perf_counter()
            fn()
            one = max(time.perf_counter() - t0, 1e-9)
            n = max(1, int(self.target / one))
            samples = []
            for _ in range(self.reps if one < 2 else 3):
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                samples.append((time.perf_counter() - t0) / n / w.per / UNIT_S[w.unit])
            self._record_samples(w, impl, mode, samples, n, err, note)
        except Exception as e:  # a peer that cannot run a workload is reported, not fatal
            self._add(w, impl, mode, "error", note=_short(e))
            if os.environ.get("PEERS_DEBUG"):
                traceback.print_exc()

    def first_call(self, name, impl, make_and_call, to_numpy=np.asarray, note="", reps=None):
        """make_and_call() builds a fresh function, calls it once, returns (seconds, output)."""
        if not self.wants(name):
            return
        w = WORKLOADS[name]
        try:
            samples, err = [], None
            for _ in range(reps or (3 if self.quick else 7)):
                secs, out = make_and_call()
                ok, err, text = w.check(to_numpy(out))
                if not ok:
                    self._add(w, impl, "compiled", "failed", max_err=err, note=text)
                    return
                samples.append(secs / UNIT_S[w.unit])
            self._record_samples(w, impl, "compiled", samples, 1, err, note)
        except Exception as e:
            self._add(w, impl, "compiled", "error", note=_short(e))
            if os.environ.get("PEERS_DEBUG"):
                traceback.print_exc()

    def _record_samples(self, w, impl, mode, samples, n, err, note):
        med = float(np.median(samples))
        extra = {}
        if w.nbytes:
            extra["gbps"] = w.nbytes / (med * UNIT_S[w.unit]) / 1e9
        if w.flops:
            extra["gflops"] = w.flops / (med * UNIT_S[w.unit]) / 1e9
        if w.per != 1:
            extra["iterations_per_call"] = w.per
        self._add(w, impl, mode, "ok", median=med, min=float(min(samples)),
                  max=float(max(samples)), reps=len(samples), calls_per_rep=n, max_err=err,
                  note=note, **extra)

    def save(self):
        os.makedirs(os.path.dirname(self.out), exist_ok=True)
        doc = dict(peer=self.peer, versions=self.versions, threads=THREADS, quick=self.quick,
                   affinity=sorted(os.sched_getaffinity(0)), date=time.strftime("%Y-%m-%d %H:%M"),
                   records=self.records)
        with open(self.out, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {self.out} ({len(self.records)} records)")


def _short(e):
    s = f"{type(e).__name__}: {e}".strip().replace("\n", " ")
    return s if len(s) < 300 else s[:297] + "..."


def timed_first(make_fn, call):
    """Times make_fn() + the first call(fn); returns (seconds, output)."""
    t0 = time.perf_counter()
    fn = make_fn()
    out = call(fn)
    return time.perf_counter() - t0, out


def dist_versions(*names):
    """{distribution: installed version} from the package metadata."""
    from importlib import metadata
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --- the same workloads written once for array frameworks whose tensors overload + - * ---------

class Impl:
    """One way a framework runs a Python function: name, mode ("eager"/"compiled"), wrap(fn)
    (identity for eager, tf.function / jax.jit / torch.compile ...), reset() before a first-call
    measurement (clears caches keyed on code objects) and a note for the table."""

    def __init__(self, name, mode, wrap=lambda f: f, reset=lambda: None, note=""):
        self.name, self.mode, self.wrap, self.reset, self.note = name, mode, wrap, reset, note


def _fresh_chain():
    def chain(x):  # a new function object every time, so no cache keyed on it can hit
        y = x
        for _ in range(CHAIN_STEPS):
            y = y * 1.0001 - 0.5
        return y
    return chain


def run_standard(R, ops, impls):
    """ops: tensor(np) -> t, numpy(t) -> np, sync(t) -> t (waits for asynchronous results),
    eye_i32(n), matmul, tanh, relu, softmax, conv(x, w, b) with conv_in(x, w, b) -> framework
    arguments (any layout change happens here, outside the timing) and conv_out(t) -> NHWC numpy."""
    A, B, C = TANH_A, TANH_B, TANH_C

    def power(x):
        r = ops.eye_i32(10)
        for _ in range(100):
            r = ops.matmul(x, r)
        return r

    fns = {
        "call_overhead": lambda a, b: a + b,
        "power_10x10_i32": power,
        "ew_poly_2e24": lambda x: (x * 2.0 + 1.0) * x - 3.0,
        "ew_tanh_2e24": lambda x: ops.tanh(x * A + B) * C - x,
        "dense_bias_relu_1024": lambda x, w, b: ops.relu(ops.matmul(x, w) + b),
        "softmax_4096": ops.softmax,
        "conv2d_200x200x100": ops.conv,
    }
    for n in MATMUL_SIZES:
        fns[f"matmul_f32_{n}"] = ops.matmul
    sync = ops.sync
    for name, body in fns.items():
        if not R.wants(name):
            continue
        w = WORKLOADS[name]
        conv = name.startswith("conv")
        args = ops.conv_in(*w.inputs) if conv else [ops.tensor(a) for a in w.inputs]
        out_np = ops.conv_out if conv else ops.numpy
        for im in impls:
            def make(im=im, body=body, args=args):
                f = im.wrap(body)
                return lambda: sync(f(*args))
            R.time(name, im.name, im.mode, make, to_numpy=out_np, note=im.note)
    x16 = ops.tensor(WORKLOADS["first_call_50op"].inputs[0])
    x32 = ops.tensor(WORKLOADS["retrace_50op"].inputs[0])
    for im in impls:
        if im.mode != "compiled":
            continue

        def first(im=im):
            im.reset()
            return timed_first(lambda: im.wrap(_fresh_chain()), lambda f: sync(f(x16)))

        def retrace(im=im):
            im.reset()
            f = im.wrap(_fresh_chain())
            sync(f(x16))
            return timed_first(lambda: f, lambda f: sync(f(x32)))

        R.first_call("first_call_50op", im.name, first, to_numpy=ops.numpy, note=im.note)
        R.first_call("retrace_50op", im.name, retrace, to_numpy=ops.numpy, note=im.note)
    if R.wants("shapes_sweep"):
        x, w, b = WORKLOADS["shapes_sweep"].inputs
        xs = [ops.tensor(np.ascontiguousarray(x[:n])) for n in SWEEP_SIZES]
        wt, bt = ops.tensor(w), ops.tensor(b)
        for im in impls:
            if im.mode != "compiled":
                continue

            def sweep(im=im):
                im.reset()
                t0 = time.perf_counter()
                f = im.wrap(lambda x, w, b: ops.relu(ops.matmul(x, w) + b))
                y = None
                for xn in xs:
                    y = sync(f(xn, wt, bt))
                return time.perf_counter() - t0, y

            R.first_call("shapes_sweep", im.name, sweep, to_numpy=ops.numpy, note=im.note,
                         reps=1 if R.quick else 3)
