/* module.c — modules saved to a directory and loaded without the C code that made them (S27,
 * tf.Module + tf.saved_model). A module holds named variables and named functions with fixed
 * input signatures. Adding a function traces it for its signature (a tj_concrete, which
 * tj_module_call runs); saving writes, into the directory:
 *   module.tjm         the manifest: "tracejit-module 2", then per function its file, checksum,
 *                      result kind, argument specs, the variables its capture slots read and its
 *                      result types; the variables' file and checksum; last, the manifest's
 *                      own checksum
 *   <function>.tjir    the optimized graph in the text IR (it round-trips through the parser)
 *   <function>.<backend>.<target>.tjx
 *                      the function's program as its backend wrote it (native code), when that
 *                      backend writes images: the manifest's "native <file> <checksum>
 *                      <backend>" line (no backend: "cpu", as saved before backends were named)
 *   variables.ckpt     the variables (a checkpoint: runtime/checkpoint.c)
 * Loading reads everything as untrusted input (the manifest line by line, every file against its
 * FNV-1a checksum, the graphs through the parser and the verifier, each graph's parameters
 * against its signature, its results against the result kind and 'out' lines, and every
 * variable slot it reads or assigns against the variable the manifest binds), creates the
 * variables, and makes each graph a concrete function (jit_concrete_from_graph) compiled like a
 * traced one: read from its saved image by the backend that wrote it when that runs here, else
 * compiled for the backend TJ_BACKEND chooses (the CPU backend's artifact cache makes a reload
 * on the same target a cache hit; the interpreter without LLVM). Host callbacks cannot be
 * saved. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "jit/jit.h"

#define MOD_MAGIC 0x746a6d64u
enum { MAX_MANIFEST = 1 << 20, MAX_GRAPH = 64 << 20 };

typedef struct mod_fn {
    char *name;
    int n_args;
    tj_spec *specs;
    tj_function *f; /* a module being built: borrowed */
    tj_concrete *c; /* built: f's for specs (owned by f); loaded: owned (jit_concrete_from_graph) */
    char how[240];  /* loaded: what runs it and why */
} mod_fn;

struct tj_module {
    uint32_t magic;
    char *name;
    int loaded;
    tj_variable **vars; /* loaded: owned */
    uint32_t n_vars;
    mod_fn *fns;
    uint32_t n_fns;
};

static tj_status check_mod(const tj_module *m, const char *what) {
    if (!m)
        return ir_errorf(TJ_ERR_INVALID, "%s: the module is NULL", what);
    if (m->magic != MOD_MAGIC)
        return ir_errorf(TJ_ERR_INVALID, "%s: not a live tj_module", what);
    return TJ_OK;
}

/* Room for element n of an array of n: capacities 4, 8, 16, ... */
static int grow(void **p, uint32_t n, size_t size) {
    if (n && (n < 4 || (n & (n - 1))))
        return 0;
    void *q = realloc(*p, (n ? 2 * (size_t)n : 4) * size);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

tj_module *tj_module_new(const char *name) {
    tj_module *m = calloc(1, sizeof *m);
    if (!m || !(m->name = strdup(name && *name ? name : "module"))) {
        free(m);
        return (void)ir_errorf(TJ_ERR_OOM, "module_new: out of memory"), NULL;
    }
    m->magic = MOD_MAGIC;
    return m;
}

static int valid_name(const char *s) {
    if (!s || !*s || strlen(s) > 200)
        return 0;
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == '"' || *s == '\\')
            return 0;
    return 1;
}

static tj_variable *find_var(const tj_module *m, const char *name) {
    for (uint32_t i = 0; i < m->n_vars; i++)
        if (strcmp(m->vars[i]->name, name) == 0)
            return m->vars[i];
    return NULL;
}

static tj_status add_var(tj_module *m, tj_variable *v, const char *what) {
    tj_status st = rt_variable_check(v, what);
    if (st)
        return st;
    if (!valid_name(v->name))
        return ir_errorf(TJ_ERR_INVALID,
                         "%s: variable '%s' needs a name without spaces or quotes (modules "
                         "save variables by name)",
                         what, v->name ? v->name : "");
    tj_variable *o = find_var(m, v->name);
    if (o == v)
        return TJ_OK;
    if (o)
        return ir_errorf(TJ_ERR_INVALID, "%s: two variables are named '%s'", what, v->name);
    if (grow((void **)&m->vars, m->n_vars, sizeof *m->vars))
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
    m->vars[m->n_vars++] = v;
    return TJ_OK;
}

