"""peer_tensorflow.py — TensorFlow (tensorflow-cpu) three ways: eager, tf.function (graph +
Grappler) and tf.function(jit_compile=True) (XLA), on the workloads of common.run_standard.
Threads: intra-op 2, inter-op 1."""
from types import SimpleNamespace

import common
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(common.THREADS)
tf.config.threading.set_inter_op_parallelism_threads(1)

R = common.Runner("tensorflow", {"tensorflow-cpu": tf.__version__})

ops = SimpleNamespace(
    tensor=tf.constant,
    numpy=lambda t: t.numpy(),
    sync=lambda t: t,  # CPU kernels have finished when the call returns
    eye_i32=lambda n: tf.eye(n, dtype=tf.int32),
    matmul=tf.matmul,
    tanh=tf.tanh,
    relu=tf.nn.relu,
    softmax=lambda x: tf.nn.softmax(x, axis=-1),
    conv=lambda x, w, b: tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "VALID"), b),
    conv_in=lambda x, w, b: (tf.constant(x), tf.constant(w), tf.constant(b)),
    conv_out=lambda t: t.numpy(),
)
impls = [
    common.Impl("tf eager", "eager"),
    common.Impl("tf.function", "compiled", tf.function),
    common.Impl("tf.function(jit_compile=True)", "compiled",
                lambda f: tf.function(f, jit_compile=True)),
]
common.run_standard(R, ops, impls)


# --- control flow: Python loops and ifs on tensors, which AutoGraph turns into tf.while_loop and
# tf.cond inside tf.function (the seed's way); eagerly the same code runs op by op -------------
def while_tanh(x):
    while tf.reduce_sum(x) > common.WT_LIMIT:
        x = tf.tanh(x)
    return x


def rnn(xs, h0, W, U, b):
    h = h0
    for t in tf.range(tf.shape(xs)[0]):
        h = tf.tanh(tf.matmul(xs[t], W) + tf.matmul(h, U) + b)
    return h


def fizzbuzz(n):
    c0 = c1 = c2 = c3 = tf.constant(0, tf.int64)
    for i in tf.range(tf.constant(1, tf.int64), n + 1):
        if i % 15 == 0:
            c0 += 1
        elif i % 3 == 0:
            c1 += 1
        elif i % 5 == 0:
            c2 += 1
        else:
            c3 += 1
    return tf.stack([c0, c1, c2, c3])


for name, fn in [("while_tanh", while_tanh), ("rnn_scan", rnn), ("fizzbuzz_1e5", fizzbuzz)]:
    if not R.wants(name):
        continue
    args = [tf.constant(a) for a in common.WORKLOADS[name].inputs]
    for im in impls:
        if im.mode == "eager" and name.startswith("fizz"):
            R.unsupported(name, im.name, "eager", "10^5 Python iterations of tf ops: not run")
            continue
        R.time(name, im.name, im.mode, lambda im=im, fn=fn, a=args: (
            lambda f: lambda: f(*a))(im.wrap(fn)), to_numpy=lambda t: t.numpy(),
            note="AutoGraph: tf.while_loop / tf.cond" if im.mode == "compiled" else "")
R.save()
