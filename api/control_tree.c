/* control_tree.c — the public control-flow entry points, and tuples in their value lists. A
 * list of loop variables (or arguments) may hold tuples, tensor arrays among them: the bodies see
 * the list as given while the flat versions in control.c, the regions and the executor see a
 * flat list of tensors. An adapter wraps each body (nest the arguments, call, flatten the
 * results, check they keep their shape); lists without tuples go straight to the flat versions. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

/* ---- structured loop variables: tuples (tensor arrays) flattened around the flat versions -----
 */
/* A list of values, each a tensor or a tuple of tensors (a tensor array is one): the bodies see
 * the list as given, the regions and the executor a flat list of tensors. */
#define TREE_MAX 64
typedef struct tree {
    int n_top, n_flat, has_tuple;
    uint8_t kind[TREE_MAX]; /* 0: a tensor, 1: a tuple, 2: a tensor array */
    uint8_t width[TREE_MAX];
} tree;

/* The tree of v[0..n) and its flat items (into flat, room for `room`); an error tensor or NULL. */
static tj_tensor *tree_of(const char *op, int n, tj_tensor *const *v, tree *t, tj_tensor **flat,
                          int room) {
    memset(t, 0, sizeof *t);
    t->n_top = n;
    for (int k = 0; k < n; k++) {
        if (!v[k])
            return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: value %d is NULL", op, k));
        if (v[k]->kind == RT_ERROR)
            return rt_scoped(rt_retain(v[k]));
        int w = v[k]->kind == RT_TUPLE ? v[k]->n_items : 1;
        if (v[k]->kind == RT_TUPLE) {
            if (k >= TREE_MAX || w > 255)
                return rt_scoped(rt_errorf(TJ_ERR_UNSUPPORTED,
                                           "%s: at most %d values when some are tuples", op,
                                           TREE_MAX));
            t->has_tuple = 1;
            t->kind[k] = v[k]->tensor_array ? 2 : 1;
            t->width[k] = (uint8_t)w;
            for (int j = 0; j < w; j++)
                if (v[k]->items[j]->kind == RT_TUPLE)
                    return rt_scoped(rt_errorf(TJ_ERR_UNSUPPORTED,
                                               "%s: value %d holds a tuple in a tuple (one level "
                                               "of tuples only)",
                                               op, k));
        } else if (k < TREE_MAX) {
            t->width[k] = 1;
        }
        for (int j = 0; j < w && t->n_flat + j < room; j++)
            flat[t->n_flat + j] = v[k]->kind == RT_TUPLE ? v[k]->items[j] : v[k];
        t->n_flat += w;
    }
    return NULL;
}

/* The top-level values of flat values shaped by t (tuples are new scoped references). */
static void tree_nest(const tree *t, tj_tensor *const *flat, tj_tensor **top) {
    int at = 0;
    for (int k = 0; k < t->n_top; k++) {
        if (!t->has_tuple || t->kind[k] == 0) {
            top[k] = flat[at++];
            continue;
        }
        top[k] = tj_tuple(t->width[k], flat + at);
        if (top[k]->kind == RT_TUPLE)
            top[k]->tensor_array = t->kind[k] == 2;
        at += t->width[k];
    }
}

/* A user body seen through flat lists: it gets its arguments shaped by `in` and its results
 * are flattened; the first `expect.n_top` results must be shaped like `expect` (the carried
 * values of a loop; for a cond's else branch, what the then branch returned), the rest plain. */
typedef struct adapter {
    tj_body fn;
    void *user;
    const char *op;
    tree in, expect, got;
    int check;  /* expect is set */
    int single; /* the body returned one value, not a tuple */
} adapter;