tj_status tj_module_add_variable(tj_module *m, tj_variable *v) {
    tj_status st = check_mod(m, "module_add_variable");
    if (!st && m->loaded)
        st = ir_errorf(TJ_ERR_STATE, "module_add_variable: '%s' was loaded; it cannot grow",
                       m->name);
    return st ? st : add_var(m, v, "module_add_variable");
}

tj_status tj_module_add_function(tj_module *m, const char *name, tj_function *f, int n,
                                 const tj_spec *specs) {
    const char *what = "module_add_function";
    tj_status st = check_mod(m, what);
    if (st)
        return st;
    if (m->loaded)
        return ir_errorf(TJ_ERR_STATE, "%s: '%s' was loaded; it cannot grow", what, m->name);
    if (!valid_name(name))
        return ir_errorf(TJ_ERR_INVALID, "%s: a function needs a name without spaces or quotes",
                         what);
    if ((st = jit_check_fn(what, f)))
        return st;
    if (n < 0 || n != f->nargs || (n && !specs))
        return ir_errorf(TJ_ERR_SIGNATURE,
                         "%s: '%s' takes %d arguments; a fixed input signature of %d specs was "
                         "given",
                         what, name, f->nargs, n);
    for (int k = 0; k < n; k++)
        if (specs[k].static_value || specs[k].rank < 0 || specs[k].rank > TJ_MAX_RANK)
            return ir_errorf(TJ_ERR_SIGNATURE,
                             "%s: '%s' argument %d: a saved signature takes tensor specs (no "
                             "static values)",
                             what, name, k);
    for (int k = 0; k < n; k++)
        for (int d = 0; d < specs[k].rank; d++)
            if (specs[k].dims[d] < 0)
                return ir_errorf(TJ_ERR_SIGNATURE,
                                 "%s: '%s' argument %d: dim %d is unknown (%lld); a saved "
                                 "function needs a fixed input signature",
                                 what, name, k, d, (long long)specs[k].dims[d]);
    for (uint32_t i = 0; i < m->n_fns; i++)
        if (strcmp(m->fns[i].name, name) == 0)
            return ir_errorf(TJ_ERR_INVALID, "%s: two functions are named '%s'", what, name);
    if (grow((void **)&m->fns, m->n_fns, sizeof *m->fns))
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
    mod_fn *fn = &m->fns[m->n_fns];
    memset(fn, 0, sizeof *fn);
    fn->name = strdup(name);
    fn->specs = malloc((size_t)(n ? n : 1) * sizeof *fn->specs);
    if (!fn->name || !fn->specs) {
        free(fn->name);
        free(fn->specs);
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
    }
    if (n)
        memcpy(fn->specs, specs, (size_t)n * sizeof *specs);
    fn->n_args = n;
    fn->f = f;
    if (!(fn->c = tj_function_get_concrete(f, n, specs))) { /* traced now, for its signature */
        st = ir_errorf(ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME, "%s: function '%s': %s",
                       what, name, ir_last_error());
        free(fn->name);
        free(fn->specs);
        return st;
    }
    m->n_fns++;
    return TJ_OK;
}

/* ---- saving ---------------------------------------------------------------------------------- */
static const ir_node *find_op(const ir_graph *g, int op) {
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == op)
            return &g->nodes[i];
    for (uint32_t s = 0; s < g->n_subs; s++) {
        const ir_node *n = find_op(g->subs[s], op);
        if (n)
            return n;
    }
    return NULL;
}

static void put_type(FILE *f, const char *tag, int dtype, int rank, const int64_t *dims) {
    fprintf(f, "%s %s %d", tag, ir_dtype_short(dtype), rank);
    for (int d = 0; d < rank; d++)
        fprintf(f, " %lld", (long long)dims[d]);
    fputc('\n', f);
}

/* Appends "checksum <FNV-1a of every byte before this line>" to the manifest at path. */
static tj_status append_checksum(const char *what, const char *path) {
    unsigned char *text = NULL;
    size_t size = 0;
    tj_status st = rt_read_file(what, path, MAX_MANIFEST, &text, &size);
    FILE *f = st ? NULL : fopen(path, "a");
    if (!st && !f)
        st = ir_errorf(TJ_ERR_IO, "%s: cannot write %s: %s", what, path, strerror(errno));
    if (f) {
        fprintf(f, "checksum %016llx\n", (unsigned long long)rt_fnv1a(text, size));
        if (fclose(f) != 0)
            st = ir_errorf(TJ_ERR_IO, "%s: writing %s failed", what, path);
    }
    free(text);
    return st;
}

static tj_status write_file(const char *what, const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return ir_errorf(TJ_ERR_IO, "%s: cannot write %s: %s", what, path, strerror(errno));
    int bad = fwrite(p, 1, n, f) != n;
    bad |= fclose(f) != 0;
    return bad ? ir_errorf(TJ_ERR_IO, "%s: writing %s failed", what, path) : TJ_OK;
}

