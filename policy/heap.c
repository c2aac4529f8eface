/*
 * heap.c -- the policies' indexed heap (pol_int.h): 4-ary (shallower than binary; a node's
 * children share a cache line), pos[id] + 1 kept so that a zeroed array means "absent", keys
 * renumbered before their bits run out; its non-destructive walk is a best-first search over
 * heap positions with a second small heap (aux), O(k log k) for k proposals.
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void kvt__heap_init(struct kvt__heap *h)
{
	memset(h, 0, sizeof(*h));
}

size_t kvt__heap_bytes(const struct kvt__heap *h)
{
	return (h->e ? (h->cap + 4) * sizeof(*h->e) : 0) + h->pos_cap * sizeof(*h->pos) +
	       h->aux_cap * sizeof(*h->aux);
}

void kvt__heap_free(struct kvt__heap *h)
{
	free(h->e ? h->e - 3 : NULL);
	free(h->pos);
	free(h->aux);
	memset(h, 0, sizeof(*h));
}

/* A non-negative double's bits order like the double (+0 for -0; keys are >= 0). */
static inline uint64_t key_bits(double key)
{
	uint64_t b;
	key = key > 0 ? key : 0;
	memcpy(&b, &key, sizeof(b));
	return b;
}

static inline bool ent_less(const struct kvt__hent *a, const struct kvt__hent *b)
{
	__extension__ typedef unsigned __int128 u128; /* one wide compare: key, then seq */
	return ((u128)a->key << 64 | a->tie) < ((u128)b->key << 64 | b->tie);
}

static inline void place(struct kvt__heap *h, size_t i, const struct kvt__hent *x)
{
	h->e[i] = *x;
	h->pos[(uint32_t)x->tie] = (uint32_t)i + 1;
}

#define ARY 4 /* children of i: ARY * i + 1 .. ARY * i + ARY */

static void sift_up(struct kvt__heap *h, size_t i)
{
	struct kvt__hent x = h->e[i];
	while (i > 0) {
		size_t pa = (i - 1) / ARY;
		if (!ent_less(&x, &h->e[pa]))
			break;
		place(h, i, &h->e[pa]);
		i = pa;
	}
	place(h, i, &x);
}

static void sift_down(struct kvt__heap *h, size_t i)
{
	struct kvt__hent x = h->e[i];
	for (;;) {
		size_t c = ARY * i + 1, end = c + ARY < h->n ? c + ARY : h->n;
		if (c >= h->n)
			break;
		for (size_t j = c + 1; j < end; j++)
			if (ent_less(&h->e[j], &h->e[c]))
				c = j;
		if (!ent_less(&h->e[c], &x))
			break;
		place(h, i, &h->e[c]);
		i = c;
	}
	place(h, i, &x);
}

