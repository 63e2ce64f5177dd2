/* S21 — gradients through functions. The seed: w = Variable(3x2), b = Variable(2),
 * x = [[1, 2, 3]], `with GradientTape() as tape: result = dense_layer(x, w, b)`, then
 * tape.gradient(result, [w, b]) = [[1,1],[2,2],[3,3]] and [1,1]. The target [1,2] is not a
 * scalar: TensorFlow sums it implicitly; tracejit asks for the output gradient (ones) as the seed.
 * Shown three ways: an eager tape around a call of the compiled dense_layer (which then runs op by
 * op so the tape records it), a tape inside a compiled function (forward and backward in one
 * graph), and tj_grad. */
#include <tracejit.h>

#include "check.h"

static tj_tensor *dense_layer(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    return tj_add(tj_matmul(x, w), b);
}

static tj_variable *w, *b;
static tj_function *dense;

static void check_values(tj_tensor *t, int n, const double *want, const char *what) {
    CHECK_MSG(tj_status_of(t) == TJ_OK, "%s: %s", what, t ? tj_error_message(t) : "NULL");
    if (tj_status_of(t))
        return;
    CHECK_EQ_INT(tj_tensor_numel(t), n);
    for (int i = 0; i < n && i < tj_tensor_numel(t); i++)
        CHECK_MSG(tj_tensor_get_f64(t, i) == want[i], "%s[%d] = %g, want %g", what, i,
                  tj_tensor_get_f64(t, i), want[i]);
}

static const double want_dw[6] = {1, 1, 2, 2, 3, 3}, want_db[2] = {1, 1};

static tj_tensor *x_const(void) {
    int64_t d[2] = {1, 3};
    float v[3] = {1, 2, 3};
    return tj_tensor_from_data(TJ_F32, 2, d, v);
}

/* the seed's cell: an eager tape, the compiled function called inside it */
static void eager_tape(void) {
    tj_scope_begin();
    tj_tensor *x = x_const();
    tj_tape *tape = tj_tape_new(0);
    tj_tensor *args[3] = {x, tj_variable_read(w), tj_variable_read(b)};
    tj_tensor *result = tj_call(dense, 3, args);
    tj_tape_stop(tape);
    CHECK_EQ_INT(tj_tensor_rank(result), 2);
    tj_tensor *seed = tj_ones(TJ_F32, 2, tj_tensor_dims(result));
    tj_tensor *g[2] = {0};
    tj_variable *vars[2] = {w, b};
    CHECK_EQ_INT(tj_tape_gradient_vars(tape, result, seed, 2, vars, g), TJ_OK);
    check_values(g[0], 6, want_dw, "eager dw");
    check_values(g[1], 2, want_db, "eager db");
    CHECK_EQ_INT(tj_tensor_rank(g[0]), 2);
    CHECK_EQ_INT(tj_tensor_dims(g[0])[0], 3);
    /* without a seed a non-scalar target is an error naming the rule */
    tj_tensor *g2[2] = {0};
    CHECK(tj_tape_gradient_vars(tape, result, NULL, 2, vars, g2) == TJ_ERR_SHAPE);
    CHECK_HAS(tj_last_error(), "scalar");
    CHECK(g2[0] == NULL && g2[1] == NULL);
    /* the sum is a scalar: the same gradients */
    tj_tape *t2 = tj_tape_new(0);
    tj_tensor *args2[3] = {x, tj_variable_read(w), tj_variable_read(b)};
    tj_tensor *loss = tj_sum(tj_call(dense, 3, args2), 0, NULL, 0);
    CHECK_EQ_INT(tj_tape_gradient_vars(t2, loss, NULL, 2, vars, g2), TJ_OK);
    check_values(g2[0], 6, want_dw, "eager sum dw");
    check_values(g2[1], 2, want_db, "eager sum db");
    tj_tape_free(t2);
    tj_tape_free(tape);
    tj_scope_end();
}

/* the tape inside a compiled function: returns (result, dw, db) */
static tj_tensor *grad_step(tj_tensor *x) {
    tj_tape *tape = tj_tape_new(0);
    tj_tensor *args[3] = {x, tj_variable_read(w), tj_variable_read(b)};
    tj_tensor *result = tj_call(dense, 3, args);
    tj_tensor *loss = tj_sum(result, 0, NULL, 0);
    tj_tensor *g[2];
    tj_variable *vars[2] = {w, b};
    tj_status st = tj_tape_gradient_vars(tape, loss, NULL, 2, vars, g);
    tj_tape_free(tape);
    if (st)
        return tj_error_new(st, "%s", tj_last_error());
    tj_tensor *items[3] = {result, g[0], g[1]};
    return tj_tuple(3, items);
}