tj_status tj_module_save(tj_module *m, const char *dir) {
    const char *what = "module_save";
    tj_status st = check_mod(m, what);
    if (st)
        return st;
    if (!dir || !*dir || strlen(dir) > 3000)
        return ir_errorf(TJ_ERR_INVALID, "%s: the directory is NULL, empty or too long", what);
    if (m->loaded)
        return ir_errorf(TJ_ERR_UNSUPPORTED, "%s: '%s' was loaded; save the module you built", what,
                         m->name);
    if (api_trace_current())
        return ir_errorf(TJ_ERR_STATE, "%s: called inside a trace", what);
    /* refusals before anything is written */
    for (uint32_t i = 0; i < m->n_fns && !st; i++) {
        const mod_fn *fn = &m->fns[i];
        if ((st = jit_check_fn(what, fn->f)))
            break;
        const ir_node *cb = find_op(fn->c->graph, IR_OP_HOST_CALLBACK);
        if (cb)
            st = ir_errorf(TJ_ERR_UNSUPPORTED,
                           "%s: function '%s' calls a host callback (C code that is not saved, "
                           "as tf.py_function); it cannot be saved",
                           what, fn->name);
        for (uint32_t k = 0; k < fn->c->n_caps && !st; k++)
            st = add_var(m, fn->c->caps[k], what); /* captured variables join the module */
    }
    if (!st && mkdir(dir, 0755) != 0 && errno != EEXIST)
        st = ir_errorf(TJ_ERR_IO, "%s: cannot create %s: %s", what, dir, strerror(errno));
    char path[3300];
    if (!st) {
        snprintf(path, sizeof path, "%s/variables.ckpt", dir);
        st = tj_checkpoint_save(path, (int)m->n_vars, m->vars);
    }
    unsigned char *ck = NULL;
    size_t ck_size = 0;
    if (!st)
        st = rt_read_file(what, path, (size_t)1 << 31, &ck, &ck_size);
    char man_path[3300];
    snprintf(man_path, sizeof man_path, "%s/module.tjm", dir);
    FILE *man = st ? NULL : fopen(man_path, "w");
    if (!st && !man)
        st = ir_errorf(TJ_ERR_IO, "%s: cannot write %s: %s", what, man_path, strerror(errno));
    if (man) {
        fprintf(man, "tracejit-module 2\nname %s\nvariables variables.ckpt %016llx\n",
                valid_name(m->name) ? m->name : "module",
                (unsigned long long)rt_fnv1a(ck, ck_size));
    }
    free(ck);
    for (uint32_t i = 0; i < m->n_fns && !st; i++) {
        const mod_fn *fn = &m->fns[i];
        const tj_concrete *c = fn->c;
        char *text = ir_print(c->graph);
        if (!text) {
            st = ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
            break;
        }
        char file[300];
        snprintf(file, sizeof file, "%s.tjir", fn->name);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        st = write_file(what, path, text, strlen(text));
        fprintf(man, "function %s %s %016llx %d %d %u\n", fn->name, file,
                (unsigned long long)rt_fnv1a(text, strlen(text)), c->result_kind, fn->n_args,
                c->n_caps);
        free(text);
        for (int k = 0; k < fn->n_args; k++)
            put_type(man, "arg", fn->specs[k].dtype, fn->specs[k].rank, fn->specs[k].dims);
        for (uint32_t k = 0; k < c->n_caps; k++)
            fprintf(man, "cap %s\n", c->caps[k]->name);
        for (uint32_t k = 0; k < c->graph->n_outputs; k++) {
            const ir_node *o = ir_node_get(c->graph, c->graph->outputs[k]);
            put_type(man, "out", o->dtype, o->rank, o->dims);
        }
        jit_tier_finish((tj_concrete *)c); /* a tiered function's native code */
        rt_program *prog = jit_concrete_program(c);
        const jit_backend *b = jit_backend_of(prog);
        if (!st && b && b->write) { /* the native code, named by its backend and target */
            size_t size = 0;
            unsigned char *img = b->write(prog, &size);
            snprintf(file, sizeof file, "%s.%s.%s.tjx", fn->name, b->name, b->image_target());
            snprintf(path, sizeof path, "%s/%s", dir, file);
            st = img ? write_file(what, path, img, size) : ir_last_code();
            if (!st)
                fprintf(man, "native %s %016llx %s\n", file,
                        (unsigned long long)rt_fnv1a(img, size), b->name);
            free(img);
        }
        fprintf(man, "end\n");
    }
    if (man && fclose(man) != 0 && !st)
        st = ir_errorf(TJ_ERR_IO, "%s: writing %s failed", what, man_path);
    if (!st) /* the manifest's own checksum, as its last line */
        st = append_checksum(what, man_path);
    return st;
}

