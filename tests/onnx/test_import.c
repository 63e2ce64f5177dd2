/* The ONNX importer on models built here with protobuf-c: a small MLP imported, traced and
 * compiled, checked against the same computation done with tracejit's ops; values read at trace
 * time (a Reshape's shape from Shape + Concat of constants; a shape given as an input,
 * specialized per value); and bad input, each an error naming what is wrong, never a crash:
 * every truncation of a model, bytes that are not a model, a node reading a name nothing
 * defines, a cycle, an unknown op, an op newer than its opset, an unsupported element type, a
 * wrong input count or dtype at call time, a missing file, initializers as variables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx.pb-c.h"
#include "tj_onnx.h"

/* ---- building models ----------------------------------------------------------------------------
 */
typedef struct builder {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__NodeProto nodes[16], *pnodes[16];
    Onnx__ValueInfoProto vi[8], *ins[4], *outs[8];
    Onnx__TypeProto tp[8];
    Onnx__TypeProto__Tensor tt[8];
    Onnx__TensorShapeProto sh[8];
    Onnx__TensorShapeProto__Dimension dim[8][4], *pdim[8][4];
    Onnx__TensorProto inits[4], *pinits[4];
    int n_vi;
} builder;

static void init(builder *b, int opset) {
    memset(b, 0, sizeof *b);
    onnx__model_proto__init(&b->m);
    onnx__graph_proto__init(&b->g);
    onnx__operator_set_id_proto__init(&b->opset);
    b->opset.domain = "";
    b->opset.has_version = 1;
    b->opset.version = opset;
    b->opsets[0] = &b->opset;
    b->m.n_opset_import = 1;
    b->m.opset_import = b->opsets;
    b->m.has_ir_version = 1;
    b->m.ir_version = 8;
    b->m.graph = &b->g;
    b->g.name = "built";
    b->g.node = b->pnodes;
    b->g.input = b->ins;
    b->g.output = b->outs;
    b->g.initializer = b->pinits;
}

