/* lex.h — the tokenizer shared by the text-form parser files (parse.c); private to ir/.
 * Every function returns false (or NULL) after recording the first error with its line:col. */
#ifndef TJ_IR_LEX_H
#define TJ_IR_LEX_H

#include "ir/internal.h"

typedef struct ir_lexer {
    const char *s;
    size_t pos;
    bool err;
} ir_lexer;

typedef struct ir_span {
    size_t pos, len;
    bool str;
} ir_span;

bool ir_lex_err(ir_lexer *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void ir_lex_ws(ir_lexer *p);
char ir_lex_peek(ir_lexer *p);
bool ir_lex_accept(ir_lexer *p, char c);
bool ir_lex_expect(ir_lexer *p, char c);
bool ir_lex_is_id_char(char c);
bool ir_lex_ident(ir_lexer *p, size_t *st, size_t *len);
bool ir_lex_is_word(ir_lexer *p, size_t st, size_t len, const char *w);
/* A scalar token: number, nan/inf, nan:0xBITS, true/false, 0x... */
bool ir_lex_scalar(ir_lexer *p, size_t *st, size_t *len);
bool ir_lex_i64(ir_lexer *p, size_t st, size_t len, int64_t *out);
bool ir_lex_u64(ir_lexer *p, size_t st, size_t len, uint64_t *out);
/* f32 selects single precision (exact round trip of %.9g and NaN bits). */
bool ir_lex_float(ir_lexer *p, size_t st, size_t len, bool f32, double *d, float *f);
/* Decodes a quoted string into a malloc'd buffer (NUL-terminated; *n excludes it). */
char *ir_lex_string(ir_lexer *p, size_t *n);
bool ir_lex_int_list(ir_lexer *p, int64_t *v, uint32_t *n, uint32_t max);

#endif
