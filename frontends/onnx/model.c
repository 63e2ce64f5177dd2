/* model.c — loading an ONNX model and importing its graph by tracing. The protobuf is read with
 * protobuf-c (code generated from onnx.proto at build time); the model is checked once at load
 * (opsets, every node's op known at its opset, every input produced before it: ONNX graphs are
 * topologically sorted, so a cycle or a dangling name is an error naming the node); then the
 * imported function's body, traced once per input signature, walks the nodes calling the op
 * converters (ops.c) on a table of named values: the function's arguments, the initializers
 * (constants of the graph, or variables), and every node's outputs. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

enum { MAX_OPSET = 17 };

/* What a traced body runs: the model, and per input the value it is specialized on (NULL:
 * the argument). */
typedef struct bind {
    const struct tj_onnx_model *m;
    tj_tensor **fixed;
} bind;

typedef struct io {
    const char *name;
    tj_spec spec;
} io;

struct tj_onnx_model {
    uint32_t magic;
    char *path;
    Onnx__ModelProto *p;
    const Onnx__GraphProto *g;
    int opset;
    tj_onnx_options opts;
    io *in, *out;
    int n_in, n_out;
    tj_tensor **inits;   /* per initializer: its value */
    tj_variable **ivars; /* per initializer, with initializers_as_variables */
    const ox_op **ops;   /* per node: its converter */
    tj_function *fn;
    bind generic;      /* the body of fn: no values fixed */
    uint8_t *is_value; /* per input: read as values by some node (a shape, axes) */
    int n_values;
    struct spec *specs; /* functions specialized on those values (tj_onnx_call), newest first */
    int n_specs;
    uint8_t *prelaid; /* per node of the main graph: its input 1 is an initializer laid out
                         at load as the converter takes it (prelay) */
};

/* A function of the model specialized on the values of its value inputs. */
typedef struct spec {
    struct spec *next;
    uint64_t key;
    bind b;
    tj_function *fn;
} spec;
enum { MAX_SPECS = 16 };
#define OX_MAGIC 0x6f6e6e78u

/* ---- errors and attributes --------------------------------------------------------------------
 */
tj_status ox_fail(const ox_node *n, tj_status code, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tj_set_error(code, "onnx: node %d '%s' (%s, opset %d): %s", n->index,
                        n->p->name && *n->p->name ? n->p->name : "",
                        n->p->op_type ? n->p->op_type : "no op type", n->opset, msg);
}

const Onnx__AttributeProto *ox_attr(const ox_node *n, const char *name) {
    for (size_t k = 0; k < n->p->n_attribute; k++)
        if (n->p->attribute[k]->name && !strcmp(n->p->attribute[k]->name, name))
            return n->p->attribute[k];
    return NULL;
}

int64_t ox_attr_i(const ox_node *n, const char *name, int64_t dflt) {
    const Onnx__AttributeProto *a = ox_attr(n, name);
    return a ? a->i : dflt;
}

float ox_attr_f(const ox_node *n, const char *name, float dflt) {
    const Onnx__AttributeProto *a = ox_attr(n, name);
    return a ? a->f : dflt;
}

size_t ox_attr_ints(const ox_node *n, const char *name, const int64_t **v) {
    const Onnx__AttributeProto *a = ox_attr(n, name);
    *v = a ? a->ints : NULL;
    return a ? a->n_ints : 0;
}

const char *ox_attr_s(const ox_node *n, const char *name, const char *dflt, char *buf, size_t cap) {
    const Onnx__AttributeProto *a = ox_attr(n, name);
    if (!a || !a->has_s)
        return dflt;
    size_t len = a->s.len < cap - 1 ? a->s.len : cap - 1;
    if (len)
        memcpy(buf, a->s.data, len);
    buf[len] = 0;
    return buf;
}

/* t's element count with room for its values in *v (malloc'd), or -1 with the error set when
 * they are not known at trace time. */
static int64_t host_values(const ox_node *n, const tj_tensor *t, const char *what, size_t elem,
                           void **v) {
    *v = NULL;
    if (!t || tj_tensor_is_symbolic(t))
        return ox_fail(n, TJ_ERR_UNSUPPORTED,
                       "its %s is computed from the model's inputs; tracejit needs it known "
                       "when the function is traced (a constant, an initializer or a shape)",
                       what),
               -1;
    int64_t numel = tj_tensor_numel(t);
    *v = malloc(((size_t)numel + 1) * elem);
    if (!*v)
        return tj_set_error(TJ_ERR_OOM, "onnx: out of memory"), -1;
    return numel;
}

int64_t ox_host_ints(const ox_node *n, const tj_tensor *t, const char *what, int64_t **v) {
    int64_t numel = host_values(n, t, what, sizeof **v, (void **)v);
    if (numel < 0)
        return -1;
    const void *data = tj_tensor_data(t);
    for (int64_t i = 0; i < numel; i++) {
        switch (tj_tensor_dtype(t)) {
        case TJ_I64:
            (*v)[i] = ((const int64_t *)data)[i];
            break;
        case TJ_I32:
            (*v)[i] = ((const int32_t *)data)[i];
            break;
        case TJ_BOOL:
            (*v)[i] = ((const uint8_t *)data)[i] != 0;
            break;
        default: { /* floats: clamped into int64's range (NaN: 0) */
            double x = tj_tensor_get_f64(t, i);
            (*v)[i] = x != x ? 0 : x >= 9.2e18 ? INT64_MAX : x <= -9.2e18 ? INT64_MIN : (int64_t)x;
        }
        }
    }
    return numel;
}