/* A value info of element type et and dims (rank r; -1: symbolic). */
static Onnx__ValueInfoProto *value(builder *b, const char *name, int et, int r,
                                   const int64_t *dims) {
    int k = b->n_vi++;
    onnx__value_info_proto__init(&b->vi[k]);
    onnx__type_proto__init(&b->tp[k]);
    onnx__type_proto__tensor__init(&b->tt[k]);
    onnx__tensor_shape_proto__init(&b->sh[k]);
    for (int d = 0; d < r; d++) {
        onnx__tensor_shape_proto__dimension__init(&b->dim[k][d]);
        if (dims[d] >= 0) {
            b->dim[k][d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            b->dim[k][d].dim_value = dims[d];
        } else {
            b->dim[k][d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            b->dim[k][d].dim_param = "batch";
        }
        b->pdim[k][d] = &b->dim[k][d];
    }
    b->sh[k].n_dim = (size_t)r;
    b->sh[k].dim = b->pdim[k];
    b->tt[k].has_elem_type = 1;
    b->tt[k].elem_type = et;
    b->tt[k].shape = &b->sh[k];
    b->tp[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    b->tp[k].tensor_type = &b->tt[k];
    b->vi[k].name = (char *)name;
    b->vi[k].type = &b->tp[k];
    return &b->vi[k];
}

static void node(builder *b, const char *op, int n_in, char **in, int n_out, char **out) {
    Onnx__NodeProto *p = &b->nodes[b->g.n_node];
    onnx__node_proto__init(p);
    p->op_type = (char *)op;
    p->n_input = (size_t)n_in;
    p->input = in;
    p->n_output = (size_t)n_out;
    p->output = out;
    b->pnodes[b->g.n_node++] = p;
}

static void init_f32(builder *b, const char *name, int r, int64_t *dims, float *data, size_t n) {
    Onnx__TensorProto *t = &b->inits[b->g.n_initializer];
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_dims = (size_t)r;
    t->dims = dims;
    t->n_float_data = n;
    t->float_data = data;
    b->pinits[b->g.n_initializer++] = t;
}

/* An int64 initializer of rank r (r = 0: a scalar, dims may be NULL). */
static void init_i64(builder *b, const char *name, int r, int64_t *dims, int64_t *v, size_t n) {
    Onnx__TensorProto *t = &b->inits[b->g.n_initializer];
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t->n_dims = (size_t)r;
    t->dims = dims;
    t->n_int64_data = n;
    t->int64_data = v;
    b->pinits[b->g.n_initializer++] = t;
}

/* An int attribute on the last node added (storage: the builder's, one per node). */
static Onnx__AttributeProto attrs[16], *pattrs[16];
static void attr_i(builder *b, const char *name, int64_t v) {
    Onnx__NodeProto *p = b->pnodes[b->g.n_node - 1];
    size_t k = b->g.n_node - 1;
    onnx__attribute_proto__init(&attrs[k]);
    attrs[k].name = (char *)name;
    attrs[k].has_type = 1;
    attrs[k].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    attrs[k].has_i = 1;
    attrs[k].i = v;
    pattrs[k] = &attrs[k];
    p->n_attribute = 1;
    p->attribute = &pattrs[k];
}

/* A string attribute (instead of attr_i's int) on the last node added. */
static void attr_s(builder *b, const char *name, const char *v) {
    attr_i(b, name, 0);
    Onnx__AttributeProto *a = &attrs[b->g.n_node - 1];
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    a->has_i = 0;
    a->has_s = 1;
    a->s.data = (uint8_t *)v;
    a->s.len = strlen(v);
}

static uint8_t *pack(builder *b, size_t *n) {
    *n = onnx__model_proto__get_packed_size(&b->m);
    uint8_t *p = malloc(*n);
    onnx__model_proto__pack(&b->m, p);
    return p;
}

/* ---- the MLP: relu(x W + b) through Gemm, then Softmax ------------------------------------------
 */
static int64_t wd[2] = {4, 3}, bd[1] = {3};
static float W[12] = {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f, 0.9f, -1.0f, 1.1f, 0.2f};
static float Bv[3] = {0.05f, -0.1f, 0.2f};

static uint8_t *mlp(size_t *n) {
    builder b;
    init(&b, 13);
    static char *g_in[3] = {"x", "W", "b"}, *g_out[1] = {"h"}, *r_in[1] = {"h"}, *r_out[1] = {"r"},
                *s_in[1] = {"r"}, *s_out[1] = {"y"};
    int64_t xd[2] = {-1, 4}, yd[2] = {-1, 3};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, yd);
    init_f32(&b, "W", 2, wd, W, 12);
    init_f32(&b, "b", 1, bd, Bv, 3);
    node(&b, "Gemm", 3, g_in, 1, g_out);
    node(&b, "Relu", 1, r_in, 1, r_out);
    node(&b, "Softmax", 1, s_in, 1, s_out);
    return pack(&b, n);
}

/* Tiers: by default a signature's first call runs on the interpreter and tj_onnx_wait_compiled
 * brings the native code (same values); compile_first gives native code at the first call. */
static void tiers(void) {
    size_t n;
    uint8_t *bytes = mlp(&n);
    int64_t xd[2] = {3, 4};
    tj_spec spec = {TJ_F32, 2, {3, 4}, NULL};
    for (int first = 0; first < 2; first++) {
        tj_onnx_options o = {.compile_first = first};
        tj_onnx_model *m = tj_onnx_load_bytes(bytes, n, "mlp.onnx", &o);
        CHECK_MSG(m != NULL, "%s", tj_last_error());
        if (!m)
            break;
        tj_tensor *x = tj_random_uniform(TJ_F32, 2, xd, -1, 1, 5);
        tj_tensor *y0 = tj_onnx_call(m, 1, &x);
        tj_concrete *c = tj_function_get_concrete(tj_onnx_function(m), 1, &spec);
        CHECK_STR(tj_concrete_backend(c), first ? "cpu" : "interp");
        CHECK_EQ_INT(tj_onnx_wait_compiled(m), TJ_OK);
        CHECK_STR(tj_concrete_backend(c), "cpu");
        tj_tensor *y1 = tj_onnx_call(m, 1, &x);
        for (int64_t i = 0; i < tj_tensor_numel(y0); i++)
            CHECK_NEAR(tj_tensor_get_f64(y1, i), tj_tensor_get_f64(y0, i), 1e-6);
        tj_onnx_free(m);
    }
    free(bytes);
    CHECK_EQ_INT(tj_onnx_wait_compiled(NULL), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "wait_compiled: not a live model");
}

static void imports_mlp(void) {
    size_t n;
    uint8_t *bytes = mlp(&n);
    tj_onnx_model *m = tj_onnx_load_bytes(bytes, n, "mlp.onnx", NULL);
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m) {
        free(bytes);
        return;
    }
    tj_spec s;
    CHECK(!strcmp(tj_onnx_input(m, 0, &s), "x") && s.rank == 2 && s.dims[0] == -1 &&
          s.dims[1] == 4 && s.dtype == TJ_F32);
    CHECK(!strcmp(tj_onnx_output(m, 0, NULL), "y"));
    CHECK(tj_onnx_input(m, 1, NULL) == NULL); /* initializers are not arguments */
    CHECK_EQ_INT(tj_onnx_opset(m), 13);
    for (int64_t batch = 2; batch <= 5; batch += 3) { /* a new batch size retraces */
        int64_t xd[2] = {batch, 4};
        tj_tensor *x = tj_random_uniform(TJ_F32, 2, xd, -1, 1, (uint64_t)batch);
        tj_tensor *y = tj_onnx_call(m, 1, &x);
        CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
        tj_tensor *w = tj_tensor_from_data(TJ_F32, 2, wd, W),
                  *bb = tj_tensor_from_data(TJ_F32, 1, bd, Bv);
        tj_tensor *want = tj_softmax(tj_relu(tj_add(tj_matmul(x, w), bb)), -1);
        for (int64_t i = 0; i < tj_tensor_numel(want); i++)
            CHECK_NEAR(tj_tensor_get_f64(y, i), tj_tensor_get_f64(want, i), 1e-5);
        /* a wrong dtype and a wrong count at call time */
        tj_tensor *xi = tj_cast(x, TJ_I32);
        tj_tensor *e = tj_onnx_call(m, 1, &xi);
        CHECK(tj_status_of(e) == TJ_ERR_DTYPE);
        CHECK_HAS(tj_error_message(e), "input 0 'x' is int32[");
        CHECK_HAS(tj_error_message(e), ",4], the model declares float32[?,4]");
        e = tj_onnx_call(m, 2, (tj_tensor *[]){x, x});
        CHECK_HAS(tj_error_message(e), "takes 1 inputs, 2 given");
    }
    tj_onnx_free(m);
    /* initializers as variables: trainable, named as in the model */
    tj_onnx_options o = {.initializers_as_variables = 1};
    m = tj_onnx_load_bytes(bytes, n, "mlp.onnx", &o);
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    int64_t xd[2] = {3, 4};
    tj_tensor *x = tj_ones(TJ_F32, 2, xd);
    tj_tensor *y = m ? tj_onnx_call(m, 1, &x) : NULL;
    CHECK(y && tj_status_of(y) == TJ_OK && tj_tensor_numel(y) == 9);
    tj_onnx_free(m);
    /* every truncation is refused with an error (or, rarely, still a whole model: never a crash) */
    int refused = 0;
    for (size_t k = 0; k < n; k++) {
        tj_onnx_model *t = tj_onnx_load_bytes(bytes, k, "cut.onnx", NULL);
        refused += t == NULL;
        tj_onnx_free(t);
    }
    CHECK(refused >= (int)n - 2);
    CHECK(!tj_onnx_load_bytes("not a model", 11, "junk.onnx", NULL));
    CHECK_HAS(tj_last_error(), "junk.onnx");
    free(bytes);
}

/* The built model packed and loaded (NULL with the error set on failure). */
static tj_onnx_model *load_built(builder *b, const char *name) {
    size_t n;
    uint8_t *bytes = pack(b, &n);
    tj_onnx_model *m = tj_onnx_load_bytes(bytes, n, name, NULL);
    free(bytes);
    return m;
}

/* One node of op `op` from x to y, at `opset`, with input names in. */
static tj_onnx_model *one_node(const char *op, int opset, int n_in, char **in, int et) {
    builder b;
    init(&b, opset);
    static char *out[1] = {"y"};
    int64_t d[1] = {3};
    b.ins[b.g.n_input++] = value(&b, "x", et, 1, d);
    b.outs[b.g.n_output++] = value(&b, "y", et, 1, d);
    node(&b, op, n_in, in, 1, out);
    return load_built(&b, "one.onnx");
}

static void bad_graphs(void) {
    static char *x1[1] = {"x"}, *ghost[1] = {"nobody"};
    CHECK(!one_node("Relu", 13, 1, ghost, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT));
    CHECK_HAS(tj_last_error(), "node 0 '' (Relu, opset 13): input 0 'nobody' is not produced");
    CHECK(!one_node("FrobnicateV2", 13, 1, x1, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT));
    CHECK_HAS(tj_last_error(), "op FrobnicateV2 is not supported by tracejit");
    CHECK(!one_node("Trilu", 9, 1, x1, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)); /* opset 14 op */
    CHECK_HAS(tj_last_error(), "(Trilu, opset 9): op Trilu is not supported");
    CHECK(!one_node("Relu", 13, 1, x1, ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64));
    CHECK_HAS(tj_last_error(), "'x' has element type complex64, which tracejit lacks");
    CHECK(!one_node("Relu", 99, 1, x1, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT));
    CHECK_HAS(tj_last_error(), "opset 99 is newer than this importer knows");
    CHECK(!one_node("Add", 13, 1, x1, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT));
    CHECK_HAS(tj_last_error(), "(Add, opset 13): 1 inputs (takes 2 to 2)");
    /* a cycle: a reads b, b reads a */
    builder b;
    init(&b, 13);
    static char *ia[1] = {"b"}, *oa[1] = {"a"}, *ib[1] = {"a"}, *ob[1] = {"y"};
    int64_t d[1] = {3};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, d);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, d);
    node(&b, "Relu", 1, ia, 1, oa);
    node(&b, "Relu", 1, ib, 1, ob);
    ob[0] = "b";
    size_t n;
    uint8_t *bytes = pack(&b, &n);
    CHECK(!tj_onnx_load_bytes(bytes, n, "cycle.onnx", NULL));
    CHECK_HAS(tj_last_error(), "input 0 'b' is not produced before this node (a cycle");
    free(bytes);
    CHECK(!tj_onnx_load("/nonexistent/model.onnx", NULL));
    CHECK_HAS(tj_last_error(), "cannot open /nonexistent/model.onnx");
    /* the mapped path: a truncated model on disk, an empty file; a directory is not mapped */
    char path[] = "/tmp/tj_onnx_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        uint8_t *good = mlp(&n);
        CHECK(write(fd, good, n / 2) == (ssize_t)(n / 2));
        close(fd);
        free(good);
        CHECK(!tj_onnx_load(path, NULL));
        CHECK_HAS(tj_last_error(), path);
        CHECK_HAS(tj_last_error(), "is not an ONNX model");
        CHECK(truncate(path, 0) == 0);
        CHECK(!tj_onnx_load(path, NULL));
        CHECK_HAS(tj_last_error(), path);
        unlink(path);
    }
    CHECK(!tj_onnx_load("/tmp", NULL));
    CHECK_HAS(tj_last_error(), "/tmp");
    tj_tensor *t = tj_onnx_read_tensor("/nonexistent/t.pb");
    CHECK(tj_status_of(t) == TJ_ERR_IO);
    t = tj_onnx_tensor_from_bytes("\xff\xff\xff", 3, "junk.pb");
    CHECK_HAS(tj_error_message(t), "junk.pb is not a serialized TensorProto");
}

