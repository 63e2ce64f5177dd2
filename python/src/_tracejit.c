/* _tracejit.c — the CPython extension under `import tracejit`, written over the public C API
 * (include/tracejit.h) and nothing else: a Tensor type holding one tj_tensor reference, the ops
 * as functions, and Function, a tj_function whose body calls a Python callable while it traces.
 *
 * Ownership: a Tensor owns one reference to its tj_tensor (tj_release in dealloc). Every C call
 * that returns a tensor runs with no scope open, so the reference it returns is the caller's and
 * the new Tensor takes it. Tensors expose their memory through the buffer protocol (read-only,
 * C-contiguous): np.asarray(t) and memoryview(t) share it with no copy, and keep t alive. A C
 * error becomes a Python exception of the class tracejit.errors names for its code. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "tracejit.h"

typedef struct {
    PyObject_HEAD tj_tensor *t;
    int64_t dims[8];
    Py_ssize_t shape[8], strides[8];
} Tensor;

static PyTypeObject TensorType;
static PyObject *error_classes; /* tracejit.errors' classes by code: a dict set at import */

/* ---- errors ---------------------------------------------------------------------------------- */
static PyObject *raise_status(tj_status code, const char *msg) {
    PyObject *cls = NULL;
    if (error_classes) {
        PyObject *key = PyLong_FromLong(code);
        cls = key ? PyDict_GetItem(error_classes, key) : NULL; /* borrowed */
        Py_XDECREF(key);
    }
    PyErr_SetString(cls ? cls : PyExc_RuntimeError, msg && *msg ? msg : "tracejit error");
    return NULL;
}

/* Wraps t (a new reference, taken); an error tensor raises and is released. */
static PyObject *wrap(tj_tensor *t) {
    if (!t)
        return raise_status(TJ_ERR_INVALID, tj_last_error());
    if (tj_status_of(t) != TJ_OK) {
        PyObject *r = raise_status(tj_status_of(t), tj_error_message(t));
        tj_release(t);
        return r;
    }
    Tensor *o = PyObject_New(Tensor, &TensorType);
    if (!o) {
        tj_release(t);
        return NULL;
    }
    o->t = t;
    return (PyObject *)o;
}

static PyObject *set_error_classes(PyObject *self, PyObject *d) {
    (void)self;
    if (!PyDict_Check(d))
        return PyErr_Format(PyExc_TypeError, "expected a dict of error classes");
    Py_XDECREF(error_classes);
    Py_INCREF(d);
    error_classes = d;
    Py_RETURN_NONE;
}

/* ---- conversions ----------------------------------------------------------------------------- */
static const char *buffer_format(tj_dtype dt) {
    switch (dt) {
    case TJ_F32:
        return "f";
    case TJ_F64:
        return "d";
    case TJ_I32:
        return "i";
    case TJ_I64:
        return "q";
    case TJ_BOOL:
        return "?";
    case TJ_I8:
        return "b";
    case TJ_U8:
        return "B";
    case TJ_I16:
        return "h";
    case TJ_U16:
        return "H";
    case TJ_U32:
        return "I";
    case TJ_U64:
        return "Q";
    case TJ_F16:
        return "e";
    default:
        return NULL;
    }
}

static int dtype_of_format(const char *f, Py_ssize_t itemsize) {
    if (f[0] == '<' || f[0] == '=' || f[0] == '@')
        f++;
    switch (f[0]) {
    case 'f':
        return TJ_F32;
    case 'd':
        return TJ_F64;
    case 'i':
        return itemsize == 4 ? TJ_I32 : -1;
    case 'l':
        return itemsize == 8 ? TJ_I64 : itemsize == 4 ? TJ_I32 : -1;
    case 'q':
        return TJ_I64;
    case '?':
        return TJ_BOOL;
    case 'b':
        return TJ_I8;
    case 'B':
        return TJ_U8;
    case 'h':
        return TJ_I16;
    case 'H':
        return TJ_U16;
    case 'I':
        return itemsize == 4 ? TJ_U32 : -1;
    case 'L':
        return itemsize == 8 ? TJ_U64 : itemsize == 4 ? TJ_U32 : -1;
    case 'Q':
        return TJ_U64;
    case 'e':
        return TJ_F16;
    default:
        return -1;
    }
}

