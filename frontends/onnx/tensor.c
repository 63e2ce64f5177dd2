/* tensor.c — ONNX tensors: TensorProto to tj_tensor (data in raw_data or in the typed fields,
 * every size checked against the dims), element types, and reading files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

/* ---- protobuf-c's memory ----------------------------------------------------------------------
 * protobuf-c copies every bytes field out of the file; a model's raw tensor data (megabytes)
 * then becomes the tensors' buffers (ox_tensor_take). Large blocks are mapped in 2 MiB huge
 * pages: 13 MB of weights fault in a few huge pages instead of 3,200 small ones (20 ms -> 1 ms
 * of first touch here). Each block starts with a 64-byte header holding its mapped size (0 for
 * malloc), so the data is 64-byte aligned in mapped blocks. */
#define PB_HEAD 64
#define PB_HUGE ((size_t)2 << 20)

static void *pb_alloc(void *unused, size_t n) {
    (void)unused;
    if (n > SIZE_MAX - PB_HUGE - PB_HEAD)
        return NULL;
    size_t total = n + PB_HEAD, mapped = 0;
    char *p = NULL;
    if (total >= PB_HUGE / 2) {
        mapped = (total + PB_HUGE - 1) & ~(PB_HUGE - 1);
        p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
#ifdef MADV_HUGEPAGE
        madvise(p, mapped, MADV_HUGEPAGE);
#endif
    } else if (!(p = malloc(total))) {
        return NULL;
    }
    memcpy(p, &mapped, sizeof mapped);
    return p + PB_HEAD;
}

static void pb_free(void *unused, void *q) {
    (void)unused;
    if (!q)
        return;
    char *p = (char *)q - PB_HEAD;
    size_t mapped;
    memcpy(&mapped, p, sizeof mapped);
    if (mapped)
        munmap(p, mapped);
    else
        free(p);
}

ProtobufCAllocator ox_pb_allocator = {pb_alloc, pb_free, NULL};

static void pb_release(void *q) {
    pb_free(NULL, q);
}

/* ---- tensors ----------------------------------------------------------------------------------
 */
int ox_dtype(int32_t t) {
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
        return TJ_F32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
        return TJ_F64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
        return TJ_I32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
        return TJ_I64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
        return TJ_BOOL;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
        return TJ_I8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
        return TJ_U8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
        return TJ_I16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
        return TJ_U16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
        return TJ_U32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
        return TJ_U64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
        return TJ_F16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
        return TJ_BF16;
    default:
        return -1;
    }
}

/* The typed field ONNX keeps a dtype's elements in when raw_data is absent (onnx.proto): int64
 * in int64_data, uint32/uint64 in uint64_data, the narrower ints, bool and the bits of float16 /
 * bfloat16 in int32_data. */
static bool in_uint64_data(int dt) {
    return dt == TJ_U32 || dt == TJ_U64;
}

const char *ox_type_name(int32_t t) {
    static const char *names[] = {"undefined",  "float",   "uint8",  "int8",   "uint16",
                                  "int16",      "int32",   "int64",  "string", "bool",
                                  "float16",    "double",  "uint32", "uint64", "complex64",
                                  "complex128", "bfloat16"};
    return t >= 0 && t < (int32_t)(sizeof names / sizeof *names) ? names[t] : "unknown";
}

