/*
 * lru.c -- plain LRU: a doubly linked list through per-id arrays, most recent at the head.
 * O(1) insert, access and remove; victims are walked from the tail, skipping what the caller
 * says it cannot evict.
 *
 * fifo is the same list without the move on access: entries leave in the order they came (a
 * re-insert comes again). It is what the nvme tier's log does (tiers/nvme/log.c), so that
 * kvtier sim and the nvme tier's own miss-ratio curve can run it.
 *
 * clock is fifo with a reference bit (bit 1 of live), set by an access: a walk for victims
 * gives a referenced entry a second chance, clearing the bit and moving it to the head. It is
 * what the nvme log does with nvme.policy = clock (a record read since it was written is
 * copied forward at reclaim, tiers/nvme/reclaim.c).
 *
 * With quotas, lru and fifo walk through kvt__list_walk_tenants (pol_int.h): the entries of a
 * tenant that may lose nothing are set aside ("parked") from the tail instead of being passed
 * at every eviction; the order, and so every victim, stays the same.
 *
 * lru takes kvt_done's hint (on_done): the entry moves to a list d walked before everything
 * else, first told first out, and never parked; an access takes it back to q's head. fifo and
 * clock, like the log they model, keep their order: the hint only marks the entry (TOLD, and
 * clock's reference bit goes), so that it gets no second chance and is not handed to the tier
 * below when it goes (the nvme tier's hint_done; kvtier sim's cascade). A read clears it.
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>

enum {
	LIVE = 1,
	REF = 2 /* clock */,
	PARKED = 4,
	DONE = 8 /* on d */,
	TOLD = 16 /* fifo, clock */
};

struct kvt_policy {
	struct kvt__link *lk; /* indexed by id: on q, or parked */
	uint8_t *live;
	size_t cap;
	struct kvt__list q;
	struct kvt__park parked; /* set aside by tenant-aware walks (quotas) */
	struct kvt__list d;      /* told done (lru_done): offered first, in the order told */
};

#define COLS(p)                                                                                    \
	{                                                                                          \
		KVT__COL((p)->lk), KVT__COL((p)->live)                                             \
	}

static int ensure(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	struct kvt__col c[] = COLS(p);
	return kvt__cols_grow(c, KVT__NCOLS(c), &p->cap, id);
}

static void lru_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	struct kvt__col c[] = COLS(p);
	kvt__cols_free(c, KVT__NCOLS(c));
	kvt__park_free(&p->parked);
	free(p);
}

static int lru_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	kvt__list_init(&p->q);
	kvt__list_init(&p->d);
	if (hint && ensure(p, (uint32_t)(hint - 1))) {
		lru_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

/* Takes live id off the list it is on (q, d, or its tenant's parked list). */
static void detach(struct kvt_policy *p, uint32_t id)
{
	if (__builtin_expect(p->live[id] & (PARKED | DONE), 0)) {
		if (p->live[id] & PARKED)
			kvt__park_del(&p->parked, p->lk, id);
		else
			kvt__list_unlink(&p->d, p->lk, id);
		p->live[id] &= (uint8_t) ~(PARKED | DONE);
	} else
		kvt__list_unlink(&p->q, p->lk, id);
}

static void lru_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	(void)m;
	if (ensure(p, id))
		return; /* untracked: never proposed as a victim, which is safe */
	if (p->live[id])
		detach(p, id);
	p->live[id] = LIVE;
	kvt__list_push_head(&p->q, p->lk, id);
}

static void lru_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->live[id] || p->q.head == id)
		return;
	detach(p, id);
	kvt__list_push_head(&p->q, p->lk, id);
}

static void fifo_access(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap && p->live[id])
		p->live[id] &= (uint8_t)~TOLD;
}

static void clock_access(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap && p->live[id])
		p->live[id] = (uint8_t)((p->live[id] | REF) & ~TOLD);
}

static bool log_is_done(struct kvt_policy *p, uint32_t id)
{
	return id < p->cap && (p->live[id] & TOLD);
}

