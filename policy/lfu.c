/*
 * lfu.c -- LFU with dynamic aging (LFU-DA, Arlitt et al.): an entry's key is L + its hit count,
 * where L is the key of the last entry evicted. Old popular entries stop outranking new ones
 * once L has grown past their count, so the policy forgets a past phase without periodic
 * halving. Ties go to the entry keyed first. Parameter: max_count caps the count (default 255,
 * at most 65,535).
 *
 * Layout: keys are integers and every live key lies in [L, L + R), R a power of two above
 * max_count (a key is set to L + count <= L + max_count, and L, the minimum key at an eviction,
 * only grows). So a ring of R bucket lists indexed by key mod R, each in keying order, with a
 * bitmap of non-empty buckets, orders the entries exactly as a heap keyed by (key, keying
 * order) would, in O(1) per operation: the minimum is the first non-empty bucket from L, which
 * is next to L (at L itself right after an eviction). Memory: 20 bytes per id, 16 x R + R / 8
 * bytes of ring (4 KiB at the default).
 *
 * Quotas (pick_victims_tenants). As lru.c sets aside a protected tenant's entries from its
 * list's tail (pol_int.h, "Parking"), this sets them aside from each bucket's head: a tenant's
 * parked entries sit in a ring of its own, by key, in the order parked. An entry is parked only
 * while everything the walk met before it in its bucket was parked too, and a bucket only gains
 * entries at its tail, so a key's parked entries come before its listed ones. The order is then,
 * key by key, the parked entries (merged across tenants by when they were parked), then the
 * bucket; keys with parked entries count for L and for the minimum. Once something is parked:
 * 6 bytes an id, and 16 x R bytes per tenant with parked entries.
 *
 * An entry the engine is done with (on_done, kvt_done) leaves the ring for a list d, walked
 * before every key, first told first out, and never parked; its count stays, an access puts it
 * back keyed as usual, and its eviction does not move L (its fate was told, not observed).
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNT 65535
#define KEY_DONE  UINT64_MAX /* the key of an entry on d */

struct kvt_policy {
	struct kvt__link *lk;
	uint64_t *key; /* 0 = not resident */
	uint32_t *count;
	size_t cap;
	struct kvt__list *b; /* b[key % R], head = keyed first */
	uint64_t *bits;      /* non-empty buckets */
	size_t r;
	struct kvt__list d; /* told done: key KEY_DONE */
	uint64_t L;
	uint32_t max_count;
	/* set aside by tenant-aware walks (quotas); NULL until the first */
	size_t n_parked;
	struct kvt__list **pk; /* pk[t][key % R]: tenant t's, in the order parked */
	size_t n_pk;
	uint16_t *ptenant1; /* per id: its tenant + 1 while parked */
	uint32_t *pseq;     /* per id: when it was parked */
	size_t pcap;
	uint32_t pclock;
	uint32_t *pslot_n; /* per bucket: parked entries of that key, any tenant */
	uint64_t *pbits;   /* buckets with a parked entry */
};

#define COLS(p)                                                                                    \
	{                                                                                          \
		KVT__COL((p)->lk), KVT__COL((p)->key), KVT__COL((p)->count)                        \
	}

static int ensure(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	struct kvt__col c[] = COLS(p);
	return kvt__cols_grow(c, KVT__NCOLS(c), &p->cap, id);
}

static void lfu_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	struct kvt__col c[] = COLS(p);
	kvt__cols_free(c, KVT__NCOLS(c));
	free(p->b);
	free(p->bits);
	for (size_t t = 0; t < p->n_pk; t++)
		free(p->pk[t]);
	free(p->pk);
	free(p->ptenant1);
	free(p->pseq);
	free(p->pslot_n);
	free(p->pbits);
	free(p);
}

