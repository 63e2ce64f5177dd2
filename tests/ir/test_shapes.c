/* test_shapes.c — dtype names/sizes, dims formatting, numel and NumPy broadcasting with unknown
 * (-1) dims, including the error messages. */
#include "check.h"
#include "ir/ir.h"

static int bc(int ra, const int64_t *a, int rb, const int64_t *b, int *r, int64_t *d) {
    return ir_broadcast("add", ra, a, rb, b, r, d);
}

int main(void) {
    CHECK_STR(ir_dtype_name(TJ_F32), "float32");
    CHECK_STR(ir_dtype_name(TJ_STRING), "string");
    CHECK_STR(ir_dtype_name(IR_VOID), "void");
    CHECK_STR(ir_dtype_name(40), "?");
    CHECK_STR(ir_dtype_short(TJ_I64), "i64");
    CHECK_STR(ir_dtype_short(TJ_BOOL), "bool");
    CHECK_EQ_INT(ir_dtype_from_short("f64", 3), TJ_F64);
    CHECK_EQ_INT(ir_dtype_from_short("str", 3), TJ_STRING);
    CHECK_EQ_INT(ir_dtype_from_short("void", 4), IR_VOID);
    CHECK_EQ_INT(ir_dtype_from_short("f6", 2), -1);
    CHECK_EQ_INT(ir_dtype_size(TJ_F32), 4);
    CHECK_EQ_INT(ir_dtype_size(TJ_I64), 8);
    CHECK_EQ_INT(ir_dtype_size(TJ_BOOL), 1);
    CHECK_EQ_INT(ir_dtype_size(TJ_STRING), sizeof(tj_string));
    CHECK(ir_dtype_is_float(TJ_F64) && !ir_dtype_is_float(TJ_I32));
    CHECK(ir_dtype_is_int(TJ_I32) && !ir_dtype_is_int(TJ_BOOL));
    CHECK(ir_dtype_is_numeric(TJ_I64) && !ir_dtype_is_numeric(TJ_STRING));

    char buf[64];
    int64_t d23[] = {2, 3}, du[] = {-1, 4};
    CHECK_STR(ir_fmt_dims(buf, sizeof buf, 2, d23), "[2,3]");
    CHECK_STR(ir_fmt_dims(buf, sizeof buf, 0, d23), "[]");
    CHECK_STR(ir_fmt_dims(buf, sizeof buf, 2, du), "[?,4]");
    CHECK_STR(ir_fmt_dims(buf, 4, 2, d23), "[2,");
    CHECK_EQ_INT(ir_numel(2, d23), 6);
    CHECK_EQ_INT(ir_numel(0, d23), 1);
    CHECK_EQ_INT(ir_numel(2, du), -1);

    int r;
    int64_t d[8];
    int64_t a1[] = {2, 1, 3}, b1[] = {4, 1};
    CHECK_EQ_INT(bc(3, a1, 2, b1, &r, d), TJ_OK);
    CHECK_EQ_INT(r, 3);
    CHECK(d[0] == 2 && d[1] == 4 && d[2] == 3);
    int64_t s[] = {5};
    CHECK_EQ_INT(bc(0, s, 1, s, &r, d), TJ_OK);
    CHECK(r == 1 && d[0] == 5);
    CHECK_EQ_INT(bc(0, s, 0, s, &r, d), TJ_OK);
    CHECK_EQ_INT(r, 0);
    /* unknown dims: (-1,1)->-1, (-1,n)->n, (-1,-1)->-1 */
    int64_t ua[] = {-1, -1, -1, 7}, ub[] = {1, 5, -1, 1};
    CHECK_EQ_INT(bc(4, ua, 4, ub, &r, d), TJ_OK);
    CHECK(d[0] == -1 && d[1] == 5 && d[2] == -1 && d[3] == 7);
    CHECK_EQ_INT(bc(4, ub, 4, ua, &r, d), TJ_OK);
    CHECK(d[0] == -1 && d[1] == 5 && d[2] == -1 && d[3] == 7);
    /* errors */
    int64_t e4[] = {4};
    CHECK_EQ_INT(bc(2, d23, 1, e4, &r, d), TJ_ERR_SHAPE);
    CHECK_HAS(ir_last_error(), "add: incompatible shapes for broadcasting: [2,3] vs [4]");
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_SHAPE);
    int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_EQ_INT(bc(9, big, 1, e4, &r, d), TJ_ERR_SHAPE);
    CHECK_HAS(ir_last_error(), "rank");

    ir_clear_error();
    CHECK_STR(ir_last_error(), "");
    CHECK_EQ_INT(ir_last_code(), TJ_OK);
    CHECK_EQ_INT(ir_errorf(TJ_ERR_DTYPE, "x: %d", 42), TJ_ERR_DTYPE);
    CHECK_STR(ir_last_error(), "x: 42");
    ir_errorf(TJ_ERR_SHAPE, "outer: %s", ir_last_error()); /* may wrap its own message */
    CHECK_STR(ir_last_error(), "outer: x: 42");
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_SHAPE);
    return check_done();
}
