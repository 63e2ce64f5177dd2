/* apply.c — the one entry every op goes through. It checks for NULL and error inputs (errors
 * are sticky: an op given an error tensor returns it), converts host scalars to the other
 * operand's dtype, then either records a node in the current trace or runs the reference kernel
 * eagerly. Shape and dtype rules live in ir_infer, so eager and traced code fail alike. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/grad.h"

/* A concrete 0-d numeric tensor converted to dtype `dt`, if exact; NULL otherwise. */
static tj_tensor *convert_scalar(const tj_tensor *s, int dt) {
    if (s->kind != RT_CONCRETE || s->rank != 0 || !ir_dtype_is_numeric(s->dtype) ||
        !ir_dtype_is_numeric(dt))
        return NULL;
    double v = tj_tensor_get_f64(s, 0);
    int64_t iv = s->dtype == TJ_I64 ? ((const int64_t *)s->data)[0] : (int64_t)v;
    tj_tensor *t = rt_tensor_alloc(dt, 0, NULL);
    if (!t)
        return NULL;
    switch (dt) {
    case TJ_F32:
        *(float *)t->data = (float)v;
        break;
    case TJ_F64:
        *(double *)t->data = v;
        break;
    case TJ_I32:
        if (v != floor(v) || v < INT32_MIN || v > INT32_MAX)
            goto inexact;
        *(int32_t *)t->data = (int32_t)iv;
        break;
    case TJ_I64:
        if (ir_dtype_is_float(s->dtype) && (v != floor(v) || fabs(v) > 9.2e18))
            goto inexact;
        *(int64_t *)t->data = iv;
        break;
    default: { /* the other integer widths: integral and inside the width's range */
        if (!ir_dtype_is_int(dt) || v != floor(v))
            goto inexact;
        int bits = 8 * (int)ir_dtype_size(dt);
        bool uns = ir_dtype_is_unsigned(dt);
        if (v < (uns ? 0 : -ldexp(1, bits - 1)) || v >= ldexp(1, uns ? bits : bits - 1))
            goto inexact;
        uint64_t u = uns && v >= 0x1p63 ? (uint64_t)v : (uint64_t)(int64_t)v;
        if (s->dtype == TJ_I64)
            u = (uint64_t)iv; /* exact where a double is not */
        switch (bits) {
        case 8:
            *(uint8_t *)t->data = (uint8_t)u;
            break;
        case 16:
            *(uint16_t *)t->data = (uint16_t)u;
            break;
        case 32:
            *(uint32_t *)t->data = (uint32_t)u;
            break;
        default:
            *(uint64_t *)t->data = u;
        }
        break;
    }
    }
    return t;
inexact:
    rt_release(t);
    return NULL;
}

static int is_host_scalar(const tj_tensor *t) {
    return t->kind == RT_CONCRETE && t->host_scalar && t->rank == 0;
}

/* bool < int32 (and the narrow ints) < int64 < float32 < float64, as Python's bool < int < float */
static int kind_rank(int dt) {
    static const int r[TJ_N_DTYPES] = {
        [TJ_BOOL] = 0, [TJ_I32] = 1, [TJ_I64] = 2, [TJ_F32] = 3, [TJ_F64] = 4, [TJ_STRING] = 5,
        [TJ_I8] = 1,   [TJ_U8] = 1,  [TJ_I16] = 1, [TJ_U16] = 1, [TJ_U32] = 1, [TJ_U64] = 2};
    return dt >= 0 && dt < TJ_N_DTYPES ? r[dt] : 6;
}

static int wants_promotion(int op) {
    unsigned f = ir_ops[op].flags;
    return (f & IR_F_EW) && ir_ops[op].n_in >= 2;
}