/* A tensor from any object with the buffer protocol (a NumPy array, bytes of a memoryview),
 * copied; dtype < 0: the buffer's own. */
static tj_tensor *from_buffer(PyObject *obj, int dtype) {
    Py_buffer v;
    if (PyObject_GetBuffer(obj, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0) {
        /* strided (a transposed NumPy array): its values in order, through NumPy */
        PyErr_Clear();
        PyObject *np = PyImport_ImportModule("numpy");
        if (!np)
            return NULL;
        PyObject *c = PyObject_CallMethod(np, "ascontiguousarray", "O", obj);
        Py_DECREF(np);
        if (!c)
            return NULL;
        int r = PyObject_GetBuffer(c, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND);
        Py_DECREF(c); /* the buffer holds it */
        if (r < 0)
            return NULL;
    }
    int dt = dtype_of_format(v.format ? v.format : "B", v.itemsize);
    tj_tensor *t = NULL;
    if (dt < 0 || v.ndim > 8) {
        PyErr_Format(PyExc_TypeError, "tracejit: an array of format '%s' and %d dims is not taken",
                     v.format ? v.format : "B", v.ndim);
    } else {
        int64_t dims[8];
        for (int d = 0; d < v.ndim; d++)
            dims[d] = v.shape ? (int64_t)v.shape[d] : (int64_t)(v.len / v.itemsize);
        t = tj_tensor_from_data((tj_dtype)dt, v.ndim, dims, v.buf);
        if (t && dtype >= 0 && dtype != dt) {
            tj_tensor *c = tj_cast(t, (tj_dtype)dtype);
            tj_release(t);
            t = c;
        }
    }
    PyBuffer_Release(&v);
    return t;
}

/* A Python scalar as a 0-d tensor of dtype `like` (an int or float with a tensor operand takes
 * the tensor's dtype, as TensorFlow converts it), or its own kind when like < 0. */
static tj_tensor *scalar_of(PyObject *o, int like) {
    if (PyBool_Check(o))
        return like >= 0 ? tj_cast(tj_scalar_bool(o == Py_True), (tj_dtype)like)
                         : tj_scalar_bool(o == Py_True);
    if (PyLong_Check(o)) {
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        tj_tensor *s = like >= 0 && like != TJ_I32 ? tj_scalar_i64(v) : tj_scalar_i32((int32_t)v);
        if (like < 0 && (v > INT32_MAX || v < INT32_MIN)) {
            tj_release(s);
            s = tj_scalar_i64(v);
        }
        if (like >= 0 && (int)tj_tensor_dtype(s) != like) {
            tj_tensor *c = tj_cast(s, (tj_dtype)like);
            tj_release(s);
            s = c;
        }
        return s;
    }
    if (PyFloat_Check(o)) {
        double v = PyFloat_AsDouble(o);
        if (like == TJ_F64)
            return tj_scalar_f64(v);
        if (like >= 0 && like != TJ_F32) {
            tj_tensor *s = tj_scalar_f64(v), *c = tj_cast(s, (tj_dtype)like);
            tj_release(s);
            return c;
        }
        return tj_scalar_f32((float)v);
    }
    return NULL;
}

/* o as a tensor: a Tensor (a new reference), a Python scalar, or an object with the buffer
 * protocol; NULL with a TypeError otherwise. */
static tj_tensor *as_tensor(PyObject *o, int like) {
    if (PyObject_TypeCheck(o, &TensorType))
        return tj_retain(((Tensor *)o)->t);
    tj_tensor *t = scalar_of(o, like);
    if (t || PyErr_Occurred())
        return t;
    if (PyObject_CheckBuffer(o))
        return from_buffer(o, like);
    PyErr_Format(PyExc_TypeError, "tracejit: cannot make a tensor of %.100s", Py_TYPE(o)->tp_name);
    return NULL;
}

/* ---- Tensor ---------------------------------------------------------------------------------- */
static void tensor_dealloc(Tensor *self) {
    tj_release(self->t);
    PyObject_Free(self);
}

static PyObject *tensor_repr(Tensor *self) {
    char *s = tj_tensor_str(self->t);
    PyObject *r = PyUnicode_FromString(s ? s : "tj.Tensor(?)");
    free(s);
    return r;
}

static PyObject *tensor_shape(Tensor *self, void *closure) {
    (void)closure;
    int rank = tj_tensor_rank(self->t);
    const int64_t *d = tj_tensor_dims(self->t);
    PyObject *t = PyTuple_New(rank < 0 ? 0 : rank);
    for (int i = 0; t && i < rank; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(d[i]));
    return t;
}

static PyObject *tensor_dtype(Tensor *self, void *closure) {
    (void)closure;
    return PyUnicode_FromString(tj_dtype_name(tj_tensor_dtype(self->t)));
}

static int tensor_getbuffer(Tensor *self, Py_buffer *v, int flags) {
    const char *fmt = buffer_format(tj_tensor_dtype(self->t));
    const void *data = fmt ? tj_tensor_data(self->t) : NULL;
    if (!data && tj_tensor_numel(self->t) != 0) {
        PyErr_Format(PyExc_BufferError, "tracejit: this tensor's memory cannot be shared: %s",
                     fmt ? tj_last_error() : "its dtype has no buffer format");
        return -1;
    }
    if (flags & PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError, "tracejit: tensors are immutable (read-only buffers)");
        return -1;
    }
    int rank = tj_tensor_rank(self->t);
    const int64_t *d = tj_tensor_dims(self->t);
    size_t es = strcmp(fmt, "d") == 0 || strcmp(fmt, "q") == 0 || strcmp(fmt, "Q") == 0   ? 8
                : strcmp(fmt, "f") == 0 || strcmp(fmt, "i") == 0 || strcmp(fmt, "I") == 0 ? 4
                : strcmp(fmt, "h") == 0 || strcmp(fmt, "H") == 0 || strcmp(fmt, "e") == 0 ? 2
                                                                                          : 1;
    Py_ssize_t stride = (Py_ssize_t)es;
    for (int i = rank - 1; i >= 0; i--) {
        self->shape[i] = (Py_ssize_t)d[i];
        self->strides[i] = stride;
        stride *= (Py_ssize_t)d[i];
    }
    static const char empty[1] = {0};
    v->buf = (void *)(data ? data : empty);
    v->obj = (PyObject *)self;
    Py_INCREF(self);
    v->len = (Py_ssize_t)tj_tensor_numel(self->t) * (Py_ssize_t)es;
    v->readonly = 1;
    v->itemsize = (Py_ssize_t)es;
    v->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
    v->ndim = rank;
    v->shape = (flags & PyBUF_ND) ? self->shape : NULL;
    v->strides = (flags & PyBUF_STRIDES) ? self->strides : NULL;
    v->suboffsets = NULL;
    v->internal = NULL;
    return 0;
}

