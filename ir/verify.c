/* verify.c — the structural checker run after every pass in tests: ids in range and in
 * topological order, every node's dtype/dims/attrs equal to what ir_infer derives again, the
 * interning key up to date, blob and subgraph references valid, outputs and effects valid (every
 * side-effect node listed, in increasing order), params numbered densely. Errors name the node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"

#define FAIL(...) return ir_errorf(TJ_ERR_INVALID, "verify: " __VA_ARGS__)

static bool same_node(const ir_node *a, const ir_node *b) {
    return a->op == b->op && a->dtype == b->dtype && a->rank == b->rank &&
           !memcmp(a->dims, b->dims, sizeof a->dims) && !memcmp(a->a.i, b->a.i, sizeof a->a.i) &&
           !memcmp(a->a.f, b->a.f, sizeof a->a.f) && a->a.n_list == b->a.n_list &&
           !memcmp(a->a.list, b->a.list,
                   sizeof(int64_t) * (a->a.n_list < IR_MAX_LIST ? a->a.n_list : IR_MAX_LIST)) &&
           a->a.blob == b->a.blob && !memcmp(a->a.sub, b->a.sub, sizeof a->a.sub);
}

static tj_status check_node(const ir_graph *g, uint32_t id, const ir_node **ins) {
    const ir_node *n = &g->nodes[id];
    if (n->op >= IR_N_OPS)
        FAIL("node %%%u has unknown op %u", id, (unsigned)n->op);
    const char *name = ir_ops[n->op].name;
    if (n->in_off > g->n_edges || n->n_in > g->n_edges - n->in_off)
        FAIL("node %%%u (%s) has inputs outside the edge array", id, name);
    const uint32_t *in = ir_inputs(g, n);
    for (uint32_t k = 0; k < n->n_in; k++) {
        if (in[k] >= id)
            FAIL("node %%%u (%s) input %u is %%%u: not topological", id, name, k, in[k]);
        ins[k] = &g->nodes[in[k]];
    }
    ir_node re = *n;
    tj_status st = (ir_ops[n->op].flags & IR_F_CF) || n->op == IR_OP_GET
                       ? ir_infer_in_graph(g, &re, in, n->n_in)
                       : ir_infer(&re, ins, n->n_in);
    if (st) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", ir_last_error());
        FAIL("node %%%u (%s) does not infer: %s", id, name, msg);
    }
    if (!same_node(&re, n))
        FAIL("node %%%u (%s) differs from its inferred dtype/shape/attrs", id, name);
    if (ir_check_payload(g, n)) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", ir_last_error());
        FAIL("node %%%u (%s): %s", id, name, msg);
    }
    if (ir_node_key(g, n, in) != n->h)
        FAIL("node %%%u (%s) has a stale interning key", id, name);
    return TJ_OK;
}

tj_status ir_verify(const ir_graph *g) {
    if (!g)
        FAIL("NULL graph");
    uint32_t max_in = 0;
    for (uint32_t id = 0; id < g->n_nodes; id++)
        if (g->nodes[id].n_in > max_in)
            max_in = g->nodes[id].n_in;
    const ir_node **ins = malloc(sizeof *ins * (max_in + 1));
    uint8_t *param_seen = calloc((size_t)g->n_params + 1, 1);
    tj_status st = TJ_OK;
    if (!ins || !param_seen) {
        st = ir_errorf(TJ_ERR_OOM, "verify: out of memory");
        goto done;
    }
    uint32_t next_effect = 0, max_slot = 0;
    for (uint32_t id = 0; id < g->n_nodes && !st; id++) {
        const ir_node *n = &g->nodes[id];
        st = check_node(g, id, ins);
        if (st)
            break;
        if (n->op == IR_OP_PARAM) {
            if ((uint64_t)n->a.i[0] >= g->n_params)
                st = ir_errorf(TJ_ERR_INVALID, "verify: param %%%u has index %lld >= %u", id,
                               (long long)n->a.i[0], g->n_params);
            else if (param_seen[n->a.i[0]]++)
                st = ir_errorf(TJ_ERR_INVALID, "verify: param index %lld defined twice (%%%u)",
                               (long long)n->a.i[0], id);
        }
        if ((n->op == IR_OP_VAR_READ || n->op == IR_OP_ASSIGN) &&
            (uint64_t)n->a.i[0] + 1 > max_slot)
            max_slot = (uint32_t)n->a.i[0] + 1;
        if (!st && ir_node_has_effect(g, n)) {
            while (next_effect < g->n_effects && g->effects[next_effect] < id)
                next_effect++;
            if (next_effect >= g->n_effects || g->effects[next_effect] != id)
                st = ir_errorf(TJ_ERR_INVALID,
                               "verify: side-effect node %%%u (%s) is not in "
                               "the effect list",
                               id, ir_ops[n->op].name);
        }
    }
    for (uint32_t p = 0; !st && p < g->n_params; p++)
        if (!param_seen[p])
            st = ir_errorf(TJ_ERR_INVALID, "verify: param index %u is missing (n_params %u)", p,
                           g->n_params);
    if (!st && max_slot > g->n_caps)
        st = ir_errorf(TJ_ERR_INVALID, "verify: capture slot %u used but n_caps is %u",
                       max_slot - 1, g->n_caps);
    for (uint32_t i = 0; !st && i < g->n_outputs; i++)
        if (g->outputs[i] >= g->n_nodes || g->nodes[g->outputs[i]].dtype == IR_VOID)
            st = ir_errorf(TJ_ERR_INVALID, "verify: output %u (%%%u) is not a value node", i,
                           g->outputs[i]);
    for (uint32_t i = 0; !st && i < g->n_effects; i++)
        if (g->effects[i] >= g->n_nodes || (i && g->effects[i] <= g->effects[i - 1]))
            st = ir_errorf(TJ_ERR_INVALID, "verify: effect %u (%%%u) is out of range or order", i,
                           g->effects[i]);
    for (uint32_t i = 0; !st && i < g->n_subs; i++) {
        if (!g->subs[i])
            st = ir_errorf(TJ_ERR_INVALID, "verify: subgraph %u is NULL", i + 1);
        else
            st = ir_verify(g->subs[i]);
    }
done:
    free(ins);
    free(param_seen);
    return st;
}
