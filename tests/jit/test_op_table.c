/* The op table walked piece by piece, so that the next op cannot be half-added. Every op in
 * ops.def must have an instance below (a small program reaching it through the public API; the
 * gradient companions through a tape); for each one the test checks:
 *   - inference and the reference kernel: the program runs eagerly;
 *   - the compiled path (LLVM lowering or a reference-kernel step of the CPU plan, and the
 *     executor): the compiled result equals the eager one, and the optimized graph holds the op;
 *   - the printer and the parser: the optimized graph's text parses back to the same text;
 *   - the per-op code tables, each indexed by op: a gradient rule, "no gradient" or a reason
 *     (api/grad.c); a shape rule unless the op is inferred against its graph (ir/infer.c); a
 *     reference kernel unless the executor runs the op (runtime/kernels/dispatch.c); a
 *     decomposition exactly for the composite ops (passes/decompose.c, whose values
 *     tests/jit/test_decompose.c checks); the CPU generator's elementwise lowering exactly for
 *     the elementwise ops (jit/cpu/llvm/ew_ops.c); simplifications (passes/simplify.c) never for
 *     an effect, a random op, control flow or a source;
 *   - the dtype class column against the reference kernels: every dtype in the class of an
 *     elementwise op, a reduction, softmax or matmul runs on the op's reference kernel
 *     (inference, which reads the class, refuses the others: tests/ir/test_op_columns.c);
 *   - the idempotent and involution flags on values: f(f(x)) is f(x), or x, bit for bit, for
 *     every dtype of the op's class.
 * A new op without an instance fails here, naming it. */
#include <tracejit.h>

#include "api/grad.h"
#include "check.h"
#include "ir/ir.h"
#include "jit/cpu/cpu.h"
#include "passes/passes.h"

static tj_variable *var;
static int printed;
static void sink(const char *line, void *user) {
    (void)line, (void)user;
    printed++;
}
static void callback(void *user, tj_tensor *x) {
    (void)user, (void)x;
}
static tj_tensor *half(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_mul(a[0], tj_scalar_f64(0.5));
}
static tj_tensor *big(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_greater(tj_sum(a[0], 0, NULL, 0), tj_scalar_f64(0.01));
}
static tj_tensor *step_i(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u; /* i, x */
    return tj_add(a[1], tj_cast(a[0], TJ_F64));
}
static tj_tensor *scan_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u; /* c, x_t */
    tj_tensor *c = tj_add(a[0], a[1]);
    tj_tensor *r[2] = {c, tj_mul(c, a[1])};
    return tj_tuple(2, r);
}

/* d/dx sum(f(x) * w) through a tape, for the gradient companions */
static tj_tensor *grad_of(tj_tensor *x, int which) {
    tj_tape *t = tj_tape_new(0);
    tj_tape_watch(t, x);
    int64_t idx[2] = {1, 0}, d1[1] = {2}, b[4] = {0}, e[4] = {1, 2, 2, 1}, s[4] = {1, 1, 2, 1};
    int k2[2] = {2, 2};
    tj_tensor *x4 = tj_reshape(x, 4, (int64_t[]){1, 2, 3, 1});
    tj_tensor *y;
    switch (which) {
    case 0:
        y = tj_slice(x4, b, e, s);
        break;
    case 1:
        y = tj_gather(x, tj_tensor_from_data(TJ_I64, 1, d1, idx), 0);
        break;
    case 2:
        y = tj_conv2d(x4, tj_ones(TJ_F64, 4, (int64_t[]){2, 2, 1, 2}), NULL, TJ_PAD_VALID, NULL);
        break;
    case 3:
        y = tj_max_pool2d(x4, k2, NULL, TJ_PAD_VALID);
        break;
    default:
        y = tj_avg_pool2d(x4, k2, NULL, TJ_PAD_VALID);
        break;
    }
    tj_tensor *g = NULL;
    tj_status st = tj_tape_gradient(t, tj_sum(tj_mul(y, y), 0, NULL, 0), NULL, 1, &x, &g);
    tj_tape_free(t);
    return st ? tj_error_new(st, "%s", tj_last_error()) : g;
}

