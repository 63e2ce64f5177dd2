/* parse.c — reads the text form written by print.c back into a graph, re-adding every node
 * through ir_add (so it is validated, inferred and interned; text ids map to the new ids). The
 * declared type of each node is checked against the inferred one. Errors carry line:col; the
 * parser is hand-written, bounded (nesting depth, token lengths) and never trusts its input. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/lex.h"

#define MAX_DEPTH 16

/* text id -> graph id (open addressing; key 0 = empty, keys stored + 1) */
typedef struct idmap {
    uint64_t *k;
    uint32_t *v;
    uint32_t cap, n;
} idmap;

static uint32_t *map_slot(idmap *m, uint64_t key, bool insert) {
    if (insert && (m->n + 1) * 2 > m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 64;
        uint64_t *k = calloc(cap, sizeof *k);
        uint32_t *v = calloc(cap, sizeof *v);
        if (!k || !v) {
            free(k);
            free(v);
            return NULL;
        }
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->k[i]) {
                uint32_t j = (uint32_t)(m->k[i] * 0x9e3779b97f4a7c15ull >> 32) & (cap - 1);
                while (k[j])
                    j = (j + 1) & (cap - 1);
                k[j] = m->k[i];
                v[j] = m->v[i];
            }
        free(m->k);
        free(m->v);
        m->k = k;
        m->v = v;
        m->cap = cap;
    }
    if (!m->cap)
        return NULL;
    uint32_t j = (uint32_t)((key + 1) * 0x9e3779b97f4a7c15ull >> 32) & (m->cap - 1);
    for (; m->k[j]; j = (j + 1) & (m->cap - 1))
        if (m->k[j] == key + 1)
            return &m->v[j];
    if (!insert)
        return NULL;
    m->k[j] = key + 1;
    m->n++;
    m->v[j] = IR_NONE;
    return &m->v[j];
}

static bool ref(ir_lexer *p, idmap *m, uint32_t *id) {
    ir_lex_ws(p);
    size_t at = p->pos, st, len;
    int64_t t;
    if (!ir_lex_expect(p, '%') || !ir_lex_scalar(p, &st, &len) || !ir_lex_i64(p, st, len, &t))
        return false;
    uint32_t *v = t >= 0 ? map_slot(m, (uint64_t)t, false) : NULL;
    if (!v)
        return ir_lex_err(p, at, "undefined value %%%lld", (long long)t);
    *id = *v;
    return true;
}

typedef struct nodeparse {
    ir_node n;
    uint32_t *ins, n_in, cap_in;
    ir_span *vals;
    uint32_t n_vals, cap_vals;
    char *prefix;
    size_t prefix_len;
    int64_t sl[3][IR_MAX_RANK];
    uint32_t sn[3];
    bool has_sl[3], has_ptr;
    uint64_t ptr[2];
} nodeparse;

static bool push(void **arr, uint32_t *n, uint32_t *cap, size_t elem) {
    if (*n < *cap)
        return true;
    uint32_t c = *cap ? *cap * 2 : 8;
    void *q = realloc(*arr, c * elem);
    if (!q)
        return false;
    *arr = q;
    *cap = c;
    return true;
}

/* One attribute, by the op's schema (ops.def): a name the op does not have is an error. */
static bool attr(ir_lexer *p, nodeparse *np) {
    size_t st, len, at = p->pos;
    if (!ir_lex_ident(p, &st, &len) || !ir_lex_expect(p, '='))
        return false;
    const ir_attr_spec *spec = ir_op_attr(np->n.op, p->s + st, len);
    if (!spec)
        return ir_lex_err(p, at, "%s has no attribute '%.*s'", ir_ops[np->n.op].name, (int)len,
                          p->s + st);
    int idx = spec->slot;
    ir_attrs *a = &np->n.a;
    float f;
    uint64_t u;
    switch (spec->kind) {
    case IR_AK_INT:
        return ir_lex_scalar(p, &st, &len) && ir_lex_i64(p, st, len, &a->i[idx]);
    case IR_AK_FLOAT:
        return ir_lex_scalar(p, &st, &len) && ir_lex_float(p, st, len, false, &a->f[idx], &f);
    case IR_AK_LIST:
        return ir_lex_int_list(p, a->list, &a->n_list, IR_MAX_LIST);
    case IR_AK_LIST3:
        np->has_sl[idx] = true;
        return ir_lex_int_list(p, np->sl[idx], &np->sn[idx], IR_MAX_RANK);
    case IR_AK_STRING:
        free(np->prefix);
        np->prefix = ir_lex_string(p, &np->prefix_len);
        return np->prefix != NULL;
    case IR_AK_POINTER:
        np->has_ptr = true;
        return ir_lex_scalar(p, &st, &len) && ir_lex_u64(p, st, len, &np->ptr[idx]);
    default: /* IR_AK_REGION */
        if (!ir_lex_scalar(p, &st, &len) || !ir_lex_u64(p, st, len, &u))
            return false;
        if (u > UINT32_MAX)
            return ir_lex_err(p, st, "subgraph index out of range");
        a->sub[idx] = (uint32_t)u;
        return true;
    }
}

