/* llvm.c — the LLVM plumbing of the CPU backend: process-wide state (created lazily,
 * thread-safe), a TargetMachine for the host CPU name and features at -O3 (without it the loop
 * vectorizer sees no vector registers and nothing vectorizes), `default<O3>` through
 * LLVMRunPasses, object emission into memory and linking of that object into the JIT under its
 * own resource tracker. The object bytes are kept: they are what the disk cache will store.
 * A large module is compiled in two halves at once: its bitcode is read into a second context,
 * each copy keeps the entry points of its half (the other half's are deleted, or made internal
 * where something calls them), and each half runs O3 and emission on its own TargetMachine and
 * thread; the two objects are kept as one blob ("TJO2" | u32 n | n x u64 size | the objects).
 * Objects are linked by tracejit's own loader (runtime/objload.c), not by ORC: the same code
 * then loads them from the disk cache or a saved module in a build without LLVM. LLVM C API
 * only. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jit/cpu/llvm/codegen.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Error.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

static struct {
    pthread_once_t id_once, once;
    tj_status id_status, status;
    char msg[512];
    LLVMTargetMachineRef tm[2]; /* one per half of a split compile, each under its mutex */
    char *triple, *cpu, *features, *layout;
    char target_id[1024];
    pthread_mutex_t compile_mu[2];
} L = {PTHREAD_ONCE_INIT,
       PTHREAD_ONCE_INIT,
       TJ_OK,
       TJ_OK,
       "",
       {NULL, NULL},
       NULL,
       NULL,
       NULL,
       NULL,
       "",
       {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER}};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Runs O3 and emission once on an empty module, here, on one thread: LLVM builds its lazily
 * created statics (timer groups, pass registries) now rather than inside the first split
 * compile, where two threads would construct them at once (thread-safe in LLVM, but invisible to
 * ThreadSanitizer, whose reports would hide real races). About a millisecond. */
static void warm_up(void) {
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("tracejit-warm-up", ctx);
    LLVMSetTarget(m, L.triple);
    LLVMSetDataLayout(m, L.layout);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(m, "default<O3>", L.tm[0], po);
    if (e)
        LLVMConsumeError(e);
    LLVMDisposePassBuilderOptions(po);
    char *msg = NULL;
    LLVMMemoryBufferRef buf = NULL;
    if (!LLVMTargetMachineEmitToMemoryBuffer(L.tm[0], m, LLVMObjectFile, &msg, &buf))
        LLVMDisposeMemoryBuffer(buf);
    LLVMDisposeMessage(msg);
    LLVMDisposeModule(m);
    LLVMContextDispose(ctx);
}

/* The host's features, limited to what TJ_ISA allows (rt_isa(): the same query the hand-written
 * kernels and the planner ask): below AVX-512 its instructions are turned off, below AVX2 AVX
 * itself (LLVM turns off what implies a feature it turns off), on aarch64 below neon NEON, so
 * generated code runs on a CPU of that kind and one machine tests every path it can execute. A new
 * string (LLVM's). */
static char *limited_features(char *host) {
    const char *has = NULL, *off = NULL;
#if defined(__x86_64__)
    if (rt_isa() < RT_ISA_AVX512)
        has = "+avx512f", off = ",-avx512f";
    if (rt_isa() < RT_ISA_AVX2)
        has = "+avx", off = ",-avx";
#elif defined(__aarch64__)
    /* NEON is in every aarch64 CPU's base features: off whether or not the host lists it (the
     * host's list is empty where LLVM cannot read it, under qemu-aarch64) */
    if (rt_isa() < RT_ISA_NEON)
        has = "", off = *host ? ",-neon" : "-neon";
#endif
    char *s = has && strstr(host, has) ? malloc(strlen(host) + strlen(off) + 1) : NULL;
    if (s) {
        strcpy(s, host);
        strcat(s, off);
        LLVMDisposeMessage(host);
        host = LLVMCreateMessage(s); /* disposed as LLVM's strings are */
        free(s);
    }
    return host;
}

/* What names the target (the code cache's key) and whether LLVM has one here: all that a
 * cache hit asks, a small part of init_once's cost (target machines and the warm-up: ~2.5 ms,
 * which was most of a first call that found its code on disk). */
