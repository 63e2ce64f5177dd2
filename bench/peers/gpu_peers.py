"""gpu_peers.py — the GPU peers of bench/bench_gpu.c on the same GPU in the same run
(tests/gpu/run.sh): PyTorch eager and torch.compile, JAX jit, CuPy (elementwise), for the rows
bench_gpu prints: copy bandwidth, (x*2+1)*x-3 and tanh(x*a+b)*c-x on 2^26 f32, row softmax
8192x8192, matmul 4096 in f32 (full f32: TF32 off, as tracejit computes) and bf16, the S25
convolution (NHWC, 100 3x3 filters, VALID, bias), the seed CNN's training step (conv 5x5x32 relu,
pool, conv 5x5x64 relu, pool, dense 1024 relu, dense 10, softmax, sparse cross-entropy, Adam
1e-3) at batch 50 and 512, and the host time of a cache-hit call of a 10-op function on 16
elements. Each figure is the median of repeated runs to a synchronize after warm-up. Prints a
table and writes JSON lines (--out). A peer missing here is reported and skipped."""
import argparse
import json
import statistics
import sys
import time

ROWS = []


def report(bench, peer, metric, value, unit):
    ROWS.append({"bench": bench, "peer": peer, "metric": metric, "value": value, "unit": unit})
    print(f"{bench:24s} {peer:16s} {metric:10s} {value:12.4g} {unit}", flush=True)


def timed(fn, sync, reps=None, warm=3):
    for _ in range(warm):
        fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    one = time.perf_counter() - t0
    reps = reps or max(5, min(200, int(0.3 / max(one, 1e-6))))
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3  # ms


def torch_rows(smoke):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda"
    sync = torch.cuda.synchronize
    n = 1 << (12 if smoke else 26)
    x = torch.rand(n, device=dev) * 2 - 1
    y = torch.empty_like(x)
    ms = timed(lambda: y.copy_(x), sync)
    report("copy_2^26", "torch", "GB/s", 2 * n * 4 / (ms * 1e6), "GB/s")
    poly = lambda x: (x * 2 + 1) * x - 3  # noqa: E731
    tanh = lambda x, a, b, c: torch.tanh(x * a + b) * c - x  # noqa: E731
    a, b, c = (torch.tensor(v, device=dev) for v in (0.5, 0.1, 2.0))
    for name, f in (("torch", poly), ("torch.compile", torch.compile(poly))):
        ms = timed(lambda: f(x), sync)
        report("ew_poly_2^26", name, "GB/s", 2 * n * 4 / (ms * 1e6), "GB/s")
    for name, f in (("torch", tanh), ("torch.compile", torch.compile(tanh))):
        ms = timed(lambda: f(x, a, b, c), sync)
        report("ew_tanh_2^26", name, "GB/s", 2 * n * 4 / (ms * 1e6), "GB/s")
    s = 64 if smoke else 8192
    xs = torch.rand(s, s, device=dev) * 8 - 4
    sm = lambda x: torch.softmax(x, -1)  # noqa: E731
    for name, f in (("torch", sm), ("torch.compile", torch.compile(sm))):
        ms = timed(lambda: f(xs), sync)
        report("softmax_8192x8192", name, "GB/s", 2 * s * s * 4 / (ms * 1e6), "GB/s")
    m = 32 if smoke else 4096
    for dt, row in ((torch.float32, "matmul_f32_4096"), (torch.bfloat16, "matmul_bf16_4096")):
        A = torch.rand(m, m, device=dev, dtype=dt)
        B = torch.rand(m, m, device=dev, dtype=dt)
        ms = timed(lambda: A @ B, sync)
        report(row, "torch (cuBLAS)", "TFLOP/s", 2 * m ** 3 / (ms * 1e9), "TFLOP/s")
    side, ch = (10, 4) if smoke else (200, 100)
    xc = torch.rand(1, ch, side, side, device=dev).to(memory_format=torch.channels_last)
    conv = torch.nn.Conv2d(ch, ch, 3).to(dev).to(memory_format=torch.channels_last)
    with torch.no_grad():
        ms = timed(lambda: conv(xc), sync)
    report("conv2d_200x200x100", "torch (cuDNN)", "GFLOP/s",
           2 * (side - 2) ** 2 * ch * 9 * ch / (ms * 1e6), "GFLOP/s")
    for batch in ((2,) if smoke else (50, 512)):
        for mode in ("torch", "torch.compile"):
            ms = torch_cnn_step(batch, mode == "torch.compile")
            report(f"cnn_train_step_b{batch}", mode, "ms", ms, "ms")
    x16 = torch.rand(16, device=dev)
    y16 = torch.rand(16, device=dev)

    def ten(x, y):
        a = x + y
        b = a * x
        d = torch.tanh(b - y)
        f = torch.exp(-d) + a
        g = f.sum()
        h = f.reshape(4, 4).t() * g
        return torch.relu(h - 1)
    for name, f in (("torch", ten), ("torch.compile", torch.compile(ten))):
        f(x16, y16)
        sync()
        ts = []
        for _ in range(9):
            calls = 20 if smoke else 2000
            t0 = time.perf_counter()
            for _ in range(calls):
                f(x16, y16)
            ts.append((time.perf_counter() - t0) * 1e6 / calls)
            sync()
        report("call_10op_hit", name, "us_host", statistics.median(ts), "us")


