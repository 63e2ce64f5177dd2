/* switch.c — tj_switch (tf.switch_case, lax.switch): run branch `index` of n_branches. Eagerly the
 * chosen branch is called. While tracing, the branches become a balanced tree of conds on the
 * index (index <= mid: the lower half, else the upper half), so a branch costs log2(n) compares
 * and every region, pass and backend that handles a cond handles a switch (a constant index folds
 * the tree away: passes/inline_cond.c). The leftmost branch is traced first; every other branch
 * must return what it returned (the error names both branches, the result and both types). An
 * index out of range is clamped, as lax.switch does: below 0 runs branch 0, above n-1 the last. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

#define SW_MAX 64 /* results compared between branches (more: only the count is compared) */

typedef struct sw_value {
    int width; /* 0: a tensor; k > 0: a tuple of k tensors (its first item's type is kept) */
    tj_dtype dtype;
    int rank;
    int64_t dims[TJ_MAX_RANK];
} sw_value;

typedef struct sw {
    const tj_body *fns;
    int n_branches;
    void *user;
    tj_tensor *index; /* int64 scalar of the enclosing trace */
    int have_first;   /* the leftmost branch's results are recorded */
    int n_first, single_first;
    sw_value first[SW_MAX];
} sw;

/* a range of branches [lo, hi]: a leaf when lo == hi */
typedef struct sw_range {
    sw *s;
    int lo, hi;
} sw_range;

