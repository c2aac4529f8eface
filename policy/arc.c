/*
 * arc.c -- ARC (Megiddo and Modha, FAST'03): T1 holds entries seen once recently, T2 entries
 * seen at least twice; ghost lists B1 and B2 remember keys evicted from each. A ghost hit in B1
 * grows the target size p of T1, one in B2 shrinks it; victims come from T1's LRU end while
 * |T1| > p, else from T2's. c, the cache size in entries, is the capacity hint, or the largest
 * resident count seen when no hint was given. Ghosts are keyed by key_hash, so an id that the
 * caller reuses for another chunk does not inherit a ghost.
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>

enum { NONE, IN_T1, IN_T2 };

struct kvt_policy {
	struct kvt__link *lk;
	uint64_t *hash;
	uint8_t *where;
	size_t cap;
	struct kvt__list t1, t2;
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
	free(p);
}

static int arc_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	kvt__list_init(&p->t1);
	kvt__list_init(&p->t2);
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
	return p->where[id] == IN_T1 ? &p->t1 : &p->t2;
}

static void arc_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	kvt__ghost_prefetch(&p->b1, m->key_hash); /* both misses at once */
	kvt__ghost_prefetch(&p->b2, m->key_hash);
	if (ensure(p, id))
		return;
	if (p->where[id])
		kvt__list_unlink(list_of(p, id), p->lk, id);
	size_t resident = p->t1.n + p->t2.n + 1;
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
	kvt__list_unlink(list_of(p, id), p->lk, id);
	p->where[id] = IN_T2;
	kvt__list_push_head(&p->t2, p->lk, id);
}

static void arc_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->where[id])
		return;
	bool t1 = p->where[id] == IN_T1;
	kvt__ghost_prefetch(t1 ? &p->b1 : &p->b2, p->hash[id]);
	kvt__list_unlink(list_of(p, id), p->lk, id);
	p->where[id] = NONE;
	/* |T1| + |B1| <= c and |T1| + |T2| + |B1| + |B2| <= 2c */
	kvt__ghost_add(t1 ? &p->b1 : &p->b2, p->hash[id]);
	kvt__ghost_trim(&p->b1, p->c > p->t1.n ? p->c - p->t1.n : 0);
	size_t used = p->t1.n + p->t2.n + p->b1.n;
	kvt__ghost_trim(&p->b2, 2 * p->c > used ? 2 * p->c - used : 0);
}

static size_t arc_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                          kvt_policy_evictable_fn ok, void *arg)
{
	bool t1_first = p->t1.n && ((double)p->t1.n > p->p || !p->t2.n);
	const struct kvt__list *a = t1_first ? &p->t1 : &p->t2, *b = t1_first ? &p->t2 : &p->t1;
	size_t n = kvt__list_walk(a, p->lk, out, 0, max, ok, arg);
	return kvt__list_walk(b, p->lk, out, n, max, ok, arg);
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t arc_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	return sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap) + kvt__ghost_bytes(&p->b1) +
	       kvt__ghost_bytes(&p->b2);
}

const struct kvt_policy_ops kvt_policy_arc = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "arc",
    .create = arc_create,
    .destroy = arc_destroy,
    .on_insert = arc_insert,
    .on_access = arc_access,
    .on_remove = arc_remove,
    .pick_victims = arc_victims,
    .memory_bytes = arc_memory,
};