static tj_tensor *run_adapted(adapter *a, tj_tensor *const *flat) {
    tj_tensor *stack_top[16],
        **top = a->in.n_top <= 16 ? stack_top : calloc((size_t)a->in.n_top, sizeof *top);
    if (!top)
        return rt_scoped(rt_errorf(TJ_ERR_OOM, "%s: out of memory", a->op));
    tree_nest(&a->in, flat, top);
    rt_user_mark um = rt_user_enter();
    tj_tensor *r = rt_user_leave(a->fn(a->in.n_top, top, a->user), um); /* scope-owned now */
    if (top != stack_top)
        free(top);
    if (!r || r->kind == RT_ERROR)
        return r;
    /* a tensor array is one value, not a tuple of results */
    bool many = r->kind == RT_TUPLE && !r->tensor_array;
    a->single = !many;
    tj_tensor *one = r, *const *items = many ? r->items : &one;
    int m = many ? r->n_items : 1, room = 0;
    for (int k = 0; k < m; k++)
        room += items[k]->kind == RT_TUPLE ? items[k]->n_items : 1;
    tj_tensor **fl = calloc((size_t)room + 1, sizeof *fl);
    if (!fl)
        return rt_scoped(rt_errorf(TJ_ERR_OOM, "%s: out of memory", a->op));
    tj_tensor *err = tree_of(a->op, m, items, &a->got, fl, room);
    for (int k = 0; !err && a->check && k < a->expect.n_top; k++) {
        bool tup = k < m && items[k]->kind == RT_TUPLE;
        int w = tup ? items[k]->n_items : 1;
        if (k >= m || tup != (a->expect.kind[k] != 0) || w != a->expect.width[k])
            err = rt_scoped(rt_errorf(TJ_ERR_SHAPE,
                                      "%s: result %d is shaped unlike before (a tuple or tensor "
                                      "array must stay one, with the same number of items)",
                                      a->op, k));
    }
    tj_tensor *res = err                               ? err
                     : a->single && a->got.n_flat == 1 ? (rt_retain(fl[0]), rt_scoped(fl[0]))
                                                       : tj_tuple(a->got.n_flat, fl);
    free(fl);
    return res;
}
/* ctx: an array of adapters; the first body of a node uses [0], the second [1] */
static tj_tensor *adapted0(int n, tj_tensor *const *flat, void *ctx) {
    (void)n;
    return run_adapted(&((adapter *)ctx)[0], flat);
}
static tj_tensor *adapted1(int n, tj_tensor *const *flat, void *ctx) {
    (void)n;
    return run_adapted(&((adapter *)ctx)[1], flat);
}
/* a cond's else branch must return what its then branch returned */
static tj_tensor *adapted_else(int n, tj_tensor *const *flat, void *ctx) {
    adapter *a = ctx; /* a[0]: then, a[1]: else */
    (void)n;
    if (a[0].got.n_top || a[0].got.n_flat) {
        a[1].expect = a[0].got;
        a[1].check = 1;
    }
    return run_adapted(&a[1], flat);
}

/* The flat results r of a flat call shaped back: the first values by t, the rest as they are;
 * one value or a tuple as `single` says. */
static tj_tensor *unflatten(tj_tensor *r, const tree *t, int single) {
    if (!r || r->kind == RT_ERROR)
        return r;
    tj_tensor *one = r, *const *flat = r->kind == RT_TUPLE ? r->items : &one;
    int n = r->kind == RT_TUPLE ? r->n_items : 1;
    if (n < t->n_flat)
        return r;
    int m = t->n_top + n - t->n_flat;
    tj_tensor **top = calloc((size_t)m + 1, sizeof *top);
    if (!top)
        return rt_scoped(rt_errorf(TJ_ERR_OOM, "out of memory"));
    tree_nest(t, flat, top);
    for (int k = t->n_flat; k < n; k++)
        top[t->n_top + k - t->n_flat] = flat[k];
    tj_tensor *res = single && m == 1 ? (rt_retain(top[0]), rt_scoped(top[0])) : tj_tuple(m, top);
    free(top);
    return res;
}

/* A list's tree and flat items (malloc'd into *flat); an error tensor or NULL. */
static tj_tensor *prepare(const char *op, int n, tj_tensor *const *v, tree *t, tj_tensor ***flat) {
    *flat = NULL;
    if (n < 0 || (n > 0 && !v))
        return NULL; /* the flat version reports it */
    int room = 0;
    for (int k = 0; k < n; k++)
        room += v[k] && v[k]->kind == RT_TUPLE ? v[k]->n_items : 1;
    *flat = calloc((size_t)room + 1, sizeof **flat);
    if (!*flat)
        return rt_scoped(rt_errorf(TJ_ERR_OOM, "%s: out of memory", op));
    return tree_of(op, n, v, t, *flat, room);
}

static tj_tensor *cond_unscoped(tj_tensor *pred, tj_body then_fn, tj_body else_fn, int n,
                                tj_tensor *const *args, void *user) {
    tree in;
    tj_tensor **flat;
    tj_tensor *err = prepare("cond", n, args, &in, &flat);
    if (err || !flat || !in.has_tuple || !then_fn || !else_fn) {
        free(flat);
        return err ? err : api_cond_flat(pred, then_fn, else_fn, n, args, user);
    }
    adapter a[2] = {{.fn = then_fn, .user = user, .op = "cond", .in = in},
                    {.fn = else_fn, .user = user, .op = "cond", .in = in}};
    tj_tensor *r = api_cond_flat(pred, adapted0, adapted_else, in.n_flat, flat, a);
    free(flat);
    /* the branch that ran (eager) or the then branch (traced) says how results are shaped */
    adapter *ran = a[1].got.n_top || a[1].got.n_flat ? &a[1] : &a[0];
    return unflatten(r, &ran->got, ran->single);
}

static tj_tensor *while_loop_max_unscoped(tj_body cond_fn, tj_body body_fn, int n,
                                          tj_tensor *const *init, int64_t maximum_iterations,
                                          void *user) {
    tree in;
    tj_tensor **flat;
    tj_tensor *err = prepare("while_loop", n, init, &in, &flat);
    if (err || !flat || !in.has_tuple || !cond_fn || !body_fn) {
        free(flat);
        return err ? err : api_while_flat(cond_fn, body_fn, n, init, maximum_iterations, user);
    }
    adapter a[2] = {
        {.fn = cond_fn, .user = user, .op = "while_loop", .in = in},
        {.fn = body_fn, .user = user, .op = "while_loop", .in = in, .expect = in, .check = 1}};
    tj_tensor *r = api_while_flat(adapted0, adapted1, in.n_flat, flat, maximum_iterations, a);
    free(flat);
    return unflatten(r, &in, 1);
}

