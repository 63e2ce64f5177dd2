/* test_cpu_util.h — helpers shared by tests/jit/test_cpu_*.c: graph building shorthands, random
 * tensors per dtype, running a graph with the interpreter (the oracle, on rt_ref_kernel) and
 * with the CPU JIT, and comparing results (bitwise, NaN equal to NaN, or within a tolerance). */
#ifndef TJ_TEST_CPU_UTIL_H
#define TJ_TEST_CPU_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/cpu.h"
#include "runtime/runtime.h"

static uint64_t tu_rng = 88172645463325252ull;
static inline uint64_t tu_next(void) {
    tu_rng ^= tu_rng << 13;
    tu_rng ^= tu_rng >> 7;
    tu_rng ^= tu_rng << 17;
    return tu_rng;
}
static inline int tu_rand(int n) {
    return (int)(tu_next() % (uint64_t)n);
}
static inline double tu_unif(double lo, double hi) {
    return lo + (hi - lo) * (double)(tu_next() >> 11) / 9007199254740992.0;
}

static inline uint32_t tu_param(ir_graph *g, int idx, int dt, int rank, const int64_t *dims) {
    ir_node p = {0};
    p.op = IR_OP_PARAM;
    p.dtype = (uint8_t)dt;
    p.rank = (uint8_t)rank;
    if (rank)
        memcpy(p.dims, dims, (size_t)rank * sizeof *dims);
    p.a.i[0] = idx;
    return ir_add(g, &p, NULL, 0);
}
static inline uint32_t tu_op(ir_graph *g, int op, uint32_t a, uint32_t b, uint32_t c) {
    ir_node p = {0};
    p.op = (uint16_t)op;
    uint32_t in[3] = {a, b, c};
    uint32_t n = c != IR_NONE ? 3 : b != IR_NONE ? 2 : 1;
    return ir_add(g, &p, in, n);
}
static inline uint32_t tu_un(ir_graph *g, int op, uint32_t a) {
    return tu_op(g, op, a, IR_NONE, IR_NONE);
}
static inline uint32_t tu_bin(ir_graph *g, int op, uint32_t a, uint32_t b) {
    return tu_op(g, op, a, b, IR_NONE);
}
static inline uint32_t tu_cast(ir_graph *g, uint32_t a, int dt) {
    ir_node p = {0};
    p.op = IR_OP_CAST;
    p.dtype = (uint8_t)dt;
    return ir_add(g, &p, &a, 1);
}
static inline uint32_t tu_const_f64(ir_graph *g, int dt, double v) {
    tj_tensor *t = rt_tensor_alloc(dt, 0, NULL);
    switch (dt) {
    case TJ_F32:
        *(float *)t->data = (float)v;
        break;
    case TJ_F64:
        *(double *)t->data = v;
        break;
    case TJ_I32:
        *(int32_t *)t->data = (int32_t)v;
        break;
    case TJ_I64:
        *(int64_t *)t->data = (int64_t)v;
        break;
    default:
        *(uint8_t *)t->data = v != 0;
        break;
    }
    ir_node p = {0};
    p.op = IR_OP_CONST;
    p.dtype = (uint8_t)dt;
    p.a.blob = rt_const_blob(g, t);
    tj_release(t);
    return ir_add(g, &p, NULL, 0);
}

/* Random values of dt: floats in [-4, 4) with some specials when `specials`, ints in [-50, 50),
 * bools 0/1. */
static inline tj_tensor *tu_random(int dt, int rank, const int64_t *dims, int specials) {
    tj_tensor *t = rt_tensor_alloc(dt, rank, dims);
    for (int64_t i = 0; i < t->numel; i++) {
        double v = tu_unif(-4, 4);
        if (specials && tu_rand(16) == 0) {
            static const double sp[] = {0.0,       -0.0, 1.0 / 0.0, -1.0 / 0.0,
                                        0.0 / 0.0, 0.5,  -0.5,      2.5};
            v = sp[tu_rand(8)];
        }
        switch (dt) {
        case TJ_F32:
            ((float *)t->data)[i] = (float)v;
            break;
        case TJ_F64:
            ((double *)t->data)[i] = v;
            break;
        case TJ_I32:
            ((int32_t *)t->data)[i] = tu_rand(100) - 50;
            break;
        case TJ_I64:
            ((int64_t *)t->data)[i] = tu_rand(100) - 50;
            break;
        default:
            ((uint8_t *)t->data)[i] = (uint8_t)tu_rand(2);
            break;
        }
    }
    return t;
}

