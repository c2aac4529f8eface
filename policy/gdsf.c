/*
 * gdsf.c -- a cost-aware GreedyDual-Size-Frequency policy for prefix chunks. An entry's key is
 * L + count x cost / size, where cost is the recompute work the chunk saves: prefilling chunk
 * d of a prefix attends over the d chunks before it, so cost = (depth + 1)^cost_exponent
 * (default 1; 0 makes every chunk cost the same, i.e. plain GDSF). L is the key of the last
 * evicted entry (the inflation that ages old entries). Size is in bytes, taken from the meta.
 *
 * Order: the victim is the entry with the smallest (key, seq, id), seq being when its key was
 * last set (insert or hit), exactly as with an eagerly re-keyed heap. The heap here is lazy:
 * - A hit only writes the id's current key and seq; its heap entry keeps the old ones. A key
 *   never decreases: every live key is >= L (it is L plus a non-negative term, and double
 *   rounding is monotone), and L becomes the smallest live key when the minimum goes, so L only
 *   grows. Seq grows too, so a stored entry is a lower bound of its id's current (key, seq).
 *   When the minimum entry is stale it is refreshed in place and sifted down, until the top is
 *   current: that top is the true minimum.
 * - Removing an id that is not the minimum leaves its entry behind as garbage (recognised by
 *   its seq: each live id records the seq of its one valid entry, hseq); garbage is dropped
 *   when it reaches the top, and the heap is compacted when a removal makes garbage outnumber
 *   live entries (and 64).
 * - Removing the minimum leaves a hole at the root that the next insert fills (one sift down
 *   instead of a sift down plus a sift up).
 * So the heap holds one valid entry per live id, and never much more than twice the most live
 * ids it has held; entries are the only thing a sift moves (no position array). pick_victims merges
 * the heap, walked best first by stored entries, with the visited ids ordered by their current
 * values: an id is proposed once no unvisited entry can be smaller. The 32-bit seq is renumbered
 * (order kept) before it wraps, after every entry has been made current.
 */
#include "pol_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef KVT__GDSF_CLOCK_MAX /* a build may lower it to test renumbering */
#define KVT__GDSF_CLOCK_MAX UINT32_MAX
#endif

struct gent {
	uint64_t tie; /* seq << 32 | id */
	uint64_t key; /* the bits of the key (positive doubles order like their bits) */
};

struct gid {
	uint64_t key;   /* current key bits */
	uint32_t seq;   /* current seq */
	uint32_t hseq;  /* seq of the id's valid heap entry */
	uint32_t count; /* 0 = not resident */
	float value;    /* cost / size */
};

struct kvt_policy {
	struct gent *e;  /* heap, n used (e[0] unused while hole); from e - 3 (see heap_grow) */
	struct gid *ids; /* per id, cap */
	struct gent *pend;
	uint32_t *front;
	size_t n, hcap, cap, live, garbage, pend_cap, front_cap;
	bool hole;
	uint32_t clock;
	double L, exponent;
};

static inline uint64_t key_bits(double key)
{
	uint64_t b;
	key = key > 0 ? key : 0;
	memcpy(&b, &key, sizeof(b));
	return b;
}

static inline bool ent_less(const struct gent *a, const struct gent *b)
{
	__extension__ typedef unsigned __int128 u128; /* one wide compare: key, then seq */
	return ((u128)a->key << 64 | a->tie) < ((u128)b->key << 64 | b->tie);
}

static inline uint32_t ent_id(const struct gent *x)
{
	return (uint32_t)x->tie;
}

static inline uint32_t ent_seq(const struct gent *x)
{
	return (uint32_t)(x->tie >> 32);
}

static inline struct gent cur_ent(const struct kvt_policy *p, uint32_t id)
{
	return (struct gent){.tie = (uint64_t)p->ids[id].seq << 32 | id, .key = p->ids[id].key};
}

static inline bool valid(const struct kvt_policy *p, const struct gent *x)
{
	const struct gid *g = &p->ids[ent_id(x)];
	return g->count && g->hseq == ent_seq(x);
}

