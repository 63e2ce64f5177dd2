/* backend.c — the interpreter as a backend (jit/backend.h): the runtime's reference kernels run
 * node by node (runtime/interp.c). Always available, never declines, caches and saves nothing;
 * the registry lists it last, and a graph another backend declines runs here. */
#include "jit/backend.h"

static rt_program *compile(const ir_graph *g, const jit_backend_opts *o) {
    return rt_interp_new(g);
}

const jit_backend jit_backend_interp = {
    .name = "interp",
    .what = "the reference kernels, node by node",
    .compile = compile,
};
