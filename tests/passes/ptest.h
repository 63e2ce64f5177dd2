/* ptest.h — helpers shared by the passes/ tests: graph builders over ir_add and a tiny constant
 * evaluator (neg/add/sub/mul/div on f32/i32/i64 with broadcasting, 1-D gather) standing in for
 * the reference kernels, which live in runtime/ and are out of reach of passes tests. The full
 * differential test with the real kernels lives in tests/jit/. */
#ifndef TJ_PTEST_H
#define TJ_PTEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/passes.h"

static int ptest_eval_calls __attribute__((unused));

static inline uint32_t b_param(ir_graph *g, int idx, int dt, int rank, const int64_t *dims) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_PARAM;
    p.a.i[0] = idx;
    p.dtype = (uint8_t)dt;
    p.rank = (uint8_t)rank;
    if (rank)
        memcpy(p.dims, dims, sizeof(int64_t) * rank);
    return ir_add(g, &p, NULL, 0);
}

static inline uint32_t b_const(ir_graph *g, int dt, int rank, const int64_t *dims,
                               const void *data) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_CONST;
    p.dtype = (uint8_t)dt;
    p.rank = (uint8_t)rank;
    if (rank)
        memcpy(p.dims, dims, sizeof(int64_t) * rank);
    int64_t n = ir_numel(rank, dims);
    p.a.blob = ir_add_blob(g, data, (size_t)n * ir_dtype_size(dt));
    return ir_add(g, &p, NULL, 0);
}

static inline uint32_t b_f32(ir_graph *g, float v) {
    return b_const(g, TJ_F32, 0, NULL, &v);
}
static inline uint32_t b_i32(ir_graph *g, int32_t v) {
    return b_const(g, TJ_I32, 0, NULL, &v);
}

static inline uint32_t b_op(ir_graph *g, int op, uint32_t n_in, const uint32_t *in) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = (uint16_t)op;
    return ir_add(g, &p, in, n_in);
}
static inline uint32_t b_un(ir_graph *g, int op, uint32_t a) {
    return b_op(g, op, 1, &a);
}
static inline uint32_t b_bin(ir_graph *g, int op, uint32_t a, uint32_t b) {
    uint32_t in[2] = {a, b};
    return b_op(g, op, 2, in);
}
/* op(x) with a target shape (reshape, broadcast_to) */
static inline uint32_t b_shaped(ir_graph *g, int op, uint32_t x, int rank, const int64_t *dims) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = (uint16_t)op;
    p.rank = (uint8_t)rank;
    if (rank)
        memcpy(p.dims, dims, sizeof(int64_t) * rank);
    return ir_add(g, &p, &x, 1);
}
/* op(x) with an int list (transpose perm, squeeze axes, slice begin/end/step) */
static inline uint32_t b_listed(ir_graph *g, int op, uint32_t x, uint32_t n, const int64_t *list) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = (uint16_t)op;
    p.a.n_list = n;
    memcpy(p.a.list, list, sizeof(int64_t) * n);
    return ir_add(g, &p, &x, 1);
}
static inline uint32_t b_i0(ir_graph *g, int op, uint32_t n_in, const uint32_t *in, int64_t i0) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = (uint16_t)op;
    p.a.i[0] = i0;
    return ir_add(g, &p, in, n_in);
}
static inline uint32_t b_print(ir_graph *g, uint32_t x, const char *prefix) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_PRINT;
    p.a.blob = ir_add_blob(g, prefix, strlen(prefix));
    return ir_add(g, &p, &x, 1);
}
static inline uint32_t b_random(ir_graph *g, int64_t seed, int rank, const int64_t *dims) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_RANDOM_UNIFORM;
    p.dtype = TJ_F32;
    p.a.i[0] = seed;
    p.a.f[1] = 1.0;
    p.rank = (uint8_t)rank;
    if (rank)
        memcpy(p.dims, dims, sizeof(int64_t) * rank);
    return ir_add(g, &p, NULL, 0);
}

/* ---- the test evaluator --------------------------------------------------------------------- */
static inline double ld(int dt, const void *p, int64_t i) {
    switch (dt) {
    case TJ_F32:
        return ((const float *)p)[i];
    case TJ_F64:
        return ((const double *)p)[i];
    case TJ_I32:
        return ((const int32_t *)p)[i];
    case TJ_I64:
        return (double)((const int64_t *)p)[i];
    default:
        return 0;
    }
}
static inline void st(int dt, void *p, int64_t i, double v) {
    switch (dt) {
    case TJ_F32:
        ((float *)p)[i] = (float)v;
        break;
    case TJ_F64:
        ((double *)p)[i] = v;
        break;
    case TJ_I32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case TJ_I64:
        ((int64_t *)p)[i] = (int64_t)v;
        break;
    default:
        break;
    }
}
/* flat index into an input of shape `in` broadcast to `out` */
static inline int64_t bidx(const ir_node *out, const ir_node *in, int64_t flat) {
    int64_t idx = 0, stride = 1;
    for (int k = out->rank - 1, j = in->rank - 1; k >= 0; k--, j--) {
        int64_t c = flat % out->dims[k];
        flat /= out->dims[k];
        if (j >= 0) {
            idx += (in->dims[j] == 1 ? 0 : c) * stride;
            stride *= in->dims[j];
        }
    }
    return idx;
}

