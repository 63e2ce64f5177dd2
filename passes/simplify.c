/* simplify.c — algebraic simplification that keeps IEEE semantics (no reassociation, no x*0 or
 * x-x for floats). Identities: x+0 / 0+x (integers; floats only with -0.0), x-0 (integers;
 * floats with +0.0), x*1, 1*x, x/1, floordiv(x,1) (integers), pow(x,1), neg(neg x),
 * not(not x), cast to the same dtype, transpose∘transpose (composed; identity -> x), reshape
 * chains through reshape/squeeze/expand_dims, shape ops that change nothing, full slices,
 * broadcast_to chains, where(c,x,x), where(const c,...), max/min/and/or(x,x). A rewrite only
 * ever replaces a node by one of the same dtype and dims: where the constant operand broadcast x
 * to a larger shape, x is wrapped in broadcast_to. Inputs are read in the graph being built, so
 * chains collapse in one sweep. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

enum { K_ZERO, K_POS_ZERO, K_NEG_ZERO, K_ONE, K_TRUE, K_FALSE };

/* true when id is a CONST (non-empty) whose every element matches `k`. */
static bool const_is(const ir_graph *g, uint32_t id, int k) {
    const ir_blob *b = pass_const_blob(g, id);
    if (!b)
        return false;
    const ir_node *n = ir_node_get(g, id);
    int64_t numel = ir_numel(n->rank, n->dims);
    size_t es = ir_dtype_size(n->dtype);
    if (numel <= 0 || n->dtype == TJ_STRING || !es || b->size < (size_t)numel * es)
        return false;
    const unsigned char *p = b->data;
    for (int64_t i = 0; i < numel; i++, p += es) {
        bool ok = false;
        switch (n->dtype) {
        case TJ_F32: {
            float v;
            uint32_t bits;
            memcpy(&v, p, 4);
            memcpy(&bits, p, 4);
            ok = (k == K_ONE && v == 1.0f) || (k == K_POS_ZERO && bits == 0) ||
                 (k == K_NEG_ZERO && bits == 0x80000000u) || (k == K_ZERO && v == 0.0f);
            break;
        }
        case TJ_F64: {
            double v;
            uint64_t bits;
            memcpy(&v, p, 8);
            memcpy(&bits, p, 8);
            ok = (k == K_ONE && v == 1.0) || (k == K_POS_ZERO && bits == 0) ||
                 (k == K_NEG_ZERO && bits == 0x8000000000000000ull) || (k == K_ZERO && v == 0.0);
            break;
        }
        case TJ_I32:
        case TJ_I64: {
            int64_t v;
            if (n->dtype == TJ_I32) {
                int32_t v32;
                memcpy(&v32, p, 4);
                v = v32;
            } else {
                memcpy(&v, p, 8);
            }
            /* an integer zero converts to +0.0 in a float context */
            ok = (k == K_ONE && v == 1) || ((k == K_ZERO || k == K_POS_ZERO) && v == 0);
            break;
        }
        case TJ_BOOL:
            ok = (k == K_TRUE && *p) || (k == K_FALSE && !*p);
            break;
        default:
            break;
        }
        if (!ok)
            return false;
    }
    return true;
}

/* const_is for input s of a node, skipped when `cmask` (bit s: input s may be a CONST; the
 * rebuild knows it from pass_map) rules it out, which spares a read of the input node. */
static bool in_is(const ir_graph *g, const uint32_t *m, unsigned cmask, int s, int k) {
    return (cmask >> s & 1) && const_is(g, m[s], k);
}

static bool shape_known(const ir_node *n) {
    for (int i = 0; i < n->rank; i++)
        if (n->dims[i] < 0)
            return false;
    return true;
}

static bool is_reshape_like(int op) {
    return op == IR_OP_RESHAPE || op == IR_OP_SQUEEZE || op == IR_OP_EXPAND_DIMS;
}

/* A node equal to x with n's dtype and dims: x itself, or broadcast_to(x) when n is larger. */
static uint32_t replace_with(pass_rebuild *rb, const ir_node *n, uint32_t x) {
    const ir_node *xn = ir_node_get(rb->dst, x);
    if (xn->dtype != n->dtype)
        return IR_NONE;
    if (pass_same_shape(xn, n))
        return x;
    if (!shape_known(n) || !shape_known(xn) || xn->rank > n->rank)
        return IR_NONE;
    if (rb->dry)
        return 0;
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_BROADCAST_TO;
    p.dtype = n->dtype;
    p.rank = n->rank;
    memcpy(p.dims, n->dims, sizeof p.dims);
    return pass_add(rb, &p, &x, 1);
}

