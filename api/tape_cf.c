/* tape_cf.c — gradients of traced control flow. A cond's is a cond on the same predicate whose
 * branches replay the forward branch (replay.c) under a tape and return the vector-Jacobian
 * product with the output gradients; a scan's (and a for_range's over constant bounds) is
 * lax.scan's transpose with rematerialised residuals: a forward scan stacks the carries entering
 * each step, then a reverse scan replays each step under a tape. */
#include <stdlib.h>
#include <string.h>

#include "api/tape.h"

/* ---- control flow: the gradient of a cond is a cond of the branches' gradients -------------- */
typedef struct cf_bwd {
    const ir_graph *region[2];
    uint32_t n_ops;          /* the branch's operands (region params), node inputs 1.. */
    const uint8_t *float_op; /* which operands get a gradient */
    uint32_t n_res;
    const uint8_t *float_res; /* which results have an output gradient among the args */
} cf_bwd;

/* A branch of the backward cond: replays the forward branch on its operands under a tape and
 * returns the vector-Jacobian product with the output gradients (args after the operands), one
 * tensor per float operand (zeros where the branch does not depend on it). */
static tj_tensor *cf_branch(int which, int n, tj_tensor *const *args, void *user) {
    const cf_bwd *c = user;
    (void)n;
    tj_tensor **outs = calloc((size_t)c->region[which]->n_outputs + 1, sizeof *outs);
    tj_tensor **grads = calloc((size_t)c->n_ops + 1, sizeof *grads);
    tj_tensor **srcs = calloc((size_t)c->n_ops + 1, sizeof *srcs);
    tj_tensor **targets = calloc((size_t)c->n_res + 1, sizeof *targets);
    tj_tensor **seeds = calloc((size_t)c->n_res + 1, sizeof *seeds);
    tj_tensor *res = NULL;
    tj_tape *tape = tj_tape_new(TJ_TAPE_UNCONNECTED_ZERO);
    tj_status st = outs && grads && srcs && targets && seeds && tape ? TJ_OK : TJ_ERR_OOM;
    uint32_t n_src = 0, n_t = 0;
    for (uint32_t k = 0; k < c->n_ops && !st; k++)
        if (c->float_op[k]) {
            srcs[n_src++] = args[k];
            st = tj_tape_watch(tape, args[k]);
        }
    if (!st)
        st = api_replay_graph(c->region[which], args, c->n_ops, outs);
    if (tape)
        tj_tape_stop(tape);
    for (uint32_t r = 0, j = c->n_ops; r < c->n_res && !st; r++)
        if (c->float_res[r]) {
            targets[n_t] = outs[r];
            seeds[n_t++] = args[j++];
        }
    if (!st)
        st = api_tape_vjp(tape, n_t, targets, seeds, n_src, srcs, grads);
    if (st)
        res = tj_error_new(st, "%s", ir_last_error());
    else
        res = n_src == 1 ? grads[0] : tj_tuple((int)n_src, grads);
    tj_tape_free(tape);
    free(outs);
    free(grads);
    free(srcs);
    free(targets);
    free(seeds);
    return res;
}
static tj_tensor *cf_then(int n, tj_tensor *const *args, void *user) {
    return cf_branch(0, n, args, user);
}
static tj_tensor *cf_else(int n, tj_tensor *const *args, void *user) {
    return cf_branch(1, n, args, user);
}

/* ---- scan: the carries are recomputed and stacked by a forward scan, then a reverse scan
 * replays each step under a tape (lax.scan's transpose, with rematerialised residuals) ------- */
typedef struct scan_bwd {
    const ir_graph *body;
    uint32_t nc, nx, ni, ny; /* carried, sequences, invariants (captures), per-step outputs */
    const uint8_t *fc, *fx, *fi, *fy; /* float-ness of each */
    uint32_t nfc, nfi;
    int is_for; /* a for_range: the body takes the index first, then the carries */
} scan_bwd;

