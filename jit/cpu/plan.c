/* plan.c — builds the CPU program's steps from the fusion partition: elementwise and reduce
 * groups, matmuls, softmaxes and strided views (transpose, slice, broadcast_to) become generated
 * kernels; large float matmuls call OpenBLAS and take their fused consumer group as an epilogue
 * (moved to the product's position, which is valid because that group is the product's only
 * reader); runs of consecutive small generated
 * kernels become one chain function (power(x, 100): one native call); every other node runs its
 * reference kernel (TJ_LOG=compile names each such compute node). All kernels go into one LLVM
 * module whose symbols are derived from the cache key, which also names what changes the plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jit/cpu/program.h"

#ifdef TJ_HAVE_LLVM

static bool fusable(const ir_graph *g, uint32_t id, void *user) {
    return jit_cpu_ew_supported(g, id);
}
static bool reducible(const ir_graph *g, uint32_t id, void *user) {
    return jit_cpu_red_supported(g, id);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint32_t *ids_dup(const uint32_t *a, uint32_t n) {
    uint32_t *p = malloc((n + 1) * sizeof *p);
    if (p && n)
        memcpy(p, a, n * sizeof *p);
    return p;
}

static bool is_plumbing(int op) {
    return op == IR_OP_CONST || op == IR_OP_PARAM || op == IR_OP_VAR_READ || op == IR_OP_ASSIGN ||
           op == IR_OP_PRINT || op == IR_OP_HOST_CALLBACK || op == IR_OP_GET ||
           (ir_ops[op].flags & IR_F_CF);
}

/* One step per group; matmuls, softmaxes and unsupported nodes decided here. */
static tj_status build_steps(cpu_prog *cp, const jit_cpu_opts *o) {
    const ir_graph *g = cp->base.g;
    const rt_blas *blas = NULL;
    bool blas_asked = false;
    for (uint32_t gi = 0; gi < cp->part->n_groups; gi++) {
        const pass_group *gr = &cp->part->groups[gi];
        step *sp = &cp->steps[cp->n_steps++];
        if (gr->fused || gr->reduce) {
            sp->kind = STEP_GEN;
            sp->sub = gr->fused ? SUB_EW : SUB_RED;
            sp->id = gi;
            sp->n_in = gr->n_inputs;
            sp->n_out = gr->n_outputs;
            sp->in = ids_dup(gr->inputs, gr->n_inputs);
            sp->out = ids_dup(gr->outputs, gr->n_outputs);
        } else {
            uint32_t id = gr->nodes[0];
            const ir_node *n = ir_node_get(g, id);
            sp->id = id;
            sp->kind = STEP_NODE;
            const char *why = "no generated lowering";
            if ((ir_ops[n->op].flags & IR_F_CF) && jit_cpu_cf_supported(g, id)) {
                sp->kind = STEP_CF;
            } else if (n->op == IR_OP_MATMUL && jit_cpu_mm_shape(g, id, &sp->mm)) {
                if (ir_dtype_is_float(sp->mm.dt) && !jit_cpu_mm_small(&sp->mm) && !o->exact_math) {
                    if (!blas_asked)
                        blas = rt_blas_get();
                    blas_asked = true;
                }
                sp->kind = STEP_GEN;
                sp->sub = SUB_MM;
                /* OpenBLAS sums in its own order: not under exact math (bit-identical results) */
                if (ir_dtype_is_float(sp->mm.dt) && !jit_cpu_mm_small(&sp->mm) && blas &&
                    !o->exact_math && sp->mm.m < INT32_MAX && sp->mm.n < INT32_MAX &&
                    sp->mm.k < INT32_MAX) {
                    sp->kind = STEP_BLAS;
                    sp->blas = blas;
                    sp->src[0] = ir_inputs(g, n)[0];
                    sp->src[1] = ir_inputs(g, n)[1];
                }
            } else if ((n->op == IR_OP_SOFTMAX || n->op == IR_OP_LOG_SOFTMAX) &&
                       jit_cpu_softmax_supported(g, id)) {
                sp->kind = STEP_GEN;
                sp->sub = SUB_SOFTMAX;
            } else if (jit_cpu_view_supported(g, id)) {
                sp->kind = STEP_GEN;
                sp->sub = SUB_VIEW;
            } else if (ir_ops[n->op].flags & IR_F_RED) {
                why = "reduction axes, dtype or empty input not generated";
            } else if (n->op == IR_OP_SOFTMAX || n->op == IR_OP_LOG_SOFTMAX) {
                why = "softmax over a non-last axis or a non-float dtype";
            }
            if (sp->kind == STEP_NODE && !is_plumbing(n->op))
                rt_log(RT_LOG_COMPILE, "cpu: %%%u %s %s: reference kernel (%s)", id,
                       ir_ops[n->op].name, ir_dtype_short(n->dtype), why);
            sp->n_in = n->n_in;
            sp->in = ids_dup(ir_inputs(g, n), n->n_in);
            sp->n_out = 1;
            sp->out = ids_dup(&id, 1);
            if (n->op == IR_OP_CONST && !(cp->consts[id] = rt_const_tensor(g, n)))
                return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
        }
        if (!sp->in || !sp->out)
            return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    return TJ_OK;
}

/* A BLAS product of 2-D operands reads a transposed operand through the call's trans flag
 * (what XLA's dot_general and Inductor's mm do with layouts): a gradient's `g @ W^T` and
 * `x^T @ g` no longer copy W or x first. A transpose no other step reads is dropped. */
static void fold_transposes(cpu_prog *cp, const uint8_t *is_out) {
    const ir_graph *g = cp->base.g;
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        step *sp = &cp->steps[s];
        const ir_node *mn = ir_node_get(g, sp->id);
        if (sp->kind != STEP_BLAS || sp->mm.batches != 1 || mn->rank != 2)
            continue;
        for (int k = 0; k < 2; k++) {
            const ir_node *t = ir_node_get(g, sp->src[k]);
            if (t->op != IR_OP_TRANSPOSE || t->rank != 2 || t->a.n_list != 2 || t->a.list[0] != 1 ||
                is_out[sp->src[k]])
                continue;
            uint32_t from = sp->src[k], to = ir_inputs(g, t)[0];
            sp->src[k] = to;
            sp->trans[k] = 1;
            for (uint32_t j = 0; j < sp->n_in; j++)
                if (sp->in[j] == from)
                    sp->in[j] = to;
        }
    }
    /* drop a transpose step whose value nothing reads any more */
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        step *sp = &cp->steps[s];
        if (sp->kind != STEP_GEN || sp->sub != SUB_VIEW || sp->n_out != 1 || is_out[sp->out[0]] ||
            ir_node_get(g, sp->out[0])->op != IR_OP_TRANSPOSE)
            continue;
        bool read = false;
        for (uint32_t t = 0; t < cp->n_steps && !read; t++)
            for (uint32_t k = 0; k < cp->steps[t].n_in && !read; k++)
                read = cp->steps[t].in[k] == sp->out[0];
        if (read)
            continue;
        free(sp->in);
        free(sp->out);
        memmove(sp, sp + 1, (cp->n_steps - s - 1) * sizeof *sp);
        cp->n_steps--;
        s--;
    }
}