/* op(x) with n's dtype/dims (reshape, broadcast_to) or with the given perm (transpose). */
static uint32_t make_unary(pass_rebuild *rb, int op, const ir_node *n, uint32_t x,
                           const int64_t *perm) {
    if (rb->dry)
        return 0;
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = (uint16_t)op;
    p.dtype = n->dtype;
    p.rank = n->rank;
    memcpy(p.dims, n->dims, sizeof p.dims);
    if (perm) {
        p.a.n_list = n->rank;
        memcpy(p.a.list, perm, sizeof(int64_t) * n->rank);
    }
    return pass_add(rb, &p, &x, 1);
}

static uint32_t simplify_transpose(pass_rebuild *rb, const ir_node *n, uint32_t x) {
    const ir_node *xn = ir_node_get(rb->dst, x);
    int r = n->rank;
    if ((int)n->a.n_list != r)
        return IR_NONE;
    int64_t q[IR_MAX_RANK];
    uint32_t base = x;
    if (xn->op == IR_OP_TRANSPOSE && (int)xn->a.n_list == r && xn->rank == r) {
        for (int i = 0; i < r; i++)
            q[i] = xn->a.list[n->a.list[i]];
        base = ir_inputs(rb->dst, xn)[0];
    } else {
        memcpy(q, n->a.list, sizeof(int64_t) * r);
    }
    bool ident = true;
    for (int i = 0; i < r; i++)
        ident = ident && q[i] == i;
    if (ident)
        return replace_with(rb, n, base);
    return base == x ? IR_NONE : make_unary(rb, IR_OP_TRANSPOSE, n, base, q);
}

static uint32_t simplify_shape_op(pass_rebuild *rb, const ir_node *n, uint32_t x) {
    const ir_node *xn = ir_node_get(rb->dst, x);
    if (xn->dtype == n->dtype && pass_same_shape(xn, n))
        return x;
    if (!shape_known(n))
        return IR_NONE;
    if (n->op == IR_OP_BROADCAST_TO) {
        if (xn->op != IR_OP_BROADCAST_TO)
            return IR_NONE;
        return make_unary(rb, IR_OP_BROADCAST_TO, n, ir_inputs(rb->dst, xn)[0], NULL);
    }
    if (!is_reshape_like(xn->op))
        return IR_NONE;
    uint32_t base = ir_inputs(rb->dst, xn)[0];
    const ir_node *bn = ir_node_get(rb->dst, base);
    if (bn->dtype != n->dtype || !shape_known(bn))
        return IR_NONE;
    if (pass_same_shape(bn, n))
        return base;
    return make_unary(rb, IR_OP_RESHAPE, n, base, NULL);
}

/* ---- the per-op rewrites, indexed by op (pass_simplify_rules) -------------------------------- */
/* x + 0 (ints), x + -0.0 (floats); strings are concatenation: skip */
static uint32_t simp_add(pass_rebuild *rb, const ir_node *n, const uint32_t *m, unsigned cmask) {
    bool fl = ir_dtype_is_float(n->dtype), in = ir_dtype_is_int(n->dtype);
    for (int s = 0; s < 2 && (fl || in); s++)
        if (in_is(rb->dst, m, cmask, s, in ? K_ZERO : K_NEG_ZERO))
            return replace_with(rb, n, m[1 - s]);
    return IR_NONE;
}

/* x - 0 (ints), x - +0.0 (floats) */
static uint32_t simp_sub(pass_rebuild *rb, const ir_node *n, const uint32_t *m, unsigned cmask) {
    bool fl = ir_dtype_is_float(n->dtype), in = ir_dtype_is_int(n->dtype);
    if ((fl || in) && in_is(rb->dst, m, cmask, 1, in ? K_ZERO : K_POS_ZERO))
        return replace_with(rb, n, m[0]);
    return IR_NONE;
}

/* x * 1, 1 * x */
static uint32_t simp_mul(pass_rebuild *rb, const ir_node *n, const uint32_t *m, unsigned cmask) {
    bool num = ir_dtype_is_float(n->dtype) || ir_dtype_is_int(n->dtype);
    for (int s = 0; s < 2 && num; s++)
        if (in_is(rb->dst, m, cmask, s, K_ONE))
            return replace_with(rb, n, m[1 - s]);
    return IR_NONE;
}

