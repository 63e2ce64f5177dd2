/* What a traced function, a control-flow body or a switch branch returns is "a new reference, or
 * one owned by the trace's scope" (tracejit.h): an argument returned as it is, a tensor its scope
 * owns, or a reference it retained (tj_retain of a borrowed tuple item or of an argument). Each
 * must be released exactly once, compiled and eager: the input here wraps caller memory
 * (tj_tensor_borrow), so its release callback runs once all references are gone, and a leaked
 * reference shows as a callback that never ran (issue 23: 79 MB over 2,000 eager calls). */
#include <tracejit.h>

#include "check.h"

static int released;
static void on_release(void *user) {
    (void)user;
    released++;
}

static tj_tensor *ret_arg(tj_tensor *x) {
    return x;
}
static tj_tensor *ret_retained_arg(tj_tensor *x) {
    return tj_retain(x);
}
static tj_tensor *ret_retained_item(tj_tensor *x) {
    tj_tensor *t = tj_tuple(2, (tj_tensor *[]){x, tj_neg(x)});
    return tj_retain(tj_tuple_get(t, 0)); /* tuple items are borrowed */
}
static tj_tensor *ret_retain_released(tj_tensor *x) {
    tj_release(tj_retain(x)); /* a balanced pair: x is returned borrowed */
    return x;
}
static tj_tensor *ret_scoped(tj_tensor *x) {
    return tj_add(x, x);
}
static tj_tensor *body_retained(int n, tj_tensor *const *a, void *u) {
    (void)u;
    return tj_retain(a[n - 1]); /* for_range: (i, v); while/cond/switch: (v) */
}
static tj_tensor *cond_pos(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_greater(tj_sum(a[0], 0, NULL, 0), tj_scalar_f32(0)); /* always: sum > 0 */
}
static tj_tensor *ret_loop(tj_tensor *x) {
    return tj_for_range(tj_scalar_i64(0), tj_scalar_i64(3), tj_scalar_i64(1), body_retained, 1, &x,
                        NULL);
}
static tj_tensor *ret_while(tj_tensor *x) {
    return tj_while_loop_max(cond_pos, body_retained, 1, &x, 3, NULL);
}
static tj_tensor *ret_cond(tj_tensor *x) {
    return tj_cond(tj_greater(tj_sum(x, 0, NULL, 0), tj_scalar_f32(0)), body_retained,
                   body_retained, 1, &x, NULL);
}
static tj_tensor *ret_switch(tj_tensor *x) {
    tj_body fns[3] = {body_retained, body_retained, body_retained};
    return tj_switch(tj_scalar_i32(1), 3, fns, 1, &x, NULL);
}
/* a function calling another (inlined when traced) and retaining what it returns */
static tj_function *inner;
static tj_tensor *ret_nested(tj_tensor *x) {
    return tj_retain(tj_call(inner, 1, &x));
}

typedef struct variant {
    const char *name;
    void *fn;
    double scale; /* result = scale * x */
} variant;

/* 40 calls in one mode (0 tj_call, 1 tj_call_eager, 2 tj_set_eager(1) + tj_call), values
 * checked; then the input's release must run exactly once. */
static void run(const variant *v, int mode) {
    released = 0;
    static float data[64] __attribute__((aligned(64)));
    for (int i = 0; i < 64; i++)
        data[i] = (float)(i % 7) + 1;
    int64_t d[1] = {64};
    tj_tensor *x = tj_tensor_borrow(TJ_F32, 1, d, data, on_release, NULL);
    tj_function *f = tj_function_new(v->name, v->fn, 1, NULL);
    inner = tj_function_new("inner", (void *)ret_retained_item, 1, NULL);
    tj_set_eager(mode == 2);
    int bad = 0;
    for (int k = 0; k < 40; k++) {
        tj_tensor *y = mode == 1 ? tj_call_eager(f, 1, &x) : tj_call(f, 1, &x);
        CHECK_MSG(tj_status_of(y) == TJ_OK, "%s mode %d: %s", v->name, mode, tj_error_message(y));
        for (int i = 0; i < 64 && !tj_status_of(y); i += 9)
            bad += tj_tensor_get_f64(y, i) != v->scale * data[i];
        tj_release(y);
    }
    tj_set_eager(0);
    CHECK_MSG(bad == 0, "%s mode %d: %d wrong values", v->name, mode, bad);
    tj_function_free(f);
    tj_function_free(inner);
    tj_release(x);
    CHECK_MSG(released == 1, "%s mode %d: the input was released %d times (a leaked reference)",
              v->name, mode, released);
}

int main(void) {
    static const variant vs[] = {
        {"ret_arg", (void *)ret_arg, 1},
        {"ret_retained_arg", (void *)ret_retained_arg, 1},
        {"ret_retained_item", (void *)ret_retained_item, 1},
        {"ret_retain_released", (void *)ret_retain_released, 1},
        {"ret_scoped", (void *)ret_scoped, 2},
        {"ret_loop", (void *)ret_loop, 1},
        {"ret_while", (void *)ret_while, 1},
        {"ret_cond", (void *)ret_cond, 1},
        {"ret_switch", (void *)ret_switch, 1},
        {"ret_nested", (void *)ret_nested, 1},
    };
    for (size_t k = 0; k < sizeof vs / sizeof vs[0]; k++)
        for (int mode = 0; mode < 3; mode++)
            run(&vs[k], mode);
    return check_done();
}
