/* Quick code (jit_backend_opts.quick, the default for a signature's first native code): the loops
 * of small kernels are not unrolled, so the module is smaller and compiles faster; its values
 * agree with the unrolled code's and eager's; the program says a recompile pays
 * (rt_program.recompile_pays; read back from its image too), and a hot signature (1000 short
 * calls) compiles again, unrolled, in the background. Run again with TJ_QUICK_COMPILE=0: first code
 * unrolled, never compiled again. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "native_first.h"
#include "jit/cpu/program.h"
#include "jit/jit.h"

static int n_again;
static void log_sink(const char *topic, const char *msg, void *user) {
    (void)topic, (void)user;
    if (strstr(msg, "compiled again, specialized and unrolled"))
        n_again++;
}

/* small products, a softmax and a row sum at batch 4: small kernels with short constant loops */
static tj_tensor *small_mlp(tj_tensor *x, tj_tensor *w1, tj_tensor *w2) {
    tj_tensor *h = tj_relu(tj_matmul(x, w1));
    return tj_add(tj_softmax(tj_matmul(h, w2), -1), tj_sum(h, 1, (int[]){1}, 1));
}

static tj_tensor *uniform(int64_t r, int64_t c, uint64_t seed) {
    return tj_random_uniform(TJ_F32, 2, (const int64_t[]){r, c}, -1, 1, seed);
}

static void close_to(tj_tensor *a, tj_tensor *b, const char *what) {
    CHECK_EQ_INT(tj_tensor_numel(a), tj_tensor_numel(b));
    for (int64_t i = 0; i < tj_tensor_numel(a) && i < tj_tensor_numel(b); i++) {
        double x = tj_tensor_get_f64(a, i), y = tj_tensor_get_f64(b, i);
        CHECK_MSG(fabs(x - y) <= 1e-5 * (1 + fabs(y)), "%s: element %lld: %g against %g", what,
                  (long long)i, x, y);
    }
}

/* g compiled by the CPU backend with quick on or off: its object's size, and its values on args
 * against want. */
static size_t compile_and_run(const tj_concrete *c, bool quick, tj_tensor **args, tj_tensor *want,
                              bool *pays) {
    jit_cpu_opts o = {.quick = quick};
    rt_program *p = jit_cpu_compile_opts(c->graph, &o);
    CHECK_MSG(p != NULL, "%s", tj_last_error());
    if (!p)
        return 0;
    size_t size = 0;
    jit_cpu_shared_object(((cpu_prog *)p)->shared, &size);
    *pays = p->recompile_pays;
    /* saved and loaded, it says the same (a module's hot signature compiles again too) */
    size_t isize = 0;
    unsigned char *img = jit_cpu_program_image(p, &isize);
    rt_program *q = img ? jit_cpu_program_from_image(c->graph, img, isize) : NULL;
    CHECK_MSG(q != NULL, "%s", tj_last_error());
    if (q) {
        CHECK(q->recompile_pays == p->recompile_pays);
        q->vt->free(q);
    }
    free(img);
    tj_tensor *out = NULL;
    CHECK_EQ_INT(p->vt->run(p, args, 3, c->caps, &out), TJ_OK);
    if (out)
        close_to(out, want, quick ? "quick" : "unrolled");
    tj_release(out);
    p->vt->free(p);
    return size;
}

int main(void) {
    check_untiered();
    char dir[] = "/tmp/tj-quick-XXXXXX";
    if (!mkdtemp(dir))
        return 77;
    setenv("TJ_CACHE_DIR", dir, 1); /* before the first call: the configuration is read once */
    if (!jit_cpu_available()) {
        rmdir(dir);
        return 77;
    }
    bool quick_on = !(getenv("TJ_QUICK_COMPILE") && !strcmp(getenv("TJ_QUICK_COMPILE"), "0"));
    tj_set_log(log_sink, NULL);
    tj_set_log_topics("compile");
    tj_tensor *x = uniform(4, 32, 1), *w1 = uniform(32, 48, 2), *w2 = uniform(48, 10, 3);
    tj_tensor *args[3] = {x, w1, w2};
    tj_function *f = tj_function_new("small_mlp", (void *)small_mlp, 3, NULL);
    tj_tensor *want = tj_call_eager(f, 3, args);

    /* the same graph both ways: the quick module is smaller, the values the same */
    tj_spec s[3] = {
        {TJ_F32, 2, {4, 32}, NULL}, {TJ_F32, 2, {32, 48}, NULL}, {TJ_F32, 2, {48, 10}, NULL}};
    tj_concrete *c = tj_function_get_concrete(f, 3, s);
    CHECK(c != NULL);
    if (c) {
        bool pays_quick = false, pays_full = true;
        size_t quick = compile_and_run(c, true, args, want, &pays_quick);
        size_t full = compile_and_run(c, false, args, want, &pays_full);
        CHECK_MSG(quick > 0 && quick < full, "quick object %zu bytes, unrolled %zu", quick, full);
        CHECK(pays_quick);
        CHECK(!pays_full);
    }

    /* the function's own first code: quick unless TJ_QUICK_COMPILE=0; 1000 short calls make it
     * hot, and the unrolled code compiles in the background and takes over */
    tj_function *g = tj_function_new("small_mlp_hot", (void *)small_mlp, 3, NULL);
    for (int k = 0; k < 999; k++)
        tj_release(tj_call(g, 3, args));
    CHECK_EQ_INT(tj_function_wait_compiled(g), TJ_OK);
    CHECK_EQ_INT(n_again, 0); /* 999 calls */
    tj_tensor *y = tj_call(g, 3, args);
    close_to(y, want, "the 1000th call");
    tj_release(y);
    CHECK_EQ_INT(tj_function_wait_compiled(g), TJ_OK);
    CHECK_EQ_INT(n_again, quick_on ? 1 : 0);
    y = tj_call(g, 3, args);
    close_to(y, want, "after");
    tj_release(y);

    tj_function_free(g);
    tj_function_free(f);
    tj_release(want);
    tj_release(x);
    tj_release(w1);
    tj_release(w2);
    tj_set_log(NULL, NULL);
    check_rm_dir(dir);
    return check_done();
}
