/* tj_onnx.h — the ONNX frontend of tracejit (libtracejit_onnx): loads an ONNX model (protobuf,
 * read with protobuf-c) and imports its graph by tracing: the imported function walks the ONNX
 * nodes calling tracejit's public ops, so every input signature is traced, optimized, fused and
 * compiled like any tracejit function. Built on the public header only.
 *
 * Ownership: tj_onnx_load returns a model the caller frees with tj_onnx_free; the function and
 * the names and specs it hands out are borrowed from the model. Errors: NULL / an error status,
 * with the message in tj_last_error() naming the file, the node (its name, index and op type),
 * the input or the opset. */
#ifndef TJ_ONNX_H
#define TJ_ONNX_H

#include <stddef.h>

#include <tracejit.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tj_onnx_model tj_onnx_model;

typedef struct tj_onnx_options {
    int initializers_as_variables; /* 1: initializers become tj_variables (trainable, named by
                                      the initializer); 0 (default): constants of the graph */
    int compile_first; /* 1: a new input signature's first call waits for the native code;
                          0 (default): tiered unless TJ_TIERED=0, the first calls run on the
                          interpreter while LLVM compiles in the background
                          (tj_function_options.tiered), as a runtime session starts */
} tj_onnx_options;

/* Reads and checks the model at path (or the bytes data[0..size)): the protobuf, the opsets
 * (the default domain, at most the version this importer knows), every node's inputs produced
 * before it (a cycle or a dangling name is an error naming the node), every op known at its
 * opset. opts may be NULL. NULL on error. */
TJ_API tj_onnx_model *tj_onnx_load(const char *path, const tj_onnx_options *opts);
TJ_API tj_onnx_model *tj_onnx_load_bytes(const void *data, size_t size, const char *name,
                                         const tj_onnx_options *opts);
TJ_API void tj_onnx_free(tj_onnx_model *m);
/* Waits until the native code of every input signature called so far is in place (calls made
 * meanwhile run on the interpreter; see tj_onnx_options.compile_first). TJ_OK, or
 * TJ_ERR_INVALID for a NULL or freed model. */
TJ_API tj_status tj_onnx_wait_compiled(tj_onnx_model *m);

/* The imported function (borrowed): its arguments are the graph's inputs that are not
 * initializers, in order; its result is the one output, or a tuple of the outputs. Inputs that
 * some node reads as values (a Reshape's shape, a Slice's starts, axes) cannot be traced
 * symbolically: with such inputs call the model through tj_onnx_call. */
TJ_API tj_function *tj_onnx_function(tj_onnx_model *m);
/* Runs the model on args (borrowed; a new reference: the output, a tuple, or an error tensor).
 * Inputs read as values are specialized on: each new set of their values traces and compiles a
 * function of its own, as tf.function retraces on a new Python value (the 16 most recently used
 * are kept); other inputs retrace only on a new dtype or shape. */
TJ_API tj_tensor *tj_onnx_call(tj_onnx_model *m, int nargs, tj_tensor *const *args);
TJ_API int tj_onnx_n_inputs(const tj_onnx_model *m);
TJ_API int tj_onnx_n_outputs(const tj_onnx_model *m);
/* Input / output k: its name, and its declared type in *spec (dtype; rank; dims, -1 for a
 * symbolic or missing dim). Borrowed. NULL when k is out of range. */
TJ_API const char *tj_onnx_input(const tj_onnx_model *m, int k, tj_spec *spec);
TJ_API const char *tj_onnx_output(const tj_onnx_model *m, int k, tj_spec *spec);
/* The opset of the default domain the model imports. */
TJ_API int tj_onnx_opset(const tj_onnx_model *m);

/* A tensor from a serialized ONNX TensorProto (the .pb files of ONNX's test data): data in
 * raw_data or in the typed fields. A new reference, or an error tensor naming the file. */
TJ_API tj_tensor *tj_onnx_read_tensor(const char *path);
TJ_API tj_tensor *tj_onnx_tensor_from_bytes(const void *data, size_t size, const char *name);
/* Writes t (borrowed, concrete; not a string or tuple) to path as a TensorProto with its data in
 * raw_data, named `name` (may be NULL), as ONNX's test data stores tensors. TJ_OK, or an error
 * status with the message naming the file. */
TJ_API tj_status tj_onnx_write_tensor(const char *path, const tj_tensor *t, const char *name);

#ifdef __cplusplus
}
#endif
#endif /* TJ_ONNX_H */
