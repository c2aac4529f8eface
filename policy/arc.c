/*
 * arc.c -- ARC (Megiddo and Modha, FAST'03): T1 holds entries seen once recently, T2 entries
 * seen at least twice; ghost lists B1 and B2 remember keys evicted from each. A ghost hit in B1
 * grows the target size p of T1, one in B2 shrinks it; victims come from T1's LRU end while
 * |T1| > p, else from T2's. c, the cache size in entries, is the capacity hint, or the largest
 * resident count seen when no hint was given. Ghosts are keyed by key_hash, so an id that the
 * caller reuses for another chunk does not inherit a ghost.
 *
 * With quotas (pick_victims_tenants) T1 and T2 each set aside the entries of a tenant that may
 * lose nothing (kvt__list_walk_tenants, pol_int.h); they still count in |T1| and |T2|, and the
 * victims are the same.
 *
 * An entry the engine is done with (on_done, kvt_done) leaves T1 or T2 for a list D whose
 * entries go before any other, in the order told; an access takes it to T2 as usual, and its
 * eviction leaves no ghost (its fate was told, not observed, so it must not move p).
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>

enum { NONE, IN_T1, IN_T2, IN_D, LIST = 3, PARKED = 4 /* a bit: set aside (quotas) */ };

struct kvt_policy {
	struct kvt__link *lk;
	uint64_t *hash;
	uint8_t *where;
	size_t cap;
	struct kvt__list t1, t2, d; /* d: told done, never parked */
	struct kvt__park k1, k2;    /* T1's and T2's parked entries (quotas) */
	struct kvt__ghost b1, b2;
	double p;
	size_t c;
};

#define COLS(p)                                                                                    \
	{                                                                                          \
		KVT__COL((p)->lk), KVT__COL((p)->hash), KVT__COL((p)->where)                       \
	}

static int ensure(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	struct kvt__col c[] = COLS(p);
	return kvt__cols_grow(c, KVT__NCOLS(c), &p->cap, id);
}

static void arc_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	struct kvt__col c[] = COLS(p);
	kvt__cols_free(c, KVT__NCOLS(c));
	kvt__ghost_free(&p->b1);
	kvt__ghost_free(&p->b2);
	kvt__park_free(&p->k1);
	kvt__park_free(&p->k2);
	free(p);
}

static int arc_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	kvt__list_init(&p->t1);
	kvt__list_init(&p->t2);
	kvt__list_init(&p->d);
	p->c = hint;
	if (kvt__ghost_init(&p->b1, hint) || kvt__ghost_init(&p->b2, hint) ||
	    (hint && ensure(p, (uint32_t)(hint - 1)))) {
		arc_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

static struct kvt__list *list_of(struct kvt_policy *p, uint32_t id)
{
	unsigned w = p->where[id] & LIST;
	return w == IN_T1 ? &p->t1 : w == IN_T2 ? &p->t2 : &p->d;
}

/* |T1| and |T2|, parked entries included */
static size_t t1_n(const struct kvt_policy *p)
{
	return p->t1.n + p->k1.n;
}

static size_t t2_n(const struct kvt_policy *p)
{
	return p->t2.n + p->k2.n;
}

/* Takes resident id off T1 or T2 (or their parked lists). */
static void detach(struct kvt_policy *p, uint32_t id)
{
	if (__builtin_expect(p->where[id] & PARKED, 0)) {
		kvt__park_del((p->where[id] & LIST) == IN_T1 ? &p->k1 : &p->k2, p->lk, id);
		p->where[id] &= LIST;
	} else
		kvt__list_unlink(list_of(p, id), p->lk, id);
}

static void arc_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	kvt__ghost_prefetch(&p->b1, m->key_hash); /* both misses at once */
	kvt__ghost_prefetch(&p->b2, m->key_hash);
	if (ensure(p, id))
		return;
	if (p->where[id])
		detach(p, id);
	size_t resident = t1_n(p) + t2_n(p) + p->d.n + 1;
	if (resident > p->c)
		p->c = resident;
	double b1 = (double)p->b1.n, b2 = (double)p->b2.n;
	p->hash[id] = m->key_hash;
	if (kvt__ghost_has(&p->b1, m->key_hash)) {
		double d = b2 > b1 ? b2 / b1 : 1.0;
		p->p = p->p + d > (double)p->c ? (double)p->c : p->p + d;
		kvt__ghost_del(&p->b1, m->key_hash);
		p->where[id] = IN_T2;
	} else if (kvt__ghost_has(&p->b2, m->key_hash)) {
		double d = b1 > b2 ? b1 / b2 : 1.0;
		p->p = p->p - d < 0 ? 0 : p->p - d;
		kvt__ghost_del(&p->b2, m->key_hash);
		p->where[id] = IN_T2;
	} else {
		p->where[id] = IN_T1;
	}
	kvt__list_push_head(list_of(p, id), p->lk, id);
}

