/* ops_index.c — ONNX ops that address elements by computed positions:
 *   ScatterElements / Scatter / ScatterND: every update's flat position in data (an invalid
 *     index becomes -1, which tj_scatter_add reports at run time), then one scatter_add; with
 *     reduction "none" the rows hit take the updates, with "mul" the updates landing on a row
 *     are multiplied in through a [updates, rows] match (O(M·P), a composition);
 *   Compress: the condition's values are read at trace time (they fix the output's shape), so it
 *     is a gather of the selected positions;
 *   TopK: each element's rank along the axis from pairwise comparisons (ties: the lower index
 *     first, as ONNX), then the first k ranks selected: O(n^2) per row, exact for every dtype;
 *   Einsum: repeated letters become diagonals (a gather), letters no one needs are summed, and
 *     each pair of operands is one batched matmul after a transpose, as numpy's einsum path. */
#include <stdio.h>

#include "internal.h"

/* row-major strides of dims[0..r) */
static void strides_of(int r, const int64_t *dims, int64_t *s) {
    int64_t acc = 1;
    for (int d = r - 1; d >= 0; d--)
        s[d] = acc, acc *= dims[d];
}

static tj_tensor *error_of(tj_tensor *const *in, int n) {
    for (int k = 0; k < n; k++)
        if (in[k] && tj_status_of(in[k]))
            return in[k];
    return NULL;
}

/* ---- scatter --------------------------------------------------------------------------------- */
/* data [P, rest...] with rows lin[M] (int64; -1: an invalid index) set, added to or multiplied
 * by upd [M, rest...] as the node's reduction says (opset 16; before it, set). */
static tj_status scatter_rows(const ox_node *n, tj_tensor *data, tj_tensor *lin, tj_tensor *upd,
                              tj_tensor **res) {
    char buf[16];
    const char *red = n->opset >= 16 ? ox_attr_s(n, "reduction", "none", buf, sizeof buf) : "none";
    int r = tj_tensor_rank(data);
    int64_t P = tj_tensor_dims(data)[0], M = tj_tensor_numel(lin);
    if (!strcmp(red, "add"))
        return one(res, tj_scatter_add(data, lin, upd, 0));
    if (strcmp(red, "none") && strcmp(red, "mul"))
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "reduction '%s' is not supported", red);
    /* how many updates land on each row (this also checks every index at run time) */
    tj_tensor *cnt = tj_scatter_add(tj_zeros(TJ_I32, 1, &P), lin, tj_ones(TJ_I32, 1, &M), 0);
    int64_t cd[TJ_MAX_RANK];
    cd[0] = P;
    for (int d = 1; d < r; d++)
        cd[d] = 1;
    tj_tensor *hit = tj_reshape(tj_greater(cnt, tj_scalar_i32(0)), r, cd);
    if (!strcmp(red, "none")) { /* a row hit twice gets their sum (ONNX leaves it undefined) */
        tj_tensor *zero = tj_zeros(tj_tensor_dtype(data), r, tj_tensor_dims(data));
        return one(res, tj_where(hit, tj_scatter_add(zero, lin, upd, 0), data));
    }
    /* mul: match[M, P, 1...] = lin[m] == p; the product over m of the matching updates */
    int64_t md[TJ_MAX_RANK + 1], ud[TJ_MAX_RANK + 1];
    md[0] = M, md[1] = P, ud[0] = M, ud[1] = 1;
    for (int d = 1; d < r; d++)
        md[d + 1] = 1, ud[d + 1] = tj_tensor_dims(data)[d];
    tj_tensor *match =
        tj_reshape(tj_equal(tj_expand_dims(lin, 1), tj_range(TJ_I64, 0, (double)P, 1)), r + 1, md);
    tj_tensor *f =
        tj_prod(tj_where(match, tj_reshape(upd, r + 1, ud), like(data, 1)), 1, (const int[]){0}, 0);
    tj_tensor *y = tj_mul(data, f);
    return one(res, tj_where(hit, y, y)); /* depends on cnt, so a bad index is reported */
}

/* index tensor t (int64) normalized against a dim of size len; out-of-range ones flagged */
static tj_tensor *norm_index(tj_tensor *t, int64_t len, tj_tensor **valid) {
    tj_tensor *c = tj_where(tj_less(t, tj_scalar_i64(0)), tj_add(t, tj_scalar_i64(len)), t);
    tj_tensor *ok =
        tj_logical_and(tj_greater_equal(c, tj_scalar_i64(0)), tj_less(c, tj_scalar_i64(len)));
    *valid = *valid ? tj_logical_and(*valid, ok) : ok;
    return c;
}

CONV(c_scatter_elements) {
    (void)n_in, (void)n_out;
    tj_tensor *e = error_of(in, 3);
    if (e)
        return one(out, e);
    tj_tensor *data = in[0], *idx = tj_cast(in[1], TJ_I64), *upd = in[2];
    int r = tj_tensor_rank(data), axis = axis_of(ox_attr_i(n, "axis", 0), r);
    const int64_t *D = tj_tensor_dims(data), *I = tj_tensor_dims(idx);
    int ok = axis >= 0 && tj_tensor_rank(idx) == r && tj_tensor_rank(upd) == r;
    for (int d = 0; ok && d < r; d++)
        ok = I[d] == tj_tensor_dims(upd)[d] && (d == axis || I[d] <= D[d]);
    if (!ok)
        return ox_fail(n, TJ_ERR_SHAPE,
                       "indices and updates must have data's rank %d, one shape, and no dim "
                       "larger than data's but the axis's (axis %lld)",
                       r, (long long)ox_attr_i(n, "axis", 0));
    int64_t S[TJ_MAX_RANK], P = tj_tensor_numel(data), M = tj_tensor_numel(idx);
    strides_of(r, D, S);
    tj_tensor *valid = NULL;
    tj_tensor *lin = tj_mul(norm_index(idx, D[axis], &valid), tj_scalar_i64(S[axis]));
    for (int d = 0; d < r; d++) { /* + the position along every other axis */
        if (d == axis || I[d] == 1)
            continue;
        int64_t pd[TJ_MAX_RANK];
        for (int k = 0; k < r; k++)
            pd[k] = k == d ? I[d] : 1;
        lin = tj_add(lin,
                     tj_reshape(tj_range(TJ_I64, 0, (double)(I[d] * S[d]), (double)S[d]), r, pd));
    }
    lin = tj_reshape(tj_where(valid, lin, tj_scalar_i64(-1)), 1, &M);
    tj_tensor *y = NULL;
    tj_status st = scatter_rows(n, tj_reshape(data, 1, &P), lin, tj_reshape(upd, 1, &M), &y);
    return st ? st : one(out, tj_reshape(y, r, D));
}

