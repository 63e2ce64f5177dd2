/* exec.c — the one node step every executor shares: the interpreter runs every node through it,
 * a compiled program every node its backend did not generate (sources, variables, side effects,
 * reference kernels). What a node means when it runs is written here once, so a new kind of step
 * (a region, a profile event, a numerics check) is added in one place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"

/* Runs a pure node's reference kernel on concrete inputs, re-inferring the shape from them when
 * the graph has unknown dims. */
static tj_tensor *run_kernel(const ir_node *n, tj_tensor **ins, int reinfer, tj_tensor *reuse) {
    ir_node proto = *n;
    if (reinfer) {
        ir_node descs[8], *pd = n->n_in <= 8 ? descs : malloc(n->n_in * sizeof *pd);
        const ir_node *ptr[8], **pp = n->n_in <= 8 ? ptr : malloc(n->n_in * sizeof *pp);
        tj_status st =
            (!pd || !pp) ? ir_errorf(TJ_ERR_OOM, "%s: out of memory", ir_ops[n->op].name) : TJ_OK;
        for (uint32_t k = 0; !st && k < n->n_in; k++) {
            rt_desc(ins[k], &pd[k]);
            pp[k] = &pd[k];
        }
        if (!st)
            st = ir_infer(&proto, pp, n->n_in);
        if (pd != descs)
            free(pd);
        if (pp != ptr)
            free(pp);
        if (st)
            return NULL;
    }
    /* a reshape of the executor's own intermediate (one reference: not an argument the caller
     * holds, not a cached constant) in a buffer tracejit owns is a view of it, not a copy:
     * tensors are immutable, and tj_call_into refuses an output whose buffer is shared */
    tj_tensor *x = n->n_in == 1 ? ins[0] : NULL;
    if ((n->op == IR_OP_RESHAPE || n->op == IR_OP_SQUEEZE || n->op == IR_OP_EXPAND_DIMS) && x &&
        x->kind == RT_CONCRETE && x->buf && !x->buf->release && atomic_load(&x->rc) == 1 &&
        x->dtype == proto.dtype && x->numel == ir_numel(proto.rank, proto.dims))
        return rt_tensor_view(x, proto.rank, proto.dims);
    tj_tensor *out = reuse ? rt_retain(reuse) : rt_kernel_output(&proto);
    if (!out)
        return NULL;
    if (rt_ref_kernel(&proto, ins, out) != TJ_OK) {
        rt_release(out);
        return NULL;
    }
    return out;
}

static tj_status check_param(const rt_exec_env *env, const ir_node *n, const tj_tensor *a,
                             int64_t slot) {
    if (!env->check_params)
        return TJ_OK;
    if (a && a->kind == RT_CONCRETE && a->dtype == n->dtype && a->rank == n->rank &&
        memcmp(a->dims, n->dims, (size_t)n->rank * sizeof n->dims[0]) == 0)
        return TJ_OK;
    char want[200];
    return ir_errorf(TJ_ERR_SIGNATURE, "%s: argument %lld is not %s%s", env->who, (long long)slot,
                     ir_dtype_short(n->dtype), ir_fmt_dims(want, sizeof want, n->rank, n->dims));
}

static tj_variable *bound(const rt_exec_env *env, int64_t slot) {
    if (!env->caps || slot < 0 || !env->caps[slot]) {
        ir_errorf(TJ_ERR_STATE, "%s: variable slot %lld is not bound", env->who, (long long)slot);
        return NULL;
    }
    return env->caps[slot];
}

/* ---- control flow: regions run as programs, the loop itself here ---------------------------- */
tj_status rt_regions_new(const ir_graph *g, rt_program *(*compile)(const ir_graph *, void *),
                         void *ctx, rt_program ***out) {
    *out = NULL;
    bool any = false;
    for (uint32_t i = 0; i < g->n_nodes && !any; i++)
        any = (ir_ops[g->nodes[i].op].flags & IR_F_CF) != 0;
    if (!any)
        return TJ_OK;
    rt_program **r = calloc(2 * (size_t)g->n_nodes, sizeof *r);
    if (!r)
        return ir_errorf(TJ_ERR_OOM, "regions: out of memory");
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < 2 && (ir_ops[n->op].flags & IR_F_CF); k++) {
            const ir_graph *sub = ir_region(g, n, k);
            if (sub && !(r[2 * i + k] = compile(sub, ctx))) {
                rt_regions_free(r, g);
                return ir_last_code();
            }
        }
    }
    *out = r;
    return TJ_OK;
}

