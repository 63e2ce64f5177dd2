/* Two functions that compute the same results with their ops traced in another order have equal
 * structural hashes (ir_graph_hash ignores node numbering), but their compiled programs number
 * kernels and order buffers by node position. Compiled code is keyed by the layout hash, so the
 * second never runs the first's kernels: before, a while loop whose body was traced in the other
 * order ran the cond's or the other kernel in place of its own (a loop that never ran), and two
 * fused groups swapped. Checked in one process (the in-memory code table) and through a fresh
 * disk cache, against eager results. */
#include <math.h>
#include <stdlib.h>
#include <tracejit.h>

#include "check.h"

static tj_tensor *exp_twice(tj_tensor *x) {
    return tj_mul(tj_exp(x), tj_scalar_f32(2));
}
static tj_tensor *logp1(tj_tensor *y) {
    return tj_add(tj_log(y), tj_scalar_f32(1));
}
static tj_tensor *first_exp(tj_tensor *x, tj_tensor *y) {
    tj_tensor *a = exp_twice(x), *b = logp1(y);
    return tj_tuple(2, (tj_tensor *[]){a, b});
}
static tj_tensor *first_log(tj_tensor *x, tj_tensor *y) {
    tj_tensor *b = logp1(y), *a = exp_twice(x);
    return tj_tuple(2, (tj_tensor *[]){a, b});
}

static tj_tensor *wcond(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_less(a[0], tj_scalar_i64(3));
}
static tj_tensor *body_count_first(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_tensor *i = tj_add(a[0], tj_scalar_i64(1));
    tj_tensor *v = tj_sqrt(tj_add(a[1], tj_scalar_f64(5)));
    return tj_tuple(2, (tj_tensor *[]){i, v});
}
static tj_tensor *body_value_first(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_tensor *v = tj_sqrt(tj_add(a[1], tj_scalar_f64(5)));
    tj_tensor *i = tj_add(a[0], tj_scalar_i64(1));
    return tj_tuple(2, (tj_tensor *[]){i, v});
}
static tj_tensor *loop_a(tj_tensor *x, tj_tensor *unused) {
    (void)unused;
    return tj_while_loop(wcond, body_count_first, 2, (tj_tensor *[]){tj_scalar_i64(0), x}, NULL);
}
static tj_tensor *loop_b(tj_tensor *x, tj_tensor *unused) {
    (void)unused;
    return tj_while_loop(wcond, body_value_first, 2, (tj_tensor *[]){tj_scalar_i64(0), x}, NULL);
}

/* f's compiled results against its eager ones, item by item */
static void same_as_eager(void *fn, const char *name, tj_tensor *x, tj_tensor *y) {
    tj_function *f = tj_function_new(name, fn, 2, NULL);
    tj_tensor *args[2] = {x, y};
    tj_tensor *c = tj_call(f, 2, args), *e = tj_call_eager(f, 2, args);
    CHECK_MSG(tj_status_of(c) == TJ_OK, "%s: %s", name, tj_error_message(c));
    int bad = 0;
    for (int k = 0; k < 2 && !tj_status_of(c) && !tj_status_of(e); k++) {
        tj_tensor *a = tj_tuple_get(c, k), *b = tj_tuple_get(e, k);
        for (int64_t i = 0; i < tj_tensor_numel(b); i++)
            bad += fabs(tj_tensor_get_f64(a, i) - tj_tensor_get_f64(b, i)) >
                   1e-5 * (1 + fabs(tj_tensor_get_f64(b, i)));
    }
    CHECK_MSG(bad == 0, "%s: %d values differ from eager", name, bad);
    tj_release(c);
    tj_release(e);
    tj_function_free(f);
}

int main(void) {
    char dir[] = "/tmp/tj-layout-XXXXXX";
    if (!mkdtemp(dir))
        return 77;
    setenv("TJ_CACHE_DIR", dir, 1); /* read once: before the first call */
    int64_t d[1] = {64};
    tj_tensor *x = tj_random_uniform(TJ_F32, 1, d, 0.1, 2, 1);
    tj_tensor *y = tj_random_uniform(TJ_F32, 1, d, 0.1, 2, 2);
    tj_tensor *xd = tj_random_uniform(TJ_F64, 1, d, 0.1, 2, 3), *s = tj_scalar_f64(2);
    for (int pass = 0; pass < 2; pass++) { /* the second pass loads from the disk cache */
        same_as_eager((void *)first_exp, "first_exp", x, y);
        same_as_eager((void *)first_log, "first_log", x, y);
        same_as_eager((void *)loop_a, "loop_a", xd, xd);
        same_as_eager((void *)loop_b, "loop_b", xd, xd);
        same_as_eager((void *)loop_b, "loop_b_scalar", s, s);
        same_as_eager((void *)loop_a, "loop_a_scalar", s, s);
    }
    tj_release(x);
    tj_release(y);
    tj_release(xd);
    tj_release(s);
    check_rm_dir(dir);
    return check_done();
}