/* e[-3..cap) on a 64-byte boundary: the children 4i+1..4i+4 of every node share one line. */
static int heap_grow(struct kvt__heap *h)
{
	size_t nc = h->cap ? h->cap * 2 : 1024;
	struct kvt__hent *b = aligned_alloc(64, (nc + 4) * sizeof(*b));
	if (!b)
		return -ENOMEM;
	if (h->n)
		memcpy(b + 3, h->e, h->n * sizeof(*b));
	free(h->e ? h->e - 3 : NULL);
	h->e = b + 3;
	h->cap = nc;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Renumbers the sequences 0..n-1 in their order, so the 32-bit clock never wraps; the order of
 * every pair of entries, hence the heap shape, is unchanged. */
static int renumber(struct kvt__heap *h)
{
	uint64_t *t = malloc((h->n + 1) * sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < h->n; i++)
		t[i] = (h->e[i].tie & ~(uint64_t)UINT32_MAX) | i;
	qsort(t, h->n, sizeof(*t), cmp_u64);
	for (size_t r = 0; r < h->n; r++)
		h->e[(uint32_t)t[r]].tie = (uint64_t)r << 32 | (uint32_t)h->e[(uint32_t)t[r]].tie;
	h->clock = (uint32_t)h->n;
	free(t);
	return 0;
}

bool kvt__heap_has(const struct kvt__heap *h, uint32_t id)
{
	return id < h->pos_cap && h->pos[id];
}

double kvt__heap_key(const struct kvt__heap *h, uint32_t id)
{
	double k;
	memcpy(&k, &h->e[h->pos[id] - 1].key, sizeof(k));
	return k;
}

int kvt__heap_set(struct kvt__heap *h, uint32_t id, double key)
{
	if (id >= h->pos_cap) {
		size_t nc = kvt__pol_cap_for(h->pos_cap, id);
		if (kvt__pol_grow((void **)&h->pos, sizeof(*h->pos), h->pos_cap, nc))
			return -ENOMEM;
		h->pos_cap = nc;
	}
	if (h->clock == UINT32_MAX && renumber(h))
		return -ENOMEM;
	if (h->pos[id]) {
		size_t i = h->pos[id] - 1;
		uint64_t old = h->e[i].key;
		h->e[i].key = key_bits(key);
		h->e[i].tie = (uint64_t)h->clock++ << 32 | id;
		if (h->e[i].key < old)
			sift_up(h, i);
		else
			sift_down(h, i);
		return 0;
	}
	if (h->n == h->cap && heap_grow(h))
		return -ENOMEM;
	struct kvt__hent x = {.tie = (uint64_t)h->clock++ << 32 | id, .key = key_bits(key)};
	place(h, h->n++, &x);
	sift_up(h, h->n - 1);
	return 0;
}

void kvt__heap_del(struct kvt__heap *h, uint32_t id)
{
	if (!kvt__heap_has(h, id))
		return;
	size_t i = h->pos[id] - 1;
	h->pos[id] = 0;
	h->n--;
	if (i == h->n)
		return;
	struct kvt__hent last = h->e[h->n];
	place(h, i, &last);
	if (i > 0 && ent_less(&last, &h->e[(i - 1) / ARY]))
		sift_up(h, i);
	else
		sift_down(h, i);
}

uint32_t kvt__heap_min(const struct kvt__heap *h)
{
	return h->n ? (uint32_t)h->e[0].tie : KVT__NIL;
}

/* aux is a min-heap of heap positions, compared by the entries they hold. */
static bool aux_less(const void *ctx, const void *a, const void *b)
{
	const struct kvt__heap *h = ctx;
	return ent_less(&h->e[*(const uint32_t *)a], &h->e[*(const uint32_t *)b]);
}

static int aux_push(struct kvt__heap *h, size_t *n, uint32_t v)
{
	return kvt__bheap_push((void **)&h->aux, &h->aux_cap, n, sizeof(v), &v, aux_less, h);
}

static uint32_t aux_pop(struct kvt__heap *h, size_t *n)
{
	uint32_t top;
	kvt__bheap_pop(h->aux, n, sizeof(top), &top, aux_less, h);
	return top;
}

void kvt__heap_walk_start(struct kvt__heap *h)
{
	h->walk_n = 0;
	if (h->n && aux_push(h, &h->walk_n, 0))
		h->walk_n = 0;
}

uint32_t kvt__heap_walk_next(struct kvt__heap *h)
{
	if (!h->walk_n)
		return KVT__NIL;
	uint32_t i = aux_pop(h, &h->walk_n);
	for (uint32_t c = ARY * i + 1; c <= ARY * i + ARY; c++)
		if (c < h->n && aux_push(h, &h->walk_n, c)) {
			h->walk_n = 0; /* a child lost: the walk ends after this id */
			break;
		}
	return (uint32_t)h->e[i].tie;
}

size_t kvt__heap_walk(struct kvt__heap *h, uint32_t *out, size_t max, kvt_policy_evictable_fn ok,
                      void *arg)
{
	size_t got = 0;
	if (!h->n || !max)
		return 0;
	if (!ok && max == 1) {
		out[0] = (uint32_t)h->e[0].tie;
		return 1;
	}
	kvt__heap_walk_start(h);
	for (uint32_t id; got < max && (id = kvt__heap_walk_next(h)) != KVT__NIL;)
		if (!ok || ok(arg, id))
			out[got++] = id;
	kvt__heap_walk_stop(h);
	return got;
}
