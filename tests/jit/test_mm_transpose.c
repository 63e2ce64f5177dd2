/* Matrix products whose operands are 2-D transposes read them through OpenBLAS's trans flags
 * (jit/cpu/plan_decide.c, fold_transposes): the values must match eager execution whether the
 * transpose is also a result, also read by another op, or followed by an epilogue. */
#include <tracejit.h>

#include "check.h"

static tj_tensor *t(tj_tensor *x) {
    return tj_transpose(x, NULL);
}
static tj_tensor *ta(tj_tensor *a, tj_tensor *b) { /* a: [k, m] */
    return tj_matmul(t(a), b);
}
static tj_tensor *tb(tj_tensor *a, tj_tensor *b) { /* b: [n, k] */
    return tj_relu(tj_matmul(a, t(b)));            /* with an epilogue */
}
static tj_tensor *both(tj_tensor *a, tj_tensor *b) {
    return tj_matmul(t(a), t(b));
}
static tj_tensor *shared(tj_tensor *a, tj_tensor *b) { /* the transpose is read and returned */
    tj_tensor *at = t(a);
    tj_tensor *r[3] = {tj_matmul(at, b), tj_exp(at), at};
    return tj_tuple(3, r);
}

static tj_tensor *rnd(int64_t r, int64_t c, uint64_t seed) {
    int64_t d[2] = {r, c};
    return tj_random_uniform(TJ_F32, 2, d, -1, 1, seed);
}

static void compare(tj_tensor *c, tj_tensor *e, const char *what) {
    CHECK_MSG(tj_status_of(c) == TJ_OK, "%s: %s", what, tj_error_message(c));
    CHECK_EQ_INT(tj_tensor_numel(c), tj_tensor_numel(e));
    double worst = 0;
    for (int64_t i = 0; i < tj_tensor_numel(e) && i < tj_tensor_numel(c); i++)
        worst = fmax(worst, fabs(tj_tensor_get_f64(c, i) - tj_tensor_get_f64(e, i)));
    CHECK_MSG(worst <= 1e-4, "%s: compiled and eager differ by %g", what, worst);
}

int main(void) {
    tj_scope_begin();
    struct {
        const char *name;
        void *fn;
        int64_t ar, ac, br, bc;
    } cases[] = {{"ta", (void *)ta, 150, 97, 150, 130},
                 {"tb", (void *)tb, 97, 150, 130, 150},
                 {"both", (void *)both, 150, 97, 130, 150},
                 {"shared", (void *)shared, 150, 97, 150, 130}};
    for (int i = 0; i < 4; i++) {
        tj_tensor *a = rnd(cases[i].ar, cases[i].ac, 1 + i),
                  *b = rnd(cases[i].br, cases[i].bc, 9 + i);
        tj_tensor *args[2] = {a, b};
        tj_function *f = tj_function_new(cases[i].name, cases[i].fn, 2, NULL);
        tj_tensor *c = tj_call(f, 2, args), *e = tj_call_eager(f, 2, args);
        if (tj_tuple_size(e) > 0)
            for (int k = 0; k < tj_tuple_size(e); k++)
                compare(tj_tuple_get(c, k), tj_tuple_get(e, k), cases[i].name);
        else
            compare(c, e, cases[i].name);
        tj_function_free(f);
    }
    tj_scope_end();
    return check_done();
}
