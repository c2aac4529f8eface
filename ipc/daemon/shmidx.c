/*
 * shmidx.c -- the daemon writes each tenant's shared lookup table (ipc/shmidx.h): a key goes in
 * when its entry is published in the index and comes out when the entry is dropped. Tombstones
 * are reclaimed by a rebuild (marked incomplete meanwhile, so readers ask the daemon) once live
 * keys plus tombstones pass 3/4 of the slots; a table that cannot place a key within the probe
 * limit stays incomplete until the next rebuild. More live keys than half the slots mark the
 * table full (incomplete, no more writes) until they drop under a quarter: no rebuild storms.
 */
#include "daemon.h"
#include "ipc/shmidx.h"

#include <string.h>

static struct kvt_shmidx_hdr *table(struct kvd *d, uint32_t tenant)
{
	struct kvt_pool *p = &d->tenants[tenant].pool;
	return p->extra_bytes ? (struct kvt_shmidx_hdr *)p->extra : NULL;
}

void kvd_shmidx_init(struct kvd *d, uint32_t tenant, uint64_t slots)
{
	struct kvt_shmidx_hdr *h = table(d, tenant);
	if (!h)
		return;
	h->magic = KVT_SHMIDX_MAGIC;
	h->version = 1;
	h->slots = slots;
	atomic_store_explicit(&h->complete, 1, memory_order_release);
}

static bool place(struct kvt_shmidx_hdr *h, kvt_id_t k)
{
	struct kvt_shmidx_slot *s = (struct kvt_shmidx_slot *)(h + 1);
	uint64_t mask = h->slots - 1, i = kvt_shmidx_home(k, h->slots);
	for (int p = 0; p < KVT_SHMIDX_PROBE; p++, i = (i + 1) & mask) {
		if (atomic_load_explicit(&s[i].lo, memory_order_relaxed))
			continue; /* live */
		atomic_store_explicit(&s[i].hi, k.w[1], memory_order_relaxed);
		atomic_store_explicit(&s[i].lo, k.w[0], memory_order_release);
		return true;
	}
	return false;
}

static void rebuild(struct kvd *d, uint32_t tenant)
{
	struct kvt_shmidx_hdr *h = table(d, tenant);
	struct kvd_tenant *t = &d->tenants[tenant];
	atomic_store_explicit(&h->complete, 0, memory_order_seq_cst);
	memset((void *)(h + 1), 0, h->slots * sizeof(struct kvt_shmidx_slot));
	t->idx_live = t->idx_tomb = 0;
	bool ok = true;
	for (uint32_t i = 0; i < d->idx.cap; i++) {
		const struct kvd_entry *e = &d->idx.e[i];
		if (e->state != KVD_PUBLISHED || e->tenant != tenant || !e->key.w[0])
			continue;
		ok &= place(h, e->key);
		t->idx_live++;
	}
	atomic_store_explicit(&h->complete, ok, memory_order_seq_cst);
}

/* Called once the entry is published in the index (so a rebuild sees it). */
void kvd_shmidx_insert(struct kvd *d, uint32_t tenant, kvt_id_t k)
{
	struct kvt_shmidx_hdr *h = table(d, tenant);
	struct kvd_tenant *t = &d->tenants[tenant];
	if (!h || !k.w[0])
		return;
	if (!t->idx_full && (t->idx_live + t->idx_tomb + 1) * 4 > h->slots * 3) {
		if ((t->idx_live + 1) * 2 <= h->slots) {
			rebuild(d, tenant); /* mostly tombstones: reclaim them; k is placed too */
			return;
		}
		/* more live keys than the table should hold: stop writing, do not thrash */
		t->idx_full = true;
		atomic_store_explicit(&h->complete, 0, memory_order_release);
	}
	t->idx_live++;
	if (!t->idx_full && !place(h, k))
		atomic_store_explicit(&h->complete, 0, memory_order_release);
}

/* Called once the entry left the index (state no longer published). */
void kvd_shmidx_remove(struct kvd *d, uint32_t tenant, kvt_id_t k)
{
	struct kvt_shmidx_hdr *h = table(d, tenant);
	struct kvd_tenant *t = &d->tenants[tenant];
	if (!h || !k.w[0])
		return;
	if (t->idx_full) {
		t->idx_live--;
		if (t->idx_live * 4 < h->slots) { /* room again: rebuild without this key */
			t->idx_full = false;
			rebuild(d, tenant);
		}
		return;
	}
	struct kvt_shmidx_slot *s = (struct kvt_shmidx_slot *)(h + 1);
	uint64_t mask = h->slots - 1, i = kvt_shmidx_home(k, h->slots);
	for (int p = 0; p < KVT_SHMIDX_PROBE; p++, i = (i + 1) & mask) {
		uint64_t lo = atomic_load_explicit(&s[i].lo, memory_order_relaxed);
		uint64_t hi = atomic_load_explicit(&s[i].hi, memory_order_relaxed);
		if (!lo && !hi)
			break;
		if (lo == k.w[0] && hi == k.w[1]) {
			atomic_store_explicit(&s[i].lo, 0, memory_order_release);
			atomic_store_explicit(&s[i].hi, 1, memory_order_release);
			d->tenants[tenant].idx_live--;
			d->tenants[tenant].idx_tomb++;
			return;
		}
	}
}

void kvd_shmidx_close(struct kvd *d, uint32_t tenant)
{
	struct kvt_shmidx_hdr *h = table(d, tenant);
	if (h)
		atomic_store_explicit(&h->complete, 0, memory_order_seq_cst);
}
