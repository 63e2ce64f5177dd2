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

#include "jit/cuda/cuda.h"
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

/* A run of generated kernels (steps first..last, sources between them allowed) replayed as one
 * CUDA graph: the first run launches them one by one, the second records their parameters and
 * makes the graph, later runs set the nodes whose buffers moved and launch it. One run at a time
 * replays it (others launch one by one). While a run records, its frees are held back
 * (rt_cuda_defer_frees): the recorded kernels are not queued yet, so nothing may be queued into
 * the blocks they read. */
typedef struct graph_seg {
    uint32_t first, last, n; /* steps; its kernels */
    pthread_mutex_t mu;
    int runs;
    bool failed; /* no graph could be made: one by one from then on */
    rt_cuda_graph *graph;
    struct kernel_args *set, *now; /* per kernel: the parameters in the graph, and this run's */
    rt_cuda_node *nodes;           /* per kernel */
    uint32_t *kernel;              /* per kernel: its index in the program */
    uint32_t *used;                /* per kernel: its buffers (the arguments that change) */
} graph_seg;

typedef struct cuda_prog {
    rt_plan rp; /* first: a cuda_prog is an rt_plan */
    graph_seg *segs;
    uint32_t n_segs;
    int32_t *seg_of_step; /* per step: its segment, or -1 */
    pass_partition *part;
    jit_cuda_kernel *k;
    uint32_t n_k;
    int32_t *kernel_of_step; /* per step: its kernel, or -1 (a host node) */
    void **fns;
    void **mods; /* the modules the kernels were compiled in (parts, compiled at once) */
    uint32_t n_mods;
    size_t prelude_len;     /* the source's shared head */
    const jit_cublas *blas; /* products through cuBLAS; NULL: the generated kernel */
    const jit_cudnn *dnn;   /* convolutions through cuDNN where it takes them; NULL: none */
    const jit_cublaslt *lt; /* products with their bias add as cuBLASLt epilogues */
    bool dnn_layouts;       /* jit_cuda_source_of: convolutions as cuDNN's would be emitted */
    char *emu_image;        /* the emulation's shared object, removed with the program */
} cuda_prog;