static void compiled_tape(void) {
    tj_function *f = tj_function_new("grad_step", (void *)grad_step, 1, NULL);
    tj_scope_begin();
    tj_tensor *x = x_const();
    for (int call = 0; call < 2; call++) {
        tj_tensor *r = tj_call(f, 1, &x);
        CHECK_MSG(tj_tuple_size(r) == 3, "%s", tj_error_message(r));
        if (tj_tuple_size(r) == 3) {
            check_values(tj_tuple_get(r, 1), 6, want_dw, "compiled dw");
            check_values(tj_tuple_get(r, 2), 2, want_db, "compiled db");
        }
    }
    CHECK_EQ_INT(tj_function_trace_count(f), tj_get_eager() ? 0 : 1);
    /* the backward pass is in the same graph: it reads x (dw = x^T g) */
    tj_spec s = {TJ_F32, 2, {1, 3}, NULL};
    tj_concrete *c = tj_function_get_concrete(f, 1, &s);
    CHECK(c != NULL);
    char *txt = c ? tj_concrete_graph_text(c) : NULL;
    CHECK_HAS(txt, "matmul");
    CHECK_HAS(txt, "transpose");
    free(txt);
    tj_scope_end();
    tj_function_free(f);
}

/* tj_grad: d/dw sum(dense(x, w, b)) as a function of (x, w, b) */
static tj_tensor *loss_fn(tj_tensor *x, tj_tensor *wv, tj_tensor *bv) {
    return tj_sum(dense_layer(x, wv, bv), 0, NULL, 0);
}

static void grad_transform(void) {
    tj_function *loss = tj_function_new("loss", (void *)loss_fn, 3, NULL);
    int argnums[2] = {1, 2};
    tj_function *gf = tj_grad(loss, 2, argnums, NULL);
    tj_function *vg = tj_value_and_grad(loss, 2, argnums, NULL);
    CHECK(gf != NULL && vg != NULL);
    tj_scope_begin();
    tj_tensor *args[3] = {x_const(), tj_variable_read(w), tj_variable_read(b)};
    for (int eager = 0; eager < 2; eager++) {
        tj_tensor *r = eager ? tj_call_eager(gf, 3, args) : tj_call(gf, 3, args);
        CHECK_MSG(tj_tuple_size(r) == 2, "%s", tj_error_message(r));
        if (tj_tuple_size(r) == 2) {
            check_values(tj_tuple_get(r, 0), 6, want_dw, "tj_grad dw");
            check_values(tj_tuple_get(r, 1), 2, want_db, "tj_grad db");
        }
        tj_tensor *v = eager ? tj_call_eager(vg, 3, args) : tj_call(vg, 3, args);
        CHECK_MSG(tj_tuple_size(v) == 3, "%s", tj_error_message(v));
        if (tj_tuple_size(v) == 3) {
            tj_tensor *direct = loss_fn(args[0], args[1], args[2]);
            CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(v, 0), 0), tj_tensor_get_f64(direct, 0),
                       1e-5);
            check_values(tj_tuple_get(v, 1), 6, want_dw, "value_and_grad dw");
            check_values(tj_tuple_get(v, 2), 2, want_db, "value_and_grad db");
        }
    }
    tj_scope_end();
    tj_function_free(vg);
    tj_function_free(gf);
    tj_function_free(loss);
}

int main(void) {
    int64_t dw[2] = {3, 2}, db[1] = {2};
    tj_tensor *w0 = tj_random_normal(TJ_F32, 2, dw, 0, 1, 1);
    tj_tensor *b0 = tj_random_normal(TJ_F32, 1, db, 0, 1, 2);
    w = tj_variable_new(w0, "w");
    b = tj_variable_new(b0, "b");
    tj_release(w0);
    tj_release(b0);
    dense = tj_function_new("dense_layer", (void *)dense_layer, 3, NULL);
    eager_tape();
    compiled_tape();
    grad_transform();
    tj_function_free(dense);
    tj_variable_free(w);
    tj_variable_free(b);
    return check_done();
}
