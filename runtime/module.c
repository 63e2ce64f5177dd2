/* module.c — saved modules read back (S27, tf.saved_model.load) and the calls on a module, for
 * both libraries (module.h). Loading reads everything as untrusted input: the manifest line by
 * line, every file against its FNV-1a checksum, the graphs through the parser and the verifier,
 * each graph's parameters against its signature, its results against the result kind and 'out'
 * lines, and every variable slot it reads or assigns against the variable the manifest binds; it
 * creates the variables from the checkpoint and hands each checked graph, with its saved image
 * when the library reads that backend's images, to the library's ops->make. The format is
 * jit/module.c's (tj_module_save). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/module.h"

#define MOD_MAGIC 0x746a6d64u
enum { MAX_GRAPH = 64 << 20 };

tj_status rt_module_check(const tj_module *m, const char *what) {
    if (!m)
        return ir_errorf(TJ_ERR_INVALID, "%s: the module is NULL", what);
    if (m->magic != MOD_MAGIC)
        return ir_errorf(TJ_ERR_INVALID, "%s: not a live tj_module", what);
    return TJ_OK;
}

int rt_module_grow(void **p, uint32_t n, size_t size) {
    if (n && (n < 4 || (n & (n - 1))))
        return 0;
    void *q = realloc(*p, (n ? 2 * (size_t)n : 4) * size);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

tj_module *rt_module_new(const char *name, const rt_module_ops *ops) {
    tj_module *m = calloc(1, sizeof *m);
    if (!m || !(m->name = strdup(name && *name ? name : "module"))) {
        free(m);
        return (void)ir_errorf(TJ_ERR_OOM, "module_new: out of memory"), NULL;
    }
    m->magic = MOD_MAGIC;
    m->ops = ops;
    return m;
}

tj_variable *rt_module_find_var(const tj_module *m, const char *name) {
    for (uint32_t i = 0; i < m->n_vars; i++)
        if (strcmp(m->vars[i]->name, name) == 0)
            return m->vars[i];
    return NULL;
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

static tj_status load_graph(rt_module_fn *fn, const char *path, const char *text,
                            tj_variable *const *caps, uint32_t n_caps, const tj_spec *outs,
                            uint32_t n_outs, int kind, const char *img_path, const char *img_b,
                            const unsigned char *img, size_t img_size, const char *no_img,
                            const rt_module_ops *ops) {
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
    if (!st && ((kind == RT_RESULT_NONE && g->n_outputs != 0) ||
                (kind == RT_RESULT_SINGLE && g->n_outputs != 1)))
        st = ir_errorf(TJ_ERR_CORRUPT,
                       "%s: %s has %u results; module.tjm says the function returns %s", what, path,
                       g->n_outputs, kind == RT_RESULT_NONE ? "none" : "one tensor");
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
    if (!st) { /* the function keeps its checked graph and its variables */
        fn->graph = g;
        fn->result_kind = kind;
        g = NULL;
        if (n_caps && !(fn->caps = malloc(n_caps * sizeof *fn->caps)))
            st = ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
        for (uint32_t k = 0; k < n_caps && !st; k++)
            fn->caps[fn->n_caps++] = caps[k];
    }
    if (!st)
        st = ops->make(fn, hash, img_path, img_b, img, img_size, no_img);
    ir_graph_free(g);
    if (!st)
        rt_log(RT_LOG_COMPILE, "module: %s runs on %s", fn->name, fn->how);
    return st;
}

static void fn_free(const tj_module *m, rt_module_fn *fn) {
    if (fn->run || fn->src)
        m->ops->free_fn(fn, m->loaded);
    ir_graph_free(fn->graph);
    free(fn->caps);
    free(fn->specs);
    free(fn->name);
}

tj_module *rt_module_load(const char *dir, unsigned flags, const rt_module_ops *ops) {
    const char *what = "module_load";
    if (!dir || !*dir || strlen(dir) > 3000)
        return (void)ir_errorf(TJ_ERR_INVALID, "%s: the directory is NULL, empty or too long",
                               what),
               NULL;
    char path[3300];
    snprintf(path, sizeof path, "%s/module.tjm", dir);
    unsigned char *text = NULL;
    size_t size;
    tj_status st = rt_read_file(what, path, RT_MODULE_MAX_MANIFEST, &text, &size);
    if (st)
        return NULL;
    tj_module *m = rt_module_new("module", ops);
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
            tj_tensor *value = rt_tensor_plain(vals[k]);
            tj_variable *v = value ? rt_variable_create(value, names[k], 0) : NULL;
            if (!v || rt_module_grow((void **)&m->vars, m->n_vars, sizeof *m->vars)) {
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
            kind < RT_RESULT_NONE || kind > RT_RESULT_TUPLE || nargs < 0 || nargs > 64 ||
            ncaps > 4096) {
            st = bad_line(&r, "a 'function' line was expected");
            break;
        }
        if (rt_module_grow((void **)&m->fns, m->n_fns, sizeof *m->fns)) {
            st = ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
            break;
        }
        rt_module_fn *fn = &m->fns[m->n_fns++];
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
            if (!c || strncmp(c, "cap ", 4) != 0 || !(caps[k] = rt_module_find_var(m, c + 4)))
                st = bad_line(&r, "a 'cap' line naming a saved variable was expected");
        }
        tj_spec *outs = NULL;
        uint32_t n_outs = 0;
        while (!st && (s = r.p) && strncmp(s, "out ", 4) == 0) {
            tj_spec out;
            st = parse_type(&r, "out", &out);
            if (!st && rt_module_grow((void **)&outs, n_outs, sizeof *outs))
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
        const char *img_b = nfile[0] && ops->reads(nback) ? nback : NULL;
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
                                                           : "",
                            ops);
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
static rt_module_fn *find_fn(tj_module *m, const char *name) {
    for (uint32_t i = 0; name && i < m->n_fns; i++)
        if (strcmp(m->fns[i].name, name) == 0)
            return &m->fns[i];
    return NULL;
}