static void prog_free(rt_program *p) {
    cuda_prog *cp = (cuda_prog *)p;
    if (!cp)
        return;
    for (uint32_t i = 0; i < cp->n_segs; i++) {
        rt_cuda_graph_free(cp->segs[i].graph);
        pthread_mutex_destroy(&cp->segs[i].mu);
        free(cp->segs[i].set);
        free(cp->segs[i].now);
        free(cp->segs[i].nodes);
        free(cp->segs[i].kernel);
        free(cp->segs[i].used);
    }
    free(cp->segs);
    free(cp->seg_of_step);
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

/* The kernels' one parameter (prelude.c's tj_args). */
typedef struct kernel_args {
    void *p[JIT_CUDA_MAX_BUFS];
    int64_t n[4];
} kernel_args;

/* ---- CUDA graphs ------------------------------------------------------------------------------
 */
static __thread struct {
    cuda_prog *cp;
    graph_seg *seg;
    uint32_t i; /* kernels recorded */
} rec;

/* The recorded kernels launched one by one (no graph could be made). */
static tj_status launch_recorded(cuda_prog *cp, graph_seg *seg) {
    tj_status st = TJ_OK;
    for (uint32_t i = 0; i < seg->n && !st; i++) {
        void *params[] = {&seg->now[i]};
        st = rt_cuda_launch(cp->rp.dev, seg->nodes[i].fn, seg->nodes[i].grid, seg->nodes[i].block,
                            0, params, cp->k[seg->kernel[i]].name, cp->rp.base.g->name);
    }
    return st;
}

/* The end of a recording: the graph made (second run) or its moved nodes set, and launched. */
static tj_status flush_seg(cuda_prog *cp, graph_seg *seg) {
    const char *f = cp->rp.base.g->name;
    tj_status st = TJ_OK;
    if (!seg->graph) {
        void **pp = malloc(seg->n * sizeof *pp);
        if (!pp) {
            st = ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
        } else {
            for (uint32_t i = 0; i < seg->n; i++)
                pp[i] = &seg->now[i], seg->nodes[i].params = &pp[i];
            st = rt_cuda_graph_new(cp->rp.dev, seg->nodes, seg->n, f, &seg->graph);
            free(pp);
        }
        if (st) { /* no graph: these kernels go one by one, now and from now on */
            ir_clear_error();
            st = launch_recorded(cp, seg);
            seg->failed = true;
            return st;
        }
        memcpy(seg->set, seg->now, seg->n * sizeof *seg->set);
    } else {
        for (uint32_t i = 0; i < seg->n && !st; i++)
            if (memcmp(seg->set[i].p, seg->now[i].p, seg->used[i] * sizeof(void *))) {
                void *pi = &seg->now[i];
                seg->nodes[i].params = &pi;
                if (!(st = rt_cuda_graph_set(seg->graph, i, &seg->nodes[i], f)))
                    seg->set[i] = seg->now[i];
            }
    }
    return st ? st : rt_cuda_graph_launch(seg->graph, f);
}

/* Ends this thread's recording of cp, launched (flush) or dropped (a failed run: nothing of it
 * was queued, and its held frees go back). */
static tj_status end_recording(cuda_prog *cp, bool launch_it) {
    graph_seg *seg = rec.seg;
    tj_status st = launch_it ? flush_seg(cp, seg) : TJ_OK;
    rec.seg = NULL;
    rec.cp = NULL;
    rt_cuda_release_deferred(cp->rp.dev);
    pthread_mutex_unlock(&seg->mu);
    return st;
}

/* Kernel k of step s in segment seg: recorded, or launched now (returns false: the caller
 * launches it). */
static bool record(cuda_prog *cp, graph_seg *seg, uint32_t s, const kernel_args *args, void *fn,
                   const jit_cuda_kernel *k, tj_status *st) {
    const rt_config *cfg = rt_config_get();
    if (s == seg->first) {
        if (rec.seg || !cfg->cuda_graphs || cfg->cuda_sync || RT_PROFILING() ||
            RT_CHECKING_NUMERICS() || pthread_mutex_trylock(&seg->mu))
            return false;
        /* the first run one by one: a function called once pays for no graph */
        if (seg->failed || seg->runs++ < 1) {
            pthread_mutex_unlock(&seg->mu);
            return false;
        }
        rec.cp = cp, rec.seg = seg, rec.i = 0;
        rt_cuda_defer_frees(cp->rp.dev);
    }
    if (rec.seg != seg)
        return false;
    seg->used[rec.i] = k->n_in + k->n_out; /* the rest stay 0 */
    memcpy(seg->now[rec.i].p, args->p, seg->used[rec.i] * sizeof(void *));
    seg->nodes[rec.i] = (rt_cuda_node){fn, {k->grid[0], k->grid[1], k->grid[2]}, k->block, NULL};
    seg->kernel[rec.i] = (uint32_t)(k - cp->k);
    rec.i++;
    *st = s == seg->last ? end_recording(cp, true) : TJ_OK;
    return true;
}

/* Kernels that check their input (cuda.h: jit_cuda_checked): a word on the GPU starts at
 * UINT64_MAX and the kernel lowers it to (position << 32 | value) of the first bad one: the
 * cross-entropy's row and label outside [0, C), gather's index position and index outside
 * [0, N) (the value as int32; INT32_MIN when it does not fit). The word is read back without
 * waiting (queued after the kernel into pinned memory) and waited for when the call's steps are
 * all queued (finish): the host never stops between launches, and bad input is still the call's
 * error, in the host kernel's words. Pending reads are per thread, innermost call last. */
typedef struct pending_label {
    const rt_plan *p;
    uint32_t kernel;
    int slot;
    uint64_t word; /* where a read without a slot landed */
} pending_label;
enum { MAX_PENDING = 16 };
static __thread pending_label pending[MAX_PENDING];
static __thread int n_pending;

static tj_status label_error(const rt_plan *p, const jit_cuda_kernel *k, uint64_t bad) {
    const ir_graph *g = p->base.g;
    const ir_node *lg = ir_node_get(g, k->in[0]);
    int32_t label = (int32_t)(uint32_t)bad;
    long long row = (long long)(bad >> 32), classes = (long long)lg->dims[lg->rank - 1];
    if (k->kind == JIT_CK_GATHER) { /* the host kernel's words (runtime/kernels/shape.c) */
        const ir_node *n = ir_node_get(g, k->out[0]);
        long long ax = (long long)n->a.i[0], N = (long long)lg->dims[ax];
        char ps[128];
        ir_fmt_dims(ps, sizeof ps, lg->rank, lg->dims);
        return label == INT32_MIN
                   ? ir_errorf(TJ_ERR_RUNTIME,
                               "gather: index at position %lld out of range [0, %lld) on axis "
                               "%lld of params %s",
                               row, N, ax, ps)
                   : ir_errorf(TJ_ERR_RUNTIME,
                               "gather: index %d out of range [0, %lld) on axis %lld of params %s",
                               label, N, ax, ps);
    }
    return label == INT32_MIN
               ? ir_errorf(TJ_ERR_RUNTIME,
                           "sparse_softmax_xent: the label of row %lld is outside [0, %lld) (the "
                           "number of classes)",
                           row, classes)
               : ir_errorf(TJ_ERR_RUNTIME,
                           "sparse_softmax_xent: label %d of row %lld is outside [0, %lld) (the "
                           "number of classes)",
                           label, row, classes);
}

static tj_status launch_checked(rt_plan *p, uint32_t ki, void *fn, void **slot, void **params) {
    const jit_cuda_kernel *k = &((cuda_prog *)p)->k[ki];
    rt_device *d = p->dev;
    uint64_t bad = UINT64_MAX;
    void *w = d->vt->alloc(d, sizeof bad);
    if (!w)
        return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
    *slot = w;
    tj_status st = d->vt->copy_in(d, w, &bad, sizeof bad);
    if (!st)
        st = rt_cuda_launch(d, fn, k->grid, k->block, 0, params, k->name, p->base.g->name);
    if (!st && n_pending < MAX_PENDING) {
        pending_label *q = &pending[n_pending];
        *q = (pending_label){p, ki, -1, UINT64_MAX};
        if (!(st = rt_cuda_read_start(d, w, sizeof bad, &q->word, &q->slot)))
            n_pending++;
    } else if (!st) { /* too many in one call: wait for this one here */
        st = d->vt->copy_out(d, &bad, w, sizeof bad);
        if (!st && bad != UINT64_MAX)
            st = label_error(p, k, bad);
    }
    d->vt->free(d, w, sizeof bad); /* its reuse queues behind the read */
    return st;
}

/* The call's pending label checks, this plan's, innermost first: the first bad one is its error
 * (after a failure of the steps, the reads are only drained). */
static tj_status finish(rt_plan *p, tj_status st) {
    const cuda_prog *cp = (const cuda_prog *)p;
    if (rec.cp == cp) /* the run failed inside a segment: its recording is dropped */
        end_recording((cuda_prog *)cp, false);
    while (n_pending > 0 && pending[n_pending - 1].p == p) {
        pending_label *q = &pending[--n_pending];
        uint64_t bad = q->word;
        tj_status r = rt_cuda_read_finish(p->dev, q->slot, &bad, sizeof bad);
        if (!st && r)
            st = r;
        else if (!st && bad != UINT64_MAX)
            st = label_error(p, &cp->k[q->kernel], bad);
    }
    return st;
}

/* A convolution through cuDNN: the filter swapped into KRSC scratch by the kernel, cuDNN's call,
 * or for a filter gradient, cuDNN's call into scratch and the swap out. Scratch and workspace
 * come from the caching allocator and go back after the calls are queued (one stream: the next
 * user of the blocks queues behind them). */
static tj_status launch_cudnn(rt_plan *p, const jit_cuda_kernel *k, void *fn, void *const *bufs) {
    rt_device *d = p->dev;
    const char *f = p->base.g->name;
    bool to_hwio = ir_node_get(p->base.g, k->out[0])->op == IR_OP_CONV2D_GRAD_FILTER;
    size_t fb = jit_cudnn_conv_filter_bytes(k->conv), wb = jit_cudnn_conv_workspace(k->conv);
    void *ft = d->vt->alloc(d, fb), *ws = wb ? d->vt->alloc(d, wb) : NULL;
    tj_status st = ft && (ws || !wb) ? TJ_OK : (ir_last_code() ? ir_last_code() : TJ_ERR_OOM);
    kernel_args args = {{0}, {0}};
    void *params[] = {&args};
    if (!st && !to_hwio) {
        args.p[0] = bufs[1], args.p[1] = ft;
        st = rt_cuda_launch(d, fn, k->grid, k->block, 0, params, k->name, f);
    }
    if (!st)
        st = jit_cudnn_conv_run(k->conv, bufs[0], to_hwio ? bufs[1] : ft, to_hwio ? ft : bufs[2],
                                ws, k->name, f);
    if (!st && to_hwio) {
        args.p[0] = ft, args.p[1] = bufs[2];
        st = rt_cuda_launch(d, fn, k->grid, k->block, 0, params, k->name, f);
    }
    if (ws)
        d->vt->free(d, ws, wb);
    if (ft)
        d->vt->free(d, ft, fb);
    return st;
}

/* Whether kernel k is a product cuBLAS computes (f32, f64) rather than the generated one. */
static bool by_blas(const cuda_prog *cp, const jit_cuda_kernel *k) {
    return k->kind == JIT_CK_MM && cp->blas && !k->lt && (k->mm.dt == TJ_F32 || k->mm.dt == TJ_F64);
}

static tj_status launch(rt_plan *p, uint32_t s, void *const *bufs) {
    cuda_prog *cp = (cuda_prog *)p;
    const jit_cuda_kernel *k = &cp->k[cp->kernel_of_step[s]];
    if (by_blas(cp, k)) {
        tj_status st = rt_cuda_use(p->dev, k->name);
        return st ? st
                  : jit_cublas_gemm(cp->blas, &k->mm, bufs[0], bufs[1], bufs[2], k->name,
                                    p->base.g->name);
    }
    if (k->conv)
        return launch_cudnn(p, k, cp->fns[cp->kernel_of_step[s]], bufs);
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
        record(cp, &cp->segs[cp->seg_of_step[s]], s, &args, cp->fns[cp->kernel_of_step[s]], k, &st))
        return st;
    if (jit_cuda_checked(k))
        return launch_checked(p, (uint32_t)cp->kernel_of_step[s], cp->fns[cp->kernel_of_step[s]],
                              &args.p[k->n_in + k->n_out], params);
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

/* Convolution node id, its swap kernel k emitted: cuDNN's call made, or where cuDNN offers no
 * algorithm, the swap taken back and the generated kernel emitted instead. */
static tj_status dnn_conv(cuda_prog *cp, jit_sbuf *src, uint32_t id, jit_cuda_kernel *k) {
    const ir_graph *g = cp->rp.base.g;
    const ir_node *n = ir_node_get(g, id);
    rt_conv_geom c;
    tj_status st = jit_cuda_conv_geom(g, n, &c)
                       ? jit_cudnn_conv_new(cp->dnn, n->op, n->dtype, &c, &k->conv)
                       : TJ_ERR_UNSUPPORTED;
    if (st != TJ_ERR_UNSUPPORTED)
        return st;
    src->n = k->src_off;
    if (src->s)
        src->s[src->n] = 0;
    char name[sizeof k->name];
    memcpy(name, k->name, sizeof name);
    jit_cuda_kernel_release(k);
    memset(k, 0, sizeof *k);
    memcpy(k->name, name, sizeof name);
    return jit_cuda_emit_node(src, g, id, k);
}

/* ---- cuBLASLt epilogues ---------------------------------------------------------------------- */
/* Per node: its group (-1: none), and how many nodes and graph outputs read it (2: two or more). */
typedef struct graph_index {
    int32_t *group_of;
    uint8_t *uses;
    bool *absorbed; /* per group: run as a product's epilogue */
} graph_index;

static tj_status index_graph(const cuda_prog *cp, graph_index *x) {
    const ir_graph *g = cp->rp.base.g;
    const pass_partition *part = cp->part;
    x->group_of = malloc((g->n_nodes + 1) * sizeof *x->group_of);
    x->uses = calloc(g->n_nodes + 1, 1);
    x->absorbed = calloc(part->n_groups + 1, sizeof *x->absorbed);
    if (!x->group_of || !x->uses || !x->absorbed)
        return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        x->group_of[i] = -1;
        const uint32_t *in = ir_inputs(g, &g->nodes[i]);
        for (uint32_t q = 0; q < g->nodes[i].n_in; q++)
            if (in[q] < g->n_nodes && x->uses[in[q]] < 2)
                x->uses[in[q]]++;
    }
    for (uint32_t q = 0; q < g->n_outputs; q++)
        if (g->outputs[q] < g->n_nodes && x->uses[g->outputs[q]] < 2)
            x->uses[g->outputs[q]]++;
    for (uint32_t gi = 0; gi < part->n_groups; gi++)
        for (uint32_t j = 0; j < part->groups[gi].n_nodes; j++)
            x->group_of[part->groups[gi].nodes[j]] = (int32_t)gi;
    return TJ_OK;
}