static tj_tensor *fail(tj_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tj_tensor *fail(tj_status code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rt_trace *tr = api_trace_current();
    tj_tensor *e = rt_scoped(rt_errorf(code, "%s", msg));
    if (tr)
        api_trace_fail(tr, code);
    return e;
}

static void describe(const tj_tensor *t, sw_value *v) {
    memset(v, 0, sizeof *v);
    if (t->kind == RT_TUPLE) {
        v->width = t->n_items;
        t = t->n_items ? t->items[0] : NULL;
        if (!t)
            return;
    }
    v->dtype = t->dtype;
    v->rank = t->rank;
    memcpy(v->dims, t->dims, (size_t)t->rank * sizeof *v->dims);
}

static const char *type_str(const sw_value *v, char *buf, size_t n) {
    char d[128];
    if (v->width)
        snprintf(buf, n, "a tuple of %d", v->width);
    else
        snprintf(buf, n, "%s%s", ir_dtype_name(v->dtype),
                 ir_fmt_dims(d, sizeof d, v->rank, v->dims));
    return buf;
}

/* Checks branch k's result r against the leftmost branch's (recording it when k is that one). */
static tj_tensor *check_result(sw *s, int k, tj_tensor *r) {
    bool many = r && r->kind == RT_TUPLE && !r->tensor_array;
    int m = !r ? 0 : many ? r->n_items : 1;
    if (!s->have_first) {
        s->have_first = 1;
        s->n_first = m;
        s->single_first = !many;
        for (int j = 0; j < m && j < SW_MAX; j++)
            describe(many ? r->items[j] : r, &s->first[j]);
        return r;
    }
    if (m != s->n_first || (!many) != s->single_first)
        return fail(TJ_ERR_SHAPE, "switch: branch %d returns %d value%s%s, branch 0 returned %d%s",
                    k, m, m == 1 ? "" : "s", many ? " (a tuple)" : "", s->n_first,
                    s->single_first ? "" : " (a tuple)");
    for (int j = 0; j < m && j < SW_MAX; j++) {
        sw_value v;
        describe(many ? r->items[j] : r, &v);
        const sw_value *w = &s->first[j];
        if (v.width != w->width || v.dtype != w->dtype || v.rank != w->rank ||
            memcmp(v.dims, w->dims, (size_t)v.rank * sizeof *v.dims) != 0) {
            char a[160], b[160];
            return fail(v.width == w->width && v.dtype != w->dtype ? TJ_ERR_DTYPE : TJ_ERR_SHAPE,
                        "switch: branch %d result %d is %s, branch 0 returned %s", k, j,
                        type_str(&v, a, sizeof a), type_str(w, b, sizeof b));
        }
    }
    return r;
}

static tj_tensor *run_range(int n, tj_tensor *const *args, void *ctx);
/* tj_cond gives both branches one user pointer: two ranges, each half reads its own */
static tj_tensor *run_lower(int n, tj_tensor *const *args, void *ctx) {
    return run_range(n, args, &((sw_range *)ctx)[0]);
}
static tj_tensor *run_upper(int n, tj_tensor *const *args, void *ctx) {
    return run_range(n, args, &((sw_range *)ctx)[1]);
}

static tj_tensor *run_range(int n, tj_tensor *const *args, void *ctx) {
    sw_range *rg = ctx;
    sw *s = rg->s;
    if (rg->lo == rg->hi) {
        rt_user_mark um = rt_user_enter();
        tj_tensor *r = rt_user_leave(s->fns[rg->lo](n, args, s->user), um);
        if (r && r->kind == RT_ERROR)
            return r;
        return check_result(s, rg->lo, r ? r : tj_tuple(0, NULL));
    }
    int mid = rg->lo + (rg->hi - rg->lo) / 2;
    sw_range halves[2] = {{s, rg->lo, mid}, {s, mid + 1, rg->hi}};
    tj_tensor *pred = tj_less_equal(s->index, tj_scalar_i64(mid));
    return tj_cond(pred, run_lower, run_upper, n, args, halves);
}

static tj_tensor *switch_unscoped(tj_tensor *index, int n_branches, const tj_body *fns, int n,
                                  tj_tensor *const *args, void *user) {
    char d[128];
    if (!index)
        return fail(TJ_ERR_INVALID, "switch: the branch index is NULL");
    if (rt_is_freed(index, "switch"))
        return rt_scoped(rt_error_from_status(TJ_ERR_STATE));
    if (index->kind == RT_ERROR)
        return index;
    if (index->kind == RT_TUPLE || index->rank != 0 || !ir_dtype_is_int(index->dtype))
        return fail(
            index->kind != RT_TUPLE && !ir_dtype_is_int(index->dtype) ? TJ_ERR_DTYPE : TJ_ERR_SHAPE,
            "switch: the branch index must be an integer scalar, got %s%s",
            index->kind == RT_TUPLE ? "a tuple" : ir_dtype_name(index->dtype),
            index->kind == RT_TUPLE ? "" : ir_fmt_dims(d, sizeof d, index->rank, index->dims));
    if (n_branches < 1 || !fns)
        return fail(TJ_ERR_INVALID, "switch: needs a list of at least one branch, got %d%s",
                    n_branches, fns ? "" : " (NULL list)");
    for (int k = 0; k < n_branches; k++)
        if (!fns[k])
            return fail(TJ_ERR_INVALID, "switch: branch %d of %d is NULL", k, n_branches);
    if (n < 0 || (n > 0 && !args))
        return fail(TJ_ERR_INVALID, "switch: bad argument list (n=%d)", n);
    if (!api_trace_current()) { /* eager: the chosen branch runs, nothing else */
        double v = tj_tensor_get_f64(index, 0);
        int k = v <= 0 ? 0 : v >= n_branches - 1 ? n_branches - 1 : (int)v;
        rt_user_mark um = rt_user_enter();
        tj_tensor *r = rt_user_leave(fns[k](n, args, user), um);
        return r ? r : tj_tuple(0, NULL);
    }
    sw *s = calloc(1, sizeof *s);
    if (!s)
        return fail(TJ_ERR_OOM, "switch: out of memory");
    s->fns = fns;
    s->n_branches = n_branches;
    s->user = user;
    s->index = index->dtype == TJ_I64 ? index : tj_cast(index, TJ_I64);
    sw_range all = {s, 0, n_branches - 1};
    tj_tensor *r = run_range(n, args, &all);
    free(s);
    return r;
}

/* In a scope of its own (its temporaries released without the caller's), the result kept. */
tj_tensor *tj_switch(tj_tensor *index, int n_branches, const tj_body *fns, int n,
                     tj_tensor *const *args, void *user) {
    tj_scope_begin();
    tj_tensor *r = tj_keep(switch_unscoped(index, n_branches, fns, n, args, user));
    tj_scope_end();
    return r;
}