/* The one step after s that reads node id; UINT32_MAX when none or several do. */
static uint32_t sole_reader(const cpu_prog *cp, uint32_t s, uint32_t id) {
    uint32_t reader = UINT32_MAX, n = 0;
    for (uint32_t t = s + 1; t < cp->n_steps; t++)
        for (uint32_t k = 0; k < cp->steps[t].n_in; k++)
            if (cp->steps[t].in[k] == id) {
                reader = t;
                n++;
            }
    return n == 1 ? reader : UINT32_MAX;
}

static void drop_step(cpu_prog *cp, uint32_t s) {
    free(cp->steps[s].in);
    free(cp->steps[s].out);
    memmove(&cp->steps[s], &cp->steps[s + 1], (cp->n_steps - s - 1) * sizeof cp->steps[s]);
    cp->n_steps--;
}

/* What a step fused from a product (or convolution) `self` of operands src and its epilogue gr
 * (NULL: none) reads: the operands, then the group's other inputs. New array (*n entries), NULL
 * on OOM. */
static uint32_t *merged_inputs(const uint32_t *src, uint32_t self, const pass_group *gr,
                               uint32_t *n) {
    uint32_t *in = malloc(((gr ? gr->n_inputs : 0) + 3) * sizeof *in);
    *n = 0;
    if (!in)
        return NULL;
    in[(*n)++] = src[0];
    if (src[1] != src[0])
        in[(*n)++] = src[1];
    for (uint32_t k = 0; gr && k < gr->n_inputs; k++)
        if (gr->inputs[k] != self && gr->inputs[k] != src[0] && gr->inputs[k] != src[1])
            in[(*n)++] = gr->inputs[k];
    return in;
}

