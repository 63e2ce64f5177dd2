/* prelude.c — what every CUDA module the backend generates starts with (jit_cuda_prelude): the
 * kernel ABI (one tj_args of buffers), the scalar semantics both compilers share
 * (runtime/kernels/scalar.h's text, embedded by cmake/embed.cmake), f16/bf16 conversions as the
 * host converts, and under TJ_EMULATE the shim that runs the same text as host C for the tests'
 * fake driver (emulate.c). Also the string builder the emitters write with. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "jit/cuda/cuda.h"

#include "tj_cuda_scalar.inc" /* tj_cuda_scalar_h: scalar.h's text (cmake/embed.cmake) */

void jit_sbuf_printf(jit_sbuf *b, const char *fmt, ...) {
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->s && b->n + (size_t)n < b->cap) {
            b->n += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* ---- the prelude ------------------------------------------------------------------------------
 */
/* Under TJ_EMULATE (emulate.c) the same text compiles as host C. A grid's blocks run one after
 * another; a block's threads run one after another too, each on its own stack (a fiber) when the
 * kernel meets at __syncthreads: each round runs every fiber up to its next barrier, so none
 * passes a barrier before all have reached it, as on the GPU. Fibers switch by six pushes and a
 * stack swap on x86-64 (ucontext elsewhere, whose every switch is a system call; host threads at a
 * barrier took minutes for the CNN step). __shared__ arrays are static (one block at a time). */
static const char emu_shim[] =
    "#include <stdint.h>\n"
    "#include <stdlib.h>\n"
    "typedef struct tj_dim3 { unsigned x, y, z; } tj_dim3;\n"
    "static tj_dim3 threadIdx, blockIdx, blockDim, gridDim;\n"
    "static unsigned tj_cur;\n"
    "static void tj_yield(void);\n"
    "#define tj_atomic_min_u64(p, v) (*(p) = (v) < *(p) ? (v) : *(p)) /* one fiber at a time */\n"
    "#define TJ_KERNEL void\n"
    "#define TJ_SYNC_KERNEL(name) int name##_tj_sync = 1;\n"
    "#define TJ_SHARED static\n"
    "#define TJ_RESTRICT restrict\n"
    "#define __syncthreads() tj_yield()\n";

static const char emu_launch[] =
    "typedef void (*tj_kfn)(tj_args);\n"
    "static tj_kfn tj_fn;\n"
    "static const tj_args *tj_a;\n"
    "static unsigned char *tj_done;\n"
    "enum { TJ_STACK = 64 << 10 };\n"
    "#if defined(__x86_64__)\n"
    "void tj_ctx_switch(void **from, void *to);\n"
    "__asm__(\".text\\n.p2align 4\\n.hidden tj_ctx_switch\\n.globl tj_ctx_switch\\n\"\n"
    "        \"tj_ctx_switch:\\n\"\n"
    "        \"pushq %rbp\\npushq %rbx\\npushq %r12\\npushq %r13\\npushq %r14\\npushq %r15\\n\"\n"
    "        \"movq %rsp, (%rdi)\\nmovq %rsi, %rsp\\n\"\n"
    "        \"popq %r15\\npopq %r14\\npopq %r13\\npopq %r12\\npopq %rbx\\npopq %rbp\\nret\\n\");\n"
    "static void *tj_sched, **tj_sp;\n"
    "static void tj_yield(void) { tj_ctx_switch(&tj_sp[tj_cur], tj_sched); }\n"
    "static void tj_fiber(void) { /* a thread of a block: runs, then back for good */\n"
    "    tj_fn(*tj_a);\n"
    "    tj_done[tj_cur] = 1;\n"
    "    tj_yield();\n"
    "}\n"
    "static void tj_fiber_new(unsigned t, char *stack) {\n"
    "    uintptr_t top = ((uintptr_t)stack + TJ_STACK) & ~(uintptr_t)15;\n"
    "    void **sp = (void **)(top - 16); /* the return address: an entry's alignment after ret "
    "*/\n"
    "    sp[0] = (void *)tj_fiber;\n"
    "    sp -= 6; /* rbp rbx r12 r13 r14 r15 */\n"
    "    for (int k = 0; k < 6; k++) sp[k] = 0;\n"
    "    tj_sp[t] = sp;\n"
    "}\n"
    "static void tj_fiber_run(unsigned t) { tj_ctx_switch(&tj_sched, tj_sp[t]); }\n"
    "static int tj_fibers_alloc(unsigned n) { return !(tj_sp = calloc(n, sizeof *tj_sp)); }\n"
    "static void tj_fibers_free(void) { free(tj_sp); tj_sp = 0; }\n"
    "#else\n"
    "#include <ucontext.h>\n"
    "static ucontext_t tj_sched, *tj_fib;\n"
    "static void tj_yield(void) { swapcontext(&tj_fib[tj_cur], &tj_sched); }\n"
    "static void tj_fiber(void) {\n"
    "    tj_fn(*tj_a);\n"
    "    tj_done[tj_cur] = 1;\n"
    "}\n"
    "static void tj_fiber_new(unsigned t, char *stack) {\n"
    "    getcontext(&tj_fib[t]);\n"
    "    tj_fib[t].uc_stack.ss_sp = stack;\n"
    "    tj_fib[t].uc_stack.ss_size = TJ_STACK;\n"
    "    tj_fib[t].uc_link = &tj_sched;\n"
    "    makecontext(&tj_fib[t], tj_fiber, 0);\n"
    "}\n"
    "static void tj_fiber_run(unsigned t) { swapcontext(&tj_sched, &tj_fib[t]); }\n"
    "static int tj_fibers_alloc(unsigned n) { return !(tj_fib = calloc(n, sizeof *tj_fib)); }\n"
    "static void tj_fibers_free(void) { free(tj_fib); tj_fib = 0; }\n"
    "#endif\n"
    "int tj_emu_launch(tj_kfn fn, int sync, const unsigned grid[3], unsigned block, void **params) "
    "{\n"
    "    tj_fn = fn;\n"
    "    tj_a = (const tj_args *)params[0];\n"
    "    gridDim = (tj_dim3){grid[0], grid[1], grid[2]};\n"
    "    blockDim = (tj_dim3){block, 1, 1};\n"
    "    char *stacks = sync ? malloc((size_t)block * TJ_STACK) : 0;\n"
    "    tj_done = sync ? calloc(block, 1) : 0;\n"
    "    if (sync && (!stacks || !tj_done || tj_fibers_alloc(block))) {\n"
    "        free(stacks), free(tj_done);\n"
    "        return 1;\n"
    "    }\n"
    "    for (unsigned z = 0; z < grid[2]; z++)\n"
    "        for (unsigned y = 0; y < grid[1]; y++)\n"
    "            for (unsigned x = 0; x < grid[0]; x++) {\n"
    "                blockIdx = (tj_dim3){x, y, z};\n"
    "                if (!sync) {\n"
    "                    for (unsigned t = 0; t < block; t++) {\n"
    "                        threadIdx = (tj_dim3){t, 0, 0};\n"
    "                        fn(*tj_a);\n"
    "                    }\n"
    "                    continue;\n"
    "                }\n"
    "                for (unsigned t = 0; t < block; t++) {\n"
    "                    tj_fiber_new(t, stacks + (size_t)t * TJ_STACK);\n"
    "                    tj_done[t] = 0;\n"
    "                }\n"
    "                for (unsigned left = block; left;) { /* a round: each to its next barrier */\n"
    "                    for (unsigned t = 0; t < block; t++)\n"
    "                        if (!tj_done[t]) {\n"
    "                            threadIdx = (tj_dim3){t, 0, 0};\n"
    "                            tj_cur = t;\n"
    "                            tj_fiber_run(t);\n"
    "                        }\n"
    "                    left = 0;\n"
    "                    for (unsigned t = 0; t < block; t++)\n"
    "                        left += !tj_done[t];\n"
    "                }\n"
    "            }\n"
    "    if (sync)\n"
    "        tj_fibers_free();\n"
    "    free(stacks), free(tj_done);\n"
    "    tj_done = 0;\n"
    "    return 0;\n"
    "}\n";

/* f16 and bf16 as ir/dtype.c converts them (ir_half_to_f64, ir_half_from_f64: one rounding from
 * the exact double, to nearest even, overflow to infinity), for casts and where: the same
 * arithmetic in both compilers, so the GPU's halves are the host's bit for bit. */
static const char half_fns[] =
    "TJ_SCALAR_FN double tj_half_to_f64(uint16_t h, int mbits, int bias, int emax) {\n"
    "    int e = (h >> mbits) & emax;\n"
    "    uint32_t m = h & ((1u << mbits) - 1);\n"
    "    double inf = (double)TJ_INF;\n"
    "    double v = e == 0 ? ldexp((double)m, 1 - bias - mbits)\n"
    "               : e == emax ? (m ? inf * 0.0 : inf)\n"
    "               : ldexp((double)(m | (1u << mbits)), e - bias - mbits);\n"
    "    return (h & 0x8000) ? -v : v;\n"
    "}\n"
    "TJ_SCALAR_FN uint16_t tj_half_from_f64(double v, int mbits, int bias, int emax) {\n"
    "    uint16_t sign = signbit(v) ? 0x8000 : 0;\n"
    "    if (v != v)\n"
    "        return (uint16_t)(sign | (emax << mbits) | (1u << (mbits - 1)));\n"
    "    double a = fabs(v);\n"
    "    if (a >= ldexp(2.0 - ldexp(1.0, -(mbits + 1)), emax - 1 - bias))\n"
    "        return (uint16_t)(sign | (emax << mbits));\n"
    "    if (a < ldexp(1.0, 1 - bias))\n"
    "        return (uint16_t)(sign | (uint16_t)rint(ldexp(a, bias - 1 + mbits)));\n"
    "    int ex;\n"
    "    frexp(a, &ex);\n"
    "    uint32_t q = (uint32_t)rint(ldexp(a, mbits + 1 - ex));\n"
    "    return (uint16_t)(sign + ((uint32_t)(ex - 1 + bias) << mbits) + (q - (1u << mbits)));\n"
    "}\n";

void jit_cuda_prelude(jit_sbuf *b) {
    jit_sbuf_printf(b, "/* tracejit CUDA kernels */\n#ifdef TJ_EMULATE\n%s", emu_shim);
    jit_sbuf_printf(b, "#define TJ_INF INFINITY\n#else\n"
                       "#define TJ_INF __int_as_float(0x7f800000)\n"
                       "#define tj_atomic_min_u64(p, v) atomicMin((unsigned long long *)(p), "
                       "(unsigned long long)(v))\n"
                       "#define TJ_KERNEL extern \"C\" __global__ void\n"
                       "#define TJ_SYNC_KERNEL(name)\n"
                       "#define TJ_SHARED __shared__\n"
                       "#define TJ_RESTRICT __restrict__\n"
                       "#endif\n");
    jit_sbuf_printf(b, "%s\n", tj_cuda_scalar_h);
    jit_sbuf_printf(b, "%s", half_fns);
    jit_sbuf_printf(b,
                    "typedef struct tj_args { void *p[%d]; int64_t n[4]; } tj_args;\n"
                    "#define TJ_GID ((int64_t)blockIdx.x * blockDim.x + threadIdx.x)\n"
                    "#define TJ_GSTRIDE ((int64_t)gridDim.x * blockDim.x)\n",
                    JIT_CUDA_MAX_BUFS);
    jit_sbuf_printf(b, "#ifdef TJ_EMULATE\n%s#endif\n", emu_launch);
}