/* ---- loading --------------------------------------------------------------------------------- */
typedef struct reader {
    const char *path;
    char *p; /* the current line */
    int line;
} reader;

/* The next line (NUL-terminated in place) or NULL at the end. */
static char *next_line(reader *r) {
    if (!r->p || !*r->p)
        return NULL;
    char *s = r->p, *nl = strchr(s, '\n');
    if (nl) {
        *nl = 0;
        r->p = nl + 1;
    } else {
        r->p = s + strlen(s);
    }
    r->line++;
    return s;
}

static tj_status bad_line(const reader *r, const char *why) {
    return ir_errorf(TJ_ERR_CORRUPT, "module_load: %s line %d: %s", r->path, r->line, why);
}

/* The manifest's last line is "checksum <hex>" over every byte before it; it is cut off here, so
 * the lines read after are exactly the ones it covers. */
static tj_status check_manifest_sum(const char *path, char *text, size_t size) {
    if (size == 0 || text[size - 1] != '\n' || strlen(text) != size)
        return ir_errorf(TJ_ERR_CORRUPT,
                         "module_load: %s does not end in a line (or holds a NUL byte)", path);
    size_t at = size - 1;
    while (at > 0 && text[at - 1] != '\n')
        at--;
    unsigned long long want;
    char tail;
    if (sscanf(text + at, "checksum %16llx%c", &want, &tail) != 2 || tail != '\n')
        return ir_errorf(TJ_ERR_CORRUPT,
                         "module_load: %s: its last line is not 'checksum <hex>' (cut short, or "
                         "saved by an older tracejit)",
                         path);
    if (rt_fnv1a(text, at) != want)
        return ir_errorf(TJ_ERR_CORRUPT,
                         "module_load: %s does not match its checksum (changed or corrupt)", path);
    text[at] = 0;
    return TJ_OK;
}

/* "<tag> <dtype> <rank> <dims...>" */
static tj_status parse_type(reader *r, const char *tag, tj_spec *out) {
    char *s = next_line(r);
    size_t tl = strlen(tag);
    if (!s || strncmp(s, tag, tl) != 0 || s[tl] != ' ')
        return bad_line(r, tag[0] == 'a' ? "an 'arg' line was expected"
                                         : "an 'out' line was expected");
    s += tl + 1;
    char *sp = strchr(s, ' ');
    int dt = sp ? ir_dtype_from_short(s, (size_t)(sp - s)) : -1;
    if (dt < 0 || dt == TJ_STRING)
        return bad_line(r, "a bad dtype");
    char *end;
    long rank = strtol(sp + 1, &end, 10);
    if (rank < 0 || rank > TJ_MAX_RANK)
        return bad_line(r, "a bad rank");
    memset(out, 0, sizeof *out);
    out->dtype = (tj_dtype)dt;
    out->rank = (int)rank;
    for (long d = 0; d < rank; d++) {
        errno = 0;
        long long v = strtoll(end, &end, 10);
        if (errno || v < 0 || v > ((int64_t)1 << 40))
            return bad_line(r, "a bad dim");
        out->dims[d] = v;
    }
    while (*end == ' ')
        end++;
    return *end ? bad_line(r, "extra text after the dims") : TJ_OK;
}

static tj_status read_checked(const char *what, const char *dir, const char *file, uint64_t sum,
                              size_t max, unsigned char **out, size_t *size) {
    char path[3300];
    if (strchr(file, '/') || strcmp(file, "..") == 0 || strcmp(file, ".") == 0)
        return ir_errorf(TJ_ERR_CORRUPT, "%s: %s/module.tjm names a file outside it ('%s')", what,
                         dir, file);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    tj_status st = rt_read_file(what, path, max, out, size);
    if (!st && rt_fnv1a(*out, *size) != sum) {
        free(*out);
        *out = NULL;
        st = ir_errorf(TJ_ERR_CORRUPT,
                       "%s: %s does not match its checksum in module.tjm (changed or corrupt)",
                       what, path);
    }
    return st;
}

/* Checks fn's graph text (parameters against the signature, slots against the manifest's
 * variables caps[0..n_caps)) and makes it fn->c: from the saved native code (img, NULL when
 * none or not wanted) when it runs here, else compiled, or interpreted. */
/* Every read and assignment of a variable slot in g (its regions' too) against the variable the
 * manifest binds to the slot: the same dtype and shape, or the code would read or write another
 * size than the buffer has. */
