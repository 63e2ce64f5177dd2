/* Kernels shared one by one between programs (jit/cpu/codecache.c): a program whose key misses
 * compiles only the kernels no loaded object has; an equal kernel of another function runs the
 * code compiled for it. Checked: values against eager at every step; which kernels compiled
 * (jit_cpu_stats: n_reused); the objects a program holds outlive the function that compiled them;
 * a program made wholly of found kernels compiles nothing; a program of two objects goes to the
 * disk cache and to an image as one container and comes back from both in a new program. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "native_first.h"
#include "jit/cpu/program.h"
#include "jit/jit.h"

/* two kernels: the square (elementwise) and the row softmax (large enough not to be chained) */
static tj_tensor *base(tj_tensor *x) {
    return tj_softmax(tj_mul(x, x), -1);
}

/* base's two kernels and more: a scaled tanh, and a column sum */
static tj_tensor *more(tj_tensor *x) {
    tj_tensor *s = tj_softmax(tj_mul(x, x), -1);
    return tj_sum(tj_tanh(tj_mul(s, tj_scalar_f32(3.0f))), 1, (int[]){0}, 0);
}

static tj_tensor *rand2(int64_t r, int64_t c, uint64_t seed) {
    return tj_random_uniform(TJ_F32, 2, (const int64_t[]){r, c}, -1, 1, seed);
}

/* Calls f on x; checks the result against eager; returns the compile's statistics. */
static jit_cpu_stats call_checked(tj_function *f, tj_tensor *x) {
    tj_tensor *y = tj_call(f, 1, &x);
    jit_cpu_stats st = jit_cpu_last_stats();
    tj_tensor *e = tj_call_eager(f, 1, &x);
    CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
    CHECK_EQ_INT(tj_tensor_numel(y), tj_tensor_numel(e));
    for (int64_t i = 0; tj_status_of(y) == TJ_OK && i < tj_tensor_numel(e); i++) {
        double a = tj_tensor_get_f64(y, i), b = tj_tensor_get_f64(e, i);
        CHECK_MSG(fabs(a - b) <= 1e-5 * (1 + fabs(b)), "element %lld: %g, eager %g", (long long)i,
                  a, b);
    }
    tj_release(y);
    tj_release(e);
    return st;
}

static const jit_cpu_shared *shared_of(tj_function *f, tj_tensor *x) {
    tj_spec s = {TJ_F32, 2, {0}, NULL};
    memcpy(s.dims, tj_tensor_dims(x), 2 * sizeof(int64_t));
    tj_concrete *c = tj_function_get_concrete(f, 1, &s);
    return c && jit_cpu_is_program(c->prog) ? ((const cpu_prog *)c->prog)->shared : NULL;
}

/* Four threads at once make, call and free functions whose programs share kernels (base's two
 * in each of more's): objects found, held and freed concurrently; every value checked. */
typedef struct worker {
    tj_tensor *x;
    int bad;
} worker;

static void *churn(void *arg) {
    worker *w = arg;
    for (int k = 0; k < 6; k++) {
        tj_function *f =
            tj_function_new(k % 2 ? "more" : "base", (void *)(k % 2 ? more : base), 1, NULL);
        tj_tensor *y = tj_call(f, 1, &w->x), *e = tj_call_eager(f, 1, &w->x);
        if (tj_status_of(y) != TJ_OK || tj_tensor_numel(y) != tj_tensor_numel(e))
            w->bad++;
        for (int64_t i = 0; !w->bad && i < tj_tensor_numel(e); i += 97) {
            double a = tj_tensor_get_f64(y, i), b = tj_tensor_get_f64(e, i);
            w->bad += fabs(a - b) > 1e-5 * (1 + fabs(b));
        }
        tj_release(y);
        tj_release(e);
        tj_function_free(f);
    }
    return NULL;
}

