/* prune.c — dead-op pruning ("non-strict" execution, S23). Only nodes that reach an output or
 * an effect survive; params are always kept so argument binding by index never changes.
 * A node that would fail at run time (a gather out of range, a division by zero the folder
 * refused) is simply dropped when nothing uses it. Effects keep their program order. One
 * backward sweep marks liveness (ids are topological), one forward sweep copies the live nodes. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

ir_graph *pass_prune_run(const ir_graph *g, const pass_options *opts, pass_stat *st) {
    uint32_t n = g->n_nodes;
    uint8_t *live = calloc(n ? n : 1, 1);
    if (!live) {
        ir_errorf(TJ_ERR_OOM, "prune: out of memory for %u nodes", n);
        return NULL;
    }
    for (uint32_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] < n)
            live[g->outputs[i]] = 1;
    for (uint32_t i = 0; i < g->n_effects; i++)
        if (g->effects[i] < n)
            live[g->effects[i]] = 1;
    uint32_t e_live = 0; /* edges of the live nodes: the rebuild's size */
    for (uint32_t id = n; id-- > 0;) {
        const ir_node *nd = ir_node_get(g, id);
        if (ir_node_has_effect(g, nd))
            live[id] = 1; /* an effect missing from the list is still an effect */
        if (nd->op == IR_OP_PARAM)
            live[id] = 1;
        if (!live[id])
            continue;
        e_live += nd->n_in;
        const uint32_t *in = ir_inputs(g, nd);
        for (uint32_t k = 0; k < nd->n_in; k++)
            live[in[k]] = 1;
    }
    uint32_t n_live = 0;
    for (uint32_t id = 0; id < n; id++)
        n_live += live[id];
    if (n_live == n) { /* nothing dead */
        free(live);
        return (ir_graph *)g;
    }
    pass_rebuild rb;
    if (pass_rebuild_begin(&rb, g, n_live, e_live) != TJ_OK) {
        free(live);
        return NULL;
    }
    uint64_t removed = 0;
    for (uint32_t id = 0; id < n; id++) {
        if (!live[id]) {
            removed++;
            continue;
        }
        uint32_t d = pass_copy(&rb, id);
        if (d == IR_NONE) {
            free(live);
            return pass_rebuild_abort(&rb);
        }
        pass_map(&rb, id, d);
    }
    free(live);
    ir_graph *out = pass_rebuild_end(&rb, st);
    if (out && st)
        st->removed += removed;
    return out;
}