static tj_status check_slots(const ir_graph *g, tj_variable *const *caps, uint32_t n_caps,
                             const char *path) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < 2; k++) {
            const ir_graph *r = (ir_ops[n->op].flags & IR_F_CF) ? ir_region(g, n, k) : NULL;
            tj_status st = r ? check_slots(r, caps, n_caps, path) : TJ_OK;
            if (st)
                return st;
        }
        if (n->op != IR_OP_VAR_READ && n->op != IR_OP_ASSIGN)
            continue;
        uint64_t slot = (uint64_t)n->a.i[0];
        const tj_variable *v = slot < n_caps ? caps[slot] : NULL;
        const ir_node *t = n->op == IR_OP_ASSIGN ? ir_node_get(g, ir_inputs(g, n)[0]) : n;
        char a[128], b[128];
        if (!v || t->dtype != v->dtype || t->rank != v->rank ||
            memcmp(t->dims, v->dims, sizeof(int64_t) * (size_t)t->rank) != 0)
            return ir_errorf(TJ_ERR_CORRUPT,
                             "module_load: %s: variable slot %llu is %s%s in the graph but "
                             "module.tjm binds it to '%s' (%s%s)",
                             path, (unsigned long long)slot, ir_dtype_name(t->dtype),
                             ir_fmt_dims(a, sizeof a, t->rank, t->dims), v ? v->name : "?",
                             v ? ir_dtype_name(v->dtype) : "none",
                             v ? ir_fmt_dims(b, sizeof b, v->rank, v->dims) : "");
    }
    return TJ_OK;
}

static tj_status load_graph(mod_fn *fn, const char *path, const char *text,
                            tj_variable *const *caps, uint32_t n_caps, const tj_spec *outs,
                            uint32_t n_outs, int kind, const char *img_path,
                            const jit_backend *img_b, const unsigned char *img, size_t img_size,
                            const char *no_img) {
    const char *what = "module_load";
    ir_graph *g = ir_parse(text);
    if (!g)
        return ir_errorf(TJ_ERR_CORRUPT, "%s: %s: %s", what, path, ir_last_error());
    tj_status st = ir_verify(g);
    if (!st && (g->n_params != (uint32_t)fn->n_args || g->n_caps > n_caps))
        st = ir_errorf(TJ_ERR_CORRUPT,
                       "%s: %s has %u parameters and %u variable slots; module.tjm says %d and %u",
                       what, path, g->n_params, g->n_caps, fn->n_args, n_caps);
    for (uint32_t i = 0; i < g->n_nodes && !st; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op == IR_OP_HOST_CALLBACK)
            st = ir_errorf(TJ_ERR_CORRUPT, "%s: %s calls a host callback", what, path);
        if (n->op != IR_OP_PARAM)
            continue;
        const tj_spec *s = &fn->specs[n->a.i[0]];
        if (n->dtype != s->dtype || n->rank != s->rank ||
            memcmp(n->dims, s->dims, sizeof(int64_t) * (size_t)s->rank) != 0)
            st = ir_errorf(TJ_ERR_CORRUPT, "%s: %s: parameter %lld does not match its signature",
                           what, path, (long long)n->a.i[0]);
    }
    if (!st)
        st = check_slots(g, caps, n_caps, path);
    if (!st && ((kind == JIT_RESULT_NONE && g->n_outputs != 0) ||
                (kind == JIT_RESULT_SINGLE && g->n_outputs != 1)))
        st = ir_errorf(TJ_ERR_CORRUPT,
                       "%s: %s has %u results; module.tjm says the function returns %s", what, path,
                       g->n_outputs, kind == JIT_RESULT_NONE ? "none" : "one tensor");
    for (uint32_t k = 0; k < g->n_outputs && !st; k++) {
        const ir_node *o = ir_node_get(g, g->outputs[k]);
        const tj_spec *w = k < n_outs ? &outs[k] : NULL;
        if (n_outs != g->n_outputs || o->dtype != (int)w->dtype || o->rank != w->rank ||
            memcmp(o->dims, w->dims, sizeof(int64_t) * (size_t)o->rank) != 0)
            st = ir_errorf(TJ_ERR_CORRUPT,
                           "%s: %s: result %u does not match the 'out' lines of module.tjm (%u)",
                           what, path, k, n_outs);
    }
    uint64_t hash = rt_fnv1a(text, strlen(text));
    char why[200];
    snprintf(why, sizeof why, "%s", no_img);
    if (!st && img) {
        fn->c = jit_concrete_from_graph(fn->name, g, fn->specs, fn->n_args, caps, n_caps, kind,
                                        hash, img_b, img, img_size);
        if (fn->c) {
            snprintf(fn->how, sizeof fn->how, "saved native code");
        } else if (ir_last_code() == TJ_ERR_UNSUPPORTED) { /* another build or CPU: the graph */
            snprintf(why, sizeof why, "%s", ir_last_error());
            ir_clear_error();
        } else {
            st = ir_errorf(ir_last_code() ? ir_last_code() : TJ_ERR_CORRUPT, "%s: %s: %s", what,
                           img_path, ir_last_error());
        }
    }
    const jit_backend *b = NULL;
    if (!st && !fn->c && (st = jit_fn_backend(NULL, &b)) != TJ_OK)
        st = ir_errorf(st, "%s: %s", what, ir_last_error());
    if (!st && !fn->c) {
        fn->c = jit_concrete_from_graph(fn->name, g, fn->specs, fn->n_args, caps, n_caps, kind,
                                        hash, b, NULL, 0);
        st = fn->c ? TJ_OK : ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
        if (!st)
            snprintf(fn->how, sizeof fn->how, "%s (%s)",
                     jit_backend_of(fn->c->prog) != jit_backend_interpreter()
                         ? "compiled from the graph"
                         : "interpreter",
                     why);
    }
    ir_graph_free(g);
    if (!st)
        rt_log(RT_LOG_COMPILE, "module: %s runs on %s", fn->name, fn->how);
    return st;
}

