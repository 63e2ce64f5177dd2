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
R.save()
