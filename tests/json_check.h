/* json_check.h — a strict JSON validator for tests (RFC 8259: one value, UTF-8, no trailing
 * commas, escapes as the grammar allows), so a test can assert that a file tracejit wrote parses
 * without depending on Python. check_json(text) returns NULL when it parses, else a static
 * message with the byte offset of the first error. */
#ifndef TJ_JSON_CHECK_H
#define TJ_JSON_CHECK_H
#include <stdio.h>
#include <string.h>

typedef struct json_in {
    const unsigned char *s;
    size_t at;
    int depth;
    const char *err;
} json_in;

static void json_ws(json_in *j) {
    while (j->s[j->at] == ' ' || j->s[j->at] == '\t' || j->s[j->at] == '\n' || j->s[j->at] == '\r')
        j->at++;
}
static int json_fail(json_in *j, const char *what) {
    static char msg[160];
    if (!j->err) {
        snprintf(msg, sizeof msg, "%s at offset %zu", what, j->at);
        j->err = msg;
    }
    return 0;
}
static int json_value(json_in *j);
static int json_string(json_in *j) {
    if (j->s[j->at] != '"')
        return json_fail(j, "expected a string");
    j->at++;
    for (;;) {
        unsigned char c = j->s[j->at];
        if (c == '"') {
            j->at++;
            return 1;
        }
        if (c < 32)
            return json_fail(j, c ? "a control character in a string" : "an unterminated string");
        if (c == '\\') {
            c = j->s[++j->at];
            if (c == 'u') {
                for (int k = 1; k <= 4; k++) {
                    unsigned char h = j->s[j->at + k];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') ||
                          (h >= 'A' && h <= 'F')))
                        return json_fail(j, "a bad \\u escape");
                }
                j->at += 5;
            } else if (c && strchr("\"\\/bfnrt", c)) {
                j->at++;
            } else {
                return json_fail(j, "a bad escape");
            }
            continue;
        }
        int n = c < 0x80                          ? 1
                : (c & 0xe0) == 0xc0 && c >= 0xc2 ? 2
                : (c & 0xf0) == 0xe0              ? 3
                : (c & 0xf8) == 0xf0              ? 4
                                                  : 0;
        for (int k = 1; k < n; k++)
            if ((j->s[j->at + k] & 0xc0) != 0x80)
                n = 0;
        if (!n)
            return json_fail(j, "invalid UTF-8");
        j->at += (size_t)n;
    }
}
static int json_number(json_in *j) {
    size_t a = j->at;
    if (j->s[j->at] == '-')
        j->at++;
    if (j->s[j->at] == '0')
        j->at++;
    else if (j->s[j->at] >= '1' && j->s[j->at] <= '9')
        while (j->s[j->at] >= '0' && j->s[j->at] <= '9')
            j->at++;
    else
        return json_fail(j, "a bad number");
    if (j->s[j->at] == '.') {
        j->at++;
        if (!(j->s[j->at] >= '0' && j->s[j->at] <= '9'))
            return json_fail(j, "a bad fraction");
        while (j->s[j->at] >= '0' && j->s[j->at] <= '9')
            j->at++;
    }
    if (j->s[j->at] == 'e' || j->s[j->at] == 'E') {
        j->at++;
        if (j->s[j->at] == '+' || j->s[j->at] == '-')
            j->at++;
        if (!(j->s[j->at] >= '0' && j->s[j->at] <= '9'))
            return json_fail(j, "a bad exponent");
        while (j->s[j->at] >= '0' && j->s[j->at] <= '9')
            j->at++;
    }
    return j->at > a;
}
static int json_list(json_in *j, char close, int keyed) {
    j->at++;
    json_ws(j);
    if (j->s[j->at] == close) {
        j->at++;
        return 1;
    }
    for (;;) {
        json_ws(j);
        if (keyed) {
            if (!json_string(j))
                return 0;
            json_ws(j);
            if (j->s[j->at++] != ':')
                return json_fail(j, "expected ':'");
        }
        if (!json_value(j))
            return 0;
        json_ws(j);
        char c = (char)j->s[j->at++];
        if (c == close)
            return 1;
        if (c != ',')
            return json_fail(j, "expected ',' or the end of a list");
    }
}
static int json_value(json_in *j) {
    json_ws(j);
    if (++j->depth > 256)
        return json_fail(j, "nested too deep");
    unsigned char c = j->s[j->at];
    int ok = c == '{'                                           ? json_list(j, '}', 1)
             : c == '['                                         ? json_list(j, ']', 0)
             : c == '"'                                         ? json_string(j)
             : !strncmp((const char *)j->s + j->at, "true", 4)  ? (j->at += 4, 1)
             : !strncmp((const char *)j->s + j->at, "false", 5) ? (j->at += 5, 1)
             : !strncmp((const char *)j->s + j->at, "null", 4)  ? (j->at += 4, 1)
                                                                : json_number(j);
    j->depth--;
    return ok;
}
static inline const char *check_json(const char *text) {
    json_in j = {(const unsigned char *)(text ? text : ""), 0, 0, NULL};
    if (json_value(&j)) {
        json_ws(&j);
        if (j.s[j.at])
            json_fail(&j, "text after the value");
    }
    return j.err;
}
#endif
