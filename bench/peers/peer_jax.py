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


# --- training steps: jax.value_and_grad, then Keras' Adam (or SGD) on the parameter pytree; the
# step is a pure function of (params, state) jitted with donated buffers ---------------------------
def cnn_loss(p, x, y):
    def conv_same(h, w, b):
        return lax.conv_general_dilated(h, w, (1, 1), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC")) + b

    def pool(h):
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = pool(jax.nn.relu(conv_same(x, p[0], p[1])))
    h = pool(jax.nn.relu(conv_same(h, p[2], p[3]))).reshape(x.shape[0], -1)
    h = jax.nn.relu(h @ p[4] + p[5])
    pr = jnp.clip(jax.nn.softmax(h @ p[6] + p[7]), 1e-7, 1 - 1e-7)
    lg = jnp.log(pr)
    return jnp.mean(jax.nn.logsumexp(lg, axis=1) - jnp.take_along_axis(lg, y[:, None], 1)[:, 0])


def mlp_loss(p, x, y):
    lg = jax.nn.relu(x @ p[0] + p[1]) @ p[2] + p[3]
    return jnp.mean(jax.nn.logsumexp(lg, axis=1) - jnp.take_along_axis(lg, y[:, None], 1)[:, 0])


def adam_step(loss_fn):
    lr, b1, b2, eps = common.ADAM

    def step(p, m, v, t, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        t = t + 1
        alpha = lr * jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        m = [mi + (gi - mi) * (1 - b1) for mi, gi in zip(m, g)]
        v = [vi + (gi * gi - vi) * (1 - b2) for vi, gi in zip(v, g)]
        p = [pi - mi * alpha / (jnp.sqrt(vi) + eps) for pi, mi, vi in zip(p, m, v)]
        return loss, p, m, v, t
    return step


def sgd_step(p, m, v, t, x, y):
    loss, g = jax.value_and_grad(mlp_loss)(p, x, y)
    return loss, [pi - common.MLP_LR * gi for pi, gi in zip(p, g)], m, v, t


def make_train(name, jit):
    x, y, *w = [jax.device_put(a) for a in common.WORKLOADS[name].inputs]
    step = adam_step(cnn_loss) if name.startswith("cnn") else sgd_step
    if jit:
        step = jax.jit(step, donate_argnums=(0, 1, 2))
    state = [list(w), [jnp.zeros_like(a) for a in w], [jnp.zeros_like(a) for a in w],
             jnp.float32(0)]

    def run():
        loss, *new = step(*state, x, y)
        state[:] = new
        return loss.block_until_ready()
    return run


for name in ("cnn_train_step_b50", "mlp_train_step"):
    R.time(name, "jax eager", "eager", lambda name=name: make_train(name, False))
    R.time(name, "jax.jit", "compiled", lambda name=name: make_train(name, True),
           note="value_and_grad + Adam/SGD, donated buffers")
R.save()
