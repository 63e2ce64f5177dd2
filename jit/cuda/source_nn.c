/* source_nn.c — the CUDA backend's kernels for the network ops (cuda.h: JIT_CK_CONV, _POOL,
 * _ONE_HOT): NHWC convolutions with HWIO filters (strides, dilations, pads, groups) and their
 * input and filter gradients, max and average pooling and the max pool's gradient, one-hot.
 * Direct loops, a thread per output element, each summing its taps in the reference's order
 * (runtime/kernels/conv.c, pool.c), so the GPU and the host agree to rounding; the filter's
 * gradient a block per output with a tree in shared memory (few outputs, long sums); gathered
 * rather than scattered (the gradients loop over the outputs that read an element), so no
 * atomics and the same sums every run. Geometry comes from the runtime's own
 * rt_conv_geom_of/rt_pool_geom_of; every extent is a constant of the source. These are the portable
 * baseline: where cuDNN takes a convolution (cudnn.c), its kernel is the filter's layout swap
 * instead, and cuDNN's call does the sums. */
#include <stdint.h>
#include <stdio.h>

#include "jit/cuda/cuda.h"
#include "runtime/kernels/conv.h"

#define LL(x) ((long long)(x))

/* The filter's gradient, dw[ky,kx,cl,o] = sum over (b, oy, ox) of x * dy: few outputs (the
 * seed CNN's first one has 800) each summing many products (401,408 at batch 512), so a block
 * per output: its threads stride over (b, oy, ox), then a tree in shared memory (the same order
 * every run). i0 x, i1 dy. */
static tj_status emit_filter_grad(jit_sbuf *b, const ir_graph *g, const rt_conv_geom *c, int64_t cg,
                                  int64_t og, const char *T, int64_t numel, jit_cuda_kernel *k) {
    jit_cuda_open_blocks(b, g, k, JIT_CK_CONV, numel);
    jit_sbuf_printf(b,
                    "    TJ_SHARED %s sh_[%d];\n"
                    "    unsigned t_ = threadIdx.x;\n"
                    "    for (int64_t e_ = blockIdx.x; e_ < %lldLL; e_ += gridDim.x) {\n"
                    "        int64_t o = e_ %% %lldLL, r_ = e_ / %lldLL;\n"
                    "        int64_t cl = r_ %% %lldLL; r_ /= %lldLL;\n"
                    "        int64_t kx = r_ %% %lldLL, ky = r_ / %lldLL;\n"
                    "        int64_t ch = (o / %lldLL) * %lldLL + cl;\n"
                    "        %s acc = 0;\n"
                    "        for (int64_t q_ = t_; q_ < %lldLL; q_ += blockDim.x) {\n"
                    "            int64_t ox = q_ %% %lldLL, p_ = q_ / %lldLL;\n"
                    "            int64_t oy = p_ %% %lldLL, bb = p_ / %lldLL;\n"
                    "            int64_t iy = oy * %lldLL + ky * %lldLL - %lldLL;\n"
                    "            int64_t ix = ox * %lldLL + kx * %lldLL - %lldLL;\n"
                    "            if (iy < 0 || iy >= %lldLL || ix < 0 || ix >= %lldLL) continue;\n"
                    "            acc += i0[((bb * %lldLL + iy) * %lldLL + ix) * %lldLL + ch] *\n"
                    "                   i1[((bb * %lldLL + oy) * %lldLL + ox) * %lldLL + o];\n"
                    "        }\n"
                    "        sh_[t_] = acc;\n"
                    "        __syncthreads();\n"
                    "        for (unsigned s_ = blockDim.x / 2; s_ > 0; s_ >>= 1) {\n"
                    "            if (t_ < s_) sh_[t_] += sh_[t_ + s_];\n"
                    "            __syncthreads();\n"
                    "        }\n"
                    "        if (t_ == 0) o0[e_] = sh_[0];\n"
                    "        __syncthreads();\n"
                    "    }\n}\n",
                    T, JIT_CUDA_BLOCK, LL(numel), LL(c->o), LL(c->o), LL(cg), LL(cg), LL(c->kw),
                    LL(c->kw), LL(og), LL(cg), T, LL(c->n * c->oh * c->ow), LL(c->ow), LL(c->ow),
                    LL(c->oh), LL(c->oh), LL(c->sh), LL(c->dh), LL(c->pt), LL(c->sw), LL(c->dw),
                    LL(c->pl), LL(c->h), LL(c->w), LL(c->h), LL(c->w), LL(c->c), LL(c->oh),
                    LL(c->ow), LL(c->o));
    return TJ_OK;
}

