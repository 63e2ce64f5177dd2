/* check.h — the tiny shared test harness: CHECK macros that count failures and report them
 * with file:line, and a summary at exit. A test's main returns check_done(). Exit 77 = skip. */
#ifndef TJ_CHECK_H
#define TJ_CHECK_H
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int check_failures_, check_count_;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        check_count_++;                                                                            \
        if (!(cond)) {                                                                             \
            check_failures_++;                                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        check_count_++;                                                                            \
        if (!(cond)) {                                                                             \
            check_failures_++;                                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    CHECK_MSG((long long)(a) == (long long)(b), "%lld != %lld", (long long)(a), (long long)(b))
#define CHECK_NEAR(a, b, tol)                                                                      \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tol %g)", (double)(a),      \
              (double)(b), (double)(tol))
#define CHECK_STR(a, b)                                                                            \
    CHECK_MSG((a) && (b) && strcmp((a), (b)) == 0, "\"%s\" != \"%s\"", (a) ? (a) : "(null)",       \
              (b) ? (b) : "(null)")
/* substring check: error messages must name the op and the shapes */
#define CHECK_HAS(hay, needle)                                                                     \
    CHECK_MSG((hay) && strstr((hay), (needle)), "\"%s\" does not contain \"%s\"",                  \
              (hay) ? (hay) : "(null)", (needle))

/* How many times needle occurs in hay (non-overlapping). */
static inline int check_count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* A whole file, NUL-terminated (caller frees), and its size in *size (may be NULL); NULL if it
 * cannot be read. */
static inline char *check_slurp_n(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    size_t got = s ? fread(s, 1, (size_t)n, f) : 0;
    if (s)
        s[got] = '\0';
    if (size)
        *size = got;
    fclose(f);
    return s;
}
/* A whole file as a NUL-terminated string (caller frees), NULL if it cannot be read. */
static inline char *check_slurp(const char *path) {
    return check_slurp_n(path, NULL);
}

/* Removes a temporary directory a test made and the files in it (not subdirectories). */
static inline void check_rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

#ifdef TRACEJIT_H
/* Whether t's values print as `want` (tj_tensor_values_str); says what they print otherwise. */
static inline int check_values_str(tj_tensor *t, const char *want) {
    char *s = tj_tensor_values_str(t);
    int ok = s && strcmp(s, want) == 0;
    if (!ok)
        fprintf(stderr, "  \"%s\" != \"%s\"\n", s ? s : "(null)", want);
    free(s);
    return ok;
}
#endif

static inline int check_done(void) {
    printf("%d checks, %d failed\n", check_count_, check_failures_);
    return check_failures_ ? 1 : 0;
}
#endif
