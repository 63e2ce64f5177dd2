/* regions.c — control flow in the IR: COND, WHILE, FOR and SCAN nodes own regions (subgraphs of
 * their graph, a.sub[0] and a.sub[1]), the way XLA's Conditional/While and MLIR's scf ops do.
 * A region's params are the node's operands after its selector (params never used may be absent);
 * its outputs are the node's results, which GET nodes read one at a time, so every other node
 * keeps one value. Inference checks the regions against the operands: both branches of a COND
 * yield the same dtypes and dims, a WHILE/FOR body keeps every carried value's dtype and dims,
 * a SCAN slices its xs along axis 0 and stacks its ys. The messages name the region, the value's
 * index and both dtype/shapes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"

#define DB 200

const ir_graph *ir_region(const ir_graph *g, const ir_node *n, int k) {
    uint32_t s = n->a.sub[k];
    return s && s <= g->n_subs ? g->subs[s - 1] : NULL;
}

static bool region_has_effect(const ir_graph *r) {
    return r && r->n_effects > 0;
}

bool ir_node_has_effect(const ir_graph *g, const ir_node *n) {
    if (ir_ops[n->op].flags & IR_F_SIDE)
        return true;
    return (ir_ops[n->op].flags & IR_F_CF) &&
           (region_has_effect(ir_region(g, n, 0)) || region_has_effect(ir_region(g, n, 1)));
}

static void set_desc(ir_node *d, int dtype, int rank, const int64_t *dims) {
    memset(d, 0, sizeof *d);
    d->op = IR_OP_PARAM;
    d->dtype = (uint8_t)dtype;
    d->rank = (uint8_t)rank;
    if (rank)
        memcpy(d->dims, dims, (size_t)rank * sizeof *dims);
}

/* Two value types agree: same dtype and rank, dims equal where both are known. */
static bool same_type(const ir_node *a, const ir_node *b) {
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] >= 0 && b->dims[d] >= 0 && a->dims[d] != b->dims[d])
            return false;
    return true;
}

static const char *type_str(char *buf, size_t n, const ir_node *t) {
    char d[DB];
    snprintf(buf, n, "%s%s", ir_dtype_name(t->dtype), ir_fmt_dims(d, sizeof d, t->rank, t->dims));
    return buf;
}

static const ir_node *param_of(const ir_graph *r, uint32_t k) {
    for (uint32_t i = 0; i < r->n_nodes; i++)
        if (r->nodes[i].op == IR_OP_PARAM && (uint64_t)r->nodes[i].a.i[0] == k)
            return &r->nodes[i];
    return NULL;
}

/* Checks region r (called `what` in messages) of a node named `op`: its params against the
 * types `want` (n of them), and, if outs is given, its outputs against outs (n_outs). */
static tj_status check_region(const char *op, const char *what, const ir_graph *r,
                              const ir_node *want, uint32_t n, const ir_node *outs,
                              uint32_t n_outs) {
    char a[DB + 16], b[DB + 16];
    if (!r)
        return ir_errorf(TJ_ERR_INVALID, "%s: the %s region is missing", op, what);
    if (r->n_params > n)
        return ir_errorf(TJ_ERR_INVALID, "%s: the %s region takes %u values, the node gives %u", op,
                         what, r->n_params, n);
    for (uint32_t k = 0; k < r->n_params; k++) {
        const ir_node *p = param_of(r, k);
        if (p && !same_type(p, &want[k]))
            return ir_errorf(p->dtype != want[k].dtype ? TJ_ERR_DTYPE : TJ_ERR_SHAPE,
                             "%s: %s region value %u is %s, the node gives %s", op, what, k,
                             type_str(a, sizeof a, p), type_str(b, sizeof b, &want[k]));
    }
    if (!outs)
        return TJ_OK;
    if (r->n_outputs != n_outs)
        return ir_errorf(TJ_ERR_SHAPE, "%s: the %s region returns %u values, expected %u", op, what,
                         r->n_outputs, n_outs);
    for (uint32_t k = 0; k < n_outs; k++) {
        const ir_node *o = &r->nodes[r->outputs[k]];
        if (!same_type(o, &outs[k]))
            return ir_errorf(o->dtype != outs[k].dtype ? TJ_ERR_DTYPE : TJ_ERR_SHAPE,
                             "%s: %s region result %u is %s, expected %s (a loop body must keep "
                             "each value's dtype and shape; branches must agree)",
                             op, what, k, type_str(a, sizeof a, o),
                             type_str(b, sizeof b, &outs[k]));
    }
    return TJ_OK;
}

