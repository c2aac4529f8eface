/* runtime_stub.c -- the GPU interface without CUDA: every device call answers -ENODEV. */
#include "gpu.h"
#include "gpu_int.h"

#include <errno.h>
#include <string.h>

int kvt_gpu_probe(void)
{
	return -ENODEV;
}

int kvt_gpu_alloc(int device, size_t bytes, struct kvt_gpu_mem *out)
{
	return -ENODEV;
}

void kvt_gpu_free(struct kvt_gpu_mem *m)
{
	kvt_hostmem_free_if_host(m);
}

int kvt_gpu_host_register(void *p, size_t len)
{
	return -ENODEV;
}

int kvt_gpu_host_unregister(void *p)
{
	return -ENODEV;
}

int kvt_gpu_ipc_export(const struct kvt_gpu_mem *m, uint8_t handle[KVT_GPU_IPC_HANDLE_BYTES])
{
	return -ENODEV;
}

int kvt_gpu_ipc_open(const uint8_t handle[KVT_GPU_IPC_HANDLE_BYTES], int device, size_t bytes,
                     struct kvt_gpu_mem *out)
{
	return -ENODEV;
}

int kvt_gpu_copy_to(struct kvt_gpu_mem *m, size_t off, const void *src, size_t len)
{
	return kvt_hostmem_copy_to(m, off, src, len);
}

int kvt_gpu_copy_from(const struct kvt_gpu_mem *m, size_t off, void *dst, size_t len)
{
	return kvt_hostmem_copy_from(m, off, dst, len);
}

int kvt_gpu_copy_to_many(struct kvt_gpu_mem *m, const struct kvt_gpu_piece *v, size_t n)
{
	return kvt_hostmem_copy_many(m, 1, v, n);
}

int kvt_gpu_copy_from_many(const struct kvt_gpu_mem *m, const struct kvt_gpu_piece *v, size_t n)
{
	return kvt_hostmem_copy_many(m, 0, v, n);
}