static LLVMTargetRef id_target;
static void id_once(void) {
    L.id_status = TJ_ERR_UNSUPPORTED;
    if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) {
        snprintf(L.msg, sizeof L.msg, "no native target in this LLVM");
        return;
    }
    L.triple = LLVMGetDefaultTargetTriple();
    L.cpu = LLVMGetHostCPUName();
    L.features = limited_features(LLVMGetHostCPUFeatures());
    char *err = NULL;
    if (LLVMGetTargetFromTriple(L.triple, &id_target, &err)) {
        snprintf(L.msg, sizeof L.msg, "target %s: %s", L.triple, err ? err : "?");
        LLVMDisposeMessage(err);
        return;
    }
    unsigned maj = 0, min = 0, patch = 0;
    LLVMGetVersion(&maj, &min, &patch);
    snprintf(L.target_id, sizeof L.target_id, "%s/%s/%s/llvm%u.%u.%u", L.triple, L.cpu, L.features,
             maj, min, patch);
    L.id_status = TJ_OK;
}

/* What generating code needs: the target machines, the data layout, LLVM's statics warmed. */
static void init_once(void) {
    pthread_once(&L.id_once, id_once);
    L.status = TJ_ERR_UNSUPPORTED;
    if (L.id_status != TJ_OK)
        return;
    LLVMTargetRef target = id_target;
    for (int i = 0; i < 2; i++) {
        L.tm[i] =
            LLVMCreateTargetMachine(target, L.triple, L.cpu, L.features, LLVMCodeGenLevelAggressive,
                                    LLVMRelocPIC, LLVMCodeModelSmall);
        if (!L.tm[i]) {
            snprintf(L.msg, sizeof L.msg, "no target machine for %s/%s", L.triple, L.cpu);
            return;
        }
    }
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(L.tm[0]);
    L.layout = LLVMCopyStringRepOfTargetData(td);
    LLVMDisposeTargetData(td);
    warm_up();
    L.status = TJ_OK;
}

tj_status jit_cpu_llvm_init(void) {
    pthread_once(&L.once, init_once);
    if (L.status != TJ_OK)
        return ir_errorf(L.status, "cpu jit: %s", L.msg);
    return TJ_OK;
}

const char *jit_cpu_llvm_unavailable(void) {
    pthread_once(&L.id_once, id_once);
    return L.id_status == TJ_OK ? NULL : L.msg;
}

const char *jit_cpu_llvm_target_id(void) {
    return jit_cpu_llvm_unavailable() ? "none" : L.target_id;
}

void jit_cpu_prepare_module(LLVMModuleRef m) {
    LLVMSetTarget(m, L.triple);
    LLVMSetDataLayout(m, L.layout);
}

/* ---- compiling: one module, or two halves at once -------------------------------------------- */
typedef struct half {
    LLVMModuleRef m;
    LLVMContextRef ctx;
    int tm; /* which TargetMachine */
    const char *dump, *name;
    char part; /* "" or ".a"/".b" in dump names */
    LLVMMemoryBufferRef obj;
    double opt_ms, emit_ms;
    tj_status code;
    char err[512];
} half;

/* O3 and emission of one module; on failure code and err say why (no thread-local error here:
 * the second half runs on its own thread). */
static void *compile_half(void *arg) {
    half *h = arg;
    char *msg = NULL;
    pthread_mutex_lock(&L.compile_mu[h->tm]);
    double t0 = now_ms();
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(po, 1);
    LLVMPassBuilderOptionsSetLoopInterleaving(po, 1);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, 1);
    LLVMErrorRef e = LLVMRunPasses(h->m, "default<O3>", L.tm[h->tm], po);
    LLVMDisposePassBuilderOptions(po);
    double t1 = now_ms();
    if (e) {
        char *m = LLVMGetErrorMessage(e);
        snprintf(h->err, sizeof h->err, "cpu jit: optimising: %s", m ? m : "?");
        LLVMDisposeErrorMessage(m);
        h->code = TJ_ERR_RUNTIME;
    } else {
        if (h->dump) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s%s.opt.ll", h->dump, h->name,
                     h->part ? (h->part == 'a' ? ".a" : ".b") : "");
            LLVMPrintModuleToFile(h->m, path, NULL);
        }
        if (LLVMTargetMachineEmitToMemoryBuffer(L.tm[h->tm], h->m, LLVMObjectFile, &msg, &h->obj)) {
            snprintf(h->err, sizeof h->err, "cpu jit: emitting the object: %s", msg ? msg : "?");
            h->code = TJ_ERR_RUNTIME;
            h->obj = NULL;
        }
        LLVMDisposeMessage(msg);
    }
    pthread_mutex_unlock(&L.compile_mu[h->tm]);
    h->opt_ms = t1 - t0;
    h->emit_ms = now_ms() - t1;
    return NULL;
}

