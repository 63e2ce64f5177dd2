/* llvm.c — the LLVM plumbing of the CPU backend: process-wide state (created lazily,
 * thread-safe), a TargetMachine for the host CPU name and features at -O3 (without it the loop
 * vectorizer sees no vector registers and nothing vectorizes), `default<O3>` through
 * LLVMRunPasses, object emission into memory and linking of that object into the JIT under its
 * own resource tracker. The object bytes are kept: they are what the disk cache will store.
 * A large module is compiled in parts at once, one a thread (TJ_COMPILE_THREADS, default the
 * cores, at most JIT_CPU_MAX_PARTS): its bitcode is read into a context per further part, each
 * copy keeps the entry points of its part (the others' are deleted, or made internal where
 * something calls them), and each part runs O3 and emission on its own TargetMachine and thread;
 * the objects are kept as one blob ("TJO2" | u32 n | n x u64 size | the objects).
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
#include "runtime/objload.h"

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
    /* one per part of a split compile, each under its mutex; made on first use past the first */
    LLVMTargetMachineRef tm[JIT_CPU_MAX_PARTS];
    pthread_mutex_t tm_mu; /* making them */
    char *triple, *cpu, *features, *layout;
    char target_id[1024];
    pthread_mutex_t compile_mu[JIT_CPU_MAX_PARTS];
} L = {.id_once = PTHREAD_ONCE_INIT, .once = PTHREAD_ONCE_INIT, .tm_mu = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t mu_once = PTHREAD_ONCE_INIT;
static void mu_init(void) {
    for (int i = 0; i < JIT_CPU_MAX_PARTS; i++)
        pthread_mutex_init(&L.compile_mu[i], NULL);
}

static LLVMTargetRef id_target;
/* Target machine i, made on first use (NULL: LLVM could not). */
static LLVMTargetMachineRef target_machine(int i) {
    pthread_mutex_lock(&L.tm_mu);
    if (!L.tm[i])
        L.tm[i] =
            LLVMCreateTargetMachine(id_target, L.triple, L.cpu, L.features,
                                    LLVMCodeGenLevelAggressive, LLVMRelocPIC, LLVMCodeModelSmall);
    LLVMTargetMachineRef tm = L.tm[i];
    pthread_mutex_unlock(&L.tm_mu);
    return tm;
}

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
    pthread_once(&mu_once, mu_init);
    if (!target_machine(0)) {
        snprintf(L.msg, sizeof L.msg, "no target machine for %s/%s", L.triple, L.cpu);
        return;
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

/* ---- compiling: one module, or parts of it at once ------------------------------------------ */
typedef struct part {
    LLVMModuleRef m;
    LLVMContextRef ctx; /* NULL for part 0 (the caller's module and context) */
    int tm;             /* which TargetMachine */
    const char *dump, *name;
    int index, n; /* its number and how many: ".a", ".b", ... in dump names when n > 1 */
    LLVMMemoryBufferRef obj;
    double opt_ms, emit_ms;
    tj_status code;
    char err[512];
} part;

/* O3 and emission of one module; on failure code and err say why (no thread-local error here:
 * parts after the first run on their own threads). */
static void *compile_part(void *arg) {
    part *h = arg;
    char *msg = NULL;
    LLVMTargetMachineRef tm = target_machine(h->tm);
    if (!tm) {
        snprintf(h->err, sizeof h->err, "cpu jit: no target machine for part %d", h->index);
        h->code = TJ_ERR_RUNTIME;
        return NULL;
    }
    pthread_mutex_lock(&L.compile_mu[h->tm]);
    double t0 = now_ms();
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(po, 1);
    LLVMPassBuilderOptionsSetLoopInterleaving(po, 1);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, 1);
    LLVMErrorRef e = LLVMRunPasses(h->m, "default<O3>", tm, po);
    LLVMDisposePassBuilderOptions(po);
    double t1 = now_ms();
    if (e) {
        char *m = LLVMGetErrorMessage(e);
        snprintf(h->err, sizeof h->err, "cpu jit: optimising: %s", m ? m : "?");
        LLVMDisposeErrorMessage(m);
        h->code = TJ_ERR_RUNTIME;
    } else {
        if (h->dump) {
            char path[1024], sfx[8] = "";
            if (h->n > 1)
                snprintf(sfx, sizeof sfx, ".%c", 'a' + h->index);
            snprintf(path, sizeof path, "%s/%s%s.opt.ll", h->dump, h->name, sfx);
            LLVMPrintModuleToFile(h->m, path, NULL);
        }
        if (LLVMTargetMachineEmitToMemoryBuffer(tm, h->m, LLVMObjectFile, &msg, &h->obj)) {
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
 * balances the parts. */
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

enum { SPLIT_MIN = 200 }; /* instructions before O3 per part, below which fewer parts compile */

/* How many parts (at most max) and which part owns each entry point, balancing weights (largest
 * first onto the lightest part). 1 when the module is too small to split or has definitions the
 * parts cannot share. */
static int plan_split(LLVMModuleRef m, const char *const *syms, uint32_t n_syms, int max,
                      char *owner) {
    if (n_syms < 2 || max < 2)
        return 1;
    for (LLVMValueRef g = LLVMGetFirstGlobal(m); g; g = LLVMGetNextGlobal(g))
        if (!LLVMIsDeclaration(g) && LLVMGetLinkage(g) != LLVMInternalLinkage &&
            LLVMGetLinkage(g) != LLVMPrivateLinkage)
            return 1; /* an external variable would be defined twice */
    size_t *w = calloc(n_syms, sizeof *w), total = 0, load[JIT_CPU_MAX_PARTS] = {0};
    if (!w)
        return 1;
    for (uint32_t i = 0; i < n_syms; i++) {
        LLVMValueRef f = LLVMGetNamedFunction(m, syms[i]);
        w[i] = f ? fn_weight(f, 0) : 0;
        total += w[i];
    }
    int n = (int)(total / SPLIT_MIN);
    n = n > max ? max : n > (int)n_syms ? (int)n_syms : n;
    for (uint32_t k = 0; k < n_syms && n >= 2; k++) { /* n_syms is small: selection, no sort */
        uint32_t best = 0;
        size_t bw = 0;
        int found = 0;
        for (uint32_t i = 0; i < n_syms; i++)
            if (w[i] != (size_t)-1 && (!found || w[i] > bw))
                best = i, bw = w[i], found = 1;
        int h = 0;
        for (int p = 1; p < n; p++)
            if (load[p] < load[h])
                h = p;
        owner[best] = (char)h;
        load[h] += bw;
        w[best] = (size_t)-1;
    }
    free(w);
    for (int p = 0; p < n; p++) /* a part with no entry point: fewer parts */
        if (!load[p])
            return 1;
    return n >= 2 ? n : 1;
}

/* Keeps in m the entry points of part `me`: the other parts' are deleted, or made internal
 * where something in m calls them. */
static void keep_part(LLVMModuleRef m, const char *const *syms, uint32_t n_syms, const char *owner,
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

/* The number of parts the configuration allows this compile. */
static int max_parts(void) {
    const rt_config *cfg = rt_config_get();
    int n = rt_compile_one_thread ? 1 : cfg->compile_threads;
    return n < 1 ? 1 : n > JIT_CPU_MAX_PARTS ? JIT_CPU_MAX_PARTS : n;
}

jit_cpu_code *jit_cpu_code_compile(LLVMModuleRef m, LLVMContextRef ctx, const char *const *syms,
                                   uint32_t n_syms, void **addrs) {
    jit_cpu_stats st = jit_cpu_last_stats();
    char *msg = NULL;
    void *obj = NULL;
    size_t size = 0;
    tj_status code = TJ_OK;
    part pv[JIT_CPU_MAX_PARTS];
    memset(pv, 0, sizeof pv);
    pv[0].m = m;
    char *owner = NULL;
    int n = 1;
    if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
        code = ir_errorf(TJ_ERR_RUNTIME, "cpu jit: generated IR is invalid: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        goto done;
    }
    LLVMDisposeMessage(msg);
    msg = NULL;
    const rt_config *cfg = rt_config_get();
    const char *dump = cfg && cfg->dump_dir && *cfg->dump_dir && n_syms ? cfg->dump_dir : NULL;
    if (dump) { /* TJ_DUMP: the module before O3 (after it, per part: compile_part) */
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.ll", dump, syms[0]);
        LLVMPrintModuleToFile(m, path, NULL);
    }
    owner = calloc(n_syms ? n_syms : 1, 1);
    int want = owner ? plan_split(m, syms, n_syms, max_parts(), owner) : 1;
    if (want > 1) {
        /* the further parts: the module's bitcode read into a context each */
        LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(m);
        for (int p = 1; bc && p < want; p++) {
            LLVMContextRef c2 = LLVMContextCreate();
            LLVMModuleRef m2 = NULL;
            if (!c2 || LLVMParseBitcodeInContext2(c2, bc, &m2)) {
                if (c2)
                    LLVMContextDispose(c2);
                break;
            }
            pv[p].m = m2, pv[p].ctx = c2;
            n = p + 1;
        }
        if (bc)
            LLVMDisposeMemoryBuffer(bc);
        if (n < want) /* a copy failed: one part after all */
            for (int p = 1; p < n; p++) {
                LLVMDisposeModule(pv[p].m);
                LLVMContextDispose(pv[p].ctx);
                pv[p].m = NULL, pv[p].ctx = NULL;
            }
        n = n < want ? 1 : n;
        for (int p = 0; p < n && n > 1; p++)
            keep_part(pv[p].m, syms, n_syms, owner, p);
    }
    for (int p = 0; p < n; p++) {
        pv[p].tm = p;
        pv[p].dump = dump;
        pv[p].name = n_syms ? syms[0] : "";
        pv[p].index = p, pv[p].n = n;
    }
    pthread_t th[JIT_CPU_MAX_PARTS];
    int threaded[JIT_CPU_MAX_PARTS] = {0};
    for (int p = 1; p < n; p++)
        threaded[p] = pthread_create(&th[p], NULL, compile_part, &pv[p]) == 0;
    compile_part(&pv[0]);
    for (int p = 1; p < n; p++) {
        if (threaded[p])
            pthread_join(th[p], NULL);
        else
            compile_part(&pv[p]);
    }
    for (int p = 0; p < n; p++)
        if (pv[p].code) {
            code = ir_errorf(pv[p].code, "%s", pv[p].err);
            goto done;
        }
    const void *bytes[JIT_CPU_MAX_PARTS];
    size_t len[JIT_CPU_MAX_PARTS], total = 0;
    for (int p = 0; p < n; p++) {
        bytes[p] = LLVMGetBufferStart(pv[p].obj);
        total += len[p] = LLVMGetBufferSize(pv[p].obj);
    }
    if (!(obj = rt_obj_join(bytes, len, n, &size))) { /* one object, or the container */
        code = ir_last_code();
        goto done;
    }
    /* wall time: the parts overlap; the longest one's */
    st.opt_ms = st.emit_ms = 0;
    for (int p = 0; p < n; p++) {
        st.opt_ms = pv[p].opt_ms > st.opt_ms ? pv[p].opt_ms : st.opt_ms;
        st.emit_ms = pv[p].emit_ms > st.emit_ms ? pv[p].emit_ms : st.emit_ms;
    }
    st.obj_bytes = total;
    st.parts = n;
done:
    free(owner);
    for (int p = 0; p < JIT_CPU_MAX_PARTS; p++)
        if (pv[p].obj)
            LLVMDisposeMemoryBuffer(pv[p].obj);
    LLVMDisposeModule(m);
    if (ctx)
        LLVMContextDispose(ctx);
    for (int p = 1; p < JIT_CPU_MAX_PARTS; p++)
        if (pv[p].m) {
            LLVMDisposeModule(pv[p].m);
            LLVMContextDispose(pv[p].ctx);
        }
    if (code != TJ_OK) {
        free(obj);
        return NULL;
    }
    double t3 = now_ms();
    jit_cpu_code *c = jit_cpu_code_adopt(obj, size, syms, n_syms, addrs);
    st.link_ms = now_ms() - t3;
    jit_cpu_stats_set(&st);
    return c;
}
