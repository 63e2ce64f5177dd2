/* fold.c — constant folding with the reference kernels, through the evaluator the caller injects
 * (pass_options.eval; passes/ cannot call runtime/). A pure node whose inputs are all CONST (in
 * the graph being built, so chains fold in one sweep) becomes a CONST. Budget: never fold side
 * effects, random ops, sources (params, variable reads, eye, range), an IR_F_EXPAND op into a
 * larger constant, or anything whose result exceeds fold_max_bytes. An evaluator failure leaves
 * the node as it is: it errors at run time if live, and prune drops it if dead (S23). */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

/* Bytes of the node's value if it is a candidate (shape known, dtype with a value), else 0. */
static size_t value_bytes(const ir_node *n) {
    if (n->dtype >= TJ_N_DTYPES)
        return 0;
    int64_t numel = ir_numel(n->rank, n->dims);
    if (numel < 0)
        return 0;
    size_t es = ir_dtype_size(n->dtype);
    if (numel > 0 && (uint64_t)numel > SIZE_MAX / es)
        return SIZE_MAX;
    size_t b = (size_t)numel * es;
    return b ? b : 1; /* an empty tensor folds to an empty constant */
}

static bool is_foldable_op(const ir_node *n) {
    unsigned f = ir_ops[n->op].flags;
    if (f & (IR_F_SIDE | IR_F_RAND | IR_F_SRC))
        return false;
    if (n->a.blob || n->a.sub[0] || n->a.sub[1] || n->n_in == 0)
        return false;
    return n->dtype < TJ_N_DTYPES;
}

/* true when node id of g (inputs unmapped) is a folding candidate within the budget */
/* The largest result n may fold into: max_bytes, except a view that does not expand (transpose,
 * reshape, slice: its input's bytes, or fewer, in another order), which folds whatever its size
 * (an ONNX filter, OIHW, turned into the HWIO the kernels read: 2.4 MB for one of ResNet-50's
 * 3x3 layers, transposed again on every call when it was over budget). */
static size_t budget(const ir_node *n, size_t max_bytes) {
    const ir_op_info *op = &ir_ops[n->op];
    return op->family == IR_FAM_VIEW && !(op->flags & IR_F_EXPAND) ? SIZE_MAX : max_bytes;
}

static bool candidate(const ir_graph *g, const ir_node *n, size_t max_bytes) {
    size_t bytes;
    if (!is_foldable_op(n) || n->n_in > 16 || !(bytes = value_bytes(n)) ||
        bytes > budget(n, max_bytes))
        return false;
    const uint32_t *in = ir_inputs(g, n);
    size_t in_bytes = 0;
    for (uint32_t k = 0; k < n->n_in; k++) {
        const ir_blob *b = pass_const_blob(g, in[k]);
        if (!b)
            return false;
        in_bytes += b->size;
    }
    return !((ir_ops[n->op].flags & IR_F_EXPAND) && bytes > in_bytes);
}

ir_graph *pass_fold_run(const ir_graph *g, const pass_options *opts, pass_stat *st) {
    pass_eval_fn eval = opts ? opts->eval : NULL;
    size_t max_bytes =
        opts && opts->fold_max_bytes ? opts->fold_max_bytes : PASS_DEFAULT_FOLD_MAX_BYTES;
    /* a fold can only start at a node whose inputs are already constants */
    bool any = false;
    for (uint32_t id = 0; eval && id < g->n_nodes && !any; id++)
        any = candidate(g, ir_node_get(g, id), max_bytes);
    if (!any)
        return (ir_graph *)g;
    pass_rebuild rb;
    /* a rebuild never makes more nodes or edges than its source */
    if (pass_rebuild_begin(&rb, g, g->n_nodes, g->n_edges) != TJ_OK)
        return NULL;
    uint64_t folded = 0, failed = 0;
    uint32_t in_buf[16];
    for (uint32_t id = 0; id < g->n_nodes; id++) {
        const ir_node *n = ir_node_get(g, id);
        uint32_t d = IR_NONE;
        size_t bytes;
        if (eval && is_foldable_op(n) && n->n_in <= 16 && (bytes = value_bytes(n)) &&
            bytes <= budget(n, max_bytes)) {
            const uint32_t *in = ir_inputs(g, n);
            bool all_const = true;
            size_t in_bytes = 0;
            for (uint32_t k = 0; k < n->n_in && all_const; k++) {
                in_buf[k] = rb.map[in[k]];
                const ir_blob *b = (rb.flags[in[k]] & PASS_M_CONST)
                                       ? pass_const_blob(rb.dst, in_buf[k])
                                       : NULL; /* the flag spares a read of a non-const */
                all_const = b != NULL;
                in_bytes += b ? b->size : 0;
            }
            bool expands = (ir_ops[n->op].flags & IR_F_EXPAND) && bytes > in_bytes;
            if (all_const && !expands) {
                ir_node proto = *n;
                proto.n_in = n->n_in; /* kernels read it; in_off means nothing here */
                proto.in_off = 0;
                uint32_t blob = 0;
                tj_status s = eval(opts->eval_user, rb.dst, &proto, in_buf, n->n_in, &blob);
                const ir_blob *ob = s == TJ_OK ? ir_blob_get(rb.dst, blob) : NULL;
                if (s == TJ_OK && blob && blob <= rb.dst->n_blobs &&
                    ob->size <= budget(n, max_bytes)) {
                    ir_node c;
                    memset(&c, 0, sizeof c);
                    c.op = IR_OP_CONST;
                    c.dtype = n->dtype;
                    c.rank = n->rank;
                    memcpy(c.dims, n->dims, sizeof c.dims);
                    c.a.blob = blob;
                    uint32_t before = rb.dst->n_nodes;
                    d = ir_add(rb.dst, &c, NULL, 0);
                    if (d != IR_NONE && d < before)
                        rb.merged++;
                    if (d == IR_NONE) /* a malformed payload from the evaluator: keep the node */
                        failed++;
                    else
                        folded++;
                } else {
                    failed++;
                }
                if (d == IR_NONE)
                    ir_clear_error();
            }
        }
        if (d == IR_NONE)
            d = pass_copy(&rb, id);
        if (d == IR_NONE)
            return pass_rebuild_abort(&rb);
        pass_map(&rb, id, d);
    }
    ir_graph *out = pass_rebuild_end(&rb, st);
    if (out && st) {
        st->folded += folded;
        st->fold_failed += failed;
    }
    return out;
}
