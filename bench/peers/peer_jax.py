"""peer_jax.py — JAX on CPU two ways: eager (op-by-op dispatch) and jax.jit (XLA), on the
workloads of common.run_standard. Threads: the process is pinned to 2 CPUs (common.py) and XLA
sizes its CPU thread pool from the schedulable CPUs; results are waited for (block_until_ready)."""
from types import SimpleNamespace

import common
import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

R = common.Runner("jax", common.dist_versions("jax", "jaxlib"))
R.versions["jax_devices"] = str(jax.devices())


def conv(x, w, b):
    return lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC")) + b


ops = SimpleNamespace(
    tensor=lambda a: jax.device_put(a),
    numpy=np.asarray,
    sync=lambda t: t.block_until_ready(),
    eye_i32=lambda n: jnp.eye(n, dtype=jnp.int32),
    matmul=jnp.matmul,
    tanh=jnp.tanh,
    relu=jax.nn.relu,
    softmax=lambda x: jax.nn.softmax(x, axis=-1),
    conv=conv,
    conv_in=lambda x, w, b: tuple(jax.device_put(a) for a in (x, w, b)),
    conv_out=np.asarray,
)
impls = [
    common.Impl("jax eager", "eager"),
    common.Impl("jax.jit", "compiled", jax.jit, reset=jax.clear_caches),
]
common.run_standard(R, ops, impls)


# --- control flow: lax.while_loop / lax.scan / lax.fori_loop + lax.cond under jax.jit; eagerly
# the same loops in Python over jnp ops -----------------------------------------------------------
def while_tanh(x):
    return lax.while_loop(lambda x: jnp.sum(x) > common.WT_LIMIT, jnp.tanh, x)


def while_tanh_eager(x):
    while float(jnp.sum(x)) > common.WT_LIMIT:
        x = jnp.tanh(x)
    return x


def rnn(xs, h0, W, U, b):
    return lax.scan(lambda h, x: (jnp.tanh(x @ W + h @ U + b), None), h0, xs)[0]


def rnn_eager(xs, h0, W, U, b):
    h = h0
    for t in range(xs.shape[0]):
        h = jnp.tanh(xs[t] @ W + h @ U + b)
    return h


def fizzbuzz(n):
    def bump(k):
        return lambda c: c.at[k].add(1)

    def body(i, c):
        return lax.cond(i % 15 == 0, bump(0), lambda c: lax.cond(
            i % 3 == 0, bump(1), lambda c: lax.cond(i % 5 == 0, bump(2), bump(3), c), c), c)
    return lax.fori_loop(1, n + 1, body, jnp.zeros(4, jnp.int32))


for name, jitted, eager in [("while_tanh", while_tanh, while_tanh_eager), ("rnn_scan", rnn, rnn_eager),
                            ("fizzbuzz_1e5", fizzbuzz, None)]:
    if not R.wants(name):
        continue
    args = [jax.device_put(np.int32(a) if name.startswith("fizz") else a)
            for a in common.WORKLOADS[name].inputs]
    if eager:
        R.time(name, "jax eager", "eager", lambda e=eager, a=args: lambda: e(*a).block_until_ready(),
               note="Python loop over jnp ops")
    else:
        R.unsupported(name, "jax eager", "eager", "10^5 Python iterations of jnp ops: not run")
    R.time(name, "jax.jit", "compiled",
           lambda f=jitted, a=args: (lambda jf: lambda: jf(*a).block_until_ready())(jax.jit(f)),
           note="lax." + {"while_tanh": "while_loop", "rnn_scan": "scan",
                          "fizzbuzz_1e5": "fori_loop + lax.cond"}[name])
R.save()