/* Instructions in f and (to depth 3) in the internal functions it calls: the cost guess that
 * balances the halves. */
static size_t fn_weight(LLVMValueRef f, int depth) {
    size_t n = 0;
    for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b; b = LLVMGetNextBasicBlock(b))
        for (LLVMValueRef i = LLVMGetFirstInstruction(b); i; i = LLVMGetNextInstruction(i)) {
            n++;
            if (depth < 3 && LLVMGetInstructionOpcode(i) == LLVMCall) {
                LLVMValueRef callee = LLVMGetCalledValue(i);
                if (callee && LLVMIsAFunction(callee) && !LLVMIsDeclaration(callee) &&
                    LLVMGetLinkage(callee) == LLVMInternalLinkage)
                    n += fn_weight(callee, depth + 1);
            }
        }
    return n;
}

enum { SPLIT_MIN = 200 }; /* instructions before O3 below which one thread compiles it all */

/* Which half (0 or 1) owns each entry point, balancing weights (largest first onto the lighter
 * half). 0 when the module is too small to split or has definitions the halves cannot share. */
static int plan_split(LLVMModuleRef m, const char *const *syms, uint32_t n_syms, char *owner) {
    if (n_syms < 2)
        return 0;
    for (LLVMValueRef g = LLVMGetFirstGlobal(m); g; g = LLVMGetNextGlobal(g))
        if (!LLVMIsDeclaration(g) && LLVMGetLinkage(g) != LLVMInternalLinkage &&
            LLVMGetLinkage(g) != LLVMPrivateLinkage)
            return 0; /* an external variable would be defined twice */
    size_t *w = calloc(n_syms, sizeof *w), total = 0, load[2] = {0, 0};
    if (!w)
        return 0;
    for (uint32_t i = 0; i < n_syms; i++) {
        LLVMValueRef f = LLVMGetNamedFunction(m, syms[i]);
        w[i] = f ? fn_weight(f, 0) : 0;
        total += w[i];
    }
    for (uint32_t k = 0; k < n_syms; k++) { /* n_syms is small: selection, not a sort */
        uint32_t best = 0;
        size_t bw = 0;
        int found = 0;
        for (uint32_t i = 0; i < n_syms; i++)
            if (w[i] != (size_t)-1 && (!found || w[i] > bw))
                best = i, bw = w[i], found = 1;
        int h = load[1] < load[0];
        owner[best] = (char)h;
        load[h] += bw;
        w[best] = (size_t)-1;
    }
    free(w);
    return total >= SPLIT_MIN && load[0] && load[1];
}

/* Keeps in m the entry points of half `me`: the other half's are deleted, or made internal
 * where something in m calls them. */
static void keep_half(LLVMModuleRef m, const char *const *syms, uint32_t n_syms, const char *owner,
                      int me) {
    for (uint32_t i = 0; i < n_syms; i++) {
        LLVMValueRef f = LLVMGetNamedFunction(m, syms[i]);
        if (!f || owner[i] == me)
            continue;
        if (LLVMGetFirstUse(f))
            LLVMSetLinkage(f, LLVMInternalLinkage);
        else
            LLVMDeleteFunction(f);
    }
}