static void fn_free(mod_fn *fn, int loaded) {
    if (loaded)
        jit_concrete_free(fn->c);
    free(fn->specs);
    free(fn->name);
}

tj_module *tj_module_load(const char *dir) {
    return tj_module_load_opts(dir, 0);
}

tj_module *tj_module_load_opts(const char *dir, unsigned flags) {
    const char *what = "module_load";
    if (!dir || !*dir || strlen(dir) > 3000)
        return (void)ir_errorf(TJ_ERR_INVALID, "%s: the directory is NULL, empty or too long",
                               what),
               NULL;
    char path[3300];
    snprintf(path, sizeof path, "%s/module.tjm", dir);
    unsigned char *text = NULL;
    size_t size;
    tj_status st = rt_read_file(what, path, MAX_MANIFEST, &text, &size);
    if (st)
        return NULL;
    tj_module *m = tj_module_new("module");
    if (!m) {
        free(text);
        return NULL;
    }
    m->loaded = 1;
    reader r = {path, (char *)text, 0};
    st = check_manifest_sum(path, (char *)text, size);
    char *s = st ? NULL : next_line(&r), name[256] = "module", ckfile[256] = "";
    unsigned long long sum = 0;
    if (!st && s && strcmp(s, "tracejit-module 1") == 0)
        st = bad_line(&r, "a module of format 1 (a manifest without a checksum, saved by an "
                          "older tracejit): save it again");
    else if (!st && (!s || strcmp(s, "tracejit-module 2") != 0))
        st = bad_line(&r, "not a tracejit module of format 2");
    if (!st && (!(s = next_line(&r)) || sscanf(s, "name %255s", name) != 1))
        st = bad_line(&r, "a 'name' line was expected");
    if (!st && (!(s = next_line(&r)) || sscanf(s, "variables %255s %llx", ckfile, &sum) != 2))
        st = bad_line(&r, "a 'variables' line was expected");
    if (!st) {
        free(m->name);
        m->name = strdup(name);
    }
    /* the variables, made from the checkpoint */
    if (!st) {
        unsigned char *ck = NULL;
        size_t ck_size;
        st = read_checked(what, dir, ckfile, sum, (size_t)1 << 31, &ck, &ck_size);
        free(ck);
    }
    if (!st) {
        uint32_t n = 0;
        char **names = NULL;
        tj_tensor **vals = NULL;
        snprintf(path, sizeof path, "%s/%s", dir, ckfile);
        st = rt_checkpoint_read(path, &n, &names, &vals);
        for (uint32_t k = 0; k < n && !st; k++) {
            tj_variable *v = tj_variable_new(vals[k], names[k]);
            if (!v || grow((void **)&m->vars, m->n_vars, sizeof *m->vars)) {
                tj_variable_free(v);
                st = ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
            } else {
                m->vars[m->n_vars++] = v;
            }
        }
        for (uint32_t k = 0; k < n; k++) {
            free(names ? names[k] : NULL);
            rt_release(vals ? vals[k] : NULL);
        }
        free(names);
        free(vals);
    }
    snprintf(path, sizeof path, "%s/module.tjm", dir);
    while (!st && (s = next_line(&r))) {
        char fname[256], file[300];
        int kind, nargs;
        unsigned ncaps;
        if (!*s)
            continue;
        if (sscanf(s, "function %255s %299s %llx %d %d %u", fname, file, &sum, &kind, &nargs,
                   &ncaps) != 6 ||
            kind < JIT_RESULT_NONE || kind > JIT_RESULT_TUPLE || nargs < 0 || nargs > 64 ||
            ncaps > 4096) {
            st = bad_line(&r, "a 'function' line was expected");
            break;
        }
        if (grow((void **)&m->fns, m->n_fns, sizeof *m->fns)) {
            st = ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
            break;
        }
        mod_fn *fn = &m->fns[m->n_fns++];
        memset(fn, 0, sizeof *fn);
        fn->name = strdup(fname);
        fn->n_args = nargs;
        fn->specs = calloc((size_t)nargs + 1, sizeof *fn->specs);
        tj_variable **caps = calloc((size_t)ncaps + 1, sizeof *caps);
        if (!fn->name || !fn->specs || !caps) {
            free(caps);
            st = ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
            break;
        }
        for (int k = 0; k < nargs && !st; k++)
            st = parse_type(&r, "arg", &fn->specs[k]);
        for (unsigned k = 0; k < ncaps && !st; k++) {
            char *c = next_line(&r);
            if (!c || strncmp(c, "cap ", 4) != 0 || !(caps[k] = find_var(m, c + 4)))
                st = bad_line(&r, "a 'cap' line naming a saved variable was expected");
        }
        tj_spec *outs = NULL;
        uint32_t n_outs = 0;
        while (!st && (s = r.p) && strncmp(s, "out ", 4) == 0) {
            tj_spec out;
            st = parse_type(&r, "out", &out);
            if (!st && grow((void **)&outs, n_outs, sizeof *outs))
                st = ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
            else if (!st)
                outs[n_outs++] = out;
        }
        char nfile[300] = "", nback[32] = "cpu"; /* unnamed: saved before backends were named */
        unsigned long long nsum = 0;
        if (!st && (s = r.p) && strncmp(s, "native ", 7) == 0 &&
            (!(s = next_line(&r)) || sscanf(s, "native %299s %llx %31s", nfile, &nsum, nback) < 2))
            st = bad_line(&r, "a 'native <file> <checksum> <backend>' line was expected");
        /* native code of a backend this build lacks: the graph is compiled instead */
        const jit_backend *img_b = nfile[0] ? jit_backend_find(nback) : NULL;
        char no_img[200] = "";
        if (nfile[0] && !img_b)
            snprintf(no_img, sizeof no_img, "saved for backend '%s', which this build lacks",
                     nback);
        if (!st && (!(s = next_line(&r)) || strcmp(s, "end") != 0))
            st = bad_line(&r, "'end' was expected");
        unsigned char *g_text = NULL, *img = NULL;
        size_t g_size, img_size = 0;
        if (!st)
            st = read_checked(what, dir, file, sum, MAX_GRAPH, &g_text, &g_size);
        /* the saved native code: checked like every file, unless only the graph is wanted */
        int use_img = img_b && !(flags & TJ_MODULE_GRAPH_ONLY);
        if (!st && use_img)
            st = read_checked(what, dir, nfile, nsum, MAX_GRAPH, &img, &img_size);
        if (!st) {
            char gpath[3300], npath[3300];
            snprintf(gpath, sizeof gpath, "%s/%s", dir, file);
            snprintf(npath, sizeof npath, "%s/%s", dir, nfile);
            st = load_graph(fn, gpath, (const char *)g_text, caps, ncaps, outs, n_outs, kind, npath,
                            img_b, use_img ? img : NULL, img_size,
                            !nfile[0]                      ? "no native code was saved"
                            : no_img[0]                    ? no_img
                            : flags & TJ_MODULE_GRAPH_ONLY ? "graph only, as asked"
                                                           : "");
        }
        free(img);
        free(g_text);
        free(caps);
        free(outs);
    }
    free(text);
    if (st) {
        tj_status keep = st;
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ir_last_error());
        tj_module_free(m);
        ir_errorf(keep, "%s", msg);
        return NULL;
    }
    return m;
}

