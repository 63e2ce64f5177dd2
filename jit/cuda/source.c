/* source.c — CUDA C for the CUDA backend's kernels, one emitter per kind (cuda.h: JIT_CK_*). The
 * code is specialized to the graph's shapes (extents and strides are constants in the source,
 * which is the cache key: the same shapes make the same text and hit NVRTC's cache). Every
 * kernel reads its buffers from one tj_args and loops grid-stride over its work, so any grid
 * covers it. Scalar semantics come from runtime/kernels/scalar.h, whose text is in the prelude
 * (prelude.c): the host's reference kernels and these compile the same definitions. Floats
 * compute at their own width; integers wrap through uint64 as the reference kernels do. Here:
 * elementwise groups, softmax, products, views and the dispatch; reductions are source_red.c's,
 * the network ops source_nn.c's. Ops that may fail (integer division, gathers) and float to
 * integer casts are not generated: they run on the host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cuda/cuda.h"
#include "runtime/kernels/kernels.h"
#include "runtime/plan.h"

/* ---- dtypes and scalar expressions -------------------------------------------------------------
 */
const char *jit_cuda_ctype(int dt) {
    switch (dt) {
    case TJ_F32:
        return "float";
    case TJ_F64:
        return "double";
    case TJ_I8:
        return "int8_t";
    case TJ_I16:
        return "int16_t";
    case TJ_I32:
        return "int32_t";
    case TJ_I64:
        return "int64_t";
    case TJ_U8:
    case TJ_BOOL:
        return "uint8_t";
    case TJ_U16:
    case TJ_F16:
    case TJ_BF16:
        return "uint16_t";
    case TJ_U32:
        return "uint32_t";
    case TJ_U64:
        return "uint64_t";
    default:
        return NULL;
    }
}
/* scalar.h's suffix of an integer dtype */
const char *jit_cuda_sfx(int dt) {
    static const char *const s[TJ_N_DTYPES] = {
        [TJ_I8] = "i8",   [TJ_I16] = "i16", [TJ_I32] = "i32", [TJ_I64] = "i64", [TJ_U8] = "u8",
        [TJ_U16] = "u16", [TJ_U32] = "u32", [TJ_U64] = "u64", [TJ_F32] = "f32", [TJ_F64] = "f64"};
    return dt >= 0 && dt < TJ_N_DTYPES ? s[dt] : NULL;
}
static const char *utype(int dt) { /* the unsigned twin of a signed width */
    switch (dt) {
    case TJ_I8:
        return "uint8_t";
    case TJ_I16:
        return "uint16_t";
    case TJ_I32:
        return "uint32_t";
    default:
        return "uint64_t";
    }
}
static bool arith_dtype(int dt) { /* computed in kernels: not strings, not f16/bf16 */
    return ir_dtype_is_float(dt) || ir_dtype_is_int(dt) || dt == TJ_BOOL;
}

/* The C expression of elementwise node n over operands x, y, z (value names), into buf; false
 * when this backend does not generate it. */
