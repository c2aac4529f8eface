/* hostmem.c -- the host-memory stand-in for a GPU allocation (tests without a device). */
#include "gpu.h"
#include "gpu_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int kvt_hostmem_alloc(size_t bytes, struct kvt_gpu_mem *out)
{
	void *p = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
	if (!p)
		return -ENOMEM;
	*out = (struct kvt_gpu_mem){.ptr = p, .bytes = bytes, .device = -1, .host = 1};
	return 0;
}

void kvt_hostmem_free_if_host(struct kvt_gpu_mem *m)
{
	if (m && m->host) {
		free(m->ptr);
		memset(m, 0, sizeof(*m));
	}
}

int kvt_hostmem_copy_to(struct kvt_gpu_mem *m, size_t off, const void *src, size_t len)
{
	if (!m->host)
		return -ENODEV;
	if (!kvt_gpu_range_fits(m, off, len))
		return -EINVAL;
	memcpy((char *)m->ptr + off, src, len);
	return 0;
}

int kvt_hostmem_copy_from(const struct kvt_gpu_mem *m, size_t off, void *dst, size_t len)
{
	if (!m->host)
		return -ENODEV;
	if (!kvt_gpu_range_fits(m, off, len))
		return -EINVAL;
	memcpy(dst, (const char *)m->ptr + off, len);
	return 0;
}

bool kvt_gpu_pieces_fit(const struct kvt_gpu_mem *m, const struct kvt_gpu_piece *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!kvt_gpu_range_fits(m, v[i].off, v[i].len))
			return false;
	return true;
}

int kvt_hostmem_copy_many(const struct kvt_gpu_mem *m, int to, const struct kvt_gpu_piece *v,
                          size_t n)
{
	if (!m->host)
		return -ENODEV;
	if (!kvt_gpu_pieces_fit(m, v, n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		char *dev = (char *)m->ptr + v[i].off;
		memcpy(to ? dev : v[i].host, to ? v[i].host : dev, v[i].len);
	}
	return 0;
}

int kvt_gpu_alloc_or_host(int device, size_t bytes, struct kvt_gpu_mem *out)
{
	if (kvt_gpu_probe() > 0 && kvt_gpu_alloc(device, bytes, out) == 0)
		return 0;
	return kvt_hostmem_alloc(bytes, out);
}
