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
	int host; /* 1 when this is the host-memory stand-in */
};

/* @return : number of usable devices (>= 1), or -ENODEV. */
int kvt_gpu_probe(void);
int kvt_gpu_alloc(int device, size_t bytes, struct kvt_gpu_mem *out);
void kvt_gpu_free(struct kvt_gpu_mem *m);
/* Copies between host memory and m at offset. @return : 0 or -errno. */
int kvt_gpu_copy_to(struct kvt_gpu_mem *m, size_t off, const void *src, size_t len);
int kvt_gpu_copy_from(const struct kvt_gpu_mem *m, size_t off, void *dst, size_t len);
/* Pins host memory for DMA (cudaHostRegister). @return : 0 or -ENODEV. */
int kvt_gpu_host_register(void *p, size_t len);
int kvt_gpu_host_unregister(void *p);
/* Exports m for another process (cudaIpcGetMemHandle). */
int kvt_gpu_ipc_export(const struct kvt_gpu_mem *m, uint8_t handle[KVT_GPU_IPC_HANDLE_BYTES]);

/* The host-memory stand-in with the same contract. */
int kvt_hostmem_alloc(size_t bytes, struct kvt_gpu_mem *out);
/* @return : a device allocation when a GPU is usable, else the host stand-in. */
int kvt_gpu_alloc_or_host(int device, size_t bytes, struct kvt_gpu_mem *out);
#endif
