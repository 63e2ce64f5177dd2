/* test_backends.c — the backend registry and the choice of backend: the build's backends in order
 * of preference with the interpreter last, tj_function_options.backend (names, preference lists,
 * unknown and malformed names refused at tj_function_new with the available ones listed), the
 * function's option over TJ_BACKEND, a signature the chosen backend declines running on the
 * interpreter, and the registry's view of programs (jit_backend_of). CMake runs it again with
 * TJ_BACKEND=nosuch, =cuda (in the build; no GPU in CI) and =interp: a function that names no
 * backend then fails its first call with an error naming TJ_BACKEND's value (and, for cuda, why
 * it cannot run here) and the available backends, or runs on the interpreter; one that names its
 * backend is unaffected; eager ops never ask. */
#include <tracejit.h>

#include "check.h"
#include "native_first.h"
#include "jit/jit.h"

static tj_tensor *affine(tj_tensor *x) {
    return tj_add(tj_mul(x, tj_scalar_f32(2.0f)), tj_scalar_f32(1.0f));
}

/* f's program for one f32[4] argument: its backend's name, "" on error */
static const char *backend_of(tj_function *f, int64_t n) {
    tj_spec s = {TJ_F32, 1, {n}, NULL};
    tj_concrete *c = tj_function_get_concrete(f, 1, &s);
    return c ? tj_concrete_backend(c) : "";
}

static tj_function *with_backend(const char *spec) {
    return tj_function_new("affine", (void *)affine, 1, &(tj_function_options){.backend = spec});
}

/* f computes 2x + 1 on [0, 1, 2, 3] */
static void computes(tj_function *f) {
    tj_scope_begin();
    tj_tensor *x = tj_range(TJ_F32, 0, 4, 1);
    tj_tensor *y = tj_call(f, 1, &x);
    CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_last_error());
    for (int i = 0; i < 4 && !tj_status_of(y); i++)
        CHECK_NEAR(tj_tensor_get_f64(y, i), 2.0 * i + 1, 0);
    tj_scope_end();
}

static void registry(void) {
    int n = 0;
    while (tj_backend_name(n))
        n++;
    CHECK(n >= 2 && (uint32_t)n == jit_backend_count());
    CHECK_STR(tj_backend_name(n - 1), "interp"); /* the interpreter, last */
    CHECK(tj_backend_name(-1) == NULL);
    CHECK(tj_backend_unavailable("interp") == NULL);
    CHECK_HAS(tj_backend_unavailable("nosuch"), "no backend of that name");
    CHECK_HAS(tj_backend_unavailable(NULL), "no backend of that name");
    for (int i = 0; i < n; i++) {
        const jit_backend *b = jit_backend_at((uint32_t)i);
        CHECK(b == jit_backend_find(tj_backend_name(i)));
        CHECK(b->compile != NULL && b->name && b->what);
        CHECK((b->write != NULL) == (b->read != NULL)); /* an image written can be read */
        CHECK(!b->write || b->image_target);
    }
    CHECK(jit_backend_interpreter() == jit_backend_find("interp"));
    CHECK(jit_backend_at((uint32_t)n) == NULL);
    char buf[256];
    jit_backend_list_available(buf, sizeof buf);
    const char *avail = buf;
    CHECK_HAS(avail, "interp");
}