/* Reshape whose target is an input: specialized per value; and one computed from Shape. */
static void shape_values(void) {
    builder b;
    init(&b, 14);
    static char *in[2] = {"x", "shape"}, *out[1] = {"y"};
    int64_t xd[2] = {2, 6}, sd[1] = {2}, yd[2] = {-1, -1};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd);
    b.ins[b.g.n_input++] = value(&b, "shape", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, sd);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, yd);
    node(&b, "Reshape", 2, in, 1, out);
    tj_onnx_model *m = load_built(&b, "reshape.onnx");
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return;
    tj_tensor *x = tj_range(TJ_F32, 0, 12, 1);
    int64_t d2[2] = {2, 6};
    x = tj_reshape(x, 2, d2);
    int64_t t1[2] = {3, 4}, t2[2] = {-1, 2};
    for (int k = 0; k < 2; k++) {
        tj_tensor *shape = tj_tensor_from_data(TJ_I64, 1, (int64_t[]){2}, k ? t2 : t1);
        tj_tensor *y = tj_onnx_call(m, 2, (tj_tensor *[]){x, shape});
        CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
        CHECK_EQ_INT(tj_tensor_dims(y)[0], k ? 6 : 3);
        CHECK_NEAR(tj_tensor_get_f64(y, 11), 11, 0);
    }
    /* the plain function cannot trace a shape it does not know */
    tj_tensor *shape = tj_tensor_from_data(TJ_I64, 1, (int64_t[]){2}, t1);
    tj_tensor *y = tj_call(tj_onnx_function(m), 2, (tj_tensor *[]){x, shape});
    CHECK_HAS(tj_error_message(y), "(Reshape, opset 14): its shape is computed from the model's "
                                   "inputs");
    tj_onnx_free(m);
}

/* Resize whose sizes are an input: specialized per value (nearest, half-pixel: each pixel
 * repeated), and sizes that do not fit the rank: an error naming the node and the counts. */
static void resize_values(void) {
    builder b;
    init(&b, 13);
    static char *in[4] = {"x", "", "", "sizes"}, *out[1] = {"y"};
    int64_t xd[4] = {1, 1, 2, 2}, sd[1] = {4}, yd[4] = {-1, -1, -1, -1};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, xd);
    b.ins[b.g.n_input++] = value(&b, "sizes", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, sd);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, yd);
    node(&b, "Resize", 4, in, 1, out);
    tj_onnx_model *m = load_built(&b, "resize.onnx");
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return;
    tj_tensor *x = tj_reshape(tj_range(TJ_F32, 1, 5, 1), 4, xd);
    int64_t up[4] = {1, 1, 4, 4}, tall[4] = {1, 1, 3, 2}, bad[3] = {1, 1, 4};
    tj_tensor *s = tj_tensor_from_data(TJ_I64, 1, sd, up);
    tj_tensor *y = tj_onnx_call(m, 2, (tj_tensor *[]){x, s});
    CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
    for (int i = 0; i < 16 && !tj_status_of(y); i++) /* row i/4, column i%4 read x[i/8][i%4/2] */
        CHECK_NEAR(tj_tensor_get_f64(y, i), 1 + 2 * (i / 8) + (i % 4) / 2, 0);
    s = tj_tensor_from_data(TJ_I64, 1, sd, tall);
    y = tj_onnx_call(m, 2, (tj_tensor *[]){x, s});
    CHECK_EQ_INT(tj_tensor_dims(y)[2], 3);
    s = tj_tensor_from_data(TJ_I64, 1, (int64_t[]){3}, bad);
    y = tj_onnx_call(m, 2, (tj_tensor *[]){x, s});
    /* the declared input shape is checked before any converter sees the values */
    CHECK(tj_status_of(y) == TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(y), "input 1 'sizes' is int64[3], the model declares int64[4]");
    tj_onnx_free(m);
}

/* Range(0, n + 1, 1) of an input n: the value reaches Range through an Add, so n is specialized
 * on (a function per value of n), as a direct shape input is. */
static void values_through_nodes(void) {
    builder b;
    init(&b, 13);
    static char *add_in[2] = {"n", "one"}, *add_out[1] = {"limit"};
    static char *rng_in[3] = {"zero", "limit", "one"}, *rng_out[1] = {"y"};
    static int64_t zero = 0, one = 1;
    int64_t yd[1] = {-1};
    b.ins[b.g.n_input++] = value(&b, "n", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, yd);
    init_i64(&b, "zero", 0, NULL, &zero, 1);
    init_i64(&b, "one", 0, NULL, &one, 1);
    node(&b, "Add", 2, add_in, 1, add_out);
    node(&b, "Range", 3, rng_in, 1, rng_out);
    tj_onnx_model *m = load_built(&b, "range.onnx");
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return;
    for (int64_t k = 2; k <= 5; k += 3) {
        tj_tensor *nv = tj_scalar_i64(k);
        tj_tensor *y = tj_onnx_call(m, 1, &nv);
        CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
        CHECK_EQ_INT(tj_tensor_numel(y), k + 1);
        CHECK_NEAR(tj_tensor_get_f64(y, k), (double)k, 0);
    }
    tj_onnx_free(m);
}

/* A model of one node `op` on x [1, 1, 4, 4] and a weight initializer, run once: the error. */
static void node_error(const char *op, int wr, int64_t *wd, size_t wn, const char *attr, int64_t av,
                       const char *want) {
    builder b;
    init(&b, 13);
    static char *in[2] = {"x", "w"}, *out[1] = {"y"};
    static float wv[64];
    int64_t xd[4] = {1, 1, 4, 4}, yd[4] = {-1, -1, -1, -1};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, xd);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, yd);
    init_f32(&b, "w", wr, wd, wv, wn);
    node(&b, op, 2, in, 1, out);
    if (attr)
        attr_i(&b, attr, av);
    tj_onnx_model *m = load_built(&b, op);
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return;
    tj_tensor *x = tj_zeros(TJ_F32, 4, xd);
    tj_tensor *y = tj_onnx_call(m, 1, &x);
    CHECK_HAS(tj_error_message(y), want);
    tj_onnx_free(m);
}

/* Converters refuse what does not fit, naming the node and the shapes. */
static void converter_errors(void) {
    int64_t w3[3] = {1, 1, 3}, w4[4] = {1, 1, 3, 3};
    node_error("Conv", 3, w3, 3, NULL, 0, "(Conv, opset 13): the weight has rank 3 for 2 spatial");
    node_error("ConvTranspose", 3, w3, 3, NULL, 0, "the weight has rank 3 for 2 spatial dims");
    node_error("ConvTranspose", 4, w4, 9, "group", 2, "group=2 for 1 channels and 1 filters");
    node_error("Conv", 4, w4, 9, "group", 3, "group=3 for 1 channels");
    node_error("Conv", 4, w4, 9, "group", 0, "group=0 for 1 channels"); /* was SIGFPE */
    node_error("ConvTranspose", 4, w4, 9, "group", 0, "group=0 for 1 channels");
    /* GatherND: indices tuples longer than the data's rank */
    builder b;
    init(&b, 13);
    static char *in[2] = {"x", "i"}, *out[1] = {"y"};
    static int64_t iv[3] = {0, 0, 0};
    int64_t xd[2] = {2, 2}, id[2] = {1, 3}, yd[1] = {-1};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, yd);
    init_i64(&b, "i", 2, id, iv, 3);
    node(&b, "GatherND", 2, in, 1, out);
    tj_onnx_model *m = load_built(&b, "gathernd.onnx");
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return;
    tj_tensor *x = tj_zeros(TJ_F32, 2, xd);
    tj_tensor *y = tj_onnx_call(m, 1, &x);
    CHECK_HAS(tj_error_message(y), "(GatherND, opset 13): indices of rank 2 (last dim 3) and "
                                   "batch_dims 0 for data of rank 2");
    tj_onnx_free(m);
}

/* One node on x (float32 [2,3], an input) and, when iv is given, an int64 initializer "i" of ni
 * values (rank 1) as its second input; an int attribute (sattr NULL) or a string one. The error
 * of the call must contain want. */