int64_t ox_host_f64(const ox_node *n, const tj_tensor *t, const char *what, double **v) {
    int64_t numel = host_values(n, t, what, sizeof **v, (void **)v);
    if (numel < 0)
        return -1;
    for (int64_t i = 0; i < numel; i++)
        (*v)[i] = tj_tensor_get_f64(t, i);
    return numel;
}

/* float16 / bfloat16 are storage types in tracejit: a node given them (but Cast and CastLike,
 * which convert directly) computes in float32, its half inputs cast up in place; returns the
 * dtype its float32 results are rounded back to (that of its first non-bool input when half),
 * or 0. */
static int compute_half(const Onnx__NodeProto *p, tj_tensor **in) {
    if (!strcmp(p->op_type, "Cast") || !strcmp(p->op_type, "CastLike"))
        return 0;
    int back = 0, first = 1;
    for (size_t k = 0; k < p->n_input; k++) {
        if (!in[k] || tj_status_of(in[k]))
            continue;
        tj_dtype dt = tj_tensor_dtype(in[k]);
        if ((dt == TJ_F16 || dt == TJ_BF16)) {
            back = first ? (int)dt : back;
            in[k] = tj_cast(in[k], TJ_F32);
        }
        first &= dt == TJ_BOOL;
    }
    return back;
}

const ox_op *ox_find_op(const char *op_type, int opset) {
    if (!op_type)
        return NULL;
    const ox_op *tables[7] = {ox_ops_math,   ox_ops_shape, ox_ops_nn,     ox_ops_conv,
                              ox_ops_resize, ox_ops_index, ox_ops_control};
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
        for (const ox_op *o = tables[t]; o->name; o++)
            if (!strcmp(o->name, op_type))
                return opset >= o->since ? o : NULL;
    return NULL;
}

/* The inputs whose values some node reads (a shape, axes, sizes), directly or through nodes
 * computing them (Range(0, n) of an input n): walking the nodes backwards, a node with an output
 * that is read as values has all its inputs read as values, except Shape and Size, whose outputs
 * depend on shapes only. Those inputs are specialized on (tj_onnx_call). */
static tj_status mark_value_inputs(tj_onnx_model *m) {
    const Onnx__GraphProto *g = m->p->graph;
    ox_names names = {0}; /* the names read as values */
    tj_status st = TJ_OK;
    for (size_t i = g->n_node; i-- > 0 && !st;) {
        const Onnx__NodeProto *p = g->node[i];
        bool whole = false; /* an output is read as values: so are all the inputs */
        for (size_t o = 0; o < p->n_output && !whole; o++)
            whole = ox_names_get(&names, p->output[o], NULL);
        whole = whole && strcmp(p->op_type, "Shape") && strcmp(p->op_type, "Size");
        for (size_t k = 0; k < p->n_input && !st; k++)
            if ((whole || (k < 32 && ((m->ops[i]->values >> k) & 1))) && *p->input[k] &&
                ox_names_put(&names, p->input[k], 1))
                st = tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    }
    for (int j = 0; j < m->n_in && !st; j++)
        if (ox_names_get(&names, m->in[j].name, NULL)) {
            m->is_value[j] = 1;
            m->n_values++;
        }
    ox_names_free(&names);
    return st;
}

/* ---- the imported function --------------------------------------------------------------------
 */
/* Named values of one trace. Names are borrowed from the model. */
typedef struct env {
    const char **names;
    tj_tensor **vals;
    uint32_t n, cap;
    ox_names index;           /* name -> its latest binding in names/vals */
    const struct env *parent; /* a subgraph's: the enclosing graph's names (outer scope) */
} env;

static tj_tensor *env_get(const env *e, const char *name) {
    uint32_t i;
    for (; e; e = e->parent)
        if (ox_names_get(&e->index, name, &i))
            return e->vals[i];
    return NULL;
}

static void env_free(env *e) {
    free(e->names);
    free(e->vals);
    ox_names_free(&e->index);
}

static int env_put(env *e, const char *name, tj_tensor *v) {
    if (e->n == e->cap) {
        uint32_t cap = e->cap ? 2 * e->cap : 64;
        const char **nn = realloc(e->names, cap * sizeof *nn);
        if (nn)
            e->names = nn;
        tj_tensor **nv = nn ? realloc(e->vals, cap * sizeof *nv) : NULL;
        if (!nv)
            return -1;
        e->vals = nv;
        e->cap = cap;
    }
    if (ox_names_put(&e->index, name, e->n))
        return -1;
    e->names[e->n] = name;
    e->vals[e->n++] = v;
    return 0;
}

/* Converts g's nodes in order into tracejit ops on the names of e (ops[i]: node i's converter,
 * or NULL to look each up: a subgraph's). */
