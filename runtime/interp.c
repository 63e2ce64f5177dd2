/* interp.c — the interpreter: runs a graph node by node with the reference kernels. It is the
 * eager oracle for compiled backends and the fallback program. Only live nodes run (those that
 * reach an output or an effect: non-strict execution even without the pruning pass), values are
 * released after their last use, and side effects run in program order (node order). */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

typedef struct interp {
    rt_program base;
    tj_tensor **consts;   /* per node: materialised CONST payloads */
    rt_program **regions; /* per node, two each: control-flow regions, interpreted too */
    uint8_t *live;
    uint32_t *last_use; /* per node: the last node that reads it (IR_NONE: an output) */
    int has_unknown;    /* some dims are -1: re-infer shapes from the actual inputs */
} interp;

static void mark_live(const ir_graph *g, uint8_t *live) {
    for (uint32_t k = 0; k < g->n_outputs; k++)
        live[g->outputs[k]] = 1;
    for (uint32_t k = 0; k < g->n_effects; k++)
        live[g->effects[k]] = 1;
    for (uint32_t i = g->n_nodes; i-- > 0;) {
        if (!live[i])
            continue;
        const ir_node *n = &g->nodes[i];
        const uint32_t *in = ir_inputs(g, n);
        for (uint32_t k = 0; k < n->n_in; k++)
            live[in[k]] = 1;
    }
}

static void compute_last_use(const ir_graph *g, const uint8_t *live, uint32_t *last_use) {
    for (uint32_t i = 0; i < g->n_nodes; i++)
        last_use[i] = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        if (!live[i])
            continue;
        const ir_node *n = &g->nodes[i];
        const uint32_t *in = ir_inputs(g, n);
        for (uint32_t k = 0; k < n->n_in; k++)
            last_use[in[k]] = i;
    }
    for (uint32_t k = 0; k < g->n_outputs; k++)
        last_use[g->outputs[k]] = IR_NONE;
}

/* An elementwise node whose input dies there writes its result into that input's buffer when
 * nothing else holds it (not borrowed, immutable, a view or shared) and its dtype and dims are
 * the node's: each element is read at its own index before it is written. A model's chain of
 * activations (conv, + bias, relu) then takes one buffer on the first call, not one per op:
 * fresh memory is what a first call pays most for. */
static tj_tensor *reusable(const ir_graph *g, const ir_node *n, uint32_t i,
                           const uint32_t *last_use, uint32_t keep, tj_tensor *const *vals) {
    if (!(ir_ops[n->op].flags & IR_F_EW) || (ir_ops[n->op].flags & IR_F_CMP) ||
        n->dtype == TJ_STRING)
        return NULL;
    const uint32_t *in = ir_inputs(g, n);
    for (uint32_t k = 0; k < n->n_in; k++) {
        tj_tensor *t = vals[in[k]];
        if (last_use[in[k]] != i || in[k] == keep || !t || t->kind != RT_CONCRETE || !t->buf ||
            atomic_load(&t->rc) != 1 || atomic_load(&t->buf->rc) != 1 || t->buf->release ||
            t->buf->immutable || t->buf->n_strings || t->data != t->buf->data || t->is_static ||
            t->host_scalar || t->dtype != n->dtype || t->rank != n->rank ||
            memcmp(t->dims, n->dims, (size_t)n->rank * sizeof *n->dims) != 0)
            continue;
        return t;
    }
    return NULL;
}

/* Runs the live nodes of g. effects=0 evaluates values only (no print, callback or assignment).
 * On success vals[] holds the values still referenced (outputs, and `keep`). */
static tj_status run(const ir_graph *g, const uint8_t *live, const uint32_t *last_use,
                     const rt_exec_env *env, uint32_t keep, tj_tensor **vals) {
    tj_tensor *stack_ins[8];
    tj_status st = TJ_OK;
    for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
        if (!live[i])
            continue;
        const ir_node *n = &g->nodes[i];
        const uint32_t *in = ir_inputs(g, n);
        tj_tensor **ins = n->n_in <= 8 ? stack_ins : malloc(n->n_in * sizeof *ins);
        if (!ins)
            return ir_errorf(TJ_ERR_OOM, "interp: out of memory");
        double t0 = RT_PROFILING() ? rt_profile_now() : 0;
        st = rt_exec_node(g, i, env, vals, ins, reusable(g, n, i, last_use, keep, vals));
        if (!st && RT_CHECKING_NUMERICS() && vals[i]) {
            int is_nan = 0;
            int64_t at = rt_numerics_first_bad(vals[i], &is_nan);
            if (at >= 0)
                st = rt_numerics_error("", ir_ops[n->op].name, i, vals[i], at, is_nan,
                                       "(interpreter)");
        }
        if (t0 && n->op != IR_OP_CONST && n->op != IR_OP_PARAM) {
            char d[96];
            rt_profile_event("op", ir_ops[n->op].name, t0, "\"node\":%u,\"out\":\"%s%s\"", i,
                             ir_dtype_short(n->dtype),
                             rt_profile_dims(d, sizeof d, n->rank, n->dims));
        }
        if (ins != stack_ins)
            free(ins);
        for (uint32_t k = 0; k < n->n_in; k++) {
            uint32_t j = in[k];
            if (last_use[j] == i && j != keep) {
                rt_release(vals[j]);
                vals[j] = NULL;
            }
        }
    }
    return st;
}