/* The filter's layout swap for cuDNN (cuda.h: dnn): a thread per element of the HWIO side
 * [kh][kw][cg][o] and its place in KRSC, [o][kh][kw][cg]; a.p[0] the source, a.p[1] the
 * destination (the program passes them: the scratch filter is not a node). */
static tj_status emit_filter_swap(jit_sbuf *b, jit_cuda_kernel *k, const rt_conv_geom *c,
                                  int64_t cg, const char *T, bool to_hwio) {
    int64_t numel = c->kh * c->kw * cg * c->o;
    k->kind = JIT_CK_CONV;
    k->block = JIT_CUDA_BLOCK;
    k->grid[0] = jit_cuda_grid(numel, JIT_CUDA_BLOCK);
    jit_sbuf_printf(b,
                    "TJ_KERNEL %s(tj_args a) {\n"
                    "    const %s *TJ_RESTRICT s_ = (const %s *)a.p[0];\n"
                    "    %s *TJ_RESTRICT d_ = (%s *)a.p[1];\n"
                    "    for (int64_t e_ = TJ_GID; e_ < %lldLL; e_ += TJ_GSTRIDE) {\n"
                    "        int64_t o = e_ %% %lldLL, r_ = e_ / %lldLL, ci = r_ %% %lldLL;\n"
                    "        int64_t t_ = (o * %lldLL + r_ / %lldLL) * %lldLL + ci;\n"
                    "        %s;\n"
                    "    }\n}\n",
                    k->name, T, T, T, T, LL(numel), LL(c->o), LL(c->o), LL(cg), LL(c->kh * c->kw),
                    LL(cg), LL(cg), to_hwio ? "d_[e_] = s_[t_]" : "d_[t_] = s_[e_]");
    return TJ_OK;
}

bool jit_cuda_conv_geom(const ir_graph *g, const ir_node *n, rt_conv_geom *c) {
    const ir_node *a = ir_node_get(g, ir_inputs(g, n)[0]), *w = ir_node_get(g, ir_inputs(g, n)[1]);
    int dt = n->dtype;
    if ((dt != TJ_F32 && dt != TJ_F64) || a->dtype != dt || w->dtype != dt || n->rank != 4 ||
        a->rank != 4 || w->rank != 4)
        return false;
    *c = n->op == IR_OP_CONV2D              ? rt_conv_geom_of(n, a->dims, w->dims, n->dims)
         : n->op == IR_OP_CONV2D_GRAD_INPUT ? rt_conv_geom_of(n, n->dims, w->dims, a->dims)
                                            : rt_conv_geom_of(n, a->dims, n->dims, w->dims);
    int64_t groups = c->groups > 1 ? c->groups : 1;
    return c->c % groups == 0 && c->o % groups == 0;
}