static void index_error(const char *op, int opset, int64_t *iv, size_t ni, const char *attr,
                        int64_t av, const char *sattr, const char *want) {
    builder b;
    init(&b, opset);
    static char *in[2] = {"x", "i"}, *out[2] = {"y", "z"};
    static int64_t id[1];
    int64_t xd[2] = {2, 3}, yd[2] = {-1, -1};
    id[0] = (int64_t)ni;
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, yd);
    if (iv)
        init_i64(&b, "i", 1, id, iv, ni);
    node(&b, op, iv ? 2 : 1, in, !strcmp(op, "TopK") ? 2 : 1, out);
    if (sattr)
        attr_s(&b, attr, sattr);
    else if (attr)
        attr_i(&b, attr, av);
    tj_onnx_model *m = load_built(&b, op);
    CHECK_MSG(m != NULL, "%s: %s", op, tj_last_error());
    if (!m)
        return;
    tj_tensor *x = tj_zeros(TJ_F32, 2, xd);
    tj_tensor *y = tj_onnx_call(m, 1, &x);
    CHECK_MSG(tj_status_of(y) != TJ_OK, "%s: no error", op);
    CHECK_HAS(tj_error_message(y), want);
    tj_onnx_free(m);
}

/* A node of x [1,1,4,4] and float initializers that the converter refuses by an attribute: the
 * error names the node, the op and the value (GridSample's mode, RoiAlign's adaptive sampling). */
static void sampling_error(const char *op, int opset, const char *sattr, const char *sval,
                           const char *want) {
    builder b;
    init(&b, opset);
    static char *in[3] = {"x", "a", "b"}, *out[1] = {"y"};
    static int64_t gd[4] = {1, 2, 2, 2}, rd[2] = {1, 4}, bd[1] = {1}, bi[1] = {0};
    static float gv[8] = {0}, rv[4] = {0, 0, 2, 2};
    int64_t xd[4] = {1, 1, 4, 4}, yd[4] = {-1, -1, -1, -1};
    int grid = !strcmp(op, "GridSample");
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, xd);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, yd);
    if (grid) {
        init_f32(&b, "a", 4, gd, gv, 8);
    } else {
        init_f32(&b, "a", 2, rd, rv, 4);
        init_i64(&b, "b", 1, bd, bi, 1);
    }
    node(&b, op, grid ? 2 : 3, in, 1, out);
    if (sattr)
        attr_s(&b, sattr, sval);
    tj_onnx_model *m = load_built(&b, op);
    CHECK_MSG(m != NULL, "%s: %s", op, tj_last_error());
    if (!m)
        return;
    tj_tensor *x = tj_zeros(TJ_F32, 4, xd);
    tj_tensor *y = tj_onnx_call(m, 1, &x);
    CHECK_MSG(tj_status_of(y) == TJ_ERR_UNSUPPORTED, "%s: no refusal", op);
    CHECK_HAS(tj_error_message(y), want);
    tj_onnx_free(m);
}

/* QuantizeLinear: values round half to even and saturate at the zero point's dtype; a zero point
 * of another integer dtype is refused by name. */
static void quantize(int zp_int64) {
    builder b;
    init(&b, 13);
    static char *in[3] = {"x", "s", "z"}, *out[1] = {"y"};
    static float sv[1] = {0.5f};
    static int32_t zv[1] = {250};
    static int64_t zv64[1] = {3};
    int64_t xd[1] = {5};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, xd);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, 1, xd);
    init_f32(&b, "s", 0, NULL, sv, 1);
    if (zp_int64) {
        init_i64(&b, "z", 0, NULL, zv64, 1);
    } else { /* a uint8 scalar in int32_data, as onnx.proto stores it */
        Onnx__TensorProto *t = &b.inits[b.g.n_initializer];
        onnx__tensor_proto__init(t);
        t->name = "z";
        t->has_data_type = 1;
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
        t->n_int32_data = 1;
        t->int32_data = zv;
        b.pinits[b.g.n_initializer++] = t;
    }
    node(&b, "QuantizeLinear", 3, in, 1, out);
    tj_onnx_model *m = load_built(&b, "quantize");
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return;
    const float xv[5] = {0.25f, 0.75f, -200.0f, 1.0f, 100.0f};
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, xd, xv);
    tj_tensor *y = tj_onnx_call(m, 1, &x);
    if (zp_int64) {
        CHECK_EQ_INT(tj_status_of(y), TJ_ERR_UNSUPPORTED);
        CHECK_HAS(tj_error_message(y), "(QuantizeLinear, opset 13): zero point of dtype int64");
    } else { /* x / 0.5 rounded half to even, + 250, saturated to [0, 255] */
        const double want[5] = {250, 252, 0, 252, 255};
        CHECK_EQ_INT(tj_tensor_dtype(y), TJ_U8);
        for (int i = 0; i < 5 && !tj_status_of(y); i++)
            CHECK_NEAR(tj_tensor_get_f64(y, i), want[i], 0);
    }
    tj_onnx_free(m);
}

/* Det: row swaps flip the sign, a singular matrix gives 0, batches stay apart. */
static void det_values(void) {
    builder b;
    init(&b, 13);
    static char *in[1] = {"x"}, *out[1] = {"y"};
    int64_t xd[3] = {3, 3, 3}, yd[1] = {3};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, xd);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, yd);
    node(&b, "Det", 1, in, 1, out);
    tj_onnx_model *m = load_built(&b, "det");
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return;
    const float v[27] = {0, 2, 1, 1, 1, 0, 3, 0, 1,  /* a zero first pivot: -5 */
                         1, 2, 3, 2, 4, 6, 1, 0, 1,  /* rows 1 and 2 proportional: 0 */
                         2, 0, 0, 0, 0, 3, 0, 4, 0}; /* one swap: 2 * -(3 * 4) = -24 */
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 3, xd, v);
    tj_tensor *y = tj_onnx_call(m, 1, &x);
    CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
    const double want[3] = {-5, 0, -24};
    for (int i = 0; i < 3 && !tj_status_of(y); i++)
        CHECK_NEAR(tj_tensor_get_f64(y, i), want[i], 1e-5);
    tj_onnx_free(m);
}

/* Node `at` of b gets If's then_branch and else_branch: branch k is op[k] on input in[k] giving
 * out[k], or with op[k] NULL no node, its output out[k] naming an enclosing value; every output
 * f32 of rank r, dims d. The protos are static: one If is built at a time. */
static void if_node(builder *b, int at, const char *const op[2], char **in[2], char **out[2], int r,
                    int64_t *d) {
    static Onnx__GraphProto br[2];
    static Onnx__NodeProto bn[2], *pbn[2][1];
    static Onnx__ValueInfoProto *bout[2][1];
    static Onnx__AttributeProto ba[2], *pba[2];
    const char *names[2] = {"then_branch", "else_branch"};
    for (int k = 0; k < 2; k++) {
        onnx__graph_proto__init(&br[k]);
        if (op[k]) {
            onnx__node_proto__init(&bn[k]);
            bn[k].op_type = (char *)op[k];
            bn[k].n_input = 1, bn[k].input = in[k];
            bn[k].n_output = 1, bn[k].output = out[k];
            pbn[k][0] = &bn[k];
            br[k].n_node = 1, br[k].node = pbn[k];
        }
        bout[k][0] = value(b, out[k][0], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, r, d);
        br[k].n_output = 1, br[k].output = bout[k];
        onnx__attribute_proto__init(&ba[k]);
        ba[k].name = (char *)names[k];
        ba[k].has_type = 1, ba[k].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
        ba[k].g = &br[k];
        pba[k] = &ba[k];
    }
    b->pnodes[at]->n_attribute = 2;
    b->pnodes[at]->attribute = pba;
}

/* If: each branch a one-node subgraph reading the enclosing graph's x (captured by the cond);
 * a branch reading a name no graph defines is an error naming it. */
