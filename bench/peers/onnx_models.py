"""onnx_models.py — tracejit's ONNX importer (tj_onnx) against ONNX Runtime on models a user would
import: the seed's CNN (conv 5x5x32, pool, conv 5x5x64, pool, dense 1024, dense 10, softmax; NCHW
as PyTorch and ONNX lay it out; batch 50) and an MLP (784-512-512-10, batch 256), both built with
onnx.helper (opset 17) in the peers' environment with seeded weights, ResNet-50 (v1.5, BatchNorm
folded into the convolutions as torch.onnx.export writes it; batch 1 and 32), torchvision's
DenseNet-121, Inception v3, VGG-19 and AlexNet exported by torch.onnx (batch 1, seeded random
weights), plus the largest pytorch-converted models of ONNX's test data (by input size). Per model:
- ONNX Runtime: first call = create the session from the file + run once, in a new process
  (2 intra-op threads, all graph optimizations, as peer_onnxruntime.py); per call, the median
  of N runs of a session in this process, in every round;
- tracejit: `tj_onnx time` in a new process with an empty disk cache (load + trace + passes +
  compile + run), again in a second process with the cache warm, then the median of N calls
  (a `tj_onnx show` first puts the binary and its libraries in the page cache);
- first calls 5 times (3 with --quick), ORT's and tracejit's processes interleaved: medians;
- both outputs compared (|a - b| <= 1e-5 + 1e-3 |b|, ONNX's tolerance); a mismatch is reported.
Writes bench/out/onnx_models.json and the section of bench/PEERS.md between the onnx:begin /
onnx:end markers. Run by bench/peers/run_peers.sh (bench/run --peers) or alone:
bench/.venv/bin/python bench/peers/onnx_models.py [--quick]."""
import common  # noqa: F401  (thread setup before numpy loads)

import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "bench", "out")
PEERS_MD = os.path.join(ROOT, "bench", "PEERS.md")
TOOL = os.path.join(ROOT, "build-bench", "frontends", "onnx", "tj_onnx")
DATA = "/usr/share/libonnx-testdata/data/pytorch-converted"
BEGIN, END = "<!-- onnx:begin -->", "<!-- onnx:end -->"
F = TensorProto.FLOAT


def init(rng, name, shape, fan_in):
    return numpy_helper.from_array(
        (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32), name)


def save(name, nodes, inputs, outputs, inits, feeds):
    d = os.path.join(OUT, "onnx", name)
    os.makedirs(d, exist_ok=True)
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, "model.onnx"))
    paths = []
    for k, (n, v) in enumerate(feeds.items()):
        p = os.path.join(d, f"input_{k}.pb")
        with open(p, "wb") as f:
            f.write(numpy_helper.from_array(v, n).SerializeToString())
        paths.append(p)
    return os.path.join(d, "model.onnx"), paths


def seed_cnn(batch=50):
    rng = np.random.default_rng(22)
    inits = [init(rng, "w1", (32, 1, 5, 5), 25), init(rng, "b1", (32,), 25),
             init(rng, "w2", (64, 32, 5, 5), 800), init(rng, "b2", (64,), 800),
             init(rng, "w3", (3136, 1024), 3136), init(rng, "b3", (1024,), 3136),
             init(rng, "w4", (1024, 10), 1024), init(rng, "b4", (10,), 1024)]
    conv = dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2])
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], **conv),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], **pool),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], **conv),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("MaxPool", ["r2"], ["p2"], **pool),
             helper.make_node("Flatten", ["p2"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["d1"]),
             helper.make_node("Relu", ["d1"], ["r3"]),
             helper.make_node("Gemm", ["r3", "w4", "b4"], ["d2"]),
             helper.make_node("Softmax", ["d2"], ["y"], axis=-1)]
    x = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
    return save("seed_cnn", nodes, [helper.make_tensor_value_info("x", F, [batch, 1, 28, 28])],
                [helper.make_tensor_value_info("y", F, [batch, 10])], inits, {"x": x})


def mlp(batch=256):
    rng = np.random.default_rng(7)
    sizes = [784, 512, 512, 10]
    inits, nodes, prev = [], [], "x"
    for i in range(3):
        inits += [init(rng, f"w{i}", (sizes[i], sizes[i + 1]), sizes[i]),
                  init(rng, f"b{i}", (sizes[i + 1],), sizes[i])]
        nodes.append(helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [f"g{i}"]))
        if i < 2:
            nodes.append(helper.make_node("Relu", [f"g{i}"], [f"h{i}"]))
            prev = f"h{i}"
    nodes.append(helper.make_node("Softmax", ["g2"], ["y"], axis=-1))
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    return save("mlp", nodes, [helper.make_tensor_value_info("x", F, [batch, 784])],
                [helper.make_tensor_value_info("y", F, [batch, 10])], inits, {"x": x})