#define ARY 4 /* children of i: ARY * i + 1 .. ARY * i + ARY */

/* Places x in the hole at i, rising no higher than top. */
static void rise(struct gent *e, size_t i, size_t top, struct gent x)
{
	while (i > top) {
		size_t pa = (i - 1) / ARY;
		if (!ent_less(&x, &e[pa]))
			break;
		e[i] = e[pa];
		i = pa;
	}
	e[i] = x;
}

static void sift_up(struct gent *e, size_t i)
{
	rise(e, i, 0, e[i]);
}

/* The smallest of the four children from c, without branches (they mispredict half the time). */
static inline size_t min4(const struct gent *e, size_t c)
{
	size_t a = c + ent_less(&e[c + 1], &e[c]);
	size_t b = c + 2 + ent_less(&e[c + 3], &e[c + 2]);
	return a + (b - a) * ent_less(&e[b], &e[a]);
}

/*
 * Places x in the hole at i of a heap of n: the hole first sinks along the smaller children to a
 * leaf, then x rises from there. Refreshed and new keys usually belong near the bottom, so this
 * does three compares per level where sifting x down would do four (one of them unpredictable).
 */
static void sift_down(struct gent *e, size_t n, size_t i, struct gent x)
{
	size_t top = i;
	for (;;) {
		size_t c = ARY * i + 1;
		if (c + ARY > n) { /* the last parent, fewer than four children, or a leaf */
			if (c >= n)
				break;
			for (size_t j = c + 1; j < n; j++)
				if (ent_less(&e[j], &e[c]))
					c = j;
			e[i] = e[c];
			i = c;
			break;
		}
		if (ARY * c + 1 + ARY * ARY <= n) /* the grandchildren: four lines */
			for (size_t g = 0; g < ARY; g++)
				__builtin_prefetch(&e[ARY * (c + g) + 1]);
		c = min4(e, c);
		e[i] = e[c];
		i = c;
	}
	rise(e, i, top, x);
}

static void heapify(struct gent *e, size_t n)
{
	for (size_t i = n / ARY + 1; i-- > 0;)
		if (i < n)
			sift_down(e, n, i, e[i]);
}

/* e[-3..hcap) on a 64-byte boundary: the children 4i+1..4i+4 of every node share one line. */
static int heap_grow(struct kvt_policy *p)
{
	size_t nc = p->hcap ? p->hcap * 2 : 1024;
	struct gent *b = aligned_alloc(64, (nc + 4) * sizeof(*b));
	if (!b)
		return -ENOMEM;
	if (p->n)
		memcpy(b + 3, p->e, p->n * sizeof(*b));
	free(p->e ? p->e - 3 : NULL);
	p->e = b + 3;
	p->hcap = nc;
	return 0;
}

/* Moves the last entry into the root hole. */
static void fill_hole(struct kvt_policy *p)
{
	if (!p->hole)
		return;
	p->hole = false;
	if (--p->n)
		sift_down(p->e, p->n, 0, p->e[p->n]);
}

/* Drops garbage and refreshes stale entries at the top until the top is current (or the heap
 * is empty). No hole. */
static void fix_top(struct kvt_policy *p)
{
	while (p->n) {
		struct gent *t = &p->e[0];
		uint32_t id = ent_id(t);
		struct gid *g = &p->ids[id];
		if (!g->count || g->hseq != ent_seq(t)) {
			p->garbage--;
			if (--p->n)
				sift_down(p->e, p->n, 0, p->e[p->n]);
		} else if (g->seq != g->hseq) {
			g->hseq = g->seq;
			sift_down(p->e, p->n, 0, cur_ent(p, id));
		} else {
			return;
		}
	}
}

/* Every entry current, garbage dropped, the hole filled; heap order restored. */
static void compact(struct kvt_policy *p)
{
	size_t m = 0;
	for (size_t i = p->hole; i < p->n; i++) {
		if (!valid(p, &p->e[i]))
			continue;
		uint32_t id = ent_id(&p->e[i]);
		p->ids[id].hseq = p->ids[id].seq;
		p->e[m++] = cur_ent(p, id);
	}
	p->n = m;
	p->hole = false;
	p->garbage = 0;
	heapify(p->e, p->n);
}

