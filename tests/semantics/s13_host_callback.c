/* s13_host_callback.c — SEMANTICS S13: a host-callback op (tf.py_function: a C function pointer
 * and user data, called through libffi with the op's concrete input tensors) runs on every call:
 * three calls append three values to a host list. */
#include <tracejit.h>

#include "check.h"

typedef struct host_list {
    double items[32];
    int n;
} host_list;

static void append(void *user, tj_tensor *x) {
    host_list *l = user;
    if (l->n < 32 && !tj_tensor_is_symbolic(x))
        l->items[l->n++] = tj_tensor_get_f64(x, 0);
}

static host_list list1;
static int n_traces;
static tj_tensor *with_callback(tj_tensor *x) {
    n_traces++;
    tj_tensor *y = tj_mul(x, tj_scalar_i32(10));
    tj_host_callback((void *)append, &list1, 1, &y);
    return NULL;
}

/* three tensors of different dtypes and shapes */
typedef struct seen3 {
    int calls;
    double sum_a, b0, c_last;
    int64_t b_numel;
    tj_dtype dt[3];
} seen3;
static void three(void *user, tj_tensor *a, tj_tensor *b, tj_tensor *c) {
    seen3 *s = user;
    s->calls++;
    s->sum_a = 0;
    for (int64_t i = 0; i < tj_tensor_numel(a); i++)
        s->sum_a += tj_tensor_get_f64(a, i);
    s->b0 = tj_tensor_get_f64(b, 0);
    s->b_numel = tj_tensor_numel(b);
    s->c_last = tj_tensor_get_f64(c, tj_tensor_numel(c) - 1);
    s->dt[0] = tj_tensor_dtype(a);
    s->dt[1] = tj_tensor_dtype(b);
    s->dt[2] = tj_tensor_dtype(c);
}

static seen3 seen;
static tj_tensor *with_three(tj_tensor *a, tj_tensor *b, tj_tensor *c) {
    tj_tensor *xs[3] = {tj_add(a, a), b, tj_cast(c, TJ_F64)};
    tj_host_callback((void *)three, &seen, 3, xs);
    return tj_sum(a, 0, NULL, 0);
}

/* a callback that calls another compiled function (re-entrancy) */
static tj_function *square;
static host_list squares;
static tj_tensor *sq(tj_tensor *x) {
    return tj_mul(x, x);
}
static void call_square(void *user, tj_tensor *x) {
    host_list *l = user;
    tj_tensor *r = tj_call(square, 1, &x); /* belongs to the caller's open scope */
    if (l->n < 32)
        l->items[l->n++] = tj_tensor_get_f64(r, 0);
}
static tj_tensor *reentrant(tj_tensor *x) {
    tj_host_callback((void *)call_square, &squares, 1, &x);
    return tj_add(x, x);
}

int main(void) {
    tj_scope_begin();
    tj_function *f = tj_function_new("f", (void *)with_callback, 1, NULL);
    for (int i = 1; i <= 3; i++) {
        tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i32(i)});
        CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    }
    CHECK_EQ_INT(n_traces, 1);
    CHECK_EQ_INT(list1.n, 3);
    CHECK_NEAR(list1.items[0], 10, 0);
    CHECK_NEAR(list1.items[1], 20, 0);
    CHECK_NEAR(list1.items[2], 30, 0);
    tj_function_free(f);

    /* eagerly the callback runs at once */
    tj_tensor *e = tj_scalar_f64(-1.5);
    CHECK_EQ_INT(tj_host_callback((void *)append, &list1, 1, &e), TJ_OK);
    CHECK_EQ_INT(list1.n, 4);
    CHECK_NEAR(list1.items[3], -1.5, 0);

    /* three tensor arguments */
    tj_function *g = tj_function_new("with_three", (void *)with_three, 3, NULL);
    int64_t d4[1] = {4}, d23[2] = {2, 3};
    for (int k = 0; k < 3; k++) {
        tj_tensor *a = tj_tensor_from_data(TJ_F32, 1, d4, (float[]){1, 2, 3, (float)k});
        tj_tensor *b = tj_tensor_from_data(TJ_I64, 2, d23, (int64_t[]){7 + k, 0, 0, 0, 0, 0});
        tj_tensor *c = tj_tensor_from_data(TJ_I32, 1, d4, (int32_t[]){0, 0, 0, 100 * k});
        tj_tensor *r = tj_call(g, 3, (tj_tensor *[]){a, b, c});
        CHECK_NEAR(tj_tensor_get_f64(r, 0), 6 + k, 0);
        CHECK_EQ_INT(seen.calls, k + 1);
        CHECK_NEAR(seen.sum_a, 2.0 * (6 + k), 0);
        CHECK_NEAR(seen.b0, 7 + k, 0);
        CHECK_EQ_INT(seen.b_numel, 6);
        CHECK_NEAR(seen.c_last, 100 * k, 0);
    }
    CHECK_EQ_INT(seen.dt[0], TJ_F32);
    CHECK_EQ_INT(seen.dt[1], TJ_I64);
    CHECK_EQ_INT(seen.dt[2], TJ_F64);
    CHECK_EQ_INT(tj_function_trace_count(g), 1);
    tj_function_free(g);

    /* re-entrant: the callback calls another tj_function while the outer one runs */
    square = tj_function_new("square", (void *)sq, 1, NULL);
    tj_function *outer = tj_function_new("reentrant", (void *)reentrant, 1, NULL);
    for (int i = 1; i <= 3; i++) {
        tj_tensor *r = tj_call(outer, 1, (tj_tensor *[]){tj_scalar_f32((float)i)});
        CHECK_NEAR(tj_tensor_get_f64(r, 0), 2.0 * i, 0);
    }
    CHECK_EQ_INT(squares.n, 3);
    CHECK_NEAR(squares.items[2], 9.0, 0);
    CHECK_EQ_INT(tj_function_trace_count(outer), 1);
    CHECK_EQ_INT(tj_function_trace_count(square), 1);
    tj_function_free(outer);
    tj_function_free(square);

    /* a NULL callback is an error */
    CHECK(tj_host_callback(NULL, NULL, 1, &e) != TJ_OK);
    tj_scope_end();
    return check_done();
}