tj_tensor *tj_module_call(tj_module *m, const char *name, int nargs, tj_tensor *const *args) {
    const char *what = "module_call";
    tj_status st = rt_module_check(m, what);
    if (st)
        return rt_scoped(rt_error_from_status(st));
    rt_module_fn *fn = find_fn(m, name);
    if (!fn)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: '%s' has no function '%s'", what, m->name,
                                   name ? name : "(null)"));
    if (!m->loaded) /* a built module's function checks its arguments as tj_concrete_call */
        return rt_scoped(m->ops->call(m, fn, nargs, args));
    if (nargs != fn->n_args || (nargs && !args))
        return rt_scoped(rt_errorf(TJ_ERR_SIGNATURE, "%s: '%s' takes %d arguments, %d given", what,
                                   fn->name, fn->n_args, nargs));
    for (int k = 0; k < nargs; k++)
        if (!args[k] || args[k]->kind != RT_CONCRETE)
            return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: '%s' argument %d is not a tensor", what,
                                       fn->name, k));
    return rt_scoped(m->ops->call(m, fn, nargs, args));
}

const char *tj_module_runs_on(const tj_module *m, const char *name) {
    if (rt_module_check(m, "module_runs_on"))
        return NULL;
    const rt_module_fn *fn = find_fn((tj_module *)m, name);
    if (!fn)
        return (void)ir_errorf(TJ_ERR_INVALID, "module_runs_on: '%s' has no function '%s'", m->name,
                               name ? name : "(null)"),
               NULL;
    return m->loaded ? fn->how : "traced in this process";
}

int tj_module_signature(const tj_module *m, const char *name, int max, tj_spec *specs) {
    if (rt_module_check(m, "module_signature"))
        return -1;
    const rt_module_fn *fn = find_fn((tj_module *)m, name);
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
    if (rt_module_check(m, "module_variable"))
        return NULL;
    tj_variable *v = name ? rt_module_find_var(m, name) : NULL;
    if (!v)
        ir_errorf(TJ_ERR_INVALID, "module_variable: '%s' has no variable '%s'", m->name,
                  name ? name : "(null)");
    return v;
}

char *tj_module_describe(const tj_module *m) {
    if (rt_module_check(m, "module_describe"))
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return (void)ir_errorf(TJ_ERR_OOM, "module_describe: out of memory"), NULL;
    fprintf(f, "module '%s'%s\n", m->name, m->loaded ? " (loaded)" : "");
    for (uint32_t i = 0; i < m->n_fns; i++) {
        const rt_module_fn *fn = &m->fns[i];
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
        const ir_graph *g = m->ops->graph(fn);
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
        fn_free(m, &m->fns[i]);
    free(m->fns);
    if (m->loaded)
        for (uint32_t i = 0; i < m->n_vars; i++)
            tj_variable_free(m->vars[i]);
    free(m->vars);
    free(m->name);
    m->magic = 0;
    free(m);
}

/* ---- running a function ---------------------------------------------------------------------- */
static int by_id(const void *a, const void *b) {
    uint64_t x = (*(tj_variable *const *)a)->id, y = (*(tj_variable *const *)b)->id;
    return x < y ? -1 : x > y;
}

tj_status rt_assigned_vars(const ir_graph *g, tj_variable *const *caps, uint32_t n_caps,
                           tj_variable ***out, uint32_t *n_out) {
    *out = NULL;
    *n_out = 0;
    uint8_t *assigned = calloc((size_t)n_caps + 1, 1); /* inside regions too */
    if (!assigned)
        return ir_errorf(TJ_ERR_OOM, "out of memory");
    ir_assigned_slots(g, assigned, n_caps);
    uint32_t n = 0;
    for (uint32_t s = 0; s < n_caps; s++)
        n += assigned[s];
    tj_variable **locks = n ? malloc(n * sizeof *locks) : NULL;
    if (n && !locks) {
        free(assigned);
        return ir_errorf(TJ_ERR_OOM, "out of memory");
    }
    for (uint32_t s = 0; s < n_caps; s++)
        if (assigned[s])
            locks[(*n_out)++] = caps[s];
    free(assigned);
    if (*n_out > 1)
        qsort(locks, *n_out, sizeof *locks, by_id);
    *out = locks;
    return TJ_OK;
}
