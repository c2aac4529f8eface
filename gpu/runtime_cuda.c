/*
 * runtime_cuda.c -- the GPU interface over the CUDA runtime API. Every call checks the runtime
 * probe first, so a CUDA build on a machine without a device behaves like the stub (-ENODEV).
 * Copies one at a time (cudaMemcpy) or in batches on the calling thread's stream; allocations
 * exported to and mapped from other processes (CUDA IPC). test_gpu_device checks all of it on
 * a device; it ran on an H200 on 2026-12-04 (docs/bench.md, "GPU copies").
 */
#include "gpu.h"
#include "gpu_int.h"

#include <cuda_runtime_api.h>
#if CUDART_VERSION >= 12050
#include <cudaTypedefs.h> /* the driver's function types, reached through the runtime */
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
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
	case cudaErrorInvalidDevice:
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
	if (m->opened)
		cudaIpcCloseMemHandle(m->ptr); /* the memory stays its owner's */
	else
		cudaFree(m->ptr);
	memset(m, 0, sizeof(*m));
}

int kvt_gpu_copy_to(struct kvt_gpu_mem *m, size_t off, const void *src, size_t len)
{
	if (m->host)
		return kvt_hostmem_copy_to(m, off, src, len);
	if (!kvt_gpu_range_fits(m, off, len))
		return -EINVAL;
	cudaSetDevice(m->device);
	return err_of(cudaMemcpy((char *)m->ptr + off, src, len, cudaMemcpyHostToDevice));
}

int kvt_gpu_copy_from(const struct kvt_gpu_mem *m, size_t off, void *dst, size_t len)
{
	if (m->host)
		return kvt_hostmem_copy_from(m, off, dst, len);
	if (!kvt_gpu_range_fits(m, off, len))
		return -EINVAL;
	cudaSetDevice(m->device);
	return err_of(cudaMemcpy(dst, (const char *)m->ptr + off, len, cudaMemcpyDeviceToHost));
}

/* Piece p's destination and source. */
static void ends_of(const struct kvt_gpu_mem *m, int to, const struct kvt_gpu_piece *p, void **dst,
                    const void **src)
{
	char *dev = (char *)m->ptr + p->off;
	*dst = to ? dev : p->host;
	*src = to ? p->host : dev;
}

/* The pieces as one cudaMemcpyBatchAsync. @return : 0, or -errno when the call was refused or
 * could not be made (nothing queued then). */
static int batch_call(const struct kvt_gpu_mem *m, int to, const struct kvt_gpu_piece *v, size_t n)
{
#if CUDART_VERSION >= 13000
	static _Atomic int batch = -1;
	if (batch < 0) {
		const char *env = getenv("KVTIER_GPU_BATCH");
		batch = !(env && !strcmp(env, "off"));
	}
	if (!batch)
		return -ENOTSUP;
	/* one block: the destinations, the sources, the sizes */
	void **dst = malloc(n * (2 * sizeof(void *) + sizeof(size_t)));
	if (!dst)
		return -ENOMEM;
	const void **src = (const void **)(dst + n);
	size_t *len = (size_t *)(src + n), attrs_from = 0; /* one attribute for all */
	for (size_t i = 0; i < n; i++) {
		ends_of(m, to, &v[i], &dst[i], &src[i]);
		len[i] = v[i].len;
	}
	struct cudaMemcpyAttributes a = {.srcAccessOrder = cudaMemcpySrcAccessOrderStream};
	int rc = err_of(cudaMemcpyBatchAsync((void *const *)dst, (const void *const *)src, len, n,
	                                     &a, &attrs_from, 1, cudaStreamPerThread));
	free(dst);
	return rc;
#else
	return -ENOTSUP;
#endif
}