/* conv2d's filter gradient: the gradient with respect to the filter */
static tj_tensor *filter_grad(tj_tensor *x) {
    tj_tensor *w =
        tj_reshape(tj_slice(x, NULL, (int64_t[]){2, 2}, NULL), 4, (int64_t[]){2, 2, 1, 1});
    tj_tape *t = tj_tape_new(0);
    tj_tape_watch(t, w);
    tj_tensor *y =
        tj_conv2d(tj_reshape(x, 4, (int64_t[]){1, 2, 3, 1}), w, NULL, TJ_PAD_VALID, NULL);
    tj_tensor *g = NULL;
    tj_status st = tj_tape_gradient(t, tj_sum(tj_mul(y, y), 0, NULL, 0), NULL, 1, &w, &g);
    tj_tape_free(t);
    return st ? tj_error_new(st, "%s", tj_last_error()) : g;
}

static int cur_op;

/* An instance of op `op` on x (float64 [2, 3]); NULL: none written (the test fails). */
static tj_tensor *instance(int op, tj_tensor *x) {
    int64_t d6[1] = {6}, d23[2] = {2, 3}, d32[2] = {3, 2}, i2[1] = {2};
    int64_t idx[2] = {2, 0};
    int ax1[1] = {1};
    tj_tensor *i64 = tj_tensor_from_data(TJ_I64, 1, i2, idx);
    tj_tensor *lab = tj_cast(i64, TJ_I32);
    tj_tensor *pos = tj_add(tj_abs(x), tj_scalar_f64(0.5));
    switch (op) {
    case IR_OP_CONST:
        return tj_add(x, tj_ones(TJ_F64, 2, d23));
    case IR_OP_PARAM:
        return tj_mul(x, x);
    case IR_OP_VAR_READ:
        return tj_add(x, tj_variable_read(var));
    case IR_OP_EYE:
        return tj_matmul(tj_eye(TJ_F64, 2, 2), x);
    case IR_OP_RANGE:
        return tj_add(x, tj_range(TJ_F64, 0, 3, 1));
    case IR_OP_RANDOM_UNIFORM:
        return tj_add(x, tj_random_uniform(TJ_F64, 2, d23, 0, 1, 7));
    case IR_OP_RANDOM_NORMAL:
        return tj_add(x, tj_random_normal(TJ_F64, 2, d23, 0, 1, 7));
    case IR_OP_NEG:
        return tj_neg(x);
    case IR_OP_ABS:
        return tj_abs(x);
    case IR_OP_SIGN:
        return tj_sign(x);
    case IR_OP_EXP:
        return tj_exp(x);
    case IR_OP_LOG:
        return tj_log(pos);
    case IR_OP_SQRT:
        return tj_sqrt(pos);
    case IR_OP_RSQRT:
        return tj_rsqrt(pos);
    case IR_OP_TANH:
        return tj_tanh(x);
    case IR_OP_SIGMOID:
        return tj_sigmoid(x);
    case IR_OP_RELU:
        return tj_relu(x);
    case IR_OP_SIN:
        return tj_sin(x);
    case IR_OP_COS:
        return tj_cos(x);
    case IR_OP_ATAN:
        return tj_atan(x);
    case IR_OP_ASIN:
        return tj_asin(tj_tanh(x)); /* inside [-1, 1] */
    case IR_OP_ACOS:
        return tj_acos(tj_tanh(x));
    case IR_OP_ERF:
        return tj_erf(x);
    case IR_OP_FLOOR:
        return tj_floor(x);
    case IR_OP_CEIL:
        return tj_ceil(x);
    case IR_OP_ROUND:
        return tj_round(x);
    case IR_OP_LOGICAL_NOT:
        return tj_logical_not(tj_greater(x, tj_scalar_f64(0)));
    case IR_OP_ISNAN:
        return tj_isnan(tj_log(x));
    case IR_OP_ISINF:
        return tj_isinf(tj_div(x, tj_floor(x)));
    case IR_OP_CAST:
        return tj_cast(x, TJ_I32);
    case IR_OP_ADD:
        return tj_add(x, pos);
    case IR_OP_SUB:
        return tj_sub(x, pos);
    case IR_OP_MUL:
        return tj_mul(x, pos);
    case IR_OP_DIV:
        return tj_div(x, pos);
    case IR_OP_FLOORDIV:
        return tj_floordiv(x, pos);
    case IR_OP_MOD:
        return tj_mod(x, pos);
    case IR_OP_POW:
        return tj_pow(pos, x);
    case IR_OP_MAXIMUM:
        return tj_maximum(x, tj_neg(x));
    case IR_OP_MINIMUM:
        return tj_minimum(x, tj_neg(x));
    case IR_OP_EQ:
        return tj_equal(x, tj_neg(x));
    case IR_OP_NE:
        return tj_not_equal(x, tj_neg(x));
    case IR_OP_LT:
        return tj_less(x, pos);
    case IR_OP_LE:
        return tj_less_equal(x, pos);
    case IR_OP_GT:
        return tj_greater(x, pos);
    case IR_OP_GE:
        return tj_greater_equal(x, pos);
    case IR_OP_LOGICAL_AND:
        return tj_logical_and(tj_greater(x, tj_scalar_f64(0)), tj_less(x, tj_scalar_f64(0.5)));
    case IR_OP_LOGICAL_OR:
        return tj_logical_or(tj_greater(x, tj_scalar_f64(0)), tj_less(x, tj_scalar_f64(-0.5)));
    case IR_OP_SHIFT_LEFT: /* as float, for the comparison with eager */
        return tj_cast(tj_left_shift(tj_cast(pos, TJ_I16), tj_cast(pos, TJ_I16)), TJ_F64);
    case IR_OP_SHIFT_RIGHT:
        return tj_cast(
            tj_right_shift(tj_cast(tj_neg(tj_mul(pos, pos)), TJ_I64), tj_cast(pos, TJ_I64)),
            TJ_F64);
    case IR_OP_WHERE:
        return tj_where(tj_greater(x, tj_scalar_f64(0)), x, pos);
    case IR_OP_MATMUL:
        return tj_matmul(x, tj_reshape(x, 2, d32));
    case IR_OP_SUM:
        return tj_sum(x, 1, ax1, 0);
    case IR_OP_MEAN:
        return tj_mean(x, 1, ax1, 1);
    case IR_OP_MAX:
        return tj_max(x, 0, NULL, 0);
    case IR_OP_MIN:
        return tj_min(x, 1, ax1, 0);
    case IR_OP_PROD:
        return tj_prod(x, 1, ax1, 0);
    case IR_OP_ARGMAX:
        return tj_argmax(x, 1);
    case IR_OP_ARGMIN:
        return tj_argmin(x, 0);
    case IR_OP_SOFTMAX:
        return tj_softmax(x, 1);
    case IR_OP_LOG_SOFTMAX:
        return tj_log_softmax(x, 0);
    case IR_OP_RESHAPE:
        return tj_reshape(x, 1, d6);
    case IR_OP_TRANSPOSE:
        return tj_transpose(x, NULL);
    case IR_OP_BROADCAST_TO:
        return tj_broadcast_to(tj_sum(x, 1, ax1, 1), 2, d23);
    case IR_OP_EXPAND_DIMS:
        return tj_expand_dims(x, 0);
    case IR_OP_SQUEEZE:
        return tj_squeeze(tj_sum(x, 1, ax1, 1), 0, NULL);
    case IR_OP_CONCAT: {
        tj_tensor *xs[2] = {x, pos};
        return tj_concat(2, xs, 1);
    }
    case IR_OP_SLICE:
        return tj_slice(x, NULL, NULL, (int64_t[]){1, -1});
    case IR_OP_GATHER:
        return tj_gather(x, i64, 1);
    case IR_OP_SLICE_GRAD:
        return grad_of(x, 0);
    case IR_OP_SCATTER_ADD:
        return grad_of(x, 1);
    case IR_OP_CONV2D:
    case IR_OP_CONV2D_GRAD_INPUT:
        return grad_of(x, 2);
    case IR_OP_CONV2D_GRAD_FILTER:
        return filter_grad(x);
    case IR_OP_MAX_POOL2D:
    case IR_OP_MAX_POOL2D_GRAD:
        return grad_of(x, 3);
    case IR_OP_AVG_POOL2D:
    case IR_OP_AVG_POOL2D_GRAD:
        return grad_of(x, 4);
    case IR_OP_ONE_HOT:
        return tj_one_hot(i64, 4, 1, 0, TJ_F64);
    case IR_OP_SPARSE_XENT:
        return tj_sparse_softmax_cross_entropy(lab, x);
    case IR_OP_PRINT:
        tj_print("op table", 1, &x);
        return tj_neg(x);
    case IR_OP_HOST_CALLBACK:
        tj_host_callback((void *)callback, NULL, 1, &x);
        return tj_neg(x);
    case IR_OP_ASSIGN:
        return tj_assign(var, tj_add(x, tj_scalar_f64(1)));
    case IR_OP_COND:
    case IR_OP_GET:
        return tj_cond(tj_greater(tj_sum(x, 0, NULL, 0), tj_scalar_f64(0)), half, half, 1, &x,
                       NULL);
    case IR_OP_WHILE:
        return tj_while_loop(big, half, 1, &x, NULL);
    case IR_OP_FOR:
        return tj_for_range(tj_scalar_i64(0), tj_scalar_i64(3), tj_scalar_i64(1), step_i, 1, &x,
                            NULL);
    case IR_OP_SCAN: {
        tj_tensor *c = tj_zeros(TJ_F64, 1, (int64_t[]){3});
        tj_tensor *r = tj_scan(scan_body, 1, &c, 1, &x, NULL);
        return tj_tuple_get(r, 1);
    }
    case IR_OP_UPDATE_INDEX:
    case IR_OP_READ_INDEX: {
        tj_tensor *ta = tj_tensor_array_new(TJ_F64, 2, 1, (int64_t[]){3});
        tj_tensor *row = tj_squeeze(tj_slice(x, NULL, (int64_t[]){1, 3}, NULL), 0, NULL);
        ta = tj_tensor_array_write(ta, tj_scalar_i64(1), row);
        return tj_tensor_array_read(ta, tj_scalar_i64(1));
    }
    default:
        return NULL;
    }
}

