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

static const rt_module_ops jit_module_ops;

tj_module *tj_module_new(const char *name) {
    return rt_module_new(name, &jit_module_ops);
}

static int valid_name(const char *s) {
    if (!s || !*s || strlen(s) > 200)
        return 0;
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == '"' || *s == '\\')
            return 0;
    return 1;
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
    tj_variable *o = rt_module_find_var(m, v->name);
    if (o == v)
        return TJ_OK;
    if (o)
        return ir_errorf(TJ_ERR_INVALID, "%s: two variables are named '%s'", what, v->name);
    if (rt_module_grow((void **)&m->vars, m->n_vars, sizeof *m->vars))
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
    m->vars[m->n_vars++] = v;
    return TJ_OK;
}

tj_status tj_module_add_variable(tj_module *m, tj_variable *v) {
    tj_status st = rt_module_check(m, "module_add_variable");
    if (!st && m->loaded)
        st = ir_errorf(TJ_ERR_STATE, "module_add_variable: '%s' was loaded; it cannot grow",
                       m->name);
    return st ? st : add_var(m, v, "module_add_variable");
}

tj_status tj_module_add_function(tj_module *m, const char *name, tj_function *f, int n,
                                 const tj_spec *specs) {
    const char *what = "module_add_function";
    tj_status st = rt_module_check(m, what);
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
    if (rt_module_grow((void **)&m->fns, m->n_fns, sizeof *m->fns))
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
    rt_module_fn *fn = &m->fns[m->n_fns];
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
    fn->src = f;
    if (!(fn->run = tj_function_get_concrete(f, n, specs))) { /* traced now, for its signature */
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
    tj_status st = rt_read_file(what, path, RT_MODULE_MAX_MANIFEST, &text, &size);
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
    tj_status st = rt_module_check(m, what);
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
        const rt_module_fn *fn = &m->fns[i];
        const tj_concrete *c = fn->run;
        if ((st = jit_check_fn(what, fn->src)))
            break;
        const ir_node *cb = find_op(c->graph, IR_OP_HOST_CALLBACK);
        if (cb)
            st = ir_errorf(TJ_ERR_UNSUPPORTED,
                           "%s: function '%s' calls a host callback (C code that is not saved, "
                           "as tf.py_function); it cannot be saved",
                           what, fn->name);
        for (uint32_t k = 0; k < c->n_caps && !st; k++)
            st = add_var(m, c->caps[k], what); /* captured variables join the module */
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
        const rt_module_fn *fn = &m->fns[i];
        const tj_concrete *c = fn->run;
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

/* ---- loading: the runtime reads the module, jit/ makes each function ----------------------- */
/* fn's concrete function: read from its saved image by the backend that wrote it when that runs
 * here, else compiled from the graph for the backend TJ_BACKEND chooses (the CPU backend's
 * artifact cache makes a reload on the same target a cache hit; the interpreter without LLVM). */
static tj_status make_fn(rt_module_fn *fn, uint64_t hash, const char *img_path,
                         const char *img_backend, const void *img, size_t img_size,
                         const char *no_img) {
    const char *what = "module_load";
    char why[200];
    snprintf(why, sizeof why, "%s", no_img);
    tj_concrete *c = NULL;
    tj_status st = TJ_OK;
    if (img) {
        c = jit_concrete_from_graph(fn->name, fn->graph, fn->specs, fn->n_args, fn->caps,
                                    fn->n_caps, fn->result_kind, hash,
                                    jit_backend_find(img_backend), img, img_size);
        if (c) {
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
    if (!st && !c && (st = jit_fn_backend(NULL, &b)) != TJ_OK)
        st = ir_errorf(st, "%s: %s", what, ir_last_error());
    if (!st && !c) {
        c = jit_concrete_from_graph(fn->name, fn->graph, fn->specs, fn->n_args, fn->caps,
                                    fn->n_caps, fn->result_kind, hash, b, NULL, 0);
        st = c ? TJ_OK : ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME;
        if (!st)
            snprintf(fn->how, sizeof fn->how, "%s (%s)",
                     jit_backend_of(c->prog) != jit_backend_interpreter()
                         ? "compiled from the graph"
                         : "interpreter",
                     why);
    }
    fn->run = c;
    return st;
}

static bool reads_images(const char *backend) {
    return jit_backend_find(backend) != NULL;
}

static tj_tensor *call_fn(const tj_module *m, rt_module_fn *fn, int nargs, tj_tensor *const *args) {
    tj_concrete *c = fn->run;
    if (!m->loaded) { /* the concrete function is its tj_function's: is that one alive? */
        tj_status st = jit_check_fn("module_call", fn->src);
        return st ? rt_error_from_status(st) : jit_concrete_call(c, nargs, args);
    }
    tj_tensor *err = jit_concrete_check_args(c, nargs, args);
    return err ? err : jit_run_concrete(c, args);
}

static const ir_graph *graph_of(const rt_module_fn *fn) {
    return ((const tj_concrete *)fn->run)->graph;
}

static void free_fn(rt_module_fn *fn, int loaded) {
    if (loaded) /* a built module's concrete functions are their tj_functions' */
        jit_concrete_free(fn->run);
}

static const rt_module_ops jit_module_ops = {make_fn, reads_images, call_fn, graph_of, free_fn};

tj_module *tj_module_load(const char *dir) {
    return tj_module_load_opts(dir, 0);
}

tj_module *tj_module_load_opts(const char *dir, unsigned flags) {
    return rt_module_load(dir, flags, &jit_module_ops);
}
