/* code.c — compiled code objects of the CPU backend: the object bytes LLVM emitted (kept: they
 * are what the disk cache and saved modules store) and their mapping by tracejit's own loader
 * (runtime/objload.c). No LLVM here, so a build without it still runs stored code. */
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/cpu.h"
#include "runtime/objload.h"

struct jit_cpu_code {
    rt_obj *o;
    void *obj;
    size_t obj_size;
};

jit_cpu_code *jit_cpu_code_adopt(void *obj, size_t size, const char *const *syms, uint32_t n_syms,
                                 void **addrs) {
    jit_cpu_code *c = calloc(1, sizeof *c);
    if (!c) {
        free(obj);
        ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory linking an object");
        return NULL;
    }
    c->obj = obj;
    c->obj_size = size;
    if (!(c->o = rt_obj_load(obj, size, syms, n_syms, addrs))) {
        jit_cpu_code_free(c);
        return NULL;
    }
    return c;
}

jit_cpu_code *jit_cpu_code_load(const void *obj, size_t size, const char *const *syms,
                                uint32_t n_syms, void **addrs) {
    void *copy = malloc(size ? size : 1);
    if (!copy) {
        ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory loading an object of %zu bytes", size);
        return NULL;
    }
    memcpy(copy, obj, size);
    return jit_cpu_code_adopt(copy, size, syms, n_syms, addrs);
}

const void *jit_cpu_code_object(const jit_cpu_code *c, size_t *size) {
    *size = c ? c->obj_size : 0;
    return c ? c->obj : NULL;
}

void jit_cpu_code_free(jit_cpu_code *c) {
    if (!c)
        return;
    rt_obj_free(c->o);
    free(c->obj);
    free(c);
}