static tj_status emit_conv(jit_sbuf *b, const ir_graph *g, const ir_node *n, jit_cuda_kernel *k) {
    rt_conv_geom c;
    if (!jit_cuda_conv_geom(g, n, &c))
        return TJ_ERR_UNSUPPORTED;
    int64_t groups = c.groups > 1 ? c.groups : 1, cg = c.c / groups, og = c.o / groups;
    const char *T = jit_cuda_ctype(n->dtype);
    int64_t numel = ir_numel(n->rank, n->dims);
    if (k->dnn && (k->dnn = jit_cudnn_fits(&c)))
        return emit_filter_swap(b, k, &c, cg, T, n->op == IR_OP_CONV2D_GRAD_FILTER);
    if (n->op == IR_OP_CONV2D_GRAD_FILTER)
        return emit_filter_grad(b, g, &c, cg, og, T, numel, k);
    jit_cuda_open_threads(b, g, k, JIT_CK_CONV, numel);
    /* x [n,h,w,c], w [kh,kw,cg,o], y [n,oh,ow,o] */
    if (n->op == IR_OP_CONV2D) { /* i0 x, i1 w: y[b,oy,ox,o] over (ky, kx, c of o's group) */
        jit_sbuf_printf(
            b,
            "        int64_t o = e_ %% %lldLL, r_ = e_ / %lldLL;\n"
            "        int64_t ox = r_ %% %lldLL; r_ /= %lldLL;\n"
            "        int64_t oy = r_ %% %lldLL, bb = r_ / %lldLL;\n"
            "        int64_t c0 = (o / %lldLL) * %lldLL;\n"
            "        %s acc = 0;\n"
            "        for (int64_t ky = 0; ky < %lldLL; ky++) {\n"
            "          int64_t iy = oy * %lldLL + ky * %lldLL - %lldLL;\n"
            "          if (iy < 0 || iy >= %lldLL) continue;\n"
            "          for (int64_t kx = 0; kx < %lldLL; kx++) {\n"
            "            int64_t ix = ox * %lldLL + kx * %lldLL - %lldLL;\n"
            "            if (ix < 0 || ix >= %lldLL) continue;\n"
            "            const %s *xp = i0 + ((bb * %lldLL + iy) * %lldLL + ix) * %lldLL + c0;\n"
            "            const %s *wp = i1 + (ky * %lldLL + kx) * %lldLL * %lldLL + o;\n"
            "            for (int64_t ci = 0; ci < %lldLL; ci++) acc += xp[ci] * wp[ci * %lldLL];\n"
            "          }\n"
            "        }\n"
            "        o0[e_] = acc;\n",
            LL(c.o), LL(c.o), LL(c.ow), LL(c.ow), LL(c.oh), LL(c.oh), LL(og), LL(cg), T, LL(c.kh),
            LL(c.sh), LL(c.dh), LL(c.pt), LL(c.h), LL(c.kw), LL(c.sw), LL(c.dw), LL(c.pl), LL(c.w),
            T, LL(c.h), LL(c.w), LL(c.c), T, LL(c.kw), LL(cg), LL(c.o), LL(cg), LL(c.o));
    } else if (n->op == IR_OP_CONV2D_GRAD_INPUT) { /* i0 dy, i1 w: dx[b,iy,ix,ch] */
        jit_sbuf_printf(b,
                        "        int64_t ch = e_ %% %lldLL, r_ = e_ / %lldLL;\n"
                        "        int64_t ix = r_ %% %lldLL; r_ /= %lldLL;\n"
                        "        int64_t iy = r_ %% %lldLL, bb = r_ / %lldLL;\n"
                        "        int64_t grp = ch / %lldLL, cl = ch %% %lldLL;\n"
                        "        %s acc = 0;\n"
                        "        for (int64_t ky = 0; ky < %lldLL; ky++) {\n"
                        "          int64_t ty = iy + %lldLL - ky * %lldLL;\n"
                        "          if (ty < 0 || ty %% %lldLL) continue;\n"
                        "          int64_t oy = ty / %lldLL;\n"
                        "          if (oy >= %lldLL) continue;\n"
                        "          for (int64_t kx = 0; kx < %lldLL; kx++) {\n"
                        "            int64_t tx = ix + %lldLL - kx * %lldLL;\n"
                        "            if (tx < 0 || tx %% %lldLL) continue;\n"
                        "            int64_t ox = tx / %lldLL;\n"
                        "            if (ox >= %lldLL) continue;\n"
                        "            const %s *gp = i0 + ((bb * %lldLL + oy) * %lldLL + ox) * "
                        "%lldLL + grp * %lldLL;\n"
                        "            const %s *wp = i1 + ((ky * %lldLL + kx) * %lldLL + cl) * "
                        "%lldLL + grp * %lldLL;\n"
                        "            for (int64_t q = 0; q < %lldLL; q++) acc += gp[q] * wp[q];\n"
                        "          }\n"
                        "        }\n"
                        "        o0[e_] = acc;\n",
                        LL(c.c), LL(c.c), LL(c.w), LL(c.w), LL(c.h), LL(c.h), LL(cg), LL(cg), T,
                        LL(c.kh), LL(c.pt), LL(c.dh), LL(c.sh), LL(c.sh), LL(c.oh), LL(c.kw),
                        LL(c.pl), LL(c.dw), LL(c.sw), LL(c.sw), LL(c.ow), T, LL(c.oh), LL(c.ow),
                        LL(c.o), LL(og), T, LL(c.kw), LL(cg), LL(c.o), LL(og), LL(og));
    }
    jit_sbuf_printf(b, "    }\n}\n");
    return TJ_OK;
}