static void if_branches(const char *else_input, const char *want_error) {
    builder b;
    init(&b, 13);
    static char *in[1] = {"c"}, *out[1] = {"y"}, *t_in[1] = {"x"}, *t_out[1] = {"t"},
                *e_out[1] = {"e"};
    static char *e_in[1];
    e_in[0] = (char *)else_input;
    int64_t xd[1] = {3};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, xd);
    b.ins[b.g.n_input++] = value(&b, "c", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, xd);
    node(&b, "If", 1, in, 1, out);
    /* the branches: then = Neg(x), else = Abs(else_input) */
    if_node(&b, 0, (const char *[]){"Neg", "Abs"}, (char **[]){t_in, e_in},
            (char **[]){t_out, e_out}, 1, xd);
    tj_onnx_model *m = load_built(&b, "if");
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return;
    const float xv[3] = {1, -2, 3};
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, xd, xv);
    for (int c = 0; c < 2; c++) {
        tj_tensor *args[2] = {x, tj_scalar_bool(c == 1)};
        tj_tensor *y = tj_onnx_call(m, 2, args);
        if (want_error) {
            CHECK(tj_status_of(y) != TJ_OK);
            CHECK_HAS(tj_error_message(y), want_error);
        } else {
            CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
            for (int i = 0; i < 3 && !tj_status_of(y); i++)
                CHECK_NEAR(tj_tensor_get_f64(y, i), c ? -xv[i] : fabs(xv[i]), 0);
        }
    }
    tj_onnx_free(m);
}

/* Initializers of 1.6 MB (protobuf-c's blocks of 1 MiB and more are mapped in huge pages): one
 * in raw data (taken by the tensor, not copied), one in the typed field (copied); both calls
 * (the interpreter's, then after waiting, the native code's) read them right. */
static void large_initializers(void) {
    enum { N = 400000 };
    builder b;
    init(&b, 13);
    static char *in1[2] = {"x", "r"}, *in2[2] = {"s", "f"}, *out1[1] = {"s"}, *out2[1] = {"y"};
    static int64_t dn[1] = {N};
    float *rv = malloc(N * sizeof *rv), *fv = malloc(N * sizeof *fv);
    for (int i = 0; i < N; i++)
        rv[i] = (float)(i % 1000) * 0.5f, fv[i] = (float)(i % 7) - 3;
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, dn);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, dn);
    init_f32(&b, "f", 1, dn, fv, N);
    Onnx__TensorProto *r = &b.inits[b.g.n_initializer];
    onnx__tensor_proto__init(r);
    r->name = "r";
    r->has_data_type = 1, r->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    r->n_dims = 1, r->dims = dn;
    r->has_raw_data = 1, r->raw_data.len = N * sizeof(float), r->raw_data.data = (uint8_t *)rv;
    b.pinits[b.g.n_initializer++] = r;
    node(&b, "Add", 2, in1, 1, out1);
    node(&b, "Mul", 2, in2, 1, out2);
    tj_onnx_model *m = load_built(&b, "large");
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (m) {
        tj_tensor *x = tj_fill(1, dn, tj_scalar_f32(1));
        for (int rep = 0; rep < 2; rep++) {
            if (rep == 1)
                CHECK_EQ_INT(tj_onnx_wait_compiled(m), TJ_OK);
            tj_tensor *y = tj_onnx_call(m, 1, &x);
            CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
            int bad = 0;
            for (int i = 0; i < N && !tj_status_of(y); i += 997)
                bad += tj_tensor_get_f64(y, i) != (1 + rv[i]) * fv[i];
            CHECK_EQ_INT(bad, 0);
        }
        tj_onnx_free(m);
    }
    free(rv);
    free(fv);
}

/* Loop with a stacked (scan) output: the body negates v and stacks |v| each iteration. With M a
 * constant, or a model input (the importer specializes on its value), the outputs are v after M
 * negations and the M rows; with M = 0 or a body that changes the condition (the loop could
 * stop early: the rows are unknown when traced) the importer refuses by name. flaw 1: a body
 * node without an op type; 2: a body output without a name (corrupt files the fuzzer found). */
static void loop_stacked(int m_is_input, int64_t m_value, const char *cond_op, int flaw,
                         const char *want_error) {
    builder b, body;
    init(&b, 13);
    init(&body, 13);
    static char *l_in[3] = {"M", "", "v"}, *l_out[2] = {"v_final", "stack"};
    static char *c_in[1] = {"c_in"}, *c_out[1] = {"c_out"}, *v_in[1] = {"v_in"},
                *v_out[1] = {"v_out"}, *s_out[1] = {"s_out"};
    static int64_t m3;
    m3 = m_value;
    int64_t d3[1] = {3}, dstack[2] = {-1, 3};
    b.ins[b.g.n_input++] = value(&b, "v", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, d3);
    if (m_is_input)
        b.ins[b.g.n_input++] = value(&b, "M", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL);
    else
        init_i64(&b, "M", 0, NULL, &m3, 1);
    b.outs[b.g.n_output++] = value(&b, "v_final", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, d3);
    b.outs[b.g.n_output++] = value(&b, "stack", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, dstack);
    node(&b, "Loop", 3, l_in, 2, l_out);
    /* the body: (iteration, condition, v) -> (condition, -v, |v|) */
    body.g.name = "body";
    body.ins[body.g.n_input++] = value(&body, "i", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL);
    body.ins[body.g.n_input++] = value(&body, "c_in", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL);
    body.ins[body.g.n_input++] = value(&body, "v_in", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, d3);
    node(&body, cond_op, 1, c_in, 1, c_out);
    node(&body, "Neg", 1, v_in, 1, v_out);
    node(&body, "Abs", 1, v_in, 1, s_out);
    body.outs[body.g.n_output++] =
        value(&body, "c_out", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL);
    body.outs[body.g.n_output++] =
        value(&body, "v_out", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, d3);
    body.outs[body.g.n_output++] =
        value(&body, "s_out", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, d3);
    if (flaw == 1)
        body.pnodes[1]->op_type = NULL;
    if (flaw == 2)
        body.outs[2]->name = NULL;
    static Onnx__AttributeProto ba, *pba[1];
    onnx__attribute_proto__init(&ba);
    ba.name = "body";
    ba.has_type = 1, ba.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    ba.g = &body.g;
    pba[0] = &ba;
    b.pnodes[0]->n_attribute = 1;
    b.pnodes[0]->attribute = pba;
    tj_onnx_model *m = load_built(&b, "loop");
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return;
    const float vv[3] = {1.5f, -2, 0.25f};
    tj_tensor *args[2] = {tj_tensor_from_data(TJ_F32, 1, d3, vv), tj_scalar_i64(m_value)};
    tj_tensor *r = tj_onnx_call(m, m_is_input ? 2 : 1, args);
    if (want_error) {
        CHECK(tj_status_of(r) != TJ_OK);
        CHECK_HAS(tj_error_message(r), want_error);
    } else {
        CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
        tj_tensor *vf = tj_tuple_get(r, 0), *st = tj_tuple_get(r, 1);
        CHECK_EQ_INT(tj_tensor_rank(st), 2);
        CHECK_EQ_INT(tj_tensor_dims(st)[0], m_value);
        for (int i = 0; i < 3 && !tj_status_of(r); i++) {
            CHECK_NEAR(tj_tensor_get_f64(vf, i), m_value % 2 ? -vv[i] : vv[i], 0);
            for (int row = 0; row < m_value; row++)
                CHECK_NEAR(tj_tensor_get_f64(st, row * 3 + i), fabs(vv[i]), 0);
        }
    }
    tj_onnx_free(m);
}

