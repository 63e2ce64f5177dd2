/* s08_signatures.c — SEMANTICS S8: tj_function_signatures lists every concrete function's
 * arguments and results (dtype and shape), like pretty_printed_concrete_signatures. */
#include <tracejit.h>

#include "check.h"

static tj_tensor *dbl(tj_tensor *a) {
    return tj_add(a, a);
}

static tj_tensor *two_out(tj_tensor *x, tj_tensor *k) {
    tj_tensor *items[2] = {tj_mul(x, k), tj_sum(x, 0, NULL, 0)};
    return tj_tuple(2, items);
}

static tj_tensor *nothing(tj_tensor *x) {
    (void)x;
    return NULL;
}

int main(void) {
    tj_scope_begin();
    tj_function *f = tj_function_new("double", (void *)dbl, 1,
                                     &(tj_function_options){.arg_names = (const char *[]){"a"}});
    char *s = tj_function_signatures(f);
    CHECK_STR(s, "");
    free(s);
    tj_call(f, 1, (tj_tensor *[]){tj_scalar_i32(1)});
    tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(1.1f)});
    tj_call(f, 1, (tj_tensor *[]){tj_scalar_str("a")});
    int64_t d3[1] = {3};
    tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 1, d3, (int32_t[]){1, 2, 3})});
    s = tj_function_signatures(f);
    CHECK_STR(s, "double(a)\n  Args:\n    a: int32 Tensor, shape=()\n  Returns:\n"
                 "    int32 Tensor, shape=()\n"
                 "\ndouble(a)\n  Args:\n    a: float32 Tensor, shape=()\n  Returns:\n"
                 "    float32 Tensor, shape=()\n"
                 "\ndouble(a)\n  Args:\n    a: string Tensor, shape=()\n  Returns:\n"
                 "    string Tensor, shape=()\n"
                 "\ndouble(a)\n  Args:\n    a: int32 Tensor, shape=(3,)\n  Returns:\n"
                 "    int32 Tensor, shape=(3,)\n");
    free(s);
    tj_function_free(f);

    /* two arguments (default names), a static one, two results */
    f = tj_function_new("two_out", (void *)two_out, 2, NULL);
    int64_t d23[2] = {2, 3};
    float v[6] = {1, 2, 3, 4, 5, 6};
    tj_tensor *r =
        tj_call(f, 2, (tj_tensor *[]){tj_tensor_from_data(TJ_F32, 2, d23, v), tj_static_f64(2.5)});
    CHECK_EQ_INT(tj_tuple_size(r), 2);
    s = tj_function_signatures(f);
    CHECK_STR(s, "two_out(x0, x1)\n  Args:\n    x0: float32 Tensor, shape=(2, 3)\n"
                 "    x1: 2.5 (static)\n  Returns:\n    float32 Tensor, shape=(2, 3)\n"
                 "    float32 Tensor, shape=()\n");
    free(s);
    tj_function_free(f);

    /* a spec with unknown dims and no results */
    f = tj_function_new("nothing", (void *)nothing, 1, NULL);
    CHECK(
        tj_function_get_concrete(f, 1, (tj_spec[]){{.dtype = TJ_F64, .rank = 2, .dims = {-1, 4}}}));
    s = tj_function_signatures(f);
    CHECK_STR(s, "nothing(x0)\n  Args:\n    x0: float64 Tensor, shape=(None, 4)\n  Returns:\n"
                 "    NoneTensorSpec()\n");
    free(s);
    tj_function_free(f);

    /* a freed or NULL function lists nothing */
    s = tj_function_signatures(NULL);
    CHECK_STR(s, "");
    free(s);
    tj_scope_end();
    return check_done();
}