/* A BLAS product read only by one elementwise group of its own shape takes that group as its
 * epilogue and moves to the group's position. */
static tj_status merge_epilogues(cpu_prog *cp, const uint8_t *is_out) {
    const ir_graph *g = cp->base.g;
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        step *sp = &cp->steps[s];
        if (sp->kind != STEP_BLAS || is_out[sp->id])
            continue;
        uint32_t reader = sole_reader(cp, s, sp->id);
        if (reader == UINT32_MAX || cp->steps[reader].kind != STEP_GEN ||
            cp->steps[reader].sub != SUB_EW)
            continue;
        step *ep = &cp->steps[reader];
        const pass_group *gr = &cp->part->groups[ep->id];
        const ir_node *mn = ir_node_get(g, sp->id);
        if (gr->rank != mn->rank || memcmp(gr->dims, mn->dims, (size_t)mn->rank * 8) != 0)
            continue;
        uint32_t n_in, *in = merged_inputs(sp->src, sp->id, gr, &n_in);
        if (!in)
            return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        /* the merged step takes the group's place and outputs; the product's step goes */
        step merged = *sp;
        merged.epi = gr;
        merged.in = in;
        merged.n_in = n_in;
        merged.out = ep->out;
        merged.n_out = ep->n_out;
        free(ep->in);
        *ep = merged;
        drop_step(cp, s); /* frees sp's own in/out */
        s--;
    }
    return TJ_OK;
}

/* An f32 convolution on the direct kernels read only by an elementwise group of its shape (bias,
 * activation) and/or a max pool whose windows tile its rows becomes one STEP_CONV at the last
 * of their positions (their other inputs are made by then): the convolution runs by bands of
 * rows, each band's epilogue and pooled row computed while the band is in cache. */
static tj_status merge_convs(cpu_prog *cp, const uint8_t *is_out) {
    const ir_graph *g = cp->base.g;
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        step *sp = &cp->steps[s];
        const ir_node *n = ir_node_get(g, sp->id);
        if (sp->kind != STEP_NODE || n->op != IR_OP_CONV2D || is_out[sp->id])
            continue;
        uint32_t t = sole_reader(cp, s, sp->id), ep = UINT32_MAX, pool = UINT32_MAX;
        const pass_group *epi = NULL;
        uint32_t last = UINT32_MAX; /* the value the pool would read */
        if (t != UINT32_MAX && cp->steps[t].kind == STEP_GEN && cp->steps[t].sub == SUB_EW) {
            ep = t;
            epi = &cp->part->groups[cp->steps[t].id];
            if (epi->n_outputs == 1 && !is_out[epi->outputs[0]]) {
                last = epi->outputs[0];
                t = sole_reader(cp, ep, last);
            } else {
                t = UINT32_MAX;
            }
        } else {
            last = sp->id;
        }
        if (t != UINT32_MAX && cp->steps[t].kind == STEP_NODE &&
            ir_node_get(g, cp->steps[t].id)->op == IR_OP_MAX_POOL2D && cp->steps[t].n_in == 1 &&
            cp->steps[t].in[0] == last && jit_cpu_conv_fusable(g, sp->id, epi, cp->steps[t].id))
            pool = t;
        if (pool == UINT32_MAX && (!epi || !jit_cpu_conv_fusable(g, sp->id, epi, IR_NONE)))
            continue;
        /* the step reads x, w and the epilogue's other inputs */
        const uint32_t *xin = ir_inputs(g, n);
        uint32_t n_in, *in = merged_inputs(xin, sp->id, epi, &n_in);
        uint32_t *out = malloc(((epi ? epi->n_outputs : 0) + 2) * sizeof *out), n_out = 0;
        if (!in || !out) {
            free(in);
            free(out);
            return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        }
        if (pool != UINT32_MAX)
            out[n_out++] = cp->steps[pool].id;
        else
            for (uint32_t k = 0; k < epi->n_outputs; k++)
                out[n_out++] = epi->outputs[k];
        step merged = {.kind = STEP_CONV,
                       .id = sp->id,
                       .n_in = n_in,
                       .n_out = n_out,
                       .in = in,
                       .out = out,
                       .epi = epi,
                       .src = {xin[0], xin[1]},
                       .pool = pool != UINT32_MAX ? cp->steps[pool].id + 1 : 0};
        uint32_t at = pool != UINT32_MAX ? pool : ep;
        free(cp->steps[at].in);
        free(cp->steps[at].out);
        cp->steps[at] = merged;
        if (pool != UINT32_MAX && ep != UINT32_MAX)
            drop_step(cp, ep);
        drop_step(cp, s);
        s--;
    }
    return TJ_OK;
}

