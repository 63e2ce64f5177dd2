/* Program images (jit/cpu/image.c) and tracejit's object loader (runtime/objload.c). A compiled
 * program written as an image and made again from it, without compiling, gives bit-identical
 * results (the same code runs): products with epilogues, fused convolution steps (epilogue and
 * max pool), softmaxes, reductions, views, chains,
 * reference-kernel steps, a loop whose regions are compiled. Every truncation of an image, an
 * image of another graph, of another build and of a CPU with features this one lacks is refused
 * with an error, never loaded; so are damaged objects: not ELF, headers and sections past the
 * end, an unknown relocation type, an undefined symbol; and forged plans, well-formed images
 * whose steps say other work units, other buffers, another symbol or alias, or whose fusion
 * groups read their inputs in another order (issue 23: 15 such forgeries crashed, 1 hung and 18
 * gave wrong answers): the loader plans the graph again and compares. The runtime alone reads the
 * same images from their steps section (what the runtime-only library runs), with the same bits;
 * it refuses truncations and steps whose structure is damaged (read before made, made twice,
 * other operands, an epilogue's bias out of range, empty units, a kernel without code). */
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "native_first.h"
#include "jit/cpu/program.h"
#include "jit/jit.h"
#include "runtime/objload.h"
#include "runtime/image.h"
#include "runtime/plan.h"
#include "tj_codegen_id.h"

static tj_tensor *dense(tj_tensor *x, tj_tensor *w) {
    tj_tensor *a = tj_tanh(tj_add(tj_mul(x, tj_scalar_f32(0.5f)), tj_scalar_f32(0.25f)));
    tj_tensor *h = tj_relu(tj_add(tj_matmul(a, w), tj_scalar_f32(0.1f)));
    tj_tensor *s = tj_softmax(tj_matmul(h, tj_transpose(w, NULL)), -1);
    tj_tensor *small = tj_exp(tj_neg(tj_mul(x, x))); /* chained small kernels */
    return tj_add(tj_sum(tj_mul(s, small), 1, (int[]){1}, 0),
                  tj_gather(tj_sum(x, 1, (int[]){0}, 0), tj_argmax(x, 1), 0));
}

static tj_tensor *cond_fn(int n, tj_tensor *const *a, void *u) {
    return tj_less(tj_sum(a[0], 0, NULL, 0), tj_scalar_f32(1000.0f));
}
static tj_tensor *body_fn(int n, tj_tensor *const *a, void *u) {
    tj_tensor *m = tj_matmul(a[0], a[1]);
    return tj_tuple(2, (tj_tensor *[]){tj_add(tj_abs(m), tj_scalar_f32(1)), a[1]});
}
static tj_tensor *looped(tj_tensor *x, tj_tensor *w) {
    tj_tensor *init[2] = {x, w};
    tj_tensor *r = tj_while_loop_max(cond_fn, body_fn, 2, init, 20, NULL);
    return tj_mul(tj_tuple_get(r, 0), tj_scalar_f32(0.5f));
}

/* x [n, n] as 2 images of [n/2, n, 1]; filters and bias are slices of w: conv + bias + relu +
 * max pool (one fused conv step), then conv + tanh (a conv step with an epilogue only) */
static tj_tensor *part(tj_tensor *w, int64_t r0, int64_t r1, int64_t cols, int rank,
                       const int64_t *dims) {
    int64_t b[2] = {r0, 0}, e[2] = {r1, cols};
    return tj_reshape(tj_slice(w, b, e, NULL), rank, dims);
}
static tj_tensor *convnet(tj_tensor *x, tj_tensor *w) {
    int64_t n = tj_tensor_dims(x)[0];
    int st[2] = {1, 1}, dil[2] = {1, 1}, pk[2] = {2, 2};
    tj_tensor *img = tj_reshape(x, 4, (int64_t[]){2, n / 2, n, 1});
    tj_tensor *f1 = part(w, 0, 9, 16, 4, (int64_t[]){3, 3, 1, 16});
    tj_tensor *b1 = part(w, 9, 10, 16, 1, (int64_t[]){16});
    tj_tensor *h = tj_relu(tj_bias_add(tj_conv2d(img, f1, st, TJ_PAD_SAME, dil), b1));
    h = tj_max_pool2d(h, pk, pk, TJ_PAD_VALID);
    tj_tensor *f2 = part(w, 10, 22, n, 4, (int64_t[]){3, 3, 16, n * 12 / 144});
    return tj_tanh(tj_conv2d(h, f2, st, TJ_PAD_VALID, dil));
}

