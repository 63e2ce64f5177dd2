/* A module compiled in parts on threads (jit/cpu/llvm/llvm.c): the kernels of every part are
 * found and give the eager results; the objects go to the disk cache as one container and come
 * back from it; a malformed container is refused with an error, never linked. Run again with
 * TJ_COMPILE_THREADS=1 (one thread, one object) and 4 (four parts, on any machine). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "native_first.h"
#include "jit/cpu/cpu.h"
#include "jit/jit.h"
#include "runtime/objload.h"

/* products between elementwise chains and reductions: several kernels of different bodies */
static tj_tensor *many(tj_tensor *x, tj_tensor *w) {
    tj_tensor *a = tj_tanh(tj_add(tj_mul(x, tj_scalar_f32(0.5f)), tj_scalar_f32(0.25f)));
    tj_tensor *h = tj_matmul(a, w);
    tj_tensor *b = tj_exp(tj_neg(tj_mul(h, h)));
    tj_tensor *s = tj_softmax(tj_matmul(b, tj_transpose(w, NULL)), -1);
    tj_tensor *m = tj_max(tj_sigmoid(tj_matmul(s, w)), 1, (int[]){1}, 1);
    return tj_add(tj_mean(tj_mul(b, m), 1, (int[]){0}, 0),
                  tj_sum(tj_log(tj_add(tj_abs(h), tj_scalar_f32(1))), 1, (int[]){0}, 0));
}

static tj_tensor *rand2(int64_t r, int64_t c, uint64_t seed) {
    int64_t d[2] = {r, c};
    return tj_random_uniform(TJ_F32, 2, d, -1, 1, seed);
}

/* Compiles `many` on a fresh function; copies its result into out[n]; returns how its kernels
 * were obtained (jit_cpu_stats.from_cache) or -1. */
static int run(tj_tensor *x, tj_tensor *w, float *out, int64_t n, int *parts) {
    tj_function *f = tj_function_new("many", (void *)many, 2, NULL);
    tj_tensor *args[2] = {x, w};
    tj_tensor *y = tj_call(f, 2, args);
    jit_cpu_stats st = jit_cpu_last_stats();
    *parts = st.parts;
    int ok = tj_status_of(y) == TJ_OK && tj_tensor_numel(y) == n;
    CHECK_MSG(ok, "%s", tj_error_message(y));
    tj_tensor *e = tj_call_eager(f, 2, args);
    for (int64_t i = 0; ok && i < n; i++) {
        double a = tj_tensor_get_f64(y, i), b = tj_tensor_get_f64(e, i);
        out[i] = (float)a;
        if (fabs(a - b) > 1e-4 * (1 + fabs(b))) {
            CHECK_MSG(0, "element %lld: compiled %g, eager %g", (long long)i, a, b);
            ok = 0;
        }
    }
    tj_release(e);
    tj_release(y);
    tj_function_free(f);
    return ok ? st.from_cache : -1;
}

/* rt_obj_join and rt_obj_parts: one object stays itself; several become a container whose parts
 * come back in order, each padded to a multiple of 8; a count out of range is refused. */
static void joined(void) {
    const char a[5] = "abcde", b[16] = "0123456789abcdef", c[1] = "z";
    const void *part[3] = {a, b, c};
    const size_t len[3] = {5, 16, 1};
    size_t size = 0;
    void *one = rt_obj_join(part, len, 1, &size);
    CHECK(one && size == 5 && !memcmp(one, a, 5));
    free(one);
    void *three = rt_obj_join(part, len, 3, &size);
    CHECK(three && size == 8 + 3 * 8 + 8 + 16 + 8);
    const void *got[RT_OBJ_MAX_PARTS];
    size_t got_len[RT_OBJ_MAX_PARTS];
    CHECK(three && rt_obj_parts(three, size, got, got_len) == 3);
    for (int k = 0; three && k < 3; k++)
        CHECK(got_len[k] == ((len[k] + 7) & ~(size_t)7) && !memcmp(got[k], part[k], len[k]));
    free(three);
    CHECK(rt_obj_join(part, len, 0, &size) == NULL && ir_last_code() == TJ_ERR_INVALID);
    CHECK(rt_obj_join(part, len, RT_OBJ_MAX_PARTS + 1, &size) == NULL);
    CHECK_HAS(ir_last_error(), "objects to join");
}

static void bad_containers(void) {
    unsigned char blob[64] = "TJO2";
    uint32_t n = 2;
    uint64_t l0 = 8, l1 = 1000; /* the second object runs past the end */
    memcpy(blob + 4, &n, 4);
    memcpy(blob + 8, &l0, 8);
    memcpy(blob + 16, &l1, 8);
    const char *sym = "nothing";
    void *addr = NULL;
    CHECK(jit_cpu_code_load(blob, sizeof blob, &sym, 1, &addr) == NULL);
    CHECK_HAS(tj_last_error(), "malformed object container");
    n = 0; /* no objects */
    memcpy(blob + 4, &n, 4);
    CHECK(jit_cpu_code_load(blob, 24, &sym, 1, &addr) == NULL);
    n = 1, l0 = 8; /* trailing bytes after the last object */
    memcpy(blob + 4, &n, 4);
    memcpy(blob + 8, &l0, 8);
    CHECK(jit_cpu_code_load(blob, sizeof blob, &sym, 1, &addr) == NULL);
    CHECK_HAS(tj_last_error(), "malformed object container");
    CHECK(addr == NULL);
}

int main(void) {
    check_untiered();
    char dir[] = "/tmp/tj-split-XXXXXX";
    if (!mkdtemp(dir))
        return 77;
    setenv("TJ_CACHE_DIR", dir, 1); /* before the first call: the configuration is read once */
    setenv("TJ_CACHE", "1", 1);
    if (!jit_cpu_available()) {
        rmdir(dir);
        return 77;
    }
    /* threads as the configuration reads them: TJ_COMPILE_THREADS, else the cores (at most 8) */
    const char *ct = getenv("TJ_COMPILE_THREADS");
    long threads = ct && *ct ? atol(ct) : sysconf(_SC_NPROCESSORS_ONLN);
    threads = threads < 1 ? 1 : threads > 8 ? 8 : threads;
    tj_tensor *x = rand2(37, 48, 1), *w = rand2(48, 40, 2);
    float a[64], b[64];
    int parts = 0;
    CHECK_EQ_INT(run(x, w, a, 40, &parts), 0); /* compiled */
    /* its kernels make at least four parts' worth of code */
    CHECK_MSG(parts == (threads < 4 ? threads : 4) || (threads > 4 && parts >= 4),
              "%d parts on %ld threads", parts, threads);
    /* the first function is freed, so its code left the process: the disk cache has it */
    CHECK_EQ_INT(run(x, w, b, 40, &parts), 2);
    CHECK(memcmp(a, b, sizeof(float) * 40) == 0);
    bad_containers();
    joined();
    tj_release(x);
    tj_release(w);
    check_rm_dir(dir);
    return check_done();
}