/* The body's parameters from the carries, the sequences' rows and the invariants. */
static void body_params(const scan_bwd *s, tj_tensor **p, tj_tensor *const *c, tj_tensor *const *x,
                        tj_tensor *const *inv) {
    uint32_t m = 0;
    if (s->is_for)
        p[m++] = x[0];
    for (uint32_t k = 0; k < s->nc; k++)
        p[m++] = c[k];
    for (uint32_t k = 0; !s->is_for && k < s->nx; k++)
        p[m++] = x[k];
    for (uint32_t k = 0; k < s->ni; k++)
        p[m++] = inv[k];
}

/* (c, x_t, inv) -> (c', c): the carries entering every step, stacked */
static tj_tensor *scan_remat(int n, tj_tensor *const *args, void *user) {
    const scan_bwd *s = user;
    (void)n;
    uint32_t no = s->body->n_outputs;
    tj_tensor **outs = calloc((size_t)no + 1, sizeof *outs);
    tj_tensor **r = calloc((size_t)(2 * s->nc) + 1, sizeof *r);
    tj_tensor **p = calloc((size_t)(s->nc + s->nx + s->ni) + 1, sizeof *p);
    tj_tensor *res = NULL;
    tj_status st = outs && r && p ? TJ_OK : TJ_ERR_OOM;
    /* args: c..., inv... (carried unchanged), x_t... */
    if (!st)
        body_params(s, p, args, args + s->nc + s->ni, args + s->nc);
    if (!st)
        st = api_replay_graph(s->body, p, s->nc + s->nx + s->ni, outs);
    if (!st) {
        tj_tensor **items = calloc((size_t)(2 * s->nc + s->ni) + 1, sizeof *items);
        if (!items) {
            st = TJ_ERR_OOM;
        } else {
            uint32_t m = 0;
            for (uint32_t k = 0; k < s->nc; k++)
                items[m++] = outs[k];
            for (uint32_t k = 0; k < s->ni; k++)
                items[m++] = args[s->nc + k];
            for (uint32_t k = 0; k < s->nc; k++)
                items[m++] = args[k];
            res = tj_tuple((int)m, items);
            free(items);
        }
    }
    if (st)
        res = tj_error_new(st, "%s", ir_last_error());
    free(outs);
    free(r);
    free(p);
    return res;
}

/* carry: g_c (float carries), g_inv (float invariants), inv...; rows: c_t..., x_t..., gy_t
 * (float outputs) -> carry', then g_x_t (float sequences) */
