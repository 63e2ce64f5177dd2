/* backend.c — the CUDA backend (jit/backend.h): a graph's fusion groups become CUDA C kernels
 * (source.c) in one module per program, compiled by NVRTC for the GPU's architecture (cubin,
 * PTX kept beside it; both cached by content hash, NVRTC version and architecture: nvrtc/) and
 * launched back to back on the GPU's default stream by the runtime's one run loop (a device plan:
 * runtime/plan.h). Products go to cuBLAS (cublas.c) and convolutions to cuDNN (cudnn.c) where
 * those libraries are there and take them, the generated kernels otherwise. What has no
 * generated kernel (integer division, float-to-integer casts, effects; a loop itself,
 * whose regions are programs of this backend)
 * runs as a node step on the host, its inputs copied back, and its result copied over when a
 * kernel reads it: every graph runs, the profile and TJ_LOG=compile say what ran where. Outputs
 * are left on the GPU (tj_to_device brings them back). GPU 0 is used, or TJ_CUDA_DEVICE's; no
 * images are written (the module is cached instead). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jit/cuda/program.h"
#include "jit/cuda/nvrtc/nvrtc.h"
#include "runtime/cuda.h"
#include "runtime/kernels/conv.h"
#include "runtime/plan.h"

/* Why not here, and the cache key: worked out once (the driver, NVRTC and the configuration are
 * read once per process), then read by any thread. */
static struct {
    pthread_once_t once;
    const char *why; /* NULL: available */
    char why_buf[512];
    char key[96];
} here = {.once = PTHREAD_ONCE_INIT};

static void look(void) {
    const char *d = rt_cuda_unavailable();
    const char *emu = rt_config_get()->cuda_emulate;
    const char *n = emu && *emu ? NULL : jit_nvrtc_unavailable();
    if (d || n) {
        snprintf(here.why_buf, sizeof here.why_buf, "%s%s%s", d ? d : "", d && n ? "; " : "",
                 n ? n : "");
        here.why = here.why_buf;
    }
    snprintf(here.key, sizeof here.key, "cuda;%s", jit_nvrtc_version());
}

static const char *unavailable(void) {
    pthread_once(&here.once, look);
    return here.why;
}

static const char *cache_key(void) {
    pthread_once(&here.once, look);
    return here.key;
}

static void prog_free(rt_program *p) {
    cuda_prog *cp = (cuda_prog *)p;
    if (!cp)
        return;
    jit_cuda_segs_free(cp);
    rt_plan_release(&cp->rp);
    for (uint32_t m = 0; cp->mods && m < cp->n_mods; m++)
        rt_cuda_module_unload(cp->rp.dev, cp->mods[m]);
    free(cp->mods);
    if (cp->emu_image) {
        const char *path = cp->emu_image + 6;
        unlink(path);
        char dir[600];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0, rmdir(dir);
        free(cp->emu_image);
    }
    for (uint32_t i = 0; i < cp->n_k; i++)
        jit_cuda_kernel_release(&cp->k[i]);
    free(cp->k);
    free(cp->fns);
    free(cp->kernel_of_step);
    pass_partition_free(cp->part);
    free(cp);
}

static const rt_program_vt cuda_vt = {rt_plan_run, prog_free, "cuda",         NULL,
                                      NULL,        NULL,      rt_plan_kernels};

static tj_status launch(rt_plan *p, uint32_t s, void *const *bufs) {
    cuda_prog *cp = (cuda_prog *)p;
    const jit_cuda_kernel *k = &cp->k[cp->kernel_of_step[s]];
    if (jit_cuda_by_blas(cp, k)) {
        tj_status st = rt_cuda_use(p->dev, k->name);
        return st ? st
                  : jit_cublas_gemm(cp->blas, &k->mm, bufs[0], bufs[1], bufs[2], k->name,
                                    p->base.g->name);
    }
    if (k->conv)
        return jit_cuda_launch_cudnn(p, k, cp->fns[cp->kernel_of_step[s]], bufs);
    if (k->lt) {
        size_t wb = jit_lt_mm_workspace(k->lt);
        void *ws = wb ? p->dev->vt->alloc(p->dev, wb) : NULL;
        tj_status st = ws || !wb ? jit_lt_mm_run(k->lt, bufs[0], bufs[1], bufs[2], bufs[3], ws,
                                                 k->name, p->base.g->name)
                                 : (ir_last_code() ? ir_last_code() : TJ_ERR_OOM);
        if (ws)
            p->dev->vt->free(p->dev, ws, wb);
        return st;
    }
    kernel_args args = {{0}, {0}};
    memcpy(args.p, bufs, (k->n_in + k->n_out) * sizeof *bufs);
    void *params[] = {&args};
    tj_status st = TJ_OK;
    if (cp->seg_of_step && cp->seg_of_step[s] >= 0 &&
        jit_cuda_record(cp, &cp->segs[cp->seg_of_step[s]], s, &args, cp->fns[cp->kernel_of_step[s]],
                        k, &st))
        return st;
    if (jit_cuda_checked(k))
        return jit_cuda_launch_checked(p, (uint32_t)cp->kernel_of_step[s],
                                       cp->fns[cp->kernel_of_step[s]], &args.p[k->n_in + k->n_out],
                                       params);
    return rt_cuda_launch(p->dev, cp->fns[cp->kernel_of_step[s]], k->grid, k->block, 0, params,
                          k->name, p->base.g->name);
}

