/* The public device API (tracejit.h: tj_to_device, tj_tensor_device, tj_device_count,
 * tj_device_unavailable): names parsed and refused; a tensor moved to a GPU and back bit for bit;
 * its values read (one element, its text) through a copy; its pointer refused; ops, compiled
 * functions, variables and loops refusing it with the op and the device named. Run without
 * TJ_CUDA_DRIVER (this machine's driver: no GPU in CI, the reason checked) and with the fake
 * driver of tests/cuda/fake_cuda.c (two GPUs over host memory). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include <tracejit.h>

static tj_tensor *twice(tj_tensor *x) {
    return tj_add(x, x);
}

/* moving a tensor inside a traced function: refused (placement there is the backend's) */
static tj_tensor *moves(tj_tensor *x) {
    return tj_to_device(tj_add(x, x), "cpu");
}

static void in_a_trace(void) {
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, (const int64_t[]){2}, (const float[]){1, 2});
    tj_function *f = tj_function_new("moves", (void *)moves, 1, NULL);
    tj_tensor *y = tj_call(f, 1, &x);
    CHECK(tj_status_of(y) == TJ_ERR_STATE);
    CHECK_HAS(tj_error_message(y), "to_device: inside a traced function");
    tj_release(y);
    tj_function_free(f);
    tj_release(x);
}

static void names(void) {
    CHECK_EQ_INT(tj_device_count("cpu"), 1);
    CHECK(tj_device_unavailable("cpu") == NULL);
    const char *bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda0", "CPU", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *why = tj_device_unavailable(bad[i]);
        CHECK_MSG(why && strstr(why, "unknown device") && strstr(why, bad[i]), "%s: %s", bad[i],
                  why ? why : "(usable)");
    }
    CHECK(tj_device_unavailable(NULL) && strstr(tj_device_unavailable(NULL), "NULL"));
    CHECK_EQ_INT(tj_device_count("tpu"), 0);
    CHECK_EQ_INT(tj_device_count(NULL), 0);
}

static void on_gpu(void) {
    CHECK_EQ_INT(tj_device_count("cuda"), 2); /* the fake's */
    CHECK(tj_device_unavailable("cuda") == NULL && tj_device_unavailable("cuda:1") == NULL);
    CHECK_HAS(tj_device_unavailable("cuda:7"), "no device cuda:7");
    const float v[4] = {1.5f, -2, 0.0f / 0.0f, 3e38f};
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, (const int64_t[]){4}, v);
    CHECK(!strcmp(tj_tensor_device(x), "cpu"));
    tj_tensor *g = tj_to_device(x, "cuda");
    CHECK_MSG(tj_status_of(g) == TJ_OK, "%s", tj_error_message(g));
    CHECK(!strcmp(tj_tensor_device(g), "cuda:0"));
    CHECK(tj_to_device(g, "cuda:0") == g); /* already there: itself */
    tj_release(g);                         /* the reference that call added */
    /* its values, read through copies */
    CHECK(tj_tensor_get_f64(g, 0) == 1.5 && tj_tensor_get_f64(g, 1) == -2 &&
          tj_tensor_get_f64(g, 2) != tj_tensor_get_f64(g, 2));
    char *s = tj_tensor_str(g);
    CHECK_MSG(s && strstr(s, "1.5") && strstr(s, "device=cuda:0") && strstr(s, "shape=(4,)"), "%s",
              s);
    free(s);
    /* its pointer is the GPU's: refused */
    CHECK(tj_tensor_data(g) == NULL);
    CHECK_HAS(tj_last_error(), "tensor_data: the tensor is on cuda:0");
    /* an op, a compiled function, a variable, a loop bound: each names the device */
    tj_tensor *r = tj_add(g, x);
    CHECK(tj_status_of(r) == TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(r), "add: input 0 is on cuda:0");
    /* a host backend's function (the CUDA backend's takes it: tests/jit/test_cuda_backend.c) */
    tj_function_options host = {.backend = "cpu,interp"};
    tj_function *f = tj_function_new("twice", (void *)twice, 1, &host);
    tj_tensor *y = tj_call(f, 1, &g);
    CHECK(tj_status_of(y) != TJ_OK);
    CHECK_HAS(tj_error_message(y), "cuda:0");
    tj_tensor *yx = tj_call(f, 1, &x); /* and the host's tensor still runs */
    CHECK(tj_status_of(yx) == TJ_OK && tj_tensor_get_f64(yx, 0) == 3.0);
    tj_function_free(f);
    CHECK(tj_variable_new(g, "w") == NULL);
    CHECK_HAS(tj_last_error(), "variable_new: init is on cuda:0");
    tj_variable *w = tj_variable_new(x, "w");
    tj_tensor *a = tj_assign(w, g);
    CHECK(tj_status_of(a) == TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(a), "the value is on cuda:0");
    tj_variable_free(w);
    /* another GPU, then the host: the same bits */
    tj_tensor *g1 = tj_to_device(g, "cuda:1");
    CHECK(tj_status_of(g1) == TJ_OK && !strcmp(tj_tensor_device(g1), "cuda:1"));
    tj_tensor *back = tj_to_device(g1, "cpu");
    CHECK(tj_status_of(back) == TJ_OK && !strcmp(tj_tensor_device(back), "cpu") &&
          !memcmp(tj_tensor_data(back), v, sizeof v));
    /* strings stay on the host; an error tensor stays itself */
    tj_tensor *str =
        tj_tensor_from_data(TJ_STRING, 1, (const int64_t[]){1}, (const char *const[]){"hi"});
    tj_tensor *e[5] = {tj_to_device(str, "cuda"), tj_to_device(r, "cuda"),
                       tj_to_device(x, "cuda:9"), tj_to_device(NULL, "cuda"),
                       tj_to_device(x, "tpu")};
    CHECK(tj_status_of(e[0]) == TJ_ERR_DTYPE);
    CHECK(e[1] == r);
    CHECK(tj_status_of(e[2]) == TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(e[2]), "to_device: cuda: no device cuda:9");
    CHECK(tj_status_of(e[3]) == TJ_ERR_INVALID);
    CHECK(tj_status_of(e[4]) == TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(e[4]), "unknown device 'tpu'");
    for (int k = 0; k < 5; k++)
        tj_release(e[k]);
    tj_release(r);
    tj_release(y);
    tj_release(yx);
    tj_release(a);
    tj_release(g1);
    tj_release(back);
    tj_release(str);
    tj_release(g);
    tj_release(x);
}

int main(void) { /* no scope open: the caller owns each new tensor and releases it */
    names();
    in_a_trace();
    if (getenv("TJ_CUDA_DRIVER")) {
        on_gpu();
    } else if (tj_device_unavailable("cuda")) { /* no GPU: the reason, and nothing moves */
        const char *why = tj_device_unavailable("cuda");
        printf("no GPU here: %s\n", why);
        CHECK(strstr(why, "no NVIDIA driver") || strstr(why, "no GPU"));
        CHECK_EQ_INT(tj_device_count("cuda"), 0);
        tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, (const int64_t[]){1}, (const float[]){1});
        tj_tensor *g = tj_to_device(x, "cuda");
        CHECK(tj_status_of(g) == TJ_ERR_UNSUPPORTED);
        CHECK_HAS(tj_error_message(g), "to_device: cuda: ");
        tj_release(g);
        tj_release(x);
    }
    return check_done();
}
