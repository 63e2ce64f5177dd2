/* ops_control.c — ONNX control flow on tracejit's: If is tj_cond, Scan is tj_scan, Loop is
 * tj_while_loop (or, when it also stacks per-iteration outputs, tj_scan over the iteration
 * numbers: its trip count must then be known at trace time and its condition must stay true).
 * The branches and bodies are subgraphs converted by ox_subgraph inside the region being traced,
 * so names of the enclosing graphs they read become operands of the node. */
#include "internal.h"

typedef struct cf_ctx {
    const ox_node *n;
    const Onnx__GraphProto *g[2]; /* If: then, else; Loop / Scan: the body */
    int n_out;                    /* the subgraph's outputs */
    tj_tensor *limit;             /* Loop: M, or NULL */
} cf_ctx;

static const Onnx__GraphProto *graph_attr(const ox_node *n, const char *name) {
    const Onnx__AttributeProto *a = ox_attr(n, name);
    return a && a->g ? a->g : NULL;
}

/* The subgraph's outputs as a body result: one tensor, or a tuple. */
static tj_tensor *run(const cf_ctx *c, int which, int n_in, tj_tensor *const *in) {
    tj_tensor *stack[16], **out = c->n_out <= 16 ? stack : calloc((size_t)c->n_out, sizeof *out);
    if (!out)
        return tj_error_new(TJ_ERR_OOM, "onnx: out of memory");
    tj_status st = ox_subgraph(c->n, c->g[which], n_in, in, c->n_out, out);
    tj_tensor *r = st              ? tj_error_new(st, "%s", tj_last_error())
                   : c->n_out == 1 ? out[0]
                                   : tj_tuple(c->n_out, out);
    if (out != stack)
        free(out);
    return r;
}

/* A control-flow result split into the node's outputs (a tuple, or one tensor). */
static tj_status split(tj_tensor *r, int first, int n_out, tj_tensor **out) {
    if (tj_status_of(r))
        return tj_set_error(tj_status_of(r), "%s", tj_error_message(r));
    for (int k = 0; k < n_out; k++)
        out[k] = tj_tuple_size(r) < 0 ? r : tj_tuple_get(r, first + k);
    return TJ_OK;
}

/* ---- If -------------------------------------------------------------------------------------- */
static tj_tensor *then_fn(int n, tj_tensor *const *a, void *u) {
    return run(u, 0, n, a);
}
static tj_tensor *else_fn(int n, tj_tensor *const *a, void *u) {
    return run(u, 1, n, a);
}

CONV(c_if) {
    (void)n_in;
    cf_ctx c = {n, {graph_attr(n, "then_branch"), graph_attr(n, "else_branch")}, n_out, NULL};
    if (!c.g[0] || !c.g[1])
        return ox_fail(n, TJ_ERR_INVALID, "then_branch or else_branch is missing");
    if (tj_tensor_numel(in[0]) != 1)
        return ox_fail(n, TJ_ERR_SHAPE, "the condition has %lld elements, not one",
                       (long long)tj_tensor_numel(in[0]));
    tj_tensor *r = tj_cond(tj_reshape(in[0], 0, NULL), then_fn, else_fn, 0, NULL, &c);
    return split(r, 0, n_out, out) ? ox_fail(n, tj_status_of(r), "%s", tj_error_message(r)) : TJ_OK;
}

/* ---- Scan (opset 9+) ------------------------------------------------------------------------- */
static tj_tensor *scan_fn(int n, tj_tensor *const *a, void *u) {
    return run(u, 0, n, a);
}

/* x with axis `from` moved to 0, reversed along it when `rev` (and the inverse: to = from) */
static tj_tensor *to_front(tj_tensor *x, int from, int rev) {
    x = move_axis(x, from, 0);
    if (rev && !tj_status_of(x))
        x = tj_slice(x, NULL, NULL, (const int64_t[TJ_MAX_RANK]){-1, 1, 1, 1, 1, 1, 1, 1});
    return x;
}
static tj_tensor *from_front(tj_tensor *x, int to, int rev) {
    if (rev && !tj_status_of(x))
        x = tj_slice(x, NULL, NULL, (const int64_t[TJ_MAX_RANK]){-1, 1, 1, 1, 1, 1, 1, 1});
    return move_axis(x, 0, to);
}