static tj_tensor *rand2(int64_t r, int64_t c, uint64_t seed) {
    int64_t d[2] = {r, c};
    return tj_random_uniform(TJ_F32, 2, d, -1, 1, seed);
}

/* The concrete function of f for args (owned by f). */
static tj_concrete *concrete(tj_function *f, tj_tensor *x, tj_tensor *w) {
    tj_spec s[2] = {{TJ_F32, 2, {0}, NULL}, {TJ_F32, 2, {0}, NULL}};
    memcpy(s[0].dims, tj_tensor_dims(x), 2 * sizeof(int64_t));
    memcpy(s[1].dims, tj_tensor_dims(w), 2 * sizeof(int64_t));
    return tj_function_get_concrete(f, 2, s);
}

/* Runs p on args; the result (a new reference) or NULL. */
static tj_tensor *run(rt_program *p, const tj_concrete *c, tj_tensor *x, tj_tensor *w) {
    tj_tensor *args[2] = {x, w}, *out = NULL;
    tj_status st = p->vt->run(p, args, 2, c->caps, &out);
    CHECK_MSG(st == TJ_OK, "%s", tj_last_error());
    return st ? NULL : out;
}

static void same_bits(tj_tensor *a, tj_tensor *b) {
    CHECK(a && b && tj_tensor_numel(a) == tj_tensor_numel(b));
    if (a && b)
        CHECK(memcmp(tj_tensor_data(a), tj_tensor_data(b), 4 * (size_t)tj_tensor_numel(a)) == 0);
}

/* Forges p's plan one field at a time (a copy written as an image, so the format stays valid)
 * and loads each: every one is refused. */
typedef enum {
    F_UNITS,
    F_UNIT_LEN,
    F_UNITS_ZERO,
    F_SWAP_IN,
    F_OTHER_IN,
    F_ALIAS,
    F_NAME,
    F_GROUP_IN,
    F_N
} forgery;
static int forge(cpu_prog *cp, uint32_t s, forgery f) {
    step *sp = &cp->steps[s];
    switch (f) {
    case F_UNITS:
        return sp->plan.n_units > 0 ? (sp->plan.n_units++, 1) : 0;
    case F_UNIT_LEN:
        return sp->plan.unit_len > 0 ? (sp->plan.unit_len++, 1) : 0;
    case F_UNITS_ZERO:
        return sp->plan.unit_len > 0 ? (sp->plan.unit_len = 0, 1) : 0;
    case F_SWAP_IN:
        if (sp->n_in < 2 || sp->in[0] == sp->in[1])
            return 0;
        uint32_t t = sp->in[0];
        sp->in[0] = sp->in[1], sp->in[1] = t;
        return 1;
    case F_OTHER_IN: /* another value of the same type, made earlier */
        for (uint32_t r = 0; sp->n_in && r < s; r++)
            for (uint32_t k = 0; k < cp->steps[r].n_out; k++) {
                const ir_node *a = ir_node_get(cp->rp.base.g, sp->in[0]),
                              *b = ir_node_get(cp->rp.base.g, cp->steps[r].out[k]);
                if (cp->steps[r].out[k] != sp->in[0] && a->dtype == b->dtype &&
                    a->rank == b->rank && !memcmp(a->dims, b->dims, 8 * (size_t)a->rank)) {
                    sp->in[0] = cp->steps[r].out[k];
                    return 1;
                }
            }
        return 0;
    case F_ALIAS: /* an earlier step's code */
        for (uint32_t r = 0; sp->name[0] && r < s; r++)
            if (cp->steps[r].name[0] && !cp->steps[r].alias && sp->alias != r + 1) {
                sp->alias = r + 1;
                return 1;
            }
        return 0;
    case F_NAME: /* another step's symbol */
        for (uint32_t r = 0; sp->name[0] && r < cp->n_steps; r++)
            if (r != s && cp->steps[r].name[0] && strcmp(cp->steps[r].name, sp->name)) {
                memcpy(sp->name, cp->steps[r].name, sizeof sp->name);
                return 1;
            }
        return 0;
    case F_GROUP_IN:
        if (s >= cp->part->n_groups || cp->part->groups[s].n_inputs < 2)
            return 0;
        uint32_t *in = cp->part->groups[s].inputs, u = in[0];
        in[0] = in[1], in[1] = u;
        return 1;
    default:
        return 0;
    }
}
static void forged_plans(const char *name, const tj_concrete *c, const unsigned char *img,
                         size_t size) {
    int tried = 0, loaded = 0;
    for (int f = 0; f < F_N; f++) {
        for (uint32_t s = 0;; s++) {
            /* a fresh copy each time: forge one field, write it, load it */
            cpu_prog *cp = (cpu_prog *)jit_cpu_program_from_image(c->graph, img, size);
            if (!cp || s >= cp->n_steps) {
                if (cp)
                    cp->rp.base.vt->free(&cp->rp.base);
                break;
            }
            if (!forge(cp, s, (forgery)f)) {
                cp->rp.base.vt->free(&cp->rp.base);
                continue;
            }
            size_t n = 0;
            unsigned char *bad = jit_cpu_program_image(&cp->rp.base, &n);
            cp->rp.base.vt->free(&cp->rp.base);
            rt_program *q = bad ? jit_cpu_program_from_image(c->graph, bad, n) : NULL;
            tried++;
            if (q) {
                loaded++;
                fprintf(stderr, "%s: forgery %d of step %u loaded\n", name, f, s);
                q->vt->free(q);
            } else {
                CHECK_MSG(ir_last_code() == TJ_ERR_CORRUPT || ir_last_code() == TJ_ERR_UNSUPPORTED,
                          "%s: forgery %d: %s", name, f, tj_last_error());
            }
            free(bad);
        }
    }
    CHECK_MSG(tried >= 5, "%s: only %d forgeries applied", name, tried);
    CHECK_MSG(loaded == 0, "%s: %d of %d forged plans loaded", name, loaded, tried);
}

