/* lex.c — the tokenizer of the text IR: whitespace and comments, names, scalars (numbers,
 * nan/inf, raw NaN bits), quoted strings with C escapes, integer lists. Errors carry line:col of
 * the offending token; only the first error is kept. Bounded: tokens over 60 chars are rejected. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/lex.h"

bool ir_lex_err(ir_lexer *p, size_t at, const char *fmt, ...) {
    if (p->err)
        return false;
    p->err = true;
    int line = 1, col = 1;
    for (size_t i = 0; i < at && p->s[i]; i++, col++)
        if (p->s[i] == '\n')
            line++, col = 0;
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ir_errorf(TJ_ERR_INVALID, "parse error at %d:%d: %s", line, col, msg);
    return false;
}

void ir_lex_ws(ir_lexer *p) {
    for (;;) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            p->pos++;
        else if (c == '#' || (c == '/' && p->s[p->pos + 1] == '/'))
            while (p->s[p->pos] && p->s[p->pos] != '\n')
                p->pos++;
        else
            return;
    }
}

char ir_lex_peek(ir_lexer *p) {
    ir_lex_ws(p);
    return p->s[p->pos];
}

bool ir_lex_accept(ir_lexer *p, char c) {
    if (ir_lex_peek(p) != c)
        return false;
    p->pos++;
    return true;
}

bool ir_lex_expect(ir_lexer *p, char c) {
    if (ir_lex_accept(p, c))
        return true;
    char got = p->s[p->pos];
    if (got >= 0x21 && got <= 0x7e)
        return ir_lex_err(p, p->pos, "expected '%c', got '%c'", c, got);
    return ir_lex_err(p, p->pos, "expected '%c'", c);
}

bool ir_lex_is_id_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

bool ir_lex_ident(ir_lexer *p, size_t *st, size_t *len) {
    ir_lex_ws(p);
    size_t b = p->pos;
    while (ir_lex_is_id_char(p->s[p->pos]))
        p->pos++;
    if (p->pos == b)
        return ir_lex_err(p, b, "expected a name");
    *st = b;
    *len = p->pos - b;
    return true;
}

bool ir_lex_is_word(ir_lexer *p, size_t st, size_t len, const char *w) {
    return strlen(w) == len && memcmp(p->s + st, w, len) == 0;
}

/* A ir_lex_scalar token: number, nan/inf, nan:0xBITS, true/false, 0x... */
bool ir_lex_scalar(ir_lexer *p, size_t *st, size_t *len) {
    ir_lex_ws(p);
    size_t b = p->pos;
    char c;
    while ((c = p->s[p->pos]) && (ir_lex_is_id_char(c) || c == '+' || c == ':'))
        p->pos++;
    if (p->pos == b)
        return ir_lex_err(p, b, "expected a value");
    if (p->pos - b > 60)
        return ir_lex_err(p, b, "value too long");
    *st = b;
    *len = p->pos - b;
    return true;
}

bool ir_lex_i64(ir_lexer *p, size_t st, size_t len, int64_t *out) {
    char buf[64];
    memcpy(buf, p->s + st, len);
    buf[len] = '\0';
    if (!strcmp(buf, "true") || !strcmp(buf, "false")) {
        *out = buf[0] == 't';
        return true;
    }
    const char *d = buf[0] == '-' ? buf + 1 : buf;
    int base = (d[0] == '0' && (d[1] == 'x' || d[1] == 'X')) ? 16 : 10;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, base);
    if (errno || end == buf || *end || !((d[0] >= '0' && d[0] <= '9')))
        return ir_lex_err(p, st, "invalid integer '%s'", buf);
    *out = v;
    return true;
}

bool ir_lex_u64(ir_lexer *p, size_t st, size_t len, uint64_t *out) {
    char buf[64];
    memcpy(buf, p->s + st, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 0);
    if (errno || end == buf || *end || buf[0] < '0' || buf[0] > '9')
        return ir_lex_err(p, st, "invalid unsigned integer '%s'", buf);
    *out = v;
    return true;
}