static tj_tensor *program(tj_tensor *x) {
    tj_tensor *r = instance(cur_op, x);
    return r ? r : tj_error_new(TJ_ERR_UNSUPPORTED, "no instance");
}

/* A [2, 3] tensor of dtype dt from small values (no zeros: integer divisions run). */
static tj_tensor *sample(int dt) {
    static const double v[6] = {3.7, -2.5, 1, 4, -0.0, 0.4};
    static const double pos[6] = {3, 2, 1, 4, 5, 6};
    tj_tensor *t = rt_tensor_alloc(dt, 2, (int64_t[]){2, 3});
    for (int k = 0; t && k < 6; k++) {
        double x = ir_dtype_is_float(dt) ? v[k] : pos[k];
        void *e = (char *)t->data + k * ir_dtype_size(dt);
        if (dt == TJ_F32)
            *(float *)e = (float)x;
        else if (dt == TJ_F64)
            *(double *)e = x;
        else if (ir_dtype_is_half(dt))
            *(uint16_t *)e = ir_half_from_f64(dt, x);
        else if (dt != TJ_STRING)
            ir_int_put(dt, e, dt == TJ_BOOL ? k & 1 : (int64_t)x);
    }
    return t;
}

/* op's reference kernel on inputs of dtype dt; the result (unscoped) or NULL. */
static tj_tensor *ref_run(int op, int dt, tj_tensor *const *ins) {
    int n = ir_ops[op].n_in;
    ir_node p = {.op = (uint16_t)op, .n_in = (uint32_t)n};
    const ir_node *d[2] = {0};
    ir_node desc[2];
    for (int k = 0; k < n; k++) {
        rt_desc(ins[k], &desc[k]);
        d[k] = &desc[k];
    }
    if (op == IR_OP_MATMUL) { /* [2, 3] x [3, 2] */
        desc[1].dims[0] = 3, desc[1].dims[1] = 2;
    }
    if (ir_infer(&p, d, (uint32_t)n) != TJ_OK)
        return NULL;
    tj_tensor *out = rt_tensor_alloc(p.dtype, p.rank, p.dims), *b = NULL;
    tj_tensor *in2[2] = {ins[0], n > 1 ? ins[1] : NULL};
    if (op == IR_OP_MATMUL)
        in2[1] = b = rt_tensor_view(ins[1], 2, (int64_t[]){3, 2});
    tj_status st = out ? rt_ref_kernel(&p, in2, out) : TJ_ERR_OOM;
    rt_release(b);
    if (st) {
        rt_release(out);
        return NULL;
    }
    return out;
}