/* ---- using a module -------------------------------------------------------------------------- */
static mod_fn *find_fn(tj_module *m, const char *name) {
    for (uint32_t i = 0; name && i < m->n_fns; i++)
        if (strcmp(m->fns[i].name, name) == 0)
            return &m->fns[i];
    return NULL;
}

tj_tensor *tj_module_call(tj_module *m, const char *name, int nargs, tj_tensor *const *args) {
    const char *what = "module_call";
    tj_status st = check_mod(m, what);
    if (st)
        return rt_scoped(rt_error_from_status(st));
    mod_fn *fn = find_fn(m, name);
    if (!fn)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: '%s' has no function '%s'", what, m->name,
                                   name ? name : "(null)"));
    if (!m->loaded) /* the concrete function is its tj_function's: is that one alive? */
        return (st = jit_check_fn(what, fn->f)) ? rt_scoped(rt_error_from_status(st))
                                                : tj_concrete_call(fn->c, nargs, args);
    if (nargs != fn->n_args || (nargs && !args))
        return rt_scoped(rt_errorf(TJ_ERR_SIGNATURE, "%s: '%s' takes %d arguments, %d given", what,
                                   fn->name, fn->n_args, nargs));
    for (int k = 0; k < nargs; k++)
        if (!args[k] || args[k]->kind != RT_CONCRETE)
            return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: '%s' argument %d is not a tensor", what,
                                       fn->name, k));
    tj_tensor *err = jit_concrete_check_args(fn->c, nargs, args);
    return rt_scoped(err ? err : jit_run_concrete(fn->c, args));
}

