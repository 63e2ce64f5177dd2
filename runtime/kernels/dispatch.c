/* dispatch.c — rt_ref_kernel: the reference kernels' single entry, a switch on the op that hands
 * each node to its family (unary, cast, binary, reduce, matmul, shape, source). The reference
 * kernels are the semantic oracle for every backend and for constant folding: correctness and
 * clarity first. Checks here guard against malformed calls (wrong arity, non-concrete tensors,
 * an `out` that does not match the node) so a bad caller gets an error, never a crash. */
#include <stdio.h>

#include "runtime/device.h"
#include "runtime/kernels/kernels.h"

static tj_status check_call(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    const char *name = rt_k_name(n);
    int want = ir_ops[n->op].n_in;
    if (want >= 0 && n->n_in != (uint32_t)want)
        return ir_errorf(TJ_ERR_INVALID, "%s: expected %d inputs, got %u", name, want, n->n_in);
    if (n->n_in > 0 && !in)
        return ir_errorf(TJ_ERR_INVALID, "%s: inputs are NULL", name);
    for (uint32_t k = 0; k < n->n_in; k++) {
        const tj_tensor *t = in[k];
        if (!t || t->kind != RT_CONCRETE || (t->numel > 0 && !t->data)) {
            char what[32]; /* formatted only on failure: this runs on every call */
            snprintf(what, sizeof what, "input %u", k);
            return rt_k_check_tensor(n, what, t);
        }
        if (in[k]->dtype >= TJ_N_DTYPES)
            return ir_errorf(TJ_ERR_DTYPE, "%s: input %u has a bad dtype %d", name, k,
                             in[k]->dtype);
        if (!rt_on_host(t))
            return rt_check_host(name, in, n->n_in); /* names the input and its device */
    }
    tj_status st = rt_k_check_tensor(n, "output", out);
    if (st)
        return st;
    if (!rt_on_host(out))
        return ir_errorf(TJ_ERR_INVALID, "%s: the output is on %s; it runs on %s", name,
                         rt_buffer_device(out->buf)->name, rt_device_host()->name);
    if (out->dtype != n->dtype || out->rank != n->rank || out->dtype >= TJ_N_DTYPES)
        return ir_errorf(TJ_ERR_INVALID,
                         "%s: output tensor (%s, rank %d) does not match the node "
                         "(%s, rank %d)",
                         name, ir_dtype_name(out->dtype), out->rank, ir_dtype_name(n->dtype),
                         n->rank);
    for (int d = 0; d < n->rank; d++) {
        if (out->dims[d] != n->dims[d]) {
            char a[128], b[128];
            return ir_errorf(TJ_ERR_INVALID, "%s: output dims %s do not match the node's %s", name,
                             ir_fmt_dims(a, sizeof a, out->rank, out->dims),
                             ir_fmt_dims(b, sizeof b, n->rank, n->dims));
        }
    }
    return TJ_OK;
}

