/* test_infer.c — ir_infer for every op in ops.def: output dtype and shape, attribute
 * canonicalisation (axes normalised/sorted/deduplicated, defaults stored explicitly), and each
 * op's main error with its message and code. */
#include <limits.h>

#include "check.h"
#include "ir/ir.h"

static ir_node T(int dt, int rank, int64_t d0, int64_t d1, int64_t d2) {
    ir_node n = {.dtype = (uint8_t)dt, .rank = (uint8_t)rank, .dims = {d0, d1, d2}};
    return n;
}

/* pointer to a temporary descriptor */
#define TP(dt, r, d0, d1, d2)                                                                      \
    (&(ir_node){.dtype = (uint8_t)(dt), .rank = (uint8_t)(r), .dims = {d0, d1, d2}})

static ir_node P(int op) {
    return (ir_node){.op = (uint16_t)op};
}

static tj_status inf1(ir_node *p, const ir_node *a) {
    const ir_node *ins[1] = {a};
    return ir_infer(p, ins, 1);
}
static tj_status inf2(ir_node *p, const ir_node *a, const ir_node *b) {
    const ir_node *ins[2] = {a, b};
    return ir_infer(p, ins, 2);
}

#define IS(p, dt, r, ...)                                                                          \
    do {                                                                                           \
        int64_t e_[] = {__VA_ARGS__};                                                              \
        CHECK_EQ_INT((p).dtype, dt);                                                               \
        CHECK_EQ_INT((p).rank, r);                                                                 \
        for (int k_ = 0; k_ < (r); k_++)                                                           \
            CHECK_EQ_INT((p).dims[k_], e_[k_]);                                                    \
    } while (0)
#define FAILS(st, code, msg)                                                                       \
    do {                                                                                           \
        CHECK_EQ_INT(st, code);                                                                    \
        CHECK_HAS(ir_last_error(), msg);                                                           \
    } while (0)

