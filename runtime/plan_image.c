/* plan_image.c — a plan's steps as bytes, and back, with the runtime alone: the steps section of
 * a program image (image.h), which a library without the backend that compiled the program (the
 * runtime-only library) reads to run the saved code. Every step is written as the run loop takes
 * it, with the symbol of its kernel in the image's code blob instead of an address:
 *
 *   i64 par_min | u8 reuse, reinfer, check_params, labelled | u32 n_steps | per step: u8 kind |
 *   u32 id | ids in | ids out | ids nodes | str symbol | i64 n_units, unit_len | u32 src[2] |
 *   u8 trans[2] | ids epilogue in | ids epilogue out | u32 pool | u8 packs | u8 generic |
 *   str label (when labelled)
 *
 * What a product's tiles apply of its epilogue is not written: the reader derives it from the
 * graph (rt_plan_simple_epi), so no image can point the tiles at another buffer.
 *
 * Reading checks the structure against the graph before anything runs (rt_plan_check): every
 * index in range, each kind's node of the right op, a product's operands and a convolution's
 * geometry the graph's (the geometry itself is taken from the graph, never from the bytes, as is a
 * shape-generic kernel's: rt_plan_finish makes it and checks the units against it), each
 * value made once and before it is read, every output made. Unlike the backend's own reader,
 * which decides the plan again and refuses any other, it cannot know that a kernel computes what
 * its node asks: the code is the image author's, as any native code is (objload.h). */
#include <stdlib.h>
#include <string.h>

#include "runtime/image.h"
#include "runtime/objload.h"
#include "runtime/plan.h"

/* ---- writing --------------------------------------------------------------------------------- */
tj_status rt_plan_write_steps(rt_wbuf *w, const rt_plan *p,
                              const char *(*symbol)(const rt_program *, uint32_t)) {
    rt_put_i64(w, p->par_min);
    rt_put_u8(w, (uint8_t)p->reuse);
    rt_put_u8(w, (uint8_t)p->reinfer);
    rt_put_u8(w, (uint8_t)p->check_params);
    rt_put_u8(w, p->labels != NULL);
    rt_put_u32(w, p->n_steps);
    for (uint32_t s = 0; s < p->n_steps; s++) {
        const rt_step *sp = &p->steps[s];
        const char *sym = sp->fn ? symbol(&p->base, s) : NULL;
        if (sp->fn && (!sym || !*sym))
            return ir_errorf(TJ_ERR_UNSUPPORTED, "%s image: step %u's kernel has no symbol", p->who,
                             s);
        rt_put_u8(w, (uint8_t)sp->kind);
        rt_put_u32(w, sp->id);
        rt_put_ids(w, sp->in, sp->n_in);
        rt_put_ids(w, sp->out, sp->n_out);
        rt_put_ids(w, sp->nodes, sp->nodes ? sp->n_nodes : 0);
        rt_put_str(w, sym ? sym : "");
        rt_put_i64(w, sp->units.n_units);
        rt_put_i64(w, sp->units.unit_len);
        rt_put(w, sp->src, sizeof sp->src);
        rt_put(w, sp->trans, sizeof sp->trans);
        rt_put_ids(w, sp->epi.in, sp->epi.n_in);
        rt_put_ids(w, sp->epi.out, sp->epi.n_out);
        rt_put_u32(w, sp->pool);
        rt_put_u8(w, (uint8_t)sp->packs);
        rt_put_u8(w, sp->generic);
        if (p->labels)
            rt_put_str(w, p->labels[s] ? p->labels[s] : "");
    }
    return TJ_OK;
}

/* ---- checking -------------------------------------------------------------------------------- */
/* Marks x made by step s; a value made twice is damage (a plan makes each value once). */
static tj_status made(const rt_plan *p, uint8_t *have, uint32_t x, uint32_t s) {
    if (have[x])
        return ir_errorf(TJ_ERR_CORRUPT, "%s image: step %u makes %%%u again", p->who, s, x);
    have[x] = 1;
    return TJ_OK;
}