static tj_status run_nodes(const tj_onnx_model *m, const Onnx__GraphProto *g,
                           const ox_op *const *ops, env *e) {
    tj_status st = TJ_OK;
    ox_scope sc = {m, e};
    tj_tensor *stack_in[16], *stack_out[16];
    for (size_t i = 0; i < g->n_node && !st; i++) {
        const Onnx__NodeProto *p = g->node[i];
        ox_node n = {p, (int)i, m->opset, &sc};
        const ox_op *op = ops ? ops[i] : ox_find_op(p->op_type, m->opset);
        /* converters may look at optional inputs past the ones given: those read NULL */
        tj_tensor **in = p->n_input <= 8 ? stack_in : calloc(p->n_input + 8, sizeof *in);
        if (in == stack_in)
            memset(stack_in, 0, sizeof stack_in);
        tj_tensor **out = p->n_output <= 16 ? stack_out : calloc(p->n_output, sizeof *out);
        if (!in || !out) {
            st = tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
        } else if (!p->op_type) { /* a subgraph's nodes are checked here */
            st = ox_fail(&n, TJ_ERR_CORRUPT, "the node has no op type");
        } else if (!op) {
            st = ox_fail(&n, TJ_ERR_UNSUPPORTED, "op %s is not supported by tracejit", p->op_type);
        } else {
            for (size_t k = 0; k < p->n_input && !st; k++) {
                in[k] = p->input[k][0] ? env_get(e, p->input[k]) : NULL;
                if (!in[k] && p->input[k][0]) /* a subgraph's names are checked here */
                    st = ox_fail(&n, TJ_ERR_INVALID, "input %zu '%s' is not produced", k,
                                 p->input[k]);
            }
            for (size_t k = 0; k < p->n_output; k++)
                out[k] = NULL;
            /* inputs all known (initializers, constants, shapes): computed now, eagerly, so that
             * what needs values (a Reshape's target) can read them */
            int known = !st;
            for (size_t k = 0; k < p->n_input; k++)
                known &= !in[k] || !tj_tensor_is_symbolic(in[k]);
            if (known)
                tj_init_scope_begin();
            int half = st ? 0 : compute_half(p, in);
            if (!st)
                st = op->fn(&n, (int)p->n_input, in, (int)p->n_output, out);
            for (size_t k = 0; k < p->n_output && half && !st; k++)
                if (out[k] && tj_tensor_dtype(out[k]) == TJ_F32)
                    out[k] = tj_cast(out[k], (tj_dtype)half);
            if (known)
                tj_init_scope_end();
            for (size_t k = 0; k < p->n_output && !st; k++) {
                if (!out[k] && p->output[k][0])
                    st = ox_fail(&n, TJ_ERR_UNSUPPORTED, "output %zu ('%s') is not produced", k,
                                 p->output[k]);
                else if (out[k] && tj_status_of(out[k]))
                    st = ox_fail(&n, tj_status_of(out[k]), "%s", tj_error_message(out[k]));
                else if (out[k] && env_put(e, p->output[k], out[k]))
                    st = tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
            }
        }
        if (in != stack_in)
            free(in);
        if (out != stack_out)
            free(out);
    }
    return st;
}

tj_status ox_subgraph(const ox_node *n, const Onnx__GraphProto *g, int n_in, tj_tensor *const *in,
                      int n_out, tj_tensor **out) {
    if (!n->scope || !g)
        return ox_fail(n, TJ_ERR_INVALID, "a subgraph outside a model's trace");
    if ((int)g->n_input != n_in || (int)g->n_output != n_out)
        return ox_fail(n, TJ_ERR_SHAPE,
                       "the body '%s' takes %zu inputs and gives %zu outputs, "
                       "%d and %d expected",
                       g->name ? g->name : "", g->n_input, g->n_output, n_in, n_out);
    bool unnamed = false; /* a name is optional in the proto, and looked up below */
    for (size_t k = 0; k < g->n_input; k++)
        unnamed |= !g->input[k]->name;
    for (size_t k = 0; k < g->n_initializer; k++)
        unnamed |= !g->initializer[k]->name;
    for (size_t k = 0; k < g->n_output; k++)
        unnamed |= !g->output[k]->name;
    if (unnamed)
        return ox_fail(n, TJ_ERR_CORRUPT, "the body '%s' has a value without a name",
                       g->name ? g->name : "");
    env e = {.parent = n->scope->e};
    tj_status st = TJ_OK;
    for (int k = 0; k < n_in && !st; k++)
        if (env_put(&e, g->input[k]->name, in[k]))
            st = tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    for (size_t k = 0; k < g->n_initializer && !st; k++) {
        tj_tensor *v = ox_tensor(g->initializer[k], g->initializer[k]->name);
        if (tj_status_of(v))
            st = ox_fail(n, tj_status_of(v), "%s", tj_error_message(v));
        else if (env_put(&e, g->initializer[k]->name, v))
            st = tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    }
    if (!st)
        st = run_nodes(n->scope->m, g, NULL, &e);
    for (int k = 0; k < n_out && !st; k++)
        if (!(out[k] = env_get(&e, g->output[k]->name)))
            st = ox_fail(n, TJ_ERR_INVALID, "the body's output '%s' is not produced",
                         g->output[k]->name);
    env_free(&e);
    return st;
}

/* The traced body: args are the graph's non-initializer inputs. Tensors made here belong to
 * the trace's scope. */
