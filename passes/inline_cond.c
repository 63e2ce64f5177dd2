/* inline_cond.c — a COND whose predicate is a constant becomes the branch it takes (part of the
 * simplify pass): the branch's nodes are copied into the enclosing graph at the node's place, its
 * params bound to the node's operands, and the GETs of the node read the branch's results. The
 * branch's side effects join the enclosing graph's effects in program order (a print in the
 * taken branch still prints; the other branch's never could). Variable reads of the branch get
 * fresh versions so they never merge with a read from before the node. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

/* The index of the branch a COND takes, or -1 when its predicate is not a constant. */
static int taken(const ir_graph *g, const ir_node *n) {
    if (n->op != IR_OP_COND || n->n_in < 1)
        return -1;
    const ir_blob *b = pass_const_blob(g, ir_inputs(g, n)[0]);
    if (!b || b->size < 1)
        return -1;
    return ((const uint8_t *)b->data)[0] ? 0 : 1;
}

bool pass_has_const_cond(const ir_graph *g) {
    for (uint32_t id = 0; id < g->n_nodes; id++)
        if (taken(g, ir_node_get(g, id)) >= 0)
            return true;
    return false;
}

/* Copies region r's nodes into dst with params bound to ops; writes the dst ids of r's outputs
 * to outs. IR_NONE on failure. */
static uint32_t inline_region(ir_graph *dst, const ir_graph *r, const uint32_t *ops, uint32_t n_ops,
                              uint32_t *outs) {
    uint32_t *lmap = malloc(((size_t)r->n_nodes + 1) * sizeof *lmap);
    uint32_t stack_in[16], *in = stack_in;
    if (!lmap)
        return IR_NONE;
    uint32_t ok = 1;
    for (uint32_t j = 0; j < r->n_nodes && ok; j++) {
        const ir_node *rn = ir_node_get(r, j);
        if (rn->op == IR_OP_PARAM) {
            lmap[j] = (uint64_t)rn->a.i[0] < n_ops ? ops[rn->a.i[0]] : IR_NONE;
            ok = lmap[j] != IR_NONE;
            continue;
        }
        ir_node p = *rn;
        const ir_blob *b = ir_blob_get(r, rn->a.blob);
        if (b && !(p.a.blob = ir_add_blob_shared(dst, b)))
            ok = 0;
        for (int k = 0; k < 2 && ok; k++) {
            const ir_graph *sub = rn->a.sub[k] ? ir_region(r, rn, k) : NULL;
            ir_graph *c = sub ? ir_graph_share(sub) : NULL;
            if (sub && (!c || !(p.a.sub[k] = ir_add_sub(dst, c)))) {
                ir_graph_free(c);
                ok = 0;
            }
        }
        if (rn->op == IR_OP_VAR_READ) /* a fresh version: never the read of another place */
            p.a.i[1] = ((int64_t)1 << 40) + dst->n_nodes;
        if (rn->n_in > 16 && !(in = malloc(rn->n_in * sizeof *in)))
            ok = 0;
        const uint32_t *rin = ir_inputs(r, rn);
        for (uint32_t k = 0; k < rn->n_in && ok; k++)
            in[k] = lmap[rin[k]];
        if (ok && (lmap[j] = ir_add(dst, &p, in, rn->n_in)) == IR_NONE)
            ok = 0;
        if (in != stack_in) {
            free(in);
            in = stack_in;
        }
    }
    for (uint32_t k = 0; k < r->n_outputs && ok; k++)
        outs[k] = lmap[r->outputs[k]];
    free(lmap);
    return ok ? 0 : IR_NONE;
}

ir_graph *pass_inline_conds(const ir_graph *g, pass_stat *st) {
    pass_rebuild rb;
    /* the branches' nodes come in addition: no presizing bound */
    if (pass_rebuild_begin(&rb, g, g->n_nodes, g->n_edges) != TJ_OK)
        return NULL;
    rb.keep_effects = true; /* effects in node order: the inlined ones take the node's place */
    uint32_t **results = calloc((size_t)g->n_nodes + 1, sizeof *results);
    if (!results)
        return pass_rebuild_abort(&rb);
    uint64_t inlined = 0;
    bool ok = true;
    for (uint32_t id = 0; id < g->n_nodes && ok; id++) {
        const ir_node *n = ir_node_get(g, id);
        const uint32_t *in = ir_inputs(g, n);
        int k = taken(g, n);
        if (k >= 0) {
            const ir_graph *r = ir_region(g, n, k);
            uint32_t n_ops = n->n_in - 1, stack_ops[16];
            uint32_t *ops = n_ops <= 16 ? stack_ops : malloc(n_ops * sizeof *ops);
            results[id] = calloc((size_t)r->n_outputs + 1, sizeof **results);
            ok = ops && results[id];
            for (uint32_t j = 0; j < n_ops && ok; j++)
                ops[j] = rb.map[in[1 + j]];
            ok = ok && inline_region(rb.dst, r, ops, n_ops, results[id]) != IR_NONE;
            if (ops != stack_ops)
                free(ops);
            inlined++;
            continue; /* the node itself is gone; its GETs read results[id] */
        }
        if (n->op == IR_OP_GET && results[in[0]]) {
            pass_map(&rb, id, results[in[0]][n->a.i[0]]);
            continue;
        }
        uint32_t d = pass_copy(&rb, id);
        ok = d != IR_NONE;
        if (ok)
            pass_map(&rb, id, d);
    }
    for (uint32_t id = 0; id < g->n_nodes; id++)
        free(results[id]);
    free(results);
    if (!ok)
        return pass_rebuild_abort(&rb);
    ir_graph *out = pass_rebuild_end(&rb, st);
    if (out && st)
        st->simplified += inlined;
    return out;
}