/* ---- raw protobuf: models nested too deep for a recursive unpacker ------------------------- */
static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v > 0x7f)
        v >>= 7, n++;
    return n;
}
static uint8_t *put_varint(uint8_t *p, uint64_t v) {
    do {
        *p++ = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return p;
}
/* A chain of length-delimited fields, fields[0] outermost, around a payload (a varint field):
 * each level's length is known from the inside out, so the headers are written outermost first
 * and nothing is copied twice. Caller frees. */
static uint8_t *chain(const int *fields, size_t n_fields, size_t *size) {
    static const uint8_t payload[2] = {0x08, 0x01};
    size_t *len = malloc((n_fields + 1) * sizeof *len);
    len[n_fields] = sizeof payload;
    for (size_t i = n_fields; i-- > 0;)
        len[i] = varint_len((uint64_t)fields[i] << 3 | 2) + varint_len(len[i + 1]) + len[i + 1];
    uint8_t *out = malloc(len[0]), *p = out;
    for (size_t i = 0; i < n_fields; i++) {
        p = put_varint(p, (uint64_t)fields[i] << 3 | 2);
        p = put_varint(p, len[i + 1]);
    }
    memcpy(p, payload, sizeof payload);
    *size = len[0];
    free(len);
    return out;
}
/* A model whose graph holds a node whose attribute holds a graph ... `levels` graphs deep (an
 * If chain: Model.graph = 7, Graph.node = 1, Node.attribute = 5, Attribute.g = 6); or whose
 * input's type is a sequence of a sequence ... `levels` deep (Graph.input = 11, ValueInfo.type =
 * 2, TypeProto.sequence_type = 4, Sequence.elem_type = 1). */
static void too_deep(int levels, int types, const char *want) {
    size_t n = types ? 3 + 2 * (size_t)levels : 1 + 3 * (size_t)levels, k = 0, size;
    int *f = malloc(n * sizeof *f);
    f[k++] = 7;
    if (types)
        f[k++] = 11, f[k++] = 2;
    for (int l = 0; l < levels; l++) {
        if (types)
            f[k++] = 4, f[k++] = 1;
        else
            f[k++] = 1, f[k++] = 5, f[k++] = 6;
    }
    uint8_t *bytes = chain(f, k, &size);
    tj_onnx_model *m = tj_onnx_load_bytes(bytes, size, "deep.onnx", NULL);
    CHECK(m == NULL);
    CHECK_HAS(tj_last_error(), want);
    tj_onnx_free(m);
    free(bytes);
    free(f);
}

/* A grouped Conv (group=2, and depthwise: group = C) is one convolution, not one per group: its
 * values against tj_conv2d of the NHWC input and HWIO filter, and one conv2d node in the graph
 * (a ShuffleNet-class model became 4,633 kernels when each group was its own convolution). */
static void grouped_conv(int64_t groups, int64_t c, int64_t m) {
    builder b;
    init(&b, 13);
    static char *in[2] = {"x", "w"}, *out[1] = {"y"};
    static int64_t wd[4];
    static float wv[4 * 8 * 9];
    wd[0] = m, wd[1] = c / groups, wd[2] = 3, wd[3] = 3;
    size_t nw = (size_t)(m * (c / groups) * 9);
    for (size_t k = 0; k < nw; k++)
        wv[k] = (float)((k * 7) % 11) * 0.125f - 0.5f;
    int64_t xd[4] = {1, c, 6, 5}, yd[4] = {-1, -1, -1, -1};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, xd);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, yd);
    init_f32(&b, "w", 4, wd, wv, nw);
    node(&b, "Conv", 2, in, 1, out);
    attr_i(&b, "group", groups);
    tj_onnx_model *md = load_built(&b, "grouped_conv.onnx");
    CHECK_MSG(md != NULL, "%s", tj_last_error());
    if (!md)
        return;
    tj_scope_begin();
    tj_tensor *x = tj_random_uniform(TJ_F32, 4, xd, -1, 1, 9);
    tj_tensor *y = tj_onnx_call(md, 1, &x);
    CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
    /* the same with tracejit's ops: NCHW -> NHWC, OIHW -> HWIO, grouped conv2d, back */
    tj_tensor *w = tj_tensor_from_data(TJ_F32, 4, wd, wv);
    tj_tensor *ref =
        tj_transpose(tj_conv2d(tj_transpose(x, (int[]){0, 2, 3, 1}),
                               tj_transpose(w, (int[]){2, 3, 1, 0}), NULL, TJ_PAD_VALID, NULL),
                     (int[]){0, 3, 1, 2});
    int bad = 0;
    for (int64_t i = 0; i < tj_tensor_numel(ref) && !tj_status_of(y); i++)
        bad += fabs(tj_tensor_get_f64(y, i) - tj_tensor_get_f64(ref, i)) > 1e-5;
    CHECK_EQ_INT(tj_tensor_numel(y), tj_tensor_numel(ref));
    CHECK_EQ_INT(bad, 0);
    tj_spec sp = {TJ_F32, 4, {1, c, 6, 5}, NULL};
    char *text = tj_concrete_graph_text(tj_function_get_concrete(tj_onnx_function(md), 1, &sp));
    CHECK_MSG(text && check_count_of(text, "= conv2d ") == 1, "%d conv2d nodes",
              text ? check_count_of(text, "= conv2d ") : -1);
    free(text);
    tj_scope_end();
    tj_onnx_free(md);
}

/* Weights laid out when the model is read (model.c: prelay): a filter two Convs share, and the
 * same filter also a graph output (kept as the file has it: the output is OIHW); a Gemm's B read
 * with transB by one node and as it is by another (kept), and one read only with transB (laid
 * out). Every value against tracejit's ops on the file's layout. */
static void prelaid_weights(int w_is_output) {
    builder b;
    init(&b, 13);
    static char *c1[2] = {"x", "w"}, *o1[1] = {"c1"}, *o2[1] = {"c2"}, *a1[2] = {"c1", "c2"},
                *oy[1] = {"y"}, *g1[2] = {"a", "bsq"}, *og1[1] = {"g1"}, *og2[1] = {"g2"},
                *g3[2] = {"a", "bt"}, *og3[1] = {"g3"};
    static int64_t wd4[4] = {3, 2, 3, 3}, sqd[2] = {4, 4}, btd[2] = {3, 4};
    static float wv[54], sq[16], bt[12];
    for (int k = 0; k < 54; k++)
        wv[k] = (float)((k * 5) % 13) * 0.1f - 0.6f;
    for (int k = 0; k < 16; k++)
        sq[k] = (float)((k * 3) % 7) * 0.25f - 0.75f;
    for (int k = 0; k < 12; k++)
        bt[k] = (float)(k % 5) * 0.5f - 1.0f;
    int64_t xd[4] = {1, 2, 6, 5}, ad[2] = {2, 4}, yd[4] = {-1, -1, -1, -1}, gd[2] = {-1, -1};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, xd);
    b.ins[b.g.n_input++] = value(&b, "a", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, ad);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, yd);
    b.outs[b.g.n_output++] = value(&b, "g1", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, gd);
    b.outs[b.g.n_output++] = value(&b, "g2", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, gd);
    b.outs[b.g.n_output++] = value(&b, "g3", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, gd);
    if (w_is_output)
        b.outs[b.g.n_output++] = value(&b, "w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, wd4);
    init_f32(&b, "w", 4, wd4, wv, 54);
    init_f32(&b, "bsq", 2, sqd, sq, 16);
    init_f32(&b, "bt", 2, btd, bt, 12);
    node(&b, "Conv", 2, c1, 1, o1);
    node(&b, "Conv", 2, c1, 1, o2);
    node(&b, "Add", 2, a1, 1, oy);
    node(&b, "Gemm", 2, g1, 1, og1);
    attr_i(&b, "transB", 1);
    node(&b, "Gemm", 2, g1, 1, og2);
    node(&b, "Gemm", 2, g3, 1, og3);
    attr_i(&b, "transB", 1);
    tj_onnx_model *md = load_built(&b, "prelaid.onnx");
    CHECK_MSG(md != NULL, "%s", tj_last_error());
    if (!md)
        return;
    tj_scope_begin();
    tj_tensor *args[2] = {tj_random_uniform(TJ_F32, 4, xd, -1, 1, 5),
                          tj_random_uniform(TJ_F32, 2, ad, -1, 1, 6)};
    tj_tensor *w = tj_tensor_from_data(TJ_F32, 4, wd4, wv),
              *bs = tj_tensor_from_data(TJ_F32, 2, sqd, sq),
              *btt = tj_tensor_from_data(TJ_F32, 2, btd, bt);
    tj_tensor *conv =
        tj_transpose(tj_conv2d(tj_transpose(args[0], (int[]){0, 2, 3, 1}),
                               tj_transpose(w, (int[]){2, 3, 1, 0}), NULL, TJ_PAD_VALID, NULL),
                     (int[]){0, 3, 1, 2});
    tj_tensor *want[5] = {tj_add(conv, conv), tj_matmul(args[1], tj_transpose(bs, NULL)),
                          tj_matmul(args[1], bs), tj_matmul(args[1], tj_transpose(btt, NULL)), w};
    for (int rep = 0; rep < 2; rep++) { /* the interpreter's first call, then native code */
        if (rep == 1)
            CHECK_EQ_INT(tj_onnx_wait_compiled(md), TJ_OK);
        tj_tensor *y = tj_onnx_call(md, 2, args);
        CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
        CHECK_EQ_INT(tj_tuple_size(y), 4 + w_is_output);
        for (int k = 0; k < 4 + w_is_output && !tj_status_of(y); k++) {
            tj_tensor *got = tj_tuple_get(y, k);
            int bad = tj_tensor_numel(got) != tj_tensor_numel(want[k]) ||
                      tj_tensor_rank(got) != tj_tensor_rank(want[k]);
            for (int64_t i = 0; !bad && i < tj_tensor_numel(got); i++)
                bad += fabs(tj_tensor_get_f64(got, i) - tj_tensor_get_f64(want[k], i)) > 1e-5;
            for (int d = 0; !bad && d < tj_tensor_rank(got); d++)
                bad += tj_tensor_dims(got)[d] != tj_tensor_dims(want[k])[d];
            CHECK_MSG(!bad, "prelaid weights%s: output %d differs", w_is_output ? " (w out)" : "",
                      k);
        }
    }
    tj_scope_end();
    tj_onnx_free(md);
}