static PyBufferProcs tensor_buffer = {(getbufferproc)tensor_getbuffer, NULL};

typedef tj_tensor *(*binop)(tj_tensor *, tj_tensor *);

/* a (op) b with either side a Tensor and the other a tensor-like: the scalar takes the Tensor's
 * dtype. */
static PyObject *binary(PyObject *a, PyObject *b, binop f) {
    int like = PyObject_TypeCheck(a, &TensorType)   ? (int)tj_tensor_dtype(((Tensor *)a)->t)
               : PyObject_TypeCheck(b, &TensorType) ? (int)tj_tensor_dtype(((Tensor *)b)->t)
                                                    : -1;
    tj_tensor *x = as_tensor(a, like);
    tj_tensor *y = x ? as_tensor(b, like) : NULL;
    if (!x || !y) {
        tj_release(x);
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            Py_RETURN_NOTIMPLEMENTED;
        }
        return NULL;
    }
    tj_tensor *r = f(x, y);
    tj_release(x);
    tj_release(y);
    return wrap(r);
}

#define BINOP(name, fn)                                                                            \
    static PyObject *name(PyObject *a, PyObject *b) {                                              \
        return binary(a, b, fn);                                                                   \
    }
BINOP(t_add, tj_add)
BINOP(t_sub, tj_sub)
BINOP(t_mul, tj_mul)
BINOP(t_div, tj_div)
BINOP(t_floordiv, tj_floordiv)
BINOP(t_mod, tj_mod)
BINOP(t_matmul, tj_matmul)

static PyObject *t_pow(PyObject *a, PyObject *b, PyObject *m) {
    if (m != Py_None)
        Py_RETURN_NOTIMPLEMENTED;
    return binary(a, b, tj_pow);
}

