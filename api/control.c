/* control.c — control flow for C code (S15–S19): cond, while_loop, for_range and scan over flat
 * lists of tensors (control_tree.c gives them tuples and the public names).
 * The bodies are C functions. Eagerly they run as plain C loops and branches. While tracing,
 * each body is traced into a region: a child trace whose graph gets the body's arguments as
 * params, then the node (COND, WHILE, FOR, SCAN) is recorded in the enclosing graph with GETs for
 * its results. A body may read any value of an enclosing trace: the value becomes an operand of
 * the node (a loop invariant, for loops) and a param of every region of it (capture_outer in
 * trace.c). Variables keep one slot list per function; a region that assigns one makes the next
 * read after the node a new VAR_READ (a new version). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "api/grad.h"

/* ---- helpers --------------------------------------------------------------------------------- */
static tj_tensor *fail(rt_trace *tr, tj_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static tj_tensor *fail(rt_trace *tr, tj_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ir_verrorf(code, fmt, ap);
    va_end(ap);
    if (tr)
        api_trace_fail(tr, code);
    return rt_scoped(rt_error_from_status(code));
}

/* Checks a list of tensor arguments: NULL, errors, tuples. NULL if fine, else an error tensor. */
static tj_tensor *check_list(const char *op, const char *what, int n, tj_tensor *const *xs) {
    if (n < 0 || (n > 0 && !xs))
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: bad %s list (n=%d)", op, what, n));
    for (int k = 0; k < n; k++) {
        if (!xs[k])
            return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: %s %d is NULL", op, what, k));
        if (rt_is_freed(xs[k], op))
            return rt_scoped(rt_error_from_status(TJ_ERR_STATE));
        if (xs[k]->kind == RT_ERROR)
            return rt_scoped(rt_retain(xs[k]));
        if (xs[k]->kind == RT_TUPLE)
            return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: %s %d is a tuple", op, what, k));
    }
    return NULL;
}

/* A user body called: its result is owned by the innermost scope, however it was returned
 * (rt_user_leave: a reference the body retained and returned is handed to that scope). */
static tj_tensor *call_body(tj_body fn, int n, tj_tensor *const *args, void *user) {
    rt_user_mark m = rt_user_enter();
    return rt_user_leave(fn(n, args, user), m);
}

/* The predicate as a bool scalar: a bool, or a number (nonzero is true, as tf.cond casts). */
static tj_tensor *as_predicate(const char *op, tj_tensor *p) {
    char d[128];
    if (p->rank != 0 || !(p->dtype == TJ_BOOL || ir_dtype_is_numeric(p->dtype)))
        return rt_scoped(rt_errorf(
            p->dtype == TJ_BOOL || ir_dtype_is_numeric(p->dtype) ? TJ_ERR_SHAPE : TJ_ERR_DTYPE,
            "%s: the predicate must be a scalar bool or number, got %s%s", op,
            ir_dtype_name(p->dtype), ir_fmt_dims(d, sizeof d, p->rank, p->dims)));
    if (p->dtype == TJ_BOOL)
        return p;
    tj_tensor *zero = rt_scoped(rt_tensor_alloc(p->dtype, 0, NULL));
    return zero ? tj_not_equal(p, zero) : rt_scoped(rt_error_from_status(0));
}

/* A body's return value as a list: NULL is none, a tuple its items, a tensor itself. */
static int result_items(tj_tensor *r, tj_tensor *const **items) {
    if (!r) {
        *items = NULL;
        return 0;
    }
    if (r->kind == RT_TUPLE) {
        *items = r->items;
        return r->n_items;
    }
    *items = NULL;
    return 1;
}
static tj_tensor *item(tj_tensor *r, int k) {
    return r->kind == RT_TUPLE ? r->items[k] : r;
}

/* One result or a tuple of n (a new scoped reference). */
static tj_tensor *pack(int n, tj_tensor *const *v, int single) {
    if (single && n == 1)
        return rt_retain(v[0]) ? rt_scoped(v[0]) : NULL;
    return tj_tuple(n, v);
}

static bool same_type(const tj_tensor *a, const tj_tensor *b) {
    return a->dtype == b->dtype && a->rank == b->rank &&
           !memcmp(a->dims, b->dims, (size_t)a->rank * sizeof *a->dims);
}

/* A loop body's new values against the old ones (eager runs: the trace checks them in ir): n
 * values, or at least n when `at_least` (a scan's body returns its outputs after them). */
static tj_tensor *check_carried(const char *op, int64_t it, int n, tj_tensor *const *old,
                                tj_tensor *r, int at_least) {
    tj_tensor *const *items;
    int m = result_items(r, &items);
    if (r && r->kind == RT_ERROR)
        return rt_scoped(rt_errorf(r->code, "%s: iteration %lld: %s", op, (long long)it, r->msg));
    if (at_least ? m < n : m != n)
        return rt_scoped(rt_errorf(TJ_ERR_SHAPE,
                                   "%s: iteration %lld: the body returned %d values for %d loop "
                                   "variables",
                                   op, (long long)it, m, n));
    for (int k = 0; k < n; k++) {
        tj_tensor *v = item(r, k);
        char a[128], b[128];
        if (v->kind == RT_ERROR)
            return rt_scoped(
                rt_errorf(v->code, "%s: iteration %lld: %s", op, (long long)it, v->msg));
        if (v->kind != RT_CONCRETE || !same_type(v, old[k]))
            return rt_scoped(rt_errorf(
                v->kind == RT_CONCRETE && v->dtype != old[k]->dtype ? TJ_ERR_DTYPE : TJ_ERR_SHAPE,
                "%s: iteration %lld: loop variable %d changed from %s%s to %s%s (a loop body must "
                "keep each variable's dtype and shape)",
                op, (long long)it, k, ir_dtype_name(old[k]->dtype),
                ir_fmt_dims(a, sizeof a, old[k]->rank, old[k]->dims), ir_dtype_name(v->dtype),
                ir_fmt_dims(b, sizeof b, v->rank, v->dims)));
    }
    return NULL;
}

/* ---- regions: tracing a body into a subgraph ------------------------------------------------- */
/* Adds PARAM `index` of g typed like node t (its dtype and dims). */
static uint32_t add_param(ir_graph *g, const ir_node *t, uint32_t index) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_PARAM;
    p.dtype = t->dtype;
    p.rank = t->rank;
    memcpy(p.dims, t->dims, sizeof p.dims);
    p.a.i[0] = index;
    return ir_add(g, &p, NULL, 0);
}

