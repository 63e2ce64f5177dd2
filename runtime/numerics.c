/* numerics.c — check numerics (S26, tf.debugging.enable_check_numerics, jax_debug_nans): while
 * on, every float result an op produces eagerly, every node the interpreter runs and every
 * output of a compiled program's kernels is scanned for NaN and infinity. The first one found is
 * an error naming the op — its node, type, dtype and shape, the function and the signature — not
 * only the fused kernel that contains it: the kernel's nodes are run again one by one on the
 * reference kernels (what jax_debug_nans does with the de-optimized function) to find the first
 * node whose result is bad. Off, the hooks cost one relaxed load. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "runtime/runtime.h"

atomic_int rt_check_numerics;

void tj_enable_check_numerics(void) {
    atomic_store(&rt_check_numerics, 1);
}
void tj_disable_check_numerics(void) {
    atomic_store(&rt_check_numerics, 0);
}

/* The exponent bits all ones: NaN or an infinity. Integer tests OR-reduce in vector lanes (a
 * float sum would not vectorize without reassociation); a block that has one is searched. */
#define SCAN(T, U, EXP)                                                                            \
    static int64_t scan_##T(const T *p, int64_t n) {                                               \
        for (int64_t i0 = 0; i0 < n; i0 += 4096) {                                                 \
            int64_t e = i0 + 4096 < n ? i0 + 4096 : n;                                             \
            U any = 0;                                                                             \
            for (int64_t i = i0; i < e; i++) {                                                     \
                U b;                                                                               \
                memcpy(&b, p + i, sizeof b);                                                       \
                any |= (U)((b & EXP) == EXP);                                                      \
            }                                                                                      \
            if (any)                                                                               \
                for (int64_t i = i0; i < e; i++)                                                   \
                    if (!isfinite(p[i]))                                                           \
                        return i;                                                                  \
        }                                                                                          \
        return -1;                                                                                 \
    }
SCAN(float, uint32_t, 0x7f800000u)
SCAN(double, uint64_t, 0x7ff0000000000000ull)

int64_t rt_numerics_first_bad(const tj_tensor *t, int *is_nan) {
    if (!t || t->kind != RT_CONCRETE || !t->data || (t->dtype != TJ_F32 && t->dtype != TJ_F64))
        return -1;
    int64_t i = t->dtype == TJ_F32 ? scan_float(t->data, t->numel) : scan_double(t->data, t->numel);
    if (i >= 0 && is_nan)
        *is_nan = t->dtype == TJ_F32 ? isnan(((const float *)t->data)[i])
                                     : isnan(((const double *)t->data)[i]);
    return i;
}

tj_status rt_numerics_error(const char *where, const char *op, int64_t node, const tj_tensor *t,
                            int64_t at, int is_nan, const char *context) {
    char dims[128];
    int len = snprintf(dims, sizeof dims, "[");
    for (int d = 0; d < t->rank && len < (int)sizeof dims; d++)
        len += snprintf(dims + len, sizeof dims - (size_t)len, "%s%lld", d ? "," : "",
                        (long long)t->dims[d]);
    if (len < (int)sizeof dims)
        snprintf(dims + len, sizeof dims - (size_t)len, "]");
    char id[32] = "";
    if (node >= 0)
        snprintf(id, sizeof id, "%%%lld ", (long long)node);
    return ir_errorf(TJ_ERR_RUNTIME,
                     "check_numerics: op %s'%s' (%s%s) produced %s at element %lld%s%s%s%s", id, op,
                     ir_dtype_short(t->dtype), dims, is_nan ? "NaN" : "Inf", (long long)at,
                     where && *where ? " " : "", where ? where : "", context && *context ? " " : "",
                     context ? context : "");
}

tj_status rt_numerics_locate(const ir_graph *g, const uint32_t *nodes, uint32_t n_nodes,
                             const rt_exec_env *env, tj_tensor *const *vals, const char *context) {
    tj_tensor **tmp = calloc(g->n_nodes + 1, sizeof *tmp), *stack_ins[16];
    uint8_t *mine = calloc(g->n_nodes + 1, 1);
    if (!tmp || !mine) {
        free(tmp);
        free(mine);
        return TJ_OK; /* the caller reports the kernel instead */
    }
    for (uint32_t k = 0; k < n_nodes; k++)
        mine[nodes[k]] = 1;
    rt_exec_env e = *env;
    e.effects = 0;
    e.device = NULL; /* the reference kernels, on host copies of a device plan's values */
    tj_status st = TJ_OK;
    for (uint32_t i = 0; i < g->n_nodes && !st; i++) { /* ascending ids: a topological order */
        if (!mine[i])
            continue;
        const ir_node *n = ir_node_get(g, i);
        const uint32_t *in = ir_inputs(g, n);
        bool have = true;
        for (uint32_t k = 0; k < n->n_in; k++) { /* the step's inputs, from the run */
            if (!mine[in[k]] && !tmp[in[k]])
                tmp[in[k]] = rt_on_host(vals[in[k]])
                                 ? rt_retain(vals[in[k]])
                                 : rt_tensor_to_device(vals[in[k]], rt_device_host());
            have = have && tmp[in[k]];
        }
        if (!have) /* an input the run no longer holds (or a node that failed here) */
            continue;
        tj_tensor **ins = n->n_in <= 16 ? stack_ins : malloc(n->n_in * sizeof *ins);
        if (!ins)
            break;
        tj_status r = rt_exec_node(g, i, &e, tmp, ins, NULL);
        if (ins != stack_ins)
            free(ins);
        if (r) {
            ir_clear_error();
            continue;
        }
        int is_nan = 0;
        int64_t at = rt_numerics_first_bad(tmp[i], &is_nan);
        if (at >= 0)
            st = rt_numerics_error("", ir_ops[n->op].name, i, tmp[i], at, is_nan, context);
    }
    for (uint32_t i = 0; i < g->n_nodes; i++)
        rt_release(tmp[i]);
    free(tmp);
    free(mine);
    return st;
}