static tj_tensor *body(int nargs, tj_tensor *const *args, void *user) {
    const bind *bd = user;
    const tj_onnx_model *m = bd->m;
    const Onnx__GraphProto *g = m->g;
    env e = {0};
    tj_status st = TJ_OK;
    for (int k = 0; k < m->n_in && !st; k++)
        if (env_put(&e, m->in[k].name, bd->fixed && bd->fixed[k] ? bd->fixed[k] : args[k]))
            st = tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    for (size_t k = 0; k < g->n_initializer && !st; k++) {
        tj_tensor *v = m->ivars ? tj_variable_read(m->ivars[k]) : m->inits[k];
        if (env_put(&e, g->initializer[k]->name, v))
            st = tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    }
    if (!st)
        st = run_nodes(m, g, m->ops, &e);
    tj_tensor *r = NULL;
    if (st) {
        r = tj_error_new(st, "%s", tj_last_error());
    } else if (m->n_out == 1) {
        r = env_get(&e, m->out[0].name);
    } else {
        tj_tensor **outs = calloc((size_t)m->n_out + 1, sizeof *outs);
        for (int k = 0; outs && k < m->n_out; k++)
            outs[k] = env_get(&e, m->out[k].name);
        r = outs ? tj_tuple(m->n_out, outs) : tj_error_new(TJ_ERR_OOM, "onnx: out of memory");
        free(outs);
    }
    env_free(&e);
    return r;
}

/* ---- loading ----------------------------------------------------------------------------------
 */
/* "float32[2,?]" */
static void fmt_type(char *buf, size_t cap, tj_dtype dt, int rank, const int64_t *dims) {
    size_t o = (size_t)snprintf(buf, cap, "%s[", tj_dtype_name(dt));
    for (int d = 0; d < rank && o < cap; d++)
        o += (size_t)(dims[d] < 0
                          ? snprintf(buf + o, cap - o, "%s?", d ? "," : "")
                          : snprintf(buf + o, cap - o, "%s%lld", d ? "," : "", (long long)dims[d]));
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

static tj_status spec_of(const Onnx__ValueInfoProto *v, tj_spec *s, const char *path) {
    memset(s, 0, sizeof *s);
    const Onnx__TypeProto *t = v->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type)
        return tj_set_error(TJ_ERR_UNSUPPORTED,
                            "onnx: %s: '%s' is not a tensor (sequences, maps and optionals are "
                            "not supported)",
                            path, v->name);
    int dt = ox_dtype(t->tensor_type->elem_type);
    if (dt < 0)
        return tj_set_error(TJ_ERR_UNSUPPORTED,
                            "onnx: %s: '%s' has element type %s, which tracejit lacks", path,
                            v->name, ox_type_name(t->tensor_type->elem_type));
    s->dtype = (tj_dtype)dt;
    const Onnx__TensorShapeProto *sh = t->tensor_type->shape;
    if (!sh)
        return tj_set_error(TJ_ERR_UNSUPPORTED, "onnx: %s: '%s' has no shape (unknown rank)", path,
                            v->name);
    if (sh->n_dim > TJ_MAX_RANK)
        return tj_set_error(TJ_ERR_UNSUPPORTED, "onnx: %s: '%s' has rank %zu (over %d)", path,
                            v->name, sh->n_dim, TJ_MAX_RANK);
    s->rank = (int)sh->n_dim;
    for (size_t d = 0; d < sh->n_dim; d++)
        s->dims[d] = sh->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                         ? sh->dim[d]->dim_value
                         : -1;
    return TJ_OK;
}

static int is_initializer(const Onnx__GraphProto *g, const char *name) {
    for (size_t k = 0; k < g->n_initializer; k++)
        if (g->initializer[k]->name && !strcmp(g->initializer[k]->name, name))
            return 1;
    return 0;
}

static tj_status check_graph_in(tj_onnx_model *m, ox_names *known) {
    const Onnx__GraphProto *g = m->g;
    for (size_t k = 0; k < g->n_initializer; k++)
        if (g->initializer[k]->name && ox_names_put(known, g->initializer[k]->name, 1))
            return tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    for (size_t j = 0; j < g->n_input; j++)
        if (g->input[j]->name && ox_names_put(known, g->input[j]->name, 1))
            return tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *p = g->node[i];
        ox_node n = {p, (int)i, m->opset, NULL};
        if (!p->op_type)
            return tj_set_error(TJ_ERR_CORRUPT, "onnx: %s: node %zu has no op type", m->path, i);
        if (p->domain && *p->domain && strcmp(p->domain, "ai.onnx"))
            return ox_fail(&n, TJ_ERR_UNSUPPORTED, "domain '%s' is not supported", p->domain);
        if (!(m->ops[i] = ox_find_op(p->op_type, m->opset)))
            return ox_fail(&n, TJ_ERR_UNSUPPORTED, "op %s is not supported by tracejit",
                           p->op_type);
        const ox_op *op = m->ops[i];
        if ((int)p->n_input < op->min_in || (op->max_in >= 0 && (int)p->n_input > op->max_in))
            return ox_fail(&n, TJ_ERR_CORRUPT, "%zu inputs (takes %d to %d)", p->n_input,
                           op->min_in, op->max_in);
        for (size_t k = 0; k < p->n_input; k++) {
            const char *name = p->input[k];
            if (name[0] && !ox_names_get(known, name, NULL)) /* "": an omitted optional input */
                return ox_fail(&n, TJ_ERR_CORRUPT,
                               "input %zu '%s' is not produced before this node (a cycle, or a "
                               "name nothing defines)",
                               k, name);
        }
        for (size_t o = 0; o < p->n_output; o++)
            if (p->output[o] && ox_names_put(known, p->output[o], 1))
                return tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    }
    for (int k = 0; k < m->n_out; k++)
        if (!ox_names_get(known, m->out[k].name, NULL))
            return tj_set_error(TJ_ERR_CORRUPT, "onnx: %s: output '%s' is produced by no node",
                                m->path, m->out[k].name);
    return TJ_OK;
}

