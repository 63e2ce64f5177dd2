/* tensor_array.c — tf.TensorArray for C: a tuple (data [size, ...], written bool[size]) marked as
 * a tensor array, with functional updates (write returns a new array, as TensorFlow's does).
 * Being a tuple of tensors, an array can be a loop variable of tj_while_loop, tj_for_range and
 * tj_scan, and a function result. Writes and reads are the UPDATE_INDEX and READ_INDEX ops, so
 * eager and traced code behave alike; a read of an index never written, or out of range, is a
 * run-time error naming the op and the index. The size is fixed at creation. */
#include <string.h>

#include "api/api.h"

static tj_tensor *make(tj_tensor *data, tj_tensor *written) {
    tj_tensor *items[2] = {data, written};
    tj_tensor *t = tj_tuple(2, items);
    if (t->kind == RT_TUPLE)
        t->tensor_array = 1;
    return t;
}

/* ta's data and mask; an error tensor (scoped) when ta is not a tensor array. */
static tj_tensor *parts(const char *op, tj_tensor *ta, tj_tensor **data, tj_tensor **written) {
    *data = *written = NULL;
    if (!ta)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: the tensor array is NULL", op));
    if (rt_is_freed(ta, op))
        return rt_scoped(rt_error_from_status(TJ_ERR_STATE));
    if (ta->kind == RT_ERROR)
        return rt_scoped(rt_retain(ta));
    if (ta->kind != RT_TUPLE || !ta->tensor_array || ta->n_items != 2)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID,
                                   "%s: not a tensor array (make one with "
                                   "tj_tensor_array_new)",
                                   op));
    *data = ta->items[0];
    *written = ta->items[1];
    return NULL;
}

/* i as an int64 scalar (a host scalar of any integer kind, or a tensor). */
static tj_tensor *index_of(const char *op, tj_tensor *i) {
    char d[128];
    if (!i)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: the index is NULL", op));
    if (i->kind == RT_ERROR || i->kind == RT_TUPLE)
        return i->kind == RT_ERROR
                   ? rt_scoped(rt_retain(i))
                   : rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: the index is a tuple", op));
    if (i->rank != 0 || !ir_dtype_is_index(i->dtype))
        return rt_scoped(
            rt_errorf(TJ_ERR_DTYPE, "%s: the index must be an int32 or int64 scalar, got %s%s", op,
                      ir_dtype_name(i->dtype), ir_fmt_dims(d, sizeof d, i->rank, i->dims)));
    return i;
}

tj_tensor *tj_tensor_array_new(tj_dtype dt, int64_t size, int elem_rank, const int64_t *elem_dims) {
    if (elem_rank < 0 || elem_rank + 1 > TJ_MAX_RANK || (elem_rank > 0 && !elem_dims))
        return rt_scoped(
            rt_errorf(TJ_ERR_SHAPE, "tensor_array_new: bad element shape (rank %d)", elem_rank));
    int64_t dims[TJ_MAX_RANK];
    dims[0] = size;
    if (elem_rank)
        memcpy(dims + 1, elem_dims, (size_t)elem_rank * sizeof *dims);
    if (ir_check_shape("tensor_array_new", elem_rank + 1, dims, false))
        return rt_scoped(rt_error_from_status(0));
    tj_scope_begin();
    tj_tensor *data = dt == TJ_STRING ? tj_tensor_empty(dt, elem_rank + 1, dims)
                                      : tj_zeros(dt, elem_rank + 1, dims);
    tj_tensor *r = tj_keep(make(data, tj_zeros(TJ_BOOL, 1, dims)));
    tj_scope_end();
    return r;
}

tj_tensor *tj_tensor_array_write(tj_tensor *ta, tj_tensor *index, tj_tensor *value) {
    tj_tensor *data, *written, *err = parts("tensor_array_write", ta, &data, &written);
    if (err)
        return err;
    tj_tensor *i = index_of("tensor_array_write", index);
    if (i->kind == RT_ERROR)
        return i;
    tj_scope_begin();
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_UPDATE_INDEX;
    tj_tensor *d = api_apply(&p, (tj_tensor *[]){data, i, value}, 3);
    tj_tensor *w = api_apply(&p, (tj_tensor *[]){written, i, tj_scalar_bool(1)}, 3);
    tj_tensor *r = tj_keep(d->kind == RT_ERROR ? d : w->kind == RT_ERROR ? w : make(d, w));
    tj_scope_end();
    return r;
}

tj_tensor *tj_tensor_array_read(tj_tensor *ta, tj_tensor *index) {
    tj_tensor *data, *written, *err = parts("tensor_array_read", ta, &data, &written);
    if (err)
        return err;
    tj_tensor *i = index_of("tensor_array_read", index);
    if (i->kind == RT_ERROR)
        return i;
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_READ_INDEX;
    return api_apply(&p, (tj_tensor *[]){data, written, i}, 3);
}

tj_tensor *tj_tensor_array_stack(tj_tensor *ta) {
    tj_tensor *data, *written, *err = parts("tensor_array_stack", ta, &data, &written);
    if (err)
        return err;
    return rt_scoped(rt_retain(data));
}

tj_tensor *tj_tensor_array_unstack(tj_tensor *values) {
    if (!values || values->kind == RT_ERROR)
        return values ? rt_scoped(rt_retain(values))
                      : rt_scoped(rt_errorf(TJ_ERR_INVALID, "tensor_array_unstack: NULL values"));
    if (values->kind == RT_TUPLE || values->rank < 1)
        return rt_scoped(rt_errorf(TJ_ERR_SHAPE,
                                   "tensor_array_unstack: values need a leading axis (rank %d)",
                                   values->kind == RT_TUPLE ? -1 : values->rank));
    tj_scope_begin();
    tj_tensor *r = tj_keep(make(values, tj_ones(TJ_BOOL, 1, values->dims)));
    tj_scope_end();
    return r;
}

int64_t tj_tensor_array_size(const tj_tensor *ta) {
    if (!ta || ta->kind != RT_TUPLE || !ta->tensor_array || ta->n_items != 2) {
        ir_errorf(TJ_ERR_INVALID, "tensor_array_size: not a tensor array");
        return -1;
    }
    return ta->items[0]->dims[0];
}
