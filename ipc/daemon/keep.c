/*
 * keep.c -- kvt_keep: chunks an engine wants kept in host for a while (a system prompt, a
 * document many requests will read soon), whatever the eviction policy says.
 *
 * A kept chunk leaves the host policy (on_remove) and comes back to it when its keep ends
 * (on_insert, as if just stored): no policy walks past kept chunks on every eviction, and none
 * needs to know about keeps. Host reads of a kept chunk reach the policy as accesses to an id
 * it does not hold, which every policy ignores.
 *
 * State: until[id] (when the keep of index slot id ends, 0: not kept; allocated at the first
 * keep, grown with the index), and a binary min-heap of (until, id) so that ends are found in
 * O(log n). A heap entry whose until no longer matches until[id] is stale (kept again, or the
 * chunk left host) and is dropped when it reaches the top. chunks and bytes count exactly what
 * is kept, so a policy switch (host_resident) and host.keep_pct see the truth.
 *
 * Ends are processed lazily: before host evicts, at every keep, and when stats are read. A chunk
 * whose keep has ended but not yet been processed is simply still kept a little longer; nothing
 * else depends on the exact moment.
 *
 * A chunk only in a lower tier is *pending*: until[id] is set and its bit in pending[], its
 * bytes are reserved under host.keep_pct (pending_bytes), and a promotion is started. When the
 * promotion lands (kvd_keep_landed, from tierdone.c) the chunk skips the policy and is kept, unless
 * its keep ended meanwhile. A pending keep that ends, is ended, or whose chunk is dropped just
 * goes: the chunk is not at host, so there is nothing to hand back to the policy. kvd_kept() is
 * true only of chunks kept at host.
 */
#include "daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

static bool heap_less(const struct kvd_keep_ent *a, const struct kvd_keep_ent *b)
{
	return a->until < b->until;
}

static void heap_sift_down(struct kvd_keeps *k, size_t i)
{
	struct kvd_keep_ent x = k->heap[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= k->n)
			break;
		if (c + 1 < k->n && heap_less(&k->heap[c + 1], &k->heap[c]))
			c++;
		if (!heap_less(&k->heap[c], &x))
			break;
		k->heap[i] = k->heap[c];
		i = c;
	}
	k->heap[i] = x;
}