/* Damages the runtime's plan p one field at a time (on a fresh read each time) and checks it as
 * the runtime reads any image's steps: every damage is refused, naming the step. */
typedef enum { M_READ_LATER, M_MADE_TWICE, M_SRC, M_UNIT_LEN, M_KIND, M_N } mutation;
static int mutate(rt_plan *p, uint32_t s, mutation m) {
    rt_step *sp = &p->steps[s];
    switch (m) {
    case M_READ_LATER: /* an input a later step makes */
        for (uint32_t r = s + 1; sp->n_in && r < p->n_steps; r++)
            if (p->steps[r].kind == RT_STEP_KERNEL && p->steps[r].n_out) {
                sp->in[0] = p->steps[r].out[0];
                return 1;
            }
        return 0;
    case M_MADE_TWICE: /* an output an earlier step made */
        for (uint32_t r = 0; sp->kind == RT_STEP_KERNEL && r < s; r++)
            if (p->steps[r].kind == RT_STEP_KERNEL && p->steps[r].n_out) {
                sp->out[0] = p->steps[r].out[0];
                return 1;
            }
        return 0;
    case M_SRC: /* a product or convolution reading what its node does not */
        if (sp->kind != RT_STEP_GEMM && sp->kind != RT_STEP_CONV)
            return 0;
        sp->src[0] = sp->src[1];
        return 1;
    case M_UNIT_LEN:
        return sp->units.n_units > 0 ? (sp->units.unit_len = 0, 1) : 0;
    case M_KIND: /* a reference step said to be a kernel without one, or the reverse */
        if (sp->kind == RT_STEP_NODE)
            return sp->kind = RT_STEP_KERNEL, 1;
        return sp->kind == RT_STEP_KERNEL ? (sp->kind = RT_STEP_NODE, 1) : 0;
    default:
        return 0;
    }
}
static void damaged_steps(const char *name, const tj_concrete *c, const unsigned char *img,
                          size_t size) {
    int tried = 0;
    for (int m = 0; m < M_N; m++)
        for (uint32_t s = 0;; s++) {
            rt_program *q = rt_image_read_steps(c->graph, img, size);
            rt_plan *p = (rt_plan *)q;
            bool more = q && s < p->n_steps, applied = more && mutate(p, s, (mutation)m);
            if (applied) {
                tried++;
                tj_status st = rt_plan_check(p);
                CHECK_MSG(st == TJ_ERR_CORRUPT, "%s: damage %d of step %u passed the check", name,
                          m, s);
                if (st == TJ_ERR_CORRUPT && m != M_READ_LATER && m != M_MADE_TWICE)
                    CHECK_HAS(tj_last_error(), "is damaged");
            }
            if (q) /* the mutation leaves every pointer the plan owns in place */
                q->vt->free(q);
            if (!more)
                break;
        }
    CHECK_MSG(tried >= 4, "%s: only %d damages applied", name, tried);
}