/* x / 1, x ** 1 */
static uint32_t simp_by_one(pass_rebuild *rb, const ir_node *n, const uint32_t *m, unsigned cmask) {
    bool num = ir_dtype_is_float(n->dtype) || ir_dtype_is_int(n->dtype);
    if (num && in_is(rb->dst, m, cmask, 1, K_ONE))
        return replace_with(rb, n, m[0]);
    return IR_NONE;
}

/* floor(x / 1) is x only for integers */
static uint32_t simp_floordiv(pass_rebuild *rb, const ir_node *n, const uint32_t *m,
                              unsigned cmask) {
    if (ir_dtype_is_int(n->dtype) && in_is(rb->dst, m, cmask, 1, K_ONE))
        return replace_with(rb, n, m[0]);
    return IR_NONE;
}

/* max(x, x), min(x, x), x and x, x or x */
static uint32_t simp_same(pass_rebuild *rb, const ir_node *n, const uint32_t *m, unsigned cmask) {
    (void)cmask;
    return m[0] == m[1] ? replace_with(rb, n, m[0]) : IR_NONE;
}

/* a cast to the dtype it has (replace_with keeps only what has n's type) */
static uint32_t simp_cast(pass_rebuild *rb, const ir_node *n, const uint32_t *m, unsigned cmask) {
    (void)cmask;
    return replace_with(rb, n, m[0]);
}

static uint32_t simp_transpose(pass_rebuild *rb, const ir_node *n, const uint32_t *m,
                               unsigned cmask) {
    (void)cmask;
    return simplify_transpose(rb, n, m[0]);
}

static uint32_t simp_shape(pass_rebuild *rb, const ir_node *n, const uint32_t *m, unsigned cmask) {
    (void)cmask;
    return simplify_shape_op(rb, n, m[0]);
}

/* a slice of everything with step 1 */
static uint32_t simp_slice(pass_rebuild *rb, const ir_node *n, const uint32_t *m, unsigned cmask) {
    (void)cmask;
    int r = n->rank;
    if ((int)n->a.n_list != 3 * r)
        return IR_NONE;
    for (int i = 0; i < r; i++)
        if (n->a.list[2 * r + i] != 1)
            return IR_NONE;
    const ir_node *xn = ir_node_get(rb->dst, m[0]);
    return xn->dtype == n->dtype && pass_same_shape(xn, n) ? m[0] : IR_NONE;
}

/* where(c, x, x), where(true, x, y), where(false, x, y) */
static uint32_t simp_where(pass_rebuild *rb, const ir_node *n, const uint32_t *m, unsigned cmask) {
    if (m[1] == m[2])
        return replace_with(rb, n, m[1]);
    if (in_is(rb->dst, m, cmask, 0, K_TRUE))
        return replace_with(rb, n, m[1]);
    if (in_is(rb->dst, m, cmask, 0, K_FALSE))
        return replace_with(rb, n, m[2]);
    return IR_NONE;
}

const pass_simplify_fn pass_simplify_rules[IR_N_OPS] = {
    [IR_OP_ADD] = simp_add,           [IR_OP_SUB] = simp_sub,
    [IR_OP_MUL] = simp_mul,           [IR_OP_DIV] = simp_by_one,
    [IR_OP_POW] = simp_by_one,        [IR_OP_FLOORDIV] = simp_floordiv,
    [IR_OP_MAXIMUM] = simp_same,      [IR_OP_MINIMUM] = simp_same,
    [IR_OP_LOGICAL_AND] = simp_same,  [IR_OP_LOGICAL_OR] = simp_same,
    [IR_OP_CAST] = simp_cast,         [IR_OP_TRANSPOSE] = simp_transpose,
    [IR_OP_RESHAPE] = simp_shape,     [IR_OP_SQUEEZE] = simp_shape,
    [IR_OP_EXPAND_DIMS] = simp_shape, [IR_OP_BROADCAST_TO] = simp_shape,
    [IR_OP_SLICE] = simp_slice,       [IR_OP_WHERE] = simp_where,
};

/* The dst id n simplifies to, or IR_NONE (no rewrite, or an error: check the error code). */
static uint32_t simplify_rules(pass_rebuild *rb, const ir_node *n, const uint32_t *m,
                               unsigned cmask) {
    const ir_graph *d = rb->dst;
    unsigned fl = ir_ops[n->op].flags;
    if (n->n_in == 1 && (fl & (IR_F_INVOL | IR_F_IDEMP))) {
        /* f(f(x)): x for an involution (neg, logical_not), f(x) for an idempotent op (abs,
         * relu, sign, floor, ceil, round), by the op table's flags */
        const ir_node *xn = ir_node_get(d, m[0]);
        if (xn->op != n->op)
            return IR_NONE;
        return replace_with(rb, n, (fl & IR_F_INVOL) ? ir_inputs(d, xn)[0] : m[0]);
    }
    pass_simplify_fn rule = pass_simplify_rules[n->op];
    return rule ? rule(rb, n, m, cmask) : IR_NONE;
}