static tj_tensor *tensor_of(Onnx__TensorProto *p, const char *what, int take) {
    int dt = ox_dtype(p->data_type);
    if (dt < 0)
        return tj_error_new(TJ_ERR_UNSUPPORTED, "onnx: %s: element type %s (%d) is not supported",
                            what, ox_type_name(p->data_type), p->data_type);
    if (p->n_dims > TJ_MAX_RANK)
        return tj_error_new(TJ_ERR_UNSUPPORTED, "onnx: %s: rank %zu is over %d", what, p->n_dims,
                            TJ_MAX_RANK);
    if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return tj_error_new(TJ_ERR_UNSUPPORTED, "onnx: %s: data in an external file", what);
    int64_t numel = 1;
    for (size_t d = 0; d < p->n_dims; d++) {
        if (p->dims[d] < 0 || (p->dims[d] && numel > ((int64_t)1 << 40) / p->dims[d]))
            return tj_error_new(TJ_ERR_CORRUPT, "onnx: %s: dim %zu is %lld", what, d,
                                (long long)p->dims[d]);
        numel *= p->dims[d];
    }
    size_t es = tj_dtype_size((tj_dtype)dt), bytes = (size_t)numel * es;
    /* the data must hold the dims' elements: checked before anything is allocated */
    size_t have = p->has_raw_data      ? p->raw_data.len / es
                  : dt == TJ_F32       ? p->n_float_data
                  : dt == TJ_F64       ? p->n_double_data
                  : dt == TJ_I64       ? p->n_int64_data
                  : in_uint64_data(dt) ? p->n_uint64_data
                                       : p->n_int32_data;
    if (have != (size_t)numel || (p->has_raw_data && p->raw_data.len != bytes))
        return tj_error_new(TJ_ERR_CORRUPT, "onnx: %s: %lld elements expected, the data holds %zu",
                            what, (long long)numel, have);
    /* raw data is taken, not copied, where the proto is read once (initializers, .pb files):
     * protobuf-c's malloc'd copy of the bytes becomes the tensor's buffer */
    int taken = take && p->has_raw_data && bytes;
    void *buf = taken ? p->raw_data.data : malloc(bytes ? bytes : 1);
    if (!buf)
        return tj_error_new(TJ_ERR_OOM, "onnx: %s: out of memory", what);
    if (taken) {
        p->raw_data.data = NULL;
        p->raw_data.len = 0;
        p->has_raw_data = 0;
    } else if (p->has_raw_data) {
        have = p->raw_data.len / es;
        if (p->raw_data.len == bytes && bytes)
            memcpy(buf, p->raw_data.data, bytes);
    } else if (dt == TJ_F32) {
        have = p->n_float_data;
        if (have == (size_t)numel && bytes)
            memcpy(buf, p->float_data, bytes);
    } else if (dt == TJ_F64) {
        have = p->n_double_data;
        if (have == (size_t)numel && bytes)
            memcpy(buf, p->double_data, bytes);
    } else if (dt == TJ_I64) {
        have = p->n_int64_data;
        if (have == (size_t)numel && bytes)
            memcpy(buf, p->int64_data, bytes);
    } else if (in_uint64_data(dt)) {
        have = p->n_uint64_data;
        for (size_t i = 0; have == (size_t)numel && i < have; i++) {
            if (dt == TJ_U64)
                ((uint64_t *)buf)[i] = p->uint64_data[i];
            else
                ((uint32_t *)buf)[i] = (uint32_t)p->uint64_data[i];
        }
    } else { /* int32, the narrower ints and bool live in int32_data */
        have = p->n_int32_data;
        for (size_t i = 0; have == (size_t)numel && i < have; i++) {
            int32_t v = p->int32_data[i];
            switch (es) {
            case 4:
                ((int32_t *)buf)[i] = v;
                break;
            case 2:
                ((uint16_t *)buf)[i] = (uint16_t)v;
                break;
            default:
                ((uint8_t *)buf)[i] = dt == TJ_BOOL ? v != 0 : (uint8_t)v;
            }
        }
    }
    int64_t dims[TJ_MAX_RANK];
    for (size_t d = 0; d < p->n_dims; d++)
        dims[d] = p->dims[d];
    /* the tensor takes buf (malloc's alignment fits every dtype) and nothing writes it again:
     * a function that captures it shares it (tj_tensor_adopt), a model's weights are not copied
     * once more */
    void (*release)(void *) = taken ? pb_release : free;
    tj_tensor *t = tj_tensor_adopt((tj_dtype)dt, (int)p->n_dims, dims, buf, release, buf);
    if (tj_status_of(t))
        release(buf); /* not taken */
    return t;
}

tj_tensor *ox_tensor(const Onnx__TensorProto *p, const char *what) {
    return tensor_of((Onnx__TensorProto *)p, what, 0);
}

tj_tensor *ox_tensor_take(Onnx__TensorProto *p, const char *what) {
    return tensor_of(p, what, 1);
}