static void index_free(graph_index *x) {
    free(x->group_of);
    free(x->uses);
    free(x->absorbed);
}

/* Whether product group gi is read only by a fused group computing `p + b` or `relu(p + b)`
 * (b a vector of the product's columns, made by an earlier group) whose one output is that
 * value: *ge, *bias and *relu say which (the add goes to cuBLASLt, a relu stays a kernel). */
static bool epilogue_of(const cuda_prog *cp, const graph_index *x, uint32_t gi, uint32_t *ge,
                        uint32_t *bias, bool *relu) {
    const ir_graph *g = cp->rp.base.g;
    const pass_group *gr = &cp->part->groups[gi];
    rt_mm mm;
    uint32_t p = gr->nodes[0], c = IR_NONE;
    if (gr->fused || gr->reduce || gr->n_nodes != 1 || ir_node_get(g, p)->op != IR_OP_MATMUL ||
        !rt_mm_of(g, p, &mm) || mm.dt != TJ_F32 || mm.batches != 1 || x->uses[p] != 1)
        return false;
    for (uint32_t i = p + 1; i < g->n_nodes && c == IR_NONE; i++)
        for (uint32_t q = 0; q < g->nodes[i].n_in; q++)
            if (ir_inputs(g, &g->nodes[i])[q] == p)
                c = i;
    if (c == IR_NONE || x->group_of[c] <= (int32_t)gi)
        return false;
    const pass_group *e = &cp->part->groups[x->group_of[c]];
    const ir_node *cn = ir_node_get(g, c);
    if (!e->fused || e->nodes[0] != c || cn->op != IR_OP_ADD || cn->n_in != 2 || cn->rank != 2 ||
        cn->dtype != TJ_F32 || cn->dims[0] != mm.m || cn->dims[1] != mm.n)
        return false;
    const uint32_t *in = ir_inputs(g, cn);
    uint32_t b = in[0] == p ? in[1] : in[0];
    const ir_node *bn = ir_node_get(g, b);
    if (b == p || bn->dtype != TJ_F32 || bn->rank != 1 || bn->dims[0] != mm.n ||
        x->group_of[b] >= (int32_t)gi)
        return false;
    const ir_node *r = e->n_nodes == 2 ? ir_node_get(g, e->nodes[1]) : NULL;
    *relu = r && r->op == IR_OP_RELU && ir_inputs(g, r)[0] == c && x->uses[c] == 1;
    if (e->n_nodes != (*relu ? 2u : 1u) || e->n_outputs != 1 ||
        e->outputs[0] != e->nodes[e->n_nodes - 1])
        return false;
    *ge = (uint32_t)x->group_of[c];
    *bias = b;
    return true;
}