/* ---- transposes sink below elementwise ops ----------------------------------------------------
 * u(T_p(x)) = T_p(u(x)) and b(T_p(x), y) = T_p(b(x, y')) with y' = T_p^-1(y) for y a CONST (the
 * fold pass folds its transpose), y of one element (no transpose needed) or y = T_p(z) (y' = z),
 * as ONNX Runtime's transpose optimizer and XLA's layout normalization do: a transpose moved
 * down meets the next one and the two compose (simplify_transpose), so the NCHW <-> NHWC pairs
 * around an imported model's convolutions cancel across its bias adds and activations. Only
 * when the moved transpose T_p(x) has no other user (src use counts) and the op does not
 * broadcast the transposed operand to a larger shape, so no transpose is duplicated or grows. */
static bool full_perm(const ir_node *t) {
    return t->op == IR_OP_TRANSPOSE && (int)t->a.n_list == t->rank;
}

static bool same_perm(const ir_node *a, const ir_node *b) {
    return a->rank == b->rank && !memcmp(a->a.list, b->a.list, sizeof(int64_t) * a->rank);
}

/* y (dst id) for the untransposed layout: z when y = T_p(z) is the moved kind (with other users
 * T_p(z) stays for them and the op reads z: nothing is duplicated; a residual chain's block
 * outputs feed the next block's add and its convolution's transpose, which cancels), y itself
 * when it has one element, T_p^-1(y) for a CONST (of rank <= r, aligned on the right); IR_NONE if
 * none. */
static uint32_t sink_operand(pass_rebuild *rb, const ir_node *t, uint32_t y, bool y_const) {
    const ir_node *yn = ir_node_get(rb->dst, y);
    int r = t->rank;
    if (full_perm(yn) && same_perm(yn, t))
        return ir_inputs(rb->dst, yn)[0];
    if (ir_numel(yn->rank, yn->dims) == 1 && yn->rank <= r)
        return y; /* broadcasts the same in any layout */
    if (!y_const || yn->rank > r || !shape_known(yn))
        return IR_NONE;
    if (rb->dry)
        return 0;
    ir_node p;
    memset(&p, 0, sizeof p);
    uint32_t v = y;
    if (yn->rank < r) { /* leading 1s, then the inverse permutation */
        p.op = IR_OP_RESHAPE;
        p.dtype = yn->dtype;
        p.rank = (uint8_t)r;
        for (int i = 0; i < r; i++)
            p.dims[i] = i < r - yn->rank ? 1 : yn->dims[i - (r - yn->rank)];
        if ((v = pass_add(rb, &p, &v, 1)) == IR_NONE)
            return IR_NONE;
    }
    const ir_node *vn = ir_node_get(rb->dst, v);
    memset(&p, 0, sizeof p);
    p.op = IR_OP_TRANSPOSE;
    p.dtype = vn->dtype;
    p.rank = (uint8_t)r;
    p.a.n_list = (uint32_t)r;
    for (int i = 0; i < r; i++) { /* q = p^-1: out[j] = in[q[j]], q[p[i]] = i */
        p.a.list[t->a.list[i]] = i;
        p.dims[t->a.list[i]] = vn->dims[i];
    }
    return pass_add(rb, &p, &v, 1);
}

