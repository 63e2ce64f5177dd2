"""peer_torch.py — PyTorch (CPU) two ways: eager and torch.compile (default Inductor backend,
C++ codegen), on the workloads of common.run_standard. Threads: intra-op 2, inter-op 1. The
convolution runs on NCHW-shaped views of the NHWC data (channels_last memory, no copy); Inductor's
on-disk caches are disabled so that first-call latency is a real compile."""
import os
import warnings
from types import SimpleNamespace

os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
import common  # noqa: E402
import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(common.THREADS)
torch.set_num_interop_threads(1)
if hasattr(inductor_config, "force_disable_caches"):
    inductor_config.force_disable_caches = True
torch._dynamo.config.cache_size_limit = 64
torch.set_grad_enabled(False)
warnings.filterwarnings("ignore")

R = common.Runner("torch", {"torch": torch.__version__})


def conv_in(x, w, b):
    xt = torch.from_numpy(x).permute(0, 3, 1, 2)  # NCHW shape, channels_last memory
    wt = torch.from_numpy(w).permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
    return xt, wt, torch.from_numpy(b)


ops = SimpleNamespace(
    tensor=torch.from_numpy,
    numpy=lambda t: t.numpy(),
    sync=lambda t: t,
    eye_i32=lambda n: torch.eye(n, dtype=torch.int32),
    matmul=torch.matmul,
    tanh=torch.tanh,
    relu=torch.relu,
    softmax=lambda x: torch.softmax(x, dim=-1),
    conv=F.conv2d,
    conv_in=conv_in,
    conv_out=lambda t: t.permute(0, 2, 3, 1).numpy(),
)
impls = [
    common.Impl("torch eager", "eager"),
    common.Impl("torch.compile", "compiled", torch.compile, reset=torch._dynamo.reset,
                note="inductor"),
]
common.run_standard(R, ops, impls)
R.save()