/* A Conv's filter that an If's branches also read: the then branch returns the initializer
 * itself (a subgraph output naming it), the else branch its Neg, or (else_reads 0) another
 * initializer v, so that only the then branch's output uses w. Such a filter keeps the file's
 * layout (OIHW): the branches see w, and the Conv still computes with it. */
static void prelaid_if_branches(int else_reads) {
    builder b;
    init(&b, 13);
    static char *c1[2] = {"x", "w"}, *o1[1] = {"y"}, *in[1] = {"c"}, *out[1] = {"z"},
                *e_in[1] = {"w"}, *e_out[1] = {"e"};
    static int64_t wd4[4] = {3, 2, 3, 3};
    static float wv[54];
    for (int k = 0; k < 54; k++)
        wv[k] = (float)((k * 7) % 11) * 0.1f - 0.5f;
    int64_t xd[4] = {1, 2, 6, 5}, yd[4] = {-1, -1, -1, -1};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, xd);
    b.ins[b.g.n_input++] = value(&b, "c", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, yd);
    b.outs[b.g.n_output++] = value(&b, "z", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, wd4);
    init_f32(&b, "w", 4, wd4, wv, 54);
    init_f32(&b, "v", 4, wd4, wv, 54);
    node(&b, "Conv", 2, c1, 1, o1);
    node(&b, "If", 1, in, 1, out);
    static char *t_out[1] = {"w"}, *v_out[1] = {"v"};
    if_node(&b, 1, (const char *[]){NULL, else_reads ? "Neg" : NULL}, (char **[]){NULL, e_in},
            (char **[]){t_out, else_reads ? e_out : v_out}, 4, wd4);
    tj_onnx_model *md = load_built(&b, "prelaid_if.onnx");
    CHECK_MSG(md != NULL, "%s", tj_last_error());
    if (!md)
        return;
    tj_scope_begin();
    tj_tensor *x = tj_random_uniform(TJ_F32, 4, xd, -1, 1, 7);
    tj_tensor *w = tj_tensor_from_data(TJ_F32, 4, wd4, wv);
    tj_tensor *conv =
        tj_transpose(tj_conv2d(tj_transpose(x, (int[]){0, 2, 3, 1}),
                               tj_transpose(w, (int[]){2, 3, 1, 0}), NULL, TJ_PAD_VALID, NULL),
                     (int[]){0, 3, 1, 2});
    for (int rep = 0; rep < 4; rep++) { /* each branch, on the interpreter and on native code */
        if (rep == 2)
            CHECK_EQ_INT(tj_onnx_wait_compiled(md), TJ_OK);
        int then = rep % 2 == 0;
        tj_tensor *args[2] = {x, tj_scalar_bool(then)};
        tj_tensor *y = tj_onnx_call(md, 2, args);
        CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
        if (tj_status_of(y))
            continue;
        tj_tensor *want[2] = {conv, then || !else_reads ? w : tj_neg(w)};
        for (int k = 0; k < 2; k++) {
            tj_tensor *got = tj_tuple_get(y, k);
            int bad = tj_tensor_rank(got) != 4;
            for (int d = 0; !bad && d < 4; d++)
                bad += tj_tensor_dims(got)[d] != tj_tensor_dims(want[k])[d];
            for (int64_t i = 0; !bad && i < tj_tensor_numel(got); i++)
                bad += fabs(tj_tensor_get_f64(got, i) - tj_tensor_get_f64(want[k], i)) > 1e-5;
            CHECK_MSG(!bad, "filter read by If branches (%s branch): output %d differs",
                      then ? "then" : "else", k);
        }
    }
    tj_scope_end();
    tj_onnx_free(md);
}

/* Scan over the rows of x [3, 2] with no state: the body gives Neg(row), stacked. Direction 1
 * stacks the rows reversed; a direction other than 0 or 1, or a num_scan_inputs that does not
 * fit the inputs (2^31 overflowed a subtraction before the check), is refused by name. */
static void scan_directions(int64_t n_scan, int64_t direction, const char *want_error) {
    builder b, body;
    init(&b, 13);
    init(&body, 13);
    static char *s_in[1] = {"x"}, *s_out[1] = {"y"}, *r_in[1] = {"r"}, *r_out[1] = {"o"};
    int64_t xd[2] = {3, 2}, rd[1] = {2};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd);
    node(&b, "Scan", 1, s_in, 1, s_out);
    body.g.name = "body";
    body.ins[body.g.n_input++] = value(&body, "r", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, rd);
    node(&body, "Neg", 1, r_in, 1, r_out);
    body.outs[body.g.n_output++] = value(&body, "o", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, rd);
    static Onnx__AttributeProto a[3], *pa[3];
    static int64_t dir[1];
    dir[0] = direction;
    for (int k = 0; k < 3; k++) {
        onnx__attribute_proto__init(&a[k]);
        a[k].has_type = 1;
        pa[k] = &a[k];
    }
    a[0].name = "body", a[0].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH, a[0].g = &body.g;
    a[1].name = "num_scan_inputs", a[1].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a[1].has_i = 1, a[1].i = n_scan;
    a[2].name = "scan_input_directions", a[2].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a[2].n_ints = 1, a[2].ints = dir;
    b.pnodes[0]->n_attribute = 3;
    b.pnodes[0]->attribute = pa;
    tj_onnx_model *m = load_built(&b, "scan");
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return;
    const float xv[6] = {1, 2, 3, 4, 5, 6};
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 2, xd, xv);
    tj_tensor *y = tj_onnx_call(m, 1, &x);
    if (want_error) {
        CHECK(tj_status_of(y) != TJ_OK);
        CHECK_HAS(tj_error_message(y), want_error);
    } else {
        CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
        for (int i = 0; i < 6 && !tj_status_of(y); i++) {
            int row = direction ? 2 - i / 2 : i / 2;
            CHECK_NEAR(tj_tensor_get_f64(y, i), -xv[row * 2 + i % 2], 0);
        }
    }
    tj_onnx_free(m);
}