static bool ew_expr(const ir_graph *g, const ir_node *n, const char *x, const char *y,
                    const char *z, char *buf, size_t size) {
    int dt = n->n_in ? ir_node_get(g, ir_inputs(g, n)[0])->dtype : n->dtype;
    const char *T = jit_cuda_ctype(n->dtype), *S = jit_cuda_sfx(dt);
    bool fl = ir_dtype_is_float(dt), un = ir_dtype_is_unsigned(dt), in = ir_dtype_is_int(dt);
    bool bo = dt == TJ_BOOL;
#define E(...) (snprintf(buf, size, __VA_ARGS__), true)
    switch (n->op) {
    case IR_OP_NEG:
        return fl   ? E("(-%s)", x)
               : un ? E("(%s)(0u - (uint64_t)%s)", T, x)
                    : in && E("(%s)(%s)(0u - (%s)%s)", T, utype(dt), utype(dt), x);
    case IR_OP_ABS:
        return fl   ? E("fabs(%s)", x)
               : un ? E("%s", x)
                    : in && E("(%s < 0 ? (%s)(%s)(0u - (%s)%s) : %s)", x, T, utype(dt), utype(dt),
                              x, x);
    case IR_OP_SIGN:
        return fl   ? E("(%s > (%s)0 ? (%s)1 : %s < (%s)0 ? (%s)-1 : %s)", x, T, T, x, T, T, x)
               : un ? E("(%s)(%s > 0)", T, x)
                    : in && E("(%s)((%s > 0) - (%s < 0))", T, x, x);
    case IR_OP_RELU:
        return fl   ? E("(%s > (%s)0 ? %s : (%s != %s ? %s : (%s)0))", x, T, x, x, x, x, T)
               : un ? E("%s", x)
                    : in && E("(%s > 0 ? %s : (%s)0)", x, x, T);
    case IR_OP_FLOOR:
    case IR_OP_CEIL:
    case IR_OP_ROUND:
        if (!fl)
            return in && E("%s", x);
        return E("%s(%s)",
                 n->op == IR_OP_FLOOR  ? "floor"
                 : n->op == IR_OP_CEIL ? "ceil"
                                       : "rint",
                 x);
    case IR_OP_EXP:
    case IR_OP_LOG:
    case IR_OP_SQRT:
    case IR_OP_TANH:
    case IR_OP_SIN:
    case IR_OP_COS:
    case IR_OP_ATAN:
    case IR_OP_ASIN:
    case IR_OP_ACOS:
    case IR_OP_ERF:
        return fl && E("%s(%s)", ir_ops[n->op].name, x);
    case IR_OP_RSQRT:
        return fl && E("((%s)1 / sqrt(%s))", T, x);
    case IR_OP_SIGMOID:
        return fl &&
               E("(%s >= (%s)0 ? (%s)1 / ((%s)1 + exp(-fabs(%s))) : exp(-fabs(%s)) / ((%s)1 + "
                 "exp(-fabs(%s))))",
                 x, T, T, T, x, x, T, x);
    case IR_OP_LOGICAL_NOT:
        return bo && E("(uint8_t)!%s", x);
    case IR_OP_ISNAN:
        return fl && E("(uint8_t)(%s != %s)", x, x);
    case IR_OP_ISINF:
        return fl && E("(uint8_t)(isinf(%s) != 0)", x);
    case IR_OP_CAST: {
        int to = n->dtype;
        bool fh = ir_dtype_is_half(dt), th = ir_dtype_is_half(to);
        if (fh || th) { /* through the exact double, as the reference kernel */
            char src[96];
            if (fh)
                snprintf(src, sizeof src, "tj_half_to_f64(%s, %s)", x,
                         dt == TJ_F16 ? "10, 15, 31" : "7, 127, 255");
            else if (arith_dtype(dt))
                snprintf(src, sizeof src, "(double)%s", x);
            else
                return false;
            if (th)
                return E("tj_half_from_f64(%s, %s)", src,
                         to == TJ_F16 ? "10, 15, 31" : "7, 127, 255");
            return ir_dtype_is_float(to) && E("(%s)%s", T, src); /* to an integer: the host's */
        }
        if (!arith_dtype(to) || !arith_dtype(dt))
            return false;
        if (to == TJ_BOOL)
            return !fl && E("(uint8_t)(%s != 0)", x);
        if (fl && !ir_dtype_is_float(to))
            return false; /* float to integer: the reference kernel's saturation rules */
        return E("(%s)%s", T, x);
    }
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL: {
        const char *o = n->op == IR_OP_ADD ? "+" : n->op == IR_OP_SUB ? "-" : "*";
        if (fl)
            return E("(%s %s %s)", x, o, y);
        return (in || (bo && n->op != IR_OP_SUB)) && E("(%s)(%s)((uint64_t)%s %s (uint64_t)%s)", T,
                                                       in ? (un ? T : utype(dt)) : T, x, o, y);
    }
    case IR_OP_DIV:
        return fl && E("(%s / %s)", x, y);
    case IR_OP_FLOORDIV:
        return fl && E("floor(%s / %s)", x, y);
    case IR_OP_MOD:
        return fl && E("fmod_py_%s(%s, %s)", S, x, y);
    case IR_OP_POW:
        return fl && E("pow(%s, %s)", x, y);
    case IR_OP_MAXIMUM:
    case IR_OP_MINIMUM: {
        bool mx = n->op == IR_OP_MAXIMUM;
        if (fl)
            return E("%s_nan_%s(%s, %s)", mx ? "fmax" : "fmin", S, x, y);
        return (in || bo) && E("(%s %s %s ? %s : %s)", x, mx ? ">" : "<", y, x, y);
    }
    case IR_OP_EQ:
    case IR_OP_NE:
    case IR_OP_LT:
    case IR_OP_LE:
    case IR_OP_GT:
    case IR_OP_GE: {
        static const char *const c[] = {"==", "!=", "<", "<=", ">", ">="};
        return (fl || in || bo) && E("(uint8_t)(%s %s %s)", x, c[n->op - IR_OP_EQ], y);
    }
    case IR_OP_LOGICAL_AND:
        return bo && E("(uint8_t)(%s && %s)", x, y);
    case IR_OP_LOGICAL_OR:
        return bo && E("(uint8_t)(%s || %s)", x, y);
    case IR_OP_SHIFT_LEFT:
    case IR_OP_SHIFT_RIGHT:
        return in && E("%s%s_%s(%s, %s)", un ? "u" : "i", n->op == IR_OP_SHIFT_LEFT ? "shl" : "shr",
                       S, x, y);
    case IR_OP_WHERE: { /* halves too: their bits chosen */
        int vt = n->dtype;
        return (arith_dtype(vt) || ir_dtype_is_half(vt)) && E("(%s ? %s : %s)", x, y, z);
    }
    default:
        return false;
    }
#undef E
}