def torch_cnn_step(batch, compiled):
    import torch
    dev = "cuda"
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(3136, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10), torch.nn.Softmax(-1)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    x = torch.rand(batch, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        p = model(x)
        loss = torch.nn.functional.nll_loss(torch.log(p.clamp_min(1e-7)), y)
        loss.backward()
        opt.step()
        return loss
    f = torch.compile(step) if compiled else step
    return timed(f, torch.cuda.synchronize)


def jax_rows(smoke):
    import jax
    import jax.numpy as jnp
    n = 1 << (12 if smoke else 26)
    x = jax.random.uniform(jax.random.PRNGKey(0), (n,), minval=-1, maxval=1)
    sync = lambda r: r.block_until_ready()  # noqa: E731
    poly = jax.jit(lambda x: (x * 2 + 1) * x - 3)
    tanh = jax.jit(lambda x, a, b, c: jnp.tanh(x * a + b) * c - x)
    a, b, c = jnp.float32(0.5), jnp.float32(0.1), jnp.float32(2.0)
    for row, f in (("ew_poly_2^26", lambda: poly(x)), ("ew_tanh_2^26", lambda: tanh(x, a, b, c))):
        out = [None]
        ms = timed(lambda: out.__setitem__(0, f()), lambda: sync(out[0]) if out[0] is not None else None)
        report(row, "jax.jit", "GB/s", 2 * n * 4 / (ms * 1e6), "GB/s")
    s = 64 if smoke else 8192
    xs = jax.random.uniform(jax.random.PRNGKey(1), (s, s), minval=-4, maxval=4)
    sm = jax.jit(lambda x: jax.nn.softmax(x, -1))
    out = [None]
    ms = timed(lambda: out.__setitem__(0, sm(xs)), lambda: sync(out[0]) if out[0] is not None else None)
    report("softmax_8192x8192", "jax.jit", "GB/s", 2 * s * s * 4 / (ms * 1e6), "GB/s")
    m = 32 if smoke else 4096
    A = jax.random.uniform(jax.random.PRNGKey(2), (m, m))
    B = jax.random.uniform(jax.random.PRNGKey(3), (m, m))
    mm = jax.jit(lambda a, b: jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST))
    ms = timed(lambda: out.__setitem__(0, mm(A, B)), lambda: sync(out[0]) if out[0] is not None else None)
    report("matmul_f32_4096", "jax.jit", "TFLOP/s", 2 * m ** 3 / (ms * 1e9), "TFLOP/s")
    x16 = jnp.ones(16)
    y16 = jnp.ones(16)

    @jax.jit
    def ten(x, y):
        a = x + y
        b = a * x
        d = jnp.tanh(b - y)
        f = jnp.exp(-d) + a
        g = f.sum()
        h = f.reshape(4, 4).T * g
        return jax.nn.relu(h - 1)
    ten(x16, y16).block_until_ready()
    ts = []
    for _ in range(9):
        calls = 20 if smoke else 2000
        t0 = time.perf_counter()
        for _ in range(calls):
            r = ten(x16, y16)
        ts.append((time.perf_counter() - t0) * 1e6 / calls)
        r.block_until_ready()
    report("call_10op_hit", "jax.jit", "us_host", statistics.median(ts), "us")


def cupy_rows(smoke):
    import cupy as cp
    n = 1 << (12 if smoke else 26)
    x = cp.random.uniform(-1, 1, n, dtype=cp.float32)
    poly = cp.ElementwiseKernel("float32 x", "float32 y", "y = (x * 2 + 1) * x - 3", "tj_poly")
    tanh = cp.ElementwiseKernel("float32 x, float32 a, float32 b, float32 c", "float32 y",
                                "y = tanhf(x * a + b) * c - x", "tj_tanh")
    sync = cp.cuda.Device().synchronize
    ms = timed(lambda: poly(x), sync)
    report("ew_poly_2^26", "cupy", "GB/s", 2 * n * 4 / (ms * 1e6), "GB/s")
    ms = timed(lambda: tanh(x, cp.float32(0.5), cp.float32(0.1), cp.float32(2.0)), sync)
    report("ew_tanh_2^26", "cupy", "GB/s", 2 * n * 4 / (ms * 1e6), "GB/s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    for name, fn in (("torch", torch_rows), ("jax", jax_rows), ("cupy", cupy_rows)):
        try:
            fn(args.smoke)
        except Exception as e:  # a peer missing or failing here: said, not fatal
            print(f"gpu_peers: {name}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            for r in ROWS:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
