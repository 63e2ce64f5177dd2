/* backend.c — the CPU backend as the registry sees it (jit/backend.h): native code through LLVM
 * (program.c and the codegen files), images written and read without LLVM (image.c). */
#include "jit/backend.h"
#include "jit/cpu/cpu.h"
#include "runtime/image.h"

static rt_program *compile(const ir_graph *g, const jit_backend_opts *o) {
    /* exact math: results bit-identical to the reference kernels (libm transcendentals, no FMA
     * contraction); the default trades that for vectorized approximations and FMA */
    jit_cpu_opts co = {.exact_math = o && o->exact_math,
                       .no_contract = o && o->exact_math,
                       .cached_only = o && o->cached_only,
                       .shape_generic = o && o->shape_generic,
                       .quick = o && o->quick};
    return jit_cpu_compile_opts(g, &co);
}

const jit_backend jit_backend_cpu = {
    .name = "cpu",
    .what = "native code for this CPU through LLVM",
    .unavailable = jit_cpu_unavailable,
    .cache_key = jit_cpu_target_id,
    .image_target = rt_image_target,
    .fusable = jit_cpu_fusable,
    .reducible = jit_cpu_reducible,
    .compile = compile,
    .write = jit_cpu_program_image,
    .read = jit_cpu_program_from_image,
};