def resnet50(batch=1):
    """ResNet-50 v1.5 (torchvision's layout: bottlenecks [3, 4, 6, 3], the stride on the 3x3
    conv, 1x1 projections) as torch.onnx.export writes it in eval mode: BatchNorm folded into each
    Conv's weights and bias; He-initialised seeded weights (the timing does not depend on their
    values), 1000 classes, NCHW [batch, 3, 224, 224]. 4.1 GMAC per image."""
    rng = np.random.default_rng(50)
    inits, nodes = [], []

    def conv(x, cin, cout, k, stride, relu, name, scale=1.0):
        w = init(rng, name + "_w", (cout, cin, k, k), cin * k * k)
        if scale != 1.0:
            w = numpy_helper.from_array(numpy_helper.to_array(w) * np.float32(scale), w.name)
        inits.extend([w,
                      numpy_helper.from_array(
                          (rng.standard_normal(cout) * 0.01).astype(np.float32), name + "_b")])
        p = k // 2
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name],
                                      kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[p, p, p, p]))
        if not relu:
            return name
        nodes.append(helper.make_node("Relu", [name], [name + "_r"]))
        return name + "_r"

    x = conv("x", 3, 64, 7, 2, True, "stem")
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1]))
    x, cin = "pool", 64
    for stage, (blocks, width) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512])):
        for b in range(blocks):
            stride = 2 if stage > 0 and b == 0 else 1
            n = f"s{stage}b{b}"
            h = conv(x, cin, width, 1, 1, True, n + "c1")
            h = conv(h, width, width, 3, stride, True, n + "c2")
            # the residual branch's last layer scaled down, as a trained network's last BatchNorm
            # of a block (gamma) folds in: He-initialised blocks double the variance each, and
            # 16 of them gave logits of ~5000 whose small entries no float tolerance can check
            h = conv(h, width, width * 4, 1, 1, False, n + "c3", scale=0.2)
            skip = conv(x, cin, width * 4, 1, stride, False, n + "proj") if b == 0 else x
            nodes.append(helper.make_node("Add", [h, skip], [n + "add"]))
            nodes.append(helper.make_node("Relu", [n + "add"], [n + "out"]))
            x, cin = n + "out", width * 4
    inits.extend([init(rng, "fc_w", (2048, 1000), 2048),
                  numpy_helper.from_array(np.zeros(1000, np.float32), "fc_b")])
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"]),
              helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
              helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"])]
    xin = rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)
    return save(f"resnet50_b{batch}", nodes,
                [helper.make_tensor_value_info("x", F, [batch, 3, 224, 224])],
                [helper.make_tensor_value_info("y", F, [batch, 1000])], inits, {"x": xin})


TORCHVISION = ("densenet121", "inception_v3", "vgg19", "alexnet")