/* Builds the CONST payload from the value spans once the type is known. */
static uint32_t const_blob(ir_lexer *p, ir_graph *g, nodeparse *np, size_t at) {
    int dt = np->n.dtype;
    int64_t numel = ir_numel(np->n.rank, np->n.dims);
    if (dt >= TJ_N_DTYPES || numel < 0 || numel != (int64_t)np->n_vals) {
        ir_lex_err(p, at, "const: %u values for type %s with %lld elements", np->n_vals,
                   ir_dtype_short(dt), (long long)numel);
        return 0;
    }
    size_t es = ir_dtype_size(dt), size = 0, cap = 64;
    unsigned char *buf = malloc(cap);
    bool ok = buf != NULL;
    for (uint32_t i = 0; ok && i < np->n_vals; i++) {
        ir_span v = np->vals[i];
        unsigned char tmp[8];
        char *str = NULL;
        size_t n = es;
        const void *src = tmp;
        if (v.str != (dt == TJ_STRING)) {
            ok = ir_lex_err(p, v.pos, "const: value %u does not fit %s", i, ir_dtype_name(dt));
            break;
        }
        if (dt == TJ_STRING) {
            ir_lexer q = {p->s, v.pos, false};
            str = ir_lex_string(&q, &n);
            if (!str) {
                ok = ir_lex_err(p, v.pos, "bad string");
                break;
            }
            src = str;
        } else if (dt == TJ_F32 || dt == TJ_F64 || ir_dtype_is_half(dt)) {
            double d;
            float f;
            ok = ir_lex_float(p, v.pos, v.len, dt == TJ_F32, &d, &f);
            uint16_t h = ir_dtype_is_half(dt) ? ir_half_from_f64(dt, d) : 0;
            dt == TJ_F32   ? memcpy(tmp, &f, 4)
            : dt == TJ_F64 ? memcpy(tmp, &d, 8)
                           : memcpy(tmp, &h, 2);
        } else {
            int64_t x;
            uint64_t ux = 0;
            bool neg = p->s[v.pos] == '-';
            if (dt == TJ_U64 && !neg) /* values above INT64_MAX */
                ok = ir_lex_u64(p, v.pos, v.len, &ux), x = (int64_t)ux;
            else
                ok = ir_lex_i64(p, v.pos, v.len, &x);
            if (ok && (!ir_int_fits(dt == TJ_BOOL ? TJ_U8 : dt, x) || (dt == TJ_U64 && neg)))
                ok = ir_lex_err(p, v.pos, "const: %.*s out of range for %s", (int)v.len,
                                p->s + v.pos, ir_dtype_name(dt));
            ir_int_put(dt, tmp, x);
        }
        size_t need = size + n + (dt == TJ_STRING ? 8 : 0);
        if (ok && need > cap) {
            while (cap < need)
                cap *= 2;
            unsigned char *q = realloc(buf, cap);
            ok = q ? (buf = q, true) : ir_lex_err(p, v.pos, "out of memory");
        }
        if (ok && dt == TJ_STRING) {
            uint64_t l = n;
            memcpy(buf + size, &l, 8);
            size += 8;
        }
        if (ok && n)
            memcpy(buf + size, src, n);
        size += n;
        free(str);
    }
    uint32_t b = ok ? ir_add_blob(g, buf, size) : 0;
    free(buf);
    return b;
}