CONV(c_scatter_nd) {
    (void)n_in, (void)n_out;
    tj_tensor *e = error_of(in, 3);
    if (e)
        return one(out, e);
    tj_tensor *data = in[0], *idx = tj_cast(in[1], TJ_I64), *upd = in[2];
    int r = tj_tensor_rank(data), q = tj_tensor_rank(idx), ru = tj_tensor_rank(upd);
    const int64_t *D = tj_tensor_dims(data), *I = tj_tensor_dims(idx), *U = tj_tensor_dims(upd);
    int64_t k = q > 0 ? I[q - 1] : 0;
    int ok = q >= 1 && k >= 1 && k <= r && ru == q - 1 + r - k;
    for (int d = 0; ok && d < ru; d++)
        ok = U[d] == (d < q - 1 ? I[d] : D[k + d - (q - 1)]);
    if (!ok)
        return ox_fail(n, TJ_ERR_SHAPE,
                       "indices of rank %d (last dim %lld) and updates of rank %d do not fit data "
                       "of rank %d (updates must be indices.shape[:-1] + data.shape[k:])",
                       q, (long long)k, ru, r);
    int64_t S[TJ_MAX_RANK], P = 1, M = 1;
    strides_of((int)k, D, S);
    for (int64_t j = 0; j < k; j++)
        P *= D[j];
    for (int d = 0; d < q - 1; d++)
        M *= I[d];
    tj_tensor *valid = NULL, *lin = NULL;
    for (int64_t j = 0; j < k; j++) {
        int64_t b[TJ_MAX_RANK] = {0}, en[TJ_MAX_RANK];
        memcpy(en, I, (size_t)q * sizeof *en);
        b[q - 1] = j, en[q - 1] = j + 1;
        tj_tensor *ij = tj_reshape(tj_slice(idx, b, en, NULL), 1, &M);
        tj_tensor *term = tj_mul(norm_index(ij, D[j], &valid), tj_scalar_i64(S[j]));
        lin = lin ? tj_add(lin, term) : term;
    }
    lin = tj_where(valid, lin, tj_scalar_i64(-1));
    int64_t dd[TJ_MAX_RANK], ud[TJ_MAX_RANK];
    dd[0] = P, ud[0] = M;
    for (int d = (int)k; d < r; d++)
        dd[d - k + 1] = ud[d - k + 1] = D[d];
    int rr = r - (int)k + 1;
    tj_tensor *y = NULL;
    tj_status st = scatter_rows(n, tj_reshape(data, rr, dd), lin, tj_reshape(upd, rr, ud), &y);
    return st ? st : one(out, tj_reshape(y, r, D));
}

/* ---- Compress -------------------------------------------------------------------------------- */
CONV(c_compress) { /* condition: read as values (its count of true elements is the shape) */
    (void)n_in, (void)n_out;
    tj_tensor *x = in[0];
    if (tj_status_of(x))
        return one(out, x);
    int64_t *c = NULL, nc = ox_host_ints(n, in[1], "condition", &c);
    if (nc < 0)
        return tj_status_of(in[1]) ? tj_status_of(in[1]) : TJ_ERR_UNSUPPORTED;
    int axis = 0;
    if (ox_attr(n, "axis")) {
        axis = axis_of(ox_attr_i(n, "axis", 0), tj_tensor_rank(x));
        if (axis < 0) {
            free(c);
            return ox_fail(n, TJ_ERR_SHAPE, "axis %lld out of range for rank %d",
                           (long long)ox_attr_i(n, "axis", 0), tj_tensor_rank(x));
        }
    } else { /* no axis: the flattened input */
        int64_t all = tj_tensor_numel(x);
        x = tj_reshape(x, 1, &all);
    }
    int64_t len = tj_tensor_dims(x)[axis], m = 0;
    if (nc > len) {
        free(c);
        return ox_fail(n, TJ_ERR_SHAPE, "condition has %lld elements, the axis only %lld",
                       (long long)nc, (long long)len);
    }
    for (int64_t j = 0; j < nc; j++)
        if (c[j])
            c[m++] = j;
    tj_tensor *pos = tj_tensor_from_data(TJ_I64, 1, &m, c);
    free(c);
    return one(out, tj_gather(x, pos, axis));
}

/* ---- TopK ------------------------------------------------------------------------------------ */
CONV(c_top_k) { /* opset 10+: k is input 1 (read as a value); opset 1: attribute k */
    tj_tensor *x = in[0];
    if (tj_status_of(x)) {
        for (int k = 0; k < n_out; k++)
            out[k] = x;
        return TJ_OK;
    }
    int64_t k = ox_attr_i(n, "k", -1);
    if (n->opset >= 10) {
        int64_t *kv = NULL, nk = n_in > 1 ? ox_host_ints(n, in[1], "k", &kv) : -1;
        if (nk != 1) {
            free(kv);
            return nk < 0 ? TJ_ERR_UNSUPPORTED
                          : ox_fail(n, TJ_ERR_SHAPE, "k has %lld values, not one", (long long)nk);
        }
        k = kv[0];
        free(kv);
    }
    int r = tj_tensor_rank(x), axis = axis_of(ox_attr_i(n, "axis", -1), r);
    if (axis < 0 || k < 0 || k > tj_tensor_dims(x)[axis])
        return ox_fail(n, TJ_ERR_SHAPE, "k = %lld along axis %lld of a rank-%d input", (long long)k,
                       (long long)ox_attr_i(n, "axis", -1), r);
    int largest = ox_attr_i(n, "largest", 1) != 0;
    int64_t len = tj_tensor_dims(x)[axis];
    tj_tensor *xl = move_axis(x, axis, r - 1);                     /* [..., n] */
    tj_tensor *xj = tj_expand_dims(xl, r);                         /* [..., n (j), 1] */
    tj_tensor *xi = tj_expand_dims(xl, r - 1);                     /* [..., 1, n (i)] */
    tj_tensor *pos = tj_range(TJ_I64, 0, (double)len, 1);          /* i */
    tj_tensor *pj = tj_reshape(pos, 2, (const int64_t[]){len, 1}); /* j */
    /* element i goes before element j: strictly better, or equal with the lower index */
    tj_tensor *before = tj_logical_or(largest ? tj_greater(xi, xj) : tj_less(xi, xj),
                                      tj_logical_and(tj_equal(xi, xj), tj_less(pos, pj)));
    tj_tensor *rank = tj_sum(tj_cast(before, TJ_I64), 1, (const int[]){r}, 0); /* [..., n] */
    tj_tensor *sel = tj_equal(tj_expand_dims(rank, r), tj_range(TJ_I64, 0, (double)k, 1));
    tj_tensor *vals = tj_sum(tj_where(sel, xj, like(x, 0)), 1, (const int[]){r - 1}, 0);
    tj_tensor *idx = tj_sum(tj_where(sel, pj, tj_scalar_i64(0)), 1, (const int[]){r - 1}, 0);
    out[0] = move_axis(vals, r - 1, axis);
    if (n_out > 1)
        out[1] = move_axis(idx, r - 1, axis);
    return TJ_OK;
}

