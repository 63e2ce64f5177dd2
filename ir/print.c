/* print.c — the text form of a graph, read back by parse.c (print(parse(print(g))) == print(g)):
 *   graph @name {
 *     %0 = param {index=0} : f32[2,3]
 *     %1 = const [1, 2.5, 3] : f32[3]
 *     %2 = add %0, %1 : f32[2,3]
 *     %3 = sum %2 {axes=[1], keepdims=0} : f32[2]
 *     %4 = print %3 {prefix="x"} : void
 *     return %3
 *     effects %4
 *   }
 * Only the attributes an op uses are printed, by name, as its schema in ops.def lists them. Floats
 * use %.9g (f32) / %.17g (f64), NaNs other than the default one carry their bits
 * ("nan:0x7fc00001"); unknown dims print as '?'; subgraphs print as nested graphs before the nodes,
 * in index order. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"

void ir_sbuf_put(ir_sbuf *b, const char *fmt, ...) {
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)w < b->cap - b->n) {
            b->n += (size_t)w;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)w + 64;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static void put_f64(ir_sbuf *b, double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    if (isnan(d))
        u == 0x7ff8000000000000ull ? ir_sbuf_put(b, "nan")
                                   : ir_sbuf_put(b, "nan:0x%llx", (unsigned long long)u);
    else if (isinf(d))
        ir_sbuf_put(b, d < 0 ? "-inf" : "inf");
    else
        ir_sbuf_put(b, "%.17g", d);
}

static void put_f32(ir_sbuf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (isnan(f))
        u == 0x7fc00000u ? ir_sbuf_put(b, "nan") : ir_sbuf_put(b, "nan:0x%x", (unsigned)u);
    else if (isinf(f))
        ir_sbuf_put(b, f < 0 ? "-inf" : "inf");
    else
        ir_sbuf_put(b, "%.9g", (double)f);
}

static void put_str(ir_sbuf *b, const char *s, size_t len) {
    ir_sbuf_put(b, "\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            ir_sbuf_put(b, "\\%c", c);
        else if (c == '\n')
            ir_sbuf_put(b, "\\n");
        else if (c == '\t')
            ir_sbuf_put(b, "\\t");
        else if (c == '\r')
            ir_sbuf_put(b, "\\r");
        else if (c < 0x20 || c > 0x7e)
            ir_sbuf_put(b, "\\x%02x", c);
        else
            ir_sbuf_put(b, "%c", c);
    }
    ir_sbuf_put(b, "\"");
}

static void put_list(ir_sbuf *b, const int64_t *v, uint32_t n) {
    ir_sbuf_put(b, "[");
    for (uint32_t i = 0; i < n; i++)
        ir_sbuf_put(b, i ? ", %lld" : "%lld", (long long)v[i]);
    ir_sbuf_put(b, "]");
}

void ir_sbuf_type(ir_sbuf *b, const ir_node *n) {
    if (n->dtype == IR_VOID) {
        ir_sbuf_put(b, "void");
        return;
    }
    ir_sbuf_put(b, "%s[", ir_dtype_short(n->dtype));
    for (int k = 0; k < n->rank && k < IR_MAX_RANK; k++) {
        if (n->dims[k] < 0)
            ir_sbuf_put(b, k ? ",?" : "?");
        else
            ir_sbuf_put(b, k ? ",%lld" : "%lld", (long long)n->dims[k]);
    }
    ir_sbuf_put(b, "]");
}

static void put_const(ir_sbuf *b, const ir_node *n, const ir_blob *bl) {
    ir_sbuf_put(b, " [");
    if (!bl) {
        ir_sbuf_put(b, "]");
        return;
    }
    const unsigned char *p = bl->data;
    if (n->dtype == TJ_STRING) {
        size_t off = ir_string_count(bl->data, bl->size) >= 0 ? 0 : bl->size;
        for (int64_t i = 0; off < bl->size; i++) {
            uint64_t len;
            memcpy(&len, p + off, sizeof len);
            off += sizeof len;
            if (i)
                ir_sbuf_put(b, ", ");
            put_str(b, (const char *)p + off, (size_t)len);
            off += (size_t)len;
        }
    } else {
        size_t es = ir_dtype_size(n->dtype), cnt = es ? bl->size / es : 0;
        for (size_t i = 0; i < cnt; i++) {
            if (i)
                ir_sbuf_put(b, ", ");
            const void *e = p + i * es;
            switch (n->dtype) {
            case TJ_F32: {
                float f;
                memcpy(&f, e, 4);
                put_f32(b, f);
                break;
            }
            case TJ_F64: {
                double d;
                memcpy(&d, e, 8);
                put_f64(b, d);
                break;
            }
            case TJ_U64:
                ir_sbuf_put(b, "%llu", (unsigned long long)ir_int_get(n->dtype, e));
                break;
            case TJ_F16:
            case TJ_BF16: { /* exact in float32, which prints so it parses back */
                uint16_t h;
                memcpy(&h, e, 2);
                put_f32(b, (float)ir_half_to_f64(n->dtype, h));
                break;
            }
            default: /* the other integer widths and bool */
                ir_sbuf_put(b, "%lld", (long long)ir_int_get(n->dtype, e));
                break;
            }
        }
    }
    ir_sbuf_put(b, "]");
}