static tj_tensor *scan_reverse(int n, tj_tensor *const *args, void *user) {
    const scan_bwd *s = user;
    (void)n;
    uint32_t no = s->body->n_outputs, np = s->nc + s->nx + s->ni;
    const uint32_t o_inv = s->nfc + s->nfi, o_c = o_inv + s->ni, o_x = o_c + s->nc,
                   o_gy = o_x + s->nx;
    tj_tensor **outs = calloc((size_t)no + 1, sizeof *outs);
    tj_tensor **p = calloc((size_t)np + 1, sizeof *p);
    tj_tensor **src = calloc((size_t)np + 1, sizeof *src), **g = calloc((size_t)np + 1, sizeof *g);
    tj_tensor **tg = calloc((size_t)no + 1, sizeof *tg), **sd = calloc((size_t)no + 1, sizeof *sd);
    tj_tensor **items = calloc((size_t)(o_c + s->nx) + 1, sizeof *items);
    tj_tape *tape = tj_tape_new(TJ_TAPE_UNCONNECTED_ZERO);
    tj_status st = outs && p && src && g && tg && sd && items && tape ? TJ_OK : TJ_ERR_OOM;
    uint32_t ns = 0, nt = 0;
    if (!st)
        body_params(s, p, args + o_c, args + o_x, args + o_inv);
    /* sources in class order: carries, sequences, invariants (the split below follows it) */
    for (uint32_t k = 0; !st && k < np; k++) {
        int fl = k < s->nc           ? s->fc[k]
                 : k < s->nc + s->nx ? s->fx[k - s->nc]
                                     : s->fi[k - s->nc - s->nx];
        tj_tensor *t = k < s->nc           ? args[o_c + k]
                       : k < s->nc + s->nx ? args[o_x + k - s->nc]
                                           : args[o_inv + k - s->nc - s->nx];
        if (fl) {
            src[ns++] = t;
            st = tj_tape_watch(tape, t);
        }
    }
    if (!st)
        st = api_replay_graph(s->body, p, np, outs);
    if (tape)
        tj_tape_stop(tape);
    for (uint32_t k = 0, jc = 0, jy = 0; !st && k < no; k++) {
        if (k < s->nc ? s->fc[k] : s->fy[k - s->nc]) {
            tg[nt] = outs[k];
            sd[nt++] = k < s->nc ? args[jc++] : args[o_gy + jy++];
        }
    }
    if (!st)
        st = api_tape_vjp(tape, nt, tg, sd, ns, src, g);
    if (!st) { /* carry': g_c, g_inv + this step's, inv; then g_x_t */
        uint32_t m = 0, j = 0, jc = 0, ji = 0, jx = 0;
        tj_tensor **gc = calloc((size_t)s->nc + 1, sizeof *gc),
                  **gx = calloc((size_t)s->nx + 1, sizeof *gx),
                  **gi = calloc((size_t)s->ni + 1, sizeof *gi);
        for (uint32_t k = 0; gc && gx && gi && k < np; k++) {
            int fl = k < s->nc           ? s->fc[k]
                     : k < s->nc + s->nx ? s->fx[k - s->nc]
                                         : s->fi[k - s->nc - s->nx];
            if (!fl)
                continue;
            if (k < s->nc)
                gc[jc++] = g[j++];
            else if (k < s->nc + s->nx)
                gx[jx++] = g[j++];
            else
                gi[ji++] = g[j++];
        }
        if (!gc || !gx || !gi) {
            st = TJ_ERR_OOM;
        } else {
            for (uint32_t k = 0; k < jc; k++)
                items[m++] = gc[k];
            for (uint32_t k = 0; k < ji; k++)
                items[m++] = tj_add(args[s->nfc + k], gi[k]);
            for (uint32_t k = 0; k < s->ni; k++)
                items[m++] = args[o_inv + k];
            for (uint32_t k = 0; k < jx; k++)
                items[m++] = gx[k];
        }
        free(gc);
        free(gx);
        free(gi);
        tj_tensor *res = st ? NULL : tj_tuple((int)m, items);
        if (res) {
            tj_tape_free(tape);
            free(outs), free(p), free(src), free(g), free(tg), free(sd), free(items);
            return res;
        }
    }
    tj_tape_free(tape);
    free(outs), free(p), free(src), free(g), free(tg), free(sd), free(items);
    return tj_error_new(st ? st : TJ_ERR_OOM, "%s", ir_last_error());
}

/* Reverses axis 0. */
static tj_tensor *reversed(tj_tensor *t) {
    int64_t step[TJ_MAX_RANK];
    for (int d = 0; d < TJ_MAX_RANK; d++)
        step[d] = d ? 1 : -1;
    return tj_slice(t, NULL, NULL, step);
}