unsigned char *ox_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        tj_set_error(TJ_ERR_IO, "onnx: cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    unsigned char *p = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n < 0 || n > OX_MAX_FILE || fseek(f, 0, SEEK_SET) != 0)
        tj_set_error(TJ_ERR_IO, "onnx: cannot read %s (size %ld)", path, n);
    else if (!(p = malloc((size_t)n + 1)))
        tj_set_error(TJ_ERR_OOM, "onnx: out of memory reading %s", path);
    else if (fread(p, 1, (size_t)n, f) != (size_t)n) {
        tj_set_error(TJ_ERR_IO, "onnx: cannot read %s", path);
        free(p);
        p = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return p;
}

tj_tensor *tj_onnx_tensor_from_bytes(const void *data, size_t size, const char *name) {
    Onnx__TensorProto *p = onnx__tensor_proto__unpack(&ox_pb_allocator, size, data);
    if (!p)
        return tj_error_new(TJ_ERR_CORRUPT, "onnx: %s is not a serialized TensorProto",
                            name ? name : "the tensor");
    tj_tensor *t = ox_tensor_take(p, name ? name : "the tensor");
    onnx__tensor_proto__free_unpacked(p, &ox_pb_allocator);
    return t;
}

tj_status tj_onnx_write_tensor(const char *path, const tj_tensor *t, const char *name) {
    if (!path || !t)
        return tj_set_error(TJ_ERR_INVALID, "onnx: write_tensor: %s is NULL",
                            path ? "the tensor" : "the path");
    if (tj_status_of(t) || tj_tensor_is_symbolic(t) || !tj_tensor_data(t))
        return tj_set_error(TJ_ERR_INVALID, "onnx: write_tensor %s: not a concrete tensor (%s)",
                            path, tj_status_of(t) ? tj_error_message(t) : "symbolic or a tuple");
    static const int32_t types[] = {
        [TJ_F32] = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
        [TJ_F64] = ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE,
        [TJ_I32] = ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
        [TJ_I64] = ONNX__TENSOR_PROTO__DATA_TYPE__INT64,
        [TJ_BOOL] = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL,
        [TJ_I8] = ONNX__TENSOR_PROTO__DATA_TYPE__INT8,
        [TJ_U8] = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8,
        [TJ_I16] = ONNX__TENSOR_PROTO__DATA_TYPE__INT16,
        [TJ_U16] = ONNX__TENSOR_PROTO__DATA_TYPE__UINT16,
        [TJ_U32] = ONNX__TENSOR_PROTO__DATA_TYPE__UINT32,
        [TJ_U64] = ONNX__TENSOR_PROTO__DATA_TYPE__UINT64,
        [TJ_F16] = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16,
        [TJ_BF16] = ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16,
    };
    tj_dtype dt = tj_tensor_dtype(t);
    if ((size_t)dt >= sizeof types / sizeof *types || !types[dt])
        return tj_set_error(TJ_ERR_UNSUPPORTED, "onnx: write_tensor %s: dtype %s", path,
                            tj_dtype_name(dt));
    Onnx__TensorProto p;
    onnx__tensor_proto__init(&p);
    int64_t dims[TJ_MAX_RANK];
    p.n_dims = (size_t)tj_tensor_rank(t);
    memcpy(dims, tj_tensor_dims(t), p.n_dims * sizeof *dims);
    p.dims = dims;
    p.has_data_type = 1;
    p.data_type = types[dt];
    p.name = (char *)(name ? name : "");
    p.has_raw_data = 1;
    p.raw_data.len = (size_t)tj_tensor_numel(t) * tj_dtype_size(dt);
    p.raw_data.data = (uint8_t *)tj_tensor_data(t);
    size_t n = onnx__tensor_proto__get_packed_size(&p);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return tj_set_error(TJ_ERR_OOM, "onnx: out of memory writing %s", path);
    onnx__tensor_proto__pack(&p, buf);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, n, f) == n;
    ok = f && fclose(f) == 0 && ok;
    free(buf);
    return ok ? TJ_OK : tj_set_error(TJ_ERR_IO, "onnx: cannot write %s: %s", path, strerror(errno));
}

tj_tensor *tj_onnx_read_tensor(const char *path) {
    size_t size = 0;
    unsigned char *p = path ? ox_read_file(path, &size) : NULL;
    if (!p)
        return tj_error_new(path ? TJ_ERR_IO : TJ_ERR_INVALID, "%s",
                            path ? tj_last_error() : "onnx: the path is NULL");
    tj_tensor *t = tj_onnx_tensor_from_bytes(p, size, path);
    free(p);
    return t;
}