void rt_regions_free(rt_program **regions, const ir_graph *g) {
    if (!regions)
        return;
    for (uint32_t i = 0; i < 2 * g->n_nodes; i++)
        if (regions[i])
            regions[i]->vt->free(regions[i]);
    free(regions);
}

typedef struct region_call {
    rt_program *p;
    tj_variable **caps;
    const char *op;
    tj_tensor **outs; /* room for the region's outputs */
    uint32_t n_outs;
} region_call;

/* Runs a region on args; its outputs land in rc->outs (new references). */
static tj_status region_run(region_call *rc, tj_tensor *const *args, uint32_t n) {
    for (uint32_t k = 0; k < rc->n_outs; k++)
        rc->outs[k] = NULL;
    tj_status st = rc->p->vt->run(rc->p, args, n, rc->caps, rc->outs);
    if (st)
        for (uint32_t k = 0; k < rc->n_outs; k++) {
            rt_release(rc->outs[k]);
            rc->outs[k] = NULL;
        }
    return st;
}

static void release_all(tj_tensor **v, uint32_t n) {
    for (uint32_t k = 0; k < n; k++) {
        rt_release(v[k]);
        v[k] = NULL;
    }
}

/* A region failed at iteration `it` (-1: not a loop): the error names the op and iteration. */
static tj_status region_failed(const char *op, int64_t it, tj_status st) {
    char msg[900];
    snprintf(msg, sizeof msg, "%s", ir_last_error());
    if (it < 0)
        return ir_errorf(st, "%s", msg);
    return ir_errorf(st, "%s: iteration %lld: %s", op, (long long)it, msg);
}

static bool truthy(const tj_tensor *t) {
    return t && t->kind == RT_CONCRETE && t->numel == 1 && tj_tensor_get_f64(t, 0) != 0;
}

/* One time step of SCAN's sequences: rows t of each x (copies). */
static tj_status slice_rows(tj_tensor *const *xs, uint32_t n, int64_t t, tj_tensor **out) {
    for (uint32_t k = 0; k < n; k++) {
        const tj_tensor *x = xs[k];
        tj_tensor *r = rt_tensor_alloc_uninit(x->dtype, x->rank - 1, x->dims + 1);
        if (!r) {
            release_all(out, k);
            return ir_last_code();
        }
        size_t row = (size_t)r->numel * ir_dtype_size(x->dtype);
        if (x->dtype == TJ_STRING) {
            const tj_string *s = (const tj_string *)x->data + t * r->numel;
            tj_string *d = r->data;
            for (int64_t e = 0; e < r->numel; e++) {
                d[e].data = rt_strdup_len(s[e].data ? s[e].data : "", s[e].len);
                d[e].len = d[e].data ? s[e].len : 0;
            }
        } else if (row) {
            memcpy(r->data, (const char *)x->data + (size_t)t * row, row);
        }
        out[k] = r;
    }
    return TJ_OK;
}