/* fifo and clock: the entry keeps its place; it is marked, and loses its second chance. */
static void log_done(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap && p->live[id])
		p->live[id] = (uint8_t)((p->live[id] | TOLD) & ~REF);
}

static bool lru_is_done(struct kvt_policy *p, uint32_t id)
{
	return id < p->cap && (p->live[id] & DONE);
}

/* A finished conversation's entry goes before every other (d, walked first; a parked one
 * leaves its tenant's list for it); an access takes it back to q's head. */
static void lru_done(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->live[id] || (p->live[id] & DONE))
		return;
	detach(p, id);
	p->live[id] |= DONE;
	kvt__list_push_head(&p->d, p->lk, id); /* walks start at the tail: first told, first out */
}

static void lru_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->live[id])
		return;
	detach(p, id);
	p->live[id] = 0;
}

static size_t lru_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                          kvt_policy_evictable_fn ok, void *arg)
{
	size_t n = kvt__list_walk(&p->d, p->lk, out, 0, max, ok, arg);
	n = kvt__park_walk(&p->parked, p->lk, out, n, max, ok, NULL, arg);
	return kvt__list_walk(&p->q, p->lk, out, n, max, ok, arg);
}

static size_t lru_victims_tenants(struct kvt_policy *p, uint32_t *out, size_t max,
                                  kvt_policy_evictable_fn ok,
                                  uint32_t (*tenant_of)(void *, uint32_t),
                                  bool (*open)(void *, uint32_t), void *arg)
{
	size_t n = kvt__list_walk_open(&p->d, p->lk, out, 0, max, ok, tenant_of, open, arg);
	return kvt__list_walk_tenants(&p->q, &p->parked, p->lk, p->live, PARKED, p->cap, out, n,
	                              max, ok, tenant_of, open, arg);
}

static size_t clock_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                            kvt_policy_evictable_fn ok, void *arg)
{
	size_t n = 0, steps = p->q.n; /* one look at each entry */
	for (uint32_t id = p->q.tail; id != KVT__NIL && n < max && steps; steps--) {
		uint32_t prev = p->lk[id].prev;
		if (p->live[id] & REF) { /* a second chance */
			p->live[id] = LIVE;
			kvt__list_unlink(&p->q, p->lk, id);
			kvt__list_push_head(&p->q, p->lk, id);
		} else if (!ok || ok(arg, id)) {
			out[n++] = id;
		}
		id = prev;
	}
	/* every entry looked at had its chance: the rest come from the tail again */
	for (uint32_t id = p->q.tail; id != KVT__NIL && n < max; id = p->lk[id].prev)
		if ((!ok || ok(arg, id)) && !kvt__proposed(out, n, id))
			out[n++] = id;
	return n;
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t lru_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	return sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap) + kvt__park_bytes(&p->parked);
}

const struct kvt_policy_ops kvt_policy_lru = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "lru",
    .create = lru_create,
    .destroy = lru_destroy,
    .on_insert = lru_insert,
    .on_access = lru_access,
    .on_done = lru_done,
    .is_done = lru_is_done,
    .on_remove = lru_remove,
    .pick_victims = lru_victims,
    .memory_bytes = lru_memory,
    .pick_victims_tenants = lru_victims_tenants,
};

const struct kvt_policy_ops kvt_policy_fifo = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "fifo",
    .create = lru_create,
    .destroy = lru_destroy,
    .on_insert = lru_insert,
    .on_access = fifo_access,
    .on_done = log_done,
    .is_done = log_is_done,
    .on_remove = lru_remove,
    .pick_victims = lru_victims,
    .memory_bytes = lru_memory,
    .pick_victims_tenants = lru_victims_tenants,
};

const struct kvt_policy_ops kvt_policy_clock = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "clock",
    .create = lru_create,
    .destroy = lru_destroy,
    .on_insert = lru_insert,
    .on_access = clock_access,
    .on_done = log_done,
    .is_done = log_is_done,
    .on_remove = lru_remove,
    .pick_victims = clock_victims,
    .memory_bytes = lru_memory,
};