/* Scatter, Compress, TopK, Einsum and BitShift refuse what does not fit, naming the node. */
static void index_op_errors(void) {
    static int64_t k5[1] = {5}, c4[4] = {1, 0, 1, 1}, one[1] = {1};
    index_error("TopK", 11, k5, 1, "axis", 1, NULL, "(TopK, opset 11): k = 5 along axis 1");
    index_error("Compress", 11, c4, 4, "axis", 1, NULL,
                "(Compress, opset 11): condition has 4 elements, the axis only 3");
    index_error("Einsum", 12, NULL, 0, "equation", 0, "ij,jk->ik",
                "(Einsum, opset 12): equation 'ij,jk->ik' has 2 terms for 1 inputs");
    index_error("Einsum", 12, NULL, 0, "equation", 0, "ij->k", "output letter 'k' is in no input");
    index_error("Einsum", 12, NULL, 0, "equation", 0, "ij2->i", "bad term 0");
    index_error("Einsum", 12, NULL, 0, "equation", 0, "ijk->i", "term 0 of 'ijk->i' does not fit");
    index_error("BitShift", 11, one, 1, "direction", 0, "UP",
                "direction is 'UP', not LEFT or RIGHT");
    index_error("GridSample", 16, one, 1, NULL, 0, NULL,
                "(GridSample, opset 16): X of rank 2 and grid of rank 1");
    index_error("MaxUnpool", 11, one, 1, NULL, 0, NULL,
                "(MaxUnpool, opset 11): X of rank 2 and indices of another shape");
    /* ScatterElements with an index past the axis: an error when the model runs */
    builder b;
    init(&b, 16);
    static char *in[3] = {"x", "i", "u"}, *out[1] = {"y"};
    static int64_t iv[1] = {7}, id[2] = {1, 1};
    static float uv[1] = {1};
    int64_t xd[2] = {2, 3};
    b.ins[b.g.n_input++] = value(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd);
    b.outs[b.g.n_output++] = value(&b, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd);
    init_i64(&b, "i", 2, id, iv, 1);
    init_f32(&b, "u", 2, id, uv, 1);
    node(&b, "ScatterElements", 3, in, 1, out);
    attr_i(&b, "axis", 1);
    tj_onnx_model *m = load_built(&b, "scatter");
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return;
    tj_tensor *x = tj_zeros(TJ_F32, 2, xd);
    tj_tensor *y = tj_onnx_call(m, 1, &x);
    CHECK_EQ_INT(tj_status_of(y), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(y), "scatter_add: index -1 out of range [0, 6)");
    tj_onnx_free(m);
}

/* tj_onnx_write_tensor: what it writes reads back the same (each dtype it takes); what it cannot
 * write is an error naming the file or the reason. */
static void write_tensors(void) {
    char dir[] = "/tmp/tj_onnx_wXXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/t.pb", dir);
    tj_dtype dts[5] = {TJ_F32, TJ_F64, TJ_I32, TJ_I64, TJ_BOOL};
    int64_t d[2] = {2, 3};
    for (int k = 0; k < 5; k++) {
        tj_tensor *t = tj_cast(tj_reshape(tj_range(TJ_F64, -2, 4, 1), 2, d), dts[k]);
        CHECK_EQ_INT(tj_onnx_write_tensor(path, t, "t"), TJ_OK);
        tj_tensor *r = tj_onnx_read_tensor(path);
        CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
        CHECK_EQ_INT(tj_tensor_dtype(r), dts[k]);
        CHECK_EQ_INT(tj_tensor_rank(r), 2);
        for (int64_t i = 0; i < 6 && !tj_status_of(r); i++)
            CHECK_NEAR(tj_tensor_get_f64(r, i), tj_tensor_get_f64(t, i), 0);
    }
    CHECK_EQ_INT(tj_onnx_write_tensor(NULL, tj_scalar_f64(1), NULL), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "the path is NULL");
    CHECK_EQ_INT(tj_onnx_write_tensor(path, NULL, NULL), TJ_ERR_INVALID);
    tj_tensor *e = tj_error_new(TJ_ERR_SHAPE, "boom");
    CHECK_EQ_INT(tj_onnx_write_tensor(path, e, NULL), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "not a concrete tensor (boom)");
    const char *sv[1] = {"s"};
    tj_tensor *s = tj_tensor_from_data(TJ_STRING, 0, NULL, sv);
    CHECK_EQ_INT(tj_onnx_write_tensor(path, s, NULL), TJ_ERR_UNSUPPORTED);
    CHECK_HAS(tj_last_error(), "dtype string");
    CHECK_EQ_INT(tj_onnx_write_tensor("/nonexistent/dir/t.pb", tj_scalar_f64(1), NULL), TJ_ERR_IO);
    CHECK_HAS(tj_last_error(), "cannot write /nonexistent/dir/t.pb");
    remove(path);
    remove(dir);
}

int main(void) {
    /* a disk cache of this run's: tiers() checks a first call on the interpreter, which code an
     * earlier run left on disk would skip (read once, before the first call) */
    char cache[] = "/tmp/tj-onnx-import-XXXXXX";
    if (mkdtemp(cache))
        setenv("TJ_CACHE_DIR", cache, 1);
    /* every tensor below belongs to this scope (or a test's own): none is released by hand */
    tj_scope_begin();
    converter_errors();
    index_op_errors();
    sampling_error("GridSample", 16, "mode", "area",
                   "(GridSample, opset 16): mode 'area' with padding_mode 'zeros'");
    sampling_error("GridSample", 16, "padding_mode", "wrap",
                   "mode 'bilinear' with padding_mode 'wrap'");
    sampling_error("RoiAlign", 16, NULL, NULL,
                   "(RoiAlign, opset 16): sampling_ratio 0, output 1x1, mode 'avg' (an adaptive");
    sampling_error("RoiAlign", 16, "mode", "median", "mode 'median'");
    det_values();
    quantize(0);
    quantize(1);
    if_branches("x", NULL);
    if_branches("nowhere", "(Abs, opset 13): input 0 'nowhere' is not produced");
    large_initializers();
    loop_stacked(0, 3, "Identity", 0, NULL);
    loop_stacked(1, 4, "Identity", 0, NULL);
    loop_stacked(1, 0, "Identity", 0, "stacked outputs need a trip count M >= 1 known when traced");
    loop_stacked(0, 3, "Identity", 1, "node 1 '' (no op type, opset 13): the node has no op type");
    loop_stacked(0, 3, "Identity", 2,
                 "(Loop, opset 13): the body 'body' has a value without a name");
    loop_stacked(0, 3, "Not", 0,
                 "(Loop, opset 13): stacked outputs need a trip count M >= 1 known when traced "
                 "and a condition the body passes on unchanged (M 3)");
    too_deep(3000, 0,
             "onnx: deep.onnx nests graphs (the main graph, If, Loop and Scan bodies) "
             "more than 64 deep");
    too_deep(100000, 1,
             "onnx: deep.onnx nests messages (types in types, graphs in nodes) more "
             "than 256 deep");
    too_deep(40, 0, "deep.onnx"); /* within the limits: refused later, for what it lacks */
    grouped_conv(2, 4, 6);
    grouped_conv(4, 4, 8); /* depthwise, multiplier 2 */
    prelaid_weights(0);
    prelaid_weights(1);
    prelaid_if_branches(1);
    prelaid_if_branches(0);
    scan_directions(1, 0, NULL);
    scan_directions(1, 1, NULL);
    scan_directions(1, 7, "(Scan, opset 13): scan_input_directions[0] is 7, not 0 or 1");
    scan_directions((int64_t)1 << 31, 0, "num_scan_inputs 2147483648 do not fit 1 inputs");
    scan_directions(-1, 0, "num_scan_inputs -1 do not fit 1 inputs");
    write_tensors();
    values_through_nodes();
    resize_values();
    imports_mlp();
    if (!getenv("TJ_BACKEND") && !tj_backend_unavailable("cpu")) /* tiers: interp, then cpu */
        tiers();
    bad_graphs();
    shape_values();
    tj_scope_end();
    tj_cache_clear();
    rmdir(cache);
    return check_done();
}