static PyObject *t_neg(PyObject *a) {
    return wrap(tj_neg(((Tensor *)a)->t));
}

static PyObject *t_abs(PyObject *a) {
    return wrap(tj_abs(((Tensor *)a)->t));
}

static PyObject *t_richcompare(PyObject *a, PyObject *b, int op) {
    switch (op) {
    case Py_EQ:
        return binary(a, b, tj_equal);
    case Py_NE:
        return binary(a, b, tj_not_equal);
    case Py_LT:
        return binary(a, b, tj_less);
    case Py_LE:
        return binary(a, b, tj_less_equal);
    case Py_GT:
        return binary(a, b, tj_greater);
    case Py_GE:
        return binary(a, b, tj_greater_equal);
    default:
        Py_RETURN_NOTIMPLEMENTED;
    }
}

/* A tensor as a Python bool: only a concrete one-element tensor (a symbolic one is an error,
 * as TensorFlow's "using a tf.Tensor as a Python bool is not allowed" inside a function). */
static int t_bool(PyObject *a) {
    tj_tensor *t = ((Tensor *)a)->t;
    if (tj_tensor_numel(t) != 1) {
        PyErr_SetString(PyExc_ValueError, "tracejit: the truth value of a tensor of more or "
                                          "fewer than one element is ambiguous");
        return -1;
    }
    double v = tj_tensor_get_f64(t, 0);
    if (tj_last_error()[0] && !tj_tensor_data(t)) {
        raise_status(TJ_ERR_STATE, "tracejit: a symbolic tensor used as a Python bool (its "
                                   "value is not known while the function traces: use tj.cond "
                                   "or tj.where)");
        return -1;
    }
    return v != 0;
}

static PyObject *t_float(PyObject *a) {
    tj_tensor *t = ((Tensor *)a)->t;
    if (tj_tensor_numel(t) != 1)
        return PyErr_Format(PyExc_TypeError, "tracejit: only one-element tensors convert to "
                                             "Python scalars");
    return PyFloat_FromDouble(tj_tensor_get_f64(t, 0));
}

static PyObject *t_int(PyObject *a) {
    PyObject *f = t_float(a);
    PyObject *r = f ? PyNumber_Long(f) : NULL;
    Py_XDECREF(f);
    return r;
}

static PyNumberMethods tensor_number = {
    .nb_add = t_add,
    .nb_subtract = t_sub,
    .nb_multiply = t_mul,
    .nb_true_divide = t_div,
    .nb_floor_divide = t_floordiv,
    .nb_remainder = t_mod,
    .nb_power = t_pow,
    .nb_matrix_multiply = t_matmul,
    .nb_negative = t_neg,
    .nb_absolute = t_abs,
    .nb_bool = t_bool,
    .nb_float = t_float,
    .nb_int = t_int,
};

static PyObject *tensor_numpy(PyObject *self, PyObject *unused) {
    (void)unused;
    PyObject *np = PyImport_ImportModule("numpy");
    PyObject *r = np ? PyObject_CallMethod(np, "array", "O", self) : NULL; /* a copy, as TF's */
    Py_XDECREF(np);
    return r;
}

