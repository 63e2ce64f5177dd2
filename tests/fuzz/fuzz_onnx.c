/* fuzz_onnx.c — libFuzzer target for the ONNX frontend: the model reader (protobuf-c, then the
 * importer's checks: opsets, names, ops, types, initializers) and, for a model that loads, its
 * import: the graph is traced on inputs made from its declared types (symbolic and large dims
 * become small) and run on the interpreter, so the op converters meet every attribute and shape
 * the fuzzer invents. Errors are expected; crashes, leaks and undefined behaviour are not. */
#include <stdint.h>
#include <stdlib.h>

#include "tj_onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    if (!ready) {
        setenv("TJ_BACKEND", "interp", 1); /* before tracejit reads its configuration */
        setenv("TJ_CACHE", "0", 1);
        ready = 1;
    }
    if (size > (1u << 16))
        return 0;
    tj_scope_begin();
    tj_onnx_model *m = tj_onnx_load_bytes(data, size, "fuzz.onnx", NULL);
    int n = m ? tj_onnx_n_inputs(m) : 0;
    tj_tensor *args[8];
    int ok = m && n <= 8;
    for (int k = 0; ok && k < n; k++) {
        tj_spec s;
        tj_onnx_input(m, k, &s);
        int64_t numel = 1;
        for (int d = 0; d < s.rank; d++) {
            s.dims[d] = s.dims[d] < 0 || s.dims[d] > 8 ? 2 : s.dims[d];
            numel *= s.dims[d];
        }
        args[k] = tj_zeros(s.dtype, s.rank, s.dims);
        ok = numel <= 4096;
    }
    if (ok)
        tj_onnx_call(m, n, args);
    tj_onnx_free(m);
    tj_scope_end();
    return 0;
}