/* The clipped window of output (oy, ox): [y0, y1) x [x0, x1) (pool.c's WINDOW). */
static void emit_window(jit_sbuf *b, const rt_conv_geom *p, const char *oy, const char *ox) {
    jit_sbuf_printf(b,
                    "        int64_t y0 = %s * %lldLL - %lldLL, x0 = %s * %lldLL - %lldLL;\n"
                    "        int64_t y1 = y0 + %lldLL, x1 = x0 + %lldLL;\n"
                    "        y0 = y0 < 0 ? 0 : y0; x0 = x0 < 0 ? 0 : x0;\n"
                    "        y1 = y1 > %lldLL ? %lldLL : y1; x1 = x1 > %lldLL ? %lldLL : x1;\n",
                    oy, LL(p->sh), LL(p->pt), ox, LL(p->sw), LL(p->pl), LL(p->kh), LL(p->kw),
                    LL(p->h), LL(p->h), LL(p->w), LL(p->w));
}

/* A gradient's loop over the windows that read input element e_ = (bb, iy, ix, ch), each
 * window's clipped extent [y0, y1) x [x0, x1) in scope, acc (T) zeroed; the caller closes the two
 * loops ("          }\n"). */
static void open_windows_over(jit_sbuf *b, const rt_conv_geom *p, const char *T) {
    jit_sbuf_printf(
        b,
        "        int64_t ch = e_ %% %lldLL, r_ = e_ / %lldLL;\n"
        "        int64_t ix = r_ %% %lldLL; r_ /= %lldLL;\n"
        "        int64_t iy = r_ %% %lldLL, bb = r_ / %lldLL;\n"
        "        %s acc = 0;\n"
        "        int64_t oy0 = iy + %lldLL - %lldLL + 1, ox0 = ix + %lldLL - %lldLL + 1;\n"
        "        oy0 = oy0 <= 0 ? 0 : (oy0 + %lldLL - 1) / %lldLL;\n"
        "        ox0 = ox0 <= 0 ? 0 : (ox0 + %lldLL - 1) / %lldLL;\n"
        "        for (int64_t oy = oy0; oy < %lldLL && oy * %lldLL - %lldLL <= iy; oy++)\n"
        "          for (int64_t ox = ox0; ox < %lldLL && ox * %lldLL - %lldLL <= ix; ox++) {\n",
        LL(p->c), LL(p->c), LL(p->w), LL(p->w), LL(p->h), LL(p->h), T, LL(p->pt), LL(p->kh),
        LL(p->pl), LL(p->kw), LL(p->sh), LL(p->sh), LL(p->sw), LL(p->sw), LL(p->oh), LL(p->sh),
        LL(p->pt), LL(p->ow), LL(p->sw), LL(p->pl));
    emit_window(b, p, "oy", "ox");
}