static int cmp_tie(const void *a, const void *b)
{
	uint64_t x = ((const struct gent *)a)->tie, y = ((const struct gent *)b)->tie;
	return x < y ? -1 : x > y;
}

/* Renumbers the seqs 0..live-1 in their order, so the 32-bit clock never wraps; the order of
 * every pair of ids is unchanged. */
static void renumber(struct kvt_policy *p)
{
	compact(p);
	qsort(p->e, p->n, sizeof(*p->e), cmp_tie);
	for (size_t r = 0; r < p->n; r++) {
		uint32_t id = ent_id(&p->e[r]);
		p->ids[id].seq = p->ids[id].hseq = (uint32_t)r;
		p->e[r].tie = (uint64_t)r << 32 | id;
	}
	p->clock = (uint32_t)p->n;
	heapify(p->e, p->n);
}

static uint32_t next_seq(struct kvt_policy *p)
{
	if (p->clock == KVT__GDSF_CLOCK_MAX)
		renumber(p);
	return p->clock++;
}

static void gdsf_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	free(p->e ? p->e - 3 : NULL);
	free(p->ids);
	free(p->pend);
	free(p->front);
	free(p);
}

static int gdsf_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->exponent = 1.0;
	*out = p;
	return 0;
}

static void gdsf_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	if (id >= p->cap) {
		size_t nc = kvt__pol_cap_for(p->cap, id);
		if (kvt__pol_grow((void **)&p->ids, sizeof(*p->ids), p->cap, nc))
			return;
		p->cap = nc;
	}
	if (!p->hole && p->n == p->hcap && heap_grow(p))
		return;
	uint32_t s = next_seq(p); /* first: renumbering reads every id's state */
	struct gid *g = &p->ids[id];
	if (g->count) { /* inserted again: the old entry becomes garbage */
		p->live--;
		p->garbage++;
	}
	double d = (double)m->depth + 1.0;
	double cost = p->exponent == 1.0 ? d : pow(d, p->exponent); /* pow(d, 1) == d exactly */
	g->value = (float)(cost / (double)(m->bytes ? m->bytes : 1));
	g->key = key_bits(p->L + g->value);
	g->count = 1;
	g->seq = g->hseq = s;
	p->live++;
	if (p->hole) {
		p->hole = false;
		sift_down(p->e, p->n, 0, cur_ent(p, id));
	} else {
		p->e[p->n] = cur_ent(p, id);
		sift_up(p->e, p->n++);
	}
}

static void gdsf_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->ids[id].count)
		return;
	uint32_t s = next_seq(p);
	struct gid *g = &p->ids[id];
	if (g->count < UINT32_MAX)
		g->count++;
	g->key = key_bits(p->L + (double)g->count * g->value);
	g->seq = s;
}

static void gdsf_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->ids[id].count)
		return;
	fill_hole(p);
	fix_top(p);
	struct gid *g = &p->ids[id];
	g->count = 0;
	p->live--;
	if (ent_id(&p->e[0]) == id) { /* the minimum: it is current after fix_top */
		memcpy(&p->L, &g->key, sizeof(p->L));
		p->hole = true;
		return;
	}
	p->garbage++;
	if (p->garbage > p->live && p->garbage > 64)
		compact(p);
}

