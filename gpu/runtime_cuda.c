/*
 * runtime_cuda.c -- the GPU interface over the CUDA runtime API. Every call checks the runtime
 * probe first, so a CUDA build on a machine without a device behaves like the stub (-ENODEV).
 */
#include "gpu.h"
#include "gpu_int.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int probed = -2;

int kvt_gpu_probe(void)
{
	if (probed != -2)
		return probed;
	const char *env = getenv("KVTIER_GPU");
	int n = 0;
	if ((env && !strcmp(env, "off")) || cudaGetDeviceCount(&n) != cudaSuccess || n <= 0)
		probed = -ENODEV;
	else
		probed = n;
	return probed;
}

static int err_of(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return 0;
	case cudaErrorMemoryAllocation:
		return -ENOMEM;
	case cudaErrorInvalidValue:
		return -EINVAL;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
		return -ENODEV;
	default:
		return -EIO;
	}
}

int kvt_gpu_alloc(int device, size_t bytes, struct kvt_gpu_mem *out)
{
	if (kvt_gpu_probe() <= 0)
		return -ENODEV;
	int rc = err_of(cudaSetDevice(device));
	if (rc)
		return rc;
	void *p = NULL;
	rc = err_of(cudaMalloc(&p, bytes));
	if (rc)
		return rc;
	*out = (struct kvt_gpu_mem){.ptr = p, .bytes = bytes, .device = device, .host = 0};
	return 0;
}

void kvt_gpu_free(struct kvt_gpu_mem *m)
{
	if (!m || !m->ptr)
		return;
	if (m->host) {
		kvt_hostmem_free_if_host(m);
		return;
	}
	cudaSetDevice(m->device);
	cudaFree(m->ptr);
	memset(m, 0, sizeof(*m));
}

int kvt_gpu_copy_to(struct kvt_gpu_mem *m, size_t off, const void *src, size_t len)
{
	if (m->host)
		return kvt_hostmem_copy_to(m, off, src, len);
	if (off > m->bytes || len > m->bytes - off)
		return -EINVAL;
	cudaSetDevice(m->device);
	return err_of(cudaMemcpy((char *)m->ptr + off, src, len, cudaMemcpyHostToDevice));
}

int kvt_gpu_copy_from(const struct kvt_gpu_mem *m, size_t off, void *dst, size_t len)
{
	if (m->host)
		return kvt_hostmem_copy_from(m, off, dst, len);
	if (off > m->bytes || len > m->bytes - off)
		return -EINVAL;
	cudaSetDevice(m->device);
	return err_of(cudaMemcpy(dst, (const char *)m->ptr + off, len, cudaMemcpyDeviceToHost));
}

int kvt_gpu_host_register(void *p, size_t len)
{
	if (kvt_gpu_probe() <= 0)
		return -ENODEV;
	return err_of(cudaHostRegister(p, len, cudaHostRegisterDefault));
}

int kvt_gpu_host_unregister(void *p)
{
	if (kvt_gpu_probe() <= 0)
		return -ENODEV;
	return err_of(cudaHostUnregister(p));
}

int kvt_gpu_ipc_export(const struct kvt_gpu_mem *m, uint8_t handle[KVT_GPU_IPC_HANDLE_BYTES])
{
	if (m->host || kvt_gpu_probe() <= 0)
		return -ENODEV;
	cudaIpcMemHandle_t h;
	_Static_assert(sizeof(h) <= KVT_GPU_IPC_HANDLE_BYTES, "IPC handle fits");
	int rc = err_of(cudaIpcGetMemHandle(&h, m->ptr));
	if (!rc)
		memcpy(handle, &h, sizeof(h));
	return rc;
}