tj_tensor *api_apply(ir_node *proto, tj_tensor *const *in_args, uint32_t n_in) {
    const char *opname = ir_ops[proto->op].name;
    tj_tensor *conv[4] = {0};
    tj_tensor *stack_in[8];
    tj_tensor **in = n_in <= 8 ? stack_in : malloc(n_in * sizeof *in);
    tj_tensor *res = NULL;
    if (!in)
        return rt_scoped(rt_errorf(TJ_ERR_OOM, "%s: out of memory", opname));
    for (uint32_t k = 0; k < n_in; k++) {
        if (!in_args[k]) {
            res = rt_errorf(TJ_ERR_INVALID, "%s: argument %u is NULL", opname, k);
            goto done;
        }
        if (rt_is_freed(in_args[k], opname)) {
            res = rt_error_from_status(TJ_ERR_STATE);
            goto done;
        }
        if (in_args[k]->kind == RT_ERROR) {
            res = rt_retain(in_args[k]);
            goto done;
        }
        if (in_args[k]->kind == RT_TUPLE) {
            res = rt_errorf(TJ_ERR_INVALID, "%s: argument %u is a tuple, not a tensor", opname, k);
            goto done;
        }
        in[k] = in_args[k];
    }
    /* host scalars (tj_scalar_*, tj_static_*: the analogue of Python numbers in TF) take the
     * other operand's dtype; between two host scalars the lower kind takes the higher one's.
     * The rule looks at how a tensor was made, never at its data or at whether it is concrete,
     * so eager and traced code promote alike. */
    if (wants_promotion(proto->op) && n_in <= 4) {
        uint32_t first = proto->op == IR_OP_WHERE ? 1 : 0;
        for (uint32_t k = first; k < n_in; k++) {
            uint32_t o = first + (k == first ? 1 : 0);
            if (o >= n_in || in[k]->dtype == in[o]->dtype || !is_host_scalar(in[k]))
                continue;
            if (is_host_scalar(in[o]) && kind_rank(in[k]->dtype) > kind_rank(in[o]->dtype))
                continue; /* the other one converts to this one's dtype */
            conv[k] = convert_scalar(in[k], in[o]->dtype);
            if (conv[k])
                in[k] = conv[k];
        }
    }
    rt_trace *tr = api_trace_current();
    if (tr) {
        uint32_t ids[64], *pid = n_in <= 64 ? ids : malloc(n_in * sizeof *pid);
        if (!pid) {
            res = rt_errorf(TJ_ERR_OOM, "%s: out of memory", opname);
            goto done;
        }
        uint32_t id = IR_NONE;
        uint32_t k = 0;
        for (; k < n_in; k++)
            if ((pid[k] = api_trace_lift(tr, in[k])) == IR_NONE)
                break;
        if (k == n_in)
            id = ir_add(tr->g, proto, pid, n_in);
        if (id == IR_NONE) {
            res = rt_error_from_status(0);
            api_trace_fail(tr, ir_last_code());
        } else {
            res = api_symbolic(tr, id);
            if (api_tape_n_active)
                api_tape_on_op(ir_node_get(tr->g, id), in_args, in, n_in, pid, res);
        }
        if (pid != ids)
            free(pid);
        goto done;
    }
    for (uint32_t k = 0; k < n_in; k++) {
        if (in[k]->kind == RT_SYMBOLIC) {
            res = rt_errorf(TJ_ERR_STATE,
                            "%s: argument %u is a symbolic tensor outside its trace "
                            "(it escaped the traced function)",
                            opname, k);
            goto done;
        }
    }
    ir_node descs[8], *pdesc = n_in <= 8 ? descs : malloc(n_in * sizeof *pdesc);
    const ir_node *dptr[8], **pd = n_in <= 8 ? dptr : malloc(n_in * sizeof *pd);
    if (!pdesc || !pd) {
        res = rt_errorf(TJ_ERR_OOM, "%s: out of memory", opname);
    } else {
        for (uint32_t k = 0; k < n_in; k++) {
            rt_desc(in[k], &pdesc[k]);
            pd[k] = &pdesc[k];
        }
        proto->n_in = n_in;
        double t0 = RT_PROFILING() ? rt_profile_now() : 0;
        tj_status st = ir_infer(proto, pd, n_in);
        if (st) {
            res = rt_error_from_status(st);
        } else {
            tj_tensor *out = rt_kernel_output(proto);
            if (!out)
                res = rt_error_from_status(0);
            else if ((st = rt_ref_kernel(proto, in, out)) != TJ_OK) {
                rt_release(out);
                res = rt_error_from_status(st);
            } else if (RT_CHECKING_NUMERICS() && rt_numerics_first_bad(out, NULL) >= 0) {
                int is_nan = 0;
                int64_t at = rt_numerics_first_bad(out, &is_nan);
                st = rt_numerics_error("eagerly", opname, -1, out, at, is_nan, NULL);
                rt_release(out);
                res = rt_error_from_status(st);
            } else {
                res = out;
                if (t0) {
                    char d[96];
                    rt_profile_event("op", opname, t0, "\"eager\":1,\"out\":\"%s%s\"",
                                     ir_dtype_short(out->dtype),
                                     rt_profile_dims(d, sizeof d, out->rank, out->dims));
                }
                if (api_tape_n_active)
                    api_tape_on_op(proto, in_args, in, n_in, NULL, res);
            }
        }
    }
    if (pdesc != descs)
        free(pdesc);
    if (pd != dptr)
        free(pd);
done:
    for (int k = 0; k < 4; k++)
        rt_release(conv[k]);
    if (in != stack_in)
        free(in);
    return rt_scoped(res);
}
