/* tape.h — private to the gradient tapes (tape.c: recording and the tape's lifetime;
 * tape_grad.c: the backward pass and the gradient entry points; tape_cf.c: the gradients of
 * control-flow nodes). See tape.c for how values are keyed. */
#ifndef TJ_API_TAPE_H
#define TJ_API_TAPE_H

#include "api/grad.h"

#define TAPE_MAGIC 0x74617065u

typedef struct entry {
    ir_node n; /* op, canonical attributes, output dtype and dims */
    uint32_t n_in;
    uint64_t *in_keys;
    tj_tensor **in; /* input values (references) */
    uint64_t out_key;
    tj_tensor *out; /* reference */
    /* a result of a control-flow node: one entry per float result, recorded together */
    uint32_t res;   /* which result */
    uint32_t first; /* the index of the node's first entry; UINT32_MAX: not control flow */
} entry;

/* an open-addressing map of keys (never 0) to tensors, or a set when vals is NULL */
typedef struct kmap {
    uint64_t *k;
    tj_tensor **v;
    size_t cap, n;
} kmap;

typedef struct var_read {
    tj_variable *v;
    uint64_t key;
} var_read;

struct tj_tape {
    uint32_t magic;
    unsigned flags;
    int recording, busy;
    int lost;        /* an op could not be recorded (out of memory): gradients would be wrong, so
                        tj_tape_gradient fails instead */
    uint64_t serial; /* the trace it records (0: eager) */
    entry *e;
    size_t n_e, cap_e;
    kmap known;
    tj_tensor **held; /* eager: references keeping watched tensors' addresses alive */
    size_t n_held, cap_held;
    var_read *reads;
    size_t n_reads, cap_reads;
    struct tj_tape *next; /* the thread's recording tapes */
};

/* ---- shared by the tape files ---------------------------------------------------------------- */
tj_status api_tape_check(const tj_tape *t, const char *what); /* a live tape, or an error */
uint64_t api_tape_serial_now(void);                           /* the current trace's, 0: eager */
uint64_t api_tape_node_key(uint64_t serial, uint32_t id);
/* The key of t as the tape sees it, or 0 (t is not a value of the tape's trace). */
uint64_t api_tape_key(const tj_tape *tp, tj_tensor *t);
int api_kmap_has(const kmap *m, uint64_t k);
tj_tensor **api_kmap_get(kmap *m, uint64_t k);
tj_tensor **api_kmap_put(kmap *m, uint64_t k); /* inserts k (value NULL) if absent; NULL on OOM */
void api_kmap_free(kmap *m);                   /* releases the values and the storage */
/* Adds g (scoped or borrowed) into the gradient of key k. */
tj_status api_tape_accumulate(kmap *grads, uint64_t k, tj_tensor *g);
/* The gradient of the control-flow node whose float results are entries [first, last] of tp
 * (tape_cf.c): adds its operands' gradients to grads. */
tj_status api_tape_cf_backward(tj_tape *tp, uint32_t first, uint32_t last, kmap *grads);

#endif /* TJ_API_TAPE_H */