static PyMethodDef tensor_methods[] = {
    {"numpy", tensor_numpy, METH_NOARGS, "The values as a NumPy array (a copy)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)tensor_shape, NULL, "The dims, a tuple.", NULL},
    {"dtype", (getter)tensor_dtype, NULL, "The dtype's name ('float32', 'int32', ...).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TensorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tracejit.Tensor",
    .tp_basicsize = sizeof(Tensor),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_repr = (reprfunc)tensor_repr,
    .tp_as_number = &tensor_number,
    .tp_as_buffer = &tensor_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A tracejit tensor: immutable, on the host or a device.",
    .tp_richcompare = t_richcompare,
    .tp_methods = tensor_methods,
    .tp_getset = tensor_getset,
};

/* ---- module functions ------------------------------------------------------------------------ */
static int dtype_arg(PyObject *o) {
    if (!o || o == Py_None)
        return -1;
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    for (int dt = 0; s && dt < TJ_N_DTYPES; dt++)
        if (strcmp(s, tj_dtype_name((tj_dtype)dt)) == 0)
            return dt;
    PyErr_Format(PyExc_TypeError, "tracejit: unknown dtype %R", o);
    return -2;
}

static PyObject *m_constant(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"value", "dtype", NULL};
    PyObject *v, *d = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", names, &v, &d))
        return NULL;
    int dt = dtype_arg(d);
    if (dt == -2)
        return NULL;
    if (!PyObject_TypeCheck(v, &TensorType) && !PyObject_CheckBuffer(v) && !PyFloat_Check(v) &&
        !PyLong_Check(v)) { /* nested lists: through NumPy, as TensorFlow converts them */
        PyObject *np = PyImport_ImportModule("numpy");
        PyObject *a = np ? PyObject_CallMethod(np, "asarray", "O", v) : NULL;
        Py_XDECREF(np);
        if (!a)
            return NULL;
        if (dt < 0) { /* Python floats are float32 and ints int32, as TensorFlow converts them */
            PyObject *kind = PyObject_GetAttrString(a, "dtype");
            PyObject *name = kind ? PyObject_GetAttrString(kind, "name") : NULL;
            const char *n = name ? PyUnicode_AsUTF8(name) : NULL;
            dt = n && !strcmp(n, "float64") ? TJ_F32 : n && !strcmp(n, "int64") ? TJ_I32 : -1;
            Py_XDECREF(name);
            Py_XDECREF(kind);
            PyErr_Clear();
        }
        tj_tensor *t = from_buffer(a, dt);
        Py_DECREF(a);
        return t ? wrap(t) : NULL;
    }
    tj_tensor *t = as_tensor(v, dt);
    if (t && dt >= 0 && (int)tj_tensor_dtype(t) != dt) {
        tj_tensor *c = tj_cast(t, (tj_dtype)dt);
        tj_release(t);
        t = c;
    }
    return t ? wrap(t) : NULL;
}

static int dims_arg(PyObject *o, int64_t *dims, int *rank) {
    PyObject *seq = PySequence_Fast(o, "tracejit: a shape is a sequence of ints");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > 8) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "tracejit: at most 8 dims");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        dims[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (dims[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    *rank = (int)n;
    Py_DECREF(seq);
    return 0;
}

static PyObject *filled(PyObject *args, PyObject *kw, int one) {
    static char *names[] = {"shape", "dtype", NULL};
    PyObject *s, *d = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", names, &s, &d))
        return NULL;
    int dt = dtype_arg(d), rank;
    int64_t dims[8];
    if (dt == -2 || dims_arg(s, dims, &rank) < 0)
        return NULL;
    tj_dtype t = dt < 0 ? TJ_F32 : (tj_dtype)dt;
    return wrap(one ? tj_ones(t, rank, dims) : tj_zeros(t, rank, dims));
}

static PyObject *m_zeros(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    return filled(args, kw, 0);
}

static PyObject *m_ones(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    return filled(args, kw, 1);
}

typedef tj_tensor *(*unop)(tj_tensor *);
static PyObject *unary(PyObject *o, unop f) {
    tj_tensor *x = as_tensor(o, -1);
    if (!x)
        return NULL;
    tj_tensor *r = f(x);
    tj_release(x);
    return wrap(r);
}

#define UNARY(name, fn)                                                                            \
    static PyObject *name(PyObject *self, PyObject *o) {                                           \
        (void)self;                                                                                \
        return unary(o, fn);                                                                       \
    }
UNARY(m_exp, tj_exp)
UNARY(m_log, tj_log)
UNARY(m_tanh, tj_tanh)
UNARY(m_relu, tj_relu)
UNARY(m_sqrt, tj_sqrt)

#define BINARY_FN(name, fn)                                                                        \
    static PyObject *name(PyObject *self, PyObject *args) {                                        \
        (void)self;                                                                                \
        PyObject *a, *b;                                                                           \
        if (!PyArg_ParseTuple(args, "OO", &a, &b))                                                 \
            return NULL;                                                                           \
        PyObject *r = binary(a, b, fn);                                                            \
        if (r == Py_NotImplemented) {                                                              \
            Py_DECREF(r);                                                                          \
            return PyErr_Format(PyExc_TypeError, "tracejit: " #fn "'s operands are not tensors");  \
        }                                                                                          \
        return r;                                                                                  \
    }
BINARY_FN(m_matmul, tj_matmul)
BINARY_FN(m_maximum, tj_maximum)
BINARY_FN(m_minimum, tj_minimum)

static PyObject *m_reduce_sum(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"x", "axis", "keepdims", NULL};
    PyObject *x, *ax = Py_None;
    int keep = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Op", names, &x, &ax, &keep))
        return NULL;
    int axes[8], n = 0;
    if (ax != Py_None) {
        int64_t d[8];
        int rank;
        if (PyLong_Check(ax)) {
            d[0] = PyLong_AsLongLong(ax), rank = 1;
        } else if (dims_arg(ax, d, &rank) < 0) {
            return NULL;
        }
        for (int i = 0; i < rank; i++)
            axes[n++] = (int)d[i];
    }
    tj_tensor *t = as_tensor(x, -1);
    if (!t)
        return NULL;
    tj_tensor *r = tj_sum(t, n, n ? axes : NULL, keep);
    tj_release(t);
    return wrap(r);
}

static PyObject *m_cast(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *d;
    if (!PyArg_ParseTuple(args, "OO", &x, &d))
        return NULL;
    int dt = dtype_arg(d);
    if (dt < 0)
        return dt == -2 ? NULL : PyErr_Format(PyExc_TypeError, "tracejit: cast needs a dtype");
    tj_tensor *t = as_tensor(x, -1);
    if (!t)
        return NULL;
    tj_tensor *r = tj_cast(t, (tj_dtype)dt);
    tj_release(t);
    return wrap(r);
}

/* ---- Function: a tj_function whose body calls a Python callable ------------------------------ */
typedef struct {
    PyObject_HEAD tj_function *f;
    PyObject *fn; /* the Python callable */
    int nargs;
} Function;

/* An exception the body raised while tracing, (type, value, tb): per thread, since a trace runs
 * on the calling thread and other threads call the same function meanwhile (the GIL is let go
 * around tj_call). Touched with the GIL held. */
static _Thread_local PyObject *trace_exc;

static PyTypeObject FunctionType;

/* The body tj_function_new_body calls while it traces (with the GIL held: tj_call runs on the
 * calling Python thread): the arguments wrapped, the callable called, its result (a Tensor or a
 * tuple of them) returned as a new reference. A Python exception is kept for the caller and the
 * trace fails with an error tensor (a failed trace is not cached: the next call traces again). */
/* A static argument (tj_is_static: a Python value baked into the trace) as that Python value. */
static PyObject *static_value(const tj_tensor *t) {
    switch (tj_tensor_dtype(t)) {
    case TJ_BOOL:
        return PyBool_FromLong(tj_tensor_get_f64(t, 0) != 0);
    case TJ_I64:
        return PyLong_FromLongLong(*(const int64_t *)tj_tensor_data(t));
    case TJ_F64:
        return PyFloat_FromDouble(*(const double *)tj_tensor_data(t));
    case TJ_STRING: {
        const tj_string *s = tj_tensor_data(t);
        return PyUnicode_DecodeUTF8(s->data, (Py_ssize_t)s->len, "surrogateescape");
    }
    default:
        return PyErr_Format(PyExc_TypeError, "tracejit: a static argument of dtype %s",
                            tj_dtype_name(tj_tensor_dtype(t)));
    }
}

static tj_tensor *body(int n, tj_tensor *const *args, void *user) {
    Function *self = user;
    PyGILState_STATE gil = PyGILState_Ensure(); /* tj_call runs with the GIL released */
    PyObject *a = PyTuple_New(n);
    for (int i = 0; a && i < n; i++) {
        PyObject *v = NULL;
        if (tj_is_static(args[i])) {
            v = static_value(args[i]);
        } else {
            Tensor *o = PyObject_New(Tensor, &TensorType);
            if (o)
                o->t = tj_retain(args[i]);
            v = (PyObject *)o;
        }
        if (!v) {
            Py_CLEAR(a);
            break;
        }
        PyTuple_SET_ITEM(a, i, v);
    }
    PyObject *r = a ? PyObject_CallObject(self->fn, a) : NULL;
    Py_XDECREF(a);
    tj_tensor *out = NULL;
    if (r && PyObject_TypeCheck(r, &TensorType)) {
        out = tj_retain(((Tensor *)r)->t);
    } else if (r && PyTuple_Check(r)) {
        Py_ssize_t k = PyTuple_GET_SIZE(r);
        tj_tensor *items[64];
        int ok = k <= 64;
        for (Py_ssize_t i = 0; ok && i < k; i++) {
            PyObject *it = PyTuple_GET_ITEM(r, i);
            ok = PyObject_TypeCheck(it, &TensorType);
            if (ok)
                items[i] = ((Tensor *)it)->t;
        }
        if (ok)
            out = tj_tuple((int)k, items);
        else
            PyErr_SetString(PyExc_TypeError, "tracejit: a function returns a Tensor or a tuple of "
                                             "at most 64 Tensors");
    } else if (r == Py_None) {
        out = NULL; /* no results */
    } else if (r) {
        PyErr_Format(PyExc_TypeError, "tracejit: a function returns a Tensor, not %.100s",
                     Py_TYPE(r)->tp_name);
    }
    Py_XDECREF(r);
    if (PyErr_Occurred()) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        Py_XDECREF(trace_exc);
        trace_exc = PyTuple_Pack(3, t ? t : Py_None, v ? v : Py_None, tb ? tb : Py_None);
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(tb);
        PyGILState_Release(gil);
        return tj_error_new(TJ_ERR_INVALID, "a Python exception in the traced function");
    }
    PyGILState_Release(gil);
    return out;
}

/* A call's argument: a Tensor or an array as a tensor; a Python bool, int, float or str as a
 * static argument, keyed by its value (a new value traces again, as tf.function does, S4). */
static tj_tensor *argument(PyObject *o) {
    if (PyBool_Check(o))
        return tj_static_bool(o == Py_True);
    if (PyLong_Check(o)) {
        long long v = PyLong_AsLongLong(o);
        return v == -1 && PyErr_Occurred() ? NULL : tj_static_i64(v);
    }
    if (PyFloat_Check(o))
        return tj_static_f64(PyFloat_AsDouble(o));
    if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8(o);
        return s ? tj_static_str(s) : NULL;
    }
    return as_tensor(o, -1);
}