static void arc_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->where[id])
		return;
	detach(p, id);
	p->where[id] = IN_T2;
	kvt__list_push_head(&p->t2, p->lk, id);
}

static void arc_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->where[id])
		return;
	if (p->where[id] == IN_D) { /* told, not observed: no ghost */
		kvt__list_unlink(&p->d, p->lk, id);
		p->where[id] = NONE;
		return;
	}
	bool t1 = (p->where[id] & LIST) == IN_T1;
	kvt__ghost_prefetch(t1 ? &p->b1 : &p->b2, p->hash[id]);
	detach(p, id);
	p->where[id] = NONE;
	/* |T1| + |B1| <= c and |T1| + |T2| + |B1| + |B2| <= 2c */
	kvt__ghost_add(t1 ? &p->b1 : &p->b2, p->hash[id]);
	kvt__ghost_trim(&p->b1, p->c > t1_n(p) ? p->c - t1_n(p) : 0);
	size_t used = t1_n(p) + t2_n(p) + p->b1.n;
	kvt__ghost_trim(&p->b2, 2 * p->c > used ? 2 * p->c - used : 0);
}

/* Victims come from T1 while it is over its target p, else from T2; then from the other. */
static bool t1_first(const struct kvt_policy *p)
{
	return t1_n(p) && ((double)t1_n(p) > p->p || !t2_n(p));
}

static bool arc_is_done(struct kvt_policy *p, uint32_t id)
{
	return id < p->cap && p->where[id] == IN_D;
}

static void arc_done(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->where[id] || p->where[id] == IN_D)
		return;
	detach(p, id);
	p->where[id] = IN_D;
	kvt__list_push_head(&p->d, p->lk, id); /* walks start at the tail: first told, first out */
}

static size_t arc_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                          kvt_policy_evictable_fn ok, void *arg)
{
	bool one = t1_first(p);
	const struct kvt__list *a = one ? &p->t1 : &p->t2, *b = one ? &p->t2 : &p->t1;
	const struct kvt__park *ka = one ? &p->k1 : &p->k2, *kb = one ? &p->k2 : &p->k1;
	size_t n = kvt__list_walk(&p->d, p->lk, out, 0, max, ok, arg);
	n = kvt__park_walk(ka, p->lk, out, n, max, ok, NULL, arg);
	n = kvt__list_walk(a, p->lk, out, n, max, ok, arg);
	n = kvt__park_walk(kb, p->lk, out, n, max, ok, NULL, arg);
	return kvt__list_walk(b, p->lk, out, n, max, ok, arg);
}

static size_t arc_victims_tenants(struct kvt_policy *p, uint32_t *out, size_t max,
                                  kvt_policy_evictable_fn ok,
                                  uint32_t (*tenant_of)(void *, uint32_t),
                                  bool (*open)(void *, uint32_t), void *arg)
{
	bool one = t1_first(p);
	struct kvt__list *a = one ? &p->t1 : &p->t2, *b = one ? &p->t2 : &p->t1;
	struct kvt__park *ka = one ? &p->k1 : &p->k2, *kb = one ? &p->k2 : &p->k1;
	size_t n = kvt__list_walk_open(&p->d, p->lk, out, 0, max, ok, tenant_of, open, arg);
	n = kvt__list_walk_tenants(a, ka, p->lk, p->where, PARKED, p->cap, out, n, max, ok,
	                           tenant_of, open, arg);
	return kvt__list_walk_tenants(b, kb, p->lk, p->where, PARKED, p->cap, out, n, max, ok,
	                              tenant_of, open, arg);
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t arc_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	return sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap) + kvt__ghost_bytes(&p->b1) +
	       kvt__ghost_bytes(&p->b2) + kvt__park_bytes(&p->k1) + kvt__park_bytes(&p->k2);
}

const struct kvt_policy_ops kvt_policy_arc = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "arc",
    .create = arc_create,
    .destroy = arc_destroy,
    .on_insert = arc_insert,
    .on_access = arc_access,
    .on_remove = arc_remove,
    .on_done = arc_done,
    .is_done = arc_is_done,
    .pick_victims = arc_victims,
    .memory_bytes = arc_memory,
    .pick_victims_tenants = arc_victims_tenants,
};