static tj_status scan_backward(tj_tape *tp, uint32_t first, uint32_t last, kmap *grads) {
    entry *e0 = &tp->e[first];
    const ir_node *node = &e0->n;
    rt_trace *tr = api_trace_current();
    scan_bwd s = {ir_region(tr->g, node, 0), 0, 0, 0, 0, NULL, NULL, NULL, NULL, 0, 0, 0};
    if (!s.body)
        return ir_errorf(TJ_ERR_INVALID, "scan gradient: no body");
    /* the operands in the scan layout (carried, sequences, invariants) with their keys; a
     * for_range over constant bounds is a scan over its indices */
    tj_tensor *stack_in[16],
        **in = e0->n_in + 1 <= 16 ? stack_in : calloc(e0->n_in + 1, sizeof *in);
    uint64_t stack_keys[16],
        *keys = e0->n_in + 1 <= 16 ? stack_keys : calloc(e0->n_in + 1, sizeof *keys);
    if (!in || !keys) {
        if (in != stack_in)
            free(in);
        if (keys != stack_keys)
            free(keys);
        return ir_errorf(TJ_ERR_OOM, "scan gradient: out of memory");
    }
    tj_status st0 = TJ_OK;
    int done = 0; /* a for_range of no iteration: its carries passed their gradients through */
    tj_scope_begin();
    if (node->op == IR_OP_FOR) {
        s.is_for = 1;
        s.ni = (uint32_t)node->a.i[1];
        s.nc = e0->n_in - 3 - s.ni;
        s.nx = 1;
        int64_t b[3];
        for (int k = 0; k < 3 && !st0; k++) {
            const ir_node *bn = ir_node_get(tr->g, e0->in[k]->node);
            tj_tensor *c = bn->op == IR_OP_CONST ? rt_scoped(rt_const_tensor(tr->g, bn)) : NULL;
            if (!c)
                st0 = ir_errorf(TJ_ERR_UNSUPPORTED,
                                "a for_range whose bounds are computed at run time has no "
                                "gradient (its trip count is unknown when tracing): give "
                                "constant bounds or use tj_scan");
            else
                b[k] = (int64_t)tj_tensor_get_f64(c, 0);
        }
        tj_tensor *range = st0 ? NULL : tj_range(TJ_I64, (double)b[0], (double)b[1], (double)b[2]);
        if (range && range->kind == RT_ERROR)
            st0 = ir_errorf(range->code, "%s", range->msg);
        for (uint32_t k = 0; !st0 && k < s.nc; k++)
            in[k] = e0->in[3 + k], keys[k] = e0->in_keys[3 + k];
        if (!st0)
            in[s.nc] = range, keys[s.nc] = 0;
        for (uint32_t k = 0; !st0 && k < s.ni; k++)
            in[s.nc + 1 + k] = e0->in[3 + s.nc + k], keys[s.nc + 1 + k] = e0->in_keys[3 + s.nc + k];
        if (!st0 && range->dims[0] == 0) { /* no iteration: the carries pass through */
            for (uint32_t i = first; i <= last && !st0; i++) {
                tj_tensor **gp = api_kmap_get(grads, tp->e[i].out_key);
                if (gp && *gp && keys[tp->e[i].res])
                    st0 = api_tape_accumulate(grads, keys[tp->e[i].res], *gp);
            }
            done = 1;
        }
    } else {
        s.nc = (uint32_t)node->a.i[0];
        s.ni = (uint32_t)node->a.i[1];
        s.nx = e0->n_in - s.nc - s.ni;
        for (uint32_t k = 0; k < e0->n_in; k++)
            in[k] = e0->in[k], keys[k] = e0->in_keys[k];
    }
    s.ny = s.body->n_outputs - s.nc;
    if (st0 || done) {
        tj_scope_end();
        if (in != stack_in)
            free(in);
        if (keys != stack_keys)
            free(keys);
        return st0;
    }
    uint8_t *fl = calloc((size_t)(s.nc + s.nx + s.ni + s.ny) + 1, 1);
    tj_tensor **a = calloc((size_t)(3 * (s.nc + s.ni) + s.nx + s.ny) + 1, sizeof *a);
    if (!fl || !a) {
        free(fl);
        free(a);
        tj_scope_end();
        if (in != stack_in)
            free(in);
        if (keys != stack_keys)
            free(keys);
        return ir_errorf(TJ_ERR_OOM, "scan gradient: out of memory");
    }
    s.fc = fl, s.fx = fl + s.nc, s.fi = fl + s.nc + s.nx, s.fy = fl + s.nc + s.nx + s.ni;
    for (uint32_t k = 0; k < s.nc + s.nx + s.ni; k++)
        fl[k] = ir_dtype_is_float(in[k]->dtype);
    for (uint32_t k = 0; k < s.ny; k++)
        fl[s.nc + s.nx + s.ni + k] =
            ir_dtype_is_float(ir_node_get(s.body, s.body->outputs[s.nc + k])->dtype);
    for (uint32_t k = 0; k < s.nc; k++)
        s.nfc += s.fc[k];
    for (uint32_t k = 0; k < s.ni; k++)
        s.nfi += s.fi[k];
    tj_status st = TJ_OK;
    /* the gradient of result r, zeros where none reached it */
    tj_tensor **gres = calloc((size_t)(s.nc + s.ny) + 1, sizeof *gres);
    for (uint32_t i = first; gres && i <= last; i++) {
        tj_tensor **gp = api_kmap_get(grads, tp->e[i].out_key);
        if (gp && *gp)
            gres[tp->e[i].res] = *gp;
    }
    for (uint32_t i = first; gres && i <= last; i++)
        if (!gres[tp->e[i].res])
            gres[tp->e[i].res] =
                tj_zeros((tj_dtype)tp->e[i].out->dtype, tp->e[i].out->rank, tp->e[i].out->dims);
    /* 1. the carries entering each step: scan (c, inv) over xs -> stacked c_t */
    uint32_t m = 0;
    for (uint32_t k = 0; k < s.nc; k++)
        a[m++] = in[k];
    for (uint32_t k = 0; k < s.ni; k++)
        a[m++] = in[s.nc + s.nx + k];
    tj_tensor *fwd = gres ? tj_scan(scan_remat, (int)(s.nc + s.ni), a, (int)s.nx, in + s.nc, &s)
                          : tj_error_new(TJ_ERR_OOM, "scan gradient: out of memory");
    if (fwd->kind == RT_ERROR)
        st = ir_errorf(fwd->code, "%s", fwd->msg);
    /* 2. the reverse scan */
    tj_tensor *bwd = NULL;
    if (!st) {
        m = 0;
        for (uint32_t k = 0; k < s.nc; k++) /* g_c: the final carries' gradients */
            if (s.fc[k])
                a[m++] =
                    gres[k] ? gres[k] : tj_zeros((tj_dtype)in[k]->dtype, in[k]->rank, in[k]->dims);
        for (uint32_t k = 0; k < s.ni; k++) /* g_inv accumulators */
            if (s.fi[k])
                a[m++] = tj_zeros((tj_dtype)in[s.nc + s.nx + k]->dtype, in[s.nc + s.nx + k]->rank,
                                  in[s.nc + s.nx + k]->dims);
        for (uint32_t k = 0; k < s.ni; k++)
            a[m++] = in[s.nc + s.nx + k];
        uint32_t ncarry = m;
        for (uint32_t k = 0; k < s.nc; k++) /* stacked c_t, reversed */
            a[m++] = reversed(tj_tuple_get(fwd, (int)(s.nc + s.ni + k)));
        for (uint32_t k = 0; k < s.nx; k++)
            a[m++] = reversed(in[s.nc + k]);
        for (uint32_t k = 0; k < s.ny; k++)
            if (s.fy[k]) {
                tj_tensor *gy = gres[s.nc + k];
                if (!gy) {
                    const ir_node *yn = ir_node_get(s.body, s.body->outputs[s.nc + k]);
                    int64_t d[TJ_MAX_RANK];
                    d[0] = in[s.nc]->dims[0];
                    memcpy(d + 1, yn->dims, sizeof(int64_t) * yn->rank);
                    gy = tj_zeros((tj_dtype)yn->dtype, yn->rank + 1, d);
                }
                a[m++] = reversed(gy);
            }
        bwd = tj_scan(scan_reverse, (int)ncarry, a, (int)(m - ncarry), a + ncarry, &s);
        if (bwd->kind == RT_ERROR)
            st = ir_errorf(bwd->code, "%s", bwd->msg);
    }
    /* 3. the operands' gradients: init carries, sequences (reversed back), invariants */
    for (uint32_t k = 0, j = 0; !st && k < s.nc; k++)
        if (s.fc[k] && keys[k])
            st = api_tape_accumulate(grads, keys[k], tj_tuple_get(bwd, (int)j++));
        else if (s.fc[k])
            j++;
    uint32_t base_x = s.nfc + s.nfi + s.ni;
    for (uint32_t k = 0, j = 0; !st && k < s.nx; k++)
        if (s.fx[k]) {
            if (keys[s.nc + k])
                st = api_tape_accumulate(grads, keys[s.nc + k],
                                         reversed(tj_tuple_get(bwd, (int)(base_x + j))));
            j++;
        }
    for (uint32_t k = 0, j = 0; !st && k < s.ni; k++)
        if (s.fi[k]) {
            if (keys[s.nc + s.nx + k])
                st = api_tape_accumulate(grads, keys[s.nc + s.nx + k],
                                         tj_tuple_get(bwd, (int)(s.nfc + j)));
            j++;
        }
    tj_scope_end();
    free(gres);
    free(fl);
    free(a);
    if (in != stack_in)
        free(in);
    if (keys != stack_keys)
        free(keys);
    return st;
}

