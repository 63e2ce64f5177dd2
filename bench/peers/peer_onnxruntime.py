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
    R.save()


if __name__ == "__main__":
    assert onnx.__version__
    main()