static tj_status emit_step(LLVMModuleRef m, cpu_prog *cp, step *sp, const jit_cpu_opts *o) {
    const ir_graph *g = cp->base.g;
    bool contract = !o->no_contract;
    if (sp->kind == STEP_CF)
        return jit_cpu_cf_emit(m, g, sp->id, sp->name, o);
    if (sp->kind == STEP_BLAS || sp->kind == STEP_CONV)
        return sp->epi
                   ? jit_cpu_ew_emit(m, g, sp->epi, sp->name, contract, o->exact_math, &sp->plan)
                   : TJ_OK;
    switch (sp->sub) {
    case SUB_EW:
        return jit_cpu_ew_emit(m, g, &cp->part->groups[sp->id], sp->name, contract, o->exact_math,
                               &sp->plan);
    case SUB_RED:
        return jit_cpu_red_emit(m, g, &cp->part->groups[sp->id], sp->name, o, &sp->plan);
    case SUB_MM:
        return jit_cpu_mm_emit(m, g, sp->id, sp->name, o, &sp->plan);
    case SUB_VIEW:
        return jit_cpu_view_emit(m, g, sp->id, sp->name, &sp->plan);
    default:
        return jit_cpu_softmax_emit(m, g, sp->id, sp->name, o, &sp->plan);
    }
}

/* Whether a generated step is small enough to run inside a chain: it would not be split across
 * threads, and each output fits a stack slot. */
static bool chainable(const cpu_prog *cp, const step *sp) {
    if (sp->kind != STEP_GEN || sp->sub == SUB_CHAIN ||
        sp->plan.n_units * sp->plan.unit_len >= cp->par_min)
        return false;
    for (uint32_t k = 0; k < sp->n_out; k++) {
        const ir_node *n = ir_node_get(cp->base.g, sp->out[k]);
        if (ir_numel(n->rank, n->dims) * (int64_t)ir_dtype_size(n->dtype) > 65536)
            return false;
    }
    return true;
}

/* The nodes a generated step computes (a group's, or one). */
static uint32_t step_size(const cpu_prog *cp, const step *sp) {
    return sp->kind == STEP_GEN && (sp->sub == SUB_EW || sp->sub == SUB_RED)
               ? cp->part->groups[sp->id].n_nodes
               : 1;
}

static bool has_id(const uint32_t *a, uint32_t n, uint32_t id) {
    for (uint32_t k = 0; k < n; k++)
        if (a[k] == id)
            return true;
    return false;
}