/* Whether node id is an elementwise node this backend's kernels compute. */
static bool ew_supported(const ir_graph *g, uint32_t id) {
    const ir_node *n = ir_node_get(g, id);
    bool halves = n->op == IR_OP_CAST || n->op == IR_OP_WHERE; /* f16/bf16 storage: these two */
    if (!(ir_ops[n->op].flags & IR_F_EW) || ir_node_may_fail(n) ||
        !(arith_dtype(n->dtype) || (halves && ir_dtype_is_half(n->dtype))) || n->n_in > 3)
        return false;
    for (uint32_t k = 0; k < n->n_in; k++) {
        int dt = ir_node_get(g, ir_inputs(g, n)[k])->dtype;
        if (!(arith_dtype(dt) || (halves && ir_dtype_is_half(dt))))
            return false;
    }
    char buf[512];
    return ew_expr(g, n, "x", "y", "z", buf, sizeof buf);
}

bool jit_cuda_fusable(const ir_graph *g, uint32_t id, void *user) {
    (void)user;
    return ew_supported(g, id);
}

/* ---- kernels ------------------------------------------------------------------------------------
 */
/* Blocks for `work` items of `block` each: at most TJ_CUDA_MAX_BLOCKS (the kernels loop over
 * the rest), at least 1. */
unsigned jit_cuda_grid(int64_t work, unsigned block) {
    int64_t blocks = (work + block - 1) / block, most = rt_config_get()->cuda_max_blocks;
    return (unsigned)(blocks < 1 ? 1 : blocks > most ? most : blocks);
}

uint32_t *jit_cuda_ids_dup(const uint32_t *a, uint32_t n) {
    uint32_t *p = malloc((n + 1) * sizeof *p);
    if (p && n)
        memcpy(p, a, n * sizeof *p);
    return p;
}

/* The buffers' declarations: i<k> for inputs, o<k> for outputs, typed by their nodes. */
void jit_cuda_declare_bufs(jit_sbuf *b, const ir_graph *g, const jit_cuda_kernel *k) {
    for (uint32_t i = 0; i < k->n_in + k->n_out; i++) {
        bool out = i >= k->n_in;
        const ir_node *n = ir_node_get(g, out ? k->out[i - k->n_in] : k->in[i]);
        jit_sbuf_printf(b, "    %s%s *TJ_RESTRICT %c%u = (%s%s *)a.p[%u];\n", out ? "" : "const ",
                        jit_cuda_ctype(n->dtype), out ? 'o' : 'i', out ? i - k->n_in : i,
                        out ? "" : "const ", jit_cuda_ctype(n->dtype), i);
    }
}

static void open_kernel(jit_sbuf *b, const ir_graph *g, jit_cuda_kernel *k, int kind, unsigned grid,
                        bool sync) {
    k->kind = kind;
    k->block = JIT_CUDA_BLOCK;
    k->grid[0] = grid;
    k->sync = sync;
    if (sync) /* the emulation runs a block's threads together (prelude.c) */
        jit_sbuf_printf(b, "TJ_SYNC_KERNEL(%s)\n", k->name);
    jit_sbuf_printf(b, "TJ_KERNEL %s(tj_args a) {\n", k->name);
    jit_cuda_declare_bufs(b, g, k);
}

