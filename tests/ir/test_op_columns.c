/* test_op_columns.c — every column of the op table (ir/ops.def) checked for every op, so that the
 * data the table states is what the code does:
 *   - the attribute schema: names unique per op, each field used by one attribute, slots in
 *     range, a slice's three parts together, a blob read one way; every attribute of every op
 *     prints and parses back (the text form is generated from the schema) and an attribute the
 *     op lacks is refused by the parser;
 *   - the dtype class and the result rule: for the ops inference checks on descriptors alone
 *     (elementwise, reductions, softmax, matmul, random and range sources), every dtype is
 *     accepted exactly when it is in the op's class, with the result dtype the rule gives;
 *   - the flags and the kernel family agree with each other (elementwise ops are of the
 *     elementwise family, control flow yields tuples, a comparison gives bool, idempotent ops
 *     and involutions are unary elementwise ops, ...). tests/jit/test_op_table.c checks the
 *     idempotent and involution flags on values. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "ir/ir.h"

static int n_fields(int kind) {
    switch (kind) {
    case IR_AK_INT:
        return 4;
    case IR_AK_FLOAT:
    case IR_AK_LIST3:
        return 3;
    case IR_AK_POINTER:
    case IR_AK_REGION:
        return 2;
    default:
        return 1;
    }
}

static void schema(int op) {
    const ir_op_info *o = &ir_ops[op];
    int n = 0, list3 = 0, pointers = 0;
    bool used[8][4] = {{0}};
    for (const ir_attr_spec *a = o->attrs; a->name; a++, n++) {
        CHECK_MSG(a->kind >= IR_AK_INT && a->kind <= IR_AK_REGION, "%s.%s: kind %d", o->name,
                  a->name, a->kind);
        CHECK_MSG(a->slot < n_fields(a->kind), "%s.%s: slot %d", o->name, a->name, a->slot);
        /* one attribute per field (a list is one field, a slice's thirds three) */
        int field = a->kind == IR_AK_LIST3 ? IR_AK_LIST : a->kind;
        int slot = a->kind == IR_AK_LIST3 || a->kind == IR_AK_LIST ? 0 : a->slot;
        if (a->kind == IR_AK_LIST3)
            list3 |= 1 << a->slot;
        else
            CHECK_MSG(!used[field][slot], "%s.%s shares a field", o->name, a->name);
        used[field][slot] = true;
        pointers += a->kind == IR_AK_POINTER;
        for (const ir_attr_spec *b = o->attrs; b < a; b++)
            CHECK_MSG(strcmp(a->name, b->name) != 0, "%s: attribute %s twice", o->name, a->name);
        CHECK(ir_op_attr(op, a->name, strlen(a->name)) == a);
    }
    CHECK_MSG(n <= IR_MAX_OP_ATTRS, "%s: %d attributes", o->name, n);
    CHECK_MSG(list3 == 0 || list3 == 7, "%s: a slice's begin, end and step go together", o->name);
    CHECK_MSG(!(list3 && used[IR_AK_LIST][0] && !list3), "%s", o->name);
    CHECK_MSG(pointers == 0 || pointers == 2, "%s: a blob of two pointers", o->name);
    CHECK_MSG(!(pointers && used[IR_AK_STRING][0]), "%s: one blob, read one way", o->name);
    CHECK_MSG(!(used[IR_AK_REGION][0] || used[IR_AK_REGION][1]) || (o->flags & IR_F_CF),
              "%s: regions belong to control flow", o->name);
    CHECK(ir_op_attr(op, "no_such_attribute", 17) == NULL);
}

