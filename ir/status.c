/* status.c — the thread-local error status shared by every layer. ir_errorf formats a message
 * into a per-thread buffer and returns the code, so callers write `return ir_errorf(...)`.
 * tj_last_error (public) reads the same buffer. Messages longer than the buffer are truncated. */
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

#define IR_MSG_CAP 1024

static _Thread_local char msg_buf[IR_MSG_CAP];
static _Thread_local tj_status msg_code;

tj_status ir_verrorf(tj_status code, const char *fmt, va_list ap) {
    char tmp[IR_MSG_CAP]; /* arguments may point into msg_buf (e.g. ir_last_error()) */
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    memcpy(msg_buf, tmp, sizeof tmp);
    msg_code = code;
    return code;
}

tj_status ir_errorf(tj_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ir_verrorf(code, fmt, ap);
    va_end(ap);
    return code;
}

const char *ir_last_error(void) {
    return msg_buf;
}

tj_status ir_last_code(void) {
    return msg_code;
}

void ir_clear_error(void) {
    msg_buf[0] = '\0';
    msg_code = TJ_OK;
}
