/* test_cuda_device.c — GPUs as runtime devices (runtime/cuda.h). Without TJ_CUDA_DRIVER it asks
 * the real driver: where there is no GPU (this project's CI) it checks the reason given and the
 * refusal to make a device; where there is one it runs the device checks on it. With
 * TJ_CUDA_DRIVER naming tests/cuda/fake_cuda.c's library it runs them on the fake (host memory
 * behind the driver API), and FAKE_CUDA's faults: no device, the toolkit's stub library, device
 * memory that runs out (the allocator's cache released and the allocation retried once, then an
 * error naming the size asked and the memory free). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernel_helpers.h"
#include "runtime/cuda.h"

static void rounding(void) {
    CHECK_EQ_INT(rt_cuda_round(0), 512);
    CHECK_EQ_INT(rt_cuda_round(1), 512);
    CHECK_EQ_INT(rt_cuda_round(512), 512);
    CHECK_EQ_INT(rt_cuda_round(513), 1024);
    CHECK_EQ_INT(rt_cuda_round(1 << 20), 1 << 20);
    CHECK_EQ_INT(rt_cuda_round((1 << 20) + 1), 2 << 20);
    CHECK_EQ_INT(rt_cuda_round((6 << 20) + 5), 8 << 20);
}

/* The reason given, and no device made. */
static void unavailable(const char *want) {
    const char *why = rt_cuda_unavailable();
    CHECK_MSG(why && strstr(why, want), "want \"%s\" in: %s", want, why ? why : "(available)");
    CHECK_EQ_INT(rt_cuda_count(), 0);
    CHECK(rt_cuda_device(0) == NULL);
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(ir_last_error(), "cuda: ") && strstr(ir_last_error(), want), "%s",
              ir_last_error());
}

/* x's values on device d and back, bit for bit. */
static void round_trip(rt_device *d, tj_tensor *x) {
    tj_tensor *on = rt_tensor_to_device(x, d);
    CHECK_MSG(on != NULL, "%s", ir_last_error());
    if (!on)
        return;
    CHECK(!rt_on_host(on) && rt_buffer_device(on->buf) == d && on->numel == x->numel &&
          on->dtype == x->dtype && on->data != x->data);
    tj_tensor *back = rt_tensor_to_device(on, NULL);
    CHECK(back && rt_on_host(back));
    size_t bytes = (size_t)x->numel * ir_dtype_size(x->dtype);
    CHECK(back && !memcmp(back->data, x->data, bytes));
    tj_release(back);
    tj_release(on);
}

/* Four threads allocate and free blocks of a few classes on one device at once. */
static void *churn(void *arg) {
    rt_device *d = arg;
    for (int k = 0; k < 200; k++) {
        const int64_t n[1] = {100 + 300 * (k % 5)};
        tj_tensor *t = rt_tensor_alloc_on(d, TJ_F32, 1, n);
        if (!t)
            return (void *)1;
        tj_release(t);
    }
    return NULL;
}

static void threads(rt_device *d) {
    rt_cuda_mem_stats s0 = rt_cuda_mem_stats_of(d);
    pthread_t th[4];
    for (int t = 0; t < 4; t++)
        CHECK(pthread_create(&th[t], NULL, churn, d) == 0);
    for (int t = 0; t < 4; t++) {
        void *r = NULL;
        pthread_join(th[t], &r);
        CHECK(r == NULL);
    }
    rt_cuda_mem_stats s1 = rt_cuda_mem_stats_of(d);
    CHECK(s1.in_use_bytes == s0.in_use_bytes);
    CHECK(s1.reuses >= s0.reuses + 700); /* at most 4 x 5 blocks came from the driver */
}

