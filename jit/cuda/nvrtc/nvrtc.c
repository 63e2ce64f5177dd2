/* nvrtc.c — NVRTC through dlopen (nvrtc.h). The library is opened on first use (TJ_NVRTC, else
 * libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so) and its entry points resolved by name; its types
 * are declared here as its ABI has them (nvrtc.h), so no CUDA header is needed to build. NVRTC's
 * calls are thread-safe per program; each compile makes its own. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jit/cuda/nvrtc/nvrtc.h"
#include "runtime/cuda.h"

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

static struct {
    pthread_once_t once;
    const char *why;
    char why_buf[384], version[32];
    void *lib;
    const char *(*GetErrorString)(nvrtcResult);
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                 const char *const *, const char *const *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetPTX)(nvrtcProgram, char *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
} N = {.once = PTHREAD_ONCE_INIT};

static void load(void) {
    const char *env = getenv("TJ_NVRTC");
    const char *names[] = {env && *env ? env : NULL, "libnvrtc.so.13", "libnvrtc.so.12",
                           "libnvrtc.so"};
    const char *tried = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !N.lib; i++) {
        if (!names[i])
            continue;
        N.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        tried = tried ? tried : names[i];
        if (env && *env) /* the one asked for, or none */
            break;
    }
    if (!N.lib) {
        const char *e = dlerror();
        snprintf(N.why_buf, sizeof N.why_buf,
                 "no NVRTC: %s could not be opened (%s; the CUDA toolkit's libnvrtc, or TJ_NVRTC)",
                 tried ? tried : "libnvrtc.so", e ? e : "?");
        N.why = N.why_buf;
        return;
    }
    const rt_cuda_sym syms[] = {
        {(void **)&N.GetErrorString, "nvrtcGetErrorString"},
        {(void **)&N.Version, "nvrtcVersion"},
        {(void **)&N.CreateProgram, "nvrtcCreateProgram"},
        {(void **)&N.DestroyProgram, "nvrtcDestroyProgram"},
        {(void **)&N.CompileProgram, "nvrtcCompileProgram"},
        {(void **)&N.GetPTXSize, "nvrtcGetPTXSize"},
        {(void **)&N.GetPTX, "nvrtcGetPTX"},
        {(void **)&N.GetCUBINSize, "nvrtcGetCUBINSize"},
        {(void **)&N.GetCUBIN, "nvrtcGetCUBIN"},
        {(void **)&N.GetProgramLogSize, "nvrtcGetProgramLogSize"},
        {(void **)&N.GetProgramLog, "nvrtcGetProgramLog"},
    };
    const char *missing = rt_cuda_resolve(N.lib, syms, sizeof syms / sizeof *syms);
    if (missing) {
        snprintf(N.why_buf, sizeof N.why_buf, "no NVRTC: the library lacks %s (older than 11?)",
                 missing);
        N.why = N.why_buf;
        return;
    }
    int maj = 0, min = 0;
    N.Version(&maj, &min);
    snprintf(N.version, sizeof N.version, "nvrtc %d.%d", maj, min);
}

const char *jit_nvrtc_unavailable(void) {
    pthread_once(&N.once, load);
    return N.why;
}

const char *jit_nvrtc_version(void) {
    return jit_nvrtc_unavailable() ? "" : N.version;
}

void jit_nvrtc_free(jit_nvrtc_out *out) {
    if (!out)
        return;
    free(out->ptx);
    free(out->cubin);
    memset(out, 0, sizeof *out);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

tj_status jit_nvrtc_compile(const char *source, const char *name, int sm, jit_nvrtc_out *out) {
    memset(out, 0, sizeof *out);
    const char *why = jit_nvrtc_unavailable();
    if (why)
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cuda: %s", why);
    if (!source || !name)
        return ir_errorf(TJ_ERR_INVALID, "nvrtc: the source or its name is NULL");
    if (sm < 50 || sm > 199)
        return ir_errorf(TJ_ERR_INVALID, "nvrtc %s: no architecture sm_%d", name, sm);
    double t0 = now_ms();
    nvrtcProgram p = NULL;
    nvrtcResult r = N.CreateProgram(&p, source, name, 0, NULL, NULL);
    if (r)
        return ir_errorf(TJ_ERR_RUNTIME, "nvrtc %s: %s", name, N.GetErrorString(r));
    char arch[48];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d", sm);
    /* IEEE arithmetic, no --use_fast_math: the backend chooses its approximations itself, as
     * the CPU code generator does (exact math must stay exact) */
    const char *opts[] = {arch, "--std=c++17"};
    r = N.CompileProgram(p, 2, opts);
    tj_status st = TJ_OK;
    if (r) {
        size_t n = 0;
        char *log = N.GetProgramLogSize(p, &n) == 0 && n ? malloc(n + 1) : NULL;
        if (log && N.GetProgramLog(p, log) != 0)
            log[0] = 0;
        if (log)
            log[n] = 0;
        st = ir_errorf(TJ_ERR_RUNTIME, "nvrtc %s for sm_%d: %s: %s", name, sm, N.GetErrorString(r),
                       log && *log ? log : "(no log)");
        free(log);
    } else {
        size_t np = 0, nc = 0;
        if (N.GetPTXSize(p, &np) || !(out->ptx = malloc(np + 1)) || N.GetPTX(p, out->ptx))
            st = ir_errorf(TJ_ERR_RUNTIME, "nvrtc %s: no PTX", name);
        else
            out->ptx[np] = 0, out->ptx_size = strlen(out->ptx); /* its size counts the NUL */
        if (!st && !N.GetCUBINSize(p, &nc) && nc) {
            if (!(out->cubin = malloc(nc)) || N.GetCUBIN(p, out->cubin))
                st = ir_errorf(TJ_ERR_RUNTIME, "nvrtc %s: no cubin", name);
            else
                out->cubin_size = nc;
        }
    }
    N.DestroyProgram(&p);
    out->ms = now_ms() - t0;
    if (st)
        jit_nvrtc_free(out);
    return st;
}
