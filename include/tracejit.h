/* tracejit.h — the public API of tracejit, a JIT-compiling graph runtime in C.
 *
 * CONVENTIONS
 *
 * Ownership.
 *   - Tensors are reference counted. Every function that returns a tj_tensor* returns a NEW
 *     reference. If a scope is open (tj_scope_begin) that reference belongs to the innermost
 *     scope and is released by tj_scope_end; otherwise it belongs to the caller, who releases it
 *     with tj_release. tj_keep(t) moves one reference to the enclosing scope (or to the caller).
 *   - Arguments are BORROWED: no function takes ownership of the tensors it is given.
 *   - What `_new` returns the caller frees with `_free`; `_free(NULL)` is a no-op. Strings returned
 *     as `char *` are malloc'd and freed by the caller with free(); `const char *` are borrowed.
 *
 * Errors.
 *   - Nothing aborts, exits or prints on its own. An op given bad input returns an ERROR TENSOR
 *     (never NULL) carrying a code and a message naming the op, the argument and the shapes/dtypes
 *     ("matmul: inner dimensions differ: [3,2] x [3,2]"). Every op given an error tensor returns it
 *     (sticky errors), so a chain is checked once: tj_status_of(t) / tj_error_message(t).
 *   - Calls that return no tensor return tj_status (TJ_OK = 0, negative on error) and leave the
 *     message in a thread-local buffer read by tj_last_error().
 *   - Misuse that is cheap to detect is reported, not undefined: a tensor released twice (by hand
 *     and by its scope) meets a poisoned header and is reported through tj_last_error and the
 *     "misuse" log topic (TJ_LOG=misuse) while it is among the last 1024 headers its thread
 *     released; a freed tj_function or tj_variable handle is recognised for any number of frees
 *     (their addresses are never reused). A tensor released on another thread, or long ago, is
 *     not detected.
 *
 * Threads.
 *   - Tensors are immutable once built and may be read from many threads. Reference counts are
 *     atomic. Scopes and the trace state are per thread. Calling one tj_function from many threads
 *     is safe. Variables serialise their updates.
 *
 * Modes.
 *   - Outside a trace an op computes at once (eager). While a function is being traced, every op
 *     records a graph node instead and returns a symbolic tensor. The same C code serves both.
 *     Host code that reads a symbolic tensor's value (tj_tensor_get_f64, tj_tensor_data,
 *     tj_tensor_values_str) fails the trace: the value is not known until the graph runs; decide
 *     on values inside the graph (tj_where).
 *
 * EXAMPLE
 */
/* clang-format off */
/*
 *   #include <tracejit.h>
 *   static tj_tensor *dense(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
 *       return tj_relu(tj_add(tj_matmul(x, w), b));   // intermediates belong to the trace scope
 *   }
 *   int main(void) {
 *       tj_tensor *(*fast)(tj_tensor *, tj_tensor *, tj_tensor *) =
 *           tj_jit_compile((void *)dense, 3, NULL);
 *       int64_t d[2] = {2, 2};
 *       float one[4] = {1, 1, 1, 1};
 *       tj_tensor *x = tj_tensor_from_data(TJ_F32, 2, d, one);
 *       tj_tensor *y = fast(x, x, x);   // 1st call per signature: trace + optimize + compile
 *       if (tj_status_of(y))
 *           fprintf(stderr, "%s\n", tj_error_message(y));
 *       else
 *           tj_tensor_fprint(stdout, y); // tj.Tensor([[3 3] [3 3]], shape=(2, 2), dtype=float32)
 *       tj_release(y);
 *       tj_release(x);
 *       tj_jit_free((void *)fast);
 *   }
 */
/* clang-format on */
#ifndef TRACEJIT_H
#define TRACEJIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TJ_BUILDING) && defined(__GNUC__)
#define TJ_API __attribute__((visibility("default")))
#else
#define TJ_API
#endif

#define TJ_VERSION_MAJOR 0
#define TJ_VERSION_MINOR 1
#define TJ_VERSION_PATCH 0
#define TJ_MAX_RANK 8
/* The most elements a tensor may hold (2^40): every constructor and op checks its result's
 * element count against it, so counts and byte sizes never overflow. */
#define TJ_MAX_NUMEL ((int64_t)1 << 40)

/* ---- status ---------------------------------------------------------------------------------- */
typedef enum tj_status_code {
    TJ_OK = 0,
    TJ_ERR_INVALID = -1,     /* bad argument: NULL, out of range, unknown option */
    TJ_ERR_DTYPE = -2,       /* wrong dtype for an op or a signature */
    TJ_ERR_SHAPE = -3,       /* shapes do not fit (broadcasting, rank, dims) */
    TJ_ERR_OOM = -4,         /* allocation failed */
    TJ_ERR_STATE = -5,       /* misuse of state: variable on a later trace, freed function, ... */
    TJ_ERR_SIGNATURE = -6,   /* input does not match a concrete function or input signature */
    TJ_ERR_RUNTIME = -7,     /* a kernel failed at run time (index out of range, ...) */
    TJ_ERR_IO = -8,          /* file or cache I/O */
    TJ_ERR_UNSUPPORTED = -9, /* not implemented for this dtype/backend yet */
    TJ_ERR_CORRUPT = -10,    /* a corrupt file or cache entry */
} tj_status_code;
typedef int tj_status;

/* The message of the last failing tj_status-returning call on this thread (borrowed). */
TJ_API const char *tj_last_error(void);
/* A static name for a status code ("TJ_ERR_SHAPE"). */
TJ_API const char *tj_status_name(tj_status s);
/* For frontends and embedders built on this header: sets this thread's tj_last_error message
 * and returns code (the message may quote tj_last_error() itself, to wrap it). */
