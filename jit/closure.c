/* closure.c — tj_jit_compile: an ffi closure with the user function's own C signature whose
 * body is tj_call. A registry maps closure code pointers to their functions for tj_jit_free and
 * tj_jit_function. Freed closures stay allocated until exit and answer with an error tensor, so
 * a stale pointer called by mistake reports instead of crashing. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "jit/jit.h"

typedef struct closure_entry {
    void *code;
    ffi_closure *closure;
    tj_function *fn;
    int freed;
    struct closure_entry *next;
} closure_entry;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static closure_entry *registry;

static void trampoline(ffi_cif *cif, void *ret, void **args, void *user) {
    closure_entry *e = user;
    int n = (int)cif->nargs;
    tj_tensor *stack[16] = {0}, **a = n <= 16 ? stack : malloc((size_t)n * sizeof *a);
    tj_tensor *r;
    if (!a) {
        r = rt_scoped(rt_errorf(TJ_ERR_OOM, "jit: out of memory"));
    } else {
        for (int i = 0; i < n; i++)
            a[i] = *(tj_tensor **)args[i];
        r = tj_call(e->fn, n, a);
        if (a != stack)
            free(a);
    }
    *(tj_tensor **)ret = r;
}

void *tj_jit_compile(void *fn, int nargs, const tj_function_options *opts) {
    char name[64];
    Dl_info info;
    if (opts && opts->name)
        snprintf(name, sizeof name, "%s", opts->name);
    else if (fn && dladdr(fn, &info) && info.dli_sname && info.dli_saddr == fn)
        snprintf(name, sizeof name, "%s", info.dli_sname);
    else
        snprintf(name, sizeof name, "fn_%p", fn);
    tj_function *f = tj_function_new(name, fn, nargs, opts);
    if (!f)
        return NULL;
    closure_entry *e = calloc(1, sizeof *e);
    void *code = NULL;
    ffi_closure *cl = e ? ffi_closure_alloc(sizeof(ffi_closure), &code) : NULL;
    ffi_cif *cif = cl ? malloc(sizeof *cif) : NULL;
    ffi_type **types = cif ? calloc((size_t)nargs + 1, sizeof *types) : NULL;
    if (!types)
        goto fail;
    for (int i = 0; i < nargs; i++)
        types[i] = &ffi_type_pointer;
    if (ffi_prep_cif(cif, FFI_DEFAULT_ABI, (unsigned)nargs, &ffi_type_pointer, types) != FFI_OK ||
        ffi_prep_closure_loc(cl, cif, trampoline, e, code) != FFI_OK)
        goto fail;
    e->code = code;
    e->closure = cl;
    e->fn = f;
    pthread_mutex_lock(&reg_mu);
    e->next = registry;
    registry = e;
    pthread_mutex_unlock(&reg_mu);
    return code;
fail:
    free(types);
    free(cif);
    if (cl)
        ffi_closure_free(cl);
    free(e);
    tj_function_free(f);
    ir_errorf(TJ_ERR_OOM, "jit_compile: could not allocate an ffi closure");
    return NULL;
}

static closure_entry *find(void *code) {
    for (closure_entry *e = registry; e; e = e->next)
        if (e->code == code)
            return e;
    return NULL;
}

void tj_jit_free(void *compiled) {
    if (!compiled)
        return;
    pthread_mutex_lock(&reg_mu);
    closure_entry *e = find(compiled);
    if (e && !e->freed) {
        e->freed = 1;
        tj_function_free(e->fn); /* the header stays valid and reports "freed" */
    }
    pthread_mutex_unlock(&reg_mu);
}

tj_function *tj_jit_function(void *compiled) {
    pthread_mutex_lock(&reg_mu);
    closure_entry *e = find(compiled);
    tj_function *f = e && !e->freed ? e->fn : NULL;
    pthread_mutex_unlock(&reg_mu);
    return f;
}

__attribute__((destructor)) static void free_closures(void) {
    pthread_mutex_lock(&reg_mu);
    for (closure_entry *e = registry, *next; e; e = next) {
        next = e->next;
        if (!e->freed)
            tj_function_free(e->fn);
        free(e->closure->cif->arg_types);
        free(e->closure->cif);
        ffi_closure_free(e->closure);
        free(e);
    }
    registry = NULL;
    pthread_mutex_unlock(&reg_mu);
}