static void outputs_of(const ir_graph *r, ir_node *out, uint32_t from, uint32_t n) {
    for (uint32_t k = 0; k < n; k++) {
        const ir_node *o = &r->nodes[r->outputs[from + k]];
        set_desc(&out[k], o->dtype, o->rank, o->dims);
    }
}

uint32_t ir_cf_n_results(const ir_graph *g, const ir_node *n) {
    if (!(ir_ops[n->op].flags & IR_F_CF))
        return 0;
    const ir_graph *r = ir_region(g, n, n->op == IR_OP_WHILE ? 1 : 0);
    if (!r)
        return 0;
    return r->n_outputs;
}

tj_status ir_cf_result(const ir_graph *g, const ir_node *n, uint32_t k, ir_node *out) {
    uint32_t nr = ir_cf_n_results(g, n);
    if (k >= nr)
        return ir_errorf(TJ_ERR_INVALID, "get: result %u of %s, which has %u", k,
                         ir_ops[n->op].name, nr);
    const ir_graph *r = ir_region(g, n, n->op == IR_OP_WHILE ? 1 : 0);
    const ir_node *o = &r->nodes[r->outputs[k]];
    set_desc(out, o->dtype, o->rank, o->dims);
    if (n->op == IR_OP_SCAN && (int64_t)k >= n->a.i[0]) { /* a stacked y: [T, ...] */
        const uint32_t *in = ir_inputs(g, n);
        int64_t T = -1;
        if ((uint32_t)n->a.i[0] < n->n_in)
            T = g->nodes[in[n->a.i[0]]].dims[0];
        if (o->rank + 1 > IR_MAX_RANK)
            return ir_errorf(TJ_ERR_SHAPE, "scan: a stacked result would have rank %d",
                             o->rank + 1);
        out->rank = (uint8_t)(o->rank + 1);
        out->dims[0] = T;
        memcpy(out->dims + 1, o->dims, (size_t)o->rank * sizeof *o->dims);
    }
    return TJ_OK;
}

static tj_status need_scalar(const char *op, const char *what, const ir_node *t, int dtype) {
    char a[DB + 16];
    if (t->dtype != dtype || t->rank != 0)
        return ir_errorf(TJ_ERR_DTYPE, "%s: %s must be a %s scalar, got %s", op, what,
                         ir_dtype_name(dtype), type_str(a, sizeof a, t));
    return TJ_OK;
}

/* i[1]: how many trailing operands are loop invariants (captured values every iteration reads,
 * passed to the regions after the others, never results). */
static tj_status check_invariants(const ir_node *p, uint32_t n_in, uint32_t lead) {
    if (p->a.i[1] < 0 || (uint64_t)p->a.i[1] > n_in - lead)
        return ir_errorf(TJ_ERR_INVALID, "%s: %lld invariants of %u operands", ir_ops[p->op].name,
                         (long long)p->a.i[1], n_in - lead);
    return TJ_OK;
}

