/* test_misuse.c — the misuse catalogue (issue 9): more than a hundred wrong uses of the public
 * API, each expected to give one status code and a message that names the op or call, the
 * argument and the shapes or dtypes involved. Nothing may crash, abort or leak (the suite runs it
 * under ASan/UBSan/LSan too). Three kinds of cases:
 *   T(expr, code, fragment)  a tensor-returning call: an error tensor with that code and text
 *   S(expr, code, fragment)  a tj_status-returning call: that code, the text in tj_last_error()
 *   N(expr, fragment)        a pointer-returning call: NULL, the text in tj_last_error()
 * The catalogue counts its cases and fails if it shrinks below 100. */
#include <math.h>
#include <stdint.h>
#include <tracejit.h>

#include "check.h"

static int n_cases;

static void expect_tensor(const char *what, int line, tj_tensor *r, tj_status code,
                          const char *frag) {
    n_cases++;
    CHECK_MSG(tj_status_of(r) == code, "line %d: %s: %s (%s), expected %s", line, what,
              tj_status_name(tj_status_of(r)), tj_error_message(r), tj_status_name(code));
    CHECK_MSG(strstr(tj_error_message(r), frag), "line %d: %s: \"%s\" lacks \"%s\"", line, what,
              tj_error_message(r), frag);
}
static void expect_status(const char *what, int line, tj_status s, tj_status code,
                          const char *frag) {
    n_cases++;
    CHECK_MSG(s == code, "line %d: %s: %s (%s), expected %s", line, what, tj_status_name(s),
              tj_last_error(), tj_status_name(code));
    CHECK_MSG(strstr(tj_last_error(), frag), "line %d: %s: \"%s\" lacks \"%s\"", line, what,
              tj_last_error(), frag);
}
static void expect_null(const char *what, int line, const void *p, const char *frag) {
    n_cases++;
    CHECK_MSG(p == NULL, "line %d: %s: not NULL", line, what);
    CHECK_MSG(strstr(tj_last_error(), frag), "line %d: %s: \"%s\" lacks \"%s\"", line, what,
              tj_last_error(), frag);
}
#define T(expr, code, frag) expect_tensor(#expr, __LINE__, (expr), (code), (frag))
#define S(expr, code, frag) expect_status(#expr, __LINE__, (expr), (code), (frag))
#define N(expr, frag) expect_null(#expr, __LINE__, (expr), (frag))

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define F32V(n, ...) tj_tensor_from_data(TJ_F32, 1, D(n), (float[]){__VA_ARGS__})
#define I32V(n, ...) tj_tensor_from_data(TJ_I32, 1, D(n), (int32_t[]){__VA_ARGS__})

/* ---- functions used by the call cases -------------------------------------------------------- */
static tj_tensor *add2(tj_tensor *a, tj_tensor *b) {
    return tj_add(a, b);
}
static tj_tensor *ident(tj_tensor *x) {
    return x;
}
static tj_tensor *returns_null_item(tj_tensor *x) {
    tj_tensor *items[2] = {x, NULL};
    return tj_tuple(2, items);
}
static tj_tensor *returns_nested(tj_tensor *x) {
    tj_tensor *inner = tj_tuple(1, &x);
    return tj_tuple(1, &inner);
}
static tj_tensor *bad_matmul(tj_tensor *x) {
    return tj_matmul(x, x);
}
static tj_tensor *reads_value(tj_tensor *x) {
    return tj_tensor_get_f64(x, 0) > 0 ? x : tj_neg(x);
}
static tj_tensor *prints_tuple(tj_tensor *x) {
    tj_tensor *t = tj_tuple(1, &x);
    tj_print("x", 1, &t);
    return x;
}
static tj_tensor *assigns_wrong(tj_tensor *x) {
    static tj_variable *v;
    if (!v)
        v = tj_variable_new(tj_scalar_f32(0), "acc");
    return tj_assign(v, tj_cast(x, TJ_I32));
}
static tj_tensor *creates_always(tj_tensor *x) {
    return tj_variable_read(tj_variable_new(x, "always"));
}
static tj_tensor *gather_at(tj_tensor *p, tj_tensor *i) {
    return tj_gather(p, i, 0);
}
static void noop_cb(void *user, tj_tensor *x) {
    (void)user;
    (void)x;
}

