/* interp.c — the interpreter: a plan (plan.h) of one node step per live node, in node order,
 * run by the same loop as compiled programs with the reference kernels. It is the eager oracle
 * for compiled backends and the fallback program. Only live nodes run (those that reach an
 * output or an effect: non-strict execution even without the pruning pass), values are released
 * after their last use, an elementwise node may write over an input that dies there, and side
 * effects run in program order (node order). */
#include <stdlib.h>
#include <string.h>

#include "runtime/plan.h"

static void mark_live(const ir_graph *g, uint8_t *live) {
    for (uint32_t i = g->n_nodes; i-- > 0;) {
        if (!live[i])
            continue;
        const ir_node *n = &g->nodes[i];
        const uint32_t *in = ir_inputs(g, n);
        for (uint32_t k = 0; k < n->n_in; k++)
            live[in[k]] = 1;
    }
}

static int graph_has_unknown(const ir_graph *g) {
    for (uint32_t i = 0; i < g->n_nodes; i++)
        for (int d = 0; d < g->nodes[i].rank; d++)
            if (g->nodes[i].dims[d] < 0)
                return 1;
    return 0;
}

static void interp_free(rt_program *p) {
    if (!p)
        return;
    rt_plan_release((rt_plan *)p);
    free(p);
}

static const rt_program_vt interp_vt = {rt_plan_run, interp_free, "interp", NULL, NULL, NULL, NULL};

static rt_program *interp_region(const ir_graph *g, void *ctx) {
    (void)ctx;
    return rt_interp_new(g);
}

/* A plan of node steps for the nodes marked in live (0/1 per node); regions when `regions`. */
static rt_plan *plan_live(const ir_graph *g, uint8_t *live, bool regions) {
    rt_plan *p = calloc(1, sizeof *p);
    if (!p) {
        ir_errorf(TJ_ERR_OOM, "interp: out of memory");
        return NULL;
    }
    p->base.vt = &interp_vt;
    tj_status st = rt_plan_init(p, g, "interp");
    mark_live(g, live);
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        n += live[i];
    if (!st && (!(p->steps = calloc(n + 1, sizeof *p->steps)) ||
                !(p->consts = calloc(g->n_nodes + 1, sizeof *p->consts))))
        st = ir_errorf(TJ_ERR_OOM, "interp: out of memory");
    for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
        if (!live[i])
            continue;
        const ir_node *nd = &g->nodes[i];
        rt_step *sp = &p->steps[p->n_steps++];
        sp->kind = RT_STEP_NODE;
        sp->id = i;
        sp->n_in = nd->n_in;
        sp->n_out = 1;
        if (!(sp->in = malloc((nd->n_in + 1) * sizeof *sp->in)) ||
            !(sp->out = malloc(sizeof *sp->out))) {
            st = ir_errorf(TJ_ERR_OOM, "interp: out of memory");
            break;
        }
        if (nd->n_in)
            memcpy(sp->in, ir_inputs(g, nd), nd->n_in * sizeof *sp->in);
        sp->out[0] = i;
        if (nd->op == IR_OP_CONST && regions && !(p->consts[i] = rt_const_tensor(g, nd)))
            st = ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
    }
    p->reuse = 1;
    p->reinfer = graph_has_unknown(g);
    if (!st)
        st = rt_plan_finish(p, false, regions ? interp_region : NULL, NULL);
    if (st) {
        interp_free(&p->base);
        return NULL;
    }
    return p;
}

rt_program *rt_interp_new(const ir_graph *g) {
    uint8_t *live = calloc(g->n_nodes + 1, 1);
    if (!live) {
        ir_errorf(TJ_ERR_OOM, "interp: out of memory");
        return NULL;
    }
    for (uint32_t k = 0; k < g->n_outputs; k++)
        live[g->outputs[k]] = 1;
    for (uint32_t k = 0; k < g->n_effects; k++)
        live[g->effects[k]] = 1;
    rt_plan *p = plan_live(g, live, true);
    free(live);
    return p ? &p->base : NULL;
}

tj_tensor *rt_eval_node(const ir_graph *g, uint32_t id, tj_tensor *const *args, uint32_t n_args,
                        tj_variable **caps) {
    if (id >= g->n_nodes)
        return (void)ir_errorf(TJ_ERR_INVALID, "eval: node %u out of range", id), NULL;
    uint8_t *live = calloc(g->n_nodes + 1, 1);
    tj_tensor **vals = calloc(g->n_nodes + 1, sizeof *vals);
    tj_tensor *res = NULL;
    rt_plan *p = NULL;
    if (!live || !vals) {
        ir_errorf(TJ_ERR_OOM, "eval: out of memory");
    } else {
        live[id] = 1;
        p = plan_live(g, live, false);
    }
    if (p) {
        p->who = "eval";
        rt_exec_env env = {
            .args = args, .n_args = n_args, .caps = caps, .reinfer = p->reinfer, .who = "eval"};
        if (rt_plan_eval(p, &env, id, vals) == TJ_OK)
            res = rt_retain(vals[id]);
        for (uint32_t i = 0; i < g->n_nodes; i++)
            rt_release(vals[i]);
        interp_free(&p->base);
    }
    free(live);
    free(vals);
    return res;
}