/* ---- the plan ------------------------------------------------------------------------------ */

/* A step running node id on the host. */
static tj_status host_step(cuda_prog *cp, uint32_t id) {
    const ir_graph *g = cp->rp.base.g;
    const ir_node *n = ir_node_get(g, id);
    rt_step *r = &cp->rp.steps[cp->rp.n_steps];
    r->kind = RT_STEP_NODE;
    r->id = id;
    r->n_in = n->n_in;
    r->n_out = 1;
    if (!(r->in = jit_cuda_ids_dup(ir_inputs(g, n), n->n_in)) ||
        !(r->out = jit_cuda_ids_dup(&id, 1)) || !(r->nodes = jit_cuda_ids_dup(&id, 1)))
        return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    r->n_nodes = 1;
    cp->kernel_of_step[cp->rp.n_steps++] = -1;
    return TJ_OK;
}

static tj_status kernel_step(cuda_prog *cp, uint32_t ki) {
    jit_cuda_kernel *k = &cp->k[ki];
    rt_step *r = &cp->rp.steps[cp->rp.n_steps];
    r->kind = RT_STEP_KERNEL;
    r->id = k->out[0];
    r->n_in = k->n_in;
    r->n_out = k->n_out;
    if (!(r->in = jit_cuda_ids_dup(k->in, k->n_in)) ||
        !(r->out = jit_cuda_ids_dup(k->out, k->n_out)) ||
        !(r->nodes = jit_cuda_ids_dup(k->nodes, k->n_nodes)))
        return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    r->n_nodes = k->n_nodes;
    cp->kernel_of_step[cp->rp.n_steps++] = (int32_t)ki;
    return TJ_OK;
}

/* The steps and the module's source: a kernel per group this backend generates, host steps for
 * the rest. */