/* ---- Einsum ---------------------------------------------------------------------------------- */
/* Letters are the equation's [a-zA-Z]; an ellipsis becomes the reserved letters '0'.. for its
 * dims (right-aligned across operands, as broadcasting). */
typedef struct term {
    char s[TJ_MAX_RANK + 1];
    int n;
} term;

typedef struct es_op {
    tj_tensor *t;
    term tm;
} es_op;

/* Parses one term (spaces removed) with e ellipsis dims of E reserved; -1 on a bad term. */
static int parse_term(const char *s, size_t len, int e, int E, term *t) {
    t->n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (len - i < 3 || s[i + 1] != '.' || s[i + 2] != '.')
                return -1;
            for (int k = E - e; k < E; k++) {
                if (t->n >= TJ_MAX_RANK)
                    return -1;
                t->s[t->n++] = (char)('0' + k);
            }
            i += 2;
        } else if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')) {
            if (t->n >= TJ_MAX_RANK)
                return -1;
            t->s[t->n++] = s[i];
        } else {
            return -1;
        }
    }
    t->s[t->n] = 0;
    return 0;
}

/* the named letters of a term (its ellipsis not counted) */
static int named(const char *s, size_t len) {
    int c = 0;
    for (size_t i = 0; i < len; i++)
        c += (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z');
    return c;
}

/* A letter repeated in one term ("ii") becomes one axis: the diagonal, gathered from the two
 * axes moved last and flattened. */
static void es_diagonals(es_op *o) {
    for (int p = 0; p < o->tm.n; p++)
        for (int q = p + 1; q < o->tm.n; q++) {
            if (o->tm.s[p] != o->tm.s[q])
                continue;
            int r = o->tm.n, perm[TJ_MAX_RANK], k = 0;
            char ns[TJ_MAX_RANK + 1];
            for (int d = 0; d < r; d++)
                if (d != p && d != q)
                    ns[k] = o->tm.s[d], perm[k++] = d;
            perm[k] = p, perm[k + 1] = q;
            int64_t len = tj_tensor_dims(o->t)[p], dims[TJ_MAX_RANK];
            for (int d = 0; d < k; d++)
                dims[d] = tj_tensor_dims(o->t)[perm[d]];
            dims[k] = len * len;
            tj_tensor *flat = tj_reshape(tj_transpose(o->t, perm), k + 1, dims);
            o->t = tj_gather(flat, tj_range(TJ_I64, 0, (double)(len * len), (double)(len + 1)), k);
            ns[k] = o->tm.s[p];
            ns[k + 1] = 0;
            memcpy(o->tm.s, ns, (size_t)k + 2);
            o->tm.n = k + 1;
            p = -1; /* start over: positions moved */
            break;
        }
}

/* o summed over its letters not in keep */
static void es_sum_unneeded(es_op *o, const char *keep) {
    int axes[TJ_MAX_RANK], na = 0, k = 0;
    for (int d = 0; d < o->tm.n; d++) {
        if (strchr(keep, o->tm.s[d]))
            o->tm.s[k++] = o->tm.s[d];
        else
            axes[na++] = d;
    }
    if (na) {
        o->t = tj_sum(o->t, na, axes, 0);
        o->tm.n = k;
        o->tm.s[k] = 0;
    }
}

/* o transposed to the letters of `order` */
static void es_transpose(es_op *o, const char *order) {
    int perm[TJ_MAX_RANK], n = (int)strlen(order), moved = 0;
    for (int d = 0; d < n; d++) {
        perm[d] = (int)(strchr(o->tm.s, order[d]) - o->tm.s);
        moved |= perm[d] != d;
    }
    if (moved)
        o->t = tj_transpose(o->t, perm);
    memcpy(o->tm.s, order, (size_t)n + 1);
}

/* a and b contracted into a, keeping the letters in keep. */
static void es_pair(es_op *a, es_op *b, const char *keep) {
    char bt[TJ_MAX_RANK + 1] = {0}, la[TJ_MAX_RANK + 1] = {0}, lb[TJ_MAX_RANK + 1] = {0},
                          co[TJ_MAX_RANK + 1] = {0};
    int nb = 0, nl = 0, nr = 0, nc = 0;
    for (int d = 0; d < a->tm.n; d++) {
        char c = a->tm.s[d];
        if (!strchr(b->tm.s, c))
            la[nl++] = c;
        else if (strchr(keep, c))
            bt[nb++] = c;
        else
            co[nc++] = c;
    }
    for (int d = 0; d < b->tm.n; d++)
        if (!strchr(a->tm.s, b->tm.s[d]))
            lb[nr++] = b->tm.s[d];
    /* shared letters broadcast to the larger size (a size-1 ellipsis dim) */
    int64_t sizes[128] = {0};
    for (int pass = 0; pass < 2; pass++) {
        es_op *o = pass ? b : a;
        for (int d = 0; d < o->tm.n; d++) {
            int64_t s = tj_tensor_dims(o->t)[d];
            unsigned char c = (unsigned char)o->tm.s[d];
            sizes[c] = s > sizes[c] ? s : sizes[c];
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        es_op *o = pass ? b : a;
        int64_t want[TJ_MAX_RANK], diff = 0;
        for (int d = 0; d < o->tm.n; d++) {
            want[d] = sizes[(unsigned char)o->tm.s[d]];
            diff |= want[d] != tj_tensor_dims(o->t)[d];
        }
        if (diff)
            o->t = tj_broadcast_to(o->t, o->tm.n, want);
    }
    char oa[3 * TJ_MAX_RANK + 1], ob[3 * TJ_MAX_RANK + 1];
    snprintf(oa, sizeof oa, "%s%s%s", bt, la, co);
    snprintf(ob, sizeof ob, "%s%s%s", bt, co, lb);
    es_transpose(a, oa);
    es_transpose(b, ob);
    int64_t B = 1, L = 1, C = 1, R = 1, od[TJ_MAX_RANK];
    int no = 0;
    for (int d = 0; d < nb; d++)
        B *= sizes[(unsigned char)bt[d]], od[no++] = sizes[(unsigned char)bt[d]];
    for (int d = 0; d < nl; d++)
        L *= sizes[(unsigned char)la[d]], od[no++] = sizes[(unsigned char)la[d]];
    for (int d = 0; d < nc; d++)
        C *= sizes[(unsigned char)co[d]];
    for (int d = 0; d < nr; d++)
        R *= sizes[(unsigned char)lb[d]], od[no++] = sizes[(unsigned char)lb[d]];
    tj_tensor *m = tj_matmul(tj_reshape(a->t, 3, (const int64_t[]){B, L, C}),
                             tj_reshape(b->t, 3, (const int64_t[]){B, C, R}));
    a->t = tj_reshape(m, no, od);
    a->tm.n = snprintf(a->tm.s, sizeof a->tm.s, "%s%s%s", bt, la, lb);
}

CONV(c_einsum) {
    (void)n_out;
    tj_tensor *e = error_of(in, n_in);
    if (e)
        return one(out, e);
    char eq[256], clean[256];
    const char *s = ox_attr_s(n, "equation", "", eq, sizeof eq);
    size_t len = 0;
    for (const char *p = s; *p && len + 1 < sizeof clean; p++)
        if (*p != ' ')
            clean[len++] = *p;
    clean[len] = 0;
    const char *arrow = strstr(clean, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - clean) : len;
    es_op ops[16];
    if (n_in < 1 || n_in > 16)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "%d operands (1 to 16 supported)", n_in);
    /* ellipsis dims per operand, and the most of them */
    const char *tstart[16];
    size_t tlen[16];
    int nt = 0, E = 0, ell[16];
    for (size_t i = 0, b = 0; i <= lhs_len; i++)
        if (i == lhs_len || clean[i] == ',') {
            if (nt < 16)
                tstart[nt] = clean + b, tlen[nt] = i - b;
            nt++, b = i + 1;
        }
    if (nt != n_in)
        return ox_fail(n, TJ_ERR_INVALID, "equation '%s' has %d terms for %d inputs", s, nt, n_in);
    for (int k = 0; k < nt; k++) {
        int has = memmem(tstart[k], tlen[k], "...", 3) != NULL;
        ell[k] = has ? tj_tensor_rank(in[k]) - named(tstart[k], tlen[k]) : 0;
        if (ell[k] < 0 || (!has && named(tstart[k], tlen[k]) != tj_tensor_rank(in[k])))
            return ox_fail(n, TJ_ERR_SHAPE, "term %d of '%s' does not fit an input of rank %d", k,
                           s, tj_tensor_rank(in[k]));
        E = ell[k] > E ? ell[k] : E;
    }
    for (int k = 0; k < nt; k++) {
        ops[k].t = in[k];
        if (parse_term(tstart[k], tlen[k], ell[k], E, &ops[k].tm))
            return ox_fail(n, TJ_ERR_INVALID, "equation '%s': bad term %d", s, k);
    }
    term o;
    if (arrow) {
        if (parse_term(arrow + 2, strlen(arrow + 2), E, E, &o))
            return ox_fail(n, TJ_ERR_INVALID, "equation '%s': bad output", s);
    } else { /* implicit: the ellipsis, then the letters used once, sorted */
        int cnt[128] = {0};
        for (int k = 0; k < nt; k++)
            for (int d = 0; d < ops[k].tm.n; d++)
                cnt[(unsigned char)ops[k].tm.s[d]]++;
        o.n = 0;
        for (int k = 0; k < E; k++)
            o.s[o.n++] = (char)('0' + k);
        for (int c = 'A'; c <= 'z'; c++)
            if (cnt[c] == 1 && o.n < TJ_MAX_RANK)
                o.s[o.n++] = (char)c;
        o.s[o.n] = 0;
    }
    for (int d = 0; d < o.n; d++) {
        int found = 0;
        for (int k = 0; k < nt && !found; k++)
            found = strchr(ops[k].tm.s, o.s[d]) != NULL;
        if (!found || strchr(o.s + d + 1, o.s[d]))
            return ox_fail(n, TJ_ERR_INVALID, "equation '%s': output letter '%c' %s", s, o.s[d],
                           found ? "repeats" : "is in no input");
    }
    for (int k = 0; k < nt; k++)
        es_diagonals(&ops[k]);
    /* left to right: each step keeps the output's letters and those later operands use */
    for (int k = 0; k < nt; k++) {
        char keep[TJ_MAX_RANK * 17 + 1];
        int kn = snprintf(keep, sizeof keep, "%s", o.s);
        for (int j = k + 1; j < nt && kn < (int)sizeof keep; j++)
            kn += snprintf(keep + kn, sizeof keep - (size_t)kn, "%s", ops[j].tm.s);
        if (k == 0) {
            /* letters only operand 0 has and no one keeps: summed now */
            char keep0[sizeof keep + TJ_MAX_RANK + 1];
            snprintf(keep0, sizeof keep0, "%s", keep);
            es_sum_unneeded(&ops[0], keep0);
            continue;
        }
        char keepk[sizeof keep + 2 * TJ_MAX_RANK + 2];
        snprintf(keepk, sizeof keepk, "%s%s", keep, ops[0].tm.s);
        es_sum_unneeded(&ops[k], keepk);
        es_pair(&ops[0], &ops[k], keep);
        if (tj_status_of(ops[0].t))
            break;
    }
    es_sum_unneeded(&ops[0], o.s);
    if (tj_status_of(ops[0].t))
        return one(out, ops[0].t);
    es_transpose(&ops[0], o.s);
    return one(out, ops[0].t);
}

static tj_tensor *f64c(double v) {
    return tj_scalar_f64(v);
}

/* ---- MaxUnpool --------------------------------------------------------------------------------
 * x's values written at the flat positions MaxPool's Indices give into zeros of the unpooled
 * shape (output_shape's values, or (in - 1) * stride + kernel - pads per spatial dim): one
 * tj_scatter_add in float64 (a position written twice, by overlapping windows, holds one
 * element's value twice: divided by its count, exactly). */
CONV(c_max_unpool) { /* output_shape: read as values */
    (void)n_out;
    tj_tensor *e = error_of(in, 2);
    if (e)
        return one(out, e);
    tj_tensor *x = in[0], *idx = tj_cast(in[1], TJ_I64);
    int r = tj_tensor_rank(x), sp = r - 2;
    const int64_t *xd = tj_tensor_dims(x);
    if (r < 3 || tj_tensor_rank(idx) != r || memcmp(tj_tensor_dims(idx), xd, sizeof *xd * r))
        return ox_fail(n, TJ_ERR_SHAPE, "X of rank %d and indices of another shape", r);
    /* the indices address the default unpooled shape; output_shape may only grow it, with
     * zeros after the data (as ONNX's reference) */
    int64_t od[TJ_MAX_RANK], want[TJ_MAX_RANK];
    const int64_t *k, *s, *pd;
    size_t nk = ox_attr_ints(n, "kernel_shape", &k), ns = ox_attr_ints(n, "strides", &s),
           np = ox_attr_ints(n, "pads", &pd);
    if ((int)nk != sp || (ns && (int)ns != sp) || (np && (int)np != 2 * sp))
        return ox_fail(n, TJ_ERR_SHAPE, "kernel_shape/strides/pads do not fit %d spatial dims", sp);
    od[0] = xd[0], od[1] = xd[1];
    for (int i = 0; i < sp; i++)
        od[2 + i] = (xd[2 + i] - 1) * (ns ? s[i] : 1) + k[i] - (np ? pd[i] + pd[sp + i] : 0);
    memcpy(want, od, sizeof od);
    if (n_in > 2 && in[2]) {
        int64_t *v = NULL, nv = ox_host_ints(n, in[2], "output_shape", &v);
        if (nv < 0)
            return TJ_ERR_UNSUPPORTED;
        int ok = nv == r;
        for (int d = 0; ok && d < r; d++)
            ok = (want[d] = v[d]) >= od[d] && (d >= 2 || v[d] == od[d]);
        free(v);
        if (!ok)
            return ox_fail(n, TJ_ERR_SHAPE,
                           "output_shape has %lld values, changes N or C, or is smaller than the "
                           "unpooled shape",
                           (long long)nv);
    }
    int64_t total = 1, m = tj_tensor_numel(x);
    for (int d = 0; d < r; d++)
        total *= od[d];
    tj_tensor *lin = tj_reshape(idx, 1, &m);
    tj_tensor *cnt = tj_scatter_add(tj_zeros(TJ_F64, 1, &total), lin, tj_ones(TJ_F64, 1, &m), 0);
    tj_tensor *sum =
        tj_scatter_add(tj_zeros(TJ_F64, 1, &total), lin, tj_reshape(tj_cast(x, TJ_F64), 1, &m), 0);
    tj_tensor *y =
        tj_where(tj_greater(cnt, f64c(0)), tj_div(sum, tj_maximum(cnt, f64c(1))), f64c(0));
    y = tj_reshape(y, r, od);
    for (int d = 2; d < r; d++) { /* grown to output_shape: zeros appended */
        if (want[d] == od[d])
            continue;
        int64_t zd[TJ_MAX_RANK];
        memcpy(zd, tj_tensor_dims(y), sizeof *zd * r);
        zd[d] = want[d] - od[d];
        y = tj_concat(2, (tj_tensor *[]){y, tj_zeros(TJ_F64, r, zd)}, d);
    }
    return one(out, tj_cast(y, tj_tensor_dtype(x)));
}

/* ---- GridSample ------------------------------------------------------------------------------
 * X [N, C, H, W] sampled at grid [N, Ho, Wo, 2] (x, y in [-1, 1]), computed in float64 and cast
 * back: coordinates denormalized, rounded (nearest), moved inside by clamping or reflection when
 * out of bounds, then 1, 4 or 16 taps each read by one gather over the flattened X (a tap
 * outside reads 0 with zeros padding) and weighted, as ONNX's reference formulas. */
typedef struct gs {
    tj_tensor *xflat;      /* X as [N*C*H*W], float64 */
    int64_t n, c, h, w, p; /* p = Ho * Wo */
    int pad;               /* 0 zeros, 1 border, 2 reflection */
    double lo[2], hi[2];   /* the bounds, x then y: [-0.5, d - 0.5], or [0, d - 1] aligned */
} gs;

/* x reflected into [lo, hi] (ONNX's _gs_reflect), elementwise */
static tj_tensor *gs_reflect(tj_tensor *x, double lo, double hi) {
    double rng = hi - lo;
    tj_tensor *below = tj_less(x, f64c(lo)), *above = tj_greater(x, f64c(hi));
    tj_tensor *dx = tj_where(below, tj_sub(f64c(lo), x), tj_sub(x, f64c(hi)));
    tj_tensor *k = tj_floor(tj_div(dx, f64c(rng > 0 ? rng : 1)));
    tj_tensor *r = tj_sub(dx, tj_mul(k, f64c(rng)));
    tj_tensor *even = tj_equal(tj_mod(k, f64c(2)), f64c(0));
    tj_tensor *from_lo = tj_add(f64c(lo), r), *from_hi = tj_sub(f64c(hi), r);
    return tj_where(below, tj_where(even, from_lo, from_hi),
                    tj_where(above, tj_where(even, from_hi, from_lo), x));
}

static tj_tensor *clampf(tj_tensor *x, double lo, double hi) {
    return tj_minimum(tj_maximum(x, f64c(lo)), f64c(hi));
}

/* X at integral rows r and columns c ([N, P] float64) as [N, C, P] */
static tj_tensor *gs_tap(const gs *g, tj_tensor *r, tj_tensor *c) {
    tj_tensor *valid = NULL;
    if (g->pad == 0)
        valid = tj_logical_and(
            tj_logical_and(tj_greater_equal(c, f64c(0)), tj_less(c, f64c((double)g->w))),
            tj_logical_and(tj_greater_equal(r, f64c(0)), tj_less(r, f64c((double)g->h))));
    else if (g->pad == 2) { /* pixel_at_grid reflects over the bounds, then truncates */
        c = tj_cast(tj_cast(gs_reflect(c, g->lo[0], g->hi[0]), TJ_I64), TJ_F64);
        r = tj_cast(tj_cast(gs_reflect(r, g->lo[1], g->hi[1]), TJ_I64), TJ_F64);
    }
    c = clampf(c, 0, (double)(g->w - 1));
    r = clampf(r, 0, (double)(g->h - 1));
    tj_tensor *pos = tj_cast(tj_add(tj_mul(r, f64c((double)g->w)), c), TJ_I64); /* [N, P] */
    int64_t hw = g->h * g->w;
    tj_tensor *base =
        tj_add(tj_reshape(tj_range(TJ_I64, 0, (double)(g->n * g->c * hw), (double)(g->c * hw)), 3,
                          (const int64_t[]){g->n, 1, 1}),
               tj_reshape(tj_range(TJ_I64, 0, (double)(g->c * hw), (double)hw), 3,
                          (const int64_t[]){1, g->c, 1}));
    tj_tensor *idx = tj_add(base, tj_expand_dims(pos, 1));
    tj_tensor *v = tj_gather(g->xflat, idx, 0);
    return valid ? tj_where(tj_expand_dims(valid, 1), v, f64c(0)) : v;
}

/* Keys' cubic convolution weights (alpha -0.75) of the 4 taps around t in [0, 1) */
static void cubic_w(tj_tensor *t, tj_tensor **w) {
    const double a = -0.75;
    tj_tensor *x[4] = {tj_add(t, f64c(1)), t, tj_sub(f64c(1), t), tj_sub(f64c(2), t)};
    for (int k = 0; k < 4; k++) {
        tj_tensor *v = x[k];
        if (k == 0 || k == 3) /* ((a v - 5a) v + 8a) v - 4a */
            w[k] = tj_sub(
                tj_mul(tj_add(tj_mul(tj_sub(tj_mul(v, f64c(a)), f64c(5 * a)), v), f64c(8 * a)), v),
                f64c(4 * a));
        else /* ((a + 2) v - (a + 3)) v v + 1 */
            w[k] =
                tj_add(tj_mul(tj_mul(tj_sub(tj_mul(v, f64c(a + 2)), f64c(a + 3)), v), v), f64c(1));
    }
}

CONV(c_grid_sample) {
    (void)n_in, (void)n_out;
    tj_tensor *e = error_of(in, 2);
    if (e)
        return one(out, e);
    tj_tensor *x = in[0], *grid = in[1];
    const int64_t *xd = tj_tensor_dims(x), *gd = tj_tensor_dims(grid);
    if (tj_tensor_rank(x) != 4 || tj_tensor_rank(grid) != 4 || gd[0] != xd[0] || gd[3] != 2)
        return ox_fail(n, TJ_ERR_SHAPE,
                       "X of rank %d and grid of rank %d: 2-D sampling needs [N, C, H, W] and "
                       "[N, Ho, Wo, 2]",
                       tj_tensor_rank(x), tj_tensor_rank(grid));
    char b1[16], b2[16];
    const char *mode = ox_attr_s(n, "mode", "bilinear", b1, sizeof b1);
    const char *pm = ox_attr_s(n, "padding_mode", "zeros", b2, sizeof b2);
    int m = !strcmp(mode, "nearest")                               ? 0
            : !strcmp(mode, "bilinear") || !strcmp(mode, "linear") ? 1
            : !strcmp(mode, "bicubic") || !strcmp(mode, "cubic")   ? 2
                                                                   : -1;
    int pad = !strcmp(pm, "zeros")        ? 0
              : !strcmp(pm, "border")     ? 1
              : !strcmp(pm, "reflection") ? 2
                                          : -1;
    if (m < 0 || pad < 0)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "mode '%s' with padding_mode '%s'", mode, pm);
    int align = ox_attr_i(n, "align_corners", 0) != 0;
    gs g = {.n = xd[0], .c = xd[1], .h = xd[2], .w = xd[3], .p = gd[1] * gd[2], .pad = pad};
    int64_t all = tj_tensor_numel(x);
    g.xflat = tj_reshape(tj_cast(x, TJ_F64), 1, &all);
    double dim[2] = {(double)g.w, (double)g.h};
    tj_tensor *co[2]; /* x, y as [N, P] */
    for (int k = 0; k < 2; k++) {
        g.lo[k] = align ? 0 : -0.5;
        g.hi[k] = align ? dim[k] - 1 : dim[k] - 0.5;
        tj_tensor *v = tj_reshape(tj_slice(tj_cast(grid, TJ_F64), (const int64_t[]){0, 0, 0, k},
                                           (const int64_t[]){gd[0], gd[1], gd[2], k + 1}, NULL),
                                  2, (const int64_t[]){g.n, g.p});
        co[k] = align ? tj_mul(tj_add(v, f64c(1)), f64c((dim[k] - 1) / 2))
                      : tj_div(tj_sub(tj_mul(tj_add(v, f64c(1)), f64c(dim[k])), f64c(1)), f64c(2));
        if (m == 0)
            co[k] = tj_round(co[k]);
    }
    if (pad) { /* out of bounds on either axis: both coordinates moved inside */
        tj_tensor *oob = NULL;
        for (int k = 0; k < 2; k++) {
            tj_tensor *o =
                tj_logical_or(tj_less(co[k], f64c(g.lo[k])), tj_greater(co[k], f64c(g.hi[k])));
            oob = oob ? tj_logical_or(oob, o) : o;
        }
        for (int k = 0; k < 2; k++)
            co[k] = tj_where(
                oob, pad == 1 ? clampf(co[k], 0, dim[k] - 1) : gs_reflect(co[k], g.lo[k], g.hi[k]),
                co[k]);
    }
    tj_tensor *y = NULL;
    if (m == 0) {
        y = gs_tap(&g, co[1], co[0]);
    } else {
        int taps = m == 1 ? 2 : 4;
        tj_tensor *fx = tj_floor(co[0]), *fy = tj_floor(co[1]), *wx[4], *wy[4];
        tj_tensor *x0 = m == 1 ? fx : tj_sub(fx, f64c(1)), *y0 = m == 1 ? fy : tj_sub(fy, f64c(1));
        if (m == 1) { /* linear: 1 - t and t */
            tj_tensor *tx = tj_sub(co[0], fx), *ty = tj_sub(co[1], fy);
            wx[0] = tj_sub(f64c(1), tx), wx[1] = tx;
            wy[0] = tj_sub(f64c(1), ty), wy[1] = ty;
        } else {
            cubic_w(tj_sub(co[0], fx), wx);
            cubic_w(tj_sub(co[1], fy), wy);
        }
        for (int i = 0; i < taps; i++) {
            tj_tensor *row = NULL;
            for (int j = 0; j < taps; j++) {
                tj_tensor *v = gs_tap(&g, tj_add(y0, f64c(i)), tj_add(x0, f64c(j)));
                v = tj_mul(v, tj_expand_dims(wx[j], 1));
                row = row ? tj_add(row, v) : v;
            }
            row = tj_mul(row, tj_expand_dims(wy[i], 1));
            y = y ? tj_add(y, row) : row;
        }
    }
    y = tj_reshape(y, 4, (const int64_t[]){g.n, g.c, gd[1], gd[2]});
    return one(out, tj_cast(y, tj_tensor_dtype(x)));
}