uint32_t api_region_capture_param(rt_trace *tr, uint32_t j) {
    if (j >= tr->n_capture_param) {
        uint32_t n = j + 8;
        uint32_t *p = realloc(tr->capture_param, n * sizeof *p);
        if (!p) {
            ir_errorf(TJ_ERR_OOM, "trace: out of memory");
            return IR_NONE;
        }
        for (uint32_t k = tr->n_capture_param; k < n; k++)
            p[k] = IR_NONE;
        tr->capture_param = p;
        tr->n_capture_param = n;
    }
    if (tr->capture_param[j] == IR_NONE)
        tr->capture_param[j] =
            add_param(tr->g, &tr->parent->g->nodes[tr->captures->outer[j]], tr->n_explicit + j);
    return tr->capture_param[j];
}

typedef struct region {
    ir_graph *g;
    int n_out, single; /* outputs; the body returned one tensor, not a tuple */
} region;

/* Adds the PARAM nodes of captures the region did not use itself, so every region of a node takes
 * all its operands. */
static tj_status complete_params(region *r, const api_captures *c, uint32_t n_explicit,
                                 const ir_graph *parent) {
    for (uint32_t j = 0; j < c->n; j++) {
        bool have = false;
        for (uint32_t i = 0; i < r->g->n_nodes && !have; i++)
            have = r->g->nodes[i].op == IR_OP_PARAM &&
                   (uint64_t)r->g->nodes[i].a.i[0] == n_explicit + j;
        if (!have && add_param(r->g, &parent->nodes[c->outer[j]], n_explicit + j) == IR_NONE)
            return ir_last_code();
    }
    return TJ_OK;
}

/* Traces body(n, params) into a new region graph named `name`. types: the params' dtype/dims.
 * as_bool: the single result is a predicate (cast to bool). The region's failure becomes the
 * parent's. */