static int graph_has_unknown(const ir_graph *g) {
    for (uint32_t i = 0; i < g->n_nodes; i++)
        for (int d = 0; d < g->nodes[i].rank; d++)
            if (g->nodes[i].dims[d] < 0)
                return 1;
    return 0;
}

static tj_status interp_run(rt_program *p, tj_tensor *const *args, uint32_t n_args,
                            tj_variable **caps, tj_tensor **outs) {
    interp *ip = (interp *)p;
    const ir_graph *g = p->g;
    tj_tensor *stack_vals[64] = {0};
    tj_tensor **vals = g->n_nodes <= 64 ? stack_vals : calloc(g->n_nodes, sizeof *vals);
    if (!vals)
        return ir_errorf(TJ_ERR_OOM, "interp: out of memory");
    rt_exec_env env = {.args = args,
                       .n_args = n_args,
                       .caps = caps,
                       .consts = ip->consts,
                       .regions = ip->regions,
                       .effects = 1,
                       .reinfer = ip->has_unknown,
                       .who = "interp"};
    tj_status st = run(g, ip->live, ip->last_use, &env, IR_NONE, vals);
    for (uint32_t k = 0; k < g->n_outputs && !st; k++) {
        if (!outs[k])
            outs[k] = rt_retain(vals[g->outputs[k]]);
        else
            st = rt_copy_into(outs[k], vals[g->outputs[k]]); /* tj_call_into */
    }
    for (uint32_t i = 0; i < g->n_nodes; i++)
        rt_release(vals[i]);
    if (vals != stack_vals)
        free(vals);
    return st;
}

static void interp_free(rt_program *p) {
    interp *ip = (interp *)p;
    if (ip->consts)
        for (uint32_t i = 0; i < p->g->n_nodes; i++)
            rt_release(ip->consts[i]);
    free(ip->consts);
    rt_regions_free(ip->regions, p->g);
    free(ip->live);
    free(ip->last_use);
    free(ip);
}

static const rt_program_vt interp_vt = {interp_run, interp_free, "interp", NULL, NULL, NULL, NULL};

static rt_program *interp_region(const ir_graph *g, void *ctx) {
    (void)ctx;
    return rt_interp_new(g);
}

rt_program *rt_interp_new(const ir_graph *g) {
    interp *ip = calloc(1, sizeof *ip);
    uint32_t n = g->n_nodes ? g->n_nodes : 1;
    if (!ip || !(ip->consts = calloc(n, sizeof *ip->consts)) || !(ip->live = calloc(n, 1)) ||
        !(ip->last_use = calloc(n, sizeof *ip->last_use))) {
        if (ip) {
            free(ip->consts);
            free(ip->live);
        }
        free(ip);
        ir_errorf(TJ_ERR_OOM, "interp: out of memory");
        return NULL;
    }
    ip->base.vt = &interp_vt;
    ip->base.g = g;
    mark_live(g, ip->live);
    compute_last_use(g, ip->live, ip->last_use);
    ip->has_unknown = graph_has_unknown(g);
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op == IR_OP_CONST && ip->live[i] &&
            !(ip->consts[i] = rt_const_tensor(g, &g->nodes[i]))) {
            interp_free(&ip->base);
            return NULL;
        }
    }
    if (rt_regions_new(g, interp_region, NULL, &ip->regions) != TJ_OK) {
        interp_free(&ip->base);
        return NULL;
    }
    return &ip->base;
}

tj_tensor *rt_eval_node(const ir_graph *g, uint32_t id, tj_tensor *const *args, uint32_t n_args,
                        tj_variable **caps) {
    if (id >= g->n_nodes)
        return (void)ir_errorf(TJ_ERR_INVALID, "eval: node %u out of range", id), NULL;
    uint32_t n = g->n_nodes;
    uint8_t *live = calloc(n, 1);
    uint32_t *last_use = calloc(n, sizeof *last_use);
    tj_tensor **vals = calloc(n, sizeof *vals);
    tj_tensor *res = NULL;
    if (live && last_use && vals) {
        live[id] = 1;
        for (uint32_t i = id + 1; i-- > 0;) {
            if (!live[i])
                continue;
            const ir_node *nd = &g->nodes[i];
            const uint32_t *in = ir_inputs(g, nd);
            for (uint32_t k = 0; k < nd->n_in; k++)
                live[in[k]] = 1;
        }
        compute_last_use(g, live, last_use);
        rt_exec_env env = {.args = args,
                           .n_args = n_args,
                           .caps = caps,
                           .reinfer = graph_has_unknown(g),
                           .who = "eval"};
        if (run(g, live, last_use, &env, id, vals) == TJ_OK)
            res = rt_retain(vals[id]);
        for (uint32_t i = 0; i < n; i++)
            rt_release(vals[i]);
    } else {
        ir_errorf(TJ_ERR_OOM, "eval: out of memory");
    }
    free(live);
    free(last_use);
    free(vals);
    return res;
}
