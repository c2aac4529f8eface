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
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNT 65535

struct kvt_policy {
	struct kvt__link *lk;
	uint64_t *key; /* 0 = not resident */
	uint32_t *count;
	size_t cap;
	struct kvt__list *b; /* b[key % R], head = keyed first */
	uint64_t *bits;      /* non-empty buckets */
	size_t r;
	uint64_t L;
	uint32_t max_count;
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

/* The smallest non-empty key in [from, L + R), or 0 when there is none. */
static uint64_t next_key(const struct kvt_policy *p, uint64_t from)
{
	uint64_t end = p->L + p->r;
	while (from < end) {
		size_t i = from & (p->r - 1);
		uint64_t w = p->bits[i / 64] >> (i % 64);
		if (w)
			return from + (uint64_t)__builtin_ctzll(w) < end
			           ? from + (uint64_t)__builtin_ctzll(w)
			           : 0;
		from += 64 - i % 64;
	}
	return 0;
}

static void lfu_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	(void)m;
	if (ensure(p, id))
		return;
	if (p->key[id])
		unlink_key(p, id);
	p->count[id] = 1;
	link_key(p, id, p->L + 1);
}

static void lfu_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->key[id])
		return;
	if (p->count[id] < p->max_count)
		p->count[id]++;
	unlink_key(p, id);
	link_key(p, id, p->L + p->count[id]);
}

static void lfu_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->key[id])
		return;
	uint64_t k = p->key[id];
	if (p->b[k & (p->r - 1)].head == id && next_key(p, p->L) == k)
		p->L = k; /* the minimum leaves: the inflation catches up with it */
	unlink_key(p, id);
}

static size_t lfu_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                          kvt_policy_evictable_fn ok, void *arg)
{
	size_t n = 0;
	for (uint64_t k = next_key(p, p->L); k && n < max; k = next_key(p, k + 1)) {
		const struct kvt__list *l = &p->b[k & (p->r - 1)];
		for (uint32_t id = l->head; id != KVT__NIL && n < max; id = p->lk[id].next)
			if (!ok || ok(arg, id))
				out[n++] = id;
	}
	return n;
}

/* Re-rings the entries when the key span needs more buckets, keeping their order. */
static int resize(struct kvt_policy *p, uint32_t max_count)
{
	uint64_t span = max_count;
	size_t n = 0;
	for (uint64_t k = next_key(p, p->L); k; k = next_key(p, k + 1)) {
		span = k - p->L > span ? k - p->L : span;
		n += p->b[k & (p->r - 1)].n;
	}
	size_t r = 256;
	while (r <= span)
		r *= 2;
	if (r == p->r)
		return 0;
	uint32_t *ids = malloc((n + 1) * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	n = lfu_victims(p, ids, n, NULL, NULL);
	uint64_t *keys = malloc((n + 1) * sizeof(*keys));
	if (!keys || ring_alloc(p, r)) {
		free(ids);
		free(keys);
		return -ENOMEM;
	}
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

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t lfu_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	return sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap) + p->r * sizeof(*p->b) +
	       (p->r / 64 + 1) * sizeof(*p->bits);
}

const struct kvt_policy_ops kvt_policy_lfu = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "lfu",
    .create = lfu_create,
    .destroy = lfu_destroy,
    .on_insert = lfu_insert,
    .on_access = lfu_access,
    .on_remove = lfu_remove,
    .pick_victims = lfu_victims,
    .set_param = lfu_set_param,
    .memory_bytes = lfu_memory,
};
