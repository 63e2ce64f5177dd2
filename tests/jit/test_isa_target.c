/* TJ_ISA limits the generated code as it limits the hand-written kernels: the code generator's
 * target (part of every cache key) turns AVX-512 off below avx512 and AVX off below avx2, where
 * the CPU has them (appended to the host's features, before the LLVM version), so one machine
 * runs the code a CPU of each kind would get; on aarch64 TJ_ISA=generic turns NEON off. Run under
 * TJ_ISA=avx512, avx2 and generic (tests/CMakeLists.txt; neon and generic on aarch64); every case
 * compiles and runs a function whose loops the vectorizer widens, and its values match eager mode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "native_first.h"
#include "jit/cpu/cpu.h"
#include <tracejit.h>

static tj_tensor *f(tj_tensor *x) {
    return tj_sum(tj_tanh(tj_add(tj_mul(x, x), tj_scalar_f32(0.5f))), 0, NULL, 0);
}

int main(void) {
    check_untiered();
    if (tj_backend_unavailable("cpu")) {
        printf("skipped: %s\n", tj_backend_unavailable("cpu"));
        return 77;
    }
    const char *isa = tj_cpu_isa(), *target = jit_cpu_target_id();
    printf("kernels: %s; generated code: %s\n", isa, target);
#if defined(__x86_64__)
    __builtin_cpu_init();
    int has512 = __builtin_cpu_supports("avx512f"), hasavx = __builtin_cpu_supports("avx");
    if (!strcmp(isa, "avx512"))
        CHECK_MSG(!strstr(target, ",-avx512f/") && !strstr(target, ",-avx/"), "%s", target);
    if (!strcmp(isa, "avx2") && has512)
        CHECK_MSG(strstr(target, ",-avx512f/") != NULL, "TJ_ISA=avx2 but %s", target);
    if (!strcmp(isa, "generic") && hasavx)
        CHECK_MSG(strstr(target, ",-avx/") != NULL, "TJ_ISA=generic but %s", target);
#elif defined(__aarch64__)
    if (!strcmp(isa, "generic"))
        CHECK_MSG(strstr(target, "-neon/") != NULL, "TJ_ISA=generic but %s", target);
    else
        CHECK_MSG(!strstr(target, "-neon/"), "%s", target);
#endif
    tj_function *fn = tj_function_new("isa_target", (void *)f, 1, NULL);
    int64_t d[1] = {4099};
    tj_tensor *x = tj_random_uniform(TJ_F32, 1, d, -2, 2, 7);
    tj_scope_begin(); /* the eager run's intermediates */
    tj_tensor *got = tj_keep(tj_call(fn, 1, &x)), *want = tj_keep(f(x));
    tj_scope_end();
    tj_spec s = {TJ_F32, 1, {4099}, NULL};
    CHECK_STR(tj_concrete_backend(tj_function_get_concrete(fn, 1, &s)), "cpu");
    CHECK_NEAR(tj_tensor_get_f64(got, 0), tj_tensor_get_f64(want, 0), 1e-2);
    tj_release(got);
    tj_release(want);
    tj_release(x);
    tj_function_free(fn);
    return check_done();
}