/* A ring of r (a power of two) empty buckets; the old one is freed. @return : 0, -ENOMEM. */
static int ring_alloc(struct kvt_policy *p, size_t r)
{
	struct kvt__list *b = malloc(r * sizeof(*b));
	uint64_t *bits = calloc(r / 64 + 1, sizeof(*bits));
	if (!b || !bits) {
		free(b);
		free(bits);
		return -ENOMEM;
	}
	for (size_t i = 0; i < r; i++)
		kvt__list_init(&b[i]);
	free(p->b);
	free(p->bits);
	p->b = b;
	p->bits = bits;
	p->r = r;
	return 0;
}

static int lfu_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->max_count = 255;
	kvt__list_init(&p->d);
	if (ring_alloc(p, 256) || (hint && ensure(p, (uint32_t)(hint - 1)))) {
		lfu_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

static void link_key(struct kvt_policy *p, uint32_t id, uint64_t key)
{
	size_t i = key & (p->r - 1);
	p->key[id] = key;
	kvt__list_push_tail(&p->b[i], p->lk, id);
	p->bits[i / 64] |= 1ULL << (i % 64);
}

static void unlink_key(struct kvt_policy *p, uint32_t id)
{
	size_t i = p->key[id] & (p->r - 1);
	kvt__list_unlink(&p->b[i], p->lk, id);
	if (!p->b[i].n)
		p->bits[i / 64] &= ~(1ULL << (i % 64));
	p->key[id] = 0;
}

/* The smallest key in [from, L + R) whose bucket bits marks, or 0 when there is none. */
static uint64_t next_in(const struct kvt_policy *p, const uint64_t *bits, uint64_t from)
{
	uint64_t end = p->L + p->r;
	while (from < end) {
		size_t i = from & (p->r - 1);
		uint64_t w = bits[i / 64] >> (i % 64);
		if (w)
			return from + (uint64_t)__builtin_ctzll(w) < end
			           ? from + (uint64_t)__builtin_ctzll(w)
			           : 0;
		from += 64 - i % 64;
	}
	return 0;
}

/* The smallest key of a resident entry, listed or parked, in [from, L + R), or 0. */
static uint64_t next_key(const struct kvt_policy *p, uint64_t from)
{
	uint64_t a = next_in(p, p->bits, from);
	if (__builtin_expect(!p->n_parked, 1))
		return a;
	uint64_t b = next_in(p, p->pbits, from);
	return !a ? b : !b ? a : a < b ? a : b;
}

static bool is_parked(const struct kvt_policy *p, uint32_t id)
{
	return __builtin_expect(p->n_parked != 0, 0) && id < p->pcap && p->ptenant1[id];
}

#ifndef KVT__LFU_PARK_CLOCK_MAX /* a build may lower it to test renumbering */
#define KVT__LFU_PARK_CLOCK_MAX UINT32_MAX
#endif

/* Gives the parked entries new sequence numbers, in their order within each key (the only
 * order they are compared in), before the clock wraps. */
static void renumber(struct kvt_policy *p)
{
	uint32_t *c = malloc((p->n_pk ? p->n_pk : 1) * sizeof(*c)), t;
	if (!c)
		return; /* the clock wraps: parked order within a key may be off */
	p->pclock = 0;
	for (size_t i = 0; i < p->r; i++) {
		if (!p->pslot_n[i])
			continue;
		for (t = 0; t < p->n_pk; t++)
			c[t] = p->pk[t] ? p->pk[t][i].head : KVT__NIL;
		while ((t = kvt__park_first(p->pseq, c, p->n_pk)) != KVT__NIL) {
			uint32_t id = c[t];
			c[t] = p->lk[id].next;
			p->pseq[id] = ++p->pclock;
		}
	}
	free(c);
}

/* Moves id (key k, in bucket k at the walk's front) to tenant t's parked ring.
 * @return : 0, -EINVAL (t too large), -ENOMEM (id stays). */
static int park(struct kvt_policy *p, uint32_t id, uint32_t t)
{
	size_t i = p->key[id] & (p->r - 1);
	if (t >= UINT16_MAX)
		return -EINVAL; /* passed, not parked */
	if (p->pclock >= KVT__LFU_PARK_CLOCK_MAX)
		renumber(p);
	if (!p->pslot_n) {
		p->pslot_n = calloc(p->r, sizeof(*p->pslot_n));
		p->pbits = calloc(p->r / 64 + 1, sizeof(*p->pbits));
		if (!p->pslot_n || !p->pbits) {
			free(p->pslot_n), free(p->pbits);
			p->pslot_n = NULL, p->pbits = NULL;
			return -ENOMEM;
		}
	}
	if (p->pcap < p->cap) {
		if (kvt__pol_grow((void **)&p->ptenant1, sizeof(*p->ptenant1), p->pcap, p->cap) ||
		    kvt__pol_grow((void **)&p->pseq, sizeof(*p->pseq), p->pcap, p->cap))
			return -ENOMEM;
		p->pcap = p->cap;
	}
	if (t >= p->n_pk) {
		size_t n = t + 1;
		struct kvt__list **pk = realloc(p->pk, n * sizeof(*pk));
		if (!pk)
			return -ENOMEM;
		memset(pk + p->n_pk, 0, (n - p->n_pk) * sizeof(*pk));
		p->pk = pk, p->n_pk = n;
	}
	if (!p->pk[t]) {
		if (!(p->pk[t] = malloc(p->r * sizeof(*p->pk[t]))))
			return -ENOMEM;
		for (size_t j = 0; j < p->r; j++)
			kvt__list_init(&p->pk[t][j]);
	}
	kvt__list_unlink(&p->b[i], p->lk, id);
	if (!p->b[i].n)
		p->bits[i / 64] &= ~(1ULL << (i % 64));
	kvt__list_push_tail(&p->pk[t][i], p->lk, id);
	p->ptenant1[id] = (uint16_t)(t + 1);
	p->pseq[id] = ++p->pclock;
	if (!p->pslot_n[i]++)
		p->pbits[i / 64] |= 1ULL << (i % 64);
	p->n_parked++;
	return 0;
}

/* Takes parked id off its tenant's ring; its key is then 0. */
__attribute__((cold, noinline)) static void unpark(struct kvt_policy *p, uint32_t id)
{
	size_t i = p->key[id] & (p->r - 1);
	kvt__list_unlink(&p->pk[p->ptenant1[id] - 1][i], p->lk, id);
	p->ptenant1[id] = 0;
	if (!--p->pslot_n[i])
		p->pbits[i / 64] &= ~(1ULL << (i % 64));
	p->n_parked--;
	p->key[id] = 0;
}

/* Takes resident id off its bucket, its parked ring or d; its key is then 0. */
static void detach(struct kvt_policy *p, uint32_t id)
{
	if (__builtin_expect(p->key[id] == KEY_DONE, 0)) {
		kvt__list_unlink(&p->d, p->lk, id);
		p->key[id] = 0;
	} else if (__builtin_expect(is_parked(p, id), 0)) {
		unpark(p, id);
	} else {
		unlink_key(p, id);
	}
}

/* parked_of_key's walk: key k's parked entries, merged across tenants by when they were parked. */
__attribute__((noinline)) static size_t parked_walk(const struct kvt_policy *p, uint64_t k,
                                                    uint32_t *out, size_t n, size_t max,
                                                    kvt_policy_evictable_fn ok,
                                                    bool (*open)(void *, uint32_t), void *arg)
{
	size_t i = k & (p->r - 1);
	uint32_t cur[64], *c = p->n_pk <= 64 ? cur : malloc(p->n_pk * sizeof(*c)), t;
	if (!c)
		return n;
	for (t = 0; t < p->n_pk; t++)
		c[t] = p->pk[t] ? p->pk[t][i].head : KVT__NIL;
	while (n < max && (t = kvt__park_first(p->pseq, c, p->n_pk)) != KVT__NIL) {
		uint32_t id = c[t];
		if (open && !open(arg, t)) {
			c[t] = KVT__NIL;
			continue;
		}
		c[t] = p->lk[id].next;
		if (!ok || ok(arg, id))
			out[n++] = id;
	}
	if (c != cur)
		free(c);
	return n;
}

/* Appends key k's parked entries (of tenants open() lets, when given) that ok() accepts. */
static size_t parked_of_key(const struct kvt_policy *p, uint64_t k, uint32_t *out, size_t n,
                            size_t max, kvt_policy_evictable_fn ok, bool (*open)(void *, uint32_t),
                            void *arg)
{
	if (__builtin_expect(!p->n_parked, 1) || !p->pslot_n[k & (p->r - 1)])
		return n;
	return parked_walk(p, k, out, n, max, ok, open, arg);
}

static void lfu_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	(void)m;
	if (ensure(p, id))
		return;
	if (p->key[id])
		detach(p, id);
	p->count[id] = 1;
	link_key(p, id, p->L + 1);
}