static void classes(void) {
    for (int op = 0; op < IR_N_OPS; op++) {
        const ir_op_info *o = &ir_ops[op];
        bool checked = ((o->flags & (IR_F_EW | IR_F_RED)) || op == IR_OP_SOFTMAX ||
                        op == IR_OP_LOG_SOFTMAX || op == IR_OP_MATMUL) &&
                       op != IR_OP_WHERE && op != IR_OP_CAST;
        for (int dt = 0; checked && dt < TJ_N_DTYPES; dt++) {
            if (!ir_dtype_in_class(dt, o->dtypes) || dt == TJ_STRING)
                continue;
            tj_tensor *a = sample(dt), *b = sample(dt), *ins[2] = {a, b};
            tj_tensor *r = ref_run(op, dt, ins);
            CHECK_MSG(r != NULL, "%s on %s (in its class %s): %s", o->name, ir_dtype_name(dt),
                      ir_dtype_class_name(o->dtypes), tj_last_error());
            /* idempotent: f(f(x)) = f(x); an involution: f(f(x)) = x, bit for bit */
            if (r && (o->flags & (IR_F_IDEMP | IR_F_INVOL))) {
                tj_tensor *rr = ref_run(op, dt, &r);
                const tj_tensor *want = (o->flags & IR_F_INVOL) ? a : r;
                CHECK_MSG(rr && !memcmp(rr->data, want->data, 6 * ir_dtype_size(dt)),
                          "%s on %s: f(f(x)) is not %s", o->name, ir_dtype_name(dt),
                          (o->flags & IR_F_INVOL) ? "x" : "f(x)");
                rt_release(rr);
            }
            rt_release(r);
            rt_release(a);
            rt_release(b);
        }
    }
}