const char *tj_module_runs_on(const tj_module *m, const char *name) {
    if (check_mod(m, "module_runs_on"))
        return NULL;
    const mod_fn *fn = find_fn((tj_module *)m, name);
    if (!fn)
        return (void)ir_errorf(TJ_ERR_INVALID, "module_runs_on: '%s' has no function '%s'", m->name,
                               name ? name : "(null)"),
               NULL;
    return m->loaded ? fn->how : "traced in this process";
}

int tj_module_signature(const tj_module *m, const char *name, int max, tj_spec *specs) {
    if (check_mod(m, "module_signature"))
        return -1;
    const mod_fn *fn = find_fn((tj_module *)m, name);
    if (!fn)
        return (void)ir_errorf(TJ_ERR_INVALID, "module_signature: '%s' has no function '%s'",
                               m->name, name ? name : "(null)"),
               -1;
    for (int k = 0; specs && k < fn->n_args && k < max; k++) {
        specs[k] = fn->specs[k];
        specs[k].static_value = NULL;
    }
    return fn->n_args;
}

tj_variable *tj_module_variable(tj_module *m, const char *name) {
    if (check_mod(m, "module_variable"))
        return NULL;
    tj_variable *v = name ? find_var(m, name) : NULL;
    if (!v)
        ir_errorf(TJ_ERR_INVALID, "module_variable: '%s' has no variable '%s'", m->name,
                  name ? name : "(null)");
    return v;
}

char *tj_module_describe(const tj_module *m) {
    if (check_mod(m, "module_describe"))
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return (void)ir_errorf(TJ_ERR_OOM, "module_describe: out of memory"), NULL;
    fprintf(f, "module '%s'%s\n", m->name, m->loaded ? " (loaded)" : "");
    for (uint32_t i = 0; i < m->n_fns; i++) {
        const mod_fn *fn = &m->fns[i];
        fprintf(f, "\nsignature '%s':\n", fn->name);
        if (m->loaded)
            fprintf(f, "  runs on: %s\n", fn->how);
        fprintf(f, "  inputs:\n");
        for (int k = 0; k < fn->n_args; k++) {
            char d[128];
            fprintf(f, "    x%d: dtype %s, shape %s\n", k, ir_dtype_name(fn->specs[k].dtype),
                    ir_fmt_dims(d, sizeof d, fn->specs[k].rank, fn->specs[k].dims));
        }
        fprintf(f, "  outputs:\n");
        const ir_graph *g = fn->c->graph;
        for (uint32_t k = 0; k < g->n_outputs; k++) {
            const ir_node *o = ir_node_get(g, g->outputs[k]);
            char d[128];
            fprintf(f, "    output_%u: dtype %s, shape %s\n", k, ir_dtype_name(o->dtype),
                    ir_fmt_dims(d, sizeof d, o->rank, o->dims));
        }
    }
    fprintf(f, "\nvariables:\n");
    for (uint32_t i = 0; i < m->n_vars; i++) {
        char d[128];
        fprintf(f, "  %s: dtype %s, shape %s\n", m->vars[i]->name, ir_dtype_name(m->vars[i]->dtype),
                ir_fmt_dims(d, sizeof d, m->vars[i]->rank, m->vars[i]->dims));
    }
    fclose(f);
    return buf;
}

void tj_module_free(tj_module *m) {
    if (!m || m->magic != MOD_MAGIC)
        return;
    for (uint32_t i = 0; i < m->n_fns; i++)
        fn_free(&m->fns[i], m->loaded);
    free(m->fns);
    if (m->loaded)
        for (uint32_t i = 0; i < m->n_vars; i++)
            tj_variable_free(m->vars[i]);
    free(m->vars);
    free(m->name);
    m->magic = 0;
    free(m);
}