/* Product group gi and the bias add starting fused group ge as one cuBLASLt call in kernel k
 * (no source); TJ_ERR_UNSUPPORTED when cuBLASLt offers no algorithm. */
static tj_status lt_kernel(cuda_prog *cp, uint32_t gi, uint32_t ge, uint32_t bias,
                           jit_cuda_kernel *k, size_t at) {
    const ir_graph *g = cp->rp.base.g;
    uint32_t p = cp->part->groups[gi].nodes[0], add = cp->part->groups[ge].nodes[0];
    if (!rt_mm_of(g, p, &k->mm))
        return TJ_ERR_UNSUPPORTED;
    tj_status st = jit_lt_mm_new(cp->lt, &k->mm, &k->lt);
    if (st)
        return st;
    const uint32_t *in = ir_inputs(g, ir_node_get(g, p));
    uint32_t ins[3] = {in[0], in[1], bias}, nodes[2] = {p, add};
    k->kind = JIT_CK_MM;
    k->n_in = 3;
    k->n_out = 1;
    k->n_nodes = 2;
    k->src_off = at;
    k->src_len = 0;
    if (!(k->in = jit_cuda_ids_dup(ins, 3)) || !(k->out = jit_cuda_ids_dup(&add, 1)) ||
        !(k->nodes = jit_cuda_ids_dup(nodes, 2)))
        return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    return TJ_OK;
}