int main(void) {
    tj_scope_begin();
    tj_tensor *f2 = F32V(2, 1, 2), *f3 = F32V(3, 1, 2, 3), *i2 = I32V(2, 1, 2);
    tj_tensor *m23 = tj_ones(TJ_F32, 2, D(2, 3)), *s0 = tj_scalar_f32(1);
    tj_tensor *b2 = tj_tensor_from_data(TJ_BOOL, 1, D(2), (uint8_t[]){1, 0});
    tj_tensor *str = tj_scalar_str("a"), *err = tj_error_new(TJ_ERR_IO, "disk on fire");
    tj_tensor *tup = tj_tuple(1, &f2), *empty = tj_zeros(TJ_F32, 1, D(0));

    /* ---- tensor constructors ---- */
    T(tj_tensor_from_data((tj_dtype)39, 1, D(2), NULL), TJ_ERR_DTYPE, "bad dtype 39");
    T(tj_tensor_from_data(TJ_F32, -1, D(2), NULL), TJ_ERR_SHAPE, "rank -1 out of range");
    T(tj_tensor_from_data(TJ_F32, 9, D(1, 1, 1, 1, 1, 1, 1, 1, 1), NULL), TJ_ERR_SHAPE, "rank 9");
    T(tj_tensor_from_data(TJ_F32, 2, NULL, NULL), TJ_ERR_INVALID, "dims is NULL for rank 2");
    T(tj_tensor_from_data(TJ_F32, 2, D(2, -3), NULL), TJ_ERR_SHAPE, "invalid dimension -3");
    T(tj_tensor_from_data(TJ_F32, 1, D(4), NULL), TJ_ERR_INVALID, "data is NULL for 4 elements");
    T(tj_tensor_from_data(TJ_F32, 2, D(1LL << 32, 1LL << 32), NULL), TJ_ERR_SHAPE,
      "more than 1099511627776 elements");
    T(tj_tensor_empty(TJ_I64, 1, D(-1)), TJ_ERR_SHAPE, "tensor_empty: invalid dimension -1");
    T(tj_tensor_borrow(TJ_F32, 1, D(2), NULL, NULL, NULL), TJ_ERR_INVALID, "data is NULL");
    static double aligned[4];
    T(tj_tensor_borrow(TJ_F64, 1, D(2), (char *)aligned + 1, NULL, NULL), TJ_ERR_INVALID,
      "not aligned to 8 bytes for float64");
    T(tj_scalar_str(NULL), TJ_ERR_INVALID, "scalar_str: the string is NULL");
    T(tj_static_str(NULL), TJ_ERR_INVALID, "static_str: the string is NULL");
    T(tj_tuple(2, (tj_tensor *[]){f2, NULL}), TJ_ERR_INVALID, "tuple: item 1 is NULL");
    T(tj_tuple(-1, NULL), TJ_ERR_INVALID, "tuple: bad item list");
    T(tj_error_new(3, "positive"), TJ_ERR_INVALID, "positive");

    /* ---- op arguments: NULL, tuples, errors ---- */
    T(tj_neg(NULL), TJ_ERR_INVALID, "neg: argument 0 is NULL");
    T(tj_add(f2, NULL), TJ_ERR_INVALID, "add: argument 1 is NULL");
    T(tj_exp(tup), TJ_ERR_INVALID, "exp: argument 0 is a tuple, not a tensor");
    T(tj_mul(f2, err), TJ_ERR_IO, "disk on fire"); /* sticky: the first error, as it was */
    T(tj_sum(err, 0, NULL, 0), TJ_ERR_IO, "disk on fire");
    T(tj_reshape(err, 1, D(2)), TJ_ERR_IO, "disk on fire");

    /* ---- unary dtypes ---- */
    T(tj_exp(i2), TJ_ERR_DTYPE, "exp");
    T(tj_log(b2), TJ_ERR_DTYPE, "log");
    T(tj_logical_not(f2), TJ_ERR_DTYPE, "logical_not");
    T(tj_isnan(i2), TJ_ERR_DTYPE, "isnan");
    T(tj_neg(str), TJ_ERR_DTYPE, "neg");
    T(tj_sqrt(str), TJ_ERR_DTYPE, "string");
    T(tj_relu(b2), TJ_ERR_DTYPE, "relu");

    /* ---- binary dtypes and shapes ---- */
    T(tj_add(f2, i2), TJ_ERR_DTYPE, "add: dtype mismatch: float32 vs int32");
    T(tj_sub(f2, f3), TJ_ERR_SHAPE, "sub: incompatible shapes for broadcasting: [2] vs [3]");
    T(tj_mul(m23, f2), TJ_ERR_SHAPE, "[2,3] vs [2]");
    T(tj_add(str, s0), TJ_ERR_DTYPE, "add");
    T(tj_str_concat(f2, f2), TJ_ERR_DTYPE, "str_concat: expected string tensors");
    T(tj_logical_and(f2, f2), TJ_ERR_DTYPE, "logical_and");
    T(tj_pow(b2, b2), TJ_ERR_DTYPE, "pow");
    T(tj_add(i2, tj_scalar_f64(2.5)), TJ_ERR_DTYPE, "dtype mismatch: int32 vs float64");
    T(tj_where(f2, f2, f2), TJ_ERR_DTYPE, "where");
    T(tj_where(b2, f2, i2), TJ_ERR_DTYPE, "where");
    T(tj_where(b2, f3, f3), TJ_ERR_SHAPE, "where");
    T(tj_div(i2, I32V(2, 1, 0)), TJ_ERR_RUNTIME, "div: integer division by zero");
    T(tj_mod(i2, I32V(2, 0, 1)), TJ_ERR_RUNTIME, "division by zero");
    T(tj_pow(i2, I32V(2, -1, 1)), TJ_ERR_RUNTIME, "pow: negative integer exponent");

    /* ---- matmul ---- */
    T(tj_matmul(s0, s0), TJ_ERR_SHAPE, "matmul");
    T(tj_matmul(m23, m23), TJ_ERR_SHAPE, "matmul: inner dimensions differ: [2,3] x [2,3]");
    T(tj_matmul(b2, b2), TJ_ERR_DTYPE, "matmul");
    T(tj_matmul(m23, tj_ones(TJ_F64, 2, D(3, 2))), TJ_ERR_DTYPE, "matmul");

    /* ---- reductions ---- */
    T(tj_sum(f2, -1, NULL, 0), TJ_ERR_INVALID, "sum: bad axes list (n_axes=-1)");
    T(tj_sum(f2, 9, (int[9]){0}, 0), TJ_ERR_INVALID, "n_axes=9");
    T(tj_mean(f2, 1, NULL, 0), TJ_ERR_INVALID, "mean: bad axes list");
    T(tj_max(m23, 1, (int[]){2}, 0), TJ_ERR_SHAPE, "max: axis 2 out of range for shape [2,3]");
    T(tj_min(m23, 1, (int[]){-3}, 0), TJ_ERR_SHAPE, "axis -3");
    T(tj_prod(str, 0, NULL, 0), TJ_ERR_DTYPE, "prod");
    T(tj_max(empty, 0, NULL, 0), TJ_ERR_RUNTIME, "empty reduction");
    T(tj_argmax(m23, 5), TJ_ERR_SHAPE, "argmax: axis 5");
    T(tj_argmin(empty, 0), TJ_ERR_RUNTIME, "argmin: empty reduction");
    T(tj_softmax(i2, -1), TJ_ERR_DTYPE, "softmax: expected a float dtype, got int32");
    T(tj_log_softmax(s0, 0), TJ_ERR_SHAPE, "log_softmax: axis 0 out of range for shape []");

    /* ---- shape ops ---- */
    T(tj_reshape(m23, 1, D(5)), TJ_ERR_SHAPE,
      "reshape: cannot reshape [2,3] (6 elements) into [5]");
    T(tj_reshape(m23, 2, D(-1, -1)), TJ_ERR_SHAPE, "at most one dimension");
    T(tj_reshape(m23, 1, D(-2)), TJ_ERR_SHAPE, "reshape: invalid dimension -2");
    T(tj_reshape(m23, 9, D(1, 1, 1, 1, 1, 1, 1, 1, 6)), TJ_ERR_SHAPE, "rank 9");
    T(tj_reshape(m23, 2, NULL), TJ_ERR_INVALID, "reshape: dims is NULL for rank 2");
    T(tj_transpose(m23, (int[]){0, 0}), TJ_ERR_SHAPE, "transpose: axis 0 repeated");
    T(tj_transpose(m23, (int[]){0, 2}), TJ_ERR_SHAPE, "transpose");
    T(tj_broadcast_to(f3, 1, D(2)), TJ_ERR_SHAPE, "broadcast_to: cannot broadcast [3] to [2]");
    T(tj_broadcast_to(m23, 1, D(6)), TJ_ERR_SHAPE, "broadcast_to");
    T(tj_expand_dims(f2, 3), TJ_ERR_SHAPE, "expand_dims: axis 3");
    T(tj_squeeze(f2, 1, (int[]){0}), TJ_ERR_SHAPE, "squeeze");
    T(tj_squeeze(f2, -2, NULL), TJ_ERR_INVALID, "squeeze: bad axes list");
    T(tj_concat(0, NULL, 0), TJ_ERR_INVALID, "concat: needs at least one tensor (n=0)");
    T(tj_concat(2, NULL, 0), TJ_ERR_INVALID, "concat: the tensor list is NULL");
    T(tj_concat(2, (tj_tensor *[]){f2, i2}, 0), TJ_ERR_DTYPE, "concat");
    T(tj_concat(2, (tj_tensor *[]){f2, m23}, 0), TJ_ERR_SHAPE, "concat");
    T(tj_concat(2, (tj_tensor *[]){s0, s0}, 0), TJ_ERR_SHAPE, "concat: cannot concatenate scalars");
    T(tj_concat(1, (tj_tensor *[]){f2}, 2), TJ_ERR_SHAPE, "concat");
    T(tj_slice(f3, NULL, NULL, D(0)), TJ_ERR_INVALID, "slice: step of axis 0 is zero");
    T(tj_gather(f3, I32V(1, 5), 0), TJ_ERR_RUNTIME, "gather");
    T(tj_gather(f3, F32V(1, 0), 0), TJ_ERR_DTYPE, "gather");
    T(tj_gather(f3, I32V(1, 0), 1), TJ_ERR_SHAPE, "gather");
    T(tj_cast(f2, (tj_dtype)37), TJ_ERR_DTYPE, "cast: bad dtype 37");
    T(tj_cast(str, TJ_F32), TJ_ERR_DTYPE, "cast");

    /* ---- constructors from shapes ---- */
    T(tj_zeros((tj_dtype)-1, 1, D(2)), TJ_ERR_DTYPE, "zeros: bad dtype -1");
    T(tj_zeros(TJ_STRING, 1, D(2)), TJ_ERR_DTYPE, "zeros: unsupported dtype string");
    T(tj_ones(TJ_F32, 9, D(1, 1, 1, 1, 1, 1, 1, 1, 1)), TJ_ERR_SHAPE, "ones: rank 9");
    T(tj_ones(TJ_F32, 2, D(3, -1)), TJ_ERR_SHAPE, "ones: invalid dimension -1 at axis 1");
    T(tj_fill(1, D(2), f2), TJ_ERR_SHAPE, "fill: value must be 0-d, got rank 1");
    T(tj_fill(1, D(2), NULL), TJ_ERR_INVALID, "fill: value is NULL");
    T(tj_fill(1, D(-4), s0), TJ_ERR_SHAPE, "fill: invalid dimension -4");
    T(tj_eye(TJ_F32, -1, 2), TJ_ERR_SHAPE, "eye");
    T(tj_eye(TJ_STRING, 2, 2), TJ_ERR_DTYPE, "eye");
    T(tj_range(TJ_F32, 0, 10, 0), TJ_ERR_INVALID, "range: invalid start 0, limit 10, delta 0");
    T(tj_range(TJ_I32, NAN, 10, 1), TJ_ERR_INVALID, "range");
    T(tj_range(TJ_BOOL, 0, 10, 1), TJ_ERR_DTYPE, "range");
    T(tj_random_uniform(TJ_I32, 1, D(2), 0, 1, 1), TJ_ERR_DTYPE, "random_uniform");
    T(tj_random_uniform(TJ_F32, 1, D(2), 1, 0, 1), TJ_ERR_INVALID, "lo <= hi");
    T(tj_random_normal(TJ_F32, 1, D(2), 0, -1, 1), TJ_ERR_INVALID, "stddev");
    T(tj_random_normal(TJ_F64, 1, D(2), INFINITY, 1, 1), TJ_ERR_INVALID, "mean must be finite");

    /* ---- side effects ---- */
    S(tj_print("p", -1, NULL), TJ_ERR_INVALID, "print: bad tensor list (n=-1)");
    S(tj_print("p", 2, NULL), TJ_ERR_INVALID, "print: bad tensor list (n=2)");
    S(tj_print("p", 2, (tj_tensor *[]){f2, NULL}), TJ_ERR_INVALID, "print: argument 1 is NULL");
    S(tj_print("p", 1, &tup), TJ_ERR_INVALID, "print: argument 0 is a tuple");
    S(tj_print("p", 1, &err), TJ_ERR_IO, "disk on fire");
    S(tj_host_callback(NULL, NULL, 0, NULL), TJ_ERR_INVALID, "host_callback: function is NULL");
    S(tj_host_callback((void *)noop_cb, NULL, 1, NULL), TJ_ERR_INVALID, "bad tensor list");
    S(tj_callback_fail(TJ_ERR_RUNTIME, "x"), TJ_ERR_STATE, "outside a host callback");

    /* ---- variables ---- */
    N(tj_variable_new(NULL, "v"), "variable_new: init is NULL");
    N(tj_variable_new(tup, "v"), "variable_new: init is a tuple");
    N(tj_variable_new(err, "v"), "disk on fire");
    T(tj_variable_read(NULL), TJ_ERR_INVALID, "variable_read: variable is NULL");
    T(tj_variable_read((tj_variable *)aligned), TJ_ERR_INVALID, "not a tj_variable");
    tj_variable *v = tj_variable_new(f2, "v");
    T(tj_assign(NULL, f2), TJ_ERR_INVALID, "assign: variable is NULL");
    T(tj_assign(v, NULL), TJ_ERR_INVALID, "assign: value is NULL");
    T(tj_assign(v, i2), TJ_ERR_DTYPE, "assign: variable 'v' is float32[2], value is int32[2]");
    T(tj_assign(v, f3), TJ_ERR_SHAPE, "variable 'v' is float32[2], value is float32[3]");
    T(tj_assign(v, err), TJ_ERR_IO, "disk on fire");
    T(tj_assign_add(v, i2), TJ_ERR_DTYPE, "add: dtype mismatch: float32 vs int32");
    T(tj_assign_sub(NULL, f2), TJ_ERR_INVALID, "assign_sub: variable is NULL");
    tj_variable_free(v);
    T(tj_variable_read(v), TJ_ERR_STATE, "variable_read: the variable was freed");
    T(tj_assign_add(v, f2), TJ_ERR_STATE, "assign_add: the variable was freed");

    /* ---- functions: creation ---- */
    N(tj_function_new("f", NULL, 1, NULL), "function_new: fn is NULL");
    N(tj_function_new("f", (void *)ident, -1, NULL), "nargs -1 out of range [0, 256]");
    N(tj_function_new("f", (void *)ident, 300, NULL), "nargs 300");
    tj_spec spec_f32 = {.dtype = TJ_F32, .rank = 1, .dims = {-1}};
    N(tj_function_new("f", (void *)add2, 2,
                      &(tj_function_options){.n_input_signature = 1, .input_signature = &spec_f32}),
      "'f' takes 2 arguments but its input signature has 1 specs");
    tj_spec bad_dt = {.dtype = (tj_dtype)41};
    N(tj_function_new("f", (void *)ident, 1,
                      &(tj_function_options){.n_input_signature = 1, .input_signature = &bad_dt}),
      "input signature 0: bad dtype 41");
    tj_spec bad_rank = {.dtype = TJ_F32, .rank = 12};
    N(tj_function_new("f", (void *)ident, 1,
                      &(tj_function_options){.n_input_signature = 1, .input_signature = &bad_rank}),
      "input signature 0: rank 12 out of range");
    tj_spec not_static = {.static_value = f2};
    N(tj_function_new(
          "f", (void *)ident, 1,
          &(tj_function_options){.n_input_signature = 1, .input_signature = &not_static}),
      "static_value is not a static value");
    N(tj_function_new("f", (void *)ident, 1, &(tj_function_options){.cache_bound = -1}),
      "cache_bound -1 is negative");
    N(tj_jit_compile(NULL, 1, NULL), "fn is NULL");

    /* ---- functions: calls ---- */
    tj_function *fa = tj_function_new("add2", (void *)add2, 2, NULL);
    T(tj_call(NULL, 0, NULL), TJ_ERR_INVALID, "call: function is NULL");
    T(tj_call((tj_function *)aligned, 0, NULL), TJ_ERR_INVALID, "not a tj_function");
    T(tj_call(fa, 1, &f2), TJ_ERR_INVALID, "'add2' takes 2 arguments, got 1");
    T(tj_call(fa, 2, NULL), TJ_ERR_INVALID, "args is NULL");
    T(tj_call(fa, 2, (tj_tensor *[]){f2, NULL}), TJ_ERR_INVALID, "'add2' argument 1 is NULL");
    T(tj_call(fa, 2, (tj_tensor *[]){f2, tup}), TJ_ERR_INVALID, "'add2' argument 1 is a tuple");
    T(tj_call(fa, 2, (tj_tensor *[]){f2, err}), TJ_ERR_IO, "disk on fire");
    T(tj_call(fa, 2, (tj_tensor *[]){f2, i2}), TJ_ERR_DTYPE, "add: dtype mismatch");
    T(tj_call(fa, 2, (tj_tensor *[]){f2, f3}), TJ_ERR_SHAPE, "[2] vs [3]");
    T(tj_call_eager(fa, 0, NULL), TJ_ERR_INVALID, "takes 2 arguments, got 0");
    tj_tensor *out2 = tj_tensor_empty(TJ_F32, 1, D(2)), *out3 = tj_tensor_empty(TJ_F32, 1, D(3));
    tj_tensor *st = tj_static_f64(1);
    S(tj_call_into(fa, 2, (tj_tensor *[]){f2, f2}, -1, NULL), TJ_ERR_INVALID,
      "bad output list (n_out=-1)");
    S(tj_call_into(fa, 2, (tj_tensor *[]){f2, f2}, 1, NULL), TJ_ERR_INVALID, "bad output list");
    S(tj_call_into(fa, 2, (tj_tensor *[]){f2, f2}, 2, (tj_tensor *[]){out2, out2}), TJ_ERR_INVALID,
      "'add2' returns 1 results, 2 outputs given");
    S(tj_call_into(fa, 2, (tj_tensor *[]){f2, f2}, 1, &out3), TJ_ERR_SIGNATURE,
      "'add2' result 0 is float32[2] but output 0 is float32[3]");
    S(tj_call_into(fa, 2, (tj_tensor *[]){f2, f2}, 1, &st), TJ_ERR_INVALID,
      "output 0 is a static value");
    S(tj_call_into(fa, 2, (tj_tensor *[]){f2, f2}, 1, &err), TJ_ERR_INVALID,
      "output 0 is an error tensor");
    S(tj_call_into(fa, 2, (tj_tensor *[]){f2, f2}, 1, (tj_tensor *[]){NULL}), TJ_ERR_INVALID,
      "output 0 is NULL");
    S(tj_call_into(NULL, 0, NULL, 0, NULL), TJ_ERR_INVALID, "call_into: function is NULL");
    /* S7: a call outside the input signature */
    tj_function *fs = tj_function_new(
        "sig", (void *)ident, 1,
        &(tj_function_options){.n_input_signature = 1, .input_signature = &spec_f32});
    T(tj_call(fs, 1, &m23), TJ_ERR_SIGNATURE, "sig: inputs incompatible with input_signature");
    T(tj_call(fs, 1, &i2), TJ_ERR_SIGNATURE,
      "input_signature: (TensorSpec(shape=(None,), dtype=float32))");
    /* concrete functions */
    N(tj_function_get_concrete(fa, 1, &spec_f32), "'add2' takes 2 arguments, got 1 specs");
    N(tj_function_get_concrete(fa, 2, NULL), "specs is NULL");
    N(tj_function_get_concrete(fa, 2, (tj_spec[]){spec_f32, bad_dt}), "spec 1: bad dtype 41");
    N(tj_function_get_concrete(NULL, 0, NULL), "get_concrete: function is NULL");
    tj_concrete *c = tj_function_get_concrete(fa, 2, (tj_spec[]){spec_f32, spec_f32});
    CHECK(c != NULL);
    T(tj_concrete_call(NULL, 0, NULL), TJ_ERR_INVALID, "concrete function is NULL");
    T(tj_concrete_call(c, 2, (tj_tensor *[]){f2, i2}), TJ_ERR_SIGNATURE,
      "input #1(zero-based) was expected to be a float32 tensor but is a int32 tensor");
    T(tj_concrete_call(c, 2, (tj_tensor *[]){f2, m23}), TJ_ERR_SIGNATURE,
      "expected to be TensorSpec(shape=(None,), dtype=float32) but is float32[2,3]");
    T(tj_concrete_call(c, 1, &f2), TJ_ERR_INVALID, "takes 2 arguments, got 1");

    /* ---- functions: traces that fail ---- */
#define TRACE(fn, arg, code, frag)                                                                 \
    do {                                                                                           \
        tj_function *tf_ = tj_function_new(#fn, (void *)fn, 1, NULL);                              \
        tj_tensor *a_ = (arg);                                                                     \
        T(tj_call(tf_, 1, &a_), code, frag);                                                       \
        tj_function_free(tf_);                                                                     \
    } while (0)
    TRACE(returns_null_item, f2, TJ_ERR_INVALID, "tuple: item 1 is NULL");
    TRACE(returns_nested, f2, TJ_ERR_UNSUPPORTED, "result 0 is a tuple (nested tuples");
    TRACE(bad_matmul, f2, TJ_ERR_SHAPE, "matmul");
    TRACE(reads_value, f2, TJ_ERR_STATE, "tensor_get_f64: the value of symbolic tensor 'x0:0'");
    TRACE(prints_tuple, f2, TJ_ERR_INVALID, "print: argument 0 is a tuple");
    TRACE(assigns_wrong, s0, TJ_ERR_DTYPE, "variable 'acc' is float32[], value is int32[]");
    TRACE(creates_always, f2, TJ_ERR_STATE, "variable on a non-first trace");
    tj_function *fg = tj_function_new("gather_at", (void *)gather_at, 2, NULL);
    T(tj_call(fg, 2, (tj_tensor *[]){f3, I32V(1, 7)}), TJ_ERR_RUNTIME, "gather");
    tj_function_free(fg);

    /* ---- freed handles ---- */
    tj_function_free(fa);
    T(tj_call(fa, 2, (tj_tensor *[]){f2, f2}), TJ_ERR_STATE, "call: the function was freed");
    S(tj_call_into(fa, 2, (tj_tensor *[]){f2, f2}, 1, &out2), TJ_ERR_STATE, "was freed");
    N(tj_function_get_concrete(fa, 2, (tj_spec[]){spec_f32, spec_f32}), "was freed");
    /* (c was freed with fa: a borrowed pointer past its owner, not checked) */
    tj_function_free(fs);
    tj_tensor *(*jf)(tj_tensor *) =
        (tj_tensor * (*)(tj_tensor *)) tj_jit_compile((void *)ident, 1, NULL);
    tj_jit_free((void *)jf);
    T(jf(f2), TJ_ERR_STATE, "the function was freed");
    CHECK(tj_jit_function((void *)jf) == NULL);

    tj_scope_end();
    printf("%d misuse cases\n", n_cases);
    CHECK_MSG(n_cases >= 100, "the catalogue has %d cases", n_cases);
    return check_done();
}
