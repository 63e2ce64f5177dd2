/* NVRTC through dlopen (jit/cuda/nvrtc): a CUDA C kernel compiled for sm_80 and sm_90 gives PTX
 * for that target and a cubin (an ELF object); the PTX passes the toolkit's ptxas where it is
 * installed; a source that does not compile is an error carrying NVRTC's log and the kernel's
 * name; bad arguments are refused. No GPU is needed. With TJ_NVRTC naming no library
 * (jit_test_nvrtc_missing) the reason is checked and a compile refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cuda/ptxas.h"
#include "jit/cuda/nvrtc/nvrtc.h"
#include "jit/jit.h"

static const char *saxpy =
    "extern \"C\" __global__ void tj_saxpy(const float *__restrict__ x, float *__restrict__ y,\n"
    "                                      float a, long long n) {\n"
    "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
    "         i += (long long)gridDim.x * blockDim.x)\n"
    "        y[i] = fmaf(a, x[i], y[i]);\n"
    "}\n";

/* Through the artifact cache: compiled once, then from memory, then (memory emptied) from disk;
 * another architecture or source is another entry; a damaged payload is refused. */
static void cached(void) {
    char src[512];
    snprintf(src, sizeof src, "%s// %d\n", saxpy, (int)getpid()); /* new to the disk cache */
    jit_nvrtc_out a, b, c;
    int from = -1;
    CHECK(jit_nvrtc_compile_cached(src, "saxpy.cu", 90, &a, &from) == TJ_OK && from == 0);
    CHECK(jit_nvrtc_compile_cached(src, "saxpy.cu", 90, &b, &from) == TJ_OK && from == 1);
    CHECK(a.ptx && b.ptx && !strcmp(a.ptx, b.ptx) && a.cubin_size == b.cubin_size &&
          !memcmp(a.cubin, b.cubin, a.cubin_size));
    jit_nvrtc_free(&b);
    jit_cache_clear_memory();
    CHECK(jit_nvrtc_compile_cached(src, "saxpy.cu", 90, &b, &from) == TJ_OK && from == 1);
    CHECK(b.ptx && !strcmp(a.ptx, b.ptx));
    CHECK(jit_nvrtc_compile_cached(src, "saxpy.cu", 80, &c, &from) == TJ_OK && from == 0);
    CHECK(c.ptx && strstr(c.ptx, ".target sm_80"));
    char k80[256], k90[256];
    jit_nvrtc_key(src, 80, k80, sizeof k80);
    jit_nvrtc_key(src, 90, k90, sizeof k90);
    CHECK(strcmp(k80, k90) != 0 && strstr(k90, "sm=90") && strstr(k90, jit_nvrtc_version()));
    /* payloads: round trip, then every truncation and a flipped header refused */
    size_t size = 0;
    unsigned char *p = jit_nvrtc_payload(&a, 90, &size);
    jit_nvrtc_out d;
    CHECK(p && jit_nvrtc_parse(p, size, 90, &d) == TJ_OK && !strcmp(d.ptx, a.ptx));
    jit_nvrtc_free(&d);
    CHECK(p && jit_nvrtc_parse(p, size, 80, &d) == TJ_ERR_CORRUPT);
    for (size_t n = 0; p && n < size; n += 1 + n / 7)
        CHECK_MSG(jit_nvrtc_parse(p, n, 90, &d) == TJ_ERR_CORRUPT, "%zu of %zu bytes", n, size);
    if (p) {
        p[9] ^= 0x40; /* the PTX size */
        CHECK(jit_nvrtc_parse(p, size, 90, &d) == TJ_ERR_CORRUPT);
    }
    free(p);
    jit_nvrtc_free(&a);
    jit_nvrtc_free(&b);
    jit_nvrtc_free(&c);
}

/* runtime/kernels/scalar.h, the reference kernels' scalar semantics, compiled by NVRTC for sm_90
 * inside a kernel that calls every helper at every type: the same text serves both compilers. */