static tj_status read_before(const rt_plan *p, const uint8_t *have, uint32_t x, uint32_t s) {
    return have[x] ? TJ_OK
                   : ir_errorf(TJ_ERR_CORRUPT, "%s image: step %u reads %%%u before it is made",
                               p->who, s, x);
}

/* One step against its graph: its kind's node, operands, epilogue and work units. */
static bool step_ok(const rt_plan *p, const rt_step *sp) {
    const ir_graph *g = p->base.g;
    const ir_node *n = ir_node_get(g, sp->id);
    bool lib = sp->kind == RT_STEP_GEMM || sp->kind == RT_STEP_CONV, epi = rt_step_has_epi(sp);
    if (sp->units.n_units < 0 || sp->units.unit_len < 0 ||
        (sp->units.n_units > 0 && sp->units.unit_len == 0) || (!lib && (epi || sp->pool)))
        return false;
    switch (sp->kind) {
    case RT_STEP_NODE:
        return !sp->fn;
    case RT_STEP_KERNEL:
        return sp->fn && sp->n_out > 0;
    case RT_STEP_CF:
        return sp->fn && (ir_ops[n->op].flags & IR_F_CF);
    case RT_STEP_GEMM: /* the epilogue is a kernel over whole units */
        return rt_plan_gemm_matches(g, sp) && !sp->pool && epi == (sp->fn != NULL) &&
               (!epi || sp->units.unit_len > 0);
    case RT_STEP_CONV:
        return rt_plan_conv_matches(g, sp) && epi == (sp->fn != NULL) &&
               (!epi || sp->units.unit_len > 0);
    }
    return false;
}

tj_status rt_plan_check(const rt_plan *p) {
    const ir_graph *g = p->base.g;
    uint8_t *have = calloc(g->n_nodes + 1, 1);
    if (!have)
        return ir_errorf(TJ_ERR_OOM, "%s image: out of memory", p->who);
    tj_status st = TJ_OK;
    for (uint32_t s = 0; s < p->n_steps && !st; s++) {
        const rt_step *sp = &p->steps[s];
        const ir_node *n = ir_node_get(g, sp->id);
        if (!step_ok(p, sp)) {
            st = ir_errorf(TJ_ERR_CORRUPT, "%s image: step %u is damaged (not a step of %%%u %s)",
                           p->who, s, sp->id, ir_ops[n->op].name);
            break;
        }
        for (uint32_t k = 0; k < sp->n_in && !st; k++)
            st = read_before(p, have, sp->in[k], s);
        if (sp->kind == RT_STEP_NODE || sp->kind == RT_STEP_CF)
            for (uint32_t k = 0; k < n->n_in && !st; k++)
                st = read_before(p, have, ir_inputs(g, n)[k], s);
        bool lib = sp->kind == RT_STEP_GEMM || sp->kind == RT_STEP_CONV;
        for (int k = 0; lib && k < 2 && !st; k++)
            st = read_before(p, have, sp->src[k], s);
        for (uint32_t k = 0; lib && k < sp->epi.n_in && !st; k++)
            if (sp->epi.in[k] != sp->id)
                st = read_before(p, have, sp->epi.in[k], s);
        if (!st && sp->kind != RT_STEP_KERNEL)
            st = made(p, have, sp->id, s);
        for (uint32_t k = 0; !st && lib && !sp->pool && k < sp->epi.n_out; k++)
            st = made(p, have, sp->epi.out[k], s);
        if (!st && sp->pool) /* what it pools stays inside the step */
            st = made(p, have, sp->pool - 1, s);
        for (uint32_t k = 0; !st && sp->kind == RT_STEP_KERNEL && k < sp->n_out; k++)
            st = made(p, have, sp->out[k], s);
    }
    for (uint32_t k = 0; k < g->n_outputs && !st; k++)
        if (!have[g->outputs[k]])
            st = ir_errorf(TJ_ERR_CORRUPT, "%s image: output %u is never made", p->who, k);
    free(have);
    return st;
}