static tj_status exec_cf(const ir_graph *g, uint32_t i, const rt_exec_env *env, tj_tensor **ins,
                         tj_tensor **res) {
    const ir_node *n = ir_node_get(g, i);
    const char *op = ir_ops[n->op].name;
    rt_program *r0 = env->regions ? env->regions[2 * i] : NULL;
    rt_program *r1 = env->regions ? env->regions[2 * i + 1] : NULL;
    uint32_t nr = ir_cf_n_results(g, n);
    if (!r0 || (!r1 && (n->op == IR_OP_COND || n->op == IR_OP_WHILE)))
        return ir_errorf(TJ_ERR_STATE, "%s: %s has no region programs", env->who, op);
    region_call rc = {.p = r0, .caps = env->caps, .op = op, .outs = res, .n_outs = nr};
    tj_status st = TJ_OK;
    if (n->op != IR_OP_COND && (st = rt_loop_raw(g, i, r0, r1, ins, res)) != RT_RAW_REDO)
        return st; /* the loop ran on the regions' raw forms, allocating nothing per iteration */
    st = TJ_OK;
    switch (n->op) {
    case IR_OP_COND:
        rc.p = truthy(ins[0]) ? r0 : r1;
        if ((st = region_run(&rc, ins + 1, n->n_in - 1)))
            return region_failed(op, -1, st);
        return TJ_OK;
    case IR_OP_WHILE: {
        /* the carried values (the first nr operands, then each body's results), then the
         * invariants, which every iteration reads as they are */
        tj_tensor *flag = NULL;
        uint32_t na = n->n_in;
        tj_tensor *arg_stack[16], **args = na <= 16 ? arg_stack : calloc(na, sizeof *args);
        if (!args)
            return ir_errorf(TJ_ERR_OOM, "while: out of memory");
        memcpy(args, ins, na * sizeof *args);
        for (uint32_t k = 0; k < nr; k++)
            res[k] = rt_retain(ins[k]);
        region_call rcond = {.p = r0, .caps = env->caps, .op = op, .outs = &flag, .n_outs = 1};
        tj_tensor *next_stack[16], **next = nr <= 16 ? next_stack : calloc(nr, sizeof *next);
        if (!next)
            return ir_errorf(TJ_ERR_OOM, "while: out of memory");
        rc.p = r1;
        rc.outs = next;
        for (int64_t it = 0; !st; it++) {
            if (n->a.i[0] > 0 && it >= n->a.i[0])
                break; /* maximum_iterations: the loop stops there, as tf.while_loop */
            memcpy(args, res, nr * sizeof *args);
            if ((st = region_run(&rcond, args, na))) {
                st = region_failed(op, it, st);
                break;
            }
            bool go = truthy(flag);
            rt_release(flag);
            flag = NULL;
            if (!go)
                break;
            if ((st = region_run(&rc, args, na))) {
                st = region_failed(op, it, st);
                break;
            }
            release_all(res, nr);
            memcpy(res, next, nr * sizeof *res);
        }
        if (next != next_stack)
            free(next);
        if (args != arg_stack)
            free(args);
        if (st)
            release_all(res, nr);
        return st;
    }
    case IR_OP_FOR: {
        int64_t start = *(const int64_t *)ins[0]->data, limit = *(const int64_t *)ins[1]->data;
        int64_t delta = *(const int64_t *)ins[2]->data;
        if (delta == 0)
            return ir_errorf(TJ_ERR_RUNTIME, "for: delta is 0 (range(%lld, %lld, 0))",
                             (long long)start, (long long)limit);
        uint32_t na = n->n_in - 2; /* i, carried..., invariants... */
        tj_tensor *arg_stack[17], **args = na <= 17 ? arg_stack : calloc(na, sizeof *args);
        tj_tensor *next_stack[16], **next = nr <= 16 ? next_stack : calloc(nr, sizeof *next);
        if (!args || !next) {
            if (args != arg_stack)
                free(args);
            if (next != next_stack)
                free(next);
            return ir_errorf(TJ_ERR_OOM, "for: out of memory");
        }
        for (uint32_t k = 0; k < nr; k++)
            res[k] = rt_retain(ins[3 + k]);
        memcpy(args + 1 + nr, ins + 3 + nr, (na - 1 - nr) * sizeof *args);
        rc.outs = next;
        int64_t it = 0;
        for (int64_t v = start; delta > 0 ? v < limit : v > limit; it++) {
            tj_tensor *idx = rt_tensor_alloc_uninit(TJ_I64, 0, NULL);
            if (!idx) {
                st = ir_last_code();
                break;
            }
            *(int64_t *)idx->data = v;
            args[0] = idx;
            memcpy(args + 1, res, nr * sizeof *res);
            st = region_run(&rc, args, na);
            rt_release(idx);
            if (st) {
                st = region_failed(op, it, st);
                break;
            }
            release_all(res, nr);
            memcpy(res, next, nr * sizeof *res);
            if (__builtin_add_overflow(v, delta, &v))
                break;
        }
        if (args != arg_stack)
            free(args);
        if (next != next_stack)
            free(next);
        if (st)
            release_all(res, nr);
        return st;
    }
    case IR_OP_SCAN: {
        uint32_t nc = (uint32_t)n->a.i[0], ninv = (uint32_t)n->a.i[1];
        uint32_t nx = n->n_in - nc - ninv, ny = nr - nc;
        int64_t T = ins[nc]->dims[0];
        tj_tensor **carry = calloc(nc + 1, sizeof *carry),
                  **args = calloc(n->n_in + 1, sizeof *args);
        tj_tensor **step = calloc(nr + 1, sizeof *step);
        if (!carry || !args || !step) {
            free(carry);
            free(args);
            free(step);
            return ir_errorf(TJ_ERR_OOM, "scan: out of memory");
        }
        for (uint32_t k = 0; k < nc; k++)
            carry[k] = rt_retain(ins[k]);
        memcpy(args + nc + nx, ins + nc + nx, ninv * sizeof *args); /* invariants */
        for (uint32_t k = 0; k < ny; k++) { /* the stacked ys, allocated as the node's results */
            ir_node d;
            ir_cf_result(g, n, nc + k, &d);
            d.dims[0] = T;
            if (!(res[nc + k] = rt_tensor_alloc(d.dtype, d.rank, d.dims))) {
                st = ir_last_code();
                break;
            }
        }
        rc.outs = step;
        for (int64_t t = 0; !st && t < T; t++) {
            memcpy(args, carry, nc * sizeof *args);
            if ((st = slice_rows(ins + nc, nx, t, args + nc)))
                break;
            st = region_run(&rc, args, n->n_in);
            release_all(args + nc, nx);
            if (st) {
                st = region_failed(op, t, st);
                break;
            }
            release_all(carry, nc);
            memcpy(carry, step, nc * sizeof *carry);
            for (uint32_t k = 0; k < ny && !st; k++) { /* y_t into row t of its stack */
                tj_tensor *y = step[nc + k], *ys = res[nc + k];
                if (!rt_on_host(y)) { /* a GPU region's: the stack is the host's */
                    tj_tensor *h = rt_tensor_to_device(y, rt_device_host());
                    if (!h) {
                        st = ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
                        break;
                    }
                    rt_release(y);
                    step[nc + k] = y = h;
                }
                size_t row = (size_t)y->numel * ir_dtype_size(y->dtype);
                if (y->dtype == TJ_STRING) {
                    tj_string *d = (tj_string *)ys->data + t * y->numel;
                    const tj_string *s = y->data;
                    for (int64_t e = 0; e < y->numel; e++) {
                        d[e].data = rt_strdup_len(s[e].data ? s[e].data : "", s[e].len);
                        d[e].len = d[e].data ? s[e].len : 0;
                    }
                } else if (row) {
                    memcpy((char *)ys->data + (size_t)t * row, y->data, row);
                }
                rt_release(y);
                step[nc + k] = NULL;
            }
        }
        if (st) {
            release_all(carry, nc);
            release_all(res + nc, ny);
            release_all(step + nc, ny); /* a copy back failed midway */
        } else {
            memcpy(res, carry, nc * sizeof *res);
        }
        free(carry);
        free(args);
        free(step);
        return st;
    }
    default:
        return ir_errorf(TJ_ERR_INVALID, "%s: not a control-flow op", op);
    }
}