static bool node_body(ir_lexer *p, ir_graph *g, idmap *m, nodeparse *np, size_t at) {
    size_t st, len;
    int64_t tid;
    if (!ir_lex_expect(p, '%') || !ir_lex_scalar(p, &st, &len) || !ir_lex_i64(p, st, len, &tid))
        return false;
    if (tid < 0 || tid > (int64_t)UINT32_MAX - 3)
        return ir_lex_err(p, st, "value id %lld out of range", (long long)tid);
    if (map_slot(m, (uint64_t)tid, false))
        return ir_lex_err(p, at, "value %%%lld defined twice", (long long)tid);
    if (!ir_lex_expect(p, '=') || !ir_lex_ident(p, &st, &len))
        return false;
    int op = ir_op_from_name(p->s + st, len);
    if (op < 0)
        return ir_lex_err(p, st, "unknown op '%.*s'", (int)len, p->s + st);
    np->n.op = (uint16_t)op;
    if (ir_lex_peek(p) == '%') {
        do {
            if (!push((void **)&np->ins, &np->n_in, &np->cap_in, sizeof *np->ins))
                return ir_lex_err(p, p->pos, "out of memory");
            if (!ref(p, m, &np->ins[np->n_in]))
                return false;
            np->n_in++;
        } while (ir_lex_accept(p, ','));
    }
    if (op == IR_OP_CONST) {
        if (!ir_lex_expect(p, '['))
            return false;
        if (!ir_lex_accept(p, ']')) {
            do {
                if (!push((void **)&np->vals, &np->n_vals, &np->cap_vals, sizeof *np->vals))
                    return ir_lex_err(p, p->pos, "out of memory");
                ir_span *v = &np->vals[np->n_vals];
                ir_lex_ws(p);
                v->pos = p->pos;
                v->str = p->s[p->pos] == '"';
                if (v->str) {
                    size_t n;
                    char *s = ir_lex_string(p, &n);
                    if (!s)
                        return false;
                    free(s);
                } else if (!ir_lex_scalar(p, &v->pos, &v->len))
                    return false;
                np->n_vals++;
            } while (ir_lex_accept(p, ','));
            if (!ir_lex_expect(p, ']'))
                return false;
        }
    }
    while (ir_lex_accept(p, '{')) {
        if (ir_lex_accept(p, '}'))
            continue;
        do {
            if (!attr(p, np))
                return false;
        } while (ir_lex_accept(p, ','));
        if (!ir_lex_expect(p, '}'))
            return false;
    }
    if (!ir_lex_expect(p, ':') || !ir_lex_ident(p, &st, &len))
        return false;
    int dt = ir_dtype_from_short(p->s + st, len);
    if (dt < 0)
        return ir_lex_err(p, st, "unknown dtype '%.*s'", (int)len, p->s + st);
    np->n.dtype = (uint8_t)dt;
    if (dt != IR_VOID) {
        if (!ir_lex_expect(p, '['))
            return false;
        if (!ir_lex_accept(p, ']')) {
            do {
                if (np->n.rank >= IR_MAX_RANK)
                    return ir_lex_err(p, p->pos, "rank exceeds %d", IR_MAX_RANK);
                int64_t d = -1;
                if (!ir_lex_accept(p, '?') &&
                    (!ir_lex_scalar(p, &st, &len) || !ir_lex_i64(p, st, len, &d)))
                    return false;
                if (d < -1)
                    return ir_lex_err(p, st, "invalid dimension %lld", (long long)d);
                np->n.dims[np->n.rank++] = d;
            } while (ir_lex_accept(p, ','));
            if (!ir_lex_expect(p, ']'))
                return false;
        }
    }
    ir_attrs *a = &np->n.a;
    if (np->has_sl[0] || np->has_sl[1] || np->has_sl[2]) {
        if (!np->has_sl[0] || !np->has_sl[1] || !np->has_sl[2] || np->sn[0] != np->sn[1] ||
            np->sn[0] != np->sn[2])
            return ir_lex_err(p, at, "slice: begin, end and step must have equal lengths");
        for (int k = 0; k < 3; k++)
            memcpy(a->list + k * np->sn[0], np->sl[k], sizeof(int64_t) * np->sn[0]);
        a->n_list = 3 * np->sn[0];
    }
    if (np->prefix && !(a->blob = ir_add_blob(g, np->prefix, np->prefix_len + 1)))
        return ir_lex_err(p, at, "out of memory");
    if (np->has_ptr) {
        void *pp[2] = {(void *)(uintptr_t)np->ptr[0], (void *)(uintptr_t)np->ptr[1]};
        if (!(a->blob = ir_add_blob(g, pp, sizeof pp)))
            return ir_lex_err(p, at, "out of memory");
    }
    if (op == IR_OP_CONST && !(a->blob = const_blob(p, g, np, at)))
        return false;
    uint32_t id = ir_add(g, &np->n, np->ins, np->n_in);
    if (id == IR_NONE) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", ir_last_error());
        return ir_lex_err(p, at, "%s", msg);
    }
    const ir_node *n = &g->nodes[id];
    if (n->dtype != dt || n->rank != np->n.rank ||
        memcmp(n->dims, np->n.dims, sizeof(int64_t) * n->rank)) {
        char s1[200], s2[200];
        return ir_lex_err(p, at, "%s: declared type %s%s differs from the inferred %s%s",
                          ir_ops[op].name, ir_dtype_short(dt),
                          ir_fmt_dims(s1, sizeof s1, np->n.rank, np->n.dims),
                          ir_dtype_short(n->dtype), ir_fmt_dims(s2, sizeof s2, n->rank, n->dims));
    }
    uint32_t *slot = map_slot(m, (uint64_t)tid, true);
    if (!slot)
        return ir_lex_err(p, at, "out of memory");
    *slot = id;
    return true;
}