/* The image of f's program, loaded again: the same bits; then the damaged variants. The same
 * image read by the runtime alone (its steps section, no CPU backend): the same bits too. */
static void round_trip(const char *name, void *fn, int64_t n, int truncations) {
    tj_function *f = tj_function_new(name, fn, 2, NULL);
    tj_tensor *x = rand2(n, n, 1), *w = rand2(n, n, 2);
    tj_concrete *c = concrete(f, x, w);
    CHECK_MSG(c && jit_cpu_is_program(c->prog), "%s: not compiled: %s", name, tj_last_error());
    if (!c || !jit_cpu_is_program(c->prog))
        goto out;
    size_t size = 0;
    unsigned char *img = jit_cpu_program_image(c->prog, &size);
    CHECK_MSG(img && size > 64, "%s", tj_last_error());
    rt_program *p = img ? jit_cpu_program_from_image(c->graph, img, size) : NULL;
    CHECK_MSG(p != NULL, "%s: %s", name, tj_last_error());
    if (p) {
        tj_tensor *a = run(c->prog, c, x, w), *b = run(p, c, x, w);
        same_bits(a, b);
        tj_release(a);
        tj_release(b);
        p->vt->free(p);
        if (truncations)
            forged_plans(name, c, img, size);
    }
    rt_program *rp = img ? rt_image_read_steps(c->graph, img, size) : NULL;
    CHECK_MSG(rp && rt_is_saved_program(rp), "%s: the runtime alone: %s", name, tj_last_error());
    if (rp) {
        tj_tensor *a = run(c->prog, c, x, w), *b = run(rp, c, x, w);
        same_bits(a, b);
        tj_release(a);
        tj_release(b);
        rp->vt->free(rp);
        if (truncations)
            damaged_steps(name, c, img, size);
    }
    for (size_t k = 0; img && truncations && k < size; k += k < 4096 ? 7 : 211) {
        rt_program *q = rt_image_read_steps(c->graph, img, k);
        CHECK_MSG(!q && ir_last_code() == TJ_ERR_CORRUPT,
                  "%s: a %zu-byte prefix loaded by the runtime alone", name, k);
        if (q) {
            q->vt->free(q);
            break;
        }
    }
    /* every truncation is refused (all of them in the header and plan, then a sample) */
    for (size_t k = 0; img && truncations && k < size; k += k < 8192 ? 1 : 61) {
        rt_program *q = jit_cpu_program_from_image(c->graph, img, k);
        CHECK_MSG(!q && ir_last_code() == TJ_ERR_CORRUPT, "%s: a %zu-byte prefix loaded", name, k);
        if (q) {
            q->vt->free(q);
            break;
        }
    }
    /* a CPU lacking a feature (every bit of word 2, leaf 7's EBX, set), another build, another
     * architecture */
    /* the envelope (runtime/image.h): magic, version, codegen id, backend, target, cpu words */
    size_t tgt = 8 + 4 + strlen(TJ_CODEGEN_ID) + 4 + strlen("cpu"),
           cg = tgt + 4 + strlen(rt_image_target());
    if (img && truncations) {
        unsigned char *bad = malloc(size);
        memcpy(bad, img, size);
        memset(bad + cg + 2 * 4, 0xff, 4);
        CHECK(!jit_cpu_program_from_image(c->graph, bad, size));
        CHECK_EQ_INT(ir_last_code(), TJ_ERR_UNSUPPORTED);
        CHECK_HAS(tj_last_error(), "compiled for a CPU with features this one lacks");
        memcpy(bad, img, size);
        bad[12] ^= 1; /* the code generator id's first character */
        CHECK(!jit_cpu_program_from_image(c->graph, bad, size));
        CHECK_EQ_INT(ir_last_code(), TJ_ERR_UNSUPPORTED);
        CHECK_HAS(tj_last_error(), "made by another tracejit build");
        memcpy(bad, img, size);
        bad[tgt + 4] ^= 0x20; /* x86_64 -> X86_64 */
        CHECK(!jit_cpu_program_from_image(c->graph, bad, size));
        CHECK_EQ_INT(ir_last_code(), TJ_ERR_UNSUPPORTED);
        CHECK_HAS(tj_last_error(), "cpu image: compiled for ");
        CHECK_HAS(tj_last_error(), "; this machine is ");
        memcpy(bad, img, size);
        bad[tgt - 3] ^= 0x20; /* another backend's: "cpu" -> "Cpu" */
        CHECK(!jit_cpu_program_from_image(c->graph, bad, size));
        CHECK_EQ_INT(ir_last_code(), TJ_ERR_UNSUPPORTED);
        CHECK_HAS(tj_last_error(), "cpu image: written by the Cpu backend");
        memcpy(bad, img, size);
        memset(bad + cg + sizeof(uint32_t) * RT_CPU_WORDS + 20, 0x7f, 8); /* plan size: too big */
        CHECK(!jit_cpu_program_from_image(c->graph, bad, size));
        CHECK_EQ_INT(ir_last_code(), TJ_ERR_CORRUPT);
        CHECK_HAS(tj_last_error(), "cpu image: its plan lies past the end");
        free(bad);
    }
    free(img);
out:
    tj_release(x);
    tj_release(w);
    tj_function_free(f);
}