static tj_status trace_region(rt_trace *parent, const char *name, tj_body body, void *user, int n,
                              const ir_node *types, api_captures *caps, int as_bool, region *out) {
    memset(out, 0, sizeof *out);
    rt_trace tr;
    memset(&tr, 0, sizeof tr);
    if (!(tr.g = ir_graph_new(name)))
        return ir_last_code();
    tr.is_region = 1;
    tr.captures = caps;
    tr.n_explicit = (uint32_t)n;
    tr.owner = parent->owner;
    tr.arg_names = NULL;
    tj_status st = TJ_OK;
    tj_tensor *stack_sym[16], **sym = n <= 16 ? stack_sym : calloc((size_t)n, sizeof *sym);
    if (!sym) {
        ir_graph_free(tr.g);
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", name);
    }
    api_trace_push(&tr);
    tj_scope_begin();
    for (int k = 0; k < n && !st; k++) {
        uint32_t id = add_param(tr.g, &types[k], (uint32_t)k);
        if (id == IR_NONE)
            st = ir_last_code();
        else
            sym[k] = rt_scoped(api_symbolic(&tr, id));
    }
    for (uint32_t j = 0; j < caps->n && !st; j++) /* captures of earlier regions of the node */
        if (api_region_capture_param(&tr, j) == IR_NONE)
            st = ir_last_code();
    tj_tensor *res = st ? NULL : call_body(body, n, sym, user);
    tj_tensor *const *items = NULL;
    int m = 0;
    if (!st && tr.err) {
        st = ir_errorf(tr.err, "%s", tr.errmsg);
    } else if (!st && res && res->kind == RT_ERROR) {
        st = ir_errorf(res->code, "%s", res->msg);
    } else if (!st) {
        m = result_items(res, &items);
        out->single = res && res->kind != RT_TUPLE;
        if (as_bool && m == 1) {
            tj_tensor *b = as_predicate(name, item(res, 0));
            if (b->kind == RT_ERROR)
                st = ir_errorf(b->code, "%s", b->msg);
            else
                res = b;
        } else if (as_bool) {
            st = ir_errorf(TJ_ERR_INVALID, "%s: returned %d values, not one predicate", name, m);
        }
        for (int k = 0; k < m && !st; k++) {
            tj_tensor *v = item(res, k);
            uint32_t id = IR_NONE;
            if (v->kind == RT_TUPLE)
                st = ir_errorf(TJ_ERR_UNSUPPORTED,
                               "%s: result %d is a tuple (return one flat "
                               "tuple)",
                               name, k);
            else if (v->kind == RT_ERROR)
                st = ir_errorf(v->code, "%s", v->msg);
            else if ((id = api_trace_lift(&tr, v)) == IR_NONE || ir_add_output(tr.g, id))
                st = ir_last_code();
        }
        if (!st && tr.err) /* a capture failed while lifting the results */
            st = ir_errorf(tr.err, "%s", tr.errmsg);
    }
    tj_scope_end();
    api_trace_pop();
    if (sym != stack_sym)
        free(sym);
    api_trace_free_state(&tr);
    if (st) {
        ir_graph_free(tr.g);
        return st;
    }
    out->g = tr.g;
    out->n_out = m;
    return TJ_OK;
}

/* Records node p with operands ops[0..n) + the captures and its regions in tr, then GET nodes
 * for its results; returns them packed (one tensor when `single`) or an error. */
static tj_tensor *record(rt_trace *tr, ir_node *p, const uint32_t *ops, uint32_t n,
                         const api_captures *caps, region *rs, int n_regions, int single) {
    const char *op = ir_ops[p->op].name;
    uint32_t total = n + caps->n;
    uint32_t *in = malloc((total + 1) * sizeof *in);
    if (!in)
        return fail(tr, TJ_ERR_OOM, "%s: out of memory", op);
    memcpy(in, ops, n * sizeof *in);
    if (caps->n)
        memcpy(in + n, caps->outer, caps->n * sizeof *in);
    uint8_t *assigned = calloc((size_t)tr->n_var_state + 1, 1);
    for (int k = 0; k < n_regions; k++) {
        if (assigned)
            ir_assigned_slots(rs[k].g, assigned, tr->n_var_state);
        uint32_t s = ir_add_sub(tr->g, rs[k].g);
        if (!s) {
            for (int j = k; j < n_regions; j++)
                ir_graph_free(rs[j].g);
            free(in);
            free(assigned);
            return fail(tr, ir_last_code(), "%s", ir_last_error());
        }
        rs[k].g = NULL; /* owned by tr->g now */
        p->a.sub[k] = s;
    }
    uint32_t id = ir_add(tr->g, p, in, total);
    free(in);
    if (id == IR_NONE) {
        free(assigned);
        return fail(tr, ir_last_code(), "%s", ir_last_error());
    }
    /* a read of a variable the regions assign must come after the node: a new version */
    for (uint32_t s = 0; assigned && s < tr->n_var_state; s++)
        if (assigned[s]) {
            tr->cap_value[s] = IR_NONE;
            tr->cap_version[s]++;
        }
    free(assigned);
    uint32_t nr = ir_cf_n_results(tr->g, ir_node_get(tr->g, id));
    tj_tensor *stack_v[16], **v = nr <= 16 ? stack_v : calloc(nr + 1, sizeof *v);
    if (!v)
        return fail(tr, TJ_ERR_OOM, "%s: out of memory", op);
    tj_status st = TJ_OK;
    for (uint32_t k = 0; k < nr && !st; k++) {
        ir_node g;
        memset(&g, 0, sizeof g);
        g.op = IR_OP_GET;
        g.a.i[0] = k;
        uint32_t gid = ir_add(tr->g, &g, &id, 1);
        if (gid == IR_NONE)
            st = ir_last_code();
        else
            v[k] = rt_scoped(api_symbolic(tr, gid));
    }
    if (!st && api_tape_n_active) {
        const ir_node *node = ir_node_get(tr->g, id);
        api_tape_on_cf(tr, node, ir_inputs(tr->g, node), node->n_in, v, nr);
    }
    tj_tensor *r = st ? fail(tr, st, "%s", ir_last_error()) : pack((int)nr, v, single);
    if (v != stack_v)
        free(v);
    return r;
}

