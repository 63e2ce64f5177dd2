/* dispatch.c — rt_ref_kernel: the reference kernels' single entry, a table indexed by op
 * (rt_ref_kernels) that hands each node to its family (unary, cast, binary, reduce, matmul,
 * shape, source). The reference
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

/* The kernels that take their operands one by one, in the table's signature. */
#define ONE_IN(k)                                                                                  \
    static tj_status k##_1(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {               \
        return k(n, in[0], out);                                                                   \
    }
#define NO_IN(k)                                                                                   \
    static tj_status k##_0(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {               \
        (void)in;                                                                                  \
        return k(n, out);                                                                          \
    }
NO_IN(rt_k_eye)
NO_IN(rt_k_range)
NO_IN(rt_k_random)
ONE_IN(rt_k_unary)
ONE_IN(rt_k_cast)
ONE_IN(rt_k_reduce)
ONE_IN(rt_k_arg)
ONE_IN(rt_k_softmax)
ONE_IN(rt_k_copy)
ONE_IN(rt_k_transpose)
ONE_IN(rt_k_broadcast_to)
ONE_IN(rt_k_slice)
ONE_IN(rt_k_slice_grad)
ONE_IN(rt_k_one_hot)

/* Every op's reference kernel, indexed by op. NULL: the executor runs the op itself (sources it
 * binds, variables, effects, control flow: the IR_F_PLUMB ops), which tests/jit/test_op_table.c
 * checks for every op. */