/* Another function's image for this graph is refused. */
static void other_graph(void) {
    tj_function *f = tj_function_new("dense", (void *)dense, 2, NULL);
    tj_function *g = tj_function_new("looped", (void *)looped, 2, NULL);
    tj_tensor *x = rand2(96, 96, 1), *w = rand2(96, 96, 2);
    tj_concrete *cf = concrete(f, x, w), *cg = concrete(g, x, w);
    size_t size = 0;
    unsigned char *img = cf ? jit_cpu_program_image(cf->prog, &size) : NULL;
    CHECK(img && cg);
    if (img && cg) {
        CHECK(!jit_cpu_program_from_image(cg->graph, img, size));
        CHECK_EQ_INT(ir_last_code(), TJ_ERR_CORRUPT);
        CHECK_HAS(tj_last_error(), "compiled for another graph");
    }
    free(img);
    /* not a CPU program: the interpreter's */
    rt_program *ip = cf ? rt_interp_new(cf->graph) : NULL;
    CHECK(ip && !jit_cpu_program_image(ip, &size));
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_UNSUPPORTED);
    if (ip)
        ip->vt->free(ip);
    tj_release(x);
    tj_release(w);
    tj_function_free(f);
    tj_function_free(g);
}

/* An object of a compiled function, copied (malloc'd). */
static unsigned char *an_object(size_t *size) {
    tj_function *f = tj_function_new("dense", (void *)dense, 2, NULL);
    tj_tensor *x = rand2(80, 80, 1), *w = rand2(80, 80, 2);
    tj_concrete *c = concrete(f, x, w);
    unsigned char *obj = NULL;
    if (c && jit_cpu_is_program(c->prog)) {
        const unsigned char *o = jit_cpu_shared_object(((cpu_prog *)c->prog)->shared, size);
        if (*size > 24 && memcmp(o, "TJO2", 4) == 0) { /* compiled in parts: the first object */
            uint64_t len;
            memcpy(&len, o + 8, 8);
            o += 8 + 8 * ((const uint32_t *)o)[1];
            *size = (size_t)len;
        }
        obj = malloc(*size);
        memcpy(obj, o, *size);
    }
    tj_release(x);
    tj_release(w);
    tj_function_free(f);
    return obj;
}

