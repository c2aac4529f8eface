/*
 * pool.h -- one tenant's host pool: a sealed memfd that clients map read-only, the generation
 * table after it (proto.h), and the extent allocator that carves records out of it.
 *
 * The daemon maps the memfd read-write once, then seals it (SHRINK|GROW|FUTURE_WRITE|SEAL):
 * its own mapping stays writable, and nobody can map it writable again or change its size.
 * Pages are touched only when a record is written (memfd is sparse), so the pool's virtual size
 * can be the whole host.bytes for every tenant while the daemon caps the total in use.
 * Nothing here pins the pool: the nvme tier pins the regions its I/O uses (tiers/nvme/pin.c).
 * Until 2026-12-03 the pool was cudaHostRegister'ed whole where a GPU was present, in the
 * daemon's own process: that pinned host.bytes per tenant at its first hello and made no
 * engine's copy faster, since CUDA knows pinned memory per process (an engine that wants DMA
 * from its read-only mapping registers that mapping itself). The caller may ask for an extra
 * shared area after the generation table (the daemon keeps its lookup table there).
 */
#ifndef KVT_TIERS_HOST_POOL_H
#define KVT_TIERS_HOST_POOL_H
#include "extent.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Allocation granule of the pool and of its generation table (the protocol's KVT_GRANULE). */
#define KVT_POOL_GRANULE 4096u

struct kvt_pool {
	int fd;             /* owned; read-write memfd, sealed */
	uint8_t *base;      /* the daemon's writable mapping of records + generations */
	uint64_t bytes;     /* record area */
	uint64_t gen_bytes; /* generation table after it */
	_Atomic uint64_t *gens;
	uint64_t extra_bytes; /* the caller's shared area after that (a lookup table) */
	uint8_t *extra;
	struct kvt_extent ext;
};

/* @return : 0 or -errno. bytes is rounded up to the granule; extra_bytes (rounded up to a
 * page) of zeroed shared memory follow the generation table, for the caller. */
int kvt_pool_open(struct kvt_pool *p, uint64_t bytes, uint64_t extra_bytes, const char *name);
void kvt_pool_close(struct kvt_pool *p);
/* A fresh read-only fd of the pool to hand to a client. @return : fd or -errno. */
int kvt_pool_ro_fd(const struct kvt_pool *p);
/* @return : the offset of a fresh record area of rec_bytes, or -ENOSPC (fragmented or full). */
int64_t kvt_pool_alloc(struct kvt_pool *p, uint64_t rec_bytes);
/* Bumps the record's generation to gen (then frees it), so leases on it read as revoked. */
void kvt_pool_free(struct kvt_pool *p, uint64_t off, uint64_t gen);
static inline uint64_t kvt_pool_gen(const struct kvt_pool *p, uint64_t off)
{
	return atomic_load_explicit(&p->gens[off / KVT_POOL_GRANULE], memory_order_acquire);
}
#endif
