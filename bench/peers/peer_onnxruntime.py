"""peer_onnxruntime.py — ONNX Runtime (CPU execution provider): each workload is an ONNX graph
built with onnx.helper (opset 17) and run by an InferenceSession (all graph optimizations, intra-op
2 threads, inter-op 1, sequential). A session is a compiled graph: there is no eager mode. The
convolution uses ONNX's NCHW layout (input transposed once, outside the timing). First call =
build the graph + create the session + run once; the chain has a symbolic length, so a new shape
does not rebuild the session."""
import time

import common
from common import Runner, WORKLOADS, TANH_A, TANH_B, TANH_C
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort

R = Runner("onnxruntime", common.dist_versions("onnxruntime", "onnx"))
E = "onnxruntime"
F, I32 = TensorProto.FLOAT, TensorProto.INT32


def session(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = common.THREADS
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def scalar(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.float32), name)


def binop(op, a, b, out):
    return helper.make_node(op, [a, b], [out])


def build_power():
    nodes, prev = [], "eye"
    for i in range(100):
        nodes.append(binop("MatMul", "x", prev, f"r{i}"))
        prev = f"r{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    eye = numpy_helper.from_array(np.eye(10, dtype=np.int32), "eye")
    return session(nodes, [vi("x", I32, [10, 10])], [vi("y", I32, [10, 10])], [eye])


def build_ew(kind, n):
    x, y = [vi("x", F, [n])], [vi("y", F, [n])]
    if kind == "poly":  # (x*2+1)*x-3
        nodes = [binop("Mul", "x", "c2", "t0"), binop("Add", "t0", "c1", "t1"),
                 binop("Mul", "t1", "x", "t2"), binop("Sub", "t2", "c3", "y")]
        inits = [scalar("c2", 2), scalar("c1", 1), scalar("c3", 3)]
    else:  # tanh(x*a+b)*c - x
        nodes = [binop("Mul", "x", "a", "t0"), binop("Add", "t0", "b", "t1"),
                 helper.make_node("Tanh", ["t1"], ["t2"]), binop("Mul", "t2", "c", "t3"),
                 binop("Sub", "t3", "x", "y")]
        inits = [scalar("a", TANH_A), scalar("b", TANH_B), scalar("c", TANH_C)]
    return session(nodes, x, y, inits)


def build_chain():
    nodes, prev, inits = [], "x", [scalar("m", 1.0001), scalar("s", 0.5)]
    for i in range(common.CHAIN_STEPS):
        nodes += [binop("Mul", prev, "m", f"p{i}"), binop("Sub", f"p{i}", "s", f"q{i}")]
        prev = f"q{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    return session(nodes, [vi("x", F, ["n"])], [vi("y", F, ["n"])], inits)