/* Product node id as cuBLAS's call alone (cuBLAS takes f32 and f64): no generated source, which
 * NVRTC would compile for nothing. TJ_ERR_UNSUPPORTED: not such a product. */
static tj_status blas_kernel(cuda_prog *cp, uint32_t id, jit_cuda_kernel *k, size_t at) {
    const ir_graph *g = cp->rp.base.g;
    const ir_node *n = ir_node_get(g, id);
    if (!cp->blas || n->op != IR_OP_MATMUL || !rt_mm_of(g, id, &k->mm) ||
        (k->mm.dt != TJ_F32 && k->mm.dt != TJ_F64) || k->mm.m * k->mm.n == 0)
        return TJ_ERR_UNSUPPORTED;
    k->kind = JIT_CK_MM;
    k->n_in = 2;
    k->n_out = 1;
    k->n_nodes = 1;
    k->src_off = at;
    k->src_len = 0;
    if (!(k->in = jit_cuda_ids_dup(ir_inputs(g, n), 2)) || !(k->out = jit_cuda_ids_dup(&id, 1)) ||
        !(k->nodes = jit_cuda_ids_dup(&id, 1)))
        return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    return TJ_OK;
}

/* The relu of fused group ge (after its bias add went to cuBLASLt) as a kernel of its own. */
static tj_status relu_kernel(cuda_prog *cp, jit_sbuf *src, uint32_t ge, jit_cuda_kernel *k) {
    const pass_group *e = &cp->part->groups[ge];
    pass_group r = *e;
    r.n_nodes = r.n_inputs = 1;
    r.nodes = &e->nodes[1];
    r.inputs = &e->nodes[0];
    return jit_cuda_emit_group(src, cp->rp.base.g, &r, k);
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
    tj_status st = cp->lt ? index_graph(cp, &x) : TJ_OK;
    for (uint32_t gi = 0; gi < part->n_groups && !st; gi++) {
        const pass_group *gr = &part->groups[gi];
        jit_cuda_kernel *k = &cp->k[cp->n_k];
        snprintf(k->name, sizeof k->name, "tjk%u", cp->n_k);
        uint32_t ge, bias;
        bool relu;
        if (x.absorbed && x.absorbed[gi])
            continue; /* an earlier product's epilogue */
        if (cp->lt && epilogue_of(cp, &x, gi, &ge, &bias, &relu)) {
            st = lt_kernel(cp, gi, ge, bias, k, src->n);
            if (!st) {
                x.absorbed[ge] = true;
                st = kernel_step(cp, cp->n_k++);
                if (!st && relu) {
                    k = &cp->k[cp->n_k];
                    snprintf(k->name, sizeof k->name, "tjk%u", cp->n_k);
                    if (!(st = relu_kernel(cp, src, ge, k)))
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
                                     : blas_kernel(cp, gr->nodes[0], k, src->n);
        if (st == TJ_ERR_UNSUPPORTED && !gr->fused && !gr->reduce && !source) {
            jit_cuda_kernel_release(k);
            k->dnn = cp->dnn || cp->dnn_layouts;
            st = jit_cuda_emit_node(src, g, gr->nodes[0], k);
        }
        if (!st && k->kind == JIT_CK_CONV && k->dnn && cp->dnn)
            st = dnn_conv(cp, src, gr->nodes[0], k);
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
    index_free(&x);
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

/* Whether step s is a generated kernel a graph may hold (not a library's call, not the
 * cross-entropy with its label read), or a source step (no inputs: nothing is queued or read
 * back), which a segment may span. */
static bool graphable(const cuda_prog *cp, uint32_t s) {
    int32_t ki = cp->kernel_of_step[s];
    const jit_cuda_kernel *k = ki >= 0 ? &cp->k[ki] : NULL;
    return k && !k->conv && !k->lt && !by_blas(cp, k) && !jit_cuda_checked(k) && k->src_len;
}

static bool spannable(const cuda_prog *cp, uint32_t s) {
    return cp->kernel_of_step[s] < 0 && cp->rp.steps[s].n_in == 0;
}

/* The graph segments: maximal runs of graphable kernels (sources between them), two or more. */
static tj_status make_segments(cuda_prog *cp) {
    const rt_plan *p = &cp->rp;
    if (!rt_cuda_graphs() || !(cp->seg_of_step = malloc((p->n_steps + 1) * sizeof(int32_t))))
        return cp->seg_of_step || !rt_cuda_graphs() ? TJ_OK
                                                    : ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    for (uint32_t s = 0; s < p->n_steps; s++)
        cp->seg_of_step[s] = -1;
    for (uint32_t s = 0; s < p->n_steps;) {
        if (!graphable(cp, s)) {
            s++;
            continue;
        }
        uint32_t first = s, last = s, n = 0;
        for (uint32_t t = s; t < p->n_steps && (graphable(cp, t) || spannable(cp, t)); t++)
            if (graphable(cp, t))
                last = t, n++;
        s = last + 1;
        if (n < 2)
            continue;
        graph_seg *v = realloc(cp->segs, (cp->n_segs + 1) * sizeof *v);
        if (!v)
            return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
        cp->segs = v;
        graph_seg *g = &v[cp->n_segs];
        *g = (graph_seg){.first = first, .last = last, .n = n};
        g->set = calloc(n, sizeof *g->set);
        g->now = calloc(n, sizeof *g->now);
        g->nodes = calloc(n, sizeof *g->nodes);
        g->kernel = calloc(n, sizeof *g->kernel);
        g->used = calloc(n, sizeof *g->used);
        pthread_mutex_init(&g->mu, NULL);
        cp->n_segs++;
        if (!g->set || !g->now || !g->nodes || !g->kernel || !g->used)
            return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
        for (uint32_t t = first; t <= last; t++)
            if (graphable(cp, t))
                cp->seg_of_step[t] = (int32_t)(cp->n_segs - 1);
    }
    return TJ_OK;
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
    cp->rp.finish = finish;
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
    if (!st && (st = make_segments(cp)) == TJ_OK && cp->n_segs) {
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