static tj_status build(cuda_prog *cp, jit_sbuf *src) {
    const ir_graph *g = cp->rp.base.g;
    pass_partition *part = cp->part;
    uint32_t max_steps = g->n_nodes + 1;
    cp->rp.steps = calloc(max_steps, sizeof *cp->rp.steps);
    cp->k = calloc(part->n_groups + 1, sizeof *cp->k);
    cp->kernel_of_step = calloc(max_steps, sizeof *cp->kernel_of_step);
    if (!cp->rp.steps || !cp->k || !cp->kernel_of_step)
        return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    jit_cuda_prelude(src);
    cp->prelude_len = src->n;
    graph_index x = {0};
    tj_status st = cp->lt ? jit_cuda_index_graph(cp, &x) : TJ_OK;
    for (uint32_t gi = 0; gi < part->n_groups && !st; gi++) {
        const pass_group *gr = &part->groups[gi];
        jit_cuda_kernel *k = &cp->k[cp->n_k];
        snprintf(k->name, sizeof k->name, "tjk%u", cp->n_k);
        uint32_t ge, bias;
        bool relu;
        if (x.absorbed && x.absorbed[gi])
            continue; /* an earlier product's epilogue */
        if (cp->lt && jit_cuda_epilogue_of(cp, &x, gi, &ge, &bias, &relu)) {
            st = jit_cuda_lt_kernel(cp, gi, ge, bias, k, src->n);
            if (!st) {
                x.absorbed[ge] = true;
                st = kernel_step(cp, cp->n_k++);
                if (!st && relu) {
                    k = &cp->k[cp->n_k];
                    snprintf(k->name, sizeof k->name, "tjk%u", cp->n_k);
                    if (!(st = jit_cuda_relu_kernel(cp, src, ge, k)))
                        st = kernel_step(cp, cp->n_k++);
                }
                continue;
            }
            if (st != TJ_ERR_UNSUPPORTED)
                break;
            jit_cuda_kernel_release(k);
            memset(k, 0, sizeof *k);
            snprintf(k->name, sizeof k->name, "tjk%u", cp->n_k);
            st = TJ_OK;
        }
        const ir_node *n = ir_node_get(g, gr->nodes[0]);
        bool source = (ir_ops[n->op].flags & IR_F_SRC) != 0;
        k->dnn = cp->dnn || cp->dnn_layouts;
        st = gr->fused || gr->reduce ? jit_cuda_emit_group(src, g, gr, k)
             : source                ? TJ_ERR_UNSUPPORTED
                                     : jit_cuda_blas_kernel(cp, gr->nodes[0], k, src->n);
        if (st == TJ_ERR_UNSUPPORTED && !gr->fused && !gr->reduce && !source) {
            jit_cuda_kernel_release(k);
            k->dnn = cp->dnn || cp->dnn_layouts;
            st = jit_cuda_emit_node(src, g, gr->nodes[0], k);
        }
        if (!st && k->kind == JIT_CK_CONV && k->dnn && cp->dnn)
            st = jit_cuda_dnn_conv(cp, src, gr->nodes[0], k);
        if (!st) {
            st = kernel_step(cp, cp->n_k++);
        } else if (st == TJ_ERR_UNSUPPORTED) {
            jit_cuda_kernel_release(k);
            memset(k, 0, sizeof *k);
            st = TJ_OK;
            for (uint32_t j = 0; j < gr->n_nodes && !st; j++)
                st = host_step(cp, gr->nodes[j]);
        }
    }
    jit_cuda_index_free(&x);
    return st || !src->oom ? st : ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
}

static tj_status label_steps(cuda_prog *cp) {
    rt_plan *p = &cp->rp;
    const ir_graph *g = p->base.g;
    static const char *const kinds[JIT_CK_N] = {
        [JIT_CK_EW] = "fused",        [JIT_CK_RED_ROW] = "reduce", [JIT_CK_RED_COL] = "reduce",
        [JIT_CK_SOFTMAX] = "softmax", [JIT_CK_MM] = "matmul",      [JIT_CK_COPY] = "copy",
        [JIT_CK_CONV] = "conv",       [JIT_CK_POOL] = "pool",      [JIT_CK_ONE_HOT] = "one_hot",
        [JIT_CK_XENT] = "xent",       [JIT_CK_GATHER] = "gather"};
    if (!(p->labels = calloc(p->n_steps + 1, sizeof *p->labels)))
        return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    for (uint32_t s = 0; s < p->n_steps; s++) {
        const rt_step *r = &p->steps[s];
        int32_t ki = cp->kernel_of_step[s];
        char buf[256];
        int len = snprintf(buf, sizeof buf, "s%u %s:", s,
                           ki >= 0 ? kinds[cp->k[ki].kind] : "host reference");
        for (uint32_t q = 0; q < r->n_nodes && len < (int)sizeof buf - 40; q++) {
            int op = ir_node_get(g, r->nodes[q])->op;
            if (op != IR_OP_CONST && op != IR_OP_PARAM)
                len += snprintf(buf + len, sizeof buf - (size_t)len, " %s", ir_ops[op].name);
        }
        if (!(p->labels[s] = strdup(buf)))
            return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    }
    return TJ_OK;
}

/* One part of a program's kernels compiled by NVRTC, on its own thread. */
typedef struct part_job {
    char *src;
    const char *name;
    int sm, from;
    tj_status st;
    char err[512];
    jit_nvrtc_out out;
} part_job;

