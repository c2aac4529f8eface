/*
 * gpu.h -- a plain C interface to the GPU runtime (CUDA), so nothing else includes CUDA headers.
 *
 * Built against CUDA when the toolkit is found (runtime_cuda.c), else against runtime_stub.c,
 * whose every call answers -ENODEV. kvt_gpu_probe() is the runtime check; KVTIER_GPU=off forces
 * the stub's answers in a CUDA build. The host-memory stand-in (kvt_hostmem_*) offers the same
 * allocate/copy calls over ordinary memory, so that tier and policy tests run without a device.
 */
#ifndef KVT_GPU_H
#define KVT_GPU_H
#include <stddef.h>
#include <stdint.h>

#define KVT_GPU_IPC_HANDLE_BYTES 64

struct kvt_gpu_mem {
	void *ptr; /* device pointer (or host pointer for the stand-in) */
	size_t bytes;
	int device;
	int host;   /* 1 when this is the host-memory stand-in */
	int opened; /* 1 when mapped from another process's export (kvt_gpu_ipc_open) */
};

/* @return : number of usable devices (>= 1), or -ENODEV. */
int kvt_gpu_probe(void);
int kvt_gpu_alloc(int device, size_t bytes, struct kvt_gpu_mem *out);
void kvt_gpu_free(struct kvt_gpu_mem *m);
/* Copies between host memory and m at offset. @return : 0 or -errno. */
int kvt_gpu_copy_to(struct kvt_gpu_mem *m, size_t off, const void *src, size_t len);
int kvt_gpu_copy_from(const struct kvt_gpu_mem *m, size_t off, void *dst, size_t len);
/* One piece of a batched copy: len bytes between host and the allocation at off. */
struct kvt_gpu_piece {
	size_t off;
	void *host;
	size_t len;
};
/* Copies n pieces as one batch: every piece is checked first (-EINVAL, and nothing copied, when
 * one does not fit), then all are queued on the calling thread's stream and waited for once.
 * One synchronous copy per 64 KiB chunk is bound by its latency (~10 us on an H200: 7 GB/s
 * from registered memory, against 55 GB/s for large copies; docs/bench.md). With CUDA 13 the
 * batch is one cudaMemcpyBatchAsync (KVTIER_GPU_BATCH=off: one cudaMemcpyAsync a piece).
 * @return : 0 or -errno. */
int kvt_gpu_copy_to_many(struct kvt_gpu_mem *m, const struct kvt_gpu_piece *v, size_t n);
int kvt_gpu_copy_from_many(const struct kvt_gpu_mem *m, const struct kvt_gpu_piece *v, size_t n);
/* Pins host memory for DMA (cudaHostRegister). @return : 0 or -ENODEV. */
int kvt_gpu_host_register(void *p, size_t len);
int kvt_gpu_host_unregister(void *p);
/* Exports m for another process (cudaIpcGetMemHandle). @return : 0, -ENODEV (no device, or m
 * is the host stand-in) or -errno. */
int kvt_gpu_ipc_export(const struct kvt_gpu_mem *m, uint8_t handle[KVT_GPU_IPC_HANDLE_BYTES]);
/* Maps another process's exported allocation of `bytes` (the handle does not carry its size:
 * the exporter tells it) on device; kvt_gpu_free() unmaps it and leaves the memory to its owner.
 * A size past the end of the exported allocation is refused (CUDA 12.5 and later, which tell
 * an allocation's size). @return : 0, -ENODEV, -EINVAL (a handle that names nothing, this
 * process's own export, a size too large) or -errno. */
int kvt_gpu_ipc_open(const uint8_t handle[KVT_GPU_IPC_HANDLE_BYTES], int device, size_t bytes,
                     struct kvt_gpu_mem *out);

/* The host-memory stand-in with the same contract. */
int kvt_hostmem_alloc(size_t bytes, struct kvt_gpu_mem *out);
/* @return : a device allocation when a GPU is usable, else the host stand-in. */
int kvt_gpu_alloc_or_host(int device, size_t bytes, struct kvt_gpu_mem *out);
#endif