static void device_checks(void) {
    CHECK(rt_cuda_unavailable() == NULL);
    int n = rt_cuda_count();
    CHECK(n >= 1);
    CHECK(rt_cuda_device(n + 98) == NULL && ir_last_code() == TJ_ERR_INVALID);
    CHECK_HAS(ir_last_error(), "no device cuda:");
    rt_device *d = rt_cuda_device(0);
    CHECK_MSG(d != NULL, "%s", ir_last_error());
    if (!d)
        return;
    CHECK(rt_is_cuda(d) && !d->host && !strcmp(d->name, "cuda:0"));
    CHECK(rt_cuda_device(0) == d); /* one device per GPU, kept */
    CHECK(!rt_is_cuda(rt_device_host()));

    /* values there and back: floats with specials, integers, booleans, one element, none */
    const int64_t d6[1] = {6}, d1[1] = {1}, d0[1] = {0}, big[1] = {300000};
    tj_tensor *f = mk(TJ_F32, 1, d6, F32(1, -0.0f, 3.5f, 1.0f / 0.0f, -1e-40f, 0.0f / 0.0f));
    tj_tensor *i = mk(TJ_I64, 1, d1, I64(-9007199254740993ll));
    tj_tensor *e = rt_tensor_alloc_uninit(TJ_F32, 1, d0);
    tj_tensor *b = rt_tensor_alloc_uninit(TJ_BOOL, 1, big);
    for (int64_t k = 0; b && k < b->numel; k++)
        ((uint8_t *)b->data)[k] = (uint8_t)(k % 3 == 0);
    uint64_t staged0 = rt_cuda_mem_stats_of(d).staged_copies;
    round_trip(d, f);
    round_trip(d, i);
    round_trip(d, e);
    round_trip(d, b);
    CHECK(rt_cuda_mem_stats_of(d).staged_copies >= staged0 + 3); /* through the pinned ring */
    /* larger than a staging buffer (4 MiB): in pieces, each through the next buffer of the ring */
    const int64_t huge[1] = {3 * (4 << 20) / 4 + 77};
    tj_tensor *h = rt_tensor_alloc_uninit(TJ_F32, 1, huge);
    for (int64_t k = 0; h && k < h->numel; k++)
        ((float *)h->data)[k] = (float)k;
    uint64_t staged1 = rt_cuda_mem_stats_of(d).staged_copies;
    round_trip(d, h);
    CHECK(rt_cuda_mem_stats_of(d).staged_copies == staged1 + 4);
    tj_release(h);
    if (n >= 2) { /* between two GPUs, through the host */
        rt_device *d1v = rt_cuda_device(1);
        tj_tensor *on0 = rt_tensor_to_device(f, d);
        tj_tensor *on1 = on0 && d1v ? rt_tensor_to_device(on0, d1v) : NULL;
        tj_tensor *back = on1 ? rt_tensor_to_device(on1, NULL) : NULL;
        CHECK(on1 && rt_buffer_device(on1->buf) == d1v && back &&
              !memcmp(back->data, f->data, 6 * sizeof(float)));
        tj_release(back);
        tj_release(on1);
        tj_release(on0);
    }

    /* the caching allocator: a freed block serves the next request of its class */
    rt_cuda_empty_cache(d);
    rt_cuda_mem_stats s0 = rt_cuda_mem_stats_of(d);
    CHECK_EQ_INT(s0.cached_bytes, 0);
    const int64_t d1000[1] = {1000};
    tj_tensor *a = rt_tensor_alloc_on(d, TJ_F32, 1, d1000); /* 4000 bytes: the 4096 class */
    rt_cuda_mem_stats s1 = rt_cuda_mem_stats_of(d);
    CHECK(a && s1.driver_allocs == s0.driver_allocs + 1 &&
          s1.in_use_bytes == s0.in_use_bytes + 4096);
    tj_release(a);
    rt_cuda_mem_stats s2 = rt_cuda_mem_stats_of(d);
    CHECK(s2.cached_bytes == 4096 && s2.in_use_bytes == s0.in_use_bytes);
    const int64_t d1020[1] = {1020}; /* 4080 bytes: the same class */
    a = rt_tensor_alloc_on(d, TJ_F32, 1, d1020);
    rt_cuda_mem_stats s3 = rt_cuda_mem_stats_of(d);
    CHECK(a && s3.driver_allocs == s1.driver_allocs && s3.reuses == s2.reuses + 1 &&
          s3.cached_bytes == 0);
    tj_release(a);
    rt_cuda_empty_cache(d);
    rt_cuda_mem_stats s4 = rt_cuda_mem_stats_of(d);
    CHECK(s4.cached_bytes == 0 && s4.released == s3.released + 1);

    threads(d);

    /* a reference kernel refuses a GPU input, naming the op and the device */
    tj_tensor *on = rt_tensor_to_device(f, d);
    tj_tensor *in[2] = {f, on};
    tj_status st = TJ_OK;
    CHECK(on && run_n(proto(IR_OP_ADD), in, 2, &st) == NULL && st == TJ_ERR_INVALID);
    CHECK_HAS(ir_last_error(), "add: input 1 is on cuda:0");
    tj_release(on);
    /* strings stay on the host */
    tj_tensor *str = mk(TJ_STRING, 1, d1, STR("hi"));
    CHECK(rt_tensor_to_device(str, d) == NULL && ir_last_code() == TJ_ERR_DTYPE);
    tj_release(str);
    tj_release(f);
    tj_release(i);
    tj_release(e);
    tj_release(b);
}