tj_tensor *tj_while_loop(tj_body cond_fn, tj_body body_fn, int n, tj_tensor *const *init,
                         void *user) {
    return tj_while_loop_max(cond_fn, body_fn, n, init, 0, user);
}

static tj_tensor *for_range_unscoped(tj_tensor *start, tj_tensor *limit, tj_tensor *delta,
                                     tj_body body_fn, int n, tj_tensor *const *init, void *user) {
    tree in;
    tj_tensor **flat;
    tj_tensor *err = prepare("for_range", n, init, &in, &flat);
    if (err || !flat || !in.has_tuple || !body_fn) {
        free(flat);
        return err ? err : api_for_flat(start, limit, delta, body_fn, n, init, user);
    }
    /* the body takes the index first: its tree is the loop variables' with one tensor in front */
    adapter a = {.fn = body_fn, .user = user, .op = "for_range", .expect = in, .check = 1};
    a.in.n_top = in.n_top + 1;
    a.in.n_flat = in.n_flat + 1;
    a.in.has_tuple = 1;
    for (int k = 0; k < in.n_top && k + 1 < TREE_MAX; k++) {
        a.in.kind[k + 1] = in.kind[k];
        a.in.width[k + 1] = in.width[k];
    }
    a.in.width[0] = 1;
    tj_tensor *r = api_for_flat(start, limit, delta, adapted0, in.n_flat, flat, &a);
    free(flat);
    return unflatten(r, &in, 1);
}

static tj_tensor *scan_unscoped(tj_body body_fn, int n_carry, tj_tensor *const *carry, int n_xs,
                                tj_tensor *const *xs, void *user) {
    tree in;
    tj_tensor **flat;
    tj_tensor *err = prepare("scan", n_carry, carry, &in, &flat);
    if (err || !flat || !in.has_tuple || !body_fn || n_xs < 0 || (n_xs && !xs) ||
        in.n_top + n_xs >= TREE_MAX) {
        free(flat);
        return err ? err : api_scan_flat(body_fn, n_carry, carry, n_xs, xs, user);
    }
    tj_tensor **all = realloc(flat, (size_t)(in.n_flat + n_xs + 1) * sizeof *all);
    if (!all) {
        free(flat);
        return rt_scoped(rt_errorf(TJ_ERR_OOM, "scan: out of memory"));
    }
    for (int k = 0; k < n_xs; k++)
        all[in.n_flat + k] = xs[k];
    /* the body takes the carried values shaped by their tree, then one row of each sequence */
    adapter a = {.fn = body_fn, .user = user, .op = "scan", .in = in, .expect = in, .check = 1};
    a.in.n_top += n_xs;
    a.in.n_flat += n_xs;
    for (int k = 0; k < n_xs; k++)
        a.in.width[in.n_top + k] = 1;
    tj_tensor *r = api_scan_flat(adapted0, in.n_flat, all, n_xs, all + in.n_flat, &a);
    free(all);
    return unflatten(r, &in, 0);
}

/* ---- the public entry points ------------------------------------------------------------------
 * Each runs in a scope of its own, so what it makes on the way (a bound cast to int64, a
 * predicate compared with zero, flattened tuples) is released even when the caller opened none;
 * its result is kept into the caller's scope, or handed to the caller. */
tj_tensor *tj_cond(tj_tensor *pred, tj_body then_fn, tj_body else_fn, int n, tj_tensor *const *args,
                   void *user) {
    tj_scope_begin();
    tj_tensor *r = tj_keep(cond_unscoped(pred, then_fn, else_fn, n, args, user));
    tj_scope_end();
    return r;
}

tj_tensor *tj_while_loop_max(tj_body cond_fn, tj_body body_fn, int n, tj_tensor *const *init,
                             int64_t maximum_iterations, void *user) {
    tj_scope_begin();
    tj_tensor *r =
        tj_keep(while_loop_max_unscoped(cond_fn, body_fn, n, init, maximum_iterations, user));
    tj_scope_end();
    return r;
}

tj_tensor *tj_for_range(tj_tensor *start, tj_tensor *limit, tj_tensor *delta, tj_body body_fn,
                        int n, tj_tensor *const *init, void *user) {
    tj_scope_begin();
    tj_tensor *r = tj_keep(for_range_unscoped(start, limit, delta, body_fn, n, init, user));
    tj_scope_end();
    return r;
}

tj_tensor *tj_scan(tj_body body_fn, int n_carry, tj_tensor *const *carry, int n_xs,
                   tj_tensor *const *xs, void *user) {
    tj_scope_begin();
    tj_tensor *r = tj_keep(scan_unscoped(body_fn, n_carry, carry, n_xs, xs, user));
    tj_scope_end();
    return r;
}
