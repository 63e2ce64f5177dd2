/* rebuild.c — the rebuild every pass shares: a new graph made from a source graph node by node
 * (pass_rebuild_begin, pass_add / pass_copy / pass_map, pass_rebuild_end), with a per-thread
 * spare graph reused between passes, and small helpers on nodes (a CONST's blob, equal concrete
 * shapes). Blobs and subgraphs are copied once per rebuild, when the first node that uses them is
 * added: a region no node refers to any more (the untaken branch of an inlined cond, a pruned
 * loop) does not survive the rebuild. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static _Thread_local ir_graph *spare;

void pass_spare_put(ir_graph *g) {
    /* a graph someone else still holds is never reset for reuse */
    bool shared = g && atomic_load_explicit((_Atomic int *)&g->refs, memory_order_acquire) != 1;
    if (g && (shared || (spare && spare->cap_nodes >= g->cap_nodes))) {
        ir_graph_free(g);
        return;
    }
    ir_graph_free(spare);
    spare = g;
}

tj_status pass_rebuild_begin(pass_rebuild *rb, const ir_graph *src, uint32_t n_nodes,
                             uint32_t n_edges) {
    memset(rb, 0, sizeof *rb);
    rb->src = src;
    rb->dst = spare;
    spare = NULL;
    if (rb->dst && ir_graph_reset(rb->dst, src->name) != TJ_OK) {
        ir_graph_free(rb->dst);
        rb->dst = NULL;
    }
    if (!rb->dst)
        rb->dst = ir_graph_new(src->name);
    size_t nn = src->n_nodes ? src->n_nodes : 1;
    rb->map = malloc(nn * sizeof *rb->map);
    rb->blob_map = calloc(src->n_blobs ? src->n_blobs : 1, sizeof *rb->blob_map);
    rb->sub_map = calloc(src->n_subs ? src->n_subs : 1, sizeof *rb->sub_map);
    rb->flags = calloc(nn, 1);
    bool ok = rb->dst && rb->map && rb->blob_map && rb->sub_map && rb->flags &&
              ir_graph_reserve(rb->dst, n_nodes, n_edges) == TJ_OK;
    if (!ok) {
        pass_rebuild_abort(rb);
        return ir_errorf(TJ_ERR_OOM, "passes: out of memory rebuilding a graph of %u nodes",
                         src->n_nodes);
    }
    memset(rb->map, 0xff, nn * sizeof *rb->map);
    return TJ_OK;
}

ir_graph *pass_rebuild_abort(pass_rebuild *rb) {
    ir_graph_free(rb->dst);
    free(rb->map);
    free(rb->blob_map);
    free(rb->sub_map);
    free(rb->scratch);
    free(rb->flags);
    memset(rb, 0, sizeof *rb);
    return NULL;
}

/* pass_add, and pass_copy when `inferred` (see ir_add_inferred). */
static uint32_t add_translated(pass_rebuild *rb, const ir_node *proto, const uint32_t *in,
                               uint32_t n_in, bool inferred) {
    const ir_graph *src = rb->src;
    ir_node p;
    if (proto->a.blob || proto->a.sub[0] || proto->a.sub[1]) {
        p = *proto;
        if (p.a.blob) {
            uint32_t b = p.a.blob - 1;
            if (b >= src->n_blobs) {
                ir_errorf(TJ_ERR_INVALID, "%s: blob %u out of range", ir_ops[p.op].name, p.a.blob);
                return IR_NONE;
            }
            if (!rb->blob_map[b]) {
                rb->blob_map[b] = ir_add_blob_shared(rb->dst, &src->blobs[b]);
                if (!rb->blob_map[b])
                    return IR_NONE;
            }
            p.a.blob = rb->blob_map[b];
        }
        for (int k = 0; k < 2; k++) {
            if (p.a.sub[k] > src->n_subs) {
                ir_errorf(TJ_ERR_INVALID, "%s: subgraph %u out of range", ir_ops[p.op].name,
                          p.a.sub[k]);
                return IR_NONE;
            }
            uint32_t s = p.a.sub[k] - 1;
            if (p.a.sub[k] && !rb->sub_map[s]) {
                ir_graph *c = ir_graph_share(src->subs[s]);
                if (!c || !(rb->sub_map[s] = ir_add_sub(rb->dst, c))) {
                    ir_graph_free(c);
                    ir_errorf(TJ_ERR_OOM, "%s: out of memory copying region %u", ir_ops[p.op].name,
                              p.a.sub[k]);
                    return IR_NONE;
                }
            }
            if (p.a.sub[k])
                p.a.sub[k] = rb->sub_map[s];
        }
        proto = &p;
    }
    uint32_t before = rb->dst->n_nodes;
    uint32_t id =
        inferred ? ir_add_inferred(rb->dst, proto, in, n_in) : ir_add(rb->dst, proto, in, n_in);
    if (id < before)
        rb->merged++;
    return id;
}