/* Traces the bodies of one node into w->rs[0..n_regions) (all taking the same n params) and gives
 * every region a param for every capture. bool_first: region 0 returns a predicate. */
typedef struct work work;
static tj_status trace_bodies(rt_trace *tr, work *w, int n_regions, const char *const *names,
                              const tj_body *fns, void *user, int n, int bool_first);

/* The nodes of values in trace tr (lifting concrete ones); false with the trace failed. */
static bool lift_all(rt_trace *tr, int n, tj_tensor *const *xs, uint32_t *ids) {
    for (int k = 0; k < n; k++)
        if ((ids[k] = api_trace_lift(tr, xs[k])) == IR_NONE) {
            api_trace_fail(tr, ir_last_code());
            return false;
        }
    return true;
}

static void desc_of(const ir_graph *g, uint32_t id, ir_node *d) {
    const ir_node *n = &g->nodes[id];
    memset(d, 0, sizeof *d);
    d->op = IR_OP_PARAM;
    d->dtype = n->dtype;
    d->rank = n->rank;
    memcpy(d->dims, n->dims, sizeof d->dims);
}

struct work {
    uint32_t *ids;
    ir_node *types;
    api_captures caps;
    region rs[2];
};

static tj_status trace_bodies(rt_trace *tr, work *w, int n_regions, const char *const *names,
                              const tj_body *fns, void *user, int n, int bool_first) {
    tj_status st = TJ_OK;
    for (int k = 0; k < n_regions && !st; k++)
        st = trace_region(tr, names[k], fns[k], user, n, w->types, &w->caps, bool_first && !k,
                          &w->rs[k]);
    for (int k = 0; k < n_regions && !st; k++)
        st = complete_params(&w->rs[k], &w->caps, (uint32_t)n, tr->g);
    return st;
}

static bool work_init(work *w, int n) {
    memset(w, 0, sizeof *w);
    w->ids = calloc((size_t)n + 4, sizeof *w->ids);
    w->types = calloc((size_t)n + 4, sizeof *w->types);
    return w->ids && w->types;
}
static void work_free(work *w) {
    free(w->ids);
    free(w->types);
    free(w->caps.outer);
    for (int k = 0; k < 2; k++)
        ir_graph_free(w->rs[k].g);
}

/* ---- cond ------------------------------------------------------------------------------------ */
tj_tensor *api_cond_flat(tj_tensor *pred, tj_body then_fn, tj_body else_fn, int n,
                         tj_tensor *const *args, void *user) {
    tj_tensor *err = check_list("cond", "predicate", 1, &pred);
    if (!err)
        err = check_list("cond", "argument", n, args);
    if (err)
        return err;
    rt_trace *tr = api_trace_current();
    if (!then_fn || !else_fn)
        return fail(tr, TJ_ERR_INVALID, "cond: the %s branch is NULL", then_fn ? "else" : "then");
    tj_tensor *p = as_predicate("cond", pred);
    if (p->kind == RT_ERROR)
        return tr ? (api_trace_fail(tr, p->code), p) : p;
    if (!tr) { /* eager: one branch runs */
        tj_tensor *r = call_body(tj_tensor_get_f64(p, 0) != 0 ? then_fn : else_fn, n, args, user);
        return r ? r : tj_tuple(0, NULL);
    }
    work w;
    if (!work_init(&w, n + 1)) {
        work_free(&w);
        return fail(tr, TJ_ERR_OOM, "cond: out of memory");
    }
    tj_tensor *res = NULL;
    if (!lift_all(tr, 1, &p, &w.ids[0]) || !lift_all(tr, n, args, w.ids + 1)) {
        res = rt_scoped(rt_error_from_status(0));
    } else {
        for (int k = 0; k < n; k++)
            desc_of(tr->g, w.ids[1 + k], &w.types[k]);
        tj_status st = trace_bodies(tr, &w, 2, (const char *[]){"then", "else"},
                                    (tj_body[]){then_fn, else_fn}, user, n, 0);
        if (st) {
            res = fail(tr, st, "%s", ir_last_error());
        } else {
            ir_node node;
            memset(&node, 0, sizeof node);
            node.op = IR_OP_COND;
            res = record(tr, &node, w.ids, (uint32_t)n + 1, &w.caps, w.rs, 2, w.rs[0].single);
            if (res->kind != RT_ERROR && w.rs[0].n_out == 0)
                res = tj_tuple(0, NULL);
        }
    }
    work_free(&w);
    return res;
}