CONV(c_scan) {
    cf_ctx c = {n, {graph_attr(n, "body"), NULL}, 0, NULL};
    int64_t m = ox_attr_i(n, "num_scan_inputs", 0);
    if (!c.g[0] || m < 1 || m > n_in) /* before n_in - m: m may be anything a file says */
        return ox_fail(n, TJ_ERR_INVALID, "body or num_scan_inputs %lld do not fit %d inputs",
                       (long long)m, n_in);
    int ns = n_in - (int)m, k_out = n_out - ns; /* states; stacked outputs */
    if (k_out < 0 || ns + m > 16)
        return ox_fail(n, TJ_ERR_INVALID, "body or num_scan_inputs %lld do not fit %d inputs",
                       (long long)m, n_in);
    c.n_out = ns + k_out;
    const int64_t *ax = NULL, *dir = NULL, *oax = NULL, *odir = NULL;
    size_t nax = ox_attr_ints(n, "scan_input_axes", &ax),
           ndir = ox_attr_ints(n, "scan_input_directions", &dir),
           noax = ox_attr_ints(n, "scan_output_axes", &oax),
           nodir = ox_attr_ints(n, "scan_output_directions", &odir);
    /* a direction is 0 (forward) or 1 (reverse), nothing else */
    for (size_t j = 0; j < ndir + nodir; j++) {
        int64_t d = j < ndir ? dir[j] : odir[j - ndir];
        if (d != 0 && d != 1)
            return ox_fail(n, TJ_ERR_INVALID, "scan_%s_directions[%zu] is %lld, not 0 or 1",
                           j < ndir ? "input" : "output", j < ndir ? j : j - ndir, (long long)d);
    }
    tj_tensor *xs[16];
    for (int j = 0; j < m; j++) {
        tj_tensor *x = in[ns + j];
        int a = axis_of((size_t)j < nax ? ax[j] : 0, tj_tensor_rank(x));
        if (a < 0)
            return ox_fail(n, TJ_ERR_SHAPE, "scan input %d: axis out of range", j);
        xs[j] = to_front(x, a, (size_t)j < ndir && dir[j]);
    }
    tj_tensor *r = tj_scan(scan_fn, ns, in, (int)m, xs, &c);
    if (tj_status_of(r))
        return ox_fail(n, tj_status_of(r), "%s", tj_error_message(r));
    for (int k = 0; k < n_out; k++) {
        tj_tensor *v = tj_tuple_get(r, k);
        if (k >= ns) { /* stacked along axis 0: moved and reversed as asked */
            int j = k - ns, a = axis_of((size_t)j < noax ? oax[j] : 0, tj_tensor_rank(v));
            v = from_front(v, a < 0 ? 0 : a, (size_t)j < nodir && odir[j]);
        }
        out[k] = v;
    }
    return TJ_OK;
}

/* ---- Loop ------------------------------------------------------------------------------------ */
/* carried: (iteration, condition, v...) */
static tj_tensor *loop_cond(int n, tj_tensor *const *a, void *u) {
    const cf_ctx *c = u;
    (void)n;
    tj_tensor *go = a[1];
    return c->limit ? tj_logical_and(go, tj_less(a[0], c->limit)) : go;
}
static tj_tensor *loop_body(int n, tj_tensor *const *a, void *u) {
    const cf_ctx *c = u;
    tj_tensor *r = run(c, 0, n, a); /* (condition, v...) */
    if (tj_status_of(r))
        return r;
    tj_tensor *next[18];
    next[0] = tj_add(a[0], tj_scalar_i64(1));
    for (int k = 0; k < c->n_out; k++) {
        tj_tensor *v = c->n_out == 1 ? r : tj_tuple_get(r, k);
        next[1 + k] = k == 0 ? tj_reshape(tj_cast(v, TJ_BOOL), 0, NULL) : v;
    }
    return tj_tuple(1 + c->n_out, next);
}
/* with stacked outputs: a scan over the iteration numbers; carried (condition, v...) */
static tj_tensor *loop_scan_body(int n, tj_tensor *const *a, void *u) {
    const cf_ctx *c = u;
    tj_tensor *in[18];
    in[0] = a[n - 1]; /* the iteration number, the scanned value */
    for (int k = 0; k < n - 1; k++)
        in[1 + k] = a[k];
    tj_tensor *r = run(c, 0, n, in);
    if (tj_status_of(r) || c->n_out > 1)
        return r;
    return tj_tuple(1, &r);
}

