/* Check numerics inside control flow (issue 23, item 1): a log of a negative value in a while,
 * for_range or scan body, or in a cond branch, on scalars (bodies the CPU backend lowers whole
 * to native code) and on f64[64] (regions on the raw loops), is an error naming the loop's
 * iteration and the op, compiled as on the interpreter and eagerly; with the check off, the
 * compiled code still runs natively and returns NaN. */
#include <math.h>
#include <tracejit.h>

#include "check.h"

static tj_tensor *wcond(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_less(a[0], tj_scalar_i64(3));
}
/* log(x - 5 + i): the first iteration's log sees x - 5 = -3, the NaN is made there */
static tj_tensor *wbody(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_tensor *v = tj_log(tj_sub(a[1], tj_scalar_f64(5)));
    return tj_tuple(2, (tj_tensor *[]){tj_add(a[0], tj_scalar_i64(1)), v});
}
static tj_tensor *fbody(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_log(tj_sub(a[1], tj_scalar_f64(5)));
}
static tj_tensor *sbody(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_tuple(2, (tj_tensor *[]){tj_log(tj_sub(a[0], a[1])), a[1]});
}
static tj_tensor *then_b(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_log(tj_neg(a[0]));
}
static tj_tensor *else_b(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_exp(a[0]);
}
static tj_tensor *f_while(tj_tensor *x) {
    tj_tensor *r = tj_while_loop(wcond, wbody, 2, (tj_tensor *[]){tj_scalar_i64(0), x}, NULL);
    return tj_tuple_get(r, 1);
}
static tj_tensor *f_for(tj_tensor *x) {
    return tj_for_range(tj_scalar_i64(0), tj_scalar_i64(3), tj_scalar_i64(1), fbody, 1, &x, NULL);
}
static tj_tensor *f_scan(tj_tensor *x) {
    tj_tensor *xs = tj_fill(1, (int64_t[]){3}, tj_scalar_f64(9));
    return tj_tuple_get(tj_scan(sbody, 1, &x, 1, &xs, NULL), 0);
}
static tj_tensor *f_cond(tj_tensor *x) {
    return tj_cond(tj_greater(tj_sum(x, 0, NULL, 0), tj_scalar_f64(0)), then_b, else_b, 1, &x,
                   NULL);
}

int main(void) {
    static const struct {
        const char *name;
        void *fn;
        const char *traced, *eager; /* what the message must hold */
    } cases[] = {
        {"while", (void *)f_while, "while: iteration 0: check_numerics: op %",
         "while_loop: iteration 0: check_numerics: op 'log'"},
        {"for", (void *)f_for, "for: iteration 0: check_numerics: op %",
         "for_range: iteration 0: check_numerics: op 'log'"},
        {"scan", (void *)f_scan, "scan: iteration 0: check_numerics: op %",
         "scan: iteration 0: check_numerics: op 'log'"},
        {"cond", (void *)f_cond, "check_numerics: op %", "check_numerics: op 'log'"},
    };
    for (int check = 0; check < 2; check++) {
        if (check)
            tj_enable_check_numerics();
        for (int big = 0; big < 2; big++)
            for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
                for (int eager = 0; eager < 2; eager++) {
                    tj_scope_begin(); /* x, the scalar it is filled from, r */
                    tj_tensor *x =
                        big ? tj_fill(1, (int64_t[]){64}, tj_scalar_f64(2)) : tj_scalar_f64(2);
                    tj_function *f = tj_function_new(cases[k].name, cases[k].fn, 1, NULL);
                    tj_tensor *r = eager ? tj_call_eager(f, 1, &x) : tj_call(f, 1, &x);
                    if (check) {
                        CHECK_MSG(tj_status_of(r) == TJ_ERR_RUNTIME, "%s%s%s: %s", cases[k].name,
                                  big ? " f64[64]" : "", eager ? " eager" : "",
                                  tj_status_name(tj_status_of(r)));
                        CHECK_HAS(tj_error_message(r), eager ? cases[k].eager : cases[k].traced);
                        CHECK_HAS(tj_error_message(r),
                                  big ? "'log' (f64[64]) produced NaN at element 0"
                                      : "'log' (f64[]) produced NaN at element 0");
                    } else {
                        CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
                        CHECK_MSG(!tj_status_of(r) && isnan(tj_tensor_get_f64(r, 0)), "%s%s%s: %g",
                                  cases[k].name, big ? " f64[64]" : "", eager ? " eager" : "",
                                  tj_tensor_get_f64(r, 0));
                    }
                    tj_function_free(f);
                    tj_scope_end();
                }
    }
    tj_disable_check_numerics();
    return check_done();
}