static tj_status emit_pool(jit_sbuf *b, const ir_graph *g, const ir_node *n, jit_cuda_kernel *k) {
    const ir_node *x = ir_node_get(g, ir_inputs(g, n)[0]);
    int dt = n->dtype;
    if ((dt != TJ_F32 && dt != TJ_F64) || x->dtype != dt || n->rank != 4 || x->rank != 4 ||
        n->a.n_list == 6) /* a dilated max pool: the host's */
        return TJ_ERR_UNSUPPORTED;
    bool grad = n->op == IR_OP_MAX_POOL2D_GRAD, avg_grad = n->op == IR_OP_AVG_POOL2D_GRAD;
    const ir_node *dy = grad ? ir_node_get(g, ir_inputs(g, n)[1]) : NULL;
    rt_conv_geom p = grad       ? rt_pool_geom_of(n, x->dims, dy->dims)
                     : avg_grad ? rt_pool_geom_of(n, n->dims, x->dims) /* x is dy: dx's dims */
                                : rt_pool_geom_of(n, x->dims, n->dims);
    if (p.kh <= 0 || p.kw <= 0 || p.pt >= p.kh || p.pl >= p.kw) /* every window holds an element */
        return TJ_ERR_UNSUPPORTED;
    const char *T = jit_cuda_ctype(dt);
    int64_t numel = ir_numel(n->rank, n->dims);
    jit_cuda_open_threads(b, g, k, JIT_CK_POOL, numel);
    const char *take = "(v > m) | ((v != v) & (m == m))"; /* NaN wins, the first maximum */
    if (avg_grad) { /* i0 dy: dx[b,iy,ix,ch] sums dy / (its window's size) over its windows */
        open_windows_over(b, &p, T);
        jit_sbuf_printf(b,
                        "        acc += i0[((bb * %lldLL + oy) * %lldLL + ox) * %lldLL + ch] / "
                        "(%s)((y1 - y0) * (x1 - x0));\n"
                        "          }\n"
                        "        o0[e_] = acc;\n",
                        LL(p.oh), LL(p.ow), LL(p.c), T);
    } else if (!grad) {
        jit_sbuf_printf(b,
                        "        int64_t ch = e_ %% %lldLL, r_ = e_ / %lldLL;\n"
                        "        int64_t ox = r_ %% %lldLL; r_ /= %lldLL;\n"
                        "        int64_t oy = r_ %% %lldLL, bb = r_ / %lldLL;\n",
                        LL(p.c), LL(p.c), LL(p.ow), LL(p.ow), LL(p.oh), LL(p.oh));
        emit_window(b, &p, "oy", "ox");
        if (n->op == IR_OP_MAX_POOL2D)
            jit_sbuf_printf(
                b,
                "        %s m = i0[((bb * %lldLL + y0) * %lldLL + x0) * %lldLL + ch];\n"
                "        for (int64_t iy = y0; iy < y1; iy++)\n"
                "          for (int64_t ix = x0; ix < x1; ix++) {\n"
                "            %s v = i0[((bb * %lldLL + iy) * %lldLL + ix) * %lldLL + ch];\n"
                "            m = (%s) ? v : m;\n"
                "          }\n"
                "        o0[e_] = m;\n",
                T, LL(p.h), LL(p.w), LL(p.c), T, LL(p.h), LL(p.w), LL(p.c), take);
        else
            jit_sbuf_printf(
                b,
                "        %s s = 0;\n"
                "        for (int64_t iy = y0; iy < y1; iy++)\n"
                "          for (int64_t ix = x0; ix < x1; ix++)\n"
                "            s += i0[((bb * %lldLL + iy) * %lldLL + ix) * %lldLL + ch];\n"
                "        o0[e_] = s / (%s)((y1 - y0) * (x1 - x0));\n",
                T, LL(p.h), LL(p.w), LL(p.c), T);
    } else { /* i0 x, i1 dy: dx[b,iy,ix,ch] sums dy over the windows whose first max it is */
        open_windows_over(b, &p, T);
        jit_sbuf_printf(b,
                        "        %s m = i0[((bb * %lldLL + y0) * %lldLL + x0) * %lldLL + ch];\n"
                        "        int64_t at = y0 * %lldLL + x0;\n"
                        "        for (int64_t wy = y0; wy < y1; wy++)\n"
                        "          for (int64_t wx = x0; wx < x1; wx++) {\n"
                        "            %s v = i0[((bb * %lldLL + wy) * %lldLL + wx) * %lldLL + ch];\n"
                        "            if (%s) { m = v; at = wy * %lldLL + wx; }\n"
                        "          }\n"
                        "        if (at == iy * %lldLL + ix) acc += i1[((bb * %lldLL + oy) * "
                        "%lldLL + ox) * %lldLL + ch];\n"
                        "          }\n"
                        "        o0[e_] = acc;\n",
                        T, LL(p.h), LL(p.w), LL(p.c), LL(p.w), T, LL(p.h), LL(p.w), LL(p.c), take,
                        LL(p.w), LL(p.w), LL(p.oh), LL(p.ow), LL(p.c));
    }
    jit_sbuf_printf(b, "    }\n}\n");
    return TJ_OK;
}

static tj_status emit_one_hot(jit_sbuf *b, const ir_graph *g, const ir_node *n,
                              jit_cuda_kernel *k) {
    const ir_node *idx = ir_node_get(g, ir_inputs(g, n)[0]);
    const char *T = jit_cuda_ctype(n->dtype);
    int64_t depth = n->a.i[0], numel = ir_numel(n->rank, n->dims);
    if ((idx->dtype != TJ_I32 && idx->dtype != TJ_I64) || !T || n->dtype == TJ_F16 ||
        n->dtype == TJ_BF16 || depth <= 0)
        return TJ_ERR_UNSUPPORTED;
    jit_cuda_open_threads(b, g, k, JIT_CK_ONE_HOT, numel);
    /* on/off as the reference stores them: a double converted to the element type */
    jit_sbuf_printf(b,
                    "        int64_t j = e_ %% %lldLL, i = e_ / %lldLL;\n"
                    "        o0[e_] = (int64_t)i0[i] == j ? (%s)%.17g : (%s)%.17g;\n"
                    "    }\n}\n",
                    LL(depth), LL(depth), T, n->a.f[0], T, n->a.f[1]);
    return TJ_OK;
}