uint32_t pass_add(pass_rebuild *rb, const ir_node *proto, const uint32_t *in, uint32_t n_in) {
    return add_translated(rb, proto, in, n_in, false);
}

uint32_t pass_copy(pass_rebuild *rb, uint32_t id) {
    const ir_graph *src = rb->src;
    const ir_node *n = ir_node_get(src, id);
    const uint32_t *in = ir_inputs(src, n);
    if (n->n_in > rb->cap_scratch) {
        uint32_t cap = n->n_in < 16 ? 16 : n->n_in * 2;
        uint32_t *s = realloc(rb->scratch, cap * sizeof *s);
        if (!s) {
            ir_errorf(TJ_ERR_OOM, "passes: out of memory");
            return IR_NONE;
        }
        rb->scratch = s;
        rb->cap_scratch = cap;
    }
    /* the inputs keep their dtypes and dims (every rewrite does), so n is already inferred:
     * only when a flag says otherwise does ir_add infer it again */
    bool same = true;
    for (uint32_t i = 0; i < n->n_in; i++) {
        rb->scratch[i] = in[i] < src->n_nodes ? rb->map[in[i]] : IR_NONE;
        if (rb->scratch[i] == IR_NONE) {
            ir_errorf(TJ_ERR_INVALID, "passes: node %u (%s) uses node %u, which was dropped", id,
                      ir_ops[n->op].name, in[i]);
            return IR_NONE;
        }
        same = same && (rb->flags[in[i]] & PASS_M_SAME);
    }
    return add_translated(rb, n, rb->scratch, n->n_in, same);
}

void pass_map(pass_rebuild *rb, uint32_t id, uint32_t d) {
    const ir_node *s = ir_node_get(rb->src, id), *t = ir_node_get(rb->dst, d);
    bool same = s->dtype == t->dtype && s->rank == t->rank && s->rank <= IR_MAX_RANK &&
                !memcmp(s->dims, t->dims, sizeof(int64_t) * s->rank);
    rb->map[id] = d;
    rb->flags[id] = (uint8_t)((same ? PASS_M_SAME : 0) |
                              (t->op == IR_OP_CONST && t->a.blob ? PASS_M_CONST : 0));
}

ir_graph *pass_rebuild_end(pass_rebuild *rb, pass_stat *st) {
    const ir_graph *src = rb->src;
    ir_graph *dst = rb->dst;
    for (uint32_t i = 0; i < src->n_outputs; i++) {
        uint32_t d = rb->map[src->outputs[i]];
        if (d == IR_NONE) {
            ir_errorf(TJ_ERR_INVALID, "passes: output %u (node %u) was dropped", i,
                      src->outputs[i]);
            return pass_rebuild_abort(rb);
        }
        if (ir_add_output(dst, d) != TJ_OK)
            return pass_rebuild_abort(rb);
    }
    /* Effects in src program order (ir_add already appended side nodes in node order; redo the
     * list so an effect order that differs from node order survives too). */
    if (!rb->keep_effects)
        dst->n_effects = 0;
    for (uint32_t i = 0; i < src->n_effects && !rb->keep_effects; i++) {
        uint32_t d = rb->map[src->effects[i]];
        if (d == IR_NONE) {
            ir_errorf(TJ_ERR_INVALID, "passes: effect %u (node %u) was dropped", i,
                      src->effects[i]);
            return pass_rebuild_abort(rb);
        }
        if (ir_add_effect(dst, d) != TJ_OK) /* a repeated effect is accepted once */
            return pass_rebuild_abort(rb);
    }
    dst->n_params = src->n_params;
    dst->n_caps = src->n_caps;
    if (st)
        st->merged += rb->merged;
    rb->dst = NULL;
    pass_rebuild_abort(rb);
    return dst;
}

const ir_blob *pass_const_blob(const ir_graph *g, uint32_t id) {
    const ir_node *n = ir_node_get(g, id);
    if (n->op != IR_OP_CONST || !n->a.blob || n->a.blob > g->n_blobs)
        return NULL;
    return ir_blob_get(g, n->a.blob);
}

bool pass_same_shape(const ir_node *a, const ir_node *b) {
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] < 0 || a->dims[i] != b->dims[i])
            return false;
    return true;
}