static void threads(tj_tensor *x) {
    pthread_t th[4];
    worker w[4];
    for (int t = 0; t < 4; t++) {
        w[t] = (worker){x, 0};
        CHECK(pthread_create(&th[t], NULL, churn, &w[t]) == 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CHECK_MSG(w[t].bad == 0, "thread %d: %d wrong values or errors", t, w[t].bad);
    }
}

int main(void) {
    check_untiered();
    char dir[] = "/tmp/tj-kreuse-XXXXXX";
    if (!mkdtemp(dir))
        return 77;
    setenv("TJ_CACHE_DIR", dir, 1); /* before the first call: the configuration is read once */
    setenv("TJ_CACHE", "1", 1);
    if (!jit_cpu_available()) {
        rmdir(dir);
        return 77;
    }
    tj_tensor *x = rand2(300, 256, 1);

    /* base compiles its kernels; more finds them and compiles only its own */
    tj_function *fb = tj_function_new("base", (void *)base, 1, NULL);
    jit_cpu_stats sb = call_checked(fb, x);
    CHECK_EQ_INT(sb.from_cache, 0);
    CHECK(sb.n_kernels >= 2);
    CHECK_EQ_INT(sb.n_reused, 0);
    tj_function *fm = tj_function_new("more", (void *)more, 1, NULL);
    jit_cpu_stats sm = call_checked(fm, x);
    CHECK_EQ_INT(sm.from_cache, 0);
    CHECK_MSG(sm.n_reused == sb.n_kernels && sm.n_kernels > sm.n_reused,
              "more: %u kernels, %u found (base has %u)", sm.n_kernels, sm.n_reused, sb.n_kernels);
    CHECK_EQ_INT(jit_cpu_shared_objects(shared_of(fm, x)), 2);

    /* base's function freed: its object stays, held by more's program, which still runs */
    tj_function_free(fb);
    call_checked(fm, x);
    /* and a new base finds all its kernels there: nothing compiles */
    fb = tj_function_new("base", (void *)base, 1, NULL);
    sb = call_checked(fb, x);
    CHECK_EQ_INT(sb.from_cache, 3);
    CHECK_EQ_INT(sb.n_reused, sb.n_kernels);

    /* more's two objects as one container: in an image, loaded as a new program */
    tj_spec s = {TJ_F32, 2, {300, 256}, NULL};
    tj_concrete *c = tj_function_get_concrete(fm, 1, &s);
    size_t size = 0;
    unsigned char *img = c ? jit_cpu_program_image(c->prog, &size) : NULL;
    CHECK_MSG(img != NULL, "%s", tj_last_error());
    rt_program *p = img ? jit_cpu_program_from_image(c->graph, img, size) : NULL;
    CHECK_MSG(p != NULL, "%s", tj_last_error());
    if (p) {
        tj_tensor *out = NULL, *want = tj_call(fm, 1, &x);
        CHECK_EQ_INT(p->vt->run(p, &x, 1, c->caps, &out), TJ_OK);
        CHECK(out && tj_tensor_numel(out) == tj_tensor_numel(want) &&
              memcmp(tj_tensor_data(out), tj_tensor_data(want),
                     sizeof(float) * (size_t)tj_tensor_numel(want)) == 0);
        tj_release(out);
        tj_release(want);
        p->vt->free(p);
    }
    free(img);

    /* every program freed, every object unmapped: more comes back from the disk cache */
    tj_function_free(fb);
    tj_function_free(fm);
    fm = tj_function_new("more", (void *)more, 1, NULL);
    sm = call_checked(fm, x);
    CHECK_EQ_INT(sm.from_cache, 2);
    CHECK_EQ_INT(jit_cpu_shared_objects(shared_of(fm, x)), 1); /* the container, loaded whole */
    /* whose kernels a new base then finds */
    fb = tj_function_new("base", (void *)base, 1, NULL);
    sb = call_checked(fb, x);
    CHECK_MSG(sb.from_cache == 2 || sb.from_cache == 3, "base: from %d", sb.from_cache);
    tj_function_free(fb);
    tj_function_free(fm);
    threads(x);
    tj_release(x);
    check_rm_dir(dir);
    return check_done();
}
