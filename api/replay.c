/* replay.c — runs a graph's nodes again through the op entry points (api_apply), so that they are
 * recorded into the current trace (or run eagerly) and seen by recording tapes: how a gradient
 * rule differentiates the region of a control-flow node (grad.c, tape.c). Pure nodes only: a
 * region with side effects, nested control flow or tensor arrays' effects is refused with an
 * error naming the node, since replaying it would repeat its effects. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

/* The variable of capture slot `slot`: the function's list lives on the root trace. */
static tj_variable *captured(uint32_t slot) {
    rt_trace *t = api_trace_current();
    while (t && t->parent && t->is_region)
        t = t->parent;
    return t && slot < t->n_caps ? t->caps[slot] : NULL;
}

/* A nested cond replays as a cond whose branches replay its regions (tj_switch makes such
 * trees): the operands and captures are passed as the branches' arguments. */
typedef struct nested {
    const ir_graph *r[2];
} nested;

static tj_tensor *replay_branch(int k, int n, tj_tensor *const *args, void *user) {
    const ir_graph *g = ((const nested *)user)->r[k];
    tj_tensor **outs = calloc((size_t)g->n_outputs + 1, sizeof *outs);
    if (!outs)
        return tj_error_new(TJ_ERR_OOM, "replay: out of memory");
    tj_status st = api_replay_graph(g, args, (uint32_t)n, outs);
    tj_tensor *r = st                  ? tj_error_new(st, "%s", ir_last_error())
                   : g->n_outputs == 1 ? outs[0]
                                       : tj_tuple((int)g->n_outputs, outs);
    free(outs);
    return r;
}
static tj_tensor *replay_then(int n, tj_tensor *const *args, void *user) {
    return replay_branch(0, n, args, user);
}
static tj_tensor *replay_else(int n, tj_tensor *const *args, void *user) {
    return replay_branch(1, n, args, user);
}

tj_status api_replay_graph(const ir_graph *g, tj_tensor *const *params, uint32_t n_params,
                           tj_tensor **outs) {
    tj_tensor **v = calloc((size_t)g->n_nodes + 1, sizeof *v);
    if (!v)
        return ir_errorf(TJ_ERR_OOM, "replay: out of memory");
    tj_status st = TJ_OK;
    tj_scope_begin();
    for (uint32_t id = 0; id < g->n_nodes && !st; id++) {
        const ir_node *n = ir_node_get(g, id);
        const char *op = n->op < IR_N_OPS ? ir_ops[n->op].name : "?";
        unsigned fl = n->op < IR_N_OPS ? ir_ops[n->op].flags : 0;
        if (n->op == IR_OP_PARAM) {
            if (n->a.i[0] < 0 || (uint64_t)n->a.i[0] >= n_params)
                st = ir_errorf(TJ_ERR_INVALID, "replay: param %lld of %u", (long long)n->a.i[0],
                               n_params);
            else
                v[id] = params[n->a.i[0]];
            continue;
        }
        if (n->op == IR_OP_CONST) {
            tj_tensor *c = rt_const_tensor(g, n);
            if (!c)
                st = ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
            v[id] = rt_scoped(c);
            continue;
        }
        if (n->op == IR_OP_VAR_READ) {
            tj_variable *var = captured((uint32_t)n->a.i[0]);
            if (!var)
                st = ir_errorf(TJ_ERR_STATE, "replay: variable slot %lld is not captured",
                               (long long)n->a.i[0]);
            else
                v[id] = tj_variable_read(var);
            continue;
        }
        if (n->op == IR_OP_COND && !ir_node_has_effect(g, n)) {
            const uint32_t *in = ir_inputs(g, n);
            tj_tensor **a = calloc((size_t)n->n_in + 1, sizeof *a);
            nested ctx = {{ir_region(g, n, 0), ir_region(g, n, 1)}};
            if (!a || !ctx.r[0] || !ctx.r[1]) {
                free(a);
                st = ir_errorf(TJ_ERR_OOM, "replay: out of memory");
                break;
            }
            for (uint32_t k = 0; k < n->n_in; k++)
                a[k] = v[in[k]];
            tj_tensor *r = tj_cond(a[0], replay_then, replay_else, (int)n->n_in - 1, a + 1, &ctx);
            free(a);
            if (r->kind == RT_ERROR)
                st = ir_errorf(r->code, "replay of %%%u (cond): %s", id, r->msg);
            v[id] = r;
            continue;
        }
        if (n->op == IR_OP_GET && ir_node_get(g, ir_inputs(g, n)[0])->op == IR_OP_COND) {
            tj_tensor *c = v[ir_inputs(g, n)[0]];
            v[id] = c->kind == RT_TUPLE ? tj_tuple_get(c, (int)n->a.i[0]) : c;
            continue;
        }
        if ((fl & (IR_F_SIDE | IR_F_CF)) || n->op == IR_OP_GET || n->op == IR_OP_PRINT ||
            n->op == IR_OP_HOST_CALLBACK || n->op == IR_OP_ASSIGN) {
            st = ir_errorf(TJ_ERR_UNSUPPORTED,
                           "the branch has a '%s' node (%%%u): gradients through control flow "
                           "need branches without side effects or nested control flow",
                           op, id);
            break;
        }
        const uint32_t *in = ir_inputs(g, n);
        tj_tensor *stack_a[8], **a = n->n_in <= 8 ? stack_a : malloc(n->n_in * sizeof *a);
        if (!a) {
            st = ir_errorf(TJ_ERR_OOM, "replay: out of memory");
            break;
        }
        for (uint32_t k = 0; k < n->n_in; k++)
            a[k] = v[in[k]];
        ir_node p = *n;
        p.in_off = 0;
        tj_tensor *r = api_apply(&p, a, n->n_in);
        if (a != stack_a)
            free(a);
        if (r->kind == RT_ERROR)
            st = ir_errorf(r->code, "replay of %%%u (%s): %s", id, op, r->msg);
        v[id] = r;
    }
    for (uint32_t k = 0; k < g->n_outputs && !st; k++)
        outs[k] = rt_retain(v[g->outputs[k]]);
    tj_scope_end();
    free(v);
    for (uint32_t k = 0; k < g->n_outputs && !st; k++)
        rt_scoped(outs[k]);
    return st;
}