/* Replaces steps [s0, s1] by one chain step named `name`, emitted into m. */
static tj_status make_chain(LLVMModuleRef m, cpu_prog *cp, uint32_t s0, uint32_t s1,
                            const uint32_t *last_reader, const uint8_t *is_out, const char *name) {
    uint32_t n_mem = s1 - s0 + 1, n_all = 0;
    for (uint32_t s = s0; s <= s1; s++)
        n_all += cp->steps[s].n_in + cp->steps[s].n_out;
    jit_cpu_member *mem = calloc(n_mem, sizeof *mem);
    uint32_t *in = malloc((n_all + 1) * sizeof *in), *out = malloc((n_all + 1) * sizeof *out);
    uint32_t n_in = 0, n_out = 0;
    tj_status st = mem && in && out ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t s = s0; s <= s1 && !st; s++) {
        const step *sp = &cp->steps[s];
        mem[s - s0] =
            (jit_cpu_member){sp->name, sp->plan.n_units, sp->n_in, sp->n_out, sp->in, sp->out};
        for (uint32_t k = 0; k < sp->n_in; k++) {
            bool inside = false;
            for (uint32_t t = s0; t < s && !inside; t++)
                inside = has_id(cp->steps[t].out, cp->steps[t].n_out, sp->in[k]);
            if (!inside && !has_id(in, n_in, sp->in[k]))
                in[n_in++] = sp->in[k];
        }
        for (uint32_t k = 0; k < sp->n_out; k++)
            if (is_out[sp->out[k]] || last_reader[sp->out[k]] > s1)
                out[n_out++] = sp->out[k];
    }
    if (!st)
        st = jit_cpu_chain_emit(m, cp->base.g, mem, n_mem, in, n_in, out, n_out, name);
    if (st) {
        free(mem);
        free(in);
        free(out);
        return st;
    }
    step ch = {.kind = STEP_GEN,
               .sub = SUB_CHAIN,
               .id = cp->steps[s0].id,
               .n_in = n_in,
               .n_out = n_out,
               .in = in,
               .out = out};
    ch.plan.n_units = 1;
    ch.plan.unit_len = 1;
    snprintf(ch.name, sizeof ch.name, "%s", name);
    ch.chain_nodes = malloc((cp->base.g->n_nodes + 1) * sizeof *ch.chain_nodes);
    for (uint32_t s = s0; s <= s1 && ch.chain_nodes; s++)
        ch.n_chain_nodes +=
            jit_cpu_step_nodes(cp, &cp->steps[s], ch.chain_nodes + ch.n_chain_nodes);
    for (uint32_t s = s0; s <= s1; s++) {
        free(cp->steps[s].in);
        free(cp->steps[s].out);
    }
    free(mem);
    cp->steps[s0] = ch;
    memmove(&cp->steps[s0 + 1], &cp->steps[s1 + 1], (cp->n_steps - s1 - 1) * sizeof(step));
    cp->n_steps -= n_mem - 1;
    return TJ_OK;
}

static tj_status form_chains(LLVMModuleRef m, cpu_prog *cp, const uint8_t *is_out,
                             const char *prefix) {
    const ir_graph *g = cp->base.g;
    uint32_t *last_reader = calloc(g->n_nodes + 1, sizeof *last_reader);
    if (!last_reader)
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t s = 0; s < cp->n_steps; s++)
        for (uint32_t k = 0; k < cp->steps[s].n_in; k++)
            last_reader[cp->steps[s].in[k]] = s;
    tj_status st = TJ_OK;
    uint32_t n_chains = 0;
    /* from the back, so that replacing a run keeps the indices of the runs before it; a chain
     * holds at most PASS_MAX_GROUP_NODES nodes, as a fused group does (its members are inlined
     * into one function, whose compile cost must stay bounded) */
    for (uint32_t s1 = cp->n_steps; s1-- > 0 && !st;) {
        if (!chainable(cp, &cp->steps[s1]))
            continue;
        uint32_t s0 = s1, nodes = step_size(cp, &cp->steps[s1]);
        while (s0 > 0 && chainable(cp, &cp->steps[s0 - 1]) &&
               nodes + step_size(cp, &cp->steps[s0 - 1]) <= PASS_MAX_GROUP_NODES)
            nodes += step_size(cp, &cp->steps[--s0]);
        if (s1 > s0) {
            char name[64];
            snprintf(name, sizeof name, "%.40sc%u", prefix, n_chains++);
            st = make_chain(m, cp, s0, s1, last_reader, is_out, name);
        }
        s1 = s0;
    }
    free(last_reader);
    return st;
}

/* The IR text of fn with every occurrence of `name` replaced by "K" (malloc'd). */
static char *text_without_name(LLVMValueRef fn, const char *name) {
    char *t = LLVMPrintValueToString(fn);
    size_t n = strlen(name), len = strlen(t);
    char *out = malloc(len + 1), *o = out;
    if (!out) {
        LLVMDisposeMessage(t);
        return NULL;
    }
    for (const char *s = t; *s;) {
        if (!strncmp(s, name, n)) {
            *o++ = 'K';
            s += n;
        } else {
            *o++ = *s++;
        }
    }
    *o = 0;
    LLVMDisposeMessage(t);
    return out;
}