/* Parses a float token; f32 selects single precision (exact round trip of %.9g and NaN bits). */
bool ir_lex_float(ir_lexer *p, size_t st, size_t len, bool f32, double *d, float *f) {
    char buf[64];
    memcpy(buf, p->s + st, len);
    buf[len] = '\0';
    if (!strncmp(buf, "nan:", 4)) {
        uint64_t bits;
        if (!ir_lex_u64(p, st + 4, len - 4, &bits))
            return false;
        if (f32) {
            uint32_t b = (uint32_t)bits;
            memcpy(f, &b, 4);
        } else
            memcpy(d, &bits, 8);
        return true;
    }
    if (!strcmp(buf, "nan")) {
        uint32_t b32 = 0x7fc00000u;
        uint64_t b64 = 0x7ff8000000000000ull;
        memcpy(f, &b32, 4);
        memcpy(d, &b64, 8);
        return true;
    }
    char *end;
    if (f32)
        *f = strtof(buf, &end);
    else
        *d = strtod(buf, &end);
    if (end == buf || *end)
        return ir_lex_err(p, st, "invalid number '%s'", buf);
    return true;
}

/* Decodes a quoted string at p->pos into a malloc'd buffer (NUL-terminated; *n excludes it). */
char *ir_lex_string(ir_lexer *p, size_t *n) {
    ir_lex_ws(p);
    size_t b = p->pos;
    if (p->s[p->pos] != '"') {
        ir_lex_err(p, b, "expected a string");
        return NULL;
    }
    p->pos++;
    size_t cap = 16, len = 0;
    char *out = malloc(cap);
    while (out) {
        char c = p->s[p->pos];
        if (!c) {
            ir_lex_err(p, b, "unterminated string");
            break;
        }
        p->pos++;
        if (c == '"') {
            out[len] = '\0';
            *n = len;
            return out;
        }
        if (c == '\\') {
            char e = p->s[p->pos];
            if (e)
                p->pos++;
            if (e == 'n')
                c = '\n';
            else if (e == 't')
                c = '\t';
            else if (e == 'r')
                c = '\r';
            else if (e == '0')
                c = '\0';
            else if (e == '\\' || e == '"' || e == '\'')
                c = e;
            else if (e == 'x') {
                int v = 0;
                for (int k = 0; k < 2; k++) {
                    char h = p->s[p->pos];
                    int dv = h >= '0' && h <= '9'   ? h - '0'
                             : h >= 'a' && h <= 'f' ? h - 'a' + 10
                             : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                    : -1;
                    if (dv < 0) {
                        ir_lex_err(p, p->pos, "bad \\x escape");
                        free(out);
                        return NULL;
                    }
                    v = v * 16 + dv;
                    p->pos++;
                }
                c = (char)v;
            } else {
                ir_lex_err(p, p->pos - 1, "unknown escape");
                break;
            }
        }
        if (len + 2 > cap) {
            char *q = realloc(out, cap *= 2);
            if (!q)
                break;
            out = q;
        }
        out[len++] = c;
    }
    if (!p->err)
        ir_lex_err(p, b, "out of memory");
    free(out);
    return NULL;
}

bool ir_lex_int_list(ir_lexer *p, int64_t *v, uint32_t *n, uint32_t max) {
    *n = 0;
    if (!ir_lex_expect(p, '['))
        return false;
    if (ir_lex_accept(p, ']'))
        return true;
    do {
        size_t st, len;
        if (*n >= max)
            return ir_lex_err(p, p->pos, "list longer than %u", max);
        if (!ir_lex_scalar(p, &st, &len) || !ir_lex_i64(p, st, len, &v[(*n)++]))
            return false;
    } while (ir_lex_accept(p, ','));
    return ir_lex_expect(p, ']');
}