/* ---- reading --------------------------------------------------------------------------------- */
/* A plan read from its steps: the plan and the mapping of its image's code. */
typedef struct saved_prog {
    rt_plan rp;
    rt_obj *code;
} saved_prog;

static void saved_free(rt_program *p) {
    saved_prog *sp = (saved_prog *)p;
    if (!sp)
        return;
    rt_plan_release(&sp->rp);
    rt_obj_free(sp->code);
    free(sp);
}

static const rt_program_vt saved_vt = {rt_plan_run,       saved_free,      "saved",
                                       rt_plan_raw_bytes, rt_plan_run_raw, rt_plan_raw_inplace,
                                       rt_plan_kernels};

bool rt_is_saved_program(const rt_program *p) {
    return p && p->vt == &saved_vt;
}

/* Step s of the section r into p (ids checked against the graph's node count); its symbol into
 * sym (cap bytes). */
static void read_step(rt_plan *p, rt_rbuf *r, uint32_t s, char *sym, size_t cap, int labelled) {
    uint32_t nn = p->base.g->n_nodes;
    rt_step *sp = &p->steps[s];
    sp->kind = rt_get_u8(r);
    sp->id = rt_get_u32(r);
    if (sp->kind > RT_STEP_CONV || sp->id >= nn) {
        r->bad = 1;
        return;
    }
    if (!(sp->in = rt_get_ids(r, nn, &sp->n_in)) || !(sp->out = rt_get_ids(r, nn, &sp->n_out)) ||
        !(sp->nodes = rt_get_ids(r, nn, &sp->n_nodes)))
        return;
    rt_get_str(r, sym, cap);
    sp->units.n_units = rt_get_i64(r);
    sp->units.unit_len = rt_get_i64(r);
    const void *src = rt_get(r, sizeof sp->src), *tr = rt_get(r, sizeof sp->trans);
    if (!src || !tr || !(sp->epi.in = rt_get_ids(r, nn, &sp->epi.n_in)) ||
        !(sp->epi.out = rt_get_ids(r, nn, &sp->epi.n_out)))
        return;
    memcpy(sp->src, src, sizeof sp->src);
    memcpy(sp->trans, tr, sizeof sp->trans);
    sp->pool = rt_get_u32(r);
    sp->packs = rt_get_u8(r) != 0;
    sp->generic = rt_get_u8(r);
    if (sp->generic > RT_GENERIC_RED || (sp->generic && sp->kind != RT_STEP_KERNEL &&
                                         sp->kind != RT_STEP_GEMM && sp->kind != RT_STEP_CONV))
        r->bad = 1;
    if (sp->src[0] >= nn || sp->src[1] >= nn || sp->pool > nn || sp->n_nodes == 0)
        r->bad = 1;
    if (labelled) {
        char label[256];
        rt_get_str(r, label, sizeof label);
        if (!r->bad && !(p->labels[s] = strdup(label)))
            r->bad = 1;
    }
}

/* The kernels: the image's code blob mapped by objload, each step's symbol looked up. */
static tj_status read_code(saved_prog *sp, char (*syms)[64], const void *obj, size_t obj_size) {
    rt_plan *p = &sp->rp;
    const char **names = calloc(p->n_steps + 1, sizeof *names);
    void **addrs = calloc(p->n_steps + 1, sizeof *addrs);
    uint32_t nk = 0;
    tj_status st = names && addrs ? TJ_OK : ir_errorf(TJ_ERR_OOM, "%s: out of memory", p->who);
    for (uint32_t s = 0; s < p->n_steps && !st; s++)
        if (syms[s][0])
            names[nk++] = syms[s];
    if (!st && nk && !(sp->code = rt_obj_load(obj, obj_size, names, nk, addrs)))
        st = ir_last_code() ? ir_last_code() : TJ_ERR_CORRUPT;
    for (uint32_t s = 0, k = 0; s < p->n_steps && !st; s++)
        p->steps[s].fn = syms[s][0] ? (rt_kernel_fn)addrs[k++] : NULL;
    free(names);
    free(addrs);
    return st;
}

