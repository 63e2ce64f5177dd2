/* config.c — configuration read once from the environment, and the log sink.
 * The library never prints on its own: log lines go to a callback whose default writes to
 * stderr only for the topics listed in TJ_LOG (or set by tj_set_log_topics). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime.h"

static rt_config cfg;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;
static atomic_int eager_override = -1;
static atomic_uint topics_override = UINT32_MAX;
static tj_log_fn log_fn;
static void *log_user;

static unsigned parse_topics(const char *s) {
    unsigned t = 0;
    if (!s)
        return 0;
    if (strstr(s, "retrace"))
        t |= RT_LOG_RETRACE;
    if (strstr(s, "compile"))
        t |= RT_LOG_COMPILE;
    if (strstr(s, "passes"))
        t |= RT_LOG_PASSES;
    if (strstr(s, "misuse"))
        t |= RT_LOG_MISUSE;
    if (strstr(s, "cache"))
        t |= RT_LOG_CACHE;
    if (strstr(s, "all"))
        t |= RT_LOG_ALL;
    return t;
}

/* "512M", "2G", "100000": bytes; `def` when absent or not a positive size. */
static size_t parse_bytes(const char *s, size_t def) {
    if (!s || !*s)
        return def;
    char *end;
    double v = strtod(s, &end);
    double mul = *end == 'K' || *end == 'k'   ? 1024.0
                 : *end == 'M' || *end == 'm' ? 1048576.0
                 : *end == 'G' || *end == 'g' ? 1073741824.0
                                              : 1.0;
    v *= mul;
    return v >= 1 && v < 1e18 ? (size_t)v : def;
}

_Thread_local int rt_compile_one_thread;
_Thread_local int rt_tracing;

static void cfg_init(void) {
    const char *e = getenv("TJ_EAGER");
    cfg.eager = e && *e && strcmp(e, "0") != 0;
    cfg.log_topics = parse_topics(getenv("TJ_LOG"));
    cfg.dump_dir = getenv("TJ_DUMP");
    cfg.passes = getenv("TJ_PASSES");
    cfg.cache_dir = getenv("TJ_CACHE_DIR");
    cfg.backend = getenv("TJ_BACKEND");
    const char *ti = getenv("TJ_TIERED");
    cfg.tiered = !(ti && strcmp(ti, "0") == 0); /* on unless TJ_TIERED=0 */
    const char *x = getenv("TJ_EXACT_MATH");
    cfg.exact_math = x && *x && strcmp(x, "0") != 0;
    const char *dp = getenv("TJ_DECOMPOSE");
    cfg.decompose = dp && *dp && strcmp(dp, "0") != 0;
    const char *dc = getenv("TJ_DIRECT_CONV");
    cfg.no_direct_conv = dc && strcmp(dc, "0") == 0;
    const char *ct = getenv("TJ_COMPILE_THREADS");
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN), nct = ct && *ct ? strtol(ct, NULL, 10) : ncpu;
    cfg.compile_threads = (int)(nct < 1 ? 1 : nct > 8 ? 8 : nct); /* JIT_CPU_MAX_PARTS */
    const char *qc = getenv("TJ_QUICK_COMPILE");
    cfg.quick_compile = !(qc && strcmp(qc, "0") == 0); /* on unless TJ_QUICK_COMPILE=0 */
    cfg.cuda_driver = getenv("TJ_CUDA_DRIVER");
    const char *cs = getenv("TJ_CUDA_SYNC");
    cfg.cuda_sync = cs && *cs && strcmp(cs, "0") != 0;
    const char *cg = getenv("TJ_CUDA_GRAPHS");
    cfg.cuda_graphs = !(cg && strcmp(cg, "0") == 0); /* on unless TJ_CUDA_GRAPHS=0 */
    cfg.cuda_emulate = getenv("TJ_CUDA_EMULATE");
    const char *mb = getenv("TJ_CUDA_MAX_BLOCKS");
    long mbv = mb && *mb ? strtol(mb, NULL, 10) : 0;
    cfg.cuda_max_blocks = mbv >= 1 && mbv <= 65535 * 16 ? (unsigned)mbv : 65535 * 16;
    const char *cd = getenv("TJ_CUDA_DEVICE");
    long cdv = cd && *cd ? strtol(cd, NULL, 10) : 0;
    cfg.cuda_device = cdv >= 0 && cdv < 1 << 16 ? (int)cdv : -1; /* -1: refused by name later */
    const char *od = getenv("TJ_OUTPUT_DEVICE");
    cfg.outputs_host = od && !strcmp(od, "cpu");
    const char *isa = getenv("TJ_ISA");
    cfg.isa_cap = isa && *isa ? rt_isa_parse(isa) : -1;
    if (isa && *isa && cfg.isa_cap < 0)
        cfg.isa_cap = RT_ISA_GENERIC; /* an unknown name must not enable more than asked */
    rt_profile_from_env(getenv("TJ_PROFILE"));
    const char *cn = getenv("TJ_CHECK_NUMERICS");
    if (cn && *cn && strcmp(cn, "0") != 0)
        tj_enable_check_numerics();
    const char *c = getenv("TJ_CACHE");
    cfg.cache_enabled = !(c && strcmp(c, "0") == 0);
    cfg.cache_max_bytes = parse_bytes(getenv("TJ_CACHE_MAX_BYTES"), (size_t)1 << 30);
    const char *n = getenv("TJ_NUM_THREADS");
    long nt = n ? strtol(n, NULL, 10) : 0;
    if (nt <= 0)
        nt = sysconf(_SC_NPROCESSORS_ONLN);
    cfg.num_threads = nt > 0 && nt < 1024 ? (int)nt : 1;
}

const rt_config *rt_config_get(void) {
    pthread_once(&cfg_once, cfg_init);
    return &cfg;
}

void tj_set_eager(int on) {
    atomic_store(&eager_override, on ? 1 : 0);
}
int tj_get_eager(void) {
    int o = atomic_load(&eager_override);
    return o >= 0 ? o : rt_config_get()->eager;
}

void tj_set_log(tj_log_fn fn, void *user) {
    log_fn = fn;
    log_user = user;
}
void tj_set_log_topics(const char *topics) {
    atomic_store(&topics_override, parse_topics(topics));
}

int rt_log_enabled(unsigned topic) {
    unsigned o = atomic_load(&topics_override);
    unsigned t = o != UINT32_MAX ? o : rt_config_get()->log_topics;
    return (t & topic) != 0;
}

static const char *topic_name(unsigned topic) {
    return topic == RT_LOG_RETRACE   ? "retrace"
           : topic == RT_LOG_COMPILE ? "compile"
           : topic == RT_LOG_MISUSE  ? "misuse"
           : topic == RT_LOG_CACHE   ? "cache"
                                     : "passes";
}

void rt_log(unsigned topic, const char *fmt, ...) {
    if (!rt_log_enabled(topic))
        return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (log_fn)
        log_fn(topic_name(topic), buf, log_user);
    else
        fprintf(stderr, "tracejit[%s]: %s\n", topic_name(topic), buf);
}