static uint32_t sink_transpose(pass_rebuild *rb, const ir_node *n, const uint32_t *m,
                               unsigned cmask) {
    if (!rb->uses || !(ir_ops[n->op].flags & IR_F_EW) || n->n_in < 1 || n->n_in > 2 ||
        n->op == IR_OP_WHERE)
        return IR_NONE;
    const uint32_t *src_in = ir_inputs(rb->src, n);
    const ir_graph *d = rb->dst;
    /* the transposed operand: the first input that is a full transpose with one user */
    int k = -1;
    for (int s = 0; s < (int)n->n_in && k < 0; s++) {
        const ir_node *xn = ir_node_get(d, m[s]);
        if (full_perm(xn) && rb->uses[src_in[s]] == 1 && pass_same_shape(xn, n) && shape_known(xn))
            k = s;
    }
    if (k < 0)
        return IR_NONE;
    /* a copy: pass_add below may grow dst's node array */
    const ir_node tn = *ir_node_get(d, m[k]), *t = &tn;
    uint32_t ins[2];
    ins[k] = ir_inputs(d, t)[0];
    if (n->n_in == 2) {
        int o = 1 - k;
        ins[o] = sink_operand(rb, t, m[o], (cmask >> o) & 1);
        if (ins[o] == IR_NONE)
            return IR_NONE;
    }
    if (rb->dry)
        return 0;
    ir_node p = *n; /* the op in the untransposed layout: dims[perm[i]] = n's dims[i] */
    p.n_in = 0;
    p.in_off = 0;
    for (int i = 0; i < n->rank; i++)
        p.dims[t->a.list[i]] = n->dims[i];
    uint32_t u = pass_add(rb, &p, ins, n->n_in);
    if (u == IR_NONE)
        return IR_NONE;
    return make_unary(rb, IR_OP_TRANSPOSE, n, u, t->a.list);
}

/* concat(x) = x, and concat(T_p(x1), ..., T_p(xk), axis a) = T_p(concat(x1, ..., xk, axis p[a]))
 * when every operand is the same full transpose: an imported DenseNet concatenates its layers' NCHW
 * outputs (each the transpose back from a convolution's NHWC), so its 124 transposes could not
 * cancel. An operand's transpose with other users stays for them (a DenseNet feature feeds every
 * later concat of its block, each of which sinks in turn, so they die): at worst one transpose of
 * the concatenation is added. m: the k operands' dst ids. */
static uint32_t sink_concat(pass_rebuild *rb, const ir_node *n, const uint32_t *m) {
    if (n->op != IR_OP_CONCAT || n->n_in < 1 || !shape_known(n))
        return IR_NONE;
    /* a concat of one operand (torch.cat of a one-element list) is that operand */
    if (n->n_in == 1)
        return replace_with(rb, n, m[0]);
    const ir_node *t0 = ir_node_get(rb->dst, m[0]);
    if (!full_perm(t0) || t0->rank != n->rank)
        return IR_NONE;
    for (uint32_t k = 1; k < n->n_in; k++) {
        const ir_node *tk = ir_node_get(rb->dst, m[k]);
        if (!full_perm(tk) || !same_perm(tk, t0))
            return IR_NONE;
    }
    if (rb->dry)
        return 0;
    const ir_node tn = *t0; /* a copy: pass_add below may grow dst's node array */
    uint32_t *ins = malloc(sizeof *ins * n->n_in);
    if (!ins)
        return IR_NONE;
    for (uint32_t k = 0; k < n->n_in; k++)
        ins[k] = ir_inputs(rb->dst, ir_node_get(rb->dst, m[k]))[0];
    ir_node p = *n; /* the concat in the untransposed layout */
    p.n_in = 0;
    p.in_off = 0;
    p.a.i[0] = tn.a.list[n->a.i[0]];
    for (int i = 0; i < n->rank; i++)
        p.dims[tn.a.list[i]] = n->dims[i];
    uint32_t u = pass_add(rb, &p, ins, n->n_in);
    free(ins);
    return u == IR_NONE ? IR_NONE : make_unary(rb, IR_OP_TRANSPOSE, n, u, tn.a.list);
}

static uint32_t simplify_node(pass_rebuild *rb, const ir_node *n, const uint32_t *m,
                              unsigned cmask) {
    uint32_t r = simplify_rules(rb, n, m, cmask);
    if (r == IR_NONE && (rb->dry || ir_last_code() == TJ_OK))
        r = sink_transpose(rb, n, m, cmask);
    return r;
}

/* Users of each node of g (and its outputs), saturating at 2; NULL on OOM (no sinking). */
static uint8_t *count_uses(const ir_graph *g) {
    uint8_t *u = calloc(g->n_nodes ? g->n_nodes : 1, 1);
    if (!u)
        return NULL;
    for (uint32_t id = 0; id < g->n_nodes; id++) {
        const ir_node *n = ir_node_get(g, id);
        const uint32_t *in = ir_inputs(g, n);
        for (uint32_t k = 0; k < n->n_in; k++)
            if (in[k] < g->n_nodes && u[in[k]] < 2)
                u[in[k]]++;
    }
    for (uint32_t k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] < g->n_nodes)
            u[g->outputs[k]] = 2;
    return u;
}

