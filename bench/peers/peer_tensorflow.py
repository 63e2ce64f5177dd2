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
R.save()