TJ_API tj_status tj_set_error(tj_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- dtypes and shapes ----------------------------------------------------------------------- */
typedef enum tj_dtype {
    TJ_F32 = 0,
    TJ_F64 = 1,
    TJ_I32 = 2,
    TJ_I64 = 3,
    TJ_BOOL = 4,   /* one byte, 0 or 1 */
    TJ_STRING = 5, /* variable-length byte strings, elements are tj_string */
    /* integer widths ONNX models use (appended: the codes above are in saved files). Signed ones
     * wrap like int32/int64; unsigned ones wrap modulo 2^bits, compare and divide unsigned. */
    TJ_I8 = 6,
    TJ_U8 = 7,
    TJ_I16 = 8,
    TJ_U16 = 9,
    TJ_U32 = 10,
    TJ_U64 = 11,
    /* storage types: cast (rounding to nearest even) and the data-movement ops (reshape,
     * transpose, slice, concat, gather, where...) take them; arithmetic casts to float32 first */
    TJ_F16 = 12,  /* IEEE binary16 */
    TJ_BF16 = 13, /* bfloat16: float32's exponent, 7 fraction bits */
    TJ_N_DTYPES
} tj_dtype;

/* One element of a TJ_STRING tensor. `data` is NUL-terminated (len excludes the NUL). */
typedef struct tj_string {
    size_t len;
    char *data;
} tj_string;

TJ_API const char *tj_dtype_name(tj_dtype dt); /* "float32", "int32", ... (static) */
TJ_API size_t tj_dtype_size(tj_dtype dt); /* bytes per element (sizeof(tj_string) for strings) */

/* A tensor spec: dtype and dims, -1 for an unknown dimension. For a static argument, set
 * `static_value` (borrowed) and leave the rest zero. */
typedef struct tj_spec {
    tj_dtype dtype;
    int rank;
    int64_t dims[TJ_MAX_RANK];
    struct tj_tensor *static_value;
} tj_spec;

/* ---- tensors --------------------------------------------------------------------------------- */
typedef struct tj_tensor tj_tensor;

/* Every constructor and op checks its result's shape: rank <= TJ_MAX_RANK, dims >= 0, the product
 * of the non-zero dims <= TJ_MAX_NUMEL; anything else is a TJ_ERR_SHAPE error tensor.
 * Copies `data` (numel elements of dtype; for TJ_STRING an array of `const char *`). */
TJ_API tj_tensor *tj_tensor_from_data(tj_dtype dt, int rank, const int64_t *dims, const void *data);
/* Wraps `data` without copying; `release(user)` is called when the last reference goes.
 * `data` must be aligned to the element size (an error tensor otherwise; 64 bytes is best for
 * speed) and outlive the tensor. */
TJ_API tj_tensor *tj_tensor_borrow(tj_dtype dt, int rank, const int64_t *dims, void *data,
                                   void (*release)(void *user), void *user);
/* tj_tensor_borrow for data that never changes again (a model's weights): a function that
 * captures the tensor as a constant shares `data` instead of copying and keeps it, so
 * release(user) runs when the last tensor, graph or compiled program holding it is gone (not
 * only the tensors). tj_call_into refuses it as an output. Not for TJ_STRING. On an error
 * (an error tensor: NULL, misaligned data, a bad shape) release is not called and the caller
 * still owns data. */
TJ_API tj_tensor *tj_tensor_adopt(tj_dtype dt, int rank, const int64_t *dims, const void *data,
                                  void (*release)(void *user), void *user);
/* An uninitialised (zeroed) tensor of the given dtype and shape. */
TJ_API tj_tensor *tj_tensor_empty(tj_dtype dt, int rank, const int64_t *dims);

TJ_API tj_tensor *tj_scalar_f32(float v);
TJ_API tj_tensor *tj_scalar_f64(double v);
TJ_API tj_tensor *tj_scalar_i32(int32_t v);
TJ_API tj_tensor *tj_scalar_i64(int64_t v);
TJ_API tj_tensor *tj_scalar_bool(int v);
TJ_API tj_tensor *tj_scalar_str(const char *s); /* NULL: an error tensor */

/* Static arguments: host values baked into a trace and keyed by value (S4). Eagerly they act as
 * 0-d tensors (f64 / i64 / bool / string). */
TJ_API tj_tensor *tj_static_i64(int64_t v);
TJ_API tj_tensor *tj_static_f64(double v);
TJ_API tj_tensor *tj_static_bool(int v);
TJ_API tj_tensor *tj_static_str(const char *s);
TJ_API int tj_is_static(const tj_tensor *t);

/* A tuple of results (multiple outputs). Items are retained by the tuple. */
TJ_API tj_tensor *tj_tuple(int n, tj_tensor *const *items);
TJ_API int tj_tuple_size(const tj_tensor *t); /* -1 if not a tuple */
/* Item i, borrowed; an error tensor gives itself (errors stay sticky through a tuple_get);
 * NULL for anything else that is not a tuple, or i out of range. */
TJ_API tj_tensor *tj_tuple_get(const tj_tensor *t, int i);

TJ_API tj_tensor *tj_retain(tj_tensor *t); /* +1 reference, returns t; NULL-safe */
TJ_API void tj_release(tj_tensor *t);      /* -1 reference; NULL-safe */

TJ_API tj_dtype tj_tensor_dtype(const tj_tensor *t);
TJ_API int tj_tensor_rank(const tj_tensor *t);
TJ_API const int64_t *tj_tensor_dims(const tj_tensor *t); /* borrowed, rank entries */
TJ_API int64_t tj_tensor_numel(const tj_tensor *t);
/* Host data of a concrete tensor (borrowed, valid while t lives); NULL for symbolic/error. On a
 * symbolic tensor of an open trace it also fails that trace (see Modes above). */
TJ_API const void *tj_tensor_data(const tj_tensor *t);
TJ_API int tj_tensor_is_symbolic(const tj_tensor *t);
/* Element i (row-major) converted to double; NAN on bad input. Convenience for tests/demos. On a
 * symbolic tensor of an open trace it also fails that trace. */
TJ_API double tj_tensor_get_f64(const tj_tensor *t, int64_t i);

/* ---- devices ---------------------------------------------------------------------------------
 * A tensor's memory is on a device: "cpu" (the host), or "cuda:N", an NVIDIA GPU reached through
 * the CUDA driver, opened at run time (the library runs where there is none; TJ_CUDA_DRIVER names
 * another driver library). "cuda" alone is "cuda:0". Eager ops, functions of the host backends
 * (cpu, interp) and variables' public calls read host memory: a GPU input is an error naming the
 * op and the device. Functions of the "cuda" backend take host or GPU arguments and leave their
 * results on the GPU (tj_function_options.output_device). Reading a GPU tensor's values
 * (tj_tensor_get_f64, tj_tensor_str) copies them to the host; tj_tensor_data refuses, since its
 * pointer would be the GPU's. */
/* NULL when device is usable here; otherwise why not, a sentence (static, or valid until the next
 * call on this thread): an unknown name, no driver, no GPU (the driver's error), no such
 * ordinal. */
TJ_API const char *tj_device_unavailable(const char *device);
/* How many devices of kind "cpu" (1) or "cuda" (the GPUs; 0 without a driver or GPU). */
TJ_API int tj_device_count(const char *kind);
/* Waits until the work queued on `device` ("cuda:0"; "cpu": nothing to wait for) is done, as
 * torch.cuda.synchronize: a GPU function's call returns once its kernels are queued. TJ_OK, or
 * the error a kernel met (an illegal address...), or an unknown or unavailable device. */
TJ_API tj_status tj_device_synchronize(const char *device);
/* t's values on device: t itself (a new reference) when it is there, else a copy (scoped like any
 * new tensor). An error tensor naming the device and why it cannot be used, for strings off the
 * host, and while tracing (placement inside a traced function is the backend's). */
TJ_API tj_tensor *tj_to_device(tj_tensor *t, const char *device);
/* "cpu" or "cuda:N" for a concrete tensor (static); NULL for anything else. */
TJ_API const char *tj_tensor_device(const tj_tensor *t);

/* Text form. Concrete: `tj.Tensor(2, shape=(), dtype=int32)` (on a GPU: `..., device=cuda:0)`,
 * its values copied to the host); symbolic:
 * `Tensor("a:0", shape=(), dtype=int32)`; error: `Error(TJ_ERR_SHAPE: ...)`. Caller frees. */
TJ_API char *tj_tensor_str(const tj_tensor *t);
TJ_API void tj_tensor_fprint(FILE *f, const tj_tensor *t); /* tj_tensor_str + newline */
/* Only the values: `[4 1]`, `2.2`, `aa` (floats positional unless the magnitude needs an
 * exponent: `1e+20`, `1e-07`). Caller frees. On a symbolic tensor of an open trace it returns
 * "<symbolic>" and fails that trace. */
TJ_API char *tj_tensor_values_str(const tj_tensor *t);

/* TJ_OK for a good tensor; a negative code for an error tensor or NULL. (DESIGN.md sketches this
 * as tj_status(t); in C that name is taken by the status type, hence _of.) */
TJ_API tj_status tj_status_of(const tj_tensor *t);
TJ_API const char *tj_error_message(const tj_tensor *t); /* borrowed; "" if not an error */
/* A new error tensor (for host callbacks and frontends). `code` should be negative; anything
 * else becomes TJ_ERR_INVALID. */
TJ_API tj_tensor *tj_error_new(tj_status code, const char *fmt, ...);

/* ---- scopes ---------------------------------------------------------------------------------- */
TJ_API void tj_scope_begin(void);
/* TensorFlow's init_scope: between tj_init_scope_begin and tj_init_scope_end ops run eagerly even
 * inside a trace, on concrete tensors, and give concrete tensors (used by the trace, they are
 * constants of its graph). For values a trace needs before it can go on: state made once, or a
 * frontend's static shape arithmetic (an ONNX Reshape's target from Shape and Gather). Pairs
 * nest (up to 64 deep); per thread. tj_init_scope_end without a begin does nothing. */
TJ_API void tj_init_scope_begin(void);
TJ_API void tj_init_scope_end(void);
/* Releases every reference the innermost scope owns. */
TJ_API void tj_scope_end(void);
/* Moves one reference of t out of the innermost scope to the enclosing one (or to the caller
 * when there is none). With no scope open it does nothing (the caller owns t already). */
TJ_API tj_tensor *tj_keep(tj_tensor *t);

/* ---- ops (eager outside a trace, recorded inside one) ---------------------------------------- */
/* unary */
TJ_API tj_tensor *tj_neg(tj_tensor *x);
TJ_API tj_tensor *tj_abs(tj_tensor *x);
TJ_API tj_tensor *tj_sign(tj_tensor *x);
TJ_API tj_tensor *tj_exp(tj_tensor *x);
TJ_API tj_tensor *tj_log(tj_tensor *x);
TJ_API tj_tensor *tj_sqrt(tj_tensor *x);
TJ_API tj_tensor *tj_rsqrt(tj_tensor *x);
TJ_API tj_tensor *tj_tanh(tj_tensor *x);
TJ_API tj_tensor *tj_sigmoid(tj_tensor *x);
TJ_API tj_tensor *tj_relu(tj_tensor *x);
TJ_API tj_tensor *tj_sin(tj_tensor *x);
TJ_API tj_tensor *tj_cos(tj_tensor *x);
TJ_API tj_tensor *tj_atan(tj_tensor *x);
TJ_API tj_tensor *tj_asin(tj_tensor *x); /* NaN outside [-1, 1], as C's asin */
TJ_API tj_tensor *tj_acos(tj_tensor *x);
TJ_API tj_tensor *tj_erf(tj_tensor *x); /* the error function, 2/sqrt(pi) * int_0^x exp(-t^2) */
TJ_API tj_tensor *tj_floor(tj_tensor *x);
TJ_API tj_tensor *tj_ceil(tj_tensor *x);
TJ_API tj_tensor *tj_round(tj_tensor *x); /* half to even, as TensorFlow */
TJ_API tj_tensor *tj_logical_not(tj_tensor *x);
TJ_API tj_tensor *tj_isnan(tj_tensor *x);
TJ_API tj_tensor *tj_isinf(tj_tensor *x);
/* binary, NumPy broadcasting; both operands must have the same dtype (use tj_cast), except for
 * host scalars: a tensor made by tj_scalar_* or tj_static_* (the analogue of a Python number)
 * takes the other operand's dtype when the value converts exactly (2.0 to int32; not 2.5), and
 * between two host scalars the lower kind takes the higher one's (bool < int32 < int64 < float32
 * < float64). Op results are never host scalars, and a host scalar passed to a function is an
 * ordinary tensor argument inside it, so eager and compiled code promote alike. `add` on strings
 * concatenates. */
TJ_API tj_tensor *tj_add(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_sub(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_mul(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_div(tj_tensor *a, tj_tensor *b); /* ints: truncating; error on /0 eagerly */
TJ_API tj_tensor *tj_floordiv(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_mod(tj_tensor *a, tj_tensor *b); /* floor mod (Python %) */
TJ_API tj_tensor *tj_pow(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_maximum(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_minimum(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_equal(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_not_equal(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_less(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_less_equal(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_greater(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_greater_equal(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_logical_and(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_logical_or(tj_tensor *a, tj_tensor *b);
/* Integer shifts (tf.bitwise.left_shift / right_shift), broadcasting, one integer dtype: right
 * shifts are arithmetic for signed dtypes; a count outside [0, bits) gives 0 (or -1 for >> of a
 * negative value), the result of shifting one bit at a time. */
TJ_API tj_tensor *tj_left_shift(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_right_shift(tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_where(tj_tensor *cond, tj_tensor *a, tj_tensor *b);
TJ_API tj_tensor *tj_str_concat(tj_tensor *a, tj_tensor *b); /* = tj_add on strings */
/* linear algebra: [..., m, k] x [..., k, n], batch dims broadcast. Floats accumulate in their own
 * dtype (as NumPy and TensorFlow): eagerly and under TJ_EXACT_MATH in k order, one multiply and
 * one add per step; compiled with the default math with FMA, and through OpenBLAS (its own
 * summation order) for large products, so rounding and the overflow of partial sums may differ. */
TJ_API tj_tensor *tj_matmul(tj_tensor *a, tj_tensor *b);
/* reductions over `axes` (n_axes == 0: all axes; negative axes count from the end) */
TJ_API tj_tensor *tj_sum(tj_tensor *x, int n_axes, const int *axes, int keepdims);
TJ_API tj_tensor *tj_mean(tj_tensor *x, int n_axes, const int *axes, int keepdims);
TJ_API tj_tensor *tj_max(tj_tensor *x, int n_axes, const int *axes, int keepdims);
TJ_API tj_tensor *tj_min(tj_tensor *x, int n_axes, const int *axes, int keepdims);
TJ_API tj_tensor *tj_prod(tj_tensor *x, int n_axes, const int *axes, int keepdims); /* in order */
TJ_API tj_tensor *tj_argmax(tj_tensor *x, int axis); /* int64 result */
TJ_API tj_tensor *tj_argmin(tj_tensor *x, int axis);
TJ_API tj_tensor *tj_softmax(tj_tensor *x, int axis);
TJ_API tj_tensor *tj_log_softmax(tj_tensor *x, int axis);
/* shape ops */
TJ_API tj_tensor *tj_reshape(tj_tensor *x, int rank, const int64_t *dims); /* one -1 allowed */
TJ_API tj_tensor *tj_transpose(tj_tensor *x, const int *perm);             /* NULL: reverse */
TJ_API tj_tensor *tj_broadcast_to(tj_tensor *x, int rank, const int64_t *dims);
TJ_API tj_tensor *tj_expand_dims(tj_tensor *x, int axis);
TJ_API tj_tensor *tj_squeeze(tj_tensor *x, int n_axes, const int *axes); /* 0: all size-1 axes */
TJ_API tj_tensor *tj_concat(int n, tj_tensor *const *xs, int axis);
/* Python slicing per axis: begin/end clamp, negative counts from the end, step != 0;
 * NULL begin/end/step mean 0 / the whole axis / 1. */
TJ_API tj_tensor *tj_slice(tj_tensor *x, const int64_t *begin, const int64_t *end,
                           const int64_t *step);
TJ_API tj_tensor *tj_gather(tj_tensor *params, tj_tensor *indices, int axis);
/* x with `updates` added at the slices tj_gather(x, indices, axis) reads: repeated indices add
 * up (JAX's x.at[idx].add(u) along one axis, TF's unsorted segment sum into x). updates must be
 * shaped like that gather; indices int32/int64, one outside [0, dims[axis]) is a run-time error.
 * Differentiable in x and updates. */
TJ_API tj_tensor *tj_scatter_add(tj_tensor *x, tj_tensor *indices, tj_tensor *updates, int axis);
TJ_API tj_tensor *tj_cast(tj_tensor *x, tj_dtype dt);
/* neural networks (tf.nn). Images are NHWC, filters HWIO [KH, KW, C_in, C_out], as TensorFlow's
 * defaults. A filter of C_in / G input channels makes tj_conv2d a grouped convolution of G groups
 * (as tf.nn.conv2d: C_in and C_out multiples of G; input group k feeds output channels
 * [k·C_out/G, (k+1)·C_out/G)); C_in / G = 1 is depthwise (MobileNet's, with a multiplier of
 * C_out / C_in). strides/dilations/ksize are {h, w} (NULL: 1); padding as TensorFlow: VALID uses no
 * padding, SAME pads so that the output is ceil(input / stride) (the extra row or column goes to
 * the bottom/right). Floats only. Errors name the op and the shapes (channels that differ, a
 * filter or window larger than the padded input). */
typedef enum tj_padding { TJ_PAD_VALID = 0, TJ_PAD_SAME = 1 } tj_padding;
TJ_API tj_tensor *tj_conv2d(tj_tensor *x, tj_tensor *filter, const int *strides, tj_padding padding,
                            const int *dilations);
/* tj_conv2d with explicit padding (tf.nn.conv2d's EXPLICIT paddings, PyTorch's and ONNX's pads):
 * pads {top, bottom, left, right}, each >= 0 and below 2^31, zeros around x's H and W; the
 * convolution reads the zeros itself (no padded copy in the graph). Errors as tj_conv2d's, and a
 * NULL or negative pad is an error naming it. */
TJ_API tj_tensor *tj_conv2d_pads(tj_tensor *x, tj_tensor *filter, const int *strides,
                                 const int64_t *pads, const int *dilations);
/* The transpose of tj_conv2d (tf.nn.conv2d_transpose; the gradient of a convolution with respect
 * to its input): x [N, H, W, C_in], filter [KH, KW, C_out, C_in] (note: output channels before
 * input channels, as TensorFlow), output_dims {N, OH, OW, C_out} the result's shape, which must be
 * one that tj_conv2d(result, filter, strides, padding, dilations) maps back to x's [H, W] (this
 * fixes the extra rows a stride leaves ambiguous). Errors name the shapes that disagree. */
TJ_API tj_tensor *tj_conv2d_transpose(tj_tensor *x, tj_tensor *filter, const int64_t *output_dims,
                                      const int *strides, tj_padding padding, const int *dilations);
/* Pooling over H and W; padded positions never win a max and are not counted in an average. */
TJ_API tj_tensor *tj_max_pool2d(tj_tensor *x, const int *ksize, const int *strides,
                                tj_padding padding);
TJ_API tj_tensor *tj_avg_pool2d(tj_tensor *x, const int *ksize, const int *strides,
                                tj_padding padding);
/* Max pooling with a dilated window (lax.reduce_window's window_dilation, ONNX MaxPool's
 * dilations): the taps of a window are dilations[k] apart along H and W, so a window spans
 * dilations[k] * (ksize[k] - 1) + 1 elements (SAME pads for that span). dilations NULL or {1, 1}
 * is tj_max_pool2d. Differentiable (the first maximum of each window takes the gradient). */
TJ_API tj_tensor *tj_max_pool2d_dilated(tj_tensor *x, const int *ksize, const int *strides,
                                        tj_padding padding, const int *dilations);
/* Max pooling with explicit pads {top, bottom, left, right} (ONNX MaxPool's and PyTorch's pads,
 * TensorFlow's EXPLICIT padding): padded positions never win, as padding with -inf would give,
 * without a padded copy in the graph. Each pad must be smaller than the window along its axis (so
 * every window holds an input element); errors name the pad. Differentiable. */
TJ_API tj_tensor *tj_max_pool2d_pads(tj_tensor *x, const int *ksize, const int *strides,
                                     const int64_t *pads);
/* x + bias along the last axis (tf.nn.bias_add): bias must be rank 1 of x's last dim. */
TJ_API tj_tensor *tj_bias_add(tj_tensor *x, tj_tensor *bias);
/* [..., depth] of `dt`: on at each index, off elsewhere (an index outside [0, depth): all off). */
TJ_API tj_tensor *tj_one_hot(tj_tensor *indices, int64_t depth, double on, double off, tj_dtype dt);
/* tf.nn.sparse_softmax_cross_entropy_with_logits: per row, -log softmax(logits)[label], in the
 * numerically stable fused form; labels (int) have the logits' shape without the class axis. A
 * label outside [0, classes) is an error naming it (at run time when compiled). */
TJ_API tj_tensor *tj_sparse_softmax_cross_entropy(tj_tensor *labels, tj_tensor *logits);
/* Keras' sparse_categorical_crossentropy averaged over the batch (the loss the seed's model.fit
 * uses): from_logits = 0 takes probabilities (clipped to [1e-7, 1 - 1e-7], then their log as
 * logits, as Keras does); from_logits = 1 takes logits. Returns a scalar. */
TJ_API tj_tensor *tj_sparse_categorical_crossentropy(tj_tensor *labels, tj_tensor *output,
                                                     int from_logits);
/* constructors */
TJ_API tj_tensor *tj_zeros(tj_dtype dt, int rank, const int64_t *dims);
TJ_API tj_tensor *tj_ones(tj_dtype dt, int rank, const int64_t *dims);
TJ_API tj_tensor *tj_fill(int rank, const int64_t *dims, tj_tensor *value); /* value: 0-d */
TJ_API tj_tensor *tj_eye(tj_dtype dt, int64_t n, int64_t m);
TJ_API tj_tensor *tj_range(tj_dtype dt, double start, double limit, double delta);
/* Deterministic for a given seed (stateless, like tf.random.stateless_*). uniform: [lo, hi) with
 * finite lo <= hi; normal: finite mean and stddev >= 0; anything else is an error tensor. */
TJ_API tj_tensor *tj_random_uniform(tj_dtype dt, int rank, const int64_t *dims, double lo,
                                    double hi, uint64_t seed);
TJ_API tj_tensor *tj_random_normal(tj_dtype dt, int rank, const int64_t *dims, double mean,
                                   double stddev, uint64_t seed);

/* ---- side effects ---------------------------------------------------------------------------- */
/* Prints `prefix` then the values of each tensor, space separated, and a newline, to the print
 * sink (default stdout) on every execution, eager or compiled (S12). */
TJ_API tj_status tj_print(const char *prefix, int n, tj_tensor *const *xs);
typedef void (*tj_print_sink)(const char *line, void *user);
TJ_API void tj_set_print_sink(tj_print_sink sink, void *user); /* NULL: stdout */

/* Host callback (the analogue of tf.py_function): `fn` has the C signature
 *     void fn(void *user, tj_tensor *x0, ..., tj_tensor *x{n-1})
 * and is called through libffi with the concrete input tensors (borrowed) on every execution,
 * inside its own scope: the tensors its ops return are released when it returns. A void function
 * cannot return an error: it fails the op with tj_callback_fail. An op inside it that returns an
 * error tensor does not fail the op by itself (the callback may handle it); when the callback
 * returns without tj_callback_fail, TJ_LOG=misuse logs the first such error. */
TJ_API tj_status tj_host_callback(void *fn, void *user, int n, tj_tensor *const *xs);
/* Called by a host callback, while it runs, to fail the op: an eager tj_host_callback returns
 * `code` (negative; anything else becomes TJ_ERR_RUNTIME), and a compiled call stops and returns
 * an error tensor (tj_call_into: the status) with the message "host_callback: <message>". The
 * callback should return right after. Returns the code; TJ_ERR_STATE outside a callback. */
TJ_API tj_status tj_callback_fail(tj_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- control flow (S15-S19) ------------------------------------------------------------------ */
/* A body of control flow: a C function of n tensors (borrowed) returning one tensor, a tuple for
 * several, or NULL for none. Eagerly the bodies run as C code does; while tracing each body is
 * traced once into a region of one graph node, so a data-dependent branch or loop is decided on
 * every call of the compiled function (S15, S16), and a loop stays one node whatever its trip
 * count (S18). Bodies may call any op, print, host callbacks, read and assign variables, nest
 * control flow and call functions; they may read any tensor of the enclosing code (it becomes an
 * operand of the node); they may not create variables. Results are new references. */
typedef tj_tensor *(*tj_body)(int n, tj_tensor *const *args, void *user);
/* tf.cond / lax.cond: then_fn(n, args, user) if pred (a scalar bool, or a number: nonzero is
 * true), else else_fn. Both branches must return the same number of tensors with the same
 * dtypes and shapes (the error names the branch, the result and both). The branch not taken runs
 * no op and no side effect. */
TJ_API tj_tensor *tj_cond(tj_tensor *pred, tj_body then_fn, tj_body else_fn, int n,
                          tj_tensor *const *args, void *user);
/* tf.switch_case / lax.switch: runs fns[index](n, args, user) of n_branches branches. index is
 * an integer scalar, clamped into [0, n_branches) as lax.switch does. Every branch must return
 * what branch 0 returns (the error names the branch, the result and both types). Traced, the
 * branches become a balanced tree of conds (log2(n) compares; a constant index inlines the one
 * branch). fns is borrowed for the call. */
TJ_API tj_tensor *tj_switch(tj_tensor *index, int n_branches, const tj_body *fns, int n,
                            tj_tensor *const *args, void *user);
/* tf.while_loop / lax.while_loop: while cond_fn(vars) { vars = body_fn(vars) }, starting from
 * init (n loop variables). The body must return n tensors keeping each variable's dtype and shape
 * (the error names the variable and both shapes); the result is the final variables (one tensor
 * for n = 1, else a tuple). A failing body stops the loop: the error names the iteration.
 * tj_while_loop_max stops after maximum_iterations iterations (0: no bound), as TensorFlow's
 * maximum_iterations does. */
TJ_API tj_tensor *tj_while_loop(tj_body cond_fn, tj_body body_fn, int n, tj_tensor *const *init,
                                void *user);
TJ_API tj_tensor *tj_while_loop_max(tj_body cond_fn, tj_body body_fn, int n, tj_tensor *const *init,
                                    int64_t maximum_iterations, void *user);
/* for i in range(start, limit, delta): vars = body_fn(i, vars...). start, limit and delta are
 * numeric scalars (tensors: a loop of data-dependent trip count stays one node); the body gets
 * the int64 index i first, then the n loop variables, and returns the n new ones. With a float
 * bound it is tf.range over floats: ceil((limit - start) / delta) steps, i = start + k·delta as
 * float64 if a bound is float64, else float32. Float bounds must be known when traced (concrete
 * scalars; one computed at run time is TJ_ERR_UNSUPPORTED), and NaN or infinite bounds, a delta
 * of 0 and more than 2^53 steps are errors. */
TJ_API tj_tensor *tj_for_range(tj_tensor *start, tj_tensor *limit, tj_tensor *delta,
                               tj_body body_fn, int n, tj_tensor *const *init, void *user);
/* lax.scan over the leading axis of the n_xs sequences xs (equal leading dims T): the body gets
 * the n_carry carried values then one row of each sequence, and returns the new carried values
 * then any number of outputs, which are stacked along a new leading axis of size T. Returns a
 * tuple: the final carried values, then the stacked outputs. */
TJ_API tj_tensor *tj_scan(tj_body body_fn, int n_carry, tj_tensor *const *carry, int n_xs,
                          tj_tensor *const *xs, void *user);

/* tf.TensorArray (S19): a fixed number of elements of one dtype and shape, updated functionally
 * (write returns a new array). An array is a tuple (its data [size, ...] and a written mask), so
 * it can be a loop variable of tj_while_loop / tj_for_range / tj_scan (tuples in loop-variable
 * lists are kept as tuples for the bodies) and a function result. Reading an index out of range,
 * or never written, is an error naming the op and the index (at run time when compiled). */
TJ_API tj_tensor *tj_tensor_array_new(tj_dtype dt, int64_t size, int elem_rank,
                                      const int64_t *elem_dims);
TJ_API tj_tensor *tj_tensor_array_write(tj_tensor *ta, tj_tensor *index, tj_tensor *value);
TJ_API tj_tensor *tj_tensor_array_read(tj_tensor *ta, tj_tensor *index);
/* The elements stacked along a new leading axis ([size, ...]; unwritten ones are zeros). */
TJ_API tj_tensor *tj_tensor_array_stack(tj_tensor *ta);
/* An array of values' rows (every index written). */
TJ_API tj_tensor *tj_tensor_array_unstack(tj_tensor *values);
/* The number of elements; -1 (tj_last_error) if ta is not a tensor array. */
TJ_API int64_t tj_tensor_array_size(const tj_tensor *ta);

/* ---- variables (S10, S11) -------------------------------------------------------------------- */
typedef struct tj_variable tj_variable;
/* A variable holding `init`'s value, named `name` (copied). Every variable has a name: NULL or ""
 * gives "Variable_<n>", n counting the variables this process made, so such a name can differ
 * in another process: name the variables you checkpoint or save. Outside a trace the caller owns it
 * and frees it with tj_variable_free (NULL-safe); functions that captured it keep it alive until
 * they are freed. Inside a trace this is allowed only on the function's first trace (S11); a
 * symbolic `init` is evaluated with the triggering call's inputs; the variable then belongs to the
 * traced function (freed with it, whether the trace succeeded or not) and the pointer is borrowed:
 * freeing it is refused with an error. A freed variable's handle is recognised: every call on it is
 * an error. */
TJ_API tj_variable *tj_variable_new(tj_tensor *init, const char *name);
TJ_API void tj_variable_free(tj_variable *v);
TJ_API tj_tensor *tj_variable_read(tj_variable *v);
/* The assign ops return the new value. */
TJ_API tj_tensor *tj_assign(tj_variable *v, tj_tensor *value);
TJ_API tj_tensor *tj_assign_add(tj_variable *v, tj_tensor *delta);
TJ_API tj_tensor *tj_assign_sub(tj_variable *v, tj_tensor *delta);
TJ_API const char *tj_variable_name(const tj_variable *v);

/* ---- gradients (S21) ------------------------------------------------------------------------- */
/* A gradient tape, as tf.GradientTape: while it records, every op on this thread whose inputs
 * depend on a watched tensor, or on a variable read while it records, is recorded; afterwards
 * tj_tape_gradient gives the gradients of a target with respect to watched tensors or variables.
 * The same code works eagerly (the recorded ops are replayed backwards, eagerly) and inside a
 * traced function (the backward pass is recorded into the same graph, so the passes and the
 * backend see forward and backward together). Gradients are computed by tracejit ops, so an
 * enclosing tape records them too: nested tapes give higher-order gradients.
 *   - Only float tensors carry gradients; integer and bool values (argmax, comparisons, casts to
 *     int) stop them. An op without a gradient rule fails tj_tape_gradient with an error naming
 *     the op, when (and only when) a gradient has to flow through it.
 *   - Eagerly, a tj_call of a compiled function with a watched input runs the function eagerly,
 *     so its ops are recorded; control flow runs as C, so its ops are recorded too. Inside a
 *     trace, only ops of the trace that created the tape are recorded; a traced tj_cond or
 *     tj_switch is differentiated as a cond of its branches' gradients and a traced tj_scan (or
 *     tj_for_range with constant bounds) as a reverse scan (the bodies replayed under a tape;
 *     bodies with prints, callbacks or assignments are refused); a gradient through a traced
 *     tj_while_loop (or a for_range with bounds computed at run time) is refused, as JAX
 *     refuses reverse mode through while_loop, with an error naming the op.
 * Tapes belong to the thread that made them. */
typedef struct tj_tape tj_tape;
enum {
    TJ_TAPE_UNCONNECTED_ZERO = 1, /* a source the target does not depend on gets zeros, not NULL */
};
/* Starts recording (flags: TJ_TAPE_*). Caller frees with tj_tape_free. NULL on error. */
TJ_API tj_tape *tj_tape_new(unsigned flags);
/* Records ops on x (borrowed) from now on; variables read while recording are watched on their
 * own (TensorFlow's watch_accessed_variables). */
TJ_API tj_status tj_tape_watch(tj_tape *tape, tj_tensor *x);
/* Stops recording (the end of TensorFlow's `with` block); the tape keeps what it recorded. */
TJ_API tj_status tj_tape_stop(tj_tape *tape);
/* Gradients of `target` with respect to the n tensors `sources` (tensors watched on the tape or
 * produced by recorded ops) written to grads[0..n): new references, shaped like each source, or
 * NULL for a source the target does not depend on (TensorFlow's None; zeros with
 * TJ_TAPE_UNCONNECTED_ZERO). `seed` is the gradient of the target (its dtype and shape); NULL
 * means 1, and then the target must be a scalar. May be called several times. On error every
 * grads[k] is NULL and the message is in tj_last_error(). */
TJ_API tj_status tj_tape_gradient(tj_tape *tape, tj_tensor *target, tj_tensor *seed, int n,
                                  tj_tensor *const *sources, tj_tensor **grads);
/* The same with respect to variables: the sum over every read of vars[k] while recording. */
TJ_API tj_status tj_tape_gradient_vars(tj_tape *tape, tj_tensor *target, tj_tensor *seed, int n,
                                       tj_variable *const *vars, tj_tensor **grads);
/* Stops the tape if it records and frees it, with its references. NULL-safe. */
TJ_API void tj_tape_free(tj_tape *tape);

/* ---- training: optimizers, initializers, data ------------------------------------------------ */
/* Optimizers as tf.keras.optimizers define them (TF >= 2.11 update rules, see api/optim.c):
 * tj_optimizer_apply updates each variable from its gradient with ordinary ops, so inside a traced
 * step the update is compiled into the step's graph, and eagerly it runs op by op. Slots
 * (momentum; Adam's m and v, named "<var>/m", "<var>/v") and the step counter (int64
 * "optimizer/iterations", incremented once per apply) are variables the optimizer owns, created
 * at the first apply even inside a trace (TensorFlow's init_scope). A NULL gradient leaves its
 * variable as it is. Caller frees with tj_optimizer_free (after the functions that apply it are
 * freed, or they keep the slots alive on their own). NULL on bad arguments (tj_last_error). */
typedef struct tj_optimizer tj_optimizer;
TJ_API tj_optimizer *tj_sgd_new(double learning_rate, double momentum, int nesterov);
/* Keras defaults: beta1 0.9, beta2 0.999, epsilon 1e-7. */
TJ_API tj_optimizer *tj_adam_new(double learning_rate, double beta1, double beta2, double epsilon);
TJ_API tj_status tj_optimizer_apply(tj_optimizer *opt, int n, tj_variable *const *vars,
                                    tj_tensor *const *grads);
/* The step counter (NULL before the first apply) and a slot ("m", "v", "momentum") of var;
 * borrowed, owned by the optimizer. */
TJ_API tj_variable *tj_optimizer_iterations(tj_optimizer *opt);
/* Keras' optimizer.build(var_list): creates the step counter and the slots of vars now (zeros),
 * so that a checkpoint can be restored into them before the first apply. */
TJ_API tj_status tj_optimizer_build(tj_optimizer *opt, int n, tj_variable *const *vars);
/* The optimizer's variables (the step counter, then each variable's slots, in creation order):
 * writes up to cap of them (borrowed) to out and returns how many there are; -1 on error. */
TJ_API int tj_optimizer_variables(tj_optimizer *opt, int cap, tj_variable **out);
TJ_API tj_variable *tj_optimizer_slot(tj_optimizer *opt, tj_variable *var, const char *name);
TJ_API void tj_optimizer_free(tj_optimizer *opt);
/* Keras' GlorotUniform: U(-l, l), l = sqrt(6 / (fan_in + fan_out)), fans of a kernel
 * [..., in, out] times its receptive field (conv HWIO: KH KW). Deterministic for a seed. */
TJ_API tj_tensor *tj_glorot_uniform(tj_dtype dt, int rank, const int64_t *dims, uint64_t seed);
/* Reads an IDX file (the MNIST format; gzip-compressed when the name ends in .gz): unsigned and
 * signed bytes, shorts and ints become int32, floats float32, doubles float64. Errors name the
 * file and the byte offset of a bad or truncated header or payload. A new reference. */
TJ_API tj_tensor *tj_idx_load(const char *path);
/* `count` int64 indices drawn uniformly from [0, n) with replacement (np.random.randint),
 * deterministic for a seed: gather a batch with tj_gather(data, indices, 0). */
TJ_API tj_tensor *tj_random_indices(int64_t n, int64_t count, uint64_t seed);

/* ---- functions, tracing and concrete functions ----------------------------------------------- */
typedef struct tj_function tj_function;
typedef struct tj_concrete tj_concrete;

typedef struct tj_function_options {
    int n_input_signature; /* > 0: calls must match these specs (S7) */
    const tj_spec *input_signature;
    const char *const *arg_names; /* names used in symbolic tensors ("a:0"), default x0, x1 */
    int cache_bound;              /* concrete functions kept (LRU), 0: 64; < 0: error */
    int eager;                    /* 1: always run eagerly (as TJ_EAGER=1) */
    const char *name; /* tj_jit_compile: the name used in messages and signatures (default: the
                         C function's symbol name where the dynamic linker knows it, else
                         "fn_<address>"); tj_function_new takes its name as an argument */
    /* tiered: 0 (the default): as TJ_TIERED says, on unless TJ_TIERED=0; 1: on; -1: off. On: a
     * new signature runs its first calls on the interpreter (the optimized graph, reference
     * kernels) while LLVM compiles in a background thread from its second call on (a signature
     * called once never compiles); later calls take the native code once it is ready
     * (tj_function_wait_compiled starts the compile and waits for it). A new shape of a function
     * that has run before, whose code is compiled already (in this process, on disk), runs it
     * from its first call. Results may differ in the last bits between the tiers unless
     * TJ_EXACT_MATH=1. Off: the first call compiles, then runs native code. */
    int tiered;
    const char *backend; /* the backend its signatures compile for: a name ("cpu", "cuda", "interp";
                            tj_backend_name lists them) or a comma-separated list in order of
                            preference, the first one available here chosen ("cpu,interp": the
                            interpreter where LLVM is absent). NULL: TJ_BACKEND (the same form),
                            else the first backend available here. An unknown name, or a list
                            none of whose backends is available, is an error naming it and the
                            available ones; never a silent fallback. A signature the backend
                            declines (unknown dims) runs on the interpreter (TJ_LOG=compile). */
    /* where tj_call's results are left: NULL or "" as TJ_OUTPUT_DEVICE says, else where the
       backend computed them (a GPU backend's on its GPU, as JAX and PyTorch leave them); "cpu":
       copied to the host before tj_call returns (tj_call_into writes the caller's tensors
       wherever they are). Any other name is an error. */
    const char *output_device;
} tj_function_options;

/* `fn` is a C function taking `nargs` tj_tensor* (borrowed) and returning a tj_tensor* (a new
 * reference, or one owned by the trace's scope), a tuple for several results, or NULL for none.
 * Copies `name` and `opts`. Caller frees with tj_function_free. */
TJ_API tj_function *tj_function_new(const char *name, void *fn, int nargs,
                                    const tj_function_options *opts);
/* The same for a body of the control-flow form, called as body(nargs, args, user): for callers
 * that build functions at run time (frontends, transforms). `user` is borrowed and must outlive
 * the function. */
TJ_API tj_function *tj_function_new_body(const char *name, tj_body body, int nargs, void *user,
                                         const tj_function_options *opts);
/* Function transforms (jax.grad, jax.value_and_grad): a new function of f's arguments returning
 * the gradients of f's result (a float scalar) with respect to the arguments argnums[0..n) (one
 * tensor for n = 1, else a tuple), and, for value_and_grad, the tuple (value, gradients...). It
 * is traced, cached and compiled like any function, with forward and backward in one graph; an
 * argument the result does not depend on gets zeros. Variables f reads are constants of the
 * transform (take their gradients with a tape inside f). f is borrowed: free the transform first.
 * Caller frees with tj_function_free. NULL on error (tj_last_error). */
TJ_API tj_function *tj_grad(tj_function *f, int n, const int *argnums,
                            const tj_function_options *opts);
TJ_API tj_function *tj_value_and_grad(tj_function *f, int n, const int *argnums,
                                      const tj_function_options *opts);
/* Frees the function, its concrete functions and the variables its traces created. Calling it
 * afterwards returns an error (freed handles are recognised for any number of frees). From
 * inside f's own trace it does nothing and leaves an error in tj_last_error. */
TJ_API void tj_function_free(tj_function *f);
/* Calls f. Returns a new reference: the result, a tuple, an empty tuple, or an error tensor. */
TJ_API tj_tensor *tj_call(tj_function *f, int nargs, tj_tensor *const *args);
/* Calls f and writes its results into caller-provided concrete tensors (borrowed; their dtype
 * and shape must match the results; a tuple's items in order). Static values, symbolic and error
 * tensors, immutable data (tj_tensor_adopt, a graph's constant) and a tensor whose memory
 * another tensor shares (a reshape that a call returned as a view) are refused as outputs.
 * Allocates no result tensor. Like tj_call, it runs the C code eagerly in eager mode, inside a
 * trace and under a recording tape that watches an argument; the tape then records each output
 * as a copy of its result, so gradients flow through it. Returns TJ_OK or an error status with
 * the message in tj_last_error(). */
TJ_API tj_status tj_call_into(tj_function *f, int nargs, tj_tensor *const *args, int n_out,
                              tj_tensor *const *outs);
/* Like tj_call but always runs the C code eagerly, op by op (S9). Calls nested inside other
 * calls (eagerly, or inlined while tracing) fail past 1000 levels or when less than 256 KiB of
 * the thread's stack is left: unbounded recursion is an error, not a crash. */
TJ_API tj_tensor *tj_call_eager(tj_function *f, int nargs, tj_tensor *const *args);

/* A callable with fn's own C signature (an ffi closure): tj_tensor *(*)(tj_tensor *, ...).
 * Free with tj_jit_free. NULL on error (tj_last_error). */
TJ_API void *tj_jit_compile(void *fn, int nargs, const tj_function_options *opts);
TJ_API void tj_jit_free(void *compiled);
/* The tj_function behind a tj_jit_compile closure (borrowed), NULL if none. */
TJ_API tj_function *tj_jit_function(void *compiled);

/* Traces for `specs` without running (S6). Borrowed: owned by f and valid until f is freed (it
 * stays valid when the cache evicts it). NULL on error (tj_last_error), also when called from
 * inside f's own trace. */
TJ_API tj_concrete *tj_function_get_concrete(tj_function *f, int n, const tj_spec *specs);
/* Calls a concrete function; an incompatible input is an error naming the function, the input
 * index and the expected and actual dtype/shape. */
TJ_API tj_tensor *tj_concrete_call(tj_concrete *c, int nargs, tj_tensor *const *args);
/* Pretty-printed list of concrete signatures (S8). Caller frees. "" from inside f's own trace. */
TJ_API char *tj_function_signatures(const tj_function *f);
TJ_API int tj_function_trace_count(const tj_function *f); /* traces run so far */
TJ_API int tj_function_n_concrete(const tj_function *f);  /* concrete functions cached */
TJ_API const char *tj_function_name(const tj_function *f);
/* Text IR of a concrete function's optimized graph (caller frees). */
TJ_API char *tj_concrete_graph_text(const tj_concrete *c);
/* Which graph of a concrete function a picture shows. */
typedef enum tj_graph_stage {
    TJ_GRAPH_TRACED = 0,    /* as traced, before the passes */
    TJ_GRAPH_OPTIMIZED = 1, /* after the passes */
    TJ_GRAPH_KERNELS = 2    /* after the passes, the nodes of each kernel the backend runs in a
                               cluster named after the kernel (fusion made visible) */
} tj_graph_stage;
/* The graph as Graphviz DOT (`dot -Tpng f.dot -o f.png`): parameters, constants, variable reads,
 * side effects (print, assign, callbacks, chained in program order) and control flow each drawn
 * their own way. Caller frees. NULL on error (tj_last_error): a NULL function, a bad stage. */
TJ_API char *tj_concrete_graph_dot(const tj_concrete *c, tj_graph_stage stage);
TJ_API int tj_concrete_node_count(const tj_concrete *c);
/* The program a call of c runs now: "cpu" (native code), "interp" (the interpreter), or "" for
 * NULL. A tiered function's concrete functions say "interp" until their compile is done. A
 * signature with unknown dims says "interp" (its graph at unknown dims); each shape it is called
 * at runs a native instance of it (README: unknown dims), which TJ_LOG=compile reports. */
TJ_API const char *tj_concrete_backend(const tj_concrete *c);
/* The backends of this build in order of preference: names for i in [0, n), NULL past the last.
 * Static strings. */
TJ_API const char *tj_backend_name(int i);
/* NULL when backend `name` can compile here; otherwise why not, a sentence (static): the reason
 * it is unavailable, or that this build has no such backend. */
TJ_API const char *tj_backend_unavailable(const char *name);
/* Waits until f's concrete functions run native code: starts the background compiles of those
 * not called yet, then waits for every compile running (f's and any other tiered function's).
 * TJ_OK, or TJ_ERR_INVALID for a NULL or freed f. */
TJ_API tj_status tj_function_wait_compiled(tj_function *f);

/* ---- modules (S27) --------------------------------------------------------------------------- */
/* tf.Module + tf.saved_model: named variables and named functions with fixed input signatures,
 * saved to a directory and loaded in another process without the C code that made them. */
typedef struct tj_module tj_module;
/* An empty module (name copied). Caller frees with tj_module_free. NULL on error. */
TJ_API tj_module *tj_module_new(const char *name);
/* Adds v (borrowed: it must outlive the module) under its name (set, without spaces or
 * quotes, distinct within the module). Variables a function captures join on save. */
TJ_API tj_status tj_module_add_variable(tj_module *m, tj_variable *v);
/* Adds f (borrowed) as `name` with the fixed input signature specs[0..n) (copied; tensor specs,
 * one per argument of f), tracing f for it now: a trace error is returned here. */
TJ_API tj_status tj_module_add_function(tj_module *m, const char *name, tj_function *f, int n,
                                        const tj_spec *specs);
/* Writes the module to directory dir (created if missing): module.tjm (the manifest), each
 * function's optimized graph (<name>.tjir, text IR), its native code when it was compiled
 * (<name>.x86_64.tjx: the plan and the object LLVM emitted) and variables.ckpt. Refused before
 * anything is written: a function calling a host callback (C code, as tf.py_function), a
 * signature that does not trace, same-named variables or names with spaces or quotes. */
TJ_API tj_status tj_module_save(tj_module *m, const char *dir);
/* Loads a saved module: every file checked (manifest syntax, checksums, graphs parsed and
 * verified against their signatures) before use, errors naming the file and the line or node;
 * its variables are owned by the module. Each function runs its saved native code when this
 * tracejit build and CPU can run it (no LLVM needed: tracejit links the object itself), else is
 * compiled from its graph (LLVM), else interpreted; tj_module_runs_on says which and why.
 * Loading native code runs machine code written by whoever saved the module: load modules you
 * trust, or pass TJ_MODULE_GRAPH_ONLY, which never maps saved code (the graph is compiled or
 * interpreted). Caller frees. NULL on error. */
TJ_API tj_module *tj_module_load(const char *dir);
enum { TJ_MODULE_GRAPH_ONLY = 1 };
TJ_API tj_module *tj_module_load_opts(const char *dir, unsigned flags);
/* What runs function `name` of m: "saved native code", "compiled from the graph (<why not the
 * saved code>)", "interpreter (<why>)", or "traced in this process" for a module built here.
 * Borrowed from m. NULL when there is no such function. */
TJ_API const char *tj_module_runs_on(const tj_module *m, const char *name);
/* Function `name`'s input signature: fills specs[0..min(n, max)) (static_value NULL) and
 * returns n, its number of inputs; -1 when there is no such function (tj_last_error). */
TJ_API int tj_module_signature(const tj_module *m, const char *name, int max, tj_spec *specs);
/* Calls function `name`; the arguments must match its signature exactly. A new reference. */
TJ_API tj_tensor *tj_module_call(tj_module *m, const char *name, int nargs, tj_tensor *const *args);
/* A variable by name (borrowed, owned by the module when loaded), NULL if none. */
TJ_API tj_variable *tj_module_variable(tj_module *m, const char *name);
/* saved_model_cli show --all: every signature's inputs and outputs (dtypes, shapes) and the
 * variables. Caller frees. */
TJ_API char *tj_module_describe(const tj_module *m);
TJ_API void tj_module_free(tj_module *m);

/* ---- checkpoints (S29) ----------------------------------------------------------------------- */
/* tf.train.Checkpoint: writes the values of vars (borrowed) to one file under their names (which
 * must be distinct), atomically (a temporary file renamed over path) and with a checksum.
 * Outside traces. Errors: NULL or empty path, same-named variables, string variables, I/O
 * (naming the file). */
TJ_API tj_status tj_checkpoint_save(const char *path, int n, tj_variable *const *vars);
/* Assigns each of vars the value saved under its name. The whole file is checked first (magic,
 * version, sizes, checksum: a corrupt or truncated file is TJ_ERR_CORRUPT naming the file and
 * the offset) and every variable matched before any is assigned: a variable the file lacks, or a
 * saved value no variable takes, is an error unless expect_partial (TensorFlow's expect_partial;
 * by default as assert_consumed); a dtype or shape that differs is always an error. On error no
 * variable changes. */
TJ_API tj_status tj_checkpoint_restore(const char *path, int n, tj_variable *const *vars,
                                       int expect_partial);

/* ---- check numerics (S26) -------------------------------------------------------------------- */
/* tf.debugging.enable_check_numerics: from now on every float result of an eager op, of a node
 * the interpreter runs and of each kernel of a compiled program is checked for NaN and
 * infinity; the first found makes the op (or the call) return an error naming the op: its
 * node, type, dtype and shape, the element, and for a compiled call the kernel, the function and
 * its signature (a fused kernel's ops are re-run one by one to find the one that produced it).
 * TJ_CHECK_NUMERICS=1 turns it on at start. Off, it costs one load per step. */
TJ_API void tj_enable_check_numerics(void);
TJ_API void tj_disable_check_numerics(void);

/* ---- profiles (S28) -------------------------------------------------------------------------- */
/* Records a profile of everything this process runs until tj_profile_stop, which writes it to
 * `path` (copied) as Chrome trace JSON (chrome://tracing, ui.perfetto.dev): one event per call,
 * per kernel of a compiled program (its label names the fused ops; args: function, output dtype
 * and shape, bytes of its buffers), per node the interpreter runs and per eager op, and the
 * trace, passes and compile of each new signature, each with its thread. TJ_PROFILE=file.json
 * records from the first call to exit. Off, it costs one load per step. Errors: a NULL path, a
 * profile already running (start); none running, an unwritable file (stop). */
TJ_API tj_status tj_profile_start(const char *path);
TJ_API tj_status tj_profile_stop(void);

/* ---- configuration --------------------------------------------------------------------------- */
/* Read once from the environment: TJ_EAGER=1, TJ_LOG=retrace,compile,passes,misuse,cache,
 * TJ_DUMP=dir, TJ_PASSES=..., TJ_CACHE_DIR, TJ_CACHE=0, TJ_CACHE_MAX_BYTES (disk bound, default
 * 1G), TJ_NUM_THREADS, TJ_EXACT_MATH=1, TJ_BACKEND=interp, TJ_DIRECT_CONV=0 (convolutions by
 * im2col + OpenBLAS), TJ_COMPILE_THREADS=1 (compile on one thread), TJ_PROFILE=file.json,
 * TJ_CHECK_NUMERICS=1, TJ_ISA=avx512|avx2|neon|generic (the most the hand-written CPU kernels
 * and the generated code may use; never more than the CPU has; an unknown name means generic). */
TJ_API void tj_set_eager(int on); /* force eager execution of all functions (S9) */
TJ_API int tj_get_eager(void);
typedef void (*tj_log_fn)(const char *topic, const char *msg, void *user);
/* Log sink; default writes to stderr only for topics listed in TJ_LOG. */
TJ_API void tj_set_log(tj_log_fn fn, void *user);
TJ_API void tj_set_log_topics(const char *topics); /* "retrace,compile"; overrides TJ_LOG */

/* Empties the compiled-artifact cache, in memory and on disk ($TJ_CACHE_DIR). The disk cache
 * holds native code that is loaded and run: it is trusted like JAX's, so a directory is used only
 * when this user owns it and nobody else can write it, and an entry only when it is a regular
 * file of this user that nobody else can write (TJ_LOG=cache says what was refused). */
TJ_API tj_status tj_cache_clear(void);

TJ_API const char *tj_version(void);
/* The vector instruction set tracejit's hand-written CPU kernels (direct convolutions, packed
 * products, pooling) use on this machine: "avx512", "avx2", "neon" or "generic", after TJ_ISA.
 * Static.
 * Tests and benchmarks ask this rather than the CPU, so they expect what the planner plans. */
TJ_API const char *tj_cpu_isa(void);

#ifdef __cplusplus
}
#endif
#endif /* TRACEJIT_H */