static int heap_push(struct kvd_keeps *k, struct kvd_keep_ent x)
{
	if (k->n == k->hcap) {
		size_t nc = k->hcap ? 2 * k->hcap : 256;
		struct kvd_keep_ent *h = realloc(k->heap, nc * sizeof(*h));
		if (!h)
			return -ENOMEM;
		k->heap = h;
		k->hcap = nc;
	}
	size_t i = k->n++;
	while (i > 0 && heap_less(&x, &k->heap[(i - 1) / 2])) {
		k->heap[i] = k->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	k->heap[i] = x;
	return 0;
}

static void heap_pop(struct kvd_keeps *k)
{
	k->heap[0] = k->heap[--k->n];
	if (k->n)
		heap_sift_down(k, 0);
}

static size_t words(uint32_t slots)
{
	return ((size_t)slots + 63) / 64;
}

static int ensure_slots(struct kvd *d)
{
	struct kvd_keeps *k = &d->keeps;
	if (k->cap >= d->idx.cap)
		return 0;
	uint64_t *u = realloc(k->until, (size_t)d->idx.cap * sizeof(*u));
	if (!u)
		return -ENOMEM;
	memset(u + k->cap, 0, (size_t)(d->idx.cap - k->cap) * sizeof(*u));
	k->until = u;
	uint64_t *p = realloc(k->pending, words(d->idx.cap) * sizeof(*p));
	if (!p)
		return -ENOMEM; /* until[] grew, cap did not: the next call grows pending[] again */
	memset(p + words(k->cap), 0, (words(d->idx.cap) - words(k->cap)) * sizeof(*p));
	k->pending = p;
	k->cap = d->idx.cap;
	return 0;
}

static bool is_pending(const struct kvd_keeps *k, uint32_t id)
{
	return k->pending[id / 64] >> (id % 64) & 1;
}

static void set_pending(struct kvd_keeps *k, uint32_t id, bool on)
{
	if (on)
		k->pending[id / 64] |= 1ull << (id % 64);
	else
		k->pending[id / 64] &= ~(1ull << (id % 64));
}

/* Whether id has a keep, at host or on its way up. */
static bool has_keep(const struct kvd *d, uint32_t id)
{
	return id < d->keeps.cap && d->keeps.until[id];
}

bool kvd_kept(const struct kvd *d, uint32_t id)
{
	return has_keep(d, id) && !is_pending(&d->keeps, id);
}

bool kvd_keep_pending(const struct kvd *d, uint32_t id)
{
	return has_keep(d, id) && is_pending(&d->keeps, id);
}

/* Takes id's keep away (the heap entry goes stale); the caller decides about the policy. */
static void unkeep(struct kvd *d, uint32_t id)
{
	struct kvd_keeps *k = &d->keeps;
	uint64_t rb = kvd_rec_bytes(d->idx.e[id].payload_bytes);
	k->until[id] = 0;
	if (is_pending(k, id)) {
		set_pending(k, id, false);
		k->pending_chunks--;
		k->pending_bytes -= rb;
	} else {
		k->chunks--;
		k->bytes -= rb;
	}
}

/* The keep of id ends: a chunk kept at host goes back to the policy as if just stored; one on
 * its way up is left to its promotion, which hands it to the policy when it lands. */
static void release(struct kvd *d, uint32_t id)
{
	bool at_host = kvd_kept(d, id);
	unkeep(d, id);
	if (at_host) {
		struct kvt_policy_meta m;
		kvd_host_meta(d, id, &m);
		kvd_policy_stream(d, KVD_NIL);
		d->pol_ops->on_insert(d->pol, id, &m);
	}
}

void kvd_keep_forget(struct kvd *d, uint32_t id)
{
	if (has_keep(d, id))
		unkeep(d, id);
}

void kvd_keep_end(struct kvd *d, uint32_t id)
{
	if (has_keep(d, id))
		release(d, id);
}

bool kvd_keep_landed(struct kvd *d, uint32_t id)
{
	if (!kvd_keep_pending(d, id))
		return false;
	struct kvd_keeps *k = &d->keeps;
	if (k->until[id] <= kvt_now_ns()) { /* ended on the way: the heap entry finds it gone */
		unkeep(d, id);
		return false;
	}
	uint64_t rb = kvd_rec_bytes(d->idx.e[id].payload_bytes);
	set_pending(k, id, false);
	k->pending_chunks--;
	k->pending_bytes -= rb;
	k->chunks++;
	k->bytes += rb;
	return true;
}

void kvd_keep_expire(struct kvd *d)
{
	struct kvd_keeps *k = &d->keeps;
	if (!k->n)
		return;
	uint64_t now = kvt_now_ns();
	while (k->n && k->heap[0].until <= now) {
		struct kvd_keep_ent top = k->heap[0];
		heap_pop(k);
		if (top.id < k->cap && k->until[top.id] == top.until)
			release(d, top.id);
	}
}

/* Stale entries (kept again, or gone) outnumbering the keeps: rebuilt from until[]. */
static void heap_compact(struct kvd_keeps *k)
{
	if (k->n < 2 * ((size_t)k->chunks + k->pending_chunks) + 1024)
		return;
	k->n = 0;
	for (uint32_t id = 0; id < k->cap; id++)
		if (k->until[id])
			k->heap[k->n++] = (struct kvd_keep_ent){k->until[id], id};
	for (size_t i = k->n / 2 + 1; i-- > 0;)
		if (i < k->n)
			heap_sift_down(k, i);
}

int kvd_keep(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys, uint32_t n,
             uint32_t ttl_ms)
{
	struct kvd_keeps *k = &d->keeps;
	kvd_keep_expire(d);
	heap_compact(k);
	if (ensure_slots(d))
		return -ENOMEM;
	uint64_t max_ms = kvt_opt_u64(&d->opts, KVT_OPT_HOST_KEEP_MAX_MS);
	uint64_t ms = ttl_ms < max_ms ? ttl_ms : max_ms;
	uint64_t cap = d->host_cap / 100 * kvt_opt_u64(&d->opts, KVT_OPT_HOST_KEEP_PCT);
	uint64_t until = kvt_now_ns() + ms * 1000000ull;
	int kept = 0;
	bool full = false;
	uint32_t up[KVT_BATCH_MAX], n_up = 0; /* the keys whose chunks are to come up */
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = kvd_index_find(&d->idx, tenant, ns, keys[i]);
		if (id == KVD_NIL)
			continue;
		if (!ms) { /* the engine ends its keep */
			kvd_keep_end(d, id);
			continue;
		}
		const struct kvd_entry *e = &d->idx.e[id];
		bool at_host = e->where & KVD_AT_HOST;
		if (!at_host && (e->state != KVD_PUBLISHED || !e->where))
			continue;
		uint64_t rb = kvd_rec_bytes(e->payload_bytes);
		bool again = has_keep(d, id);
		if (!again && k->bytes + k->pending_bytes + rb > cap) {
			full = true;
			break; /* the keys before it are kept */
		}
		if (heap_push(k, (struct kvd_keep_ent){until, id}))
			return kept ? kept : -ENOMEM;
		if (!again && at_host) {
			d->pol_ops->on_remove(d->pol, id);
			k->chunks++;
			k->bytes += rb;
		} else if (!again) {
			set_pending(k, id, true);
			k->pending_chunks++;
			k->pending_bytes += rb;
			if (!e->jobs && n_up < KVT_BATCH_MAX) /* no promotion on its way yet */
				up[n_up++] = i;
		}
		k->until[id] = until; /* a longer or shorter keep replaces the earlier one */
		kept++;
	}
	for (uint32_t j = 0; j < n_up; j++) /* after the loop: promoting may evict */
		kvd_tiers_promote(d, tenant, ns, &keys[up[j]], 1, NULL);
	d->st.keeps += (uint64_t)kept;
	if (full)
		d->st.keep_refused++;
	return kept || !full ? kept : -ENOSPC;
}

void kvd_keep_fini(struct kvd *d)
{
	free(d->keeps.until);
	free(d->keeps.pending);
	free(d->keeps.heap);
	memset(&d->keeps, 0, sizeof(d->keeps));
}