/* Kernels whose code is the same but for their name (the same fused ops on other buffers of
 * other sizes: an elementwise loop takes its range as arguments) are compiled once: a later one
 * is deleted from the module and its step calls the first's symbol. The Adam updates of a
 * model's variables, or the repeated blocks of a network, cost one kernel each. */
static void dedupe_kernels(LLVMModuleRef m, cpu_prog *cp) {
    uint64_t *hash = calloc(cp->n_steps + 1, sizeof *hash);
    char **text = calloc(cp->n_steps + 1, sizeof *text);
    if (!hash || !text) {
        free(hash);
        free(text);
        return; /* only an optimisation */
    }
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        step *sp = &cp->steps[s];
        if (!sp->name[0] || sp->alias)
            continue;
        char body_name[80];
        snprintf(body_name, sizeof body_name, "%s.body", sp->name);
        LLVMValueRef fn = LLVMGetNamedFunction(m, sp->name);
        LLVMValueRef body = LLVMGetNamedFunction(m, body_name);
        /* only a kernel nothing else calls: a wrapper, and a body only the wrapper calls */
        if (!fn || LLVMGetFirstUse(fn) || (body && LLVMGetNextUse(LLVMGetFirstUse(body))))
            continue;
        char *a = text_without_name(fn, sp->name),
             *b = body ? text_without_name(body, sp->name) : NULL;
        if (!a || (body && !b)) {
            free(a);
            free(b);
            continue;
        }
        size_t la = strlen(a), lb = b ? strlen(b) : 0;
        char *t = malloc(la + lb + 1);
        if (t) {
            memcpy(t, a, la);
            memcpy(t + la, b ? b : "", lb + 1);
        }
        free(a);
        free(b);
        if (!t)
            continue;
        uint64_t h = ir_hash_bytes(t, la + lb, 0xdedu);
        uint32_t same = UINT32_MAX;
        for (uint32_t r = 0; r < s && same == UINT32_MAX; r++)
            if (text[r] && hash[r] == h && !strcmp(text[r], t))
                same = r;
        if (same == UINT32_MAX) {
            hash[s] = h;
            text[s] = t;
            continue;
        }
        free(t);
        LLVMDeleteFunction(fn);
        if (body)
            LLVMDeleteFunction(body);
        sp->alias = same + 1;
    }
    for (uint32_t s = 0; s < cp->n_steps; s++)
        free(text[s]);
    free(text);
    free(hash);
}