/* ---- RoiAlign ---------------------------------------------------------------------------------
 * Each region of interest [R, 4] (x1, y1, x2, y2) of image batch_indices[r] is cut into
 * output_height x output_width bins with sampling_ratio^2 points each; a point is the bilinear
 * mix of its 4 neighbours (ONNX's reference rules at the borders: outside [-1, size] it is 0,
 * below 0 it is clamped, past the last pixel it is that pixel), read by one gather per neighbour;
 * a bin is the mean (avg) or the max of its points. Computed in float64 and cast back.
 * sampling_ratio 0 (adaptive: the grid depends on the rois' values) is refused. */
CONV(c_roi_align) {
    (void)n_in, (void)n_out;
    tj_tensor *e = error_of(in, 3);
    if (e)
        return one(out, e);
    tj_tensor *x = in[0], *rois = tj_cast(in[1], TJ_F64), *bidx = tj_cast(in[2], TJ_I64);
    const int64_t *xd = tj_tensor_dims(x), *rd = tj_tensor_dims(rois);
    if (tj_tensor_rank(x) != 4 || tj_tensor_rank(rois) != 2 || rd[1] != 4 ||
        tj_tensor_rank(bidx) != 1 || tj_tensor_dims(bidx)[0] != rd[0])
        return ox_fail(n, TJ_ERR_SHAPE,
                       "X of rank %d, rois of rank %d and batch_indices of rank %d: needs "
                       "[N, C, H, W], [R, 4] and [R]",
                       tj_tensor_rank(x), tj_tensor_rank(rois), tj_tensor_rank(bidx));
    int64_t oh = ox_attr_i(n, "output_height", 1), ow = ox_attr_i(n, "output_width", 1);
    int64_t sr = ox_attr_i(n, "sampling_ratio", 0);
    double scale = ox_attr_f(n, "spatial_scale", 1.0f);
    char b1[24], b2[8];
    int half = n->opset >= 16 &&
               !strcmp(ox_attr_s(n, "coordinate_transformation_mode", "half_pixel", b1, sizeof b1),
                       "half_pixel");
    const char *mode = ox_attr_s(n, "mode", "avg", b2, sizeof b2);
    if (sr <= 0 || oh < 1 || ow < 1 || (strcmp(mode, "avg") && strcmp(mode, "max")))
        return ox_fail(n, TJ_ERR_UNSUPPORTED,
                       "sampling_ratio %lld, output %lldx%lld, mode '%s' (an adaptive "
                       "sampling_ratio of 0 depends on the rois' values)",
                       (long long)sr, (long long)oh, (long long)ow, mode);
    int64_t R = rd[0], C = xd[1], H = xd[2], W = xd[3], A = oh * sr, B = ow * sr;
    tj_tensor *col[4];
    for (int k = 0; k < 4; k++)
        col[k] = tj_sub(tj_mul(tj_reshape(tj_slice(rois, (const int64_t[]){0, k},
                                                   (const int64_t[]){R, k + 1}, NULL),
                                          1, &R),
                               f64c(scale)),
                        f64c(half ? 0.5 : 0));
    tj_tensor *rw = tj_sub(col[2], col[0]), *rh = tj_sub(col[3], col[1]);
    if (!half) { /* malformed rois forced to 1x1 */
        rw = tj_maximum(rw, f64c(1));
        rh = tj_maximum(rh, f64c(1));
    }
    /* sample offsets in bins: ph + (iy + 0.5) / sr for each of the A rows, likewise columns */
    double *cy = malloc(sizeof *cy * (size_t)(A + B));
    if (!cy)
        return ox_fail(n, TJ_ERR_OOM, "out of memory");
    for (int64_t a = 0; a < A; a++)
        cy[a] = (double)(a / sr) + ((double)(a % sr) + 0.5) / (double)sr;
    for (int64_t b = 0; b < B; b++)
        cy[A + b] = (double)(b / sr) + ((double)(b % sr) + 0.5) / (double)sr;
    tj_tensor *ty = tj_tensor_from_data(TJ_F64, 1, &A, cy),
              *tx = tj_tensor_from_data(TJ_F64, 1, &B, cy + A);
    free(cy);
    tj_tensor *y = tj_add(tj_expand_dims(col[1], 1),
                          tj_mul(tj_expand_dims(tj_div(rh, f64c((double)oh)), 1), ty)); /* [R, A] */
    tj_tensor *xx =
        tj_add(tj_expand_dims(col[0], 1),
               tj_mul(tj_expand_dims(tj_div(rw, f64c((double)ow)), 1), tx)); /* [R, B] */
    y = tj_expand_dims(y, 2), xx = tj_expand_dims(xx, 1); /* [R, A, 1], [R, 1, B] */
    tj_tensor *inside = tj_logical_not(
        tj_logical_or(tj_logical_or(tj_less(y, f64c(-1)), tj_greater(y, f64c((double)H))),
                      tj_logical_or(tj_less(xx, f64c(-1)), tj_greater(xx, f64c((double)W)))));
    tj_tensor *lo[2], *hi[2], *l[2]; /* y then x: low/high neighbours and the fraction */
    tj_tensor *v[2] = {tj_maximum(y, f64c(0)), tj_maximum(xx, f64c(0))};
    double lim[2] = {(double)(H - 1), (double)(W - 1)};
    for (int k = 0; k < 2; k++) {
        tj_tensor *f = tj_floor(v[k]), *last = tj_greater_equal(f, f64c(lim[k]));
        lo[k] = tj_where(last, f64c(lim[k]), f);
        hi[k] = tj_where(last, f64c(lim[k]), tj_add(f, f64c(1)));
        l[k] = tj_sub(tj_where(last, lo[k], v[k]), lo[k]);
    }
    tj_tensor *wy[2] = {tj_sub(f64c(1), l[0]), l[0]}, *wx[2] = {tj_sub(f64c(1), l[1]), l[1]};
    tj_tensor *base =
        tj_add(tj_reshape(tj_mul(bidx, tj_scalar_i64(C * H * W)), 4, (const int64_t[]){R, 1, 1, 1}),
               tj_reshape(tj_range(TJ_I64, 0, (double)(C * H * W), (double)(H * W)), 4,
                          (const int64_t[]){1, C, 1, 1}));
    int64_t all = tj_tensor_numel(x);
    tj_tensor *xf = tj_reshape(tj_cast(x, TJ_F64), 1, &all), *acc = NULL;
    int is_max = !strcmp(mode, "max");
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            tj_tensor *pos =
                tj_cast(tj_add(tj_mul(i ? hi[0] : lo[0], f64c((double)W)), j ? hi[1] : lo[1]),
                        TJ_I64); /* [R, A, B] */
            tj_tensor *w = tj_where(inside, tj_mul(wy[i], wx[j]), f64c(0));
            tj_tensor *val = tj_mul(tj_gather(xf, tj_add(base, tj_expand_dims(pos, 1)), 0),
                                    tj_expand_dims(w, 1)); /* [R, C, A, B] */
            acc = !acc ? val : is_max ? tj_maximum(acc, val) : tj_add(acc, val);
        }
    tj_tensor *bins = tj_reshape(acc, 6, (const int64_t[]){R, C, oh, sr, ow, sr});
    tj_tensor *r = is_max
                       ? tj_max(bins, 2, (const int[]){3, 5}, 0)
                       : tj_div(tj_sum(bins, 2, (const int[]){3, 5}, 0), f64c((double)(sr * sr)));
    return one(out, tj_cast(r, tj_tensor_dtype(x)));
}