static void lfu_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->key[id])
		return;
	if (p->count[id] < p->max_count)
		p->count[id]++;
	detach(p, id);
	link_key(p, id, p->L + p->count[id]);
}

static bool lfu_is_done(struct kvt_policy *p, uint32_t id)
{
	return id < p->cap && p->key[id] == KEY_DONE;
}

static void lfu_done(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->key[id] || p->key[id] == KEY_DONE)
		return;
	detach(p, id);
	p->key[id] = KEY_DONE;
	kvt__list_push_head(&p->d, p->lk, id); /* walks start at the tail: first told, first out */
}

static void lfu_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->key[id])
		return;
	uint64_t k = p->key[id];
	if (k == KEY_DONE) { /* told, not observed: L stays */
		detach(p, id);
		return;
	}
	uint32_t first = p->b[k & (p->r - 1)].head;
	if (p->n_parked) { /* a key's parked entries come first */
		uint32_t one;
		if (parked_of_key(p, k, &one, 0, 1, NULL, NULL, NULL))
			first = one;
	}
	if (first == id && next_key(p, p->L) == k)
		p->L = k; /* the minimum leaves: the inflation catches up with it */
	detach(p, id);
}

/* The ring's entries (parked ones included) in key order, from out[n]. */
static size_t by_key(struct kvt_policy *p, uint32_t *out, size_t n, size_t max,
                     kvt_policy_evictable_fn ok, void *arg)
{
	for (uint64_t k = next_key(p, p->L); k && n < max; k = next_key(p, k + 1)) {
		const struct kvt__list *l = &p->b[k & (p->r - 1)];
		n = parked_of_key(p, k, out, n, max, ok, NULL, arg);
		for (uint32_t id = l->head; id != KVT__NIL && n < max; id = p->lk[id].next)
			if (!ok || ok(arg, id))
				out[n++] = id;
	}
	return n;
}