/* ---- weights laid out once -------------------------------------------------------------------
 * A Conv's filter (OIHW) is transposed to HWIO and a Gemm's B with transB to [K, N] when they are
 * traced; with the file's layout held by the model, the constant folder made a second copy of
 * every weight per trace (VGG-19: 550 MB more than ONNX Runtime's peak). An initializer read only
 * as a 2-D Conv's filter or only as a transB Gemm's B (nowhere else, not in a subgraph, not an
 * output) is laid out here, once, into an immutable buffer the traces capture without a copy,
 * and the file's layout is released. */
enum { USE_NONE, USE_FILTER, USE_GEMM_BT, USE_OTHER };

static void note_use(uint8_t *use, uint32_t k, int how) {
    use[k] = use[k] == USE_NONE || use[k] == how ? (uint8_t)how : USE_OTHER;
}

/* How each initializer (idx: name -> index) is read by g's nodes; top: g is the main graph
 * (a subgraph's reads count as other uses). */
static void scan_uses(const tj_onnx_model *m, const Onnx__GraphProto *g, const ox_names *idx,
                      uint8_t *use, int top, int depth) {
    uint32_t k;
    for (size_t i = 0; g && i < g->n_output; i++) /* a graph's (or a branch's) output as it is */
        if (g->output[i]->name && ox_names_get(idx, g->output[i]->name, &k))
            use[k] = USE_OTHER;
    for (size_t i = 0; g && i < g->n_node && depth < OX_MAX_GRAPH_DEPTH; i++) {
        const Onnx__NodeProto *p = g->node[i];
        ox_node n = {p, (int)i, m->opset, NULL};
        /* the main graph is checked (check_graph): every node of the default domain, an op */
        int conv = top && !strcmp(p->op_type, "Conv");
        int gemm_bt = top && !strcmp(p->op_type, "Gemm") && ox_attr_i(&n, "transB", 0) != 0;
        for (size_t j = 0; j < p->n_input; j++) {
            if (!p->input[j] || !ox_names_get(idx, p->input[j], &k))
                continue;
            const tj_tensor *t = m->inits[k];
            int rank = tj_tensor_rank(t);
            note_use(use, k,
                     conv && j == 1 && rank == 4      ? USE_FILTER
                     : gemm_bt && j == 1 && rank == 2 ? USE_GEMM_BT
                                                      : USE_OTHER);
        }
        for (size_t a = 0; a < p->n_attribute; a++) {
            scan_uses(m, p->attribute[a]->g, idx, use, 0, depth + 1);
            for (size_t b = 0; b < p->attribute[a]->n_graphs; b++)
                scan_uses(m, p->attribute[a]->graphs[b], idx, use, 0, depth + 1);
        }
    }
}

static void release_tensor(void *t) {
    tj_release(t);
}

/* t permuted by perm, as an immutable tensor (its own reference); NULL with the error set. */
static tj_tensor *laid_out(tj_tensor *t, const int *perm) {
    tj_scope_begin();
    tj_tensor *p = tj_retain(tj_transpose(t, perm));
    tj_scope_end();
    if (tj_status_of(p)) {
        tj_set_error(tj_status_of(p), "%s", tj_error_message(p));
        tj_release(p);
        return NULL;
    }
    tj_scope_begin();
    tj_tensor *a =
        tj_retain(tj_tensor_adopt(tj_tensor_dtype(p), tj_tensor_rank(p), tj_tensor_dims(p),
                                  tj_tensor_data(p), release_tensor, p));
    tj_scope_end();
    if (tj_status_of(a)) { /* not adopted: p is still this function's (tj_tensor_adopt) */
        tj_set_error(tj_status_of(a), "%s", tj_error_message(a));
        tj_release(a);
        tj_release(p);
        return NULL;
    }
    return a;
}

static tj_status prelay(tj_onnx_model *m) {
    const Onnx__GraphProto *g = m->g;
    ox_names idx = {0};
    uint8_t *use = calloc(g->n_initializer + 1, 1);
    tj_status st = use && (m->prelaid = calloc(g->n_node + 1, 1))
                       ? TJ_OK
                       : tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    for (size_t k = 0; k < g->n_initializer && !st; k++)
        if (g->initializer[k]->name && ox_names_put(&idx, g->initializer[k]->name, (uint32_t)k))
            st = tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    if (!st)
        scan_uses(m, g, &idx, use, 1, 0);
    for (size_t k = 0; k < g->n_initializer && !st; k++) {
        if (use[k] != USE_FILTER && use[k] != USE_GEMM_BT)
            continue;
        tj_tensor *t = laid_out(m->inits[k], use[k] == USE_FILTER ? (const int[]){2, 3, 1, 0}
                                                                  : (const int[]){1, 0});
        if (!t) { /* kept as it is: the converters transpose it */
            use[k] = USE_OTHER;
            continue;
        }
        tj_release(m->inits[k]);
        m->inits[k] = t;
    }
    for (size_t i = 0; i < g->n_node && !st; i++) {
        const Onnx__NodeProto *p = g->node[i];
        uint32_t k;
        m->prelaid[i] = p->n_input > 1 && p->input[1] && ox_names_get(&idx, p->input[1], &k) &&
                        (use[k] == USE_FILTER || use[k] == USE_GEMM_BT);
    }
    ox_names_free(&idx);
    free(use);
    return st;
}

