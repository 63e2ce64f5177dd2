/* ops.c — the op table, generated from ops.def with an X-macro (name, arity, flags, dtype
 * class, result rule, kernel family, named attributes), lookup by name, and the questions the
 * columns answer. Adding an op touches ops.def; this file needs no change. */
#include <string.h>

#include "ir/ir.h"

#define AI(s, n) {#n, IR_AK_INT, s, false},
#define AIO(s, n) {#n, IR_AK_INT, s, true},
#define AF(s, n) {#n, IR_AK_FLOAT, s, false},
#define AL(n) {#n, IR_AK_LIST, 0, false},
#define AL3(s, n) {#n, IR_AK_LIST3, s, false},
#define AS(n) {#n, IR_AK_STRING, 0, true},
#define AP(s, n) {#n, IR_AK_POINTER, s, true},
#define AU(s, n) {#n, IR_AK_REGION, s, false},
#define AUO(s, n) {#n, IR_AK_REGION, s, true},
const ir_op_info ir_ops[IR_N_OPS] = {
#define X(e, name, nin, flags, dtypes, result, family, attrs)                                      \
    [IR_OP_##e] = {name,                                                                           \
                   nin,                                                                            \
                   flags,                                                                          \
                   IR_DC_##dtypes,                                                                 \
                   IR_RES_##result,                                                                \
                   IR_FAM_##family,                                                                \
                   {attrs{NULL, 0, 0, false}}},
#include "ir/ops.def"
#undef X
};

const ir_attr_spec *ir_op_attr(int op, const char *name, size_t len) {
    if (op < 0 || op >= IR_N_OPS || !name)
        return NULL;
    for (const ir_attr_spec *a = ir_ops[op].attrs; a->name; a++)
        if (strlen(a->name) == len && memcmp(a->name, name, len) == 0)
            return a;
    return NULL;
}

bool ir_node_may_fail(const ir_node *n) {
    unsigned f = ir_ops[n->op].flags;
    return (f & IR_F_FAILS) || ((f & IR_F_FAILS_INT) && !ir_dtype_is_float(n->dtype));
}

bool ir_dtype_in_class(int dt, int dc) {
    switch (dc) {
    case IR_DC_NONE:
    case IR_DC_ANY:
        return dt >= 0 && dt < TJ_N_DTYPES;
    case IR_DC_NUMERIC:
        return ir_dtype_is_numeric(dt);
    case IR_DC_FLOAT:
        return ir_dtype_is_float(dt);
    case IR_DC_INT:
        return ir_dtype_is_int(dt);
    case IR_DC_BOOL:
        return dt == TJ_BOOL;
    case IR_DC_NUM_STR:
        return dt == TJ_STRING || ir_dtype_is_numeric(dt);
    case IR_DC_NUM_BOOL:
        return dt >= 0 && dt < TJ_N_DTYPES && dt != TJ_STRING;
    case IR_DC_INDEX:
        return ir_dtype_is_index(dt);
    case IR_DC_EQUAL:
        return dt >= 0 && dt < TJ_N_DTYPES && !ir_dtype_is_half(dt);
    default:
        return false;
    }
}

const char *ir_dtype_class_name(int dc) {
    static const char *const names[IR_N_DC] = {
        [IR_DC_NONE] = "any",
        [IR_DC_ANY] = "any",
        [IR_DC_NUMERIC] = "numeric",
        [IR_DC_FLOAT] = "float",
        [IR_DC_INT] = "integer",
        [IR_DC_BOOL] = "bool",
        [IR_DC_NUM_STR] = "numeric or string",
        [IR_DC_NUM_BOOL] = "numeric or bool",
        [IR_DC_INDEX] = "int32 or int64",
        [IR_DC_EQUAL] = "numeric, bool or string",
    };
    return dc >= 0 && dc < IR_N_DC ? names[dc] : "?";
}

int ir_op_from_name(const char *s, size_t len) {
    if (!s)
        return -1;
    for (int i = 0; i < IR_N_OPS; i++) {
        const char *n = ir_ops[i].name;
        if (strlen(n) == len && memcmp(n, s, len) == 0)
            return i;
    }
    return -1;
}