#define ALL_MAY_BE_CONST 7u /* the scan keeps no flags: every input may be a CONST */

/* Would any node of g simplify? Rules read only the node and its inputs, so with nothing
 * rewritten yet (identity map) the first rewrite of a real run is found by one read-only sweep. */
static bool any_rewrite(const ir_graph *g) {
    pass_rebuild rb;
    memset(&rb, 0, sizeof rb);
    rb.src = g;
    rb.dst = (ir_graph *)g; /* read only: dry mode adds nothing */
    rb.dry = true;
    uint8_t *uses = count_uses(g);
    rb.uses = uses;
    bool any = false;
    for (uint32_t id = 0; id < g->n_nodes && !any; id++) {
        const ir_node *n = ir_node_get(g, id);
        unsigned f = ir_ops[n->op].flags;
        any = (n->n_in >= 1 && n->n_in <= 3 && !(f & (IR_F_SIDE | IR_F_RAND)) &&
               n->dtype < TJ_N_DTYPES &&
               simplify_node(&rb, n, ir_inputs(g, n), ALL_MAY_BE_CONST) != IR_NONE) ||
              sink_concat(&rb, n, ir_inputs(g, n)) != IR_NONE;
    }
    free(uses);
    return any;
}

static ir_graph *simplify_nodes(const ir_graph *g, pass_stat *st);

ir_graph *pass_simplify_run(const ir_graph *g, const pass_options *opts, pass_stat *st) {
    (void)opts;
    ir_graph *inl = NULL; /* a cond on a constant predicate becomes its branch first */
    if (pass_has_const_cond(g) && !(g = inl = pass_inline_conds(g, st)))
        return NULL;
    ir_graph *lp = pass_loops_run(g, st); /* then loop invariants move out, dead values go */
    if (!lp) {
        ir_graph_free(inl);
        return NULL;
    }
    if (lp != g) {
        ir_graph_free(inl);
        g = inl = lp;
    }
    if (!any_rewrite(g))
        return (ir_graph *)g;
    ir_graph *out = simplify_nodes(g, st);
    ir_graph_free(inl);
    return out;
}

static ir_graph *simplify_nodes(const ir_graph *g, pass_stat *st) {
    pass_rebuild rb;
    /* sized for src (sinking a transpose adds a node or two; the graph grows) */
    if (pass_rebuild_begin(&rb, g, g->n_nodes, g->n_edges) != TJ_OK)
        return NULL;
    uint8_t *uses = count_uses(g);
    rb.uses = uses;
    uint64_t simplified = 0;
    uint32_t m[3], d = 0;
    for (uint32_t id = 0; id < g->n_nodes; id++) {
        const ir_node *n = ir_node_get(g, id);
        d = IR_NONE;
        unsigned f = ir_ops[n->op].flags;
        if (n->n_in >= 1 && n->n_in <= 3 && !(f & (IR_F_SIDE | IR_F_RAND)) &&
            n->dtype < TJ_N_DTYPES) {
            const uint32_t *in = ir_inputs(g, n);
            unsigned cmask = 0;
            for (uint32_t k = 0; k < n->n_in; k++) {
                m[k] = rb.map[in[k]];
                cmask |= (rb.flags[in[k]] & PASS_M_CONST) ? 1u << k : 0;
            }
            ir_clear_error();
            d = simplify_node(&rb, n, m, cmask);
            if (d == IR_NONE && ir_last_code() != TJ_OK)
                break;
            if (d != IR_NONE)
                simplified++;
        }
        if (d == IR_NONE && n->op == IR_OP_CONCAT) { /* any number of operands */
            const uint32_t *in = ir_inputs(g, n);
            uint32_t *mk = malloc(sizeof *mk * (n->n_in ? n->n_in : 1));
            for (uint32_t k = 0; mk && k < n->n_in; k++)
                mk[k] = rb.map[in[k]];
            ir_clear_error();
            if (mk && (d = sink_concat(&rb, n, mk)) != IR_NONE)
                simplified++;
            free(mk);
            if (d == IR_NONE && ir_last_code() != TJ_OK)
                break;
        }
        if (d == IR_NONE)
            d = pass_copy(&rb, id);
        if (d == IR_NONE)
            break;
        pass_map(&rb, id, d);
    }
    free(uses);
    if (d == IR_NONE)
        return pass_rebuild_abort(&rb);
    ir_graph *out = pass_rebuild_end(&rb, st);
    if (out && st)
        st->simplified += simplified;
    return out;
}