static tj_status infer_cf(const ir_graph *g, ir_node *p, const ir_node *const *ins, uint32_t n_in,
                          ir_node *want) {
    const char *op = ir_ops[p->op].name;
    const ir_graph *r0 = ir_region(g, p, 0), *r1 = ir_region(g, p, 1);
    tj_status st;
    switch (p->op) {
    case IR_OP_COND: {
        if (n_in < 1)
            return ir_errorf(TJ_ERR_INVALID, "cond: needs a predicate");
        if ((st = need_scalar(op, "the predicate", ins[0], TJ_BOOL)))
            return st;
        for (uint32_t k = 1; k < n_in; k++)
            want[k - 1] = *ins[k];
        if (!r0)
            return check_region(op, "then", r0, want, n_in - 1, NULL, 0);
        ir_node outs[64];
        uint32_t no = r0->n_outputs < 64 ? r0->n_outputs : 64;
        outputs_of(r0, outs, 0, no);
        if ((st = check_region(op, "then", r0, want, n_in - 1, NULL, 0)) ||
            (st = check_region(op, "else", r1, want, n_in - 1, outs, r0->n_outputs)))
            return st;
        break;
    }
    case IR_OP_WHILE: {
        if ((st = check_invariants(p, n_in, 0)))
            return st;
        uint32_t nc = n_in - (uint32_t)p->a.i[1];
        for (uint32_t k = 0; k < n_in; k++)
            want[k] = *ins[k];
        ir_node pred;
        set_desc(&pred, TJ_BOOL, 0, NULL);
        if ((st = check_region(op, "cond", r0, want, n_in, &pred, 1)) ||
            (st = check_region(op, "body", r1, want, n_in, want, nc)))
            return st;
        if (p->a.i[0] < 0)
            return ir_errorf(TJ_ERR_INVALID, "while: maximum iterations %lld is negative",
                             (long long)p->a.i[0]);
        break;
    }
    case IR_OP_FOR: {
        if (n_in < 3)
            return ir_errorf(TJ_ERR_INVALID, "for: needs start, limit and delta");
        static const char *const names[3] = {"start", "limit", "delta"};
        for (int k = 0; k < 3; k++)
            if ((st = need_scalar(op, names[k], ins[k], TJ_I64)))
                return st;
        if ((st = check_invariants(p, n_in, 3)))
            return st;
        uint32_t nc = n_in - 3 - (uint32_t)p->a.i[1];
        set_desc(&want[0], TJ_I64, 0, NULL);
        for (uint32_t k = 3; k < n_in; k++)
            want[k - 2] = *ins[k];
        if ((st = check_region(op, "body", r0, want, n_in - 2, want + 1, nc)))
            return st;
        break;
    }
    case IR_OP_SCAN: {
        int64_t nc = p->a.i[0];
        if (nc < 0 || (uint64_t)nc > n_in || (st = check_invariants(p, n_in, (uint32_t)nc)))
            return nc < 0 || (uint64_t)nc > n_in
                       ? ir_errorf(TJ_ERR_INVALID, "scan: %lld carried values of %u operands",
                                   (long long)nc, n_in)
                       : st;
        uint32_t xs_end = n_in - (uint32_t)p->a.i[1];
        int64_t T = -2;
        for (uint32_t k = 0; k < n_in; k++) {
            want[k] = *ins[k];
            if ((int64_t)k < nc || k >= xs_end)
                continue;
            char a[DB + 16];
            if (ins[k]->rank < 1)
                return ir_errorf(TJ_ERR_SHAPE, "scan: xs %lld is %s: it needs a leading axis",
                                 (long long)(k - nc), type_str(a, sizeof a, ins[k]));
            if (T != -2 && ins[k]->dims[0] >= 0 && T >= 0 && ins[k]->dims[0] != T)
                return ir_errorf(TJ_ERR_SHAPE, "scan: xs %lld has %lld steps, xs 0 has %lld",
                                 (long long)(k - nc), (long long)ins[k]->dims[0], (long long)T);
            if (T < 0)
                T = ins[k]->dims[0];
            want[k].rank--; /* x_t: one slice along axis 0 */
            memmove(want[k].dims, want[k].dims + 1, (size_t)want[k].rank * sizeof *want->dims);
        }
        if (T == -2)
            return ir_errorf(TJ_ERR_INVALID, "scan: needs at least one sequence (xs) to scan over");
        if ((st = check_region(op, "body", r0, want, n_in, NULL, 0)))
            return st;
        if (r0->n_outputs < (uint64_t)nc)
            return ir_errorf(TJ_ERR_SHAPE,
                             "scan: the body returns %u values, fewer than its %lld carried values",
                             r0->n_outputs, (long long)nc);
        for (int64_t k = 0; k < nc; k++) {
            const ir_node *o = &r0->nodes[r0->outputs[k]];
            char a[DB + 16], b[DB + 16];
            if (!same_type(o, &want[k]))
                return ir_errorf(o->dtype != want[k].dtype ? TJ_ERR_DTYPE : TJ_ERR_SHAPE,
                                 "scan: body result %lld is %s, carried value %lld is %s (a "
                                 "loop body must keep each value's dtype and shape)",
                                 (long long)k, type_str(a, sizeof a, o), (long long)k,
                                 type_str(b, sizeof b, &want[k]));
        }
        break;
    }
    default:
        return ir_errorf(TJ_ERR_INVALID, "%s: not a control-flow op", op);
    }
    p->dtype = IR_TUPLE;
    p->rank = 0;
    memset(p->dims, 0, sizeof p->dims);
    return TJ_OK;
}