/* sparse_softmax_xent: a block per row, as nn.c computes it (in double: the row's max, the sum
 * of exponentials, m + log(s) - x[label]); a label outside [0, C) writes NaN and the smallest
 * such row into the word after the outputs (tj_args.p[n_in + n_out]), which the launch reads
 * back to report the error the host's kernel would (backend.c). */
static tj_status emit_xent(jit_sbuf *b, const ir_graph *g, const ir_node *n, jit_cuda_kernel *k) {
    const ir_node *lg = ir_node_get(g, ir_inputs(g, n)[0]),
                  *lb = ir_node_get(g, ir_inputs(g, n)[1]);
    int dt = n->dtype;
    if ((dt != TJ_F32 && dt != TJ_F64) || lg->dtype != dt ||
        (lb->dtype != TJ_I32 && lb->dtype != TJ_I64) || lg->rank < 1)
        return TJ_ERR_UNSUPPORTED;
    int64_t C = lg->dims[lg->rank - 1], rows = ir_numel(n->rank, n->dims);
    if (rows <= 0 || rows > INT32_MAX || C <= 0 || ir_numel(lg->rank, lg->dims) != rows * C)
        return TJ_ERR_UNSUPPORTED; /* the bad row's word holds the row in 32 bits */
    const char *T = jit_cuda_ctype(dt);
    jit_cuda_open_blocks(b, g, k, JIT_CK_XENT, rows);
    jit_sbuf_printf(
        b,
        "    uint64_t *bad_ = (uint64_t *)a.p[3];\n"
        "    TJ_SHARED double sd_[%d];\n"
        "    unsigned t_ = threadIdx.x;\n"
        "    for (int64_t r_ = blockIdx.x; r_ < %lldLL; r_ += gridDim.x) {\n"
        "      const %s *x_ = i0 + r_ * %lldLL;\n"
        "      int64_t l_ = (int64_t)i1[r_];\n"
        "      double m = -(double)TJ_INF;\n"
        "      for (int64_t j_ = t_; j_ < %lldLL; j_ += blockDim.x) {\n"
        "        double v = x_[j_];\n"
        "        m = v > m || v != v ? v : m;\n"
        "      }\n"
        "      sd_[t_] = m;\n"
        "      __syncthreads();\n"
        "      for (unsigned s_ = blockDim.x / 2; s_ > 0; s_ >>= 1) {\n"
        "        if (t_ < s_) { double u = sd_[t_ + s_]; if (u > sd_[t_] || u != u) sd_[t_] = u; "
        "}\n"
        "        __syncthreads();\n"
        "      }\n"
        "      m = sd_[0];\n"
        "      __syncthreads();\n"
        "      double s = 0;\n"
        "      for (int64_t j_ = t_; j_ < %lldLL; j_ += blockDim.x) s += exp((double)x_[j_] - m);\n"
        "      sd_[t_] = s;\n"
        "      __syncthreads();\n"
        "      for (unsigned s_ = blockDim.x / 2; s_ > 0; s_ >>= 1) {\n"
        "        if (t_ < s_) sd_[t_] += sd_[t_ + s_];\n"
        "        __syncthreads();\n"
        "      }\n"
        "      if (t_ == 0) {\n"
        "        if (l_ < 0 || l_ >= %lldLL) {\n"
        "          o0[r_] = (%s)(TJ_INF * 0.0f);\n"
        "          tj_atomic_min_u64(bad_, ((uint64_t)r_ << 32) | (uint32_t)(l_ >= -2147483647LL "
        "&& l_ <= 2147483647LL ? l_ : -2147483647LL - 1));\n"
        "        } else {\n"
        "          o0[r_] = (%s)(m + log(sd_[0]) - (double)x_[l_]);\n"
        "        }\n"
        "      }\n"
        "      __syncthreads();\n"
        "    }\n}\n",
        JIT_CUDA_BLOCK, LL(rows), T, LL(C), LL(C), LL(C), LL(C), T, T);
    return TJ_OK;
}