def torchvision_model(name, batch=1):
    """One of torchvision's ImageNet classifiers (TORCHVISION) as torch.onnx.export writes it in
    eval mode (opset 17; BatchNorm folded into the convolutions), seeded random weights (nothing
    downloaded), a seeded input (299 x 299 for Inception v3, else 224 x 224). Exported once into
    bench/out/onnx/NAME_bB/ and reused (VGG-19's file is 550 MB). torch is imported only here."""
    d = os.path.join(OUT, "onnx", f"{name}_b{batch}")
    model, inp = os.path.join(d, "model.onnx"), os.path.join(d, "input_0.pb")
    if os.path.exists(model) and os.path.exists(inp):
        return model, [inp]
    import torch
    import torchvision
    torch.manual_seed(0)
    ctor = getattr(torchvision.models, name)
    net = (ctor(aux_logits=False, init_weights=True) if name == "inception_v3" else ctor()).eval()
    size = 299 if name == "inception_v3" else 224
    x = torch.randn(batch, 3, size, size)
    os.makedirs(d, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(net, x, model, opset_version=17, input_names=["x"], output_names=["y"],
                          dynamo=False)
    with open(inp, "wb") as f:
        f.write(numpy_helper.from_array(x.numpy(), "x").SerializeToString())
    return model, [inp]


def largest_converted(k):
    """The k pytorch-converted tests with the largest inputs: (name, model, [input .pb])."""
    found = []
    for t in sorted(os.listdir(DATA)) if os.path.isdir(DATA) else []:
        d = os.path.join(DATA, t, "test_data_set_0")
        ins = sorted(p for p in os.listdir(d) if p.startswith("input_")) if os.path.isdir(d) else []
        if ins:
            size = sum(os.path.getsize(os.path.join(d, p)) for p in ins)
            found.append((size, t, os.path.join(DATA, t, "model.onnx"),
                          [os.path.join(d, p) for p in ins]))
    found.sort(reverse=True)
    return [(t, m, ins) for _, t, m, ins in found[:k]]


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def ort_session(model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = common.THREADS
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def peak_kb():
    """This process's peak resident memory in KiB (VmHWM: its own; getrusage's ru_maxrss would
    carry the forking parent's, which exec keeps)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def ort_first_child(model, inputs):
    """In a new process (`--ort-first`), as tracejit's first call is: onnxruntime imported and
    the inputs read before the clock starts; then session + one run, twice: the process's first
    session (which also sets up ORT's environment) and a second one in the warm process. Prints
    the two times in milliseconds."""
    sess_in = [read_pb(p) for p in inputs]
    base_kb = peak_kb()
    ms, peak = [], 0
    for _ in range(2):
        t0 = time.perf_counter()
        sess = ort_session(model)
        feeds = {i.name: v for i, v in zip(sess.get_inputs(), sess_in)}
        sess.run(None, feeds)
        ms.append((time.perf_counter() - t0) * 1e3)
        if not peak:  # the first session and its run: the process's peak until now
            for _ in range(2):
                sess.run(None, feeds)
            peak = peak_kb()
        del sess
    print(json.dumps(dict(first_ms=ms[0], second_ms=ms[1], peak_mb=peak / 1024,
                          base_mb=base_kb / 1024)))


def ort_first(model, inputs):
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--ort-first", model] + inputs,
                       capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"onnxruntime first call {model}: {p.stderr[-300:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return r["first_ms"], r["second_ms"], r["peak_mb"], r["base_mb"]


def time_ort(model, inputs, reps):
    """A session in this process: the median of `reps` runs after 3 (ms), and its outputs."""
    sess_in = [read_pb(p) for p in inputs]
    sess = ort_session(model)
    feeds = {i.name: v for i, v in zip(sess.get_inputs(), sess_in)}
    out = sess.run(None, feeds)
    for _ in range(3):
        sess.run(None, feeds)
    v = []
    for _ in range(reps):
        a = time.perf_counter()
        sess.run(None, feeds)
        v.append(time.perf_counter() - a)
    del sess  # its threads gone before tracejit runs
    return float(np.median(v)) * 1e3, out


LINE = re.compile(r"load ([\d.]+) ms; first call \(trace \+ passes \+ compile \+ run\) ([\d.]+) ms; "
                  r"median of \d+ calls ([\d.]+) ms; native code ([\d.]+) ms after the first "
                  r"call; peak resident ([\d.]+) MB")


def tracejit_env():
    env = dict(os.environ, TJ_NUM_THREADS=str(common.THREADS),
               OPENBLAS_NUM_THREADS=str(common.THREADS))
    env.pop("OPENBLAS_CORETYPE", None)
    return env


def tracejit_run(model, inputs, reps, cache):
    """`tj_onnx time` in a new process: (load + first call, median per call, native after) ms
    and the process's peak resident memory (MB, as the tool reports it)."""
    env = dict(tracejit_env(), TJ_CACHE_DIR=cache)
    p = subprocess.run([TOOL, "time", model, str(reps)] + inputs, env=env, capture_output=True,
                       text=True)
    m = LINE.search(p.stdout)
    if p.returncode or not m:
        raise RuntimeError(f"tj_onnx time {model}: {p.stdout}{p.stderr}")
    load, first, med, native, peak = map(float, m.groups())
    return load + first, med, native, peak


def time_first_calls(model, inputs, reps, rounds):
    """First calls in new processes, `rounds` times, ONNX Runtime's and tracejit's (cold: an
    empty disk cache; warm: the cache the cold run left) interleaved, so both meet the machine in
    the same state (this VM makes a process that starts after an idle moment pay for fresh
    memory several times over), and per call the same way: each round times a session of ORT's
    in this process, then tracejit's calls (this VM moves between two speeds within seconds: one
    ORT block before every tracejit round read ResNet-50 at 0.60x and 1.12x on the same day).
    Medians and ranges; ORT's outputs."""
    ort_ms, ort2, cold, warm, med, native, ort_peak, ort_base, peak = [], [], [], [], [], [], \
        [], [], []
    ort_call, out = [], None
    env = tracejit_env()
    # the tool and its libraries in the page cache first, as onnxruntime's are by the import
    # before its clock starts (`show` loads the model only: nothing is traced or cached)
    subprocess.run([TOOL, "show", model], env=env, capture_output=True)
    for _ in range(rounds):
        c, o = time_ort(model, inputs, reps)
        ort_call.append(c)
        out = o if out is None else out
        a, b, pk, base = ort_first(model, inputs)
        ort_ms.append(a)
        ort2.append(b)
        ort_peak.append(pk)
        ort_base.append(base)
        with tempfile.TemporaryDirectory() as cache:
            f, m, n, pm = tracejit_run(model, inputs, reps, cache)
            cold.append(f)
            med.append(m)
            native.append(n)
            peak.append(pm)
            warm.append(tracejit_run(model, inputs, 1, cache)[0])
    stat = lambda v: dict(median=float(np.median(v)), min=min(v), max=max(v))  # noqa: E731
    return (dict(first=stat(ort_ms), second=stat(ort2), peak_mb=float(np.median(ort_peak)),
                 base_mb=float(np.median(ort_base)), per_call=stat(ort_call),
                 median_ms=float(np.median(ort_call))),
            dict(cold=stat(cold), warm=stat(warm), per_call=stat(med),
                 median_ms=float(np.median(med)), native_after_ms=float(np.median(native)),
                 peak_mb=float(np.median(peak)))), out


def tracejit_outputs(model, inputs):
    env = tracejit_env()
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as outdir:
        env["TJ_CACHE_DIR"] = cache
        p = subprocess.run([TOOL, "run", "-o", outdir, model] + inputs, env=env,
                           capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"tj_onnx run {model}: {p.stderr}")
        outs = sorted(f for f in os.listdir(outdir) if f.startswith("output_"))
        return [read_pb(os.path.join(outdir, f)) for f in outs]


def agree(a, b):
    """ONNX's tolerance (|a - b| <= 1e-5 + 1e-3 |b|), the absolute part scaled by the output's
    largest magnitude: randomly initialised deep networks (Inception v3) reach 1e12, where ONNX
    Runtime with and without its graph optimizations differ by more than 1e-5 + 1e-3 |b| on
    elements that cancel."""
    return len(a) == len(b) and all(
        x.shape == y.shape and np.allclose(
            x, y, rtol=1e-3, atol=1e-5 * max(1.0, float(np.nanmax(np.abs(y))) if y.size else 1.0),
            equal_nan=True)
        for x, y in zip(a, b))


def machine():
    """The CPU and the vector ISA tracejit's kernels use on it (`tj_cpu_isa()`'s answer from the
    same flags; TJ_ISA named when set), for the section's header."""
    model, flags, n = "unknown CPU", set(), 0
    try:
        for line in open("/proc/cpuinfo"):
            k, _, v = line.partition(":")
            if k.strip() == "model name":
                model, n = v.strip(), n + 1
            elif k.strip() in ("flags", "Features"):
                flags = set(v.split())
    except OSError:
        pass
    isa = ("avx512" if "avx512f" in flags else "avx2" if {"avx2", "fma"} <= flags
           else "neon" if "asimd" in flags else "generic")
    forced = os.environ.get("TJ_ISA")
    return f"{model}, {n} logical CPUs, kernels {isa}" + (f" (TJ_ISA={forced})" if forced else "")


def rng(d, digits=1):
    return f"{d['median']:.{digits}f} ({d['min']:.{digits}f}-{d['max']:.{digits}f})"


def markdown(rows, when, rounds):
    lines = [BEGIN, "### ONNX models: tracejit's importer and ONNX Runtime", "",
             f"`bench/peers/onnx_models.py` ({when}; {machine()}; {common.THREADS} threads "
             "each; the models "
             "and inputs it writes are in bench/out/onnx/). First call, each in a new process, "
             f"{rounds} times, the two interleaved; median (min-max): ONNX Runtime creates its "
             "session from the file and runs once (onnxruntime imported and the inputs read "
             "before the clock starts), as the process's first session (which also sets up "
             "ORT's environment) and again as a second session in the same process, its best "
             "case; tracejit (`tj_onnx time`) loads, traces, optimizes and "
             "runs the first call on the interpreter while LLVM compiles in the background "
             "(tiered; the column after it says how much later the native code was in place), "
             "with an empty disk cache (cold) and again in a second process (warm cache). Steady "
             "state, per call: in each round a session of ORT's in the benchmark's process, then "
             "tracejit's calls once its native code runs; the median of each round's median "
             "(min-max over the rounds). Ratios above 1 favour "
             "tracejit for steady state (ORT / tracejit); the first-call ratio is tracejit cold / "
             "ORT's second session, of the medians (the goal is at most 3). Peak memory: the "
             "largest resident set of each process (its VmHWM, median of the rounds): ONNX Runtime's "
             "after its first session and three runs, Python, NumPy and onnxruntime included "
             "(the column after it: that process before the session); tracejit's `tj_onnx time` "
             "process over its calls.", "",
             "| model | ORT first session + run (ms) | ORT second session + run (ms) | "
             "tracejit cold (ms) | native after (ms) | tracejit warm (ms) | cold / ORT second | "
             "ORT per call (ms) | tracejit per call (ms) | ORT / tracejit | ORT peak MB "
             "(before session) | tracejit peak MB | outputs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | | | | | | | | | | | | error: {r['error']} |")
            continue
        o, t = r["ort"], r["tracejit"]
        lines.append(
            f"| {r['model']} | {rng(o['first'])} | {rng(o['second'])} | {rng(t['cold'])} | "
            f"{t['native_after_ms']:.0f} | {rng(t['warm'])} | "
            f"{t['cold']['median'] / o['second']['median']:.2f} | "
            f"{rng(o['per_call'], 4)} | {rng(t['per_call'], 4)} | "
            f"{o['median_ms'] / t['median_ms']:.2f} | {o['peak_mb']:.0f} ({o['base_mb']:.0f}) | "
            f"{t['peak_mb']:.0f} | {'agree' if r['agree'] else 'DIFFER'} |")
    lines.append(END)
    return "\n".join(lines)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--ort-first":
        return ort_first_child(sys.argv[2], sys.argv[3:])
    quick = "--quick" in sys.argv
    if not os.path.exists(TOOL):
        sys.exit(f"{TOOL} is missing: build-bench (bench/run) builds it")
    models = [("seed_cnn",) + seed_cnn(), ("mlp",) + mlp(), ("resnet50_b1",) + resnet50(1),
              ("resnet50_b32",) + resnet50(32)]
    for name in TORCHVISION:
        try:
            models.append((f"{name}_b1",) + torchvision_model(name, 1))
        except Exception as e:  # torch or torchvision missing: reported as the model's row
            models.append((f"{name}_b1", None, str(e)[:200]))
    models += largest_converted(2 if quick else 3)
    rounds = 3 if quick else 5
    rows = []
    for name, model, inputs in models:
        reps = 20 if quick else 100
        if name.startswith("resnet50"):  # 4.1 GMAC an image: seconds a call at batch 32
            reps = 5 if name.endswith("b32") else 10
        if name.split("_b")[0] in TORCHVISION:  # 0.7-20 GMAC an image
            reps = 5 if quick else 10
        try:
            if model is None:
                raise RuntimeError(f"export: {inputs}")
            (o, t), oo = time_first_calls(model, inputs, reps, rounds)
            rows.append(dict(model=name, ort=o, tracejit=t,
                             agree=agree(tracejit_outputs(model, inputs), oo)))
        except Exception as e:  # reported, not fatal: the other models still run
            rows.append(dict(model=name, error=str(e)[:200]))
        r = rows[-1]
        if "error" in r:
            print(f"  {name:40} error: {r['error']}")
        else:
            o, t = r["ort"], r["tracejit"]
            print(f"  {name:40} first: ORT {rng(o['first'])} ms (second session "
                  f"{rng(o['second'])}), tracejit {rng(t['cold'])} ms "
                  f"(warm {rng(t['warm'])}); per call: ORT {o['median_ms']:.4f} ms, tracejit "
                  f"{t['median_ms']:.4f} ms; peak MB: ORT {o['peak_mb']:.0f}, tracejit "
                  f"{t['peak_mb']:.0f}; outputs {'agree' if r['agree'] else 'DIFFER'}")
    when = time.strftime("%Y-%m-%d") + f", onnxruntime {ort.__version__}"
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "onnx_models.json"), "w") as f:
        json.dump(dict(when=when, threads=common.THREADS, rounds=rounds, rows=rows), f, indent=1)
    section = markdown(rows, when, rounds)
    common.replace_section(PEERS_MD, BEGIN, END, section)
    print(f"wrote {os.path.join(OUT, 'onnx_models.json')} and {PEERS_MD}")


if __name__ == "__main__":
    main()