void jit_cuda_open_threads(jit_sbuf *b, const ir_graph *g, jit_cuda_kernel *k, int kind,
                           int64_t work) {
    open_kernel(b, g, k, kind, jit_cuda_grid(work, JIT_CUDA_BLOCK), false);
    jit_sbuf_printf(b, "    for (int64_t e_ = TJ_GID; e_ < %lldLL; e_ += TJ_GSTRIDE) {\n",
                    (long long)work);
}

void jit_cuda_open_blocks(jit_sbuf *b, const ir_graph *g, jit_cuda_kernel *k, int kind,
                          int64_t rows) {
    open_kernel(b, g, k, kind, jit_cuda_grid(rows, 1), true);
}

/* The values of a group's elementwise nodes at element index `idx` (a C expression), each input
 * read at the offset its layout gives (coordinates c0.. over L's dims when not flat); stops
 * before node `stop` (IR_NONE: all of them). */
bool jit_cuda_emit_ew_body(jit_sbuf *b, const ir_graph *g, const pass_group *gr,
                           const rt_ew_layout *L, const char *idx, uint32_t stop) {
    for (uint32_t k = 0; k < gr->n_inputs; k++) {
        const ir_node *x = ir_node_get(g, gr->inputs[k]);
        jit_sbuf_printf(b, "        %s v%u = i%u[", jit_cuda_ctype(x->dtype), gr->inputs[k], k);
        if (L->scalar[k]) {
            jit_sbuf_printf(b, "0");
        } else if (L->flat) {
            jit_sbuf_printf(b, "%s", idx);
        } else {
            jit_sbuf_printf(b, "0");
            for (int d = 0; d < L->rank; d++)
                if (L->st[k][d])
                    jit_sbuf_printf(b, " + c%d * %lldLL", d, (long long)L->st[k][d]);
        }
        jit_sbuf_printf(b, "];\n");
    }
    for (uint32_t j = 0; j < gr->n_nodes && gr->nodes[j] != stop; j++) {
        uint32_t id = gr->nodes[j];
        const ir_node *n = ir_node_get(g, id);
        const uint32_t *in = ir_inputs(g, n);
        char v[3][24], e[1024];
        for (uint32_t q = 0; q < 3; q++)
            snprintf(v[q], sizeof v[q], "v%u", q < n->n_in ? in[q] : 0);
        if (!ew_expr(g, n, v[0], v[1], v[2], e, sizeof e))
            return false;
        jit_sbuf_printf(b, "        %s v%u = %s;\n", jit_cuda_ctype(n->dtype), id, e);
    }
    return true;
}

/* Coordinates c0..c<rank-1> of element index `idx` over L's dims. */
static void emit_coords(jit_sbuf *b, const rt_ew_layout *L, const char *idx) {
    if (L->flat)
        return;
    jit_sbuf_printf(b, "        int64_t r_ = %s;\n", idx);
    for (int d = L->rank - 1; d >= 0; d--)
        if (d > 0)
            jit_sbuf_printf(b, "        int64_t c%d = r_ %% %lldLL; r_ /= %lldLL;\n", d,
                            (long long)L->dims[d], (long long)L->dims[d]);
        else
            jit_sbuf_printf(b, "        int64_t c0 = r_;\n");
}

static tj_status emit_ew(jit_sbuf *b, const ir_graph *g, const pass_group *gr, jit_cuda_kernel *k) {
    rt_ew_layout L = {0};
    tj_status st = rt_ew_layout_of(g, gr->inputs, gr->n_inputs, gr->rank, gr->dims, &L);
    if (st)
        return st;
    int64_t numel = ir_numel(gr->rank, gr->dims);
    jit_cuda_open_threads(b, g, k, JIT_CK_EW, numel);
    emit_coords(b, &L, "e_");
    bool ok = jit_cuda_emit_ew_body(b, g, gr, &L, "e_", IR_NONE);
    for (uint32_t q = 0; q < gr->n_outputs; q++)
        jit_sbuf_printf(b, "        o%u[e_] = v%u;\n", q, gr->outputs[q]);
    jit_sbuf_printf(b, "    }\n}\n");
    rt_ew_layout_free(&L);
    return ok ? TJ_OK : TJ_ERR_UNSUPPORTED;
}