static inline int ptest_eval(void *user, ir_graph *g, const ir_node *n, const uint32_t *in,
                             uint32_t n_in, uint32_t *blob_out) {
    ptest_eval_calls++;
    int dt = n->dtype;
    if (dt != TJ_F32 && dt != TJ_I32 && dt != TJ_I64 && dt != TJ_F64)
        return ir_errorf(TJ_ERR_UNSUPPORTED, "%s: test evaluator: unsupported dtype",
                         ir_ops[n->op].name);
    switch (n->op) {
    case IR_OP_NEG:
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV:
    case IR_OP_GATHER:
    case IR_OP_TRANSPOSE: /* rank 2 */
        break;
    default:
        return ir_errorf(TJ_ERR_UNSUPPORTED, "%s: test evaluator: unsupported op",
                         ir_ops[n->op].name);
    }
    int64_t numel = ir_numel(n->rank, n->dims);
    size_t es = ir_dtype_size(dt);
    unsigned char *out = calloc((size_t)(numel ? numel : 1), es);
    const ir_node *a = ir_node_get(g, in[0]);
    const void *pa = ir_blob_get(g, a->a.blob)->data;
    const ir_node *b = n_in > 1 ? ir_node_get(g, in[1]) : NULL;
    const void *pb = b ? ir_blob_get(g, b->a.blob)->data : NULL;
    for (int64_t i = 0; i < numel; i++) {
        if (n->op == IR_OP_TRANSPOSE && (n->rank != 2 || a->rank != 2)) {
            free(out);
            return ir_errorf(TJ_ERR_UNSUPPORTED, "transpose: test evaluator: rank 2 only");
        }
        int64_t ti = 0;
        if (n->op == IR_OP_TRANSPOSE) { /* out (i0, i1) reads a's coordinate perm[k] = ik */
            int64_t c[2], o[2] = {i / n->dims[1], i % n->dims[1]};
            c[n->a.list[0]] = o[0], c[n->a.list[1]] = o[1];
            ti = c[0] * a->dims[1] + c[1];
        }
        double x = n->op == IR_OP_GATHER      ? 0
                   : n->op == IR_OP_TRANSPOSE ? ld(a->dtype, pa, ti)
                                              : ld(a->dtype, pa, bidx(n, a, i));
        double y = b && n->op != IR_OP_GATHER ? ld(b->dtype, pb, bidx(n, b, i)) : 0, r;
        switch (n->op) {
        case IR_OP_NEG:
            r = -x;
            break;
        case IR_OP_TRANSPOSE:
            r = x;
            break;
        case IR_OP_ADD:
            r = x + y;
            break;
        case IR_OP_SUB:
            r = x - y;
            break;
        case IR_OP_MUL:
            r = x * y;
            break;
        case IR_OP_DIV:
            if (ir_dtype_is_int(dt) && y == 0) {
                free(out);
                return ir_errorf(TJ_ERR_RUNTIME, "div: integer division by zero");
            }
            r = ir_dtype_is_int(dt) ? (double)((int64_t)x / (int64_t)y) : x / y;
            break;
        case IR_OP_GATHER: { /* 1-D params only */
            int64_t k = (int64_t)ld(b->dtype, pb, i);
            if (a->rank != 1 || k < 0 || k >= a->dims[0]) {
                free(out);
                return ir_errorf(TJ_ERR_RUNTIME, "gather: index %lld out of range [0, %lld)",
                                 (long long)k, (long long)(a->rank ? a->dims[0] : 0));
            }
            r = ld(a->dtype, pa, k);
            break;
        }
        default:
            free(out);
            return ir_errorf(TJ_ERR_UNSUPPORTED, "%s: test evaluator: unsupported op",
                             ir_ops[n->op].name);
        }
        st(dt, out, i, r);
    }
    *blob_out = ir_add_blob(g, out, (size_t)numel * es);
    free(out);
    return *blob_out ? TJ_OK : TJ_ERR_OOM;
}

static inline pass_options ptest_opts(const char *passes) {
    pass_options o;
    memset(&o, 0, sizeof o);
    o.passes = passes;
    o.verify = 1;
    o.eval = ptest_eval;
    return o;
}

/* f32 payload of CONST node id, or NULL */
static inline const float *const_f32(const ir_graph *g, uint32_t id) {
    const ir_node *n = ir_node_get(g, id);
    if (n->op != IR_OP_CONST || n->dtype != TJ_F32)
        return NULL;
    return ir_blob_get(g, n->a.blob)->data;
}

static inline int count_op(const ir_graph *g, int op) {
    int c = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        c += g->nodes[i].op == op;
    return c;
}

#endif