static PyObject *function_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *names[] = {"fn", "nargs", "name", "backend", NULL};
    PyObject *fn;
    int nargs;
    const char *name = NULL, *backend = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|zz", names, &fn, &nargs, &name, &backend))
        return NULL;
    if (!PyCallable_Check(fn) || nargs < 0 || nargs > 64)
        return PyErr_Format(PyExc_TypeError, "tracejit: Function(fn, nargs): a callable and "
                                             "0 to 64 arguments");
    Function *self = (Function *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    Py_INCREF(fn);
    self->fn = fn;
    self->nargs = nargs;
    tj_function_options o = {.backend = backend};
    self->f = tj_function_new_body(name ? name : "fn", body, nargs, self, &o);
    if (!self->f) {
        Py_DECREF(self);
        return raise_status(TJ_ERR_INVALID, tj_last_error());
    }
    return (PyObject *)self;
}

static void function_dealloc(Function *self) {
    tj_function_free(self->f);
    Py_XDECREF(self->fn);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *function_call(Function *self, PyObject *args, PyObject *kw) {
    if (kw && PyDict_Size(kw))
        return PyErr_Format(PyExc_TypeError, "tracejit: keyword arguments are not taken yet");
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n != self->nargs)
        return PyErr_Format(PyExc_TypeError, "tracejit: the function takes %d arguments, got %zd",
                            self->nargs, n);
    tj_tensor *in[64];
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(in[i] = argument(PyTuple_GET_ITEM(args, i)))) {
            for (Py_ssize_t j = 0; j < i; j++)
                tj_release(in[j]);
            return NULL;
        }
    Py_CLEAR(trace_exc);
    tj_tensor *r;
    Py_BEGIN_ALLOW_THREADS /* compiled calls of other threads run meanwhile; a trace's body takes
                              the GIL back to run Python */
        r = tj_call(self->f, (int)n, in);
    Py_END_ALLOW_THREADS for (Py_ssize_t i = 0; i < n; i++) tj_release(in[i]);
    if (trace_exc) { /* the traced Python code raised: that exception, not the trace's error */
        tj_release(r);
        PyObject *e = trace_exc;
        trace_exc = NULL;
        PyObject *et = PyTuple_GET_ITEM(e, 0), *ev = PyTuple_GET_ITEM(e, 1),
                 *tb = PyTuple_GET_ITEM(e, 2);
        Py_INCREF(et);
        Py_INCREF(ev);
        if (tb != Py_None)
            Py_INCREF(tb);
        PyErr_Restore(et, ev, tb == Py_None ? NULL : tb);
        Py_DECREF(e);
        return NULL;
    }
    if (r && tj_status_of(r) == TJ_OK && tj_tuple_size(r) >= 0) {
        int k = tj_tuple_size(r);
        PyObject *t = PyTuple_New(k);
        for (int i = 0; t && i < k; i++) {
            PyObject *it = wrap(tj_retain(tj_tuple_get(r, i)));
            if (!it) {
                Py_CLEAR(t);
                break;
            }
            PyTuple_SET_ITEM(t, i, it);
        }
        tj_release(r);
        return t;
    }
    return wrap(r);
}

