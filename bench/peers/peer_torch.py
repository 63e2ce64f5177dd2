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


# --- control flow: Python loops (torch.compile unrolls a loop of static trip count and breaks the
# graph at a data-dependent condition); torch's experimental while_loop operator is tried too --
def while_tanh(x):
    while x.sum() > common.WT_LIMIT:
        x = torch.tanh(x)
    return x


def while_tanh_hop(x):
    from torch._higher_order_ops.while_loop import while_loop
    return while_loop(lambda x: x.sum() > common.WT_LIMIT, lambda x: (torch.tanh(x),), (x,))[0]


def rnn(xs, h0, W, U, b):
    h = h0
    for t in range(xs.shape[0]):
        h = torch.tanh(xs[t] @ W + h @ U + b)
    return h


for name, fn in [("while_tanh", while_tanh), ("rnn_scan", rnn)]:
    if not R.wants(name):
        continue
    args = [torch.from_numpy(a) for a in common.WORKLOADS[name].inputs]
    for im in impls:
        note = im.note
        if im.mode == "compiled":
            note += "; graph break at the data-dependent condition" if name == "while_tanh" \
                else "; the 100 steps unrolled"
        R.time(name, im.name, im.mode, lambda im=im, fn=fn, a=args: (
            lambda f: lambda: f(*a))(im.wrap(fn)), to_numpy=lambda t: t.numpy(), note=note)
    if name == "while_tanh":
        R.time(name, "torch.compile while_loop", "compiled", lambda a=args: (
            lambda f: lambda: f(*a))(torch.compile(while_tanh_hop, fullgraph=True)),
            to_numpy=lambda t: t.numpy(), note="torch._higher_order_ops.while_loop (experimental)")
for im in impls:
    R.unsupported("fizzbuzz_1e5", im.name, im.mode,
                  "no data-dependent loop with branches short of unrolling 10^5 iterations")


# --- training steps: autograd (backward), then torch.optim.Adam (eps 1e-7; foreach) or SGD. Under
# torch.compile the loss function is compiled (forward and, through AOTAutograd, backward); the
# optimizer step runs as PyTorch users run it. NCHW with channels_last memory; the flatten goes
# through NHWC so the weights are the same as the other peers' -----------------------------------
def cnn_loss(p, x, y):
    h = F.max_pool2d(F.relu(F.conv2d(x, p[0], p[1], padding=2)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p[2], p[3], padding=2)), 2)
    h = h.permute(0, 2, 3, 1).reshape(x.shape[0], -1)
    h = F.relu(h @ p[4] + p[5])
    pr = torch.clamp(torch.softmax(h @ p[6] + p[7], dim=-1), 1e-7, 1 - 1e-7)
    return F.cross_entropy(torch.log(pr), y)


def mlp_loss(p, x, y):
    return F.cross_entropy(F.relu(x @ p[0] + p[1]) @ p[2] + p[3], y)


def make_train(name, im):
    x, y, *w = common.WORKLOADS[name].inputs
    cnn = name.startswith("cnn")
    x = torch.from_numpy(x)
    if cnn:
        x = x.permute(0, 3, 1, 2)
        w = [torch.from_numpy(a).permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
             if a.ndim == 4 else torch.from_numpy(a) for a in w]
    else:
        w = [torch.from_numpy(a) for a in w]
    y = torch.from_numpy(y).long()
    params = [a.clone().requires_grad_(True) for a in w]
    opt = (torch.optim.Adam(params, lr=common.ADAM[0], betas=common.ADAM[1:3],
                            eps=common.ADAM[3]) if cnn else torch.optim.SGD(params, lr=common.MLP_LR))
    loss_fn = im.wrap(cnn_loss if cnn else mlp_loss)

    def run():
        with torch.enable_grad():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(params, x, y)
            loss.backward()
        opt.step()
        return loss.detach()
    return run


for name in ("cnn_train_step_b50", "mlp_train_step"):
    for im in impls:
        R.time(name, im.name, im.mode, lambda im=im, name=name: make_train(name, im),
               to_numpy=lambda t: t.numpy(), note="autograd + torch.optim (eager step)")
R.save()
