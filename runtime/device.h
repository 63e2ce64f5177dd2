/* device.h — where a buffer's memory lives and the few things the runtime asks of that place: a
 * device allocates and frees memory, copies bytes in from the host, out to the host and within
 * itself, and waits for its queued work (tinygrad's Allocator, PyTorch's allocator plus copies,
 * IREE's HAL device, in miniature). Every rt_buffer names its device. The host is the first
 * device (its memory is the caching allocator's, its copies memcpy, its work never queued); a
 * GPU backend adds a device, a code generator and a launch step, not a second runner. Only
 * memory the host can read is run by the reference kernels and the host's plans: an input on
 * another device is an error naming the op and both devices, never a read of foreign memory. */
#ifndef TJ_RUNTIME_DEVICE_H
#define TJ_RUNTIME_DEVICE_H

#include "runtime/runtime.h"

typedef struct rt_device rt_device;
typedef struct rt_device_vt {
    /* size bytes of device memory (size 0 gives a valid unique block); NULL with the error set
     * when there is none. free takes the same size. */
    void *(*alloc)(rt_device *d, size_t size);
    void (*free)(rt_device *d, void *p, size_t size);
    /* dst on the device from host memory; host memory from src on the device; within the
     * device. May be queued: sync waits for them. TJ_OK or an error (set). */
    tj_status (*copy_in)(rt_device *d, void *dst, const void *host_src, size_t size);
    tj_status (*copy_out)(rt_device *d, void *host_dst, const void *src, size_t size);
    tj_status (*copy)(rt_device *d, void *dst, const void *src, size_t size);
    tj_status (*sync)(rt_device *d);
} rt_device_vt;

struct rt_device {
    const rt_device_vt *vt;
    const char *name; /* "cpu", "cuda:0": what messages call it */
    int host;         /* its memory is the host's (kernels read it directly) */
};

/* The host: never NULL, never freed. */
rt_device *rt_device_host(void);
/* The device b's memory is on (a NULL b or an unset device: the host). */
rt_device *rt_buffer_device(const rt_buffer *b);
/* Whether t's elements are host memory (a tensor with no buffer: yes). Reads t's on_device flag,
 * set with its buffer, not the buffer. */
static inline bool rt_on_host(const tj_tensor *t) {
    return !t || !t->on_device;
}
/* An uninitialised concrete tensor of that type whose buffer is on d (the caller's reference),
 * or NULL with the error set. */
tj_tensor *rt_tensor_alloc_on(rt_device *d, int dtype, int rank, const int64_t *dims);
/* t's values on device d: t itself (a new reference) when it is there already, else a copy
 * (host to device, device to host, or through the host between two devices); NULL with the
 * error set. Strings stay on the host. */
tj_tensor *rt_tensor_to_device(const tj_tensor *t, rt_device *d);
/* TJ_OK when every one of the n tensors is on the host; otherwise an error naming `what` (an op
 * or an executor), the input and its device. */
tj_status rt_check_host(const char *what, tj_tensor *const *in, uint32_t n);

#endif /* TJ_RUNTIME_DEVICE_H */
