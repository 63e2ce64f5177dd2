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


# --- training steps: tf.GradientTape, then Keras' Adam (or SGD) as graph code on tf.Variables,
# the whole step in one tf.function (the seed's train_one_step) -----------------------------------
def adam(vs):
    lr, b1, b2, eps = common.ADAM
    slots = [(tf.Variable(tf.zeros_like(v)), tf.Variable(tf.zeros_like(v))) for v in vs]
    it = tf.Variable(0, dtype=tf.int64)

    def apply(grads):
        t = tf.cast(it + 1, tf.float32)
        alpha = lr * tf.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        for v, g, (m, s) in zip(vs, grads, slots):
            m.assign_add((g - m) * (1 - b1))
            s.assign_add((g * g - s) * (1 - b2))
            v.assign_sub(m * alpha / (tf.sqrt(s) + eps))
        it.assign_add(1)
    return apply


def cnn_loss(vs, x, y):
    h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, vs[0], 1, "SAME"), vs[1]))
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, vs[2], 1, "SAME"), vs[3]))
    h = tf.reshape(tf.nn.max_pool2d(h, 2, 2, "VALID"), [-1, 7 * 7 * 64])
    h = tf.nn.relu(tf.matmul(h, vs[4]) + vs[5])
    p = tf.nn.softmax(tf.matmul(h, vs[6]) + vs[7])
    p = tf.clip_by_value(p, 1e-7, 1 - 1e-7)  # Keras' sparse_categorical_crossentropy
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, tf.math.log(p)))


def mlp_loss(vs, x, y):
    h = tf.nn.relu(tf.matmul(x, vs[0]) + vs[1])
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, tf.matmul(h, vs[2]) + vs[3]))


def make_train(name, im):
    x, y, *w = common.WORKLOADS[name].inputs
    x, y = tf.constant(x), tf.constant(y)
    vs = [tf.Variable(a) for a in w]
    loss_fn = cnn_loss if name.startswith("cnn") else mlp_loss
    update = adam(vs) if name.startswith("cnn") else (
        lambda gs: [v.assign_sub(common.MLP_LR * g) for v, g in zip(vs, gs)])

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(vs, x, y)
        update(tape.gradient(loss, vs))
        return loss
    f = im.wrap(step)
    return lambda: f(x, y)


for name in ("cnn_train_step_b50", "mlp_train_step"):
    for im in impls:
        R.time(name, im.name, im.mode, lambda im=im, name=name: make_train(name, im),
               to_numpy=lambda t: t.numpy(), note="GradientTape + Adam/SGD on tf.Variables")
R.save()