int main(void) {
    classes();
    tj_set_print_sink(sink, NULL);
    int64_t d23[2] = {2, 3};
    double xv[6] = {0.3, -1.2, 2.5, -0.7, 0.9, 1.6};
    tj_tensor *x = tj_tensor_from_data(TJ_F64, 2, d23, xv);
    tj_tensor *zero = tj_zeros(TJ_F64, 2, d23);
    var = tj_variable_new(zero, "v");
    tj_spec spec = {TJ_F64, 2, {2, 3}, NULL};
    for (int op = 0; op < IR_N_OPS; op++) {
        const char *name = ir_ops[op].name;
        cur_op = op;
        tj_scope_begin();
        /* the per-op code, in tables indexed by op: the gradient rule (api/grad.c), the shape
         * rule (ir/infer.c), the reference kernel (runtime/kernels/dispatch.c) and the
         * decomposition (passes/decompose.c); NULL exactly where the op's flags say */
        unsigned fl = ir_ops[op].flags;
        CHECK_MSG(api_grad_rules[op].kind != API_GRAD_MISSING, "%s: no gradient entry", name);
        CHECK_MSG(!ir_shape_rules[op] == ((fl & IR_F_CF) || op == IR_OP_GET),
                  "%s: a shape rule exactly unless it is inferred against its graph", name);
        CHECK_MSG(!rt_ref_kernels[op] == !!(fl & IR_F_PLUMB),
                  "%s: a reference kernel exactly unless the executor runs it", name);
        CHECK_MSG(!pass_decompositions[op] == !(fl & IR_F_COMPOSITE),
                  "%s: a decomposition exactly when composite", name);
        CHECK_MSG(!pass_simplify_rules[op] || !(fl & (IR_F_SIDE | IR_F_RAND | IR_F_CF | IR_F_SRC)),
                  "%s: a rewrite for an effect, a random op, control flow or a source", name);
        /* the CPU code generator's elementwise lowering: every elementwise op has one, and
         * broadcast_to (an identity under the loop's broadcast strides) */
        CHECK_MSG(jit_cpu_unavailable() || jit_cpu_codegen_linked.lowers(op) ==
                                               (!!(fl & IR_F_EW) || op == IR_OP_BROADCAST_TO),
                  "%s: an elementwise lowering exactly for the elementwise ops and broadcast_to",
                  name);
        /* an instance, eagerly: inference and the reference kernel */
        tj_tensor *e = instance(op, x);
        CHECK_MSG(e != NULL, "op %s has no instance in tests/jit/test_op_table.c", name);
        if (!e) {
            tj_scope_end();
            continue;
        }
        CHECK_MSG(tj_status_of(e) == TJ_OK, "%s eager: %s", name, tj_error_message(e));
        if (op == IR_OP_ASSIGN) /* the compiled run assigns again: start from the same value */
            tj_assign(var, zero);
        /* compiled: the same values, and the op in the optimized graph */
        tj_function *f = tj_function_new(name, (void *)program, 1, NULL);
        tj_tensor *c = tj_call(f, 1, &x);
        CHECK_MSG(tj_status_of(c) == TJ_OK, "%s compiled: %s", name, tj_error_message(c));
        if (!tj_status_of(c) && !tj_status_of(e)) {
            CHECK_EQ_INT(tj_tensor_numel(c), tj_tensor_numel(e));
            for (int64_t i = 0; i < tj_tensor_numel(e) && i < tj_tensor_numel(c); i++) {
                double a = tj_tensor_get_f64(c, i), b = tj_tensor_get_f64(e, i);
                CHECK_MSG(a == b || fabs(a - b) <= 1e-6 * fmax(1, fabs(b)) ||
                              op == IR_OP_RANDOM_NORMAL || op == IR_OP_RANDOM_UNIFORM,
                          "%s: compiled %.17g, eager %.17g at %lld", name, a, b, (long long)i);
            }
        }
        tj_concrete *cc = tj_get_eager() ? NULL : tj_function_get_concrete(f, 1, &spec);
        char *text = cc ? tj_concrete_graph_text(cc) : NULL;
        if (text) {
            char pat[64];
            snprintf(pat, sizeof pat, "= %s ", name);
            /* sources fold into constants; the rest must survive the passes */
            if (op != IR_OP_CONST && op != IR_OP_EYE && op != IR_OP_RANGE &&
                op != IR_OP_RANDOM_UNIFORM && op != IR_OP_RANDOM_NORMAL && op != IR_OP_ONE_HOT)
                CHECK_MSG(strstr(text, pat) != NULL, "%s: not in the optimized graph:\n%s", name,
                          text);
            ir_graph *g = ir_parse(text);
            CHECK_MSG(g != NULL, "%s: the printed graph does not parse: %s", name, ir_last_error());
            char *again = g ? ir_print(g) : NULL;
            CHECK_MSG(again && !strcmp(again, text), "%s: print/parse/print differs", name);
            free(again);
            ir_graph_free(g);
            free(text);
        }
        tj_function_free(f); /* c belongs to the scope */
        tj_scope_end();
    }
    CHECK(printed > 0);
    tj_set_print_sink(NULL, NULL);
    tj_variable_free(var);
    tj_release(zero);
    tj_release(x);
    return check_done();
}