/* ---- Det ------------------------------------------------------------------------------------
 * The determinant of [..., n, n] by Gaussian elimination with partial pivoting, unrolled over
 * the n columns (n is static; limited to 32): per column the largest remaining |pivot| is
 * swapped up (one-hot row algebra, batched), the sign flips on a swap, the pivot multiplies
 * the determinant and the rows below are eliminated. A zero pivot column gives 0. */
CONV(c_det) {
    (void)n_in, (void)n_out;
    tj_tensor *a = in[0];
    if (tj_status_of(a))
        return one(out, a);
    int r = tj_tensor_rank(a);
    const int64_t *d = tj_tensor_dims(a);
    tj_dtype dt = tj_tensor_dtype(a);
    if (r < 2 || d[r - 1] != d[r - 2] || (dt != TJ_F32 && dt != TJ_F64))
        return ox_fail(n, TJ_ERR_SHAPE, "needs float [..., n, n], got a %s of rank %d",
                       tj_dtype_name(dt), r);
    int64_t nn = d[r - 1];
    if (nn > 32)
        return ox_fail(n, TJ_ERR_UNSUPPORTED,
                       "%lldx%lld matrices (the unrolled elimination stops at 32)", (long long)nn,
                       (long long)nn);
    a = tj_cast(a, TJ_F64);
    tj_tensor *rows = tj_range(TJ_I64, 0, (double)nn, 1); /* [n] */
    tj_tensor *det = NULL;
    int64_t bd[TJ_MAX_RANK], pd[TJ_MAX_RANK]; /* the batch dims; and then 1, 1 */
    memcpy(bd, d, sizeof *bd * (size_t)(r - 2));
    memcpy(pd, bd, sizeof *pd * (size_t)(r - 2));
    pd[r - 2] = pd[r - 1] = 1;
    for (int64_t k = 0; k < nn; k++) {
        int64_t b[TJ_MAX_RANK] = {0}, e[TJ_MAX_RANK];
        memcpy(e, d, sizeof *e * (size_t)r);
        b[r - 1] = k, e[r - 1] = k + 1;
        tj_tensor *colk =
            tj_squeeze(tj_slice(a, b, e, NULL), 1, (const int[]){r - 1}); /* [..., n] */
        /* the pivot row p: the largest |a[i, k]| among rows i >= k (the first on ties) */
        tj_tensor *cand = tj_where(tj_less(rows, tj_scalar_i64(k)), f64c(-1), tj_abs(colk));
        tj_tensor *p = tj_argmax(cand, r - 2);                     /* [...] */
        tj_tensor *hit = tj_equal(tj_expand_dims(p, r - 2), rows); /* [..., n] */
        tj_tensor *row_p = tj_sum(tj_where(tj_expand_dims(hit, r - 1), a, f64c(0)), 1,
                                  (const int[]){r - 2}, 0); /* [..., n] */
        memset(b, 0, sizeof b);
        memcpy(e, d, sizeof *e * (size_t)r);
        b[r - 2] = k, e[r - 2] = k + 1;
        tj_tensor *row_k = tj_squeeze(tj_slice(a, b, e, NULL), 1, (const int[]){r - 2});
        /* swap rows k and p (nothing moves when p == k) */
        tj_tensor *ek = tj_reshape(tj_cast(tj_equal(rows, tj_scalar_i64(k)), TJ_F64), 2,
                                   (const int64_t[]){nn, 1});
        tj_tensor *diff = tj_expand_dims(tj_sub(row_p, row_k), r - 2); /* [..., 1, n] */
        a = tj_add(
            a, tj_sub(tj_mul(ek, diff), tj_mul(tj_expand_dims(tj_cast(hit, TJ_F64), r - 1), diff)));
        /* the determinant takes the pivot row_p[k], negated on a swap */
        int64_t sb[TJ_MAX_RANK] = {0}, se[TJ_MAX_RANK];
        memcpy(se, d, sizeof *se * (size_t)(r - 1));
        sb[r - 2] = k, se[r - 2] = k + 1;
        tj_tensor *pivot = tj_reshape(tj_slice(row_p, sb, se, NULL), r - 2, bd); /* [...] */
        tj_tensor *term = tj_mul(tj_where(tj_equal(p, tj_scalar_i64(k)), f64c(1), f64c(-1)), pivot);
        det = det ? tj_mul(det, term) : term;
        /* eliminate below row k (which is row_p now): a[i] -= a[i, k] / pivot * a[k], i > k */
        memset(b, 0, sizeof b);
        memcpy(e, d, sizeof *e * (size_t)r);
        b[r - 1] = k, e[r - 1] = k + 1;
        tj_tensor *ck = tj_slice(a, b, e, NULL); /* [..., n, 1] */
        tj_tensor *pv = tj_reshape(pivot, r, pd);
        tj_tensor *below =
            tj_reshape(tj_greater(rows, tj_scalar_i64(k)), 2, (const int64_t[]){nn, 1});
        tj_tensor *f = tj_where(tj_logical_and(below, tj_not_equal(pv, f64c(0))), tj_div(ck, pv),
                                f64c(0)); /* [..., n, 1] */
        a = tj_sub(a, tj_mul(f, tj_expand_dims(row_p, r - 2)));
    }
    return one(out, det ? tj_cast(det, dt) : tj_ones(dt, r - 2, bd)); /* 0x0: 1 */
}

const ox_op ox_ops_index[] = {
    {"Compress", c_compress, 2, 2, 9, 0x2},
    {"Det", c_det, 1, 1, 11, 0},
    {"Einsum", c_einsum, 1, 16, 12, 0},
    {"GridSample", c_grid_sample, 2, 2, 16, 0},
    {"MaxUnpool", c_max_unpool, 2, 3, 9, 0x4},
    {"RoiAlign", c_roi_align, 3, 3, 10, 0},
    {"Scatter", c_scatter_elements, 3, 3, 9, 0},
    {"ScatterElements", c_scatter_elements, 3, 3, 11, 0},
    {"ScatterND", c_scatter_nd, 3, 3, 11, 0},
    {"TopK", c_top_k, 1, 2, 1, 0x2},
    {NULL, NULL, 0, 0, 0, 0},
};
