/* baseline_fastmath.c — the hand-written C baselines bench_cpu.c measures tracejit against. This
 * file alone is compiled -O3 -march=native -ffast-math (bench/CMakeLists.txt), so GCC vectorizes
 * tanhf through glibc's libmvec, as a careful C programmer would get. Every loop works on a range
 * [lo, hi) so that bl_par_run can split it across the same number of threads tracejit uses;
 * threads are created per run (tens of microseconds, which slightly favours tracejit). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

typedef void (*bl_range_fn)(void *ctx, int64_t lo, int64_t hi);

#define BL_MAX_THREADS 64

typedef struct bl_part {
    bl_range_fn fn;
    void *ctx;
    int64_t lo, hi;
} bl_part;

static void *bl_thread(void *arg) {
    bl_part *p = arg;
    p->fn(p->ctx, p->lo, p->hi);
    return NULL;
}

/* Runs fn over [0, n) on n_threads threads (the caller is one), in chunks that are multiples of
 * `align` items (so each thread's slice starts on a cache line). */
void bl_par_run(int n_threads, int64_t n, int64_t align, bl_range_fn fn, void *ctx) {
    if (n_threads < 1)
        n_threads = 1;
    if (n_threads > BL_MAX_THREADS)
        n_threads = BL_MAX_THREADS;
    if (align < 1)
        align = 1;
    int64_t chunk = (n + n_threads - 1) / n_threads;
    chunk = (chunk + align - 1) / align * align;
    bl_part parts[BL_MAX_THREADS];
    pthread_t tids[BL_MAX_THREADS];
    int started[BL_MAX_THREADS] = {0};
    for (int t = 0; t < n_threads; t++) {
        int64_t lo = t * chunk < n ? t * chunk : n, hi = lo + chunk < n ? lo + chunk : n;
        parts[t] = (bl_part){fn, ctx, lo, hi};
        if (t > 0 && hi > lo)
            started[t] = pthread_create(&tids[t], NULL, bl_thread, &parts[t]) == 0;
        if (t > 0 && hi > lo && !started[t])
            fn(ctx, lo, hi); /* no thread: do it here */
    }
    fn(ctx, parts[0].lo, parts[0].hi);
    for (int t = 1; t < n_threads; t++)
        if (started[t])
            pthread_join(tids[t], NULL);
}

/* ---- memcpy: the bandwidth bound of a streaming elementwise op ---- */
typedef struct bl_copy {
    const char *src;
    char *dst;
} bl_copy;

static void copy_range(void *ctx, int64_t lo, int64_t hi) {
    bl_copy *c = ctx;
    memcpy(c->dst + lo, c->src + lo, (size_t)(hi - lo));
}

void bl_memcpy(int n_threads, void *dst, const void *src, size_t bytes) {
    bl_copy c = {src, dst};
    bl_par_run(n_threads, (int64_t)bytes, 64, copy_range, &c);
}

/* ---- y = tanh(x*a + b)*c - x ---- */
typedef struct bl_tanh {
    const float *x;
    float *y;
    float a, b, c;
} bl_tanh;

static void tanh_range(void *ctx, int64_t lo, int64_t hi) {
    const bl_tanh *t = ctx;
    const float *restrict x = t->x;
    float *restrict y = t->y;
    const float a = t->a, b = t->b, c = t->c;
    for (int64_t i = lo; i < hi; i++)
        y[i] = tanhf(x[i] * a + b) * c - x[i];
}

void bl_tanh_poly(int n_threads, const float *x, float *y, int64_t n, float a, float b, float c) {
    bl_tanh t = {x, y, a, b, c};
    bl_par_run(n_threads, n, 16, tanh_range, &t);
}

/* ---- y[j] = sum_i x[i, j]^2 in double (a column sum: a reduction over the leading axis) ---- */
typedef struct bl_colsum {
    const float *x;
    float *y;
    int64_t rows, cols;
} bl_colsum;

static void colsum_range(void *ctx, int64_t lo, int64_t hi) {
    const bl_colsum *c = ctx;
    enum { B = 256 };
    double acc[B]; /* a block of columns, accumulated row by row: contiguous loads */
    for (int64_t j0 = lo; j0 < hi; j0 += B) {
        int64_t nb = hi - j0 < B ? hi - j0 : B;
        for (int64_t j = 0; j < nb; j++)
            acc[j] = 0;
        for (int64_t i = 0; i < c->rows; i++) {
            const float *restrict row = c->x + i * c->cols + j0;
            for (int64_t j = 0; j < nb; j++)
                acc[j] += (double)row[j] * row[j];
        }
        for (int64_t j = 0; j < nb; j++)
            c->y[j0 + j] = (float)acc[j];
    }
}

void bl_colsum_sq(int n_threads, const float *x, float *y, int64_t rows, int64_t cols) {
    bl_colsum c = {x, y, rows, cols};
    bl_par_run(n_threads, cols, 256, colsum_range, &c);
}

/* ---- y = relu(y + bias) in place on rows x cols (the epilogue after sgemm) ---- */
typedef struct bl_bias {
    float *y;
    const float *bias;
    int64_t cols;
} bl_bias;

static void bias_relu_range(void *ctx, int64_t lo, int64_t hi) {
    const bl_bias *b = ctx;
    const float *restrict bias = b->bias;
    for (int64_t r = lo; r < hi; r++) {
        float *restrict y = b->y + r * b->cols;
        for (int64_t j = 0; j < b->cols; j++) {
            float v = y[j] + bias[j];
            y[j] = v > 0 ? v : 0;
        }
    }
}

void bl_bias_relu(int n_threads, float *y, const float *bias, int64_t rows, int64_t cols) {
    bl_bias b = {y, bias, cols};
    bl_par_run(n_threads, rows, 1, bias_relu_range, &b);
}