tj_status rt_exec_node(const ir_graph *g, uint32_t i, const rt_exec_env *env, tj_tensor **vals,
                       tj_tensor **ins, tj_tensor *reuse) {
    const ir_node *n = ir_node_get(g, i);
    const uint32_t *in = ir_inputs(g, n);
    for (uint32_t k = 0; k < n->n_in; k++)
        ins[k] = vals[in[k]];
    const ir_blob *blob = ir_blob_get(g, n->a.blob);
    int64_t slot = n->a.i[0];
    tj_variable *v;
    tj_status st;
    switch (n->op) {
    case IR_OP_CONST:
        vals[i] = env->consts ? rt_retain(env->consts[i]) : rt_const_tensor(g, n);
        return vals[i] ? TJ_OK : ir_last_code();
    case IR_OP_PARAM:
        if ((uint64_t)slot >= env->n_args)
            return ir_errorf(TJ_ERR_INVALID, "%s: param %lld but only %u arguments", env->who,
                             (long long)slot, env->n_args);
        if ((st = check_param(env, n, env->args[slot], slot)))
            return st;
        if (!rt_on_host(env->args[slot]) &&
            (!env->device || rt_buffer_device(env->args[slot]->buf) != env->device))
            return ir_errorf(TJ_ERR_INVALID, "%s: argument %lld is on %s; this program runs on %s",
                             env->who, (long long)slot,
                             rt_buffer_device(env->args[slot]->buf)->name,
                             (env->device ? env->device : rt_device_host())->name);
        vals[i] = rt_retain(env->args[slot]);
        return TJ_OK;
    case IR_OP_VAR_READ:
        if (!(v = bound(env, slot)))
            return ir_last_code();
        vals[i] = env->device ? rt_variable_get_on(v, env->device) : rt_variable_get(v);
        return vals[i] ? (vals[i]->kind == RT_ERROR ? vals[i]->code : TJ_OK) : ir_last_code();
    case IR_OP_ASSIGN:
        if (env->effects) {
            if (!(v = bound(env, slot)))
                return ir_last_code();
            if ((st = env->device ? rt_variable_set_device(v, ins[0]) : rt_variable_set(v, ins[0])))
                return st;
        }
        vals[i] = rt_retain(ins[0]);
        return TJ_OK;
    case IR_OP_PRINT:
        return env->effects ? rt_do_print(blob ? blob->data : "", ins, n->n_in) : TJ_OK;
    case IR_OP_HOST_CALLBACK:
        if (env->effects && blob && blob->size == 2 * sizeof(void *)) {
            void *const *fp = blob->data;
            return rt_do_callback(fp[0], fp[1], ins, n->n_in);
        }
        return TJ_OK;
    case IR_OP_GET:
        if (!ins[0] || ins[0]->kind != RT_TUPLE || slot < 0 || slot >= ins[0]->n_items)
            return ir_errorf(TJ_ERR_STATE, "%s: get %lld of a value that has no such result",
                             env->who, (long long)slot);
        vals[i] = rt_retain(ins[0]->items[slot]);
        return TJ_OK;
    case IR_OP_COND:
    case IR_OP_WHILE:
    case IR_OP_FOR:
    case IR_OP_SCAN: {
        uint32_t nr = ir_cf_n_results(g, n);
        tj_tensor *stack_res[16] = {0}, **res = nr <= 16 ? stack_res : calloc(nr + 1, sizeof *res);
        if (!res)
            return ir_errorf(TJ_ERR_OOM, "%s: out of memory", ir_ops[n->op].name);
        if (env->effects || !ir_node_has_effect(g, n)) { /* values-only runs skip effects */
            st = exec_cf(g, i, env, ins, res);
        } else {
            st = ir_errorf(TJ_ERR_UNSUPPORTED,
                           "%s: a control-flow node with side effects is not "
                           "evaluated without them",
                           ir_ops[n->op].name);
        }
        if (!st) {
            vals[i] = rt_tuple_new((int)nr, res);
            st = vals[i]->kind == RT_ERROR ? vals[i]->code : TJ_OK;
        }
        release_all(res, nr);
        if (res != stack_res)
            free(res);
        return st;
    }
    default:
        vals[i] = run_kernel(n, ins, env->reinfer, reuse);
        return vals[i] ? TJ_OK : ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
    }
}