static void scalar_header(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/runtime/kernels/scalar.h", TJ_SOURCE_DIR);
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "%s", path);
    if (!f)
        return;
    static char src[65536];
    size_t n = fread(src, 1, sizeof src - 4096, f);
    fclose(f);
    src[n] = 0;
    strcat(src,
           "extern \"C\" __global__ void tj_scalar_all(float *f, double *d, long long *i,\n"
           "                                          unsigned long long *u) {\n"
           "    f[0] = fmod_py_f32(f[0], f[1]) + fmax_nan_f32(f[1], f[2]) + fmin_nan_f32(f[2], "
           "f[3]);\n"
           "    d[0] = fmod_py_f64(d[0], d[1]) + fmax_nan_f64(d[1], d[2]) + fmin_nan_f64(d[2], "
           "d[3]);\n"
           "    i[0] = idiv_i64(i[0], i[1]) + ifloordiv_i64(i[1], i[2]) + imod_i64(i[2], i[3]) +\n"
           "           ipow_i64(i[3], 3) + ishl_i64(i[0], i[1]) + ishr_i64(i[1], i[2]) +\n"
           "           ifloordiv_i8((int8_t)i[0], 3) + imod_i16((int16_t)i[1], 5) + "
           "idiv_i32((int)i[2], 7);\n"
           "    u[0] = upow_u64(u[0], u[1]) + ushl_u32((unsigned)u[1], 3) + ushr_u8((uint8_t)u[2], "
           "1) +\n"
           "           upow_u16((uint16_t)u[3], 2);\n"
           "}\n");
    jit_nvrtc_out out;
    tj_status st = jit_nvrtc_compile(src, "scalar.h.cu", 90, &out);
    CHECK_MSG(st == TJ_OK, "%s", ir_last_error());
    CHECK(st || (out.ptx && strstr(out.ptx, ".entry tj_scalar_all")));
    if (!st)
        ptxas_accepts(out.ptx, 90);
    jit_nvrtc_free(&out);
}

int main(void) {
    const char *why = jit_nvrtc_unavailable();
    const char *env = getenv("TJ_NVRTC");
    jit_nvrtc_out out;
    if (env && strstr(env, "libm.so")) { /* a library, but not NVRTC */
        CHECK_MSG(why && strstr(why, "no NVRTC: the library lacks nvrtcGetErrorString"), "%s",
                  why ? why : "(loaded)");
        return check_done();
    }
    if (env && strstr(env, "no_such")) {
        CHECK_MSG(why && strstr(why, "no NVRTC") && strstr(why, env), "%s", why ? why : "(loaded)");
        CHECK(jit_nvrtc_compile(saxpy, "saxpy.cu", 90, &out) == TJ_ERR_UNSUPPORTED);
        CHECK_HAS(ir_last_error(), "cuda: no NVRTC");
        CHECK(!strcmp(jit_nvrtc_version(), ""));
        return check_done();
    }
    if (why) {
        printf("skipped: %s\n", why);
        return 77;
    }
    CHECK(!strncmp(jit_nvrtc_version(), "nvrtc ", 6));
    const int sms[2] = {80, 90};
    for (int k = 0; k < 2; k++) {
        tj_status st = jit_nvrtc_compile(saxpy, "saxpy.cu", sms[k], &out);
        CHECK_MSG(st == TJ_OK, "%s", ir_last_error());
        if (st)
            continue;
        char target[32];
        snprintf(target, sizeof target, ".target sm_%d", sms[k]);
        CHECK_MSG(out.ptx && strstr(out.ptx, target) && strstr(out.ptx, ".entry tj_saxpy"), "%s",
                  out.ptx ? out.ptx : "(none)");
        CHECK(out.ptx_size == strlen(out.ptx));
        CHECK(out.cubin && out.cubin_size > 64 &&
              !memcmp(out.cubin,
                      "\x7f"
                      "ELF",
                      4));
        printf("sm_%d: %zu bytes of PTX, %zu of cubin in %.1f ms\n", sms[k], out.ptx_size,
               out.cubin_size, out.ms);
        ptxas_accepts(out.ptx, sms[k]);
        jit_nvrtc_free(&out);
    }
    /* a source that does not compile: the log, the name and the target */
    const char *bad = "extern \"C\" __global__ void k(float *x) { x[0] = undefined_thing; }\n";
    CHECK(jit_nvrtc_compile(bad, "bad_kernel.cu", 90, &out) == TJ_ERR_RUNTIME);
    CHECK_HAS(ir_last_error(), "nvrtc bad_kernel.cu for sm_90");
    CHECK_HAS(ir_last_error(), "undefined_thing");
    CHECK(out.ptx == NULL && out.cubin == NULL);
    /* refused arguments */
    CHECK(jit_nvrtc_compile(NULL, "x.cu", 90, &out) == TJ_ERR_INVALID);
    CHECK(jit_nvrtc_compile(saxpy, "x.cu", 7, &out) == TJ_ERR_INVALID);
    CHECK_HAS(ir_last_error(), "no architecture sm_7");
    jit_nvrtc_free(&out);
    jit_nvrtc_free(NULL);
    cached();
    scalar_header();
    return check_done();
}