bool ox_prelaid(const ox_node *n) {
    const tj_onnx_model *m = n->scope ? n->scope->m : NULL;
    return m && m->prelaid && n->index >= 0 && (size_t)n->index < m->g->n_node &&
           m->g->node[n->index] == n->p && m->prelaid[n->index];
}

/* Every node input is known before its node (inputs, initializers, earlier outputs: a map of
 * the names defined so far), and every graph output is defined somewhere. */
static tj_status check_graph(tj_onnx_model *m) {
    ox_names known = {0};
    tj_status st = check_graph_in(m, &known);
    ox_names_free(&known);
    return st;
}

static tj_status load(tj_onnx_model *m, const void *data, size_t size, bool mapped) {
    tj_status st = ox_check_depth(m->path, data, size); /* before the recursive unpacker */
    if (st)
        return st;
    m->p = onnx__model_proto__unpack(&ox_pb_allocator, size, data);
    /* the unpacker copied what it keeps: the file's pages leave this process's memory now,
     * before the weights are laid out (the mapping stays valid; the caller unmaps it) */
    if (mapped)
        madvise((void *)((uintptr_t)data & ~(uintptr_t)4095), size + ((uintptr_t)data & 4095),
                MADV_DONTNEED);
    if (!m->p)
        return tj_set_error(TJ_ERR_CORRUPT, "onnx: %s is not an ONNX model (protobuf)", m->path);
    if (!(m->g = m->p->graph))
        return tj_set_error(TJ_ERR_CORRUPT, "onnx: %s has no graph", m->path);
    m->opset = -1;
    for (size_t k = 0; k < m->p->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *o = m->p->opset_import[k];
        if (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx"))
            m->opset = (int)o->version;
    }
    if (m->opset < 1)
        return tj_set_error(TJ_ERR_UNSUPPORTED, "onnx: %s imports no opset of the default domain",
                            m->path);
    if (m->opset > MAX_OPSET)
        return tj_set_error(TJ_ERR_UNSUPPORTED,
                            "onnx: %s: opset %d is newer than this importer knows (%d)", m->path,
                            m->opset, MAX_OPSET);
    const Onnx__GraphProto *g = m->g;
    m->in = calloc(g->n_input + 1, sizeof *m->in);
    m->out = calloc(g->n_output + 1, sizeof *m->out);
    m->inits = calloc(g->n_initializer + 1, sizeof *m->inits);
    m->ops = calloc(g->n_node + 1, sizeof *m->ops);
    if (!m->in || !m->out || !m->inits || !m->ops)
        return tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    for (size_t k = 0; k < g->n_input && !st; k++) {
        if (!g->input[k]->name || !*g->input[k]->name)
            return tj_set_error(TJ_ERR_CORRUPT, "onnx: %s: input %zu has no name", m->path, k);
        if (is_initializer(g, g->input[k]->name))
            continue; /* an input with a default (an initializer): not an argument */
        m->in[m->n_in].name = g->input[k]->name;
        st = spec_of(g->input[k], &m->in[m->n_in++].spec, m->path);
    }
    for (size_t k = 0; k < g->n_output && !st; k++) {
        if (!g->output[k]->name || !*g->output[k]->name)
            return tj_set_error(TJ_ERR_CORRUPT, "onnx: %s: output %zu has no name", m->path, k);
        m->out[m->n_out].name = g->output[k]->name;
        st = spec_of(g->output[k], &m->out[m->n_out++].spec, m->path);
    }
    if (!st && m->n_out == 0)
        st = tj_set_error(TJ_ERR_CORRUPT, "onnx: %s: the graph has no outputs", m->path);
    for (size_t k = 0; k < g->n_initializer && !st; k++) {
        char what[512];
        snprintf(what, sizeof what, "%s: initializer '%s'", m->path,
                 g->initializer[k]->name ? g->initializer[k]->name : "");
        tj_scope_begin(); /* the model keeps its own reference, whatever scope the caller has */
        m->inits[k] = tj_retain(ox_tensor_take(g->initializer[k], what));
        tj_scope_end();
        if (tj_status_of(m->inits[k]))
            st = tj_set_error(tj_status_of(m->inits[k]), "%s", tj_error_message(m->inits[k]));
    }
    if (!st && m->opts.initializers_as_variables) {
        if (!(m->ivars = calloc(g->n_initializer + 1, sizeof *m->ivars)))
            return tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
        for (size_t k = 0; k < g->n_initializer && !st; k++)
            if (!(m->ivars[k] = tj_variable_new(m->inits[k], g->initializer[k]->name)))
                st = tj_set_error(TJ_ERR_INVALID, "onnx: initializer '%s': %s",
                                  g->initializer[k]->name, tj_last_error());
    }
    if (!st)
        st = check_graph(m);
    if (!st && !m->opts.initializers_as_variables) /* on a checked main graph */
        st = prelay(m);
    if (!st && !(m->is_value = calloc((size_t)m->n_in + 1, 1)))
        st = tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    if (!st)
        st = mark_value_inputs(m);
    if (!st) {
        const char *name = g->name && *g->name ? g->name : "onnx_model";
        m->generic.m = m;
        tj_function_options fo = {.tiered = m->opts.compile_first ? -1 : 0};
        if (!(m->fn = tj_function_new_body(name, body, m->n_in, &m->generic, &fo)))
            st = tj_set_error(TJ_ERR_INVALID, "onnx: %s: %s", m->path, tj_last_error());
    }
    return st;
}

static tj_onnx_model *load_bytes(const void *data, size_t size, const char *name,
                                 const tj_onnx_options *opts, bool mapped) {
    tj_onnx_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(name ? name : "the model"))) {
        free(m);
        tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
        return NULL;
    }
    m->magic = OX_MAGIC;
    if (opts)
        m->opts = *opts;
    if (!data) {
        tj_set_error(TJ_ERR_INVALID, "onnx: the model's bytes are NULL");
        tj_onnx_free(m);
        return NULL;
    }
    tj_status st = load(m, data, size, mapped);
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tj_last_error());
        tj_onnx_free(m);
        tj_set_error(st, "%s", msg);
        return NULL;
    }
    return m;
}