/*
 * The pieces queued on this thread's stream, then one wait. With CUDA 13 they go in one call,
 * cudaMemcpyBatchAsync, whose copies may run in any order (pieces that overlap end as whichever
 * ran last); before CUDA 13, when the batch call refuses, or with KVTIER_GPU_BATCH=off, one
 * cudaMemcpyAsync each. On an H200, 64 pieces of 64 KiB moved at 29 GB/s to the device in one
 * batch call, 16 GB/s as 64 calls and 6 GB/s as 64 synchronous copies (docs/bench.md).
 */
static int copy_many(const struct kvt_gpu_mem *m, int to, const struct kvt_gpu_piece *v, size_t n)
{
	if (m->host)
		return kvt_hostmem_copy_many(m, to, v, n);
	if (!kvt_gpu_pieces_fit(m, v, n))
		return -EINVAL;
	if (!n)
		return 0;
	cudaSetDevice(m->device);
	int rc = 0;
	if (batch_call(m, to, v, n)) /* no batch call: one copy each */
		for (size_t i = 0; i < n && !rc; i++) {
			void *dst;
			const void *src;
			ends_of(m, to, &v[i], &dst, &src);
			rc = err_of(
			    cudaMemcpyAsync(dst, src, v[i].len,
			                    to ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
			                    cudaStreamPerThread));
		}
	int wait = err_of(cudaStreamSynchronize(cudaStreamPerThread)); /* those queued, even so */
	return rc ? rc : wait;
}

int kvt_gpu_copy_to_many(struct kvt_gpu_mem *m, const struct kvt_gpu_piece *v, size_t n)
{
	return copy_many(m, 1, v, n);
}

int kvt_gpu_copy_from_many(const struct kvt_gpu_mem *m, const struct kvt_gpu_piece *v, size_t n)
{
	return copy_many(m, 0, v, n);
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

/*
 * Whether bytes from p lie inside the allocation that holds p: an importer's size comes from
 * the exporter, and one too large would let copies reach past the allocation. The driver's
 * cuMemGetAddressRange, found through the runtime (no link to libcuda); where it cannot be
 * found (CUDA before 12.5) the size is taken on trust.
 */
static bool fits_allocation(void *p, size_t bytes)
{
#if CUDART_VERSION >= 12050
	static PFN_cuMemGetAddressRange_v3020 range;
	if (!range) {
		void *fn = NULL;
		enum cudaDriverEntryPointQueryResult q;
		if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 3020,
		                                     cudaEnableDefault, &q) != cudaSuccess ||
		    q != cudaDriverEntryPointSuccess || !fn)
			return true;
		range = (PFN_cuMemGetAddressRange_v3020)fn;
	}
	CUdeviceptr base = 0;
	size_t size = 0;
	if (range(&base, &size, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
		return false;
	return (uintptr_t)p - base <= size && bytes <= size - ((uintptr_t)p - base);
#else
	(void)p;
	(void)bytes;
	return true;
#endif
}

int kvt_gpu_ipc_open(const uint8_t handle[KVT_GPU_IPC_HANDLE_BYTES], int device, size_t bytes,
                     struct kvt_gpu_mem *out)
{
	if (kvt_gpu_probe() <= 0)
		return -ENODEV;
	int rc = err_of(cudaSetDevice(device));
	if (rc)
		return rc;
	cudaIpcMemHandle_t h;
	memcpy(&h, handle, sizeof(h));
	void *p = NULL;
	cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
	/* Seen on an H200: a handle that names nothing is InvalidValue; this process's own export
	 * is DeviceUninitialized ("invalid device context"). Both are the caller's handle: -EINVAL.
	 */
	if (e == cudaErrorDeviceUninitialized || e == cudaErrorMapBufferObjectFailed ||
	    e == cudaErrorInvalidResourceHandle)
		return -EINVAL;
	if (e != cudaSuccess)
		return err_of(e);
	if (!fits_allocation(p, bytes)) {
		cudaIpcCloseMemHandle(p);
		return -EINVAL;
	}
	*out = (struct kvt_gpu_mem){.ptr = p, .bytes = bytes, .device = device, .opened = 1};
	return 0;
}