/* ---- while ----------------------------------------------------------------------------------- */
static tj_tensor *while_eager(tj_body cond_fn, tj_body body_fn, int n, tj_tensor *const *init,
                              int64_t max_it, void *user) {
    tj_tensor **vars = calloc((size_t)n + 1, sizeof *vars);
    if (!vars)
        return rt_scoped(rt_errorf(TJ_ERR_OOM, "while_loop: out of memory"));
    for (int k = 0; k < n; k++)
        vars[k] = rt_retain(init[k]);
    tj_tensor *err = NULL;
    for (int64_t it = 0; !err && !(max_it > 0 && it >= max_it); it++) {
        tj_scope_begin();
        tj_tensor *c = call_body(cond_fn, n, vars, user);
        tj_tensor *p =
            c && c->kind != RT_ERROR && c->kind != RT_TUPLE ? as_predicate("while_loop", c) : NULL;
        if (!c || c->kind == RT_TUPLE)
            err = tj_keep(rt_scoped(rt_errorf(TJ_ERR_INVALID,
                                              "while_loop: iteration %lld: the cond returned %s, "
                                              "not one predicate",
                                              (long long)it, c ? "a tuple" : "nothing")));
        else if (c->kind == RT_ERROR || p->kind == RT_ERROR)
            err = tj_keep(rt_scoped(rt_errorf(c->kind == RT_ERROR ? c->code : p->code,
                                              "while_loop: iteration %lld: %s", (long long)it,
                                              c->kind == RT_ERROR ? c->msg : p->msg)));
        bool go = !err && tj_tensor_get_f64(p, 0) != 0;
        if (go) {
            tj_tensor *r = call_body(body_fn, n, vars, user);
            if ((err = check_carried("while_loop", it, n, vars, r, 0)))
                tj_keep(err);
            for (int k = 0; k < n && !err; k++) {
                rt_release(vars[k]);
                vars[k] = rt_retain(item(r, k));
            }
        }
        tj_scope_end();
        if (!go)
            break;
    }
    tj_tensor *res = err ? err : pack(n, vars, 1); /* tj_keep gave err to the caller's scope */
    for (int k = 0; k < n; k++)
        rt_release(vars[k]);
    free(vars);
    return res;
}

tj_tensor *api_while_flat(tj_body cond_fn, tj_body body_fn, int n, tj_tensor *const *init,
                          int64_t maximum_iterations, void *user) {
    tj_tensor *err = check_list("while_loop", "loop variable", n, init);
    if (err)
        return err;
    rt_trace *tr = api_trace_current();
    if (!cond_fn || !body_fn)
        return fail(tr, TJ_ERR_INVALID, "while_loop: the %s is NULL", cond_fn ? "body" : "cond");
    if (maximum_iterations < 0)
        return fail(tr, TJ_ERR_INVALID, "while_loop: maximum_iterations %lld is negative",
                    (long long)maximum_iterations);
    if (!tr)
        return while_eager(cond_fn, body_fn, n, init, maximum_iterations, user);
    work w;
    if (!work_init(&w, n)) {
        work_free(&w);
        return fail(tr, TJ_ERR_OOM, "while_loop: out of memory");
    }
    tj_tensor *res;
    if (!lift_all(tr, n, init, w.ids)) {
        res = rt_scoped(rt_error_from_status(0));
    } else {
        for (int k = 0; k < n; k++)
            desc_of(tr->g, w.ids[k], &w.types[k]);
        tj_status st = trace_bodies(tr, &w, 2, (const char *[]){"cond", "body"},
                                    (tj_body[]){cond_fn, body_fn}, user, n, 1);
        if (st) {
            res = fail(tr, st, "while_loop: %s", ir_last_error());
        } else {
            ir_node node;
            memset(&node, 0, sizeof node);
            node.op = IR_OP_WHILE;
            node.a.i[0] = maximum_iterations;
            node.a.i[1] = w.caps.n;
            res = record(tr, &node, w.ids, (uint32_t)n, &w.caps, w.rs, 2, 1);
        }
    }
    work_free(&w);
    return res;
}

/* ---- for_range ------------------------------------------------------------------------------- */
/* An error tensor when start, limit or delta is not a numeric scalar; NULL when it is. */
static tj_tensor *bound_error(const char *what, tj_tensor *t) {
    tj_tensor *err = check_list("for_range", what, 1, &t);
    if (err)
        return err;
    char d[128];
    if (!rt_on_host(t))
        return rt_scoped(rt_errorf(TJ_ERR_INVALID,
                                   "for_range: %s is on %s; the loop runs on the host", what,
                                   rt_buffer_device(t->buf)->name));
    if (t->rank != 0 || !ir_dtype_is_numeric(t->dtype))
        return rt_scoped(rt_errorf(ir_dtype_is_numeric(t->dtype) ? TJ_ERR_SHAPE : TJ_ERR_DTYPE,
                                   "for_range: %s must be a numeric scalar, got %s%s", what,
                                   ir_dtype_name(t->dtype),
                                   ir_fmt_dims(d, sizeof d, t->rank, t->dims)));
    return NULL;
}

/* start, limit or delta as an int64 scalar (an error tensor otherwise). */
static tj_tensor *bound(const char *what, tj_tensor *t) {
    tj_tensor *err = bound_error(what, t);
    return err ? err : t->dtype == TJ_I64 ? t : tj_cast(t, TJ_I64);
}

