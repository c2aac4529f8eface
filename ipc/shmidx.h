/*
 * shmidx.h -- the per-tenant lookup table in shared memory (a format, shared by the daemon and
 * libkvtier), so that kvt_lookup needs no round trip.
 *
 * It lives in the tenant's pool memfd after the generation table: a 64-byte header, then
 * `slots` (a power of two) 16-byte slots holding the 128-bit keys of every chunk the daemon has
 * published for this tenant, in any tier. Open addressing, linear probing, at most
 * KVT_SHMIDX_PROBE slots from the home slot. The namespace is not stored: a chunk key already
 * hashes its namespace (docs/keys.md), and the table is per tenant.
 *
 * One writer (the daemon's loop), many readers, no locks:
 *   slot (lo, hi): (0, 0) empty -- ends a probe; (0, x != 0) tombstone -- probe on;
 *   insert writes hi, then lo (release); remove writes lo = 0 (release), then hi = 1.
 * A reader that races a writer can see a key one moment late or early: lookups are advisory
 * (kvt_acquire is authoritative), so that is fine, and a reader never matches a key that was
 * not in the table at some instant of its read. `complete` is 0 while the daemon rebuilds the
 * table or after it overflowed; readers then ask the daemon instead.
 */
#ifndef KVT_IPC_SHMIDX_H
#define KVT_IPC_SHMIDX_H
#include "kvtier.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define KVT_SHMIDX_MAGIC 0x5844494b /* "KIDX" */
#define KVT_SHMIDX_PROBE 64

struct kvt_shmidx_hdr {
	uint32_t magic;
	uint32_t version;
	uint64_t slots;
	_Atomic uint32_t complete;
	uint32_t reserved[11];
};
_Static_assert(sizeof(struct kvt_shmidx_hdr) == 64, "format");

struct kvt_shmidx_slot {
	_Atomic uint64_t lo, hi;
};
_Static_assert(sizeof(struct kvt_shmidx_slot) == 16, "format");

static inline uint64_t kvt_shmidx_bytes(uint64_t slots)
{
	return sizeof(struct kvt_shmidx_hdr) + slots * sizeof(struct kvt_shmidx_slot);
}

static inline uint64_t kvt_shmidx_home(kvt_id_t k, uint64_t slots)
{
	return (k.w[0] ^ (k.w[1] >> 17)) & (slots - 1);
}

/* @return : 1 present, 0 absent, -1 unknown (probe limit or incomplete: ask the daemon). */
static inline int kvt_shmidx_find(const struct kvt_shmidx_hdr *h, kvt_id_t k)
{
	const struct kvt_shmidx_slot *s = (const struct kvt_shmidx_slot *)(h + 1);
	if (!k.w[0])
		return -1; /* never stored (lo 0 marks empty and tombstone slots) */
	uint64_t mask = h->slots - 1, i = kvt_shmidx_home(k, h->slots);
	for (int p = 0; p < KVT_SHMIDX_PROBE; p++, i = (i + 1) & mask) {
		uint64_t lo = atomic_load_explicit(&s[i].lo, memory_order_acquire);
		uint64_t hi = atomic_load_explicit(&s[i].hi, memory_order_relaxed);
		if (lo == k.w[0] && hi == k.w[1] && lo)
			return 1;
		if (!lo && !hi)
			return 0;
	}
	return -1;
}
#endif