/* gather: o0[(o, j, t)] = i0[(o, i1[j], t)] over (outer, indices, inner), a thread per output;
 * an index outside [0, N) writes 0 and lowers the word after the buffers to (j << 32 | index)
 * (the index as int32, INT32_MIN when it does not fit): the first bad position, as the host
 * kernel reports it. Empty sides stay on the host (it checks every index even then). */
static tj_status emit_gather(jit_sbuf *b, const ir_graph *g, const ir_node *n, jit_cuda_kernel *k) {
    const ir_node *p = ir_node_get(g, ir_inputs(g, n)[0]), *ix = ir_node_get(g, ir_inputs(g, n)[1]);
    int64_t ax = n->a.i[0];
    if (n->dtype == TJ_STRING || !jit_cuda_ctype(n->dtype) || p->dtype != n->dtype ||
        (ix->dtype != TJ_I32 && ix->dtype != TJ_I64) || ax < 0 || ax >= p->rank)
        return TJ_ERR_UNSUPPORTED;
    int64_t outer = 1, inner = 1, N = p->dims[ax], m = ir_numel(ix->rank, ix->dims);
    for (int d = 0; d < ax; d++)
        outer *= p->dims[d];
    for (int d = (int)ax + 1; d < p->rank; d++)
        inner *= p->dims[d];
    int64_t total = outer * m * inner;
    if (outer < 1 || inner < 1 || m < 1 || m > INT32_MAX || total != ir_numel(n->rank, n->dims))
        return TJ_ERR_UNSUPPORTED;
    jit_cuda_open_threads(b, g, k, JIT_CK_GATHER, total);
    jit_sbuf_printf(
        b,
        "        uint64_t *bad_ = (uint64_t *)a.p[3];\n"
        "        int64_t t_ = e_ %% %lldLL, r_ = e_ / %lldLL;\n"
        "        int64_t j_ = r_ %% %lldLL, q_ = r_ / %lldLL;\n"
        "        int64_t v_ = (int64_t)i1[j_];\n"
        "        if (v_ < 0 || v_ >= %lldLL) {\n"
        "          o0[e_] = 0;\n"
        "          tj_atomic_min_u64(bad_, ((uint64_t)j_ << 32) |\n"
        "              (uint32_t)(v_ >= -2147483647LL && v_ <= 2147483647LL ? v_\n"
        "                                                                : -2147483647LL - 1));\n"
        "        } else {\n"
        "          o0[e_] = i0[(q_ * %lldLL + v_) * %lldLL + t_];\n"
        "        }\n"
        "    }\n}\n",
        LL(inner), LL(inner), LL(m), LL(m), LL(N), LL(N), LL(inner));
    return TJ_OK;
}

tj_status jit_cuda_emit_nn(jit_sbuf *b, const ir_graph *g, uint32_t id, jit_cuda_kernel *k) {
    const ir_node *n = ir_node_get(g, id);
    switch (n->op) {
    case IR_OP_CONV2D:
    case IR_OP_CONV2D_GRAD_INPUT:
    case IR_OP_CONV2D_GRAD_FILTER:
        return n->n_in == 2 ? emit_conv(b, g, n, k) : TJ_ERR_UNSUPPORTED;
    case IR_OP_MAX_POOL2D:
    case IR_OP_AVG_POOL2D:
        return n->n_in == 1 ? emit_pool(b, g, n, k) : TJ_ERR_UNSUPPORTED;
    case IR_OP_MAX_POOL2D_GRAD:
        return n->n_in == 2 ? emit_pool(b, g, n, k) : TJ_ERR_UNSUPPORTED;
    case IR_OP_AVG_POOL2D_GRAD:
        return n->n_in == 1 ? emit_pool(b, g, n, k) : TJ_ERR_UNSUPPORTED;
    case IR_OP_ONE_HOT:
        return n->n_in == 1 ? emit_one_hot(b, g, n, k) : TJ_ERR_UNSUPPORTED;
    case IR_OP_SPARSE_XENT:
        return n->n_in == 2 ? emit_xent(b, g, n, k) : TJ_ERR_UNSUPPORTED;
    case IR_OP_GATHER:
        return n->n_in == 2 ? emit_gather(b, g, n, k) : TJ_ERR_UNSUPPORTED;
    default:
        return TJ_ERR_UNSUPPORTED;
    }
}