/* The attributes op n's schema names (ops.def), in its order; optional ones only when set. */
static void put_attrs(ir_sbuf *b, const ir_graph *g, const ir_node *n) {
    const ir_attrs *a = &n->a;
    const ir_blob *bl = a->blob <= g->n_blobs ? ir_blob_get(g, a->blob) : NULL;
    int put = 0;
    for (const ir_attr_spec *s = ir_ops[n->op].attrs; s->name; s++) {
        int64_t iv = s->kind == IR_AK_INT ? a->i[s->slot] : 0;
        uint32_t sub = s->kind == IR_AK_REGION ? a->sub[s->slot] : 0;
        if (s->optional && ((s->kind == IR_AK_INT && !iv) || (s->kind == IR_AK_REGION && !sub)))
            continue;
        if ((s->kind == IR_AK_STRING && !bl) ||
            (s->kind == IR_AK_POINTER && (!bl || bl->size != 2 * sizeof(void *))))
            continue;
        ir_sbuf_put(b, put++ ? ", %s=" : " {%s=", s->name);
        switch (s->kind) {
        case IR_AK_INT:
            ir_sbuf_put(b, "%lld", (long long)iv);
            break;
        case IR_AK_FLOAT:
            put_f64(b, a->f[s->slot]);
            break;
        case IR_AK_LIST:
            put_list(b, a->list, a->n_list);
            break;
        case IR_AK_LIST3: {
            uint32_t r = a->n_list / 3;
            put_list(b, a->list + s->slot * r, r);
            break;
        }
        case IR_AK_STRING: {
            size_t len = bl->size;
            if (len && ((const char *)bl->data)[len - 1] == '\0')
                len--;
            put_str(b, bl->data, len);
            break;
        }
        case IR_AK_POINTER: {
            void *pp[2];
            memcpy(pp, bl->data, sizeof pp);
            ir_sbuf_put(b, "0x%llx", (unsigned long long)(uintptr_t)pp[s->slot]);
            break;
        }
        case IR_AK_REGION:
            ir_sbuf_put(b, "%u", sub);
            break;
        }
    }
    if (put)
        ir_sbuf_put(b, "}");
}

static bool ident_name(const char *s) {
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.' || *s == '-'))
            return false;
    return true;
}

static void put_graph(ir_sbuf *b, const ir_graph *g, int depth) {
    int ind = 2 * depth;
    const char *name = g->name ? g->name : "";
    if (ident_name(name))
        ir_sbuf_put(b, "%*sgraph @%s {\n", ind, "", name);
    else {
        ir_sbuf_put(b, "%*sgraph @", ind, "");
        put_str(b, name, strlen(name));
        ir_sbuf_put(b, " {\n");
    }
    for (uint32_t i = 0; i < g->n_subs; i++)
        if (g->subs[i])
            put_graph(b, g->subs[i], depth + 1);
    for (uint32_t id = 0; id < g->n_nodes && !b->oom; id++) {
        const ir_node *n = &g->nodes[id];
        ir_sbuf_put(b, "%*s%%%u = %s", ind + 2, "", id,
                    n->op < IR_N_OPS ? ir_ops[n->op].name : "?");
        const uint32_t *in = ir_inputs(g, n);
        for (uint32_t k = 0; k < n->n_in; k++)
            ir_sbuf_put(b, k ? ", %%%u" : " %%%u", in[k]);
        if (n->op == IR_OP_CONST)
            put_const(b, n, n->a.blob <= g->n_blobs ? ir_blob_get(g, n->a.blob) : NULL);
        put_attrs(b, g, n);
        ir_sbuf_put(b, " : ");
        ir_sbuf_type(b, n);
        ir_sbuf_put(b, "\n");
    }
    if (g->n_outputs) {
        ir_sbuf_put(b, "%*sreturn", ind + 2, "");
        for (uint32_t i = 0; i < g->n_outputs; i++)
            ir_sbuf_put(b, i ? ", %%%u" : " %%%u", g->outputs[i]);
        ir_sbuf_put(b, "\n");
    }
    if (g->n_effects) {
        ir_sbuf_put(b, "%*seffects", ind + 2, "");
        for (uint32_t i = 0; i < g->n_effects; i++)
            ir_sbuf_put(b, i ? ", %%%u" : " %%%u", g->effects[i]);
        ir_sbuf_put(b, "\n");
    }
    ir_sbuf_put(b, "%*s}\n", ind, "");
}

char *ir_print(const ir_graph *g) {
    if (!g) {
        ir_errorf(TJ_ERR_INVALID, "ir_print: NULL graph");
        return NULL;
    }
    ir_sbuf b = {malloc(256), 0, 256, false};
    if (!b.p) {
        ir_errorf(TJ_ERR_OOM, "ir_print: out of memory");
        return NULL;
    }
    b.p[0] = '\0';
    put_graph(&b, g, 0);
    if (b.oom) {
        free(b.p);
        ir_errorf(TJ_ERR_OOM, "ir_print: out of memory");
        return NULL;
    }
    return b.p;
}