/* FAKE_CUDA=cap=N with N = 1 MiB: a request that fits only once the cache is released */
static void out_of_memory(void) {
    rt_device *d = rt_cuda_device(0);
    CHECK_MSG(d != NULL, "%s", ir_last_error());
    if (!d)
        return;
    const int64_t n600k[1] = {150000}, n700k[1] = {175000}; /* 600 000 and 700 000 bytes */
    tj_tensor *a = rt_tensor_alloc_on(d, TJ_F32, 1, n600k);
    CHECK(a != NULL);
    tj_release(a); /* cached, still the driver's */
    rt_cuda_mem_stats s0 = rt_cuda_mem_stats_of(d);
    CHECK(s0.cached_bytes == rt_cuda_round(600000));
    tj_tensor *b = rt_tensor_alloc_on(d, TJ_F32, 1, n700k); /* another class: the cache goes */
    rt_cuda_mem_stats s1 = rt_cuda_mem_stats_of(d);
    CHECK_MSG(b != NULL, "%s", ir_last_error());
    CHECK(s1.released == s0.released + 1 && s1.cached_bytes == 0);
    tj_tensor *c = rt_tensor_alloc_on(d, TJ_F32, 1, n700k); /* no room, nothing cached */
    CHECK(c == NULL && ir_last_code() == TJ_ERR_OOM);
    CHECK_HAS(ir_last_error(), "cuda:0: out of memory allocating 700000 bytes");
    CHECK_HAS(ir_last_error(), "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_HAS(ir_last_error(), "bytes free");
    tj_release(b); /* cached */
    rt_cuda_mem_stats s2 = rt_cuda_mem_stats_of(d);
    c = rt_tensor_alloc_on(d, TJ_F32, 1, n600k); /* fits once b's block is released */
    CHECK_MSG(c != NULL, "%s", ir_last_error());
    CHECK(rt_cuda_mem_stats_of(d).released == s2.released + 1);
    /* a small block cached, then a request that fails even after releasing it: said so */
    const int64_t n100[1] = {100};
    tj_release(rt_tensor_alloc_on(d, TJ_F32, 1, n100));
    CHECK(rt_cuda_mem_stats_of(d).cached_bytes == 512);
    tj_tensor *e = rt_tensor_alloc_on(d, TJ_F32, 1, n600k);
    CHECK(e == NULL && ir_last_code() == TJ_ERR_OOM);
    CHECK_HAS(ir_last_error(), "cache released and the allocation retried");
    CHECK(rt_cuda_mem_stats_of(d).cached_bytes == 0);
    tj_release(c);
}

/* FAKE_CUDA=copy_fail: a copy the driver refuses is an error naming the device, the copy, its
 * size and the driver's error; nothing is returned and the block goes back to the cache. */
static void copy_faults(void) {
    rt_device *d = rt_cuda_device(0);
    CHECK_MSG(d != NULL, "%s", ir_last_error());
    if (!d)
        return;
    const int64_t d3[1] = {3};
    tj_tensor *x = mk(TJ_F32, 1, d3, F32(1, 2, 3));
    CHECK(rt_tensor_to_device(x, d) == NULL && ir_last_code() == TJ_ERR_RUNTIME);
    CHECK_HAS(ir_last_error(), "cuda:0: copy to the device of 12 bytes failed");
    CHECK_HAS(ir_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS (700)");
    rt_cuda_mem_stats s = rt_cuda_mem_stats_of(d);
    CHECK(s.in_use_bytes == 0 && s.cached_bytes == 512);
    tj_tensor *on = rt_tensor_alloc_on(d, TJ_F32, 1, d3); /* there, but not readable back */
    CHECK(on && rt_tensor_to_device(on, NULL) == NULL);
    CHECK_HAS(ir_last_error(), "copy to the host of 12 bytes failed");
    tj_release(on);
    tj_release(x);
}

int main(void) {
    rounding();
    const char *drv = getenv("TJ_CUDA_DRIVER"), *mode = getenv("FAKE_CUDA");
    if (!drv) { /* the machine's own driver */
        const char *why = rt_cuda_unavailable();
        if (why) {
            printf("no GPU here: %s\n", why);
            unavailable(strstr(why, "cuInit") ? "cuInit failed" : "no NVIDIA driver");
        } else {
            device_checks();
        }
    } else if (mode && !strcmp(mode, "no_device")) {
        unavailable("cuInit failed: CUDA_ERROR_NO_DEVICE (100)");
    } else if (mode && !strcmp(mode, "stub")) {
        unavailable("CUDA_ERROR_STUB_LIBRARY (34)");
    } else if (mode && !strncmp(mode, "cap=", 4)) {
        out_of_memory();
    } else if (mode && !strcmp(mode, "copy_fail")) {
        copy_faults();
    } else if (strstr(drv, "no_such_library")) {
        unavailable("could not be opened");
    } else if (strstr(drv, "libm.so")) { /* a library, but no driver */
        unavailable("lacks cuInit");
    } else {
        device_checks();
        /* what the fake was asked: the copies went through the driver */
        void *lib = dlopen(drv, RTLD_NOW | RTLD_NOLOAD);
        void (*counts)(int *) = lib ? (void (*)(int *))dlsym(lib, "fake_cuda_counts") : NULL;
        int c[6] = {0};
        if (counts)
            counts(c);
        CHECK_MSG(counts && c[0] >= 4 && c[1] >= 1 && c[2] >= 5 && c[3] >= 5 && c[5] >= 4,
                  "allocs %d frees %d htod %d dtoh %d dtod %d syncs %d", c[0], c[1], c[2], c[3],
                  c[4], c[5]);
        if (lib)
            dlclose(lib);
    }
    return check_done();
}