jit_cpu_code *jit_cpu_code_compile(LLVMModuleRef m, LLVMContextRef ctx, const char *const *syms,
                                   uint32_t n_syms, void **addrs) {
    jit_cpu_stats st = jit_cpu_last_stats();
    char *msg = NULL;
    void *obj = NULL;
    size_t size = 0;
    tj_status code = TJ_OK;
    half hv[2] = {{.m = m, .ctx = NULL, .tm = 0}, {.tm = 1}};
    char *owner = NULL;
    int split = 0;
    if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
        code = ir_errorf(TJ_ERR_RUNTIME, "cpu jit: generated IR is invalid: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        goto done;
    }
    LLVMDisposeMessage(msg);
    msg = NULL;
    const rt_config *cfg = rt_config_get();
    const char *dump = cfg && cfg->dump_dir && *cfg->dump_dir && n_syms ? cfg->dump_dir : NULL;
    if (dump) { /* TJ_DUMP: the module before O3 (after it, per half: compile_half) */
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.ll", dump, syms[0]);
        LLVMPrintModuleToFile(m, path, NULL);
    }
    owner = calloc(n_syms ? n_syms : 1, 1);
    if (owner && cfg->compile_threads > 1 && !rt_compile_one_thread &&
        plan_split(m, syms, n_syms, owner)) {
        /* the second half: the module's bitcode read into its own context */
        LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(m);
        LLVMContextRef c2 = bc ? LLVMContextCreate() : NULL;
        LLVMModuleRef m2 = NULL;
        if (c2 && !LLVMParseBitcodeInContext2(c2, bc, &m2)) {
            hv[1].m = m2, hv[1].ctx = c2;
            keep_half(m, syms, n_syms, owner, 0);
            keep_half(m2, syms, n_syms, owner, 1);
            split = 1;
        } else if (c2) {
            LLVMContextDispose(c2);
        }
        if (bc)
            LLVMDisposeMemoryBuffer(bc);
    }
    for (int i = 0; i < 2; i++) {
        hv[i].dump = dump;
        hv[i].name = n_syms ? syms[0] : "";
        hv[i].part = split ? (char)('a' + i) : 0;
    }
    pthread_t th;
    int threaded = split && pthread_create(&th, NULL, compile_half, &hv[1]) == 0;
    compile_half(&hv[0]);
    if (split) {
        if (threaded)
            pthread_join(th, NULL);
        else
            compile_half(&hv[1]);
    }
    for (int i = 0; i <= split; i++)
        if (hv[i].code) {
            code = ir_errorf(hv[i].code, "%s", hv[i].err);
            goto done;
        }
    size_t len[2] = {LLVMGetBufferSize(hv[0].obj), split ? LLVMGetBufferSize(hv[1].obj) : 0};
    size = split ? 8 + 16 + len[0] + len[1] : len[0];
    obj = malloc(size ? size : 1);
    if (!obj) {
        code = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory keeping a %zu-byte object", size);
        goto done;
    }
    if (split) {
        uint32_t two = 2;
        uint64_t l0 = len[0], l1 = len[1];
        memcpy(obj, "TJO2", 4);
        memcpy((char *)obj + 4, &two, 4);
        memcpy((char *)obj + 8, &l0, 8);
        memcpy((char *)obj + 16, &l1, 8);
        memcpy((char *)obj + 24, LLVMGetBufferStart(hv[0].obj), len[0]);
        memcpy((char *)obj + 24 + len[0], LLVMGetBufferStart(hv[1].obj), len[1]);
    } else {
        memcpy(obj, LLVMGetBufferStart(hv[0].obj), len[0]);
    }
    /* wall time: the halves overlap */
    st.opt_ms = hv[0].opt_ms > hv[1].opt_ms ? hv[0].opt_ms : hv[1].opt_ms;
    st.emit_ms = hv[0].emit_ms > hv[1].emit_ms ? hv[0].emit_ms : hv[1].emit_ms;
    st.obj_bytes = len[0] + len[1];
    st.halves = split + 1;
done:
    free(owner);
    for (int i = 0; i < 2; i++)
        if (hv[i].obj)
            LLVMDisposeMemoryBuffer(hv[i].obj);
    LLVMDisposeModule(m);
    if (ctx)
        LLVMContextDispose(ctx);
    if (hv[1].m) {
        LLVMDisposeModule(hv[1].m);
        LLVMContextDispose(hv[1].ctx);
    }
    if (code != TJ_OK)
        return NULL;
    double t3 = now_ms();
    jit_cpu_code *c = jit_cpu_code_adopt(obj, size, syms, n_syms, addrs);
    st.link_ms = now_ms() - t3;
    jit_cpu_stats_set(&st);
    return c;
}