static inline double tu_get(const tj_tensor *t, int64_t i) {
    switch (t->dtype) {
    case TJ_F32:
        return ((const float *)t->data)[i];
    case TJ_F64:
        return ((const double *)t->data)[i];
    case TJ_I32:
        return ((const int32_t *)t->data)[i];
    case TJ_I64:
        return (double)((const int64_t *)t->data)[i];
    default:
        return ((const uint8_t *)t->data)[i];
    }
}

/* Number of elements that differ: bitwise for ints/bools; floats equal when both NaN, or when
 * |a-b| <= tol * max(1, |b|) (tol 0: identical values, -0 == +0 counts as a difference). */
static inline int64_t tu_diff(const tj_tensor *a, const tj_tensor *b, double tol, int64_t *first) {
    if (!a || !b || a->dtype != b->dtype || a->numel != b->numel || a->rank != b->rank)
        return -1;
    int64_t bad = 0;
    size_t es = ir_dtype_size(a->dtype);
    for (int64_t i = 0; i < a->numel; i++) {
        bool ok;
        if (a->dtype == TJ_F32 || a->dtype == TJ_F64) {
            double x = tu_get(a, i), y = tu_get(b, i);
            if (x != x || y != y)
                ok = x != x && y != y;
            else if (tol == 0)
                ok = memcmp((char *)a->data + i * es, (char *)b->data + i * es, es) == 0;
            else
                ok = x == y || fabs(x - y) <= tol * (fabs(y) > 1 ? fabs(y) : 1);
        } else {
            ok = memcmp((char *)a->data + i * es, (char *)b->data + i * es, es) == 0;
        }
        if (!ok && bad++ == 0 && first)
            *first = i;
    }
    return bad;
}

/* Runs program p; outs must hold g->n_outputs slots. */
static inline tj_status tu_run(rt_program *p, tj_tensor *const *args, uint32_t n,
                               tj_tensor **outs) {
    for (uint32_t k = 0; k < p->g->n_outputs; k++)
        outs[k] = NULL; /* NULL: the program allocates; non-NULL would mean "write into this" */
    return p->vt->run(p, args, n, NULL, outs);
}

#ifdef TJ_CHECK_H
/* Runs p and ref on args and CHECKs that every output agrees (tolerance as in tu_diff). */
static inline void tu_compare_programs(rt_program *p, rt_program *ref, tj_tensor **args, uint32_t n,
                                       double tol, const char *what) {
    tj_tensor *a[16] = {0}, *b[16] = {0};
    uint32_t n_out = p->g->n_outputs < 16 ? p->g->n_outputs : 16;
    tj_status sa = tu_run(p, args, n, a), sb = tu_run(ref, args, n, b);
    CHECK_MSG(sa == sb, "%s: status %d vs %d (%s)", what, sa, sb, ir_last_error());
    for (uint32_t k = 0; k < n_out && !sa && !sb; k++) {
        int64_t first = -1, bad = tu_diff(a[k], b[k], tol, &first);
        CHECK_MSG(bad == 0, "%s output %u: %lld differ, first %lld: %.17g vs %.17g", what, k,
                  (long long)bad, (long long)first, first >= 0 ? tu_get(a[k], first) : 0.0,
                  first >= 0 ? tu_get(b[k], first) : 0.0);
    }
    for (int k = 0; k < 16; k++) {
        tj_release(a[k]);
        tj_release(b[k]);
    }
}
#endif

#endif