static size_t lfu_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                          kvt_policy_evictable_fn ok, void *arg)
{
	size_t n = kvt__list_walk(&p->d, p->lk, out, 0, max, ok, arg);
	return by_key(p, out, n, max, ok, arg);
}

/* As lfu_victims with every entry of a tenant open() refuses rejected; such entries at the
 * front of their bucket are parked on the way. */
static size_t lfu_victims_tenants(struct kvt_policy *p, uint32_t *out, size_t max,
                                  kvt_policy_evictable_fn ok,
                                  uint32_t (*tenant_of)(void *, uint32_t),
                                  bool (*open)(void *, uint32_t), void *arg)
{
	size_t n = kvt__list_walk_open(&p->d, p->lk, out, 0, max, ok, tenant_of, open, arg);
	for (uint64_t k = next_key(p, p->L); k && n < max; k = next_key(p, k + 1)) {
		struct kvt__list *l = &p->b[k & (p->r - 1)];
		n = parked_of_key(p, k, out, n, max, ok, open, arg);
		bool front = true;
		for (uint32_t id = l->head; id != KVT__NIL && n < max;) {
			uint32_t next = p->lk[id].next, t = tenant_of(arg, id);
			if (!open(arg, t)) {
				front = front && !park(p, id, t);
			} else {
				front = false;
				if (!ok || ok(arg, id))
					out[n++] = id;
			}
			id = next;
		}
	}
	return n;
}