static void *compile_part(void *arg) {
    part_job *j = arg;
    j->st = jit_nvrtc_compile_cached(j->src, j->name, j->sm, &j->out, &j->from);
    if (j->st)
        snprintf(j->err, sizeof j->err, "%s", ir_last_error());
    return NULL;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* The kernels compiled and loaded. NVRTC compiles a module kernel by kernel (about 26 ms each
 * here, the seed CNN's 75 in 1.7 s), so the kernels are split into parts of at least 8, up to
 * TJ_COMPILE_THREADS of them, each the prelude and its kernels, compiled at once on threads and
 * cached on their own (a part another program has too is not compiled again). Under
 * TJ_CUDA_EMULATE the host's C compiler builds one part. */
static tj_status load_module(cuda_prog *cp, const char *source) {
    rt_device *dev = cp->rp.dev;
    const char *emu = rt_config_get()->cuda_emulate;
    const char *name = cp->rp.base.g->name ? cp->rp.base.g->name : "fn";
    bool emulate = emu && *emu;
    uint32_t threads = (uint32_t)rt_config_get()->compile_threads;
    uint32_t parts = emulate ? 1 : (cp->n_k + 7) / 8;
    parts = parts < 1 ? 1 : parts > threads ? threads : parts;
    cp->fns = calloc(cp->n_k + 1, sizeof *cp->fns);
    cp->mods = calloc(parts + 1, sizeof *cp->mods);
    uint32_t *first = calloc(parts + 2, sizeof *first);
    part_job *jobs = calloc(parts + 1, sizeof *jobs);
    tj_status st =
        cp->fns && cp->mods && first && jobs ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    double t0 = now_ms();
    for (uint32_t p = 0; p <= parts && !st; p++) /* part p holds kernels [first[p], first[p + 1]) */
        first[p] = (uint32_t)((uint64_t)cp->n_k * p / parts);
    for (uint32_t p = 0; p < parts && !st; p++) {
        size_t len = cp->prelude_len;
        for (uint32_t i = first[p]; i < first[p + 1]; i++)
            len += cp->k[i].src_len;
        char *src = jobs[p].src = malloc(len + 1);
        if (!src) {
            st = ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
            break;
        }
        memcpy(src, source, cp->prelude_len);
        size_t at = cp->prelude_len;
        for (uint32_t i = first[p]; i < first[p + 1]; i++) {
            memcpy(src + at, source + cp->k[i].src_off, cp->k[i].src_len);
            at += cp->k[i].src_len;
        }
        src[at] = 0;
        jobs[p].name = name;
        jobs[p].sm = rt_cuda_arch(dev) ? rt_cuda_arch(dev) : 80;
    }
    if (!st && emulate) {
        char *image = NULL;
        if (!(st = jit_cuda_emulate_build(emu, jobs[0].src, &image)))
            st = rt_cuda_module_load(dev, image, name, &cp->mods[cp->n_mods++]);
        cp->emu_image = image;
    } else if (!st) {
        pthread_t th[JIT_CUDA_MAX_PARTS];
        bool made[JIT_CUDA_MAX_PARTS] = {false};
        for (uint32_t p = 1; p < parts; p++) /* part 0 on this thread */
            made[p] = pthread_create(&th[p], NULL, compile_part, &jobs[p]) == 0;
        compile_part(&jobs[0]);
        for (uint32_t p = 1; p < parts; p++)
            if (made[p])
                pthread_join(th[p], NULL);
            else
                compile_part(&jobs[p]); /* no thread: here */
        uint32_t cached = 0;
        for (uint32_t p = 0; p < parts && !st; p++) {
            if (jobs[p].st) {
                st = ir_errorf(jobs[p].st, "%s", jobs[p].err);
                break;
            }
            cached += jobs[p].from != 0;
            const jit_nvrtc_out *o = &jobs[p].out;
            st = rt_cuda_module_load(dev, o->cubin ? o->cubin : (const void *)o->ptx, name,
                                     &cp->mods[cp->n_mods++]);
        }
        uint32_t generated = 0; /* the rest are library calls alone */
        for (uint32_t i = 0; i < cp->n_k; i++)
            generated += cp->k[i].src_len != 0;
        if (!st)
            rt_log(RT_LOG_COMPILE,
                   "cuda: %s: %u kernels in %u modules for sm_%d in %.1f ms (%u from the cache)",
                   name, generated, parts, jobs[0].sm, now_ms() - t0, cached);
    }
    for (uint32_t p = 0; p < cp->n_mods && !st; p++)
        for (uint32_t i = first[p]; i < first[p + 1] && !st; i++)
            if (cp->k[i].src_len) /* none: a library call alone (cuBLASLt) */
                st = rt_cuda_function(dev, cp->mods[p], cp->k[i].name, &cp->fns[i]);
    for (uint32_t p = 0; jobs && p < parts; p++) {
        free(jobs[p].src);
        jit_nvrtc_free(&jobs[p].out);
    }
    free(jobs);
    free(first);
    return st;
}

/* " (work there: conv2d x2, max_pool2d)": the ops of host steps that compute something (not
 * sources, plumbing or effects), for the compile log; "" when none. */
static void host_ops(const cuda_prog *cp, char *buf, size_t n) {
    const ir_graph *g = cp->rp.base.g;
    int count[IR_N_OPS] = {0};
    for (uint32_t s = 0; s < cp->rp.n_steps; s++) {
        int op = ir_node_get(g, cp->rp.steps[s].id)->op;
        if (cp->kernel_of_step[s] < 0 && !(ir_ops[op].flags & (IR_F_SRC | IR_F_PLUMB)))
            count[op]++;
    }
    size_t len = 0;
    buf[0] = 0;
    for (int op = 0; op < IR_N_OPS && len + 40 < n; op++)
        if (count[op])
            len += (size_t)snprintf(buf + len, n - len, "%s%s",
                                    len ? ", " : " (work there: ", ir_ops[op].name),
                len += count[op] > 1 ? (size_t)snprintf(buf + len, n - len, " x%d", count[op]) : 0;
    if (len)
        snprintf(buf + len, n - len, ")");
}

static rt_program *compile(const ir_graph *g, const jit_backend_opts *o);

/* A control-flow region (a branch, a loop's condition or body) as a program of its own on the
 * GPU: the loop runs on the host around its regions' kernels (the executor: runtime/exec.c), its
 * carried values staying on the GPU, a while's condition read back each iteration (one 1-byte
 * copy, as TensorFlow's GPU loops read theirs). A region this backend cannot compile runs on
 * the interpreter, its values copied over. */
static rt_program *gpu_region(const ir_graph *sub, void *ctx) {
    (void)ctx;
    rt_program *p = compile(sub, NULL);
    if (p)
        return p;
    rt_log(RT_LOG_COMPILE, "cuda: region %s on the host: %s", sub->name ? sub->name : "?",
           ir_last_error());
    ir_clear_error();
    return rt_interp_new(sub);
}

static bool concrete(const ir_graph *g) {
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (ir_numel(g->nodes[i].rank, g->nodes[i].dims) < 0)
            return false;
    return true;
}

static rt_program *compile(const ir_graph *g, const jit_backend_opts *o) {
    (void)o;
    const char *why = unavailable();
    if (why)
        return (void)ir_errorf(TJ_ERR_UNSUPPORTED, "cuda: %s", why), NULL;
    if (!concrete(g))
        return (void)ir_errorf(TJ_ERR_UNSUPPORTED, "cuda: unknown dims are not compiled"), NULL;
    int ordinal = rt_config_get()->cuda_device;
    rt_device *dev = rt_cuda_device(ordinal); /* an ordinal out of range: an error naming it */
    if (!dev)
        return NULL;
    cuda_prog *cp = calloc(1, sizeof *cp);
    if (!cp)
        return (void)ir_errorf(TJ_ERR_OOM, "cuda: out of memory"), NULL;
    cp->rp.base.vt = &cuda_vt;
    if (rt_plan_init(&cp->rp, g, "cuda program") != TJ_OK) {
        free(cp);
        return NULL;
    }
    cp->rp.dev = dev;
    cp->rp.launch = launch;
    cp->rp.finish = jit_cuda_finish;
    cp->rp.check_params = 1;
    jit_sbuf src = {0};
    tj_status st = (cp->part = pass_fusion_run(g, jit_cuda_fusable, jit_cuda_reducible, NULL))
                       ? TJ_OK
                       : (ir_last_code() ? ir_last_code() : TJ_ERR_OOM);
    if (!st && !(cp->rp.dev_consts = calloc(g->n_nodes + 1, sizeof *cp->rp.dev_consts)))
        st = ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    const char *dnn_why = NULL, *lt_why = NULL;
    for (uint32_t i = 0; i < g->n_nodes && !st && !dnn_why && !cp->dnn; i++)
        if (ir_ops[g->nodes[i].op].family == IR_FAM_CONV)
            cp->dnn = jit_cudnn_get(dev, ordinal, &dnn_why);
    /* cuBLAS, and cuBLASLt where cuBLAS could be had (on a machine with no usable GPU,
     * cublasLtCreate fails and leaks) */
    const char *why_not = "none in the graph";
    for (uint32_t i = 0; i < g->n_nodes && !st && !cp->blas; i++)
        if (g->nodes[i].op == IR_OP_MATMUL && !(cp->blas = jit_cublas_get(dev, ordinal, &why_not)))
            break;
    if (cp->blas)
        cp->lt = jit_cublaslt_get(dev, ordinal, &lt_why);
    if (!st)
        st = build(cp, &src);
    if (!st)
        st = label_steps(cp);
    if (!st && cp->n_k)
        st = load_module(cp, src.s);
    if (!st) /* control flow: the host loops, its regions' kernels on the GPU */
        st = rt_plan_finish(&cp->rp, false, gpu_region, NULL);
    uint32_t lts = 0;
    for (uint32_t i = 0; i < cp->n_k; i++)
        lts += cp->k[i].lt != NULL;
    if (!st && (cp->blas || lts))
        rt_log(RT_LOG_COMPILE,
               "cuda: %s: products by cuBLAS %d, %u with their bias add as cuBLASLt %zu's "
               "epilogue%s%s",
               g->name ? g->name : "fn", jit_cublas_version(cp->blas), lts, jit_cublaslt_version(),
               lt_why ? ": " : "", lt_why ? lt_why : "");
    else if (!st && strcmp(why_not, "none in the graph") != 0)
        rt_log(RT_LOG_COMPILE, "cuda: %s: products by generated kernels: %s",
               g->name ? g->name : "fn", why_not);
    if (!st && (cp->dnn || dnn_why)) {
        uint32_t convs = 0, by = 0;
        for (uint32_t i = 0; i < cp->n_k; i++)
            convs += cp->k[i].kind == JIT_CK_CONV, by += cp->k[i].conv != NULL;
        if (cp->dnn)
            rt_log(RT_LOG_COMPILE, "cuda: %s: %u of %u convolution kernels by cuDNN %zu",
                   g->name ? g->name : "fn", by, convs, jit_cudnn_version());
        else
            rt_log(RT_LOG_COMPILE, "cuda: %s: convolutions by generated kernels: %s",
                   g->name ? g->name : "fn", dnn_why);
    }
    if (!st && (st = jit_cuda_make_segments(cp)) == TJ_OK && cp->n_segs) {
        uint32_t in_graphs = 0;
        for (uint32_t i = 0; i < cp->n_segs; i++)
            in_graphs += cp->segs[i].n;
        rt_log(RT_LOG_COMPILE,
               "cuda: %s: %u kernels in %u CUDA graphs (replayed from the second call)",
               g->name ? g->name : "fn", in_graphs, cp->n_segs);
    }
    if (!st) {
        char ops[512];
        host_ops(cp, ops, sizeof ops);
        rt_log(RT_LOG_COMPILE, "cuda: %s: %u kernels on %s, %u nodes on the host%s",
               g->name ? g->name : "fn", cp->n_k, dev->name, cp->rp.n_steps - cp->n_k, ops);
    }
    free(src.s);
    if (st) {
        prog_free(&cp->rp.base);
        return NULL;
    }
    return &cp->rp.base;
}

const jit_backend jit_backend_cuda = {
    .name = "cuda",
    .what = "CUDA kernels compiled by NVRTC, launched on an NVIDIA GPU",
    .unavailable = unavailable,
    .cache_key = cache_key,
    .fusable = jit_cuda_fusable,
    .reducible = jit_cuda_reducible,
    .compile = compile,
    .device = true,
};

char *jit_cuda_source_of(const ir_graph *g, uint32_t *n_kernels, bool cudnn_layouts) {
    cuda_prog cp = {0};
    cp.rp.base.g = g;
    cp.dnn_layouts = cudnn_layouts;
    jit_sbuf src = {0};
    tj_status st = (cp.part = pass_fusion_run(g, jit_cuda_fusable, jit_cuda_reducible, NULL))
                       ? TJ_OK
                       : TJ_ERR_OOM;
    if (!st)
        st = build(&cp, &src);
    for (uint32_t s = 0; s < cp.rp.n_steps; s++) {
        free(cp.rp.steps[s].in);
        free(cp.rp.steps[s].out);
        free(cp.rp.steps[s].nodes);
    }
    free(cp.rp.steps);
    for (uint32_t i = 0; i < cp.n_k; i++)
        jit_cuda_kernel_release(&cp.k[i]);
    free(cp.k);
    free(cp.kernel_of_step);
    pass_partition_free(cp.part);
    if (n_kernels)
        *n_kernels = cp.n_k;
    if (st) {
        free(src.s);
        return NULL;
    }
    return src.s;
}