static rt_program *read_steps(const ir_graph *g, rt_image_in *in) {
    rt_rbuf *r = &in->steps;
    if (r->n == 0) {
        ir_errorf(TJ_ERR_UNSUPPORTED,
                  "%s image: it holds no steps for the runtime alone (saved "
                  "by a backend that runs on its own device)",
                  in->backend);
        return NULL;
    }
    saved_prog *sp = calloc(1, sizeof *sp);
    if (!sp || rt_plan_init(&sp->rp, g, "saved program") != TJ_OK) {
        free(sp);
        ir_errorf(TJ_ERR_OOM, "saved program: out of memory");
        return NULL;
    }
    sp->rp.base.vt = &saved_vt;
    rt_plan *p = &sp->rp;
    p->par_min = rt_get_i64(r);
    p->reuse = rt_get_u8(r) != 0;
    p->reinfer = rt_get_u8(r) != 0;
    p->check_params = rt_get_u8(r) != 0;
    int labelled = rt_get_u8(r) != 0;
    uint32_t n_steps = rt_get_u32(r);
    char(*syms)[64] = NULL;
    tj_status st = TJ_OK;
    if (r->bad || p->par_min <= 0 || n_steps > g->n_nodes + 1)
        st = ir_errorf(TJ_ERR_CORRUPT, "%s image: its steps' header is damaged", in->backend);
    else if (!(p->steps = calloc(n_steps + 1, sizeof *p->steps)) ||
             !(syms = calloc(n_steps + 1, sizeof *syms)) ||
             !(p->consts = calloc(g->n_nodes + 1, sizeof *p->consts)) ||
             (labelled && !(p->labels = calloc(n_steps + 1, sizeof *p->labels))))
        st = ir_errorf(TJ_ERR_OOM, "saved program: out of memory");
    for (uint32_t s = 0; s < n_steps && !st && !r->bad; s++) {
        p->n_steps++;
        read_step(p, r, s, syms[s], sizeof syms[s], labelled);
        p->steps[s].fn = syms[s][0] ? (rt_kernel_fn)1 : NULL; /* a kernel; its address below */
    }
    if (!st && (r->bad || r->at != r->n))
        st = ir_errorf(TJ_ERR_CORRUPT, "%s image: its steps are damaged", in->backend);
    if (!st)
        st = rt_plan_check(p);
    const rt_blas *blas = NULL;
    for (uint32_t s = 0; s < p->n_steps && !st; s++) {
        rt_step *x = &p->steps[s];
        const ir_node *n = ir_node_get(g, x->id);
        if (x->kind == RT_STEP_GEMM) {
            rt_mm_of(g, x->id, &x->mm); /* the geometry is the graph's */
            if (!blas && !(blas = rt_blas_get()))
                st = ir_errorf(TJ_ERR_UNSUPPORTED,
                               "%s image: its matrix products call OpenBLAS, which is not "
                               "available here (%s)",
                               in->backend, rt_blas_info());
            x->blas = blas;
        }
        rt_plan_simple_epi(g, x); /* after the product's geometry: from the graph */
        if (x->kind == RT_STEP_NODE && n->op == IR_OP_CONST &&
            !(p->consts[x->id] = rt_const_tensor(g, n)))
            st = ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
    }
    if (!st)
        st = read_code(sp, syms, in->code, in->code_size);
    free(syms);
    if (!st)
        st = rt_plan_finish(p, true, rt_image_region, in);
    if (!st)
        st = rt_image_regions_done(in, p->regions != NULL);
    if (st) {
        saved_free(&sp->rp.base);
        return NULL;
    }
    return &sp->rp.base;
}

static const rt_image_ops steps_ops = {.read = read_steps};

rt_program *rt_image_read_steps(const ir_graph *g, const void *img, size_t size) {
    return rt_image_read(g, img, size, &steps_ops);
}
