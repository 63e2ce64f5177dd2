/* llvm.c — the LLVM plumbing of the CPU backend: one ORC LLJIT per process (created lazily,
 * thread-safe), a TargetMachine for the host CPU name and features at -O3 (without it the loop
 * vectorizer sees no vector registers and nothing vectorizes), `default<O3>` through
 * LLVMRunPasses, object emission into memory and linking of that object into the JIT under its
 * own resource tracker. The object bytes are kept: they are what the disk cache will store.
 * LLVM C API only. Compiles are serialised (one TargetMachine); linking and lookups are not. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jit/cpu/cpu.h"

static _Thread_local jit_cpu_stats t_stats;

jit_cpu_stats jit_cpu_last_stats(void) {
    return t_stats;
}

#ifndef TJ_HAVE_LLVM

bool jit_cpu_available(void) {
    ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: tracejit was built without LLVM");
    return false;
}
const char *jit_cpu_target_id(void) {
    return "none";
}
jit_cpu_code *jit_cpu_code_load(const void *obj, size_t size, const char *const *syms,
                                uint32_t n_syms, void **addrs) {
    ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: tracejit was built without LLVM");
    return NULL;
}
const void *jit_cpu_code_object(const jit_cpu_code *c, size_t *size) {
    *size = 0;
    return NULL;
}
void jit_cpu_code_free(jit_cpu_code *c) {}

#else

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

struct jit_cpu_code {
    LLVMOrcResourceTrackerRef rt;
    void *obj;
    size_t obj_size;
};

static struct {
    pthread_once_t once;
    tj_status status;
    char msg[512];
    LLVMOrcLLJITRef jit;
    LLVMTargetMachineRef tm;
    char *triple, *cpu, *features, *layout;
    char target_id[1024];
    pthread_mutex_t compile_mu;
} L = {PTHREAD_ONCE_INIT,        TJ_OK, "", NULL, NULL, NULL, NULL, NULL, NULL, "",
       PTHREAD_MUTEX_INITIALIZER};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Consumes err; sets the thread's error "cpu jit: <what>: <llvm message>". */
static tj_status llvm_error(LLVMErrorRef err, tj_status code, const char *what) {
    char *m = LLVMGetErrorMessage(err);
    ir_errorf(code, "cpu jit: %s: %s", what, m ? m : "?");
    LLVMDisposeErrorMessage(m);
    return code;
}

static void init_once(void) {
    L.status = TJ_ERR_UNSUPPORTED;
    if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) {
        snprintf(L.msg, sizeof L.msg, "no native target in this LLVM");
        return;
    }
    L.triple = LLVMGetDefaultTargetTriple();
    L.cpu = LLVMGetHostCPUName();
    L.features = LLVMGetHostCPUFeatures();
    LLVMTargetRef target;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(L.triple, &target, &err)) {
        snprintf(L.msg, sizeof L.msg, "target %s: %s", L.triple, err ? err : "?");
        LLVMDisposeMessage(err);
        return;
    }
    L.tm = LLVMCreateTargetMachine(target, L.triple, L.cpu, L.features, LLVMCodeGenLevelAggressive,
                                   LLVMRelocPIC, LLVMCodeModelSmall);
    if (!L.tm) {
        snprintf(L.msg, sizeof L.msg, "no target machine for %s/%s", L.triple, L.cpu);
        return;
    }
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(L.tm);
    L.layout = LLVMCopyStringRepOfTargetData(td);
    LLVMDisposeTargetData(td);

    LLVMErrorRef e = LLVMOrcCreateLLJIT(&L.jit, NULL);
    if (e) {
        char *m = LLVMGetErrorMessage(e);
        snprintf(L.msg, sizeof L.msg, "creating the LLJIT: %s", m ? m : "?");
        LLVMDisposeErrorMessage(m);
        L.jit = NULL;
        return;
    }
    /* libm and libc symbols (expf, memset, ...) resolve from the process */
    LLVMOrcDefinitionGeneratorRef gen;
    e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &gen, LLVMOrcLLJITGetGlobalPrefix(L.jit), NULL, NULL);
    if (e) {
        char *m = LLVMGetErrorMessage(e);
        snprintf(L.msg, sizeof L.msg, "process symbol generator: %s", m ? m : "?");
        LLVMDisposeErrorMessage(m);
        return;
    }
    LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(L.jit), gen);
    unsigned maj = 0, min = 0, patch = 0;
    LLVMGetVersion(&maj, &min, &patch);
    snprintf(L.target_id, sizeof L.target_id, "%s/%s/%s/llvm%u.%u.%u", L.triple, L.cpu, L.features,
             maj, min, patch);
    L.status = TJ_OK;
}

tj_status jit_cpu_llvm_init(void) {
    pthread_once(&L.once, init_once);
    if (L.status != TJ_OK)
        return ir_errorf(L.status, "cpu jit: %s", L.msg);
    return TJ_OK;
}

bool jit_cpu_available(void) {
    return jit_cpu_llvm_init() == TJ_OK;
}

const char *jit_cpu_target_id(void) {
    return jit_cpu_llvm_init() == TJ_OK ? L.target_id : "none";
}

void jit_cpu_prepare_module(LLVMModuleRef m) {
    LLVMSetTarget(m, L.triple);
    LLVMSetDataLayout(m, L.layout);
}

void jit_cpu_stats_set(const jit_cpu_stats *s) {
    t_stats = *s;
}