static int pend_push(struct kvt_policy *p, size_t *n, struct gent x)
{
	if (*n == p->pend_cap) {
		size_t nc = p->pend_cap ? p->pend_cap * 2 : 64;
		if (kvt__pol_grow((void **)&p->pend, sizeof(*p->pend), p->pend_cap, nc))
			return -ENOMEM;
		p->pend_cap = nc;
	}
	size_t i = (*n)++;
	while (i > 0 && ent_less(&x, &p->pend[(i - 1) / 2])) {
		p->pend[i] = p->pend[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	p->pend[i] = x;
	return 0;
}

static struct gent pend_pop(struct kvt_policy *p, size_t *n)
{
	struct gent top = p->pend[0], v = p->pend[--(*n)];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && ent_less(&p->pend[c + 1], &p->pend[c]))
			c++;
		if (!ent_less(&p->pend[c], &v))
			break;
		p->pend[i] = p->pend[c];
		i = c;
	}
	if (*n)
		p->pend[i] = v;
	return top;
}

/* front: a min-heap of heap positions, by the entries stored there. */
static int front_push(struct kvt_policy *p, size_t *n, uint32_t v)
{
	if (*n == p->front_cap) {
		size_t nc = p->front_cap ? p->front_cap * 2 : 64;
		if (kvt__pol_grow((void **)&p->front, sizeof(*p->front), p->front_cap, nc))
			return -ENOMEM;
		p->front_cap = nc;
	}
	size_t i = (*n)++;
	while (i > 0 && ent_less(&p->e[v], &p->e[p->front[(i - 1) / 2]])) {
		p->front[i] = p->front[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	p->front[i] = v;
	return 0;
}

static uint32_t front_pop(struct kvt_policy *p, size_t *n)
{
	uint32_t top = p->front[0], v = p->front[--(*n)];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && ent_less(&p->e[p->front[c + 1]], &p->e[p->front[c]]))
			c++;
		if (!ent_less(&p->e[p->front[c]], &p->e[v]))
			break;
		p->front[i] = p->front[c];
		i = c;
	}
	if (*n)
		p->front[i] = v;
	return top;
}

/*
 * Best-first over stored entries (front), each valid id visited moves to pend with its current
 * (key, seq); pend's minimum is proposed once it is below every entry still in front, which
 * bounds everything not yet visited (heap order, and a stored entry <= its id's current).
 */
static size_t gdsf_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                           kvt_policy_evictable_fn ok, void *arg)
{
	fill_hole(p);
	fix_top(p);
	if (!p->n || !max)
		return 0;
	uint32_t top = ent_id(&p->e[0]);
	if (max == 1 && (!ok || ok(arg, top))) {
		out[0] = top;
		return 1;
	}
	size_t got = 0, fn = 0, pn = 0;
	if (front_push(p, &fn, 0))
		return 0;
	while (got < max) {
		if (pn && (!fn || ent_less(&p->pend[0], &p->e[p->front[0]]))) {
			struct gent x = pend_pop(p, &pn);
			uint32_t id = ent_id(&x);
			if (!ok || ok(arg, id))
				out[got++] = id;
			continue;
		}
		if (!fn)
			break;
		uint32_t i = front_pop(p, &fn);
		for (uint32_t c = ARY * i + 1; c <= ARY * i + ARY; c++)
			if (c < p->n && front_push(p, &fn, c))
				return got;
		if (valid(p, &p->e[i]) && pend_push(p, &pn, cur_ent(p, ent_id(&p->e[i]))))
			return got;
	}
	return got;
}

static int gdsf_set_param(struct kvt_policy *p, const char *name, const char *value)
{
	if (strcmp(name, "cost_exponent"))
		return -ENOENT;
	return kvt__param_double(value, 0, 4, &p->exponent);
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t gdsf_memory(struct kvt_policy *p)
{
	return sizeof(*p) + (p->e ? (p->hcap + 4) * sizeof(*p->e) : 0) + p->cap * sizeof(*p->ids) +
	       p->pend_cap * sizeof(*p->pend) + p->front_cap * sizeof(*p->front);
}

const struct kvt_policy_ops kvt_policy_gdsf = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "gdsf",
    .create = gdsf_create,
    .destroy = gdsf_destroy,
    .on_insert = gdsf_insert,
    .on_access = gdsf_access,
    .on_remove = gdsf_remove,
    .pick_victims = gdsf_victims,
    .set_param = gdsf_set_param,
    .memory_bytes = gdsf_memory,
};