/* A range over floats, as tf.range: ceil((limit - start) / delta) steps (none when that is not
 * positive), the body getting i = start + k·delta in the bounds' float type (float64 if one is,
 * else float32) computed in float64. It runs as an int64 range over k whose body makes i. */
typedef struct float_range {
    tj_body body;
    void *user;
    double start, delta;
    tj_dtype dt;
} float_range;

static tj_tensor *float_range_body(int n, tj_tensor *const *args, void *user) {
    const float_range *fr = user;
    tj_tensor *stack[17], **a = n <= 17 ? stack : calloc((size_t)n, sizeof *a);
    if (!a)
        return rt_scoped(rt_errorf(TJ_ERR_OOM, "for_range: out of memory"));
    memcpy(a, args, (size_t)n * sizeof *a);
    tj_tensor *k = tj_cast(args[0], TJ_F64);
    a[0] = tj_cast(tj_add(tj_mul(k, tj_scalar_f64(fr->delta)), tj_scalar_f64(fr->start)), fr->dt);
    tj_tensor *r = call_body(fr->body, n, a, fr->user);
    if (a != stack)
        free(a);
    return r;
}

static tj_tensor *float_for(tj_tensor *const b[3], tj_body body_fn, int n, tj_tensor *const *init,
                            void *user) {
    rt_trace *tr = api_trace_current();
    static const char *what[3] = {"start", "limit", "delta"};
    double v[3];
    tj_dtype dt = TJ_F32;
    for (int k = 0; k < 3; k++) { /* each a numeric scalar, as the int64 range checks them */
        tj_tensor *e = bound_error(what[k], b[k]);
        if (e)
            return tr ? (api_trace_fail(tr, e->code), e) : e;
    }
    for (int k = 0; k < 3; k++) {
        if (b[k]->kind != RT_CONCRETE) /* symbolic: known only when the function runs */
            return fail(tr, TJ_ERR_UNSUPPORTED,
                        "for_range: %s is a %s computed when the function runs; a range over "
                        "floats needs its bounds known when traced (constants): cast it to an "
                        "integer or loop with tj_while_loop",
                        what[k], ir_dtype_name(b[k]->dtype));
        v[k] = tj_tensor_get_f64(b[k], 0);
        if (b[k]->dtype == TJ_F64)
            dt = TJ_F64;
    }
    for (int k = 0; k < 3; k++)
        if (!isfinite(v[k]))
            return fail(tr, TJ_ERR_INVALID, "for_range: %s is %g (range(%g, %g, %g))", what[k],
                        v[k], v[0], v[1], v[2]);
    if (v[2] == 0)
        return fail(tr, TJ_ERR_INVALID, "for_range: delta is 0 (range(%g, %g, 0))", v[0], v[1]);
    double steps = ceil((v[1] - v[0]) / v[2]);
    if (!(steps < 9007199254740992.0)) /* 2^53: beyond it start + k·delta repeats values */
        return fail(tr, TJ_ERR_INVALID,
                    "for_range: range(%g, %g, %g) has %g steps, more than 2^53 (delta too small "
                    "for the bounds)",
                    v[0], v[1], v[2], steps);
    float_range fr = {body_fn, user, v[0], v[2], dt};
    tj_scope_begin(); /* the int64 bounds are this call's */
    tj_tensor *r =
        tj_keep(api_for_flat(tj_scalar_i64(0), tj_scalar_i64(steps > 0 ? (int64_t)steps : 0),
                             tj_scalar_i64(1), float_range_body, n, init, &fr));
    tj_scope_end();
    return r;
}

