/* codegen.c — the CPU backend without a code generator: what libtracejit_rt links in place of
 * jit/cpu/llvm/. Its CPU backend still decides plans, finds kernels in the code cache and runs
 * saved modules' native images (tracejit's own object loader maps them); a graph whose kernels
 * are nowhere cached is refused here, and the caller interprets it. */
#include "jit/cpu/program.h"

static const char *unavailable(void) {
    return "this library was built without LLVM (libtracejit_rt runs saved native code but "
           "compiles none: link libtracejit to compile)";
}

static const char *target_id(void) {
    return "none";
}

static tj_status generate(cpu_prog *cp, const jit_cpu_opts *o, const char **names, void **addrs,
                          uint32_t *nk, jit_cpu_shared *draft) {
    (void)cp, (void)o, (void)names, (void)addrs, (void)nk, (void)draft;
    return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: %s", unavailable());
}

static bool lowers(int op) {
    (void)op;
    return false;
}

const jit_cpu_codegen jit_cpu_codegen_linked = {unavailable, target_id, generate, lowers};