const rt_ref_fn rt_ref_kernels[IR_N_OPS] = {
    [IR_OP_EYE] = rt_k_eye_0,
    [IR_OP_RANGE] = rt_k_range_0,
    [IR_OP_RANDOM_UNIFORM] = rt_k_random_0,
    [IR_OP_RANDOM_NORMAL] = rt_k_random_0,
    [IR_OP_NEG] = rt_k_unary_1,
    [IR_OP_ABS] = rt_k_unary_1,
    [IR_OP_SIGN] = rt_k_unary_1,
    [IR_OP_EXP] = rt_k_unary_1,
    [IR_OP_LOG] = rt_k_unary_1,
    [IR_OP_SQRT] = rt_k_unary_1,
    [IR_OP_RSQRT] = rt_k_unary_1,
    [IR_OP_TANH] = rt_k_unary_1,
    [IR_OP_SIGMOID] = rt_k_unary_1,
    [IR_OP_RELU] = rt_k_unary_1,
    [IR_OP_SIN] = rt_k_unary_1,
    [IR_OP_COS] = rt_k_unary_1,
    [IR_OP_ATAN] = rt_k_unary_1,
    [IR_OP_ASIN] = rt_k_unary_1,
    [IR_OP_ACOS] = rt_k_unary_1,
    [IR_OP_ERF] = rt_k_unary_1,
    [IR_OP_FLOOR] = rt_k_unary_1,
    [IR_OP_CEIL] = rt_k_unary_1,
    [IR_OP_ROUND] = rt_k_unary_1,
    [IR_OP_LOGICAL_NOT] = rt_k_unary_1,
    [IR_OP_ISNAN] = rt_k_unary_1,
    [IR_OP_ISINF] = rt_k_unary_1,
    [IR_OP_CAST] = rt_k_cast_1,
    [IR_OP_ADD] = rt_k_binary,
    [IR_OP_SUB] = rt_k_binary,
    [IR_OP_MUL] = rt_k_binary,
    [IR_OP_DIV] = rt_k_binary,
    [IR_OP_FLOORDIV] = rt_k_binary,
    [IR_OP_MOD] = rt_k_binary,
    [IR_OP_POW] = rt_k_binary,
    [IR_OP_MAXIMUM] = rt_k_binary,
    [IR_OP_MINIMUM] = rt_k_binary,
    [IR_OP_EQ] = rt_k_binary,
    [IR_OP_NE] = rt_k_binary,
    [IR_OP_LT] = rt_k_binary,
    [IR_OP_LE] = rt_k_binary,
    [IR_OP_GT] = rt_k_binary,
    [IR_OP_GE] = rt_k_binary,
    [IR_OP_LOGICAL_AND] = rt_k_binary,
    [IR_OP_LOGICAL_OR] = rt_k_binary,
    [IR_OP_SHIFT_LEFT] = rt_k_binary,
    [IR_OP_SHIFT_RIGHT] = rt_k_binary,
    [IR_OP_WHERE] = rt_k_where,
    [IR_OP_MATMUL] = rt_k_matmul,
    [IR_OP_SUM] = rt_k_reduce_1,
    [IR_OP_MEAN] = rt_k_reduce_1,
    [IR_OP_MAX] = rt_k_reduce_1,
    [IR_OP_MIN] = rt_k_reduce_1,
    [IR_OP_PROD] = rt_k_reduce_1,
    [IR_OP_ARGMAX] = rt_k_arg_1,
    [IR_OP_ARGMIN] = rt_k_arg_1,
    [IR_OP_SOFTMAX] = rt_k_softmax_1,
    [IR_OP_LOG_SOFTMAX] = rt_k_softmax_1,
    [IR_OP_RESHAPE] = rt_k_copy_1,
    [IR_OP_EXPAND_DIMS] = rt_k_copy_1,
    [IR_OP_SQUEEZE] = rt_k_copy_1,
    [IR_OP_TRANSPOSE] = rt_k_transpose_1,
    [IR_OP_BROADCAST_TO] = rt_k_broadcast_to_1,
    [IR_OP_CONCAT] = rt_k_concat,
    [IR_OP_SLICE] = rt_k_slice_1,
    [IR_OP_GATHER] = rt_k_gather,
    [IR_OP_SLICE_GRAD] = rt_k_slice_grad_1,
    [IR_OP_SCATTER_ADD] = rt_k_scatter_add,
    [IR_OP_CONV2D] = rt_k_conv2d,
    [IR_OP_CONV2D_GRAD_INPUT] = rt_k_conv2d,
    [IR_OP_CONV2D_GRAD_FILTER] = rt_k_conv2d,
    [IR_OP_MAX_POOL2D] = rt_k_pool2d,
    [IR_OP_MAX_POOL2D_GRAD] = rt_k_pool2d,
    [IR_OP_AVG_POOL2D] = rt_k_pool2d,
    [IR_OP_AVG_POOL2D_GRAD] = rt_k_pool2d,
    [IR_OP_ONE_HOT] = rt_k_one_hot_1,
    [IR_OP_SPARSE_XENT] = rt_k_sparse_xent,
    [IR_OP_UPDATE_INDEX] = rt_k_row,
    [IR_OP_READ_INDEX] = rt_k_row,
};

tj_status rt_ref_kernel(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    if (!n)
        return ir_errorf(TJ_ERR_INVALID, "ref_kernel: node is NULL");
    if (n->op >= IR_N_OPS)
        return ir_errorf(TJ_ERR_INVALID, "ref_kernel: bad op %u", n->op);
    rt_ref_fn k = rt_ref_kernels[n->op];
    if (!k)
        return ir_errorf(TJ_ERR_INVALID, "%s: has no reference kernel (handled by the executor)",
                         rt_k_name(n));
    tj_status st = check_call(n, in, out);
    return st ? st : k(n, in, out);
}

tj_tensor *rt_kernel_output(const ir_node *n) {
    /* elementwise kernels write every element too: zeroing outputs that are overwritten cost 14%
     * of a 12.8 MB eager transpose and 1.5 ms of the seed CNN's dense weight gradient */
    bool fills = ir_ops[n->op].flags & (IR_F_FILLS | IR_F_EW);
    return fills ? rt_tensor_alloc_uninit(n->dtype, n->rank, n->dims)
                 : rt_tensor_alloc(n->dtype, n->rank, n->dims);
}
