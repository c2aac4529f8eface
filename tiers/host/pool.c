/* pool.c -- see pool.h. */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int kvt_pool_open(struct kvt_pool *p, uint64_t bytes, uint64_t extra_bytes, const char *name)
{
	memset(p, 0, sizeof(*p));
	p->fd = -1;
	bytes = (bytes + KVT_POOL_GRANULE - 1) & ~(uint64_t)(KVT_POOL_GRANULE - 1);
	uint64_t granules = bytes / KVT_POOL_GRANULE;
	if (!granules || granules >= UINT32_MAX)
		return -EINVAL;
	p->bytes = bytes;
	p->gen_bytes = (granules * sizeof(uint64_t) + KVT_POOL_GRANULE - 1) &
	               ~(uint64_t)(KVT_POOL_GRANULE - 1);
	p->extra_bytes = (extra_bytes + KVT_POOL_GRANULE - 1) & ~(uint64_t)(KVT_POOL_GRANULE - 1);
	uint64_t total = p->bytes + p->gen_bytes + p->extra_bytes;
	int rc = kvt_extent_init(&p->ext, (uint32_t)granules);
	if (rc)
		return rc;
	p->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (p->fd < 0) {
		rc = -errno;
		goto err_ext;
	}
	if (ftruncate(p->fd, (off_t)total)) {
		rc = -errno;
		goto err_fd;
	}
	p->base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
	if (p->base == MAP_FAILED) {
		rc = -errno;
		p->base = NULL;
		goto err_fd;
	}
	if (fcntl(p->fd, F_ADD_SEALS,
	          F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL)) {
		rc = -errno;
		goto err_map;
	}
	p->gens = (_Atomic uint64_t *)(p->base + p->bytes);
	p->extra = p->extra_bytes ? p->base + p->bytes + p->gen_bytes : NULL;
	return 0;
err_map:
	munmap(p->base, total);
	p->base = NULL;
err_fd:
	close(p->fd);
	p->fd = -1;
err_ext:
	kvt_extent_fini(&p->ext);
	return rc;
}

void kvt_pool_close(struct kvt_pool *p)
{
	if (p->base) {
		munmap(p->base, p->bytes + p->gen_bytes + p->extra_bytes);
	}
	if (p->fd >= 0)
		close(p->fd);
	kvt_extent_fini(&p->ext);
	memset(p, 0, sizeof(*p));
	p->fd = -1;
}

int kvt_pool_ro_fd(const struct kvt_pool *p)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p->fd);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int64_t kvt_pool_alloc(struct kvt_pool *p, uint64_t rec_bytes)
{
	uint64_t n = (rec_bytes + KVT_POOL_GRANULE - 1) / KVT_POOL_GRANULE;
	if (!n || n > p->ext.n_granules)
		return -ENOSPC;
	int64_t g = kvt_extent_alloc(&p->ext, (uint32_t)n);
	return g < 0 ? g : g * (int64_t)KVT_POOL_GRANULE;
}

void kvt_pool_free(struct kvt_pool *p, uint64_t off, uint64_t gen)
{
	/* the generation moves before the bytes can be reused: a reader that copied and then sees
	 * the old generation read nothing but the old record */
	atomic_store_explicit(&p->gens[off / KVT_POOL_GRANULE], gen, memory_order_seq_cst);
	kvt_extent_free(&p->ext, (uint32_t)(off / KVT_POOL_GRANULE));
}