def build_while_tanh():
    """Loop (no trip count) whose body returns tanh(x) and sum(tanh(x)) > 30 as the condition of
    the next iteration; the first condition is computed before the loop."""
    body = helper.make_graph(
        [helper.make_node("Tanh", ["xb"], ["xn"]),
         helper.make_node("ReduceSum", ["xn"], ["s"], keepdims=0),
         binop("Greater", "s", "lim", "c")],
        "body", [vi("it", TensorProto.INT64, []), vi("cin", TensorProto.BOOL, []),
                 vi("xb", F, [common.WT_N])],
        [vi("c", TensorProto.BOOL, []), vi("xn", F, [common.WT_N])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s0"], keepdims=0),
             binop("Greater", "s0", "lim", "c0"),
             helper.make_node("Loop", ["", "c0", "x"], ["y"], body=body)]
    return session(nodes, [vi("x", F, [common.WT_N])], [vi("y", F, [common.WT_N])],
                   [scalar("lim", common.WT_LIMIT)])


def build_rnn():
    """ONNX's own RNN operator (tanh): W and R are the transposed weights, B = [Wb, Rb]."""
    T, B, H = common.RNN_T, common.RNN_B, common.RNN_H
    nodes = [helper.make_node("RNN", ["x", "w", "r", "b", "", "h0"], ["", "yh"], hidden_size=H),
             helper.make_node("Squeeze", ["yh", "axis0"], ["y"])]
    inputs = [vi("x", F, [T, B, H]), vi("w", F, [1, H, H]), vi("r", F, [1, H, H]),
              vi("b", F, [1, 2 * H]), vi("h0", F, [1, B, H])]
    axis0 = numpy_helper.from_array(np.array([0], np.int64), "axis0")
    return session(nodes, inputs, [vi("y", F, [B, H])], [axis0])


def build_fizzbuzz():
    """Loop over i = 0..n-1 (k = i + 1) with nested Ifs adding a one-hot row to the counts."""
    I64 = TensorProto.INT64

    def const(name, v):
        return numpy_helper.from_array(np.array(v, np.int64), name)

    def bump(j):
        return helper.make_graph([binop("Add", "cb", f"e{j}", f"o{j}")], f"bump{j}", [],
                                 [vi(f"o{j}", I64, [4])], [const(f"e{j}", np.eye(4)[j])])

    def divisible(k, out):
        return [binop("Mod", "k", f"m{k}", f"r{k}"), binop("Equal", f"r{k}", "zero", out)]

    def branch(level):  # level 0: %15, 1: %3, 2: %5, else bump(3)
        if level == 3:
            return bump(3)
        div = {0: 15, 1: 3, 2: 5}[level]
        nodes = divisible(div, f"d{level}") + [helper.make_node(
            "If", [f"d{level}"], [f"out{level}"], then_branch=bump(level),
            else_branch=branch(level + 1))]
        return helper.make_graph(nodes, f"level{level}", [], [vi(f"out{level}", I64, [4])])

    top = branch(0)
    body = helper.make_graph(
        [binop("Add", "i", "one", "k"), helper.make_node("Identity", ["cin"], ["cout"]),
         helper.make_node("Identity", ["c"], ["cb"])] + list(top.node) +
        [helper.make_node("Identity", ["out0"], ["cnext"])],
        "body", [vi("i", I64, []), vi("cin", TensorProto.BOOL, []), vi("c", I64, [4])],
        [vi("cout", TensorProto.BOOL, []), vi("cnext", I64, [4])],
        [const("one", 1), const("zero", 0), const("m15", 15), const("m3", 3), const("m5", 5)])
    nodes = [helper.make_node("Loop", ["n", "", "c0"], ["y"], body=body)]
    return session(nodes, [vi("n", I64, [])], [vi("y", I64, [4])],
                   [numpy_helper.from_array(np.zeros(4, np.int64), "c0")])


def timed(name, sess, feeds, out=lambda y: y, note=""):
    run = sess.run
    R.time(name, E, "compiled", lambda: lambda: run(None, feeds)[0], to_numpy=out, note=note)


def main():
    if R.wants("call_overhead"):
        a, b = WORKLOADS["call_overhead"].inputs
        s = session([binop("Add", "a", "b", "y")], [vi("a", F, [1]), vi("b", F, [1])],
                    [vi("y", F, [1])])
        timed("call_overhead", s, {"a": a, "b": b}, note="InferenceSession.run")
    if R.wants("power_10x10_i32"):
        timed("power_10x10_i32", build_power(), {"x": WORKLOADS["power_10x10_i32"].inputs[0]})
    if R.wants("conv2d_200x200x100"):
        x, w, b = WORKLOADS["conv2d_200x200x100"].inputs
        s = session([helper.make_node("Conv", ["x", "w", "b"], ["y"])],
                    [vi("x", F, [1, 100, 200, 200])], [vi("y", F, [1, 100, 198, 198])],
                    [numpy_helper.from_array(np.ascontiguousarray(w.transpose(3, 2, 0, 1)), "w"),
                     numpy_helper.from_array(b, "b")])
        xn = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        timed("conv2d_200x200x100", s, {"x": xn}, out=lambda y: y.transpose(0, 2, 3, 1),
              note="NCHW")
    for kind in ("poly", "tanh"):
        name = f"ew_{kind}_2e24"
        if R.wants(name):
            timed(name, build_ew(kind, common.EW_N), {"x": WORKLOADS[name].inputs[0]})
    for n in common.MATMUL_SIZES:
        name = f"matmul_f32_{n}"
        if R.wants(name):
            a, b = WORKLOADS[name].inputs
            s = session([binop("MatMul", "a", "b", "y")], [vi("a", F, [n, n]), vi("b", F, [n, n])],
                        [vi("y", F, [n, n])])
            timed(name, s, {"a": a, "b": b})
    if R.wants("dense_bias_relu_1024"):
        x, w, b = WORKLOADS["dense_bias_relu_1024"].inputs
        s = session([binop("MatMul", "x", "w", "t"), binop("Add", "t", "b", "u"),
                     helper.make_node("Relu", ["u"], ["y"])],
                    [vi("x", F, [1024, 1024]), vi("w", F, [1024, 1024]), vi("b", F, [1024])],
                    [vi("y", F, [1024, 1024])])
        timed("dense_bias_relu_1024", s, {"x": x, "w": w, "b": b})
    if R.wants("softmax_4096"):
        s = session([helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
                    [vi("x", F, [4096, 4096])], [vi("y", F, [4096, 4096])])
        timed("softmax_4096", s, {"x": WORKLOADS["softmax_4096"].inputs[0]})

    x16 = WORKLOADS["first_call_50op"].inputs[0]
    x32 = WORKLOADS["retrace_50op"].inputs[0]
    R.first_call("first_call_50op", E, lambda: common.timed_first(
        build_chain, lambda s: s.run(None, {"x": x16})[0]), note="build graph + session + run")

    def retrace():
        s = build_chain()
        s.run(None, {"x": x16})
        t0 = time.perf_counter()
        y = s.run(None, {"x": x32})[0]
        return time.perf_counter() - t0, y

    R.first_call("retrace_50op", E, retrace, note="symbolic dim: no rebuild")

    if R.wants("shapes_sweep"):
        x, w, b = WORKLOADS["shapes_sweep"].inputs
        xs = [np.ascontiguousarray(x[:n]) for n in common.SWEEP_SIZES]

        def sweep():
            t0 = time.perf_counter()
            s = session([binop("MatMul", "x", "w", "t"), binop("Add", "t", "b", "u"),
                         helper.make_node("Relu", ["u"], ["y"])],
                        [vi("x", F, ["n", common.SWEEP_K])],
                        [vi("y", F, ["n", common.SWEEP_N])],
                        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
            y = None
            for xn in xs:
                y = s.run(None, {"x": xn})[0]
            return time.perf_counter() - t0, y

        R.first_call("shapes_sweep", E, sweep, note="session with a symbolic batch dim + 100 runs",
                     reps=1 if R.quick else 3)

    if R.wants("while_tanh"):
        timed("while_tanh", build_while_tanh(), {"x": WORKLOADS["while_tanh"].inputs[0]},
              note="Loop")
    if R.wants("rnn_scan"):
        xs, h0, W, U, b = WORKLOADS["rnn_scan"].inputs
        timed("rnn_scan", build_rnn(), {"x": xs, "w": W.T[None].copy(), "r": U.T[None].copy(),
                                        "b": np.concatenate([b, b * 0])[None], "h0": h0[None]},
              note="the RNN operator")
    if R.wants("fizzbuzz_1e5"):
        timed("fizzbuzz_1e5", build_fizzbuzz(), {"n": np.array(WORKLOADS["fizzbuzz_1e5"].inputs[0])},
              note="Loop + nested If")
    R.save()


if __name__ == "__main__":
    assert onnx.__version__
    main()