tj_status jit_cuda_emit_group(jit_sbuf *b, const ir_graph *g, const pass_group *gr,
                              jit_cuda_kernel *k) {
    if (gr->n_inputs + gr->n_outputs > JIT_CUDA_MAX_BUFS || (!gr->fused && !gr->reduce))
        return TJ_ERR_UNSUPPORTED;
    k->n_in = gr->n_inputs;
    k->n_out = gr->n_outputs;
    k->in = jit_cuda_ids_dup(gr->inputs, gr->n_inputs);
    k->out = jit_cuda_ids_dup(gr->outputs, gr->n_outputs);
    k->nodes = jit_cuda_ids_dup(gr->nodes, gr->n_nodes);
    k->n_nodes = gr->n_nodes;
    k->grid[1] = k->grid[2] = 1;
    if (!k->in || !k->out || !k->nodes)
        return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    size_t mark = b->n;
    tj_status st = gr->fused ? emit_ew(b, g, gr, k) : jit_cuda_emit_red(b, g, gr, k);
    k->src_off = mark;
    k->src_len = b->n - mark;
    if (st == TJ_ERR_UNSUPPORTED) {
        b->n = mark; /* drop what was written */
        if (b->s)
            b->s[mark] = 0;
        ir_clear_error();
    }
    return st;
}

/* ---- singleton nodes: softmax, products, views
 * --------------------------------------------------- */
static tj_status emit_softmax(jit_sbuf *b, const ir_graph *g, const ir_node *n, uint32_t x,
                              jit_cuda_kernel *k) {
    int dt = n->dtype;
    if ((dt != TJ_F32 && dt != TJ_F64) || n->rank < 1 || n->a.i[0] != n->rank - 1)
        return TJ_ERR_UNSUPPORTED;
    int64_t len = n->dims[n->rank - 1], numel = ir_numel(n->rank, n->dims);
    if (len <= 0 || numel <= 0)
        return TJ_ERR_UNSUPPORTED;
    int64_t rows = numel / len;
    const char *T = jit_cuda_ctype(dt), *S = jit_cuda_sfx(dt);
    bool lg = n->op == IR_OP_LOG_SOFTMAX;
    (void)x;
    jit_cuda_open_blocks(b, g, k, JIT_CK_SOFTMAX, rows);
    jit_sbuf_printf(
        b,
        "    TJ_SHARED %s sh_[%d];\n"
        "    TJ_SHARED double sd_[%d];\n"
        "    unsigned t_ = threadIdx.x;\n"
        "    for (int64_t r_ = blockIdx.x; r_ < %lldLL; r_ += gridDim.x) {\n"
        "      const %s *x_ = i0 + r_ * %lldLL;\n"
        "      %s *y_ = o0 + r_ * %lldLL;\n"
        "      %s m = -TJ_INF;\n"
        "      for (int64_t j_ = t_; j_ < %lldLL; j_ += blockDim.x) m = fmax_nan_%s(m, x_[j_]);\n"
        "      sh_[t_] = m;\n"
        "      __syncthreads();\n"
        "      for (unsigned s_ = blockDim.x / 2; s_ > 0; s_ >>= 1) {\n"
        "        if (t_ < s_) sh_[t_] = fmax_nan_%s(sh_[t_], sh_[t_ + s_]);\n"
        "        __syncthreads();\n"
        "      }\n"
        "      m = sh_[0];\n"
        "      __syncthreads();\n"
        "      double s = 0;\n"
        "      for (int64_t j_ = t_; j_ < %lldLL; j_ += blockDim.x) s += exp(x_[j_] - m);\n"
        "      sd_[t_] = s;\n"
        "      __syncthreads();\n"
        "      for (unsigned s_ = blockDim.x / 2; s_ > 0; s_ >>= 1) {\n"
        "        if (t_ < s_) sd_[t_] = sd_[t_] + sd_[t_ + s_];\n"
        "        __syncthreads();\n"
        "      }\n"
        "      s = sd_[0];\n"
        "      __syncthreads();\n",
        T, JIT_CUDA_BLOCK, JIT_CUDA_BLOCK, (long long)rows, T, (long long)len, T, (long long)len, T,
        (long long)len, S, S, (long long)len);
    if (lg)
        jit_sbuf_printf(b,
                        "      %s ls = (%s)log(s);\n"
                        "      for (int64_t j_ = t_; j_ < %lldLL; j_ += blockDim.x) y_[j_] = "
                        "x_[j_] - m - ls;\n",
                        T, T, (long long)len);
    else
        jit_sbuf_printf(b,
                        "      for (int64_t j_ = t_; j_ < %lldLL; j_ += blockDim.x) y_[j_] = "
                        "(%s)(exp(x_[j_] - m) / s);\n",
                        (long long)len, T);
    jit_sbuf_printf(b, "    }\n}\n");
    return TJ_OK;
}