tj_status jit_cpu_plan(cpu_prog *cp, const jit_cpu_opts *o) {
    const ir_graph *g = cp->base.g;
    uint32_t nn = g->n_nodes + 1;
    double t0 = now_ms();
    cp->part = pass_fusion_run2(g, fusable, reducible, NULL);
    if (!cp->part)
        return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
    cp->steps = calloc(cp->part->n_groups + 1, sizeof *cp->steps);
    cp->consts = calloc(nn, sizeof *cp->consts);
    uint8_t *is_out = calloc(nn, 1);
    if (!cp->steps || !cp->consts || !is_out) {
        free(is_out);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    for (uint32_t k = 0; k < g->n_outputs; k++)
        is_out[g->outputs[k]] = 1;
    tj_status st = build_steps(cp, o);
    if (!st) {
        fold_transposes(cp, is_out);
        st = merge_epilogues(cp, is_out);
    }
    if (!st && !o->exact_math)
        st = merge_convs(cp, is_out);

    /* the key names everything that changes the code; symbols derive from it */
    char base[1536], key[1700], prefix[40];
    jit_cpu_code_key(g, !o->no_contract, base, sizeof base, prefix, sizeof prefix);
    int n_blas = 0;
    for (uint32_t s = 0; s < cp->n_steps; s++)
        n_blas += cp->steps[s].kind == STEP_BLAS;
    /* rt_isa decides which convolutions become conv steps (merge_convs) */
    snprintf(key, sizeof key, "%s;plan=5;blas=%d;exact=%d;par=%lld;isa=%s", base, n_blas > 0,
             o->exact_math, (long long)cp->par_min, rt_isa_name(rt_isa()));
    snprintf(prefix, sizeof prefix, "tj_%016llx_",
             (unsigned long long)ir_hash_bytes(key, strlen(key), 11));

    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("tracejit", ctx);
    jit_cpu_prepare_module(m);
    /* emitting fills each step's plan (work units), which a cached object does not carry */
    for (uint32_t s = 0; s < cp->n_steps && !st; s++) {
        step *sp = &cp->steps[s];
        if (sp->kind == STEP_NODE || ((sp->kind == STEP_BLAS || sp->kind == STEP_CONV) && !sp->epi))
            continue;
        snprintf(sp->name, sizeof sp->name, "%.40sk%u", prefix, s);
        st = emit_step(m, cp, sp, o);
        if (st && sp->kind == STEP_CF) { /* not lowered after all: the executor runs it */
            rt_log(RT_LOG_COMPILE, "cpu: %%%u %s: executor (%s)", sp->id,
                   ir_ops[ir_node_get(cp->base.g, sp->id)->op].name, ir_last_error());
            ir_clear_error();
            sp->kind = STEP_NODE;
            sp->name[0] = 0;
            st = TJ_OK;
        } else if (sp->kind == STEP_CF) {
            rt_log(RT_LOG_COMPILE, "cpu: %%%u %s: native control flow", sp->id,
                   ir_ops[ir_node_get(cp->base.g, sp->id)->op].name);
        }
    }
    if (!st)
        st = form_chains(m, cp, is_out, prefix);
    free(is_out);
    if (!st)
        dedupe_kernels(m, cp);

    uint32_t nk = 0, n_alias = 0;
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        nk += cp->steps[s].name[0] != 0 && !cp->steps[s].alias;
        n_alias += cp->steps[s].alias != 0;
    }
    const char **names = calloc(nk + 1, sizeof *names);
    void **addrs = calloc(nk + 1, sizeof *addrs);
    if (!st && (!names || !addrs || !(cp->key = strdup(key))))
        st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t s = 0, k = 0; s < cp->n_steps && !st; s++)
        if (cp->steps[s].name[0] && !cp->steps[s].alias)
            names[k++] = cp->steps[s].name;
    int from = 0;
    jit_cpu_stats stats = {0};
    if (!st && nk)
        cp->shared = jit_cpu_shared_find(key, names, nk, addrs, &from);
    if (st || cp->shared || nk == 0) {
        LLVMDisposeModule(m);
        LLVMContextDispose(ctx);
        stats.from_cache = from;
        stats.build_ms = now_ms() - t0;
    } else {
        double t1 = now_ms();
        jit_cpu_code *code = jit_cpu_code_compile(m, ctx, names, nk, addrs);
        if (!code || !(cp->shared = jit_cpu_shared_add(key, code, names, nk, addrs, true)))
            st = ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
        stats = jit_cpu_last_stats();
        stats.build_ms = t1 - t0;
    }
    stats.n_kernels = nk;
    jit_cpu_stats_set(&stats);
    for (uint32_t s = 0, k = 0; s < cp->n_steps && !st; s++)
        if (cp->steps[s].name[0] && !cp->steps[s].alias)
            cp->steps[s].fn = (jit_cpu_kernel_fn)addrs[k++];
    for (uint32_t s = 0; s < cp->n_steps && !st; s++) /* aliases point at earlier steps */
        if (cp->steps[s].alias)
            cp->steps[s].fn = cp->steps[cp->steps[s].alias - 1].fn;
    free(names);
    free(addrs);
    if (st)
        return st;

    if (from)
        rt_log(RT_LOG_COMPILE,
               "cpu: %u kernels %s in %.2f ms (no compile; +%u the same as one of them)", nk,
               from == 1 ? "shared with a loaded program" : "loaded from the disk cache",
               stats.build_ms, n_alias);
    else if (nk)
        rt_log(RT_LOG_COMPILE,
               "cpu: %u kernels, build %.2f ms, O3 %.2f ms, emit %.2f ms, link %.2f ms, "
               "%zu-byte object%s (+%u the same as one of them)",
               nk, stats.build_ms, stats.opt_ms, stats.emit_ms, stats.link_ms, stats.obj_bytes,
               stats.halves == 2 ? " in two halves on two threads" : "", n_alias);
    return TJ_OK;
}

#endif /* TJ_HAVE_LLVM */
