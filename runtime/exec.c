/* exec.c — the one node step every executor shares: the interpreter runs every node through it,
 * a compiled program every node its backend did not generate (sources, variables, side effects,
 * reference kernels). What a node means when it runs is written here once, so a new kind of step
 * (a region, a profile event, a numerics check) is added in one place. */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

/* Runs a pure node's reference kernel on concrete inputs, re-inferring the shape from them when
 * the graph has unknown dims. */
static tj_tensor *run_kernel(const ir_node *n, tj_tensor **ins, int reinfer) {
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
    tj_tensor *out = rt_tensor_alloc(proto.dtype, proto.rank, proto.dims);
    if (!out)
        return NULL;
    if (rt_ref_kernel(&proto, ins, out) != TJ_OK) {
        tj_release(out);
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

tj_status rt_exec_node(const ir_graph *g, uint32_t i, const rt_exec_env *env, tj_tensor **vals,
                       tj_tensor **ins) {
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
        vals[i] = env->consts ? tj_retain(env->consts[i]) : rt_const_tensor(g, n);
        return vals[i] ? TJ_OK : ir_last_code();
    case IR_OP_PARAM:
        if ((uint64_t)slot >= env->n_args)
            return ir_errorf(TJ_ERR_INVALID, "%s: param %lld but only %u arguments", env->who,
                             (long long)slot, env->n_args);
        if ((st = check_param(env, n, env->args[slot], slot)))
            return st;
        vals[i] = tj_retain(env->args[slot]);
        return TJ_OK;
    case IR_OP_VAR_READ:
        if (!(v = bound(env, slot)))
            return ir_last_code();
        vals[i] = rt_variable_get(v);
        return TJ_OK;
    case IR_OP_ASSIGN:
        if (env->effects) {
            if (!(v = bound(env, slot)))
                return ir_last_code();
            if ((st = rt_variable_set(v, ins[0])))
                return st;
        }
        vals[i] = tj_retain(ins[0]);
        return TJ_OK;
    case IR_OP_PRINT:
        return env->effects ? rt_do_print(blob ? blob->data : "", ins, n->n_in) : TJ_OK;
    case IR_OP_HOST_CALLBACK:
        if (env->effects && blob && blob->size == 2 * sizeof(void *)) {
            void *const *fp = blob->data;
            return rt_do_callback(fp[0], fp[1], ins, n->n_in);
        }
        return TJ_OK;
    default:
        vals[i] = run_kernel(n, ins, env->reinfer);
        return vals[i] ? TJ_OK : ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
    }
}