static void options(void) {
    /* every backend available here, by name */
    for (int i = 0; tj_backend_name(i); i++) {
        const char *name = tj_backend_name(i);
        if (tj_backend_unavailable(name))
            continue;
        tj_function *f = with_backend(name);
        CHECK_MSG(f != NULL, "%s: %s", name, tj_last_error());
        CHECK_STR(backend_of(f, 4), name);
        computes(f);
        tj_function_free(f);
    }
    /* refused when the function is made: unknown names, malformed lists */
    const char *bad[] = {"nosuch", "tpu", "tpu,interp", "interp,tpu", "cpu,,interp", ",", "CPU"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(with_backend(bad[i]) == NULL);
        CHECK_EQ_INT(ir_last_code(), TJ_ERR_INVALID);
        CHECK_HAS(tj_last_error(), "function_new: backend");
        CHECK_HAS(tj_last_error(), "interp"); /* the backends there are */
    }
    with_backend("tpu");
    CHECK_HAS(tj_last_error(), "no backend 'tpu' in this build");
    CHECK_HAS(tj_last_error(), "available here: ");
    /* a backend of the build that cannot run here (the CUDA one without a GPU): refused with the
     * reason; first in a list, the next one is taken */
    const char *why = tj_backend_unavailable("cuda");
    if (why) {
        CHECK(with_backend("cuda") == NULL);
        CHECK_HAS(tj_last_error(), "backend 'cuda' is not available here");
        CHECK_HAS(tj_last_error(), why);
        tj_function *fc = with_backend("cuda,interp");
        CHECK_STR(backend_of(fc, 4), "interp");
        tj_function_free(fc);
    }
    /* a preference list: the first available; "" is the default */
    tj_function *f = with_backend("interp,cpu");
    CHECK_STR(backend_of(f, 4), "interp");
    tj_function_free(f);
    f = with_backend("cpu,interp");
    CHECK_STR(backend_of(f, 4), tj_backend_unavailable("cpu") ? "interp" : "cpu");
    tj_function_free(f);
    /* the option wins over TJ_BACKEND, whatever it says */
    f = with_backend("interp");
    CHECK_STR(backend_of(f, 4), "interp");
    computes(f);
    tj_function_free(f);
}

/* A signature with unknown dims: the CPU backend declines it and the interpreter runs it. */
static void declined(void) {
    if (tj_backend_unavailable("cpu"))
        return;
    tj_function *f = with_backend("cpu");
    CHECK_STR(backend_of(f, -1), "interp");
    CHECK_STR(backend_of(f, 4), "cpu");
    tj_function_free(f);
}

/* What TJ_BACKEND does to a function naming no backend. */
static void environment(void) {
    const char *env = getenv("TJ_BACKEND");
    tj_function *f = tj_function_new("affine", (void *)affine, 1, NULL);
    CHECK(f != NULL); /* the environment is read at the first compile, not here */
    tj_scope_begin();
    tj_tensor *x = tj_range(TJ_F32, 0, 4, 1);
    tj_tensor *y = tj_call(f, 1, &x);
    bool cuda_off = env && strcmp(env, "cuda") == 0 && tj_backend_unavailable("cuda");
    if (env && (strcmp(env, "nosuch") == 0 || cuda_off)) {
        CHECK_EQ_INT(tj_status_of(y), TJ_ERR_INVALID);
        char want[96];
        snprintf(want, sizeof want,
                 cuda_off ? "TJ_BACKEND: backend '%s' is not available here"
                          : "TJ_BACKEND: no backend '%s' in this build",
                 env);
        CHECK_HAS(tj_last_error(), want);
        CHECK_HAS(tj_last_error(), "available here: ");
        CHECK_HAS(tj_last_error(), "interp");
        tj_spec s = {TJ_F32, 1, {4}, NULL};
        CHECK(tj_function_get_concrete(f, 1, &s) == NULL);
        CHECK_HAS(tj_last_error(), "TJ_BACKEND");
        /* eager ops do not compile: unaffected */
        tj_tensor *e = affine(x);
        CHECK_EQ_INT(tj_status_of(e), TJ_OK);
    } else {
        CHECK_EQ_INT(tj_status_of(y), TJ_OK);
        const char *want = env && *env ? env : tj_backend_name(0);
        if (!env && tj_backend_unavailable(want))
            want = "interp";
        CHECK_STR(backend_of(f, 4), want);
    }
    tj_scope_end();
    tj_function_free(f);
}

int main(void) {
    check_untiered();
    registry();
    options();
    declined();
    environment();
    return check_done();
}