static void flags(int op) {
    const ir_op_info *o = &ir_ops[op];
    unsigned f = o->flags;
    const char *nm = o->name;
    CHECK_MSG(o->dtypes < IR_N_DC && o->result < IR_N_RES && o->family < IR_N_FAM, "%s", nm);
    CHECK_MSG(!(f & IR_F_EW) == (o->family != IR_FAM_EW), "%s: elementwise family", nm);
    CHECK_MSG(!(f & IR_F_CF) == (o->family != IR_FAM_CF), "%s: control-flow family", nm);
    CHECK_MSG(!(f & IR_F_CF) == (o->result != IR_RES_TUPLE), "%s: control flow yields tuples", nm);
    CHECK_MSG(!(f & IR_F_SRC) == (o->family != IR_FAM_SOURCE), "%s: source family", nm);
    CHECK_MSG(!(f & IR_F_SRC) || o->n_in == 0, "%s: a source has no inputs", nm);
    CHECK_MSG(!(f & IR_F_RED) || o->family == IR_FAM_REDUCE, "%s: reduction family", nm);
    CHECK_MSG(!(f & IR_F_CMP) || o->result == IR_RES_BOOL, "%s: a comparison gives bool", nm);
    CHECK_MSG(!(f & IR_F_SIDE) || o->family == IR_FAM_EFFECT, "%s: effect family", nm);
    CHECK_MSG(o->family != IR_FAM_EFFECT || (f & IR_F_SIDE), "%s: effects are side effects", nm);
    CHECK_MSG(!(f & (IR_F_IDEMP | IR_F_INVOL)) || ((f & IR_F_EW) && o->n_in == 1),
              "%s: idempotent / involution: unary elementwise ops", nm);
    CHECK_MSG((f & (IR_F_IDEMP | IR_F_INVOL)) != (IR_F_IDEMP | IR_F_INVOL), "%s", nm);
    CHECK_MSG(!(f & IR_F_FAILS_INT) || ir_dtype_in_class(TJ_I32, o->dtypes),
              "%s: fails on integers it does not take", nm);
    CHECK_MSG(!(f & IR_F_PLUMB) || !(f & (IR_F_EW | IR_F_RED)), "%s: plumbing does work", nm);
    /* a composite is pure work on values: passes/decompose.c rewrites it (tests/jit/
     * test_decompose.c checks it has exactly then a decomposition, and its values both ways) */
    CHECK_MSG(!(f & IR_F_COMPOSITE) ||
                  !(f & (IR_F_SRC | IR_F_SIDE | IR_F_RAND | IR_F_CF | IR_F_PLUMB)),
              "%s: a composite must be pure work", nm);
    CHECK_MSG(o->dtypes != IR_DC_NONE || (f & IR_F_CF) || op == IR_OP_GET, "%s: no class", nm);
    CHECK_MSG(o->result != IR_RES_VOID || (f & IR_F_SIDE), "%s: void results are effects", nm);
    CHECK(strcmp(ir_dtype_class_name(o->dtypes), "?") != 0);
}

/* The dtype class and result rule against inference, for every dtype. */
static void dtypes(int op) {
    const ir_op_info *o = &ir_ops[op];
    unsigned f = o->flags;
    bool src = op == IR_OP_RANGE || op == IR_OP_RANDOM_UNIFORM || op == IR_OP_RANDOM_NORMAL ||
               op == IR_OP_EYE;
    bool checked = (f & (IR_F_EW | IR_F_RED)) || op == IR_OP_SOFTMAX || op == IR_OP_LOG_SOFTMAX ||
                   op == IR_OP_MATMUL || src;
    if (!checked || op == IR_OP_WHERE || op == IR_OP_CAST)
        return;
    for (int dt = 0; dt < TJ_N_DTYPES; dt++) {
        ir_node p = {.op = (uint16_t)op}, x = {.dtype = (uint8_t)dt, .rank = 2, .dims = {2, 3}};
        ir_node y = x;
        if (op == IR_OP_MATMUL)
            y.dims[0] = 3;
        const ir_node *ins[2] = {&x, &y};
        if (src) {
            p.dtype = (uint8_t)dt;
            p.rank = op == IR_OP_RANGE ? 1 : 2;
            p.dims[0] = op == IR_OP_RANGE ? 3 : 2;
            p.dims[1] = 2;
            p.a.f[0] = 0, p.a.f[1] = 3, p.a.f[2] = 1;
        }
        tj_status st = ir_infer(&p, ins, src ? 0 : (uint32_t)o->n_in);
        bool in = ir_dtype_in_class(dt, o->dtypes);
        CHECK_MSG(!st == in, "%s on %s: %s (class %s)", o->name, ir_dtype_name(dt),
                  st ? ir_last_error() : "accepted", ir_dtype_class_name(o->dtypes));
        if (st) {
            CHECK_EQ_INT(st, TJ_ERR_DTYPE);
            CHECK_HAS(ir_last_error(), ir_dtype_class_name(o->dtypes));
            continue;
        }
        int want = o->result == IR_RES_BOOL  ? TJ_BOOL
                   : o->result == IR_RES_I64 ? TJ_I64
                                             : dt; /* SAME, or NODE: the node's own */
        CHECK_MSG(p.dtype == want, "%s on %s gives %s", o->name, ir_dtype_name(dt),
                  ir_dtype_name(p.dtype));
    }
}

/* Every attribute of every op is printed and parsed back, from a graph of all ops (test_text.c
 * has one; here each op's attribute names must appear in its printed node). */