/* Links an object (copied into an LLVM buffer) under a new resource tracker; looks up syms. */
static jit_cpu_code *link_object(void *obj, size_t size, const char *const *syms, uint32_t n_syms,
                                 void **addrs) {
    jit_cpu_code *c = calloc(1, sizeof *c);
    if (!c) {
        free(obj);
        ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory linking an object");
        return NULL;
    }
    c->obj = obj;
    c->obj_size = size;
    c->rt = LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(L.jit));
    LLVMMemoryBufferRef buf =
        LLVMCreateMemoryBufferWithMemoryRangeCopy(obj, size, "tracejit-kernel");
    LLVMErrorRef e = LLVMOrcLLJITAddObjectFileWithRT(L.jit, c->rt, buf);
    if (e) {
        llvm_error(e, TJ_ERR_RUNTIME, "linking the object");
        jit_cpu_code_free(c);
        return NULL;
    }
    for (uint32_t i = 0; i < n_syms; i++) {
        LLVMOrcExecutorAddress addr = 0;
        e = LLVMOrcLLJITLookup(L.jit, &addr, syms[i]);
        if (e) {
            llvm_error(e, TJ_ERR_RUNTIME, "symbol lookup");
            jit_cpu_code_free(c);
            return NULL;
        }
        addrs[i] = (void *)(uintptr_t)addr;
    }
    return c;
}

jit_cpu_code *jit_cpu_code_load(const void *obj, size_t size, const char *const *syms,
                                uint32_t n_syms, void **addrs) {
    if (jit_cpu_llvm_init() != TJ_OK)
        return NULL;
    void *copy = malloc(size ? size : 1);
    if (!copy) {
        ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory loading an object of %zu bytes", size);
        return NULL;
    }
    memcpy(copy, obj, size);
    return link_object(copy, size, syms, n_syms, addrs);
}

jit_cpu_code *jit_cpu_code_compile(LLVMModuleRef m, LLVMContextRef ctx, const char *const *syms,
                                   uint32_t n_syms, void **addrs) {
    jit_cpu_stats st = t_stats;
    char *msg = NULL;
    void *obj = NULL;
    size_t size = 0;
    tj_status code = TJ_OK;
    if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
        code = ir_errorf(TJ_ERR_RUNTIME, "cpu jit: generated IR is invalid: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        goto done;
    }
    LLVMDisposeMessage(msg);
    msg = NULL;
    const rt_config *cfg = rt_config_get();
    const char *dump = cfg && cfg->dump_dir && *cfg->dump_dir && n_syms ? cfg->dump_dir : NULL;
    char path[1024];
    if (dump) { /* TJ_DUMP: the module before and after O3 */
        snprintf(path, sizeof path, "%s/%s.ll", dump, syms[0]);
        LLVMPrintModuleToFile(m, path, NULL);
    }
    pthread_mutex_lock(&L.compile_mu);
    double t0 = now_ms();
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(po, 1);
    LLVMPassBuilderOptionsSetLoopInterleaving(po, 1);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, 1);
    LLVMErrorRef e = LLVMRunPasses(m, "default<O3>", L.tm, po);
    LLVMDisposePassBuilderOptions(po);
    double t1 = now_ms();
    LLVMMemoryBufferRef buf = NULL;
    if (e) {
        pthread_mutex_unlock(&L.compile_mu);
        code = llvm_error(e, TJ_ERR_RUNTIME, "optimising");
        goto done;
    }
    if (dump) {
        snprintf(path, sizeof path, "%s/%s.opt.ll", dump, syms[0]);
        LLVMPrintModuleToFile(m, path, NULL);
    }
    if (LLVMTargetMachineEmitToMemoryBuffer(L.tm, m, LLVMObjectFile, &msg, &buf)) {
        pthread_mutex_unlock(&L.compile_mu);
        code = ir_errorf(TJ_ERR_RUNTIME, "cpu jit: emitting the object: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        goto done;
    }
    pthread_mutex_unlock(&L.compile_mu);
    double t2 = now_ms();
    size = LLVMGetBufferSize(buf);
    obj = malloc(size ? size : 1);
    if (obj)
        memcpy(obj, LLVMGetBufferStart(buf), size);
    LLVMDisposeMemoryBuffer(buf);
    if (!obj) {
        code = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory keeping a %zu-byte object", size);
        goto done;
    }
    st.opt_ms = t1 - t0;
    st.emit_ms = t2 - t1;
    st.obj_bytes = size;
done:
    LLVMDisposeModule(m);
    if (ctx)
        LLVMContextDispose(ctx);
    if (code != TJ_OK)
        return NULL;
    double t3 = now_ms();
    jit_cpu_code *c = link_object(obj, size, syms, n_syms, addrs);
    st.link_ms = now_ms() - t3;
    t_stats = st;
    return c;
}

const void *jit_cpu_code_object(const jit_cpu_code *c, size_t *size) {
    *size = c ? c->obj_size : 0;
    return c ? c->obj : NULL;
}

void jit_cpu_code_free(jit_cpu_code *c) {
    if (!c)
        return;
    if (c->rt) {
        LLVMErrorRef e = LLVMOrcResourceTrackerRemove(c->rt);
        if (e)
            LLVMConsumeError(e);
        LLVMOrcReleaseResourceTracker(c->rt);
    }
    free(c->obj);
    free(c);
}

#endif /* TJ_HAVE_LLVM */