tj_status rt_ref_kernel(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    if (!n)
        return ir_errorf(TJ_ERR_INVALID, "ref_kernel: node is NULL");
    if (n->op >= IR_N_OPS)
        return ir_errorf(TJ_ERR_INVALID, "ref_kernel: bad op %u", n->op);
    switch (n->op) {
    case IR_OP_CONST:
    case IR_OP_PARAM:
    case IR_OP_VAR_READ:
    case IR_OP_PRINT:
    case IR_OP_HOST_CALLBACK:
    case IR_OP_ASSIGN:
        return ir_errorf(TJ_ERR_INVALID, "%s: has no reference kernel (handled by the executor)",
                         rt_k_name(n));
    default:
        break;
    }
    tj_status st = check_call(n, in, out);
    if (st)
        return st;

    switch (n->op) {
    case IR_OP_EYE:
        return rt_k_eye(n, out);
    case IR_OP_RANGE:
        return rt_k_range(n, out);
    case IR_OP_RANDOM_UNIFORM:
    case IR_OP_RANDOM_NORMAL:
        return rt_k_random(n, out);

    case IR_OP_NEG:
    case IR_OP_ABS:
    case IR_OP_SIGN:
    case IR_OP_EXP:
    case IR_OP_LOG:
    case IR_OP_SQRT:
    case IR_OP_RSQRT:
    case IR_OP_TANH:
    case IR_OP_SIGMOID:
    case IR_OP_RELU:
    case IR_OP_SIN:
    case IR_OP_COS:
    case IR_OP_ATAN:
    case IR_OP_ASIN:
    case IR_OP_ACOS:
    case IR_OP_ERF:
    case IR_OP_FLOOR:
    case IR_OP_CEIL:
    case IR_OP_ROUND:
    case IR_OP_LOGICAL_NOT:
    case IR_OP_ISNAN:
    case IR_OP_ISINF:
        return rt_k_unary(n, in[0], out);
    case IR_OP_CAST:
        return rt_k_cast(n, in[0], out);

    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV:
    case IR_OP_FLOORDIV:
    case IR_OP_MOD:
    case IR_OP_POW:
    case IR_OP_MAXIMUM:
    case IR_OP_MINIMUM:
    case IR_OP_EQ:
    case IR_OP_NE:
    case IR_OP_LT:
    case IR_OP_LE:
    case IR_OP_GT:
    case IR_OP_GE:
    case IR_OP_LOGICAL_AND:
    case IR_OP_LOGICAL_OR:
    case IR_OP_SHIFT_LEFT:
    case IR_OP_SHIFT_RIGHT:
        return rt_k_binary(n, in, out);
    case IR_OP_WHERE:
        return rt_k_where(n, in, out);

    case IR_OP_MATMUL:
        return rt_k_matmul(n, in, out);

    case IR_OP_SUM:
    case IR_OP_MEAN:
    case IR_OP_MAX:
    case IR_OP_MIN:
    case IR_OP_PROD:
        return rt_k_reduce(n, in[0], out);
    case IR_OP_ARGMAX:
    case IR_OP_ARGMIN:
        return rt_k_arg(n, in[0], out);
    case IR_OP_SOFTMAX:
    case IR_OP_LOG_SOFTMAX:
        return rt_k_softmax(n, in[0], out);

    case IR_OP_RESHAPE:
    case IR_OP_EXPAND_DIMS:
    case IR_OP_SQUEEZE:
        return rt_k_copy(n, in[0], out);
    case IR_OP_TRANSPOSE:
        return rt_k_transpose(n, in[0], out);
    case IR_OP_BROADCAST_TO:
        return rt_k_broadcast_to(n, in[0], out);
    case IR_OP_CONCAT:
        return rt_k_concat(n, in, out);
    case IR_OP_SLICE:
        return rt_k_slice(n, in[0], out);
    case IR_OP_GATHER:
        return rt_k_gather(n, in, out);
    case IR_OP_SLICE_GRAD:
        return rt_k_slice_grad(n, in[0], out);
    case IR_OP_SCATTER_ADD:
        return rt_k_scatter_add(n, in, out);
    case IR_OP_CONV2D:
    case IR_OP_CONV2D_GRAD_INPUT:
    case IR_OP_CONV2D_GRAD_FILTER:
        return rt_k_conv2d(n, in, out);
    case IR_OP_MAX_POOL2D:
    case IR_OP_MAX_POOL2D_GRAD:
    case IR_OP_AVG_POOL2D:
    case IR_OP_AVG_POOL2D_GRAD:
        return rt_k_pool2d(n, in, out);
    case IR_OP_ONE_HOT:
        return rt_k_one_hot(n, in[0], out);
    case IR_OP_SPARSE_XENT:
        return rt_k_sparse_xent(n, in, out);
    case IR_OP_UPDATE_INDEX:
    case IR_OP_READ_INDEX:
        return rt_k_row(n, in, out);
    default:
        break;
    }
    return ir_errorf(TJ_ERR_UNSUPPORTED, "%s: no reference kernel", rt_k_name(n));
}

tj_tensor *rt_kernel_output(const ir_node *n) {
    return ir_ops[n->op].flags & IR_F_FILLS ? rt_tensor_alloc_uninit(n->dtype, n->rank, n->dims)
                                            : rt_tensor_alloc(n->dtype, n->rank, n->dims);
}