/* Puts every parked entry back in its bucket, in the order (resize re-rings them all). */
static void unpark_all(struct kvt_policy *p)
{
	for (size_t t = 0; t < p->n_pk; t++)
		free(p->pk[t]);
	free(p->pk);
	free(p->pslot_n);
	free(p->pbits);
	p->pk = NULL, p->n_pk = 0, p->pslot_n = NULL, p->pbits = NULL;
	if (p->ptenant1)
		memset(p->ptenant1, 0, p->pcap * sizeof(*p->ptenant1));
	p->n_parked = 0;
	p->pclock = 0;
}

/* Re-rings the entries when the key span needs more buckets, keeping their order. */
static int resize(struct kvt_policy *p, uint32_t max_count)
{
	uint64_t span = max_count;
	size_t n = 0;
	for (uint64_t k = next_key(p, p->L); k; k = next_key(p, k + 1)) {
		span = k - p->L > span ? k - p->L : span;
		n += p->b[k & (p->r - 1)].n + (p->n_parked ? p->pslot_n[k & (p->r - 1)] : 0);
	}
	size_t r = 256;
	while (r <= span)
		r *= 2;
	if (r == p->r)
		return 0;
	uint32_t *ids = malloc((n + 1) * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	n = by_key(p, ids, 0, n, NULL, NULL); /* d keeps its entries */
	uint64_t *keys = malloc((n + 1) * sizeof(*keys));
	if (!keys || ring_alloc(p, r)) {
		free(ids);
		free(keys);
		return -ENOMEM;
	}
	unpark_all(p); /* relinked below, in the order they had */
	for (size_t i = 0; i < n; i++)
		keys[i] = p->key[ids[i]];
	for (size_t i = 0; i < n; i++)
		link_key(p, ids[i], keys[i]);
	free(ids);
	free(keys);
	return 0;
}

static int lfu_set_param(struct kvt_policy *p, const char *name, const char *value)
{
	double v;
	if (strcmp(name, "max_count"))
		return -ENOENT;
	if (kvt__param_double(value, 1, MAX_COUNT, &v))
		return -EINVAL;
	if (resize(p, (uint32_t)v))
		return -ENOMEM;
	p->max_count = (uint32_t)v;
	return 0;
}

static int lfu_get_param(struct kvt_policy *p, size_t i, struct kvt_policy_param *out)
{
	if (i)
		return -ENOENT;
	*out = (struct kvt_policy_param){"max_count", p->max_count, 1, MAX_COUNT};
	return 0;
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t lfu_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	size_t rings = 0;
	for (size_t t = 0; t < p->n_pk; t++)
		rings += p->pk[t] ? p->r * sizeof(**p->pk) : 0;
	return sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap) + p->r * sizeof(*p->b) +
	       (p->r / 64 + 1) * sizeof(*p->bits) +
	       p->pcap * (sizeof(*p->ptenant1) + sizeof(*p->pseq)) + rings +
	       (p->pslot_n ? p->r * sizeof(*p->pslot_n) + (p->r / 64 + 1) * 8 : 0);
}

const struct kvt_policy_ops kvt_policy_lfu = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "lfu",
    .create = lfu_create,
    .destroy = lfu_destroy,
    .on_insert = lfu_insert,
    .on_access = lfu_access,
    .on_remove = lfu_remove,
    .on_done = lfu_done,
    .is_done = lfu_is_done,
    .pick_victims = lfu_victims,
    .set_param = lfu_set_param,
    .get_param = lfu_get_param,
    .memory_bytes = lfu_memory,
    .pick_victims_tenants = lfu_victims_tenants,
};