tj_tensor *api_for_flat(tj_tensor *start, tj_tensor *limit, tj_tensor *delta, tj_body body_fn,
                        int n, tj_tensor *const *init, void *user) {
    rt_trace *tr = api_trace_current();
    tj_tensor *given[3] = {start, limit, delta};
    for (int k = 0; k < 3; k++) /* a float scalar makes it a range over floats */
        if (given[k] && (given[k]->kind == RT_CONCRETE || given[k]->kind == RT_SYMBOLIC) &&
            given[k]->rank == 0 && ir_dtype_is_float(given[k]->dtype))
            return float_for(given, body_fn, n, init, user);
    tj_tensor *b[3] = {bound("start", start), bound("limit", limit), bound("delta", delta)};
    for (int k = 0; k < 3; k++)
        if (b[k]->kind == RT_ERROR)
            return tr ? (api_trace_fail(tr, b[k]->code), b[k]) : b[k];
    tj_tensor *err = check_list("for_range", "loop variable", n, init);
    if (err)
        return err;
    if (!body_fn)
        return fail(tr, TJ_ERR_INVALID, "for_range: the body is NULL");
    if (!tr) {
        int64_t lo = *(const int64_t *)b[0]->data, hi = *(const int64_t *)b[1]->data,
                step = *(const int64_t *)b[2]->data;
        if (step == 0)
            return rt_scoped(rt_errorf(TJ_ERR_RUNTIME,
                                       "for_range: delta is 0 (range(%lld, %lld, 0))",
                                       (long long)lo, (long long)hi));
        tj_tensor **args = calloc((size_t)n + 2, sizeof *args);
        if (!args)
            return rt_scoped(rt_errorf(TJ_ERR_OOM, "for_range: out of memory"));
        for (int k = 0; k < n; k++)
            args[1 + k] = rt_retain(init[k]);
        tj_tensor *e = NULL;
        int64_t it = 0;
        for (int64_t i = lo; !e && (step > 0 ? i < hi : i > hi); it++) {
            tj_scope_begin();
            args[0] = tj_scalar_i64(i);
            tj_tensor *r = call_body(body_fn, n + 1, args, user);
            if ((e = check_carried("for_range", it, n, args + 1, r, 0)))
                tj_keep(e);
            for (int k = 0; k < n && !e; k++) {
                rt_release(args[1 + k]);
                args[1 + k] = rt_retain(item(r, k));
            }
            tj_scope_end();
            if (__builtin_add_overflow(i, step, &i))
                break;
        }
        tj_tensor *res = e ? e : pack(n, args + 1, 1); /* e: kept into the caller's scope */
        for (int k = 0; k < n; k++)
            rt_release(args[1 + k]);
        free(args);
        return res;
    }
    work w;
    if (!work_init(&w, n + 3)) {
        work_free(&w);
        return fail(tr, TJ_ERR_OOM, "for_range: out of memory");
    }
    tj_tensor *res;
    if (!lift_all(tr, 3, b, w.ids) || !lift_all(tr, n, init, w.ids + 3)) {
        res = rt_scoped(rt_error_from_status(0));
    } else {
        desc_of(tr->g, w.ids[0], &w.types[0]);
        for (int k = 0; k < n; k++)
            desc_of(tr->g, w.ids[3 + k], &w.types[1 + k]);
        tj_status st =
            trace_bodies(tr, &w, 1, (const char *[]){"body"}, (tj_body[]){body_fn}, user, n + 1, 0);
        if (st) {
            res = fail(tr, st, "for_range: %s", ir_last_error());
        } else {
            ir_node node;
            memset(&node, 0, sizeof node);
            node.op = IR_OP_FOR;
            node.a.i[1] = w.caps.n;
            res = record(tr, &node, w.ids, (uint32_t)n + 3, &w.caps, w.rs, 1, 1);
        }
    }
    work_free(&w);
    return res;
}

/* ---- scan ------------------------------------------------------------------------------------ */
static tj_tensor *scan_eager(tj_body body_fn, int nc, tj_tensor *const *carry, int nx,
                             tj_tensor *const *xs, void *user) {
    int64_t T = xs[0]->dims[0];
    tj_tensor **args = calloc((size_t)(nc + nx) + 1, sizeof *args);
    tj_tensor ***ys = NULL;
    int ny = -1;
    tj_tensor *e = NULL;
    if (!args)
        return rt_scoped(rt_errorf(TJ_ERR_OOM, "scan: out of memory"));
    for (int k = 0; k < nc; k++)
        args[k] = rt_retain(carry[k]);
    for (int64_t t = 0; t < T && !e; t++) {
        tj_scope_begin();
        for (int k = 0; k < nx; k++)
            args[nc + k] = tj_gather(xs[k], tj_scalar_i64(t), 0); /* row t */
        tj_tensor *r = call_body(body_fn, nc + nx, args, user);
        tj_tensor *const *items;
        int m = result_items(r, &items);
        if ((e = check_carried("scan", t, nc, args, r, 1)))
            tj_keep(e);
        if (!e && ny < 0) {
            ny = m - nc;
            ys = calloc((size_t)ny + 1, sizeof *ys);
            for (int k = 0; ys && k < ny; k++)
                if (!(ys[k] = calloc((size_t)T + 1, sizeof **ys)))
                    e = tj_keep(rt_scoped(rt_errorf(TJ_ERR_OOM, "scan: out of memory")));
            if (!ys)
                e = tj_keep(rt_scoped(rt_errorf(TJ_ERR_OOM, "scan: out of memory")));
        } else if (!e && m - nc != ny) {
            e = tj_keep(rt_scoped(rt_errorf(TJ_ERR_SHAPE,
                                            "scan: step %lld: the body returned %d outputs, step 0 "
                                            "returned %d",
                                            (long long)t, m - nc, ny)));
        }
        for (int k = 0; k < ny && !e; k++) {
            tj_tensor *y = item(r, nc + k);
            if (y->kind != RT_CONCRETE || (t > 0 && !same_type(y, ys[k][0])))
                e = tj_keep(rt_scoped(
                    rt_errorf(y->kind == RT_CONCRETE && y->dtype != ys[k][0]->dtype ? TJ_ERR_DTYPE
                                                                                    : TJ_ERR_SHAPE,
                              "scan: step %lld: output %d changed its dtype or "
                              "shape",
                              (long long)t, k)));
            else
                ys[k][t] = rt_retain(y);
        }
        for (int k = 0; k < nc && !e; k++) {
            rt_release(args[k]);
            args[k] = rt_retain(item(r, k));
        }
        tj_scope_end();
    }
    tj_tensor *res = NULL;
    if (!e) { /* stack each y along a new axis 0 */
        tj_tensor **out = calloc((size_t)(nc + (ny > 0 ? ny : 0)) + 1, sizeof *out);
        for (int k = 0; out && k < nc; k++)
            out[k] = args[k];
        tj_scope_begin();
        for (int k = 0; out && k < ny && !e; k++) {
            tj_tensor **rows = calloc((size_t)T + 1, sizeof *rows);
            for (int64_t t = 0; rows && t < T; t++)
                rows[t] = tj_expand_dims(ys[k][t], 0);
            out[nc + k] = rows ? rt_retain(tj_concat((int)T, rows, 0)) : NULL; /* ours */
            free(rows);
        }
        tj_scope_end();
        res = out ? tj_tuple(nc + (ny > 0 ? ny : 0), out)
                  : rt_scoped(rt_errorf(TJ_ERR_OOM, "scan: out of memory"));
        for (int k = 0; out && k < ny; k++)
            rt_release(out[nc + k]);
        free(out);
    } else {
        res = e; /* kept into the caller's scope */
    }
    for (int k = 0; ys && k < ny; k++) {
        for (int64_t t = 0; ys[k] && t < T; t++)
            rt_release(ys[k][t]);
        free(ys[k]);
    }
    free(ys);
    for (int k = 0; k < nc; k++)
        rt_release(args[k]);
    free(args);
    return res;
}