/* Entries [first, last] are the float results of one cond, scan or for node. */
tj_status api_tape_cf_backward(tj_tape *tp, uint32_t first, uint32_t last, kmap *grads) {
    entry *e0 = &tp->e[first];
    const ir_node *node = &e0->n;
    rt_trace *tr = api_trace_current();
    if (tr && (node->op == IR_OP_SCAN || node->op == IR_OP_FOR))
        return scan_backward(tp, first, last, grads);
    if (node->op != IR_OP_COND || !tr)
        return ir_errorf(TJ_ERR_UNSUPPORTED,
                         "only cond, switch and scan are differentiable so far");
    uint32_t n_in = e0->n_in, n_ops = n_in - 1, n_res = ir_cf_n_results(tr->g, node);
    cf_bwd c = {{ir_region(tr->g, node, 0), ir_region(tr->g, node, 1)}, n_ops, NULL, n_res, NULL};
    uint8_t *fo = calloc((size_t)n_ops + 1, 1), *fr = calloc((size_t)n_res + 1, 1);
    tj_tensor **args = calloc((size_t)(n_ops + n_res) + 1, sizeof *args);
    if (!fo || !fr || !args || !c.region[0] || !c.region[1]) {
        free(fo);
        free(fr);
        free(args);
        return ir_errorf(TJ_ERR_OOM, "cond gradient: out of memory");
    }
    c.float_op = fo;
    c.float_res = fr;
    uint32_t na = 0, n_float = 0;
    for (uint32_t k = 0; k < n_ops; k++) {
        args[na++] = e0->in[1 + k];
        fo[k] = ir_dtype_is_float(e0->in[1 + k]->dtype);
        n_float += fo[k];
    }
    tj_scope_begin();
    for (uint32_t i = first; i <= last; i++) /* the recorded (float) results */
        fr[tp->e[i].res] = 1;
    for (uint32_t r = 0; r < n_res; r++) { /* their output gradients, zeros where none */
        if (!fr[r])
            continue;
        tj_tensor *g = NULL;
        for (uint32_t i = first; i <= last && !g; i++)
            if (tp->e[i].res == r) {
                tj_tensor **gp = api_kmap_get(grads, tp->e[i].out_key);
                g = gp && *gp ? *gp
                              : tj_zeros((tj_dtype)tp->e[i].out->dtype, tp->e[i].out->rank,
                                         tp->e[i].out->dims);
            }
        args[na++] = g;
    }
    tj_status st = TJ_OK;
    if (n_float) {
        tj_tensor *r = tj_cond(e0->in[0], cf_then, cf_else, (int)na, args, &c);
        if (r->kind == RT_ERROR)
            st = ir_errorf(r->code, "%s", r->msg);
        for (uint32_t k = 0, j = 0; k < n_ops && !st; k++) {
            if (!fo[k])
                continue;
            tj_tensor *gk = n_float == 1 ? r : tj_tuple_get(r, (int)j);
            j++;
            if (e0->in_keys[1 + k])
                st = api_tape_accumulate(grads, e0->in_keys[1 + k], gk);
        }
    }
    tj_scope_end();
    free(fo);
    free(fr);
    free(args);
    return st;
}