tj_onnx_model *tj_onnx_load_bytes(const void *data, size_t size, const char *name,
                                  const tj_onnx_options *opts) {
    return load_bytes(data, size, name, opts, false);
}

tj_onnx_model *tj_onnx_load(const char *path, const tj_onnx_options *opts) {
    if (!path) {
        tj_set_error(TJ_ERR_INVALID, "onnx: the path is NULL");
        return NULL;
    }
    /* mapped, not read: the page cache's pages are unpacked in place, no copy of the file into
     * fresh memory (13 MB for the seed CNN: ~3200 first-touch page faults) */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size <= OX_MAX_FILE) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        close(fd);
        if (p != MAP_FAILED) {
            tj_onnx_model *m = load_bytes(p, (size_t)st.st_size, path, opts, true);
            munmap(p, (size_t)st.st_size);
            return m;
        }
    } else if (fd >= 0) {
        close(fd);
    }
    size_t size = 0; /* not a regular file, empty, or not mappable: read it (errors name it) */
    unsigned char *p = ox_read_file(path, &size);
    if (!p)
        return NULL;
    tj_onnx_model *m = tj_onnx_load_bytes(p, size, path, opts);
    free(p);
    return m;
}

static void spec_free(spec *s, int n_in) {
    tj_function_free(s->fn);
    for (int k = 0; k < n_in; k++)
        tj_release(s->b.fixed[k]);
    free(s->b.fixed);
    free(s);
}

tj_status tj_onnx_wait_compiled(tj_onnx_model *m) {
    if (!m || m->magic != OX_MAGIC)
        return tj_set_error(TJ_ERR_INVALID, "onnx: wait_compiled: not a live model");
    tj_status st = m->fn ? tj_function_wait_compiled(m->fn) : TJ_OK;
    for (spec *s = m->specs; s && !st; s = s->next)
        st = tj_function_wait_compiled(s->fn);
    return st;
}

void tj_onnx_free(tj_onnx_model *m) {
    if (!m || m->magic != OX_MAGIC)
        return;
    tj_function_free(m->fn);
    for (spec *s = m->specs, *nx; s; s = nx) {
        nx = s->next;
        spec_free(s, m->n_in);
    }
    free(m->is_value);
    free(m->prelaid);
    for (size_t k = 0; m->g && k < m->g->n_initializer; k++) {
        if (m->ivars)
            tj_variable_free(m->ivars[k]);
        if (m->inits)
            tj_release(m->inits[k]);
    }
    free(m->ivars);
    free(m->inits);
    free(m->ops);
    free(m->in);
    free(m->out);
    if (m->p)
        onnx__model_proto__free_unpacked(m->p, &ox_pb_allocator);
    free(m->path);
    m->magic = 0;
    free(m);
}

/* ---- calling ----------------------------------------------------------------------------------
 */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Whether s is specialized on exactly the values of args. */
static int spec_matches(const tj_onnx_model *m, const spec *s, tj_tensor *const *args) {
    for (int k = 0; k < m->n_in; k++) {
        if (!m->is_value[k])
            continue;
        const tj_tensor *a = args[k], *b = s->b.fixed[k];
        size_t bytes = (size_t)tj_tensor_numel(a) * tj_dtype_size(tj_tensor_dtype(a));
        if (tj_tensor_dtype(a) != tj_tensor_dtype(b) || tj_tensor_rank(a) != tj_tensor_rank(b) ||
            tj_tensor_numel(a) != tj_tensor_numel(b) ||
            memcmp(tj_tensor_dims(a), tj_tensor_dims(b), (size_t)tj_tensor_rank(a) * 8) ||
            (bytes && memcmp(tj_tensor_data(a), tj_tensor_data(b), bytes)))
            return 0;
    }
    return 1;
}