static PyObject *function_tracing_count(Function *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(tj_function_trace_count(self->f));
}

static PyMethodDef function_methods[] = {
    {"experimental_get_tracing_count", (PyCFunction)function_tracing_count, METH_NOARGS,
     "How many times the function has traced."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FunctionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tracejit._Function",
    .tp_basicsize = sizeof(Function),
    .tp_dealloc = (destructor)function_dealloc,
    .tp_call = (ternaryfunc)function_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A traced, compiled function (tj_function) of a Python callable.",
    .tp_methods = function_methods,
    .tp_new = function_new,
};

static PyMethodDef module_methods[] = {
    {"constant", (PyCFunction)(void (*)(void))m_constant, METH_VARARGS | METH_KEYWORDS,
     "constant(value, dtype=None): a tensor of a value (a copy)."},
    {"zeros", (PyCFunction)(void (*)(void))m_zeros, METH_VARARGS | METH_KEYWORDS,
     "zeros(shape, dtype='float32')"},
    {"ones", (PyCFunction)(void (*)(void))m_ones, METH_VARARGS | METH_KEYWORDS,
     "ones(shape, dtype='float32')"},
    {"reduce_sum", (PyCFunction)(void (*)(void))m_reduce_sum, METH_VARARGS | METH_KEYWORDS,
     "reduce_sum(x, axis=None, keepdims=False)"},
    {"exp", m_exp, METH_O, "exp(x)"},
    {"log", m_log, METH_O, "log(x)"},
    {"tanh", m_tanh, METH_O, "tanh(x)"},
    {"relu", m_relu, METH_O, "relu(x)"},
    {"sqrt", m_sqrt, METH_O, "sqrt(x)"},
    {"matmul", m_matmul, METH_VARARGS, "matmul(a, b)"},
    {"maximum", m_maximum, METH_VARARGS, "maximum(a, b)"},
    {"minimum", m_minimum, METH_VARARGS, "minimum(a, b)"},
    {"cast", m_cast, METH_VARARGS, "cast(x, dtype)"},
    {"_set_error_classes", set_error_classes, METH_O, "(internal) errors by code"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tracejit",
                                    "tracejit's C extension (the public C API underneath).", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__tracejit(void) {
    if (PyType_Ready(&TensorType) < 0 || PyType_Ready(&FunctionType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&TensorType);
    Py_INCREF(&FunctionType);
    if (PyModule_AddObject(m, "Tensor", (PyObject *)&TensorType) < 0 ||
        PyModule_AddObject(m, "_Function", (PyObject *)&FunctionType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "ERR_INVALID", TJ_ERR_INVALID);
    PyModule_AddIntConstant(m, "ERR_DTYPE", TJ_ERR_DTYPE);
    PyModule_AddIntConstant(m, "ERR_SHAPE", TJ_ERR_SHAPE);
    PyModule_AddIntConstant(m, "ERR_RUNTIME", TJ_ERR_RUNTIME);
    PyModule_AddIntConstant(m, "ERR_OOM", TJ_ERR_OOM);
    PyModule_AddIntConstant(m, "ERR_UNSUPPORTED", TJ_ERR_UNSUPPORTED);
    PyModule_AddIntConstant(m, "ERR_STATE", TJ_ERR_STATE);
    return m;
}
