/* effects.c — what the side-effecting ops do, eagerly and in every program: print (S12: one
 * line to the print sink or stdout) and host callbacks through libffi (S13). The public entry
 * points, which record PRINT / HOST_CALLBACK nodes while tracing, are api/effects.c. */
#include <ffi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

static tj_print_sink print_sink;
static void *print_user;

void tj_set_print_sink(tj_print_sink sink, void *user) {
    print_sink = sink;
    print_user = user;
}

tj_status rt_do_print(const char *prefix, tj_tensor *const *xs, uint32_t n) {
    size_t cap = 256, len = 0;
    char *line = malloc(cap);
    if (!line)
        return ir_errorf(TJ_ERR_OOM, "print: out of memory");
    line[0] = 0;
    for (uint32_t i = 0; i <= n; i++) {
        char *s = i == 0 ? strdup(prefix ? prefix : "") : rt_values_str(xs[i - 1]);
        if (!s)
            continue;
        size_t k = strlen(s);
        if (len + k + 2 > cap) {
            while (len + k + 2 > cap)
                cap *= 2;
            char *p = realloc(line, cap);
            if (!p) {
                free(s);
                free(line);
                return ir_errorf(TJ_ERR_OOM, "print: out of memory");
            }
            line = p;
        }
        if (len && k)
            line[len++] = ' ';
        memcpy(line + len, s, k + 1);
        len += k;
        free(s);
    }
    if (print_sink) {
        print_sink(line, print_user);
    } else {
        fputs(line, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
    free(line);
    return TJ_OK;
}

/* A callback reports failure through tj_callback_fail, which leaves its error here. */
static _Thread_local int in_callback;
static _Thread_local tj_status cb_code;
static _Thread_local char cb_msg[512];
/* The first error an op made while a callback ran (rt_callback_note_error), so that an error
 * the callback neither reported nor handled is not lost without a word: TJ_LOG=misuse names it. */
static _Thread_local tj_status cb_made_code;
static _Thread_local char cb_made_msg[512];

void rt_callback_note_error(tj_status code, const char *msg) {
    if (in_callback && !cb_made_code) {
        cb_made_code = code;
        snprintf(cb_made_msg, sizeof cb_made_msg, "%s", msg ? msg : "");
    }
}

tj_status tj_callback_fail(tj_status code, const char *fmt, ...) {
    if (!in_callback)
        return ir_errorf(TJ_ERR_STATE, "callback_fail: called outside a host callback");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cb_msg, sizeof cb_msg, fmt ? fmt : "", ap);
    va_end(ap);
    cb_code = code < 0 ? code : TJ_ERR_RUNTIME;
    return cb_code;
}

tj_status rt_do_callback(void *fn, void *user, tj_tensor *const *xs, uint32_t n) {
    if (!fn)
        return ir_errorf(TJ_ERR_INVALID, "host_callback: function is NULL");
    ffi_cif cif;
    ffi_type *stack_types[17];
    void *stack_vals[17];
    void *stack_ptrs[17];
    ffi_type **types = n < 17 ? stack_types : malloc((n + 1) * sizeof *types);
    void **vals = n < 17 ? stack_vals : malloc((n + 1) * sizeof *vals);
    void **ptrs = n < 17 ? stack_ptrs : malloc((n + 1) * sizeof *ptrs);
    tj_status st = TJ_OK;
    if (!types || !vals || !ptrs) {
        st = ir_errorf(TJ_ERR_OOM, "host_callback: out of memory");
        goto out;
    }
    for (uint32_t i = 0; i <= n; i++) {
        types[i] = &ffi_type_pointer;
        ptrs[i] = i == 0 ? user : (void *)xs[i - 1];
        vals[i] = &ptrs[i];
    }
    if (ffi_prep_cif(&cif, FFI_DEFAULT_ABI, n + 1, &ffi_type_void, types) != FFI_OK) {
        st = ir_errorf(TJ_ERR_INVALID,
                       "host_callback: libffi could not prepare a call with %u args", n);
        goto out;
    }
    int outer_code = cb_code, outer_made = cb_made_code;
    in_callback++;
    cb_code = cb_made_code = TJ_OK;
    tj_scope_begin(); /* what the callback's ops make dies with it, eager or compiled */
    ffi_call(&cif, FFI_FN(fn), NULL, vals);
    tj_scope_end();
    in_callback--;
    if (cb_code)
        st = ir_errorf(cb_code, "host_callback: %s", cb_msg);
    else if (cb_made_code)
        rt_log(RT_LOG_MISUSE,
               "host_callback: an op in the callback failed and the callback returned without "
               "tj_callback_fail, so the call goes on: %s",
               cb_made_msg);
    cb_code = outer_code;
    cb_made_code = outer_made;
out:
    if (types != stack_types)
        free(types);
    if (vals != stack_vals)
        free(vals);
    if (ptrs != stack_ptrs)
        free(ptrs);
    return st;
}