/* Batch coordinates to element offsets of A, B: constants of the product's geometry. */
static void emit_mm_offsets(jit_sbuf *b, const rt_mm *mm) {
    jit_sbuf_printf(b, "    int64_t ao_ = 0, bo_ = 0, r_ = z_;\n");
    for (int d = mm->rank - 1; d >= 0; d--) {
        jit_sbuf_printf(b, "    { int64_t c_ = r_ %% %lldLL; r_ /= %lldLL;", (long long)mm->dims[d],
                        (long long)mm->dims[d]);
        if (mm->sa[d])
            jit_sbuf_printf(b, " ao_ += c_ * %lldLL;", (long long)(mm->sa[d] * mm->m * mm->k));
        if (mm->sb[d])
            jit_sbuf_printf(b, " bo_ += c_ * %lldLL;", (long long)(mm->sb[d] * mm->k * mm->n));
        jit_sbuf_printf(b, " }\n");
    }
}

static tj_status emit_mm(jit_sbuf *b, const ir_graph *g, uint32_t id, jit_cuda_kernel *k) {
    rt_mm mm;
    if (!rt_mm_of(g, id, &mm) || !ir_dtype_is_float(mm.dt) || mm.m * mm.n == 0 ||
        mm.batches > 65535 || (mm.m + 15) / 16 > 65535)
        return TJ_ERR_UNSUPPORTED;
    const char *T = jit_cuda_ctype(mm.dt);
    k->mm = mm;
    open_kernel(b, g, k, JIT_CK_MM, (unsigned)((mm.n + 15) / 16), true); /* 16x16 threads */
    k->grid[1] = (unsigned)((mm.m + 15) / 16);
    k->grid[2] = (unsigned)mm.batches;
    jit_sbuf_printf(b,
                    "    TJ_SHARED %s as_[16][17];\n"
                    "    TJ_SHARED %s bs_[16][17];\n"
                    "    int64_t z_ = blockIdx.z;\n",
                    T, T);
    emit_mm_offsets(b, &mm);
    long long M = mm.m, K = mm.k, N = mm.n;
    jit_sbuf_printf(
        b,
        "    unsigned tx_ = threadIdx.x %% 16, ty_ = threadIdx.x / 16;\n"
        "    int64_t row_ = (int64_t)blockIdx.y * 16 + ty_, col_ = (int64_t)blockIdx.x * 16 + "
        "tx_;\n"
        "    const %s *A_ = i0 + ao_;\n"
        "    const %s *B_ = i1 + bo_;\n"
        "    %s acc = 0;\n"
        "    for (int64_t k0_ = 0; k0_ < %lldLL; k0_ += 16) {\n"
        "      int64_t ka_ = k0_ + tx_, kb_ = k0_ + ty_;\n"
        "      as_[ty_][tx_] = row_ < %lldLL && ka_ < %lldLL ? A_[row_ * %lldLL + ka_] : (%s)0;\n"
        "      bs_[ty_][tx_] = kb_ < %lldLL && col_ < %lldLL ? B_[kb_ * %lldLL + col_] : (%s)0;\n"
        "      __syncthreads();\n"
        "      for (int q_ = 0; q_ < 16; q_++) acc += as_[ty_][q_] * bs_[q_][tx_];\n"
        "      __syncthreads();\n"
        "    }\n"
        "    if (row_ < %lldLL && col_ < %lldLL) o0[(z_ * %lldLL + row_) * %lldLL + col_] = acc;\n"
        "}\n",
        T, T, T, K, M, K, K, T, K, N, N, T, M, N, M, N);
    return TJ_OK;
}

/* A strided copy: out[idx] = x[base + sum idx[d] * s[d]] (rt_k_view), or contiguous for the
 * reshapes. */