tj_tensor *tj_onnx_call(tj_onnx_model *m, int nargs, tj_tensor *const *args) {
    if (!m || m->magic != OX_MAGIC)
        return tj_error_new(TJ_ERR_INVALID, "onnx: call: not a live model");
    if (nargs != m->n_in || (nargs && !args))
        return tj_error_new(TJ_ERR_SIGNATURE, "onnx: call: %s takes %d inputs, %d given", m->path,
                            m->n_in, nargs);
    for (int k = 0; k < nargs; k++) { /* the graph's declared input types, checked by name */
        const tj_spec *s = &m->in[k].spec;
        if (!args[k] || tj_status_of(args[k]))
            continue;
        char have[160], want[160];
        fmt_type(have, sizeof have, tj_tensor_dtype(args[k]), tj_tensor_rank(args[k]),
                 tj_tensor_dims(args[k]));
        fmt_type(want, sizeof want, s->dtype, s->rank, s->dims);
        int ok = tj_tensor_dtype(args[k]) == s->dtype && tj_tensor_rank(args[k]) == s->rank;
        for (int d = 0; ok && d < s->rank; d++)
            ok = s->dims[d] < 0 || s->dims[d] == tj_tensor_dims(args[k])[d];
        if (!ok)
            return tj_error_new(tj_tensor_dtype(args[k]) != s->dtype ? TJ_ERR_DTYPE : TJ_ERR_SHAPE,
                                "onnx: call: input %d '%s' is %s, the model declares %s", k,
                                m->in[k].name, have, want);
    }
    if (!m->n_values)
        return tj_call(m->fn, nargs, args);
    uint64_t key = 0xcbf29ce484222325ull;
    for (int k = 0; k < m->n_in; k++) {
        if (!m->is_value[k])
            continue;
        if (!args[k] || tj_status_of(args[k]) || tj_tensor_is_symbolic(args[k]))
            return tj_error_new(TJ_ERR_INVALID,
                                "onnx: call: input %d '%s' gives a shape or axes: it must be a "
                                "concrete tensor",
                                k, m->in[k].name);
        tj_dtype dt = tj_tensor_dtype(args[k]);
        key = fnv(key, &dt, sizeof dt);
        key = fnv(key, tj_tensor_dims(args[k]), (size_t)tj_tensor_rank(args[k]) * 8);
        key =
            fnv(key, tj_tensor_data(args[k]), (size_t)tj_tensor_numel(args[k]) * tj_dtype_size(dt));
    }
    spec **pp = &m->specs, *s = NULL;
    for (int i = 0; *pp; pp = &(*pp)->next, i++)
        if ((*pp)->key == key && spec_matches(m, *pp, args)) {
            s = *pp;
            *pp = s->next; /* to the front */
            break;
        }
    if (!s) { /* a new specialization, as tf.function retraces on a new Python value */
        if (!(s = calloc(1, sizeof *s)) ||
            !(s->b.fixed = calloc((size_t)m->n_in, sizeof(tj_tensor *)))) {
            free(s);
            return tj_error_new(TJ_ERR_OOM, "onnx: out of memory");
        }
        s->key = key;
        s->b.m = m;
        for (int k = 0; k < m->n_in; k++)
            if (m->is_value[k])
                s->b.fixed[k] = tj_retain(args[k]); /* unscoped: ours */
        const char *name = m->g->name && *m->g->name ? m->g->name : "onnx_model";
        tj_function_options fo = {.tiered = m->opts.compile_first ? -1 : 0};
        if (!(s->fn = tj_function_new_body(name, body, m->n_in, &s->b, &fo))) {
            tj_tensor *err = tj_error_new(TJ_ERR_INVALID, "onnx: %s", tj_last_error());
            spec_free(s, m->n_in);
            return err;
        }
        m->n_specs++;
    }
    s->next = m->specs;
    m->specs = s;
    if (m->n_specs > MAX_SPECS) { /* the least recently used one goes */
        spec *p = m->specs;
        while (p->next && p->next->next)
            p = p->next;
        spec_free(p->next, m->n_in);
        p->next = NULL;
        m->n_specs--;
    }
    return tj_call(s->fn, nargs, args);
}

/* ---- accessors --------------------------------------------------------------------------------
 */
tj_function *tj_onnx_function(tj_onnx_model *m) {
    return m && m->magic == OX_MAGIC ? m->fn : NULL;
}
int tj_onnx_n_inputs(const tj_onnx_model *m) {
    return m && m->magic == OX_MAGIC ? m->n_in : -1;
}
int tj_onnx_n_outputs(const tj_onnx_model *m) {
    return m && m->magic == OX_MAGIC ? m->n_out : -1;
}
int tj_onnx_opset(const tj_onnx_model *m) {
    return m && m->magic == OX_MAGIC ? m->opset : -1;
}

static const char *io_at(const io *v, int n, int k, tj_spec *spec) {
    if (k < 0 || k >= n)
        return NULL;
    if (spec)
        *spec = v[k].spec;
    return v[k].name;
}
const char *tj_onnx_input(const tj_onnx_model *m, int k, tj_spec *spec) {
    return m && m->magic == OX_MAGIC ? io_at(m->in, m->n_in, k, spec) : NULL;
}
const char *tj_onnx_output(const tj_onnx_model *m, int k, tj_spec *spec) {
    return m && m->magic == OX_MAGIC ? io_at(m->out, m->n_out, k, spec) : NULL;
}