/* Whether the body's condition output is its condition input passed on (directly or through
 * Identity): the loop then never stops early. */
static int cond_passes(const Onnx__GraphProto *g) {
    if (g->n_input < 2 || g->n_output < 1)
        return 0;
    const char *in = g->input[1]->name, *o = g->output[0]->name;
    if (!strcmp(in, o))
        return 1;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *p = g->node[i];
        if (p->n_output == 1 && !strcmp(p->output[0], o))
            return !strcmp(p->op_type, "Identity") && p->n_input == 1 && !strcmp(p->input[0], in);
    }
    return 0;
}

CONV(c_loop) { /* M and cond: read as values when given (a trace per trip count) */
    cf_ctx c = {n, {graph_attr(n, "body"), NULL}, 0, NULL};
    int nv = n_in - 2, k_out = n_out - nv;
    if (!c.g[0] || nv < 0 || k_out < 0 || nv > 15)
        return ox_fail(n, TJ_ERR_INVALID, "body missing, or %d inputs and %d outputs", n_in, n_out);
    c.n_out = 1 + nv + k_out;
    int64_t trip = -1, go = 1;
    int64_t *v = NULL;
    if (in[0]) {
        if (ox_host_ints(n, in[0], "M", &v) != 1)
            return free(v), TJ_ERR_UNSUPPORTED;
        trip = v[0] < 0 ? 0 : v[0];
        free(v), v = NULL;
    }
    if (in[1]) {
        if (ox_host_ints(n, in[1], "cond", &v) != 1)
            return free(v), TJ_ERR_UNSUPPORTED;
        go = v[0] != 0;
        free(v);
    }
    tj_tensor *init[18];
    if (k_out > 0) { /* stacked outputs: a fixed trip count that the condition cannot cut */
        if (trip < 1 || !go || !cond_passes(c.g[0]))
            return ox_fail(n, TJ_ERR_UNSUPPORTED,
                           "stacked outputs need a trip count M >= 1 known when traced and a "
                           "condition the body passes on unchanged (M %lld)",
                           (long long)trip);
        init[0] = tj_scalar_bool(1);
        for (int k = 0; k < nv; k++)
            init[1 + k] = in[2 + k];
        tj_tensor *iters = tj_range(TJ_I64, 0, (double)trip, 1);
        tj_tensor *r = tj_scan(loop_scan_body, 1 + nv, init, 1, &iters, &c);
        if (tj_status_of(r))
            return ox_fail(n, tj_status_of(r), "%s", tj_error_message(r));
        for (int k = 0; k < n_out; k++)
            out[k] = tj_tuple_get(r, 1 + k);
        return TJ_OK;
    }
    c.n_out = 1 + nv;
    c.limit = trip >= 0 ? tj_scalar_i64(trip) : NULL;
    init[0] = tj_scalar_i64(0);
    init[1] = tj_scalar_bool(go != 0);
    for (int k = 0; k < nv; k++)
        init[2 + k] = in[2 + k];
    tj_tensor *r = tj_while_loop(loop_cond, loop_body, 2 + nv, init, &c);
    if (tj_status_of(r))
        return ox_fail(n, tj_status_of(r), "%s", tj_error_message(r));
    for (int k = 0; k < n_out; k++)
        out[k] = tj_tuple_get(r, 2 + k);
    return TJ_OK;
}

const ox_op ox_ops_control[] = {
    {"If", c_if, 1, 1, 1, 0},
    {"Loop", c_loop, 2, -1, 1, 0x3},
    {"Scan", c_scan, 1, -1, 9, 0},
    {NULL, NULL, 0, 0, 0, 0},
};