static void bad_objects(void) {
    size_t size = 0;
    unsigned char *obj = an_object(&size);
    CHECK(obj != NULL);
    if (!obj)
        return;
    const char *none[1] = {NULL};
    void *addr[1];
    rt_obj *o = rt_obj_load(obj, size, none, 0, addr);
    CHECK_MSG(o != NULL, "%s", tj_last_error());
    CHECK(rt_obj_mapped_bytes(o) > 0);
    rt_obj_free(o);
    unsigned char *bad = malloc(size);
    /* not ELF; a header only; every truncation */
    CHECK(!rt_obj_load("hello, world", 12, none, 0, addr));
    CHECK_HAS(tj_last_error(), "not an ELF object");
    for (size_t k = 0; k < size; k += k < 512 ? 1 : 37) {
        rt_obj *q = rt_obj_load(obj, k, none, 0, addr);
        CHECK_MSG(!q, "a %zu-byte prefix of a %zu-byte object linked", k, size);
        rt_obj_free(q);
    }
    /* a section table past the end */
    memcpy(bad, obj, size);
    uint64_t far = size + 4096;
    memcpy(bad + 0x28, &far, 8);
    CHECK(!rt_obj_load(bad, size, none, 0, addr));
    CHECK_HAS(tj_last_error(), "a bad section header table");
    /* a relocation type the loader does not handle; an undefined symbol */
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)obj;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(obj + eh->e_shoff);
    int did_rel = 0, did_sym = 0;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type == SHT_RELA && sh[i].sh_size && !did_rel) {
            memcpy(bad, obj, size);
            Elf64_Rela *r = (Elf64_Rela *)(bad + sh[i].sh_offset);
            r->r_info = ELF64_R_INFO(ELF64_R_SYM(r->r_info), 16); /* R_X86_64_DTPMOD64 */
            CHECK(!rt_obj_load(bad, size, none, 0, addr));
            CHECK_EQ_INT(ir_last_code(), TJ_ERR_UNSUPPORTED);
            CHECK_HAS(tj_last_error(), "relocation type 16 is not handled");
            did_rel = 1;
        }
        if (sh[i].sh_type == SHT_SYMTAB && !did_sym) {
            memcpy(bad, obj, size);
            const Elf64_Sym *sym = (const Elf64_Sym *)(obj + sh[i].sh_offset);
            char *str = (char *)bad + sh[sh[i].sh_link].sh_offset;
            for (size_t k = 1; k < sh[i].sh_size / sizeof *sym && !did_sym; k++)
                if (sym[k].st_shndx == SHN_UNDEF && sym[k].st_name) {
                    str[sym[k].st_name] = 'Q'; /* memset -> Qemset */
                    CHECK(!rt_obj_load(bad, size, none, 0, addr));
                    CHECK_HAS(tj_last_error(), "undefined symbol 'Q");
                    did_sym = 1;
                }
        }
    }
    CHECK(did_rel);
    /* a symbol asked for that the object lacks */
    const char *missing[1] = {"tj_no_such_kernel"};
    CHECK(!rt_obj_load(obj, size, missing, 1, addr));
    CHECK_HAS(tj_last_error(), "no symbol 'tj_no_such_kernel'");
    /* a container whose sizes run past its end */
    unsigned char box[24] = "TJO2";
    uint32_t two = 2;
    uint64_t big = 1000;
    memcpy(box + 4, &two, 4);
    memcpy(box + 8, &big, 8);
    CHECK(!rt_obj_load(box, sizeof box, none, 0, addr));
    CHECK_HAS(tj_last_error(), "malformed object container");
    free(bad);
    free(obj);
}

int main(void) {
    check_untiered();
    if (tj_backend_unavailable("cpu")) { /* images hold native code: none without LLVM */
        printf("skipped: %s\n", tj_backend_unavailable("cpu"));
        return 77;
    }
    round_trip("dense", (void *)dense, 96, 1);
    round_trip("dense_big", (void *)dense, 384, 0);
    round_trip("looped", (void *)looped, 48, 1);
    round_trip("convnet", (void *)convnet, 96, 1);
    other_graph();
    bad_objects();
    return check_done();
}