tj_status ir_infer_in_graph(const ir_graph *g, ir_node *p, const uint32_t *in, uint32_t n_in) {
    const char *op = ir_ops[p->op].name;
    /* attributes these ops use: the regions, and i[0] for WHILE, SCAN and GET */
    ir_attrs a = p->a;
    memset(&p->a, 0, sizeof p->a);
    p->a.sub[0] = a.sub[0];
    p->a.sub[1] = a.sub[1];
    if (p->op == IR_OP_WHILE || p->op == IR_OP_SCAN || p->op == IR_OP_GET)
        p->a.i[0] = a.i[0];
    if (p->op == IR_OP_WHILE || p->op == IR_OP_FOR || p->op == IR_OP_SCAN)
        p->a.i[1] = a.i[1];
    if (p->op == IR_OP_GET) {
        p->a.sub[0] = p->a.sub[1] = 0;
        if (n_in != 1)
            return ir_errorf(TJ_ERR_INVALID, "get: expected 1 input, got %u", n_in);
        const ir_node *src = &g->nodes[in[0]];
        if (!(ir_ops[src->op].flags & IR_F_CF))
            return ir_errorf(TJ_ERR_INVALID, "get: input is %s, not a control-flow node",
                             ir_ops[src->op].name);
        if (p->a.i[0] < 0)
            return ir_errorf(TJ_ERR_INVALID, "get: negative result index %lld",
                             (long long)p->a.i[0]);
        ir_node d;
        if (ir_cf_result(g, src, (uint32_t)p->a.i[0], &d))
            return ir_last_code();
        p->dtype = d.dtype;
        p->rank = d.rank;
        memcpy(p->dims, d.dims, sizeof p->dims);
        return TJ_OK;
    }
    if (p->op == IR_OP_COND || p->op == IR_OP_WHILE) {
        if (!a.sub[0] || !a.sub[1] || a.sub[0] > g->n_subs || a.sub[1] > g->n_subs)
            return ir_errorf(TJ_ERR_INVALID, "%s: needs two regions (sub0, sub1)", op);
    } else {
        p->a.sub[1] = 0;
        if (!a.sub[0] || a.sub[0] > g->n_subs)
            return ir_errorf(TJ_ERR_INVALID, "%s: needs a body region (sub0)", op);
    }
    ir_node stack_want[16];
    ir_node *want = n_in + 1 <= 16 ? stack_want : malloc((n_in + 1) * sizeof *want);
    const ir_node *stack_ins[16];
    const ir_node **ins = n_in <= 16 ? stack_ins : malloc((n_in + 1) * sizeof *ins);
    tj_status st;
    if (!want || !ins) {
        st = ir_errorf(TJ_ERR_OOM, "%s: out of memory", op);
    } else {
        for (uint32_t k = 0; k < n_in; k++)
            ins[k] = &g->nodes[in[k]];
        st = infer_cf(g, p, ins, n_in, want);
    }
    if (want != stack_want)
        free(want);
    if (ins != stack_ins)
        free(ins);
    return st;
}

void ir_assigned_slots(const ir_graph *g, uint8_t *slots, uint32_t n) {
    for (uint32_t i = 0; i < g->n_effects; i++) {
        const ir_node *e = &g->nodes[g->effects[i]];
        if (e->op == IR_OP_ASSIGN && (uint64_t)e->a.i[0] < n)
            slots[e->a.i[0]] = 1;
        for (int k = 0; k < 2; k++)
            if ((ir_ops[e->op].flags & IR_F_CF) && ir_region(g, e, k))
                ir_assigned_slots(ir_region(g, e, k), slots, n);
    }
}