static tj_status emit_copy(jit_sbuf *b, const ir_graph *g, const ir_node *n, jit_cuda_kernel *k) {
    const ir_node *x = ir_node_get(g, ir_inputs(g, n)[0]);
    int64_t base = 0, s[IR_MAX_RANK];
    int64_t numel = ir_numel(n->rank, n->dims);
    if (!jit_cuda_ctype(n->dtype) || x->dtype != n->dtype || numel < 0 ||
        ir_numel(x->rank, x->dims) < 0)
        return TJ_ERR_UNSUPPORTED;
    bool flat = n->op == IR_OP_RESHAPE || n->op == IR_OP_EXPAND_DIMS || n->op == IR_OP_SQUEEZE;
    if (!flat && rt_k_view(n, x->rank, x->dims, n->rank, n->dims, &base, s) != TJ_OK) {
        ir_clear_error();
        return TJ_ERR_UNSUPPORTED;
    }
    if (flat && ir_numel(x->rank, x->dims) != numel)
        return TJ_ERR_UNSUPPORTED;
    jit_cuda_open_threads(b, g, k, JIT_CK_COPY, numel);
    if (flat) {
        jit_sbuf_printf(b, "        o0[e_] = i0[e_];\n    }\n}\n");
        return TJ_OK;
    }
    jit_sbuf_printf(b, "        int64_t r_ = e_, off_ = %lldLL;\n", (long long)base);
    for (int d = n->rank - 1; d >= 0; d--)
        jit_sbuf_printf(b, "        off_ += (r_ %% %lldLL) * %lldLL; r_ /= %lldLL;\n",
                        (long long)n->dims[d], (long long)s[d], (long long)n->dims[d]);
    jit_sbuf_printf(b, "        o0[e_] = i0[off_];\n    }\n}\n");
    return TJ_OK;
}

tj_status jit_cuda_emit_node(jit_sbuf *b, const ir_graph *g, uint32_t id, jit_cuda_kernel *k) {
    const ir_node *n = ir_node_get(g, id);
    bool mm = n->op == IR_OP_MATMUL;
    bool sm = n->op == IR_OP_SOFTMAX || n->op == IR_OP_LOG_SOFTMAX;
    bool view = n->op == IR_OP_TRANSPOSE || n->op == IR_OP_SLICE || n->op == IR_OP_BROADCAST_TO ||
                n->op == IR_OP_RESHAPE || n->op == IR_OP_EXPAND_DIMS || n->op == IR_OP_SQUEEZE;
    int fam = ir_ops[n->op].family;
    bool nn = fam == IR_FAM_CONV || fam == IR_FAM_POOL || n->op == IR_OP_ONE_HOT ||
              n->op == IR_OP_SPARSE_XENT || n->op == IR_OP_GATHER;
    bool red = n->op >= IR_OP_SUM && n->op <= IR_OP_PROD; /* not taken as a group: any axes */
    if (!(mm || sm || view || nn || red) || (!nn && n->n_in != (mm ? 2u : 1u)) || n->n_in > 2)
        return TJ_ERR_UNSUPPORTED;
    k->n_in = n->n_in;
    k->n_out = 1;
    k->in = jit_cuda_ids_dup(ir_inputs(g, n), n->n_in);
    k->out = jit_cuda_ids_dup(&id, 1);
    k->nodes = jit_cuda_ids_dup(&id, 1);
    k->n_nodes = 1;
    k->grid[1] = k->grid[2] = 1;
    if (!k->in || !k->out || !k->nodes)
        return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    size_t mark = b->n;
    tj_status st = mm    ? emit_mm(b, g, id, k)
                   : red ? jit_cuda_emit_red_any(b, g, n, k)
                   : sm  ? emit_softmax(b, g, n, k->in[0], k)
                   : nn  ? jit_cuda_emit_nn(b, g, id, k)
                         : emit_copy(b, g, n, k);
    k->src_off = mark;
    k->src_len = b->n - mark;
    if (st == TJ_ERR_UNSUPPORTED) {
        b->n = mark;
        if (b->s)
            b->s[mark] = 0;
        ir_clear_error();
    }
    return st;
}

void jit_cuda_kernel_release(jit_cuda_kernel *k) {
    free(k->in);
    free(k->out);
    free(k->nodes);
    jit_cudnn_conv_free(k->conv);
    jit_lt_mm_free(k->lt);
    k->in = k->out = k->nodes = NULL;
    k->conv = NULL;
    k->lt = NULL;
}