static const char *all_attrs =
    "graph @g {\n"
    "  graph @c {\n"
    "    %0 = param {index=0} : f32[]\n"
    "    %1 = const [1] : bool[]\n"
    "    return %1\n"
    "  }\n"
    "  graph @b {\n"
    "    %0 = param {index=0} : f32[]\n"
    "    return %0\n"
    "  }\n"
    "  %0 = param {index=0} : f32[1,4,4,2]\n"
    "  %1 = var_read {slot=0, version=2} : f32[2]\n"
    "  %2 = range {start=0, limit=4, delta=1} : f32[4]\n"
    "  %3 = random_uniform {seed=7, lo=-1, hi=1} : f32[2]\n"
    "  %4 = random_normal {seed=8, mean=0, std=2} : f32[2]\n"
    "  %5 = sum %2 {axes=[0], keepdims=1} : f32[1]\n"
    "  %6 = argmax %2 {axis=0} : i64[]\n"
    "  %7 = transpose %0 {perm=[0, 2, 1, 3]} : f32[1,4,4,2]\n"
    "  %8 = slice %2 {begin=[1], end=[3], step=[1]} : f32[2]\n"
    "  %9 = const [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] : f32[2,2,2,2]\n"
    "  %10 = conv2d %0, %9 {stride_h=1, stride_w=2, dilation_h=1, dilation_w=1, "
    "pads=[0, 1, 0, 1]} : f32[1,4,2,2]\n"
    "  %11 = max_pool2d %0 {stride_h=2, stride_w=2, window_h=2, window_w=2, pads=[0, 0, 0, 0]} : "
    "f32[1,2,2,2]\n"
    "  %12 = const [1, 0] : i64[2]\n"
    "  %13 = one_hot %12 {depth=3, on=5, off=-1} : f32[2,3]\n"
    "  %14 = print %2 {prefix=\"p\"} : void\n"
    "  %15 = assign %3 {slot=1} : f32[2]\n"
    "  %16 = const [0.5] : f32[]\n"
    "  %17 = while %16 {sub0=1, sub1=2, max_iterations=10} : tuple[]\n"
    "  %18 = get %17 {index=0} : f32[]\n"
    "  %19 = squeeze %5 {axes=[0]} : f32[]\n"
    "  %20 = host_callback %2 {callback=0x1234, user=0x5678} : void\n"
    "  return %18, %19\n"
    "  effects %14, %15, %20\n"
    "}\n";

static void text(void) {
    ir_graph *g = ir_parse(all_attrs);
    CHECK_MSG(g != NULL, "%s", ir_last_error());
    if (!g)
        return;
    char *t = ir_print(g);
    CHECK_STR(t, all_attrs);
    /* each printed attribute is in its op's schema, and the node's fields hold it */
    for (uint32_t i = 0; i < g->n_nodes && t; i++) {
        const ir_node *n = ir_node_get(g, i);
        for (const ir_attr_spec *a = ir_ops[n->op].attrs; a->name; a++) {
            if (a->kind != IR_AK_INT || !a->optional)
                continue;
            char key[64];
            snprintf(key, sizeof key, "%s=", a->name);
            if (n->a.i[a->slot])
                CHECK_MSG(strstr(t, key), "%s: %s set but not printed", ir_ops[n->op].name, key);
        }
    }
    int seen = 0; /* the fields the schema names hold the values */
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = ir_node_get(g, i);
        if (n->op == IR_OP_VAR_READ) {
            seen++;
            CHECK(n->a.i[0] == 0 && n->a.i[1] == 2);
        }
        if (n->op == IR_OP_ONE_HOT) {
            seen++;
            CHECK(n->a.i[0] == 3 && n->a.f[0] == 5 && n->a.f[1] == -1);
        }
        if (n->op == IR_OP_CONV2D) {
            seen++;
            CHECK(n->a.i[1] == 2 && n->a.n_list == 4 && n->a.list[3] == 1);
        }
        if (n->op == IR_OP_SLICE) {
            seen++;
            CHECK(n->a.n_list == 3 && n->a.list[0] == 1 && n->a.list[1] == 3);
        }
        if (n->op == IR_OP_WHILE) {
            seen++;
            CHECK(n->a.sub[0] == 1 && n->a.sub[1] == 2 && n->a.i[0] == 10);
        }
    }
    CHECK_EQ_INT(seen, 5);
    free(t);
    ir_graph_free(g);
}

int main(void) {
    for (int op = 0; op < IR_N_OPS; op++) {
        schema(op);
        flags(op);
        dtypes(op);
    }
    text();
    return check_done();
}