tj_tensor *api_scan_flat(tj_body body_fn, int n_carry, tj_tensor *const *carry, int n_xs,
                         tj_tensor *const *xs, void *user) {
    tj_tensor *err = check_list("scan", "carried value", n_carry, carry);
    if (!err)
        err = check_list("scan", "sequence", n_xs, xs);
    if (err)
        return err;
    rt_trace *tr = api_trace_current();
    if (!body_fn)
        return fail(tr, TJ_ERR_INVALID, "scan: the body is NULL");
    if (n_xs < 1)
        return fail(tr, TJ_ERR_INVALID, "scan: needs at least one sequence (n_xs=%d)", n_xs);
    for (int k = 0; k < n_xs; k++) {
        char a[128], b[128];
        if (xs[k]->rank < 1)
            return fail(tr, TJ_ERR_SHAPE, "scan: sequence %d is %s%s: it needs a leading axis", k,
                        ir_dtype_name(xs[k]->dtype), ir_fmt_dims(a, sizeof a, 0, NULL));
        if (xs[k]->dims[0] != xs[0]->dims[0])
            return fail(tr, TJ_ERR_SHAPE,
                        "scan: sequence %d is %s, sequence 0 is %s: the leading "
                        "axes differ",
                        k, ir_fmt_dims(a, sizeof a, xs[k]->rank, xs[k]->dims),
                        ir_fmt_dims(b, sizeof b, xs[0]->rank, xs[0]->dims));
    }
    if (!tr)
        return scan_eager(body_fn, n_carry, carry, n_xs, xs, user);
    work w;
    if (!work_init(&w, n_carry + n_xs)) {
        work_free(&w);
        return fail(tr, TJ_ERR_OOM, "scan: out of memory");
    }
    tj_tensor *res;
    if (!lift_all(tr, n_carry, carry, w.ids) || !lift_all(tr, n_xs, xs, w.ids + n_carry)) {
        res = rt_scoped(rt_error_from_status(0));
    } else {
        for (int k = 0; k < n_carry + n_xs; k++) {
            desc_of(tr->g, w.ids[k], &w.types[k]);
            if (k >= n_carry) { /* the body sees one step: axis 0 dropped */
                w.types[k].rank--;
                memmove(w.types[k].dims, w.types[k].dims + 1,
                        (size_t)w.types[k].rank * sizeof *w.types->dims);
            }
        }
        tj_status st = trace_bodies(tr, &w, 1, (const char *[]){"body"}, (tj_body[]){body_fn}, user,
                                    n_carry + n_xs, 0);
        if (st) {
            res = fail(tr, st, "scan: %s", ir_last_error());
        } else {
            ir_node node;
            memset(&node, 0, sizeof node);
            node.op = IR_OP_SCAN;
            node.a.i[0] = n_carry;
            node.a.i[1] = w.caps.n;
            res = record(tr, &node, w.ids, (uint32_t)(n_carry + n_xs), &w.caps, w.rs, 1, 0);
        }
    }
    work_free(&w);
    return res;
}