static bool parse_node(ir_lexer *p, ir_graph *g, idmap *m) {
    ir_lex_ws(p);
    nodeparse np;
    memset(&np, 0, sizeof np);
    bool ok = node_body(p, g, m, &np, p->pos);
    free(np.ins);
    free(np.vals);
    free(np.prefix);
    return ok;
}

static ir_graph *parse_graph(ir_lexer *p, int depth) {
    size_t st, len;
    if (depth > MAX_DEPTH) {
        ir_lex_err(p, p->pos, "graphs nested too deeply");
        return NULL;
    }
    if (!ir_lex_ident(p, &st, &len) || !ir_lex_is_word(p, st, len, "graph")) {
        ir_lex_err(p, st, "expected 'graph'");
        return NULL;
    }
    if (!ir_lex_expect(p, '@'))
        return NULL;
    char *name = NULL;
    if (ir_lex_peek(p) == '"') {
        size_t n;
        name = ir_lex_string(p, &n);
    } else if (ir_lex_ident(p, &st, &len)) {
        name = strndup(p->s + st, len);
    }
    if (!name || !ir_lex_expect(p, '{')) {
        free(name);
        return NULL;
    }
    ir_graph *g = ir_graph_new(name);
    free(name);
    idmap m = {0};
    bool ok = g != NULL;
    while (ok && !ir_lex_accept(p, '}')) {
        if (ir_lex_peek(p) == '%') {
            ok = parse_node(p, g, &m);
            continue;
        }
        size_t at = p->pos;
        if (!ir_lex_ident(p, &st, &len)) {
            ok = false;
        } else if (ir_lex_is_word(p, st, len, "graph")) {
            p->pos = at;
            ir_graph *sub = parse_graph(p, depth + 1);
            ok = sub && ir_add_sub(g, sub);
            if (sub && !ok)
                ir_graph_free(sub);
        } else if (ir_lex_is_word(p, st, len, "return") || ir_lex_is_word(p, st, len, "effects")) {
            bool ret = len == 6;
            do {
                uint32_t id;
                at = p->pos;
                ok = ref(p, &m, &id);
                if (ok && (ret ? ir_add_output(g, id) : ir_add_effect(g, id))) {
                    char msg[600];
                    snprintf(msg, sizeof msg, "%s", ir_last_error());
                    ok = ir_lex_err(p, at, "%s", msg);
                }
            } while (ok && ir_lex_accept(p, ','));
        } else {
            ok = ir_lex_err(p, at, "expected a node, 'return', 'effects', 'graph' or '}'");
        }
    }
    free(m.k);
    free(m.v);
    if (!ok) {
        if (!p->err)
            ir_lex_err(p, p->pos, "out of memory");
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

ir_graph *ir_parse(const char *text) {
    if (!text) {
        ir_errorf(TJ_ERR_INVALID, "ir_parse: NULL text");
        return NULL;
    }
    ir_lexer p = {text, 0, false};
    ir_graph *g = parse_graph(&p, 0);
    if (g && ir_lex_peek(&p)) {
        ir_lex_err(&p, p.pos, "unexpected text after the graph");
        ir_graph_free(g);
        return NULL;
    }
    if (g && ir_verify(g)) { /* e.g. param indices with a gap */
        char msg[600];
        snprintf(msg, sizeof msg, "%s", ir_last_error());
        ir_errorf(TJ_ERR_INVALID, "parse error: the graph is not valid: %s", msg);
        ir_graph_free(g);
        return NULL;
    }
    return g;
}