int main(void) {
    ir_node f23 = T(TJ_F32, 2, 2, 3, 0), f3 = T(TJ_F32, 1, 3, 0, 0), i23 = T(TJ_I32, 2, 2, 3, 0);
    ir_node b23 = T(TJ_BOOL, 2, 2, 3, 0), s2 = T(TJ_STRING, 1, 2, 0, 0);
    ir_node f32u = T(TJ_F32, 2, -1, 3, 0), f0 = T(TJ_F32, 0, 0, 0, 0);
    ir_node p;

    /* sources */
    p = T(TJ_F32, 2, -1, 3, 0);
    p.op = IR_OP_PARAM;
    CHECK_EQ_INT(ir_infer(&p, NULL, 0), TJ_OK);
    IS(p, TJ_F32, 2, -1, 3);
    p.a.i[0] = -1;
    FAILS(ir_infer(&p, NULL, 0), TJ_ERR_INVALID, "param: invalid index -1");
    p = T(TJ_F32, 1, -1, 0, 0);
    p.op = IR_OP_CONST;
    FAILS(ir_infer(&p, NULL, 0), TJ_ERR_SHAPE,
          "const: invalid dimension -1 at axis 0 of shape [?]");
    p = T(TJ_F32, 9, 1, 1, 1);
    p.op = IR_OP_VAR_READ;
    FAILS(ir_infer(&p, NULL, 0), TJ_ERR_SHAPE, "var_read: rank 9 out of range [0, 8]");
    p = T(TJ_F32, 2, INT64_MAX, 4, 0);
    p.op = IR_OP_PARAM;
    FAILS(ir_infer(&p, NULL, 0), TJ_ERR_SHAPE, "has more than 1099511627776 elements");
    p = T(TJ_F64, 2, 2, 3, 0);
    p.op = IR_OP_EYE;
    CHECK_EQ_INT(ir_infer(&p, NULL, 0), TJ_OK);
    IS(p, TJ_F64, 2, 2, 3);
    p.rank = 1;
    FAILS(ir_infer(&p, NULL, 0), TJ_ERR_SHAPE, "eye: expected rank 2, got rank 1");
    p = T(TJ_I32, 0, 0, 0, 0);
    p.op = IR_OP_RANGE;
    p.a.f[0] = 1, p.a.f[1] = 10, p.a.f[2] = 4;
    CHECK_EQ_INT(ir_infer(&p, NULL, 0), TJ_OK);
    IS(p, TJ_I32, 1, 3);
    p.a.f[2] = -1; /* empty */
    p.rank = 0;
    CHECK_EQ_INT(ir_infer(&p, NULL, 0), TJ_OK);
    IS(p, TJ_I32, 1, 0);
    p.a.f[2] = 0;
    FAILS(ir_infer(&p, NULL, 0), TJ_ERR_INVALID, "range: invalid start 1, limit 10, delta 0");
    p.a.f[2] = 4;
    p.dims[0] = 5;
    FAILS(ir_infer(&p, NULL, 0), TJ_ERR_SHAPE, "range: shape does not match length 3");
    p = T(TJ_F32, 1, 4, 0, 0);
    p.op = IR_OP_RANDOM_NORMAL;
    CHECK_EQ_INT(ir_infer(&p, NULL, 0), TJ_OK);
    p.op = IR_OP_RANDOM_UNIFORM;
    p.dtype = TJ_I32;
    FAILS(ir_infer(&p, NULL, 0), TJ_ERR_DTYPE, "random_uniform: expected a float dtype, got int32");
    p = T(IR_VOID, 0, 0, 0, 0);
    p.op = IR_OP_CONST;
    FAILS(ir_infer(&p, NULL, 0), TJ_ERR_DTYPE, "const: invalid dtype 15");

    /* unary */
    static const int float_ops[] = {IR_OP_EXP,     IR_OP_LOG,  IR_OP_SQRT, IR_OP_RSQRT, IR_OP_TANH,
                                    IR_OP_SIGMOID, IR_OP_SIN,  IR_OP_COS,  IR_OP_FLOOR, IR_OP_CEIL,
                                    IR_OP_ROUND,   IR_OP_ATAN, IR_OP_ASIN, IR_OP_ACOS,  IR_OP_ERF};
    for (size_t k = 0; k < sizeof float_ops / sizeof float_ops[0]; k++) {
        p = P(float_ops[k]);
        CHECK_EQ_INT(inf1(&p, &f23), TJ_OK);
        IS(p, TJ_F32, 2, 2, 3);
        p = P(float_ops[k]);
        CHECK_EQ_INT(inf1(&p, &i23), TJ_ERR_DTYPE);
        CHECK_HAS(ir_last_error(), ir_ops[float_ops[k]].name);
        CHECK_HAS(ir_last_error(), "expected a float dtype, got int32");
    }
    static const int num_ops[] = {IR_OP_NEG, IR_OP_ABS, IR_OP_SIGN, IR_OP_RELU};
    for (size_t k = 0; k < 4; k++) {
        p = P(num_ops[k]);
        CHECK_EQ_INT(inf1(&p, &i23), TJ_OK);
        IS(p, TJ_I32, 2, 2, 3);
        p = P(num_ops[k]);
        FAILS(inf1(&p, &b23), TJ_ERR_DTYPE, "expected a numeric dtype, got bool");
    }
    p = P(IR_OP_ISNAN);
    CHECK_EQ_INT(inf1(&p, &f32u), TJ_OK);
    IS(p, TJ_BOOL, 2, -1, 3);
    p = P(IR_OP_ISINF);
    FAILS(inf1(&p, &i23), TJ_ERR_DTYPE, "isinf: expected a float dtype, got int32");
    p = P(IR_OP_LOGICAL_NOT);
    CHECK_EQ_INT(inf1(&p, &b23), TJ_OK);
    IS(p, TJ_BOOL, 2, 2, 3);
    p = P(IR_OP_LOGICAL_NOT);
    FAILS(inf1(&p, &f23), TJ_ERR_DTYPE, "logical_not: expected a bool dtype, got float32");
    p = P(IR_OP_CAST);
    p.dtype = TJ_I64;
    CHECK_EQ_INT(inf1(&p, &b23), TJ_OK);
    IS(p, TJ_I64, 2, 2, 3);
    p.dtype = TJ_STRING;
    FAILS(inf1(&p, &f23), TJ_ERR_DTYPE, "cast: cannot cast float32 to string");
    p.dtype = TJ_STRING;
    CHECK_EQ_INT(inf1(&p, &s2), TJ_OK);
    p = P(IR_OP_NEG);
    ir_node vd = T(IR_VOID, 0, 0, 0, 0);
    FAILS(inf1(&p, &vd), TJ_ERR_DTYPE, "neg: input 0 has no value (dtype void)");
    FAILS(inf2(&p, &f23, &f23), TJ_ERR_INVALID, "neg: expected 1 inputs, got 2");

    /* binary */
    for (int op = IR_OP_ADD; op <= IR_OP_MINIMUM; op++) {
        p = P(op);
        CHECK_EQ_INT(inf2(&p, &f23, &f3), TJ_OK);
        IS(p, TJ_F32, 2, 2, 3);
        p = P(op);
        CHECK_EQ_INT(inf2(&p, &f23, &i23), TJ_ERR_DTYPE);
        CHECK_HAS(ir_last_error(), ir_ops[op].name);
        CHECK_HAS(ir_last_error(), "dtype mismatch: float32 vs int32");
        p = P(op);
        CHECK_EQ_INT(inf2(&p, &b23, &b23), TJ_ERR_DTYPE);
    }
    p = P(IR_OP_ADD);
    CHECK_EQ_INT(inf2(&p, &s2, &s2), TJ_OK);
    IS(p, TJ_STRING, 1, 2);
    p = P(IR_OP_SUB);
    FAILS(inf2(&p, &s2, &s2), TJ_ERR_DTYPE, "sub: expected a numeric dtype, got string");
    p = P(IR_OP_ADD);
    FAILS(inf2(&p, &f23, TP(TJ_F32, 1, 4, 0, 0)), TJ_ERR_SHAPE,
          "add: incompatible shapes for broadcasting: [2,3] vs [4]");
    for (int op = IR_OP_EQ; op <= IR_OP_GE; op++) {
        p = P(op);
        CHECK_EQ_INT(inf2(&p, &i23, TP(TJ_I32, 0, 0, 0, 0)), TJ_OK);
        IS(p, TJ_BOOL, 2, 2, 3);
    }
    p = P(IR_OP_EQ);
    CHECK_EQ_INT(inf2(&p, &s2, &s2), TJ_OK);
    IS(p, TJ_BOOL, 1, 2);
    p = P(IR_OP_NE);
    CHECK_EQ_INT(inf2(&p, &b23, &b23), TJ_OK);
    p = P(IR_OP_LT);
    FAILS(inf2(&p, &s2, &s2), TJ_ERR_DTYPE, "less: expected a numeric dtype, got string");
    p = P(IR_OP_LOGICAL_AND);
    CHECK_EQ_INT(inf2(&p, &b23, TP(TJ_BOOL, 1, 3, 0, 0)), TJ_OK);
    IS(p, TJ_BOOL, 2, 2, 3);
    p = P(IR_OP_LOGICAL_OR);
    FAILS(inf2(&p, &i23, &i23), TJ_ERR_DTYPE, "logical_or: expected a bool dtype, got int32");

    /* where */
    {
        ir_node c = T(TJ_BOOL, 3, 4, 1, 1);
        const ir_node *ins[3] = {&c, &f23, &f3};
        p = P(IR_OP_WHERE);
        CHECK_EQ_INT(ir_infer(&p, ins, 3), TJ_OK);
        IS(p, TJ_F32, 3, 4, 2, 3);
        ins[0] = &f23;
        FAILS(ir_infer(&p, ins, 3), TJ_ERR_DTYPE, "where: condition must be bool, got float32");
        ins[0] = &c;
        ins[2] = &i23;
        FAILS(ir_infer(&p, ins, 3), TJ_ERR_DTYPE, "where: dtype mismatch: float32 vs int32");
        ins[2] = TP(TJ_F32, 1, 5, 0, 0);
        FAILS(ir_infer(&p, ins, 3), TJ_ERR_SHAPE, "where: incompatible shapes");
    }

    /* matmul */
    p = P(IR_OP_MATMUL);
    CHECK_EQ_INT(inf2(&p, TP(TJ_F64, 3, 5, 2, 3), TP(TJ_F64, 2, 3, 7, 0)), TJ_OK);
    IS(p, TJ_F64, 3, 5, 2, 7);
    p = P(IR_OP_MATMUL);
    CHECK_EQ_INT(inf2(&p, &f32u, TP(TJ_F32, 2, -1, 4, 0)), TJ_OK);
    IS(p, TJ_F32, 2, -1, 4);
    FAILS(inf2(&p, TP(TJ_F32, 2, 3, 2, 0), TP(TJ_F32, 2, 3, 2, 0)), TJ_ERR_SHAPE,
          "matmul: inner dimensions differ: [3,2] x [3,2]");
    FAILS(inf2(&p, &f3, &f23), TJ_ERR_SHAPE, "matmul: operands must have rank >= 2: [3] x [2,3]");
    FAILS(inf2(&p, &b23, &b23), TJ_ERR_DTYPE, "matmul: expected a numeric dtype, got bool");
    FAILS(inf2(&p, TP(TJ_F32, 3, 2, 2, 2), TP(TJ_F32, 3, 3, 2, 2)), TJ_ERR_SHAPE,
          "matmul: incompatible shapes for broadcasting: [2] vs [3]");

    /* reductions: axes normalised, sorted, deduplicated; empty = all */
    ir_node x3 = T(TJ_F32, 3, 2, 3, 4);
    p = P(IR_OP_SUM);
    p.a.n_list = 3;
    p.a.list[0] = -1, p.a.list[1] = 0, p.a.list[2] = 2;
    CHECK_EQ_INT(inf1(&p, &x3), TJ_OK);
    IS(p, TJ_F32, 1, 3);
    CHECK(p.a.n_list == 2 && p.a.list[0] == 0 && p.a.list[1] == 2 && p.a.list[2] == 0);
    p = P(IR_OP_MEAN);
    p.a.i[0] = 5; /* keepdims: normalised to 1 */
    CHECK_EQ_INT(inf1(&p, &x3), TJ_OK);
    IS(p, TJ_F32, 3, 1, 1, 1);
    CHECK(p.a.n_list == 3 && p.a.i[0] == 1);
    static const int red_ops[] = {IR_OP_MAX, IR_OP_MIN, IR_OP_PROD};
    for (int k = 0; k < 3; k++) {
        p = P(red_ops[k]);
        p.a.n_list = 1;
        p.a.list[0] = 1;
        CHECK_EQ_INT(inf1(&p, &i23), TJ_OK);
        IS(p, TJ_I32, 1, 2);
        p.a.list[0] = 2;
        CHECK_EQ_INT(inf1(&p, &i23), TJ_ERR_SHAPE);
        CHECK_HAS(ir_last_error(), ir_ops[red_ops[k]].name);
        CHECK_HAS(ir_last_error(), "axis 2 out of range for shape [2,3]");
    }
    p = P(IR_OP_SUM);
    FAILS(inf1(&p, &b23), TJ_ERR_DTYPE, "sum: expected a numeric dtype, got bool");
    p = P(IR_OP_ARGMAX);
    p.a.i[0] = -1;
    CHECK_EQ_INT(inf1(&p, &x3), TJ_OK);
    IS(p, TJ_I64, 2, 2, 3);
    CHECK_EQ_INT(p.a.i[0], 2);
    p = P(IR_OP_ARGMIN);
    p.a.i[0] = 3;
    FAILS(inf1(&p, &x3), TJ_ERR_SHAPE, "argmin: axis 3 out of range for shape [2,3,4]");
    p = P(IR_OP_ARGMIN);
    FAILS(inf1(&p, &f0), TJ_ERR_SHAPE, "argmin: axis 0 out of range for shape []");
    p = P(IR_OP_SOFTMAX);
    p.a.i[0] = -2;
    CHECK_EQ_INT(inf1(&p, &f23), TJ_OK);
    IS(p, TJ_F32, 2, 2, 3);
    CHECK_EQ_INT(p.a.i[0], 0);
    p = P(IR_OP_LOG_SOFTMAX);
    FAILS(inf1(&p, &i23), TJ_ERR_DTYPE, "log_softmax: expected a float dtype, got int32");

    /* reshape */
    p = T(0, 2, -1, 2, 0);
    p.op = IR_OP_RESHAPE;
    CHECK_EQ_INT(inf1(&p, &x3), TJ_OK);
    IS(p, TJ_F32, 2, 12, 2);
    p = T(0, 1, 4, 0, 0);
    p.op = IR_OP_RESHAPE;
    FAILS(inf1(&p, &f23), TJ_ERR_SHAPE, "reshape: cannot reshape [2,3] (6 elements) into [4]");
    p = T(0, 2, -1, -1, 0);
    p.op = IR_OP_RESHAPE;
    FAILS(inf1(&p, &f23), TJ_ERR_SHAPE, "reshape: at most one dimension of [?,?] may be -1");
    p = T(0, 2, -1, 3, 0);
    p.op = IR_OP_RESHAPE;
    CHECK_EQ_INT(inf1(&p, &f32u), TJ_OK); /* unknown input: -1 kept */
    IS(p, TJ_F32, 2, -1, 3);
    /* transpose */
    p = P(IR_OP_TRANSPOSE);
    CHECK_EQ_INT(inf1(&p, &x3), TJ_OK);
    IS(p, TJ_F32, 3, 4, 3, 2);
    CHECK(p.a.n_list == 3 && p.a.list[0] == 2 && p.a.list[2] == 0);
    p = P(IR_OP_TRANSPOSE);
    p.a.n_list = 3;
    p.a.list[0] = 0, p.a.list[1] = 0, p.a.list[2] = 1;
    FAILS(inf1(&p, &x3), TJ_ERR_SHAPE, "transpose: axis 0 repeated in permutation");
    p.a.n_list = 2;
    FAILS(inf1(&p, &x3), TJ_ERR_SHAPE, "transpose: permutation has 2 entries for shape [2,3,4]");
    /* broadcast_to */
    p = T(0, 3, 5, 2, 3);
    p.op = IR_OP_BROADCAST_TO;
    CHECK_EQ_INT(inf1(&p, &f3), TJ_OK);
    IS(p, TJ_F32, 3, 5, 2, 3);
    p = T(0, 1, 3, 0, 0);
    p.op = IR_OP_BROADCAST_TO;
    FAILS(inf1(&p, &f23), TJ_ERR_SHAPE, "broadcast_to: cannot broadcast [2,3] to [3]");
    p = T(0, 2, 2, 1, 0);
    p.op = IR_OP_BROADCAST_TO;
    FAILS(inf1(&p, &f23), TJ_ERR_SHAPE, "broadcast_to: cannot broadcast [2,3] to [2,1]");
    /* expand_dims */
    p = P(IR_OP_EXPAND_DIMS);
    p.a.i[0] = -1;
    CHECK_EQ_INT(inf1(&p, &f23), TJ_OK);
    IS(p, TJ_F32, 3, 2, 3, 1);
    CHECK_EQ_INT(p.a.i[0], 2);
    p.a.i[0] = 4;
    FAILS(inf1(&p, &f23), TJ_ERR_SHAPE, "expand_dims: axis 4 out of range for shape [2,3]");
    /* squeeze */
    ir_node sq = T(TJ_F32, 3, 1, 3, 1);
    p = P(IR_OP_SQUEEZE);
    CHECK_EQ_INT(inf1(&p, &sq), TJ_OK);
    IS(p, TJ_F32, 1, 3);
    CHECK(p.a.n_list == 2 && p.a.list[0] == 0 && p.a.list[1] == 2);
    p = P(IR_OP_SQUEEZE);
    p.a.n_list = 1;
    p.a.list[0] = -1;
    CHECK_EQ_INT(inf1(&p, &sq), TJ_OK);
    IS(p, TJ_F32, 2, 1, 3);
    p.a.list[0] = 1;
    FAILS(inf1(&p, &sq), TJ_ERR_SHAPE, "squeeze: cannot squeeze axis 1 of size 3 in shape [1,3,1]");
    /* concat */
    {
        ir_node a = T(TJ_F32, 2, 2, 3, 0), b = T(TJ_F32, 2, 4, 3, 0), u = T(TJ_F32, 2, -1, 3, 0);
        const ir_node *ins[3] = {&a, &b, &a};
        p = P(IR_OP_CONCAT);
        CHECK_EQ_INT(ir_infer(&p, ins, 3), TJ_OK);
        IS(p, TJ_F32, 2, 8, 3);
        ins[2] = &u;
        p = P(IR_OP_CONCAT);
        CHECK_EQ_INT(ir_infer(&p, ins, 3), TJ_OK);
        IS(p, TJ_F32, 2, -1, 3);
        p = P(IR_OP_CONCAT);
        p.a.i[0] = 1;
        FAILS(ir_infer(&p, ins, 2), TJ_ERR_SHAPE,
              "concat: shapes differ outside axis 1: input 0 is [2,3], input 1 is [4,3]");
        ins[1] = &i23;
        FAILS(ir_infer(&p, ins, 2), TJ_ERR_DTYPE, "concat: dtype mismatch");
        FAILS(ir_infer(&p, ins, 0), TJ_ERR_INVALID, "concat: expected at least one input");
    }
    /* slice (Python semantics) */
    {
        ir_node x = T(TJ_F32, 2, 10, -1, 0);
        p = P(IR_OP_SLICE);
        p.a.n_list = 6;
        int64_t l[6] = {-3, 0, INT64_MAX, 5, 1, 2};
        memcpy(p.a.list, l, sizeof l);
        CHECK_EQ_INT(inf1(&p, &x), TJ_OK);
        IS(p, TJ_F32, 2, 3, -1);
        int64_t l2[6] = {8, 0, 2, 0, -3, 1}; /* 8:2:-3 -> 8,5 */
        memcpy(p.a.list, l2, sizeof l2);
        CHECK_EQ_INT(inf1(&p, &x), TJ_OK);
        IS(p, TJ_F32, 2, 2, -1);
        int64_t l3[6] = {INT64_MAX, 0, INT64_MIN, 0, INT64_MIN, 1}; /* [::INT64_MIN] -> 1 */
        memcpy(p.a.list, l3, sizeof l3);
        CHECK_EQ_INT(inf1(&p, &x), TJ_OK);
        IS(p, TJ_F32, 2, 1, -1);
        int64_t l4[6] = {5, 0, 2, 0, 1, 1}; /* 5:2 -> empty */
        memcpy(p.a.list, l4, sizeof l4);
        CHECK_EQ_INT(inf1(&p, &x), TJ_OK);
        IS(p, TJ_F32, 2, 0, -1);
        int64_t l5[6] = {0, 0, 5, 5, 0, 1};
        memcpy(p.a.list, l5, sizeof l5);
        FAILS(inf1(&p, &x), TJ_ERR_INVALID, "slice: step of axis 0 is zero");
        p.a.n_list = 3;
        FAILS(inf1(&p, &x), TJ_ERR_SHAPE,
              "slice: expected 6 begin/end/step values for shape [10,?]");
    }
    /* gather */
    {
        ir_node prm = T(TJ_STRING, 3, 5, 6, 7), idx = T(TJ_I32, 2, 2, 4, 0);
        p = P(IR_OP_GATHER);
        p.a.i[0] = -2;
        CHECK_EQ_INT(inf2(&p, &prm, &idx), TJ_OK);
        IS(p, TJ_STRING, 4, 5, 2, 4, 7);
        CHECK_EQ_INT(p.a.i[0], 1);
        FAILS(inf2(&p, &prm, &f3), TJ_ERR_DTYPE,
              "gather: indices must be int32 or int64, got float32");
        FAILS(inf2(&p, &f0, &idx), TJ_ERR_SHAPE, "gather: params must have rank >= 1");
        p.a.i[0] = 3;
        FAILS(inf2(&p, &prm, &idx), TJ_ERR_SHAPE, "gather: axis 3 out of range for shape [5,6,7]");
    }
    /* side effects */
    {
        const ir_node *ins[2] = {&f23, &s2};
        p = P(IR_OP_PRINT);
        CHECK_EQ_INT(ir_infer(&p, ins, 2), TJ_OK);
        CHECK(p.dtype == IR_VOID && p.rank == 0);
        p = P(IR_OP_HOST_CALLBACK);
        CHECK_EQ_INT(ir_infer(&p, ins, 0), TJ_OK);
        CHECK_EQ_INT(p.dtype, IR_VOID);
        p = P(IR_OP_ASSIGN);
        p.a.i[0] = 3;
        CHECK_EQ_INT(inf1(&p, &f32u), TJ_OK);
        IS(p, TJ_F32, 2, -1, 3);
        p.a.i[0] = -3;
        FAILS(inf1(&p, &f23), TJ_ERR_INVALID, "assign: invalid slot -3");
    }
    /* unused attributes are cleared */
    p = P(IR_OP_ADD);
    p.a.i[1] = 5, p.a.f[2] = 1.0, p.a.n_list = 2, p.a.list[0] = 9, p.a.blob = 3;
    CHECK_EQ_INT(inf2(&p, &f23, &f23), TJ_OK);
    CHECK(p.a.i[1] == 0 && p.a.f[2] == 0 && p.a.n_list == 0 && p.a.list[0] == 0 && !p.a.blob);
    p = P(IR_N_OPS);
    FAILS(ir_infer(&p, NULL, 0), TJ_ERR_INVALID, "unknown op");
    return check_done();
}
