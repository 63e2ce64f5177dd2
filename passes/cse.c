/* cse.c — common-subexpression elimination. ir_add interns identical pure nodes as they are
 * built, so CSE is a rebuild (rebuild.c): nodes that became identical after folding or
 * simplification (same op, attrs, dtype, dims and, by then, the same input ids) collapse into the
 * first of them. Side-effect and random nodes are never interned by ir_add and so never merged.
 * Two nodes merge only if their handles are the same, so a merged node never leaves an orphan
 * copy behind. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static bool same_node(const ir_graph *g, const ir_node *a, const ir_node *b) {
    if (a->h != b->h || a->op != b->op || a->dtype != b->dtype || a->rank != b->rank ||
        a->n_in != b->n_in || a->a.n_list != b->a.n_list ||
        memcmp(a->dims, b->dims, sizeof(int64_t) * a->rank) ||
        memcmp(a->a.i, b->a.i, sizeof a->a.i) || memcmp(a->a.f, b->a.f, sizeof a->a.f) ||
        memcmp(a->a.list, b->a.list,
               sizeof(int64_t) * (a->a.n_list < IR_MAX_LIST ? a->a.n_list : IR_MAX_LIST)) ||
        memcmp(a->a.sub, b->a.sub, sizeof a->a.sub) ||
        memcmp(ir_inputs(g, a), ir_inputs(g, b), sizeof(uint32_t) * a->n_in))
        return false;
    if (a->a.blob == b->a.blob)
        return true;
    const ir_blob *x = ir_blob_get(g, a->a.blob), *y = ir_blob_get(g, b->a.blob);
    return x && y && x->size == y->size && (!x->size || !memcmp(x->data, y->data, x->size));
}

/* Does g hold two identical internable nodes? (Never, for a graph built through ir_add alone;
 * a graph assembled another way may.) -1 on OOM. Slots keep the low key bits beside the id, so
 * only a likely match reads an earlier node. */
static int has_duplicates(const ir_graph *g) {
    uint32_t cap = 64;
    while (cap < 2 * (uint64_t)g->n_nodes + 2)
        cap *= 2;
    uint32_t *t = calloc(2 * (size_t)cap, sizeof *t);
    if (!t)
        return -1;
    int dup = 0;
    for (uint32_t id = 0; id < g->n_nodes && !dup; id++) {
        const ir_node *n = ir_node_get(g, id);
        if ((ir_ops[n->op].flags & IR_F_RAND) || ir_node_has_effect(g, n))
            continue;
        uint32_t h32 = (uint32_t)n->h, j = h32 & (cap - 1);
        for (; t[2 * j] && !dup; j = (j + 1) & (cap - 1))
            dup = t[2 * j + 1] == h32 && same_node(g, ir_node_get(g, t[2 * j] - 1), n);
        t[2 * j] = id + 1;
        t[2 * j + 1] = h32;
    }
    free(t);
    return dup;
}

ir_graph *pass_cse_run(const ir_graph *g, const pass_options *opts, pass_stat *st) {
    int dup = has_duplicates(g);
    if (dup < 0) {
        ir_errorf(TJ_ERR_OOM, "cse: out of memory for %u nodes", g->n_nodes);
        return NULL;
    }
    if (!dup)
        return (ir_graph *)g;
    pass_rebuild rb;
    if (pass_rebuild_begin(&rb, g, g->n_nodes, g->n_edges) != TJ_OK)
        return NULL;
    for (uint32_t id = 0; id < g->n_nodes; id++) {
        uint32_t d = pass_copy(&rb, id);
        if (d == IR_NONE)
            return pass_rebuild_abort(&rb);
        pass_map(&rb, id, d);
    }
    return pass_rebuild_end(&rb, st);
}
