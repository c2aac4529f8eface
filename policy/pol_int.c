/*
 * pol_int.c -- the helpers of pol_int.h. The heap keeps pos[id] + 1 so that a zeroed array
 * means "absent"; its non-destructive walk is a best-first search over heap positions with a
 * second small heap (aux), O(k log k) for k proposals. The hash set uses linear probing with
 * tombstones and rebuilds itself when tombstones pile up.
 */
#include "pol_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int kvt__pol_grow(void **arr, size_t elem, size_t old_n, size_t new_n)
{
	if (new_n <= old_n)
		return 0;
	void *p = realloc(*arr, new_n * elem);
	if (!p)
		return -ENOMEM;
	memset((char *)p + old_n * elem, 0, (new_n - old_n) * elem);
	*arr = p;
	return 0;
}

size_t kvt__pol_cap_for(size_t cur, uint32_t id)
{
	size_t cap = cur ? cur : 1024;
	while (cap <= id)
		cap *= 2;
	return cap;
}

void kvt__list_init(struct kvt__list *l)
{
	l->head = l->tail = KVT__NIL;
	l->n = 0;
}

void kvt__list_push_head(struct kvt__list *l, uint32_t *prev, uint32_t *next, uint32_t id)
{
	prev[id] = KVT__NIL;
	next[id] = l->head;
	if (l->head != KVT__NIL)
		prev[l->head] = id;
	l->head = id;
	if (l->tail == KVT__NIL)
		l->tail = id;
	l->n++;
}

void kvt__list_unlink(struct kvt__list *l, uint32_t *prev, uint32_t *next, uint32_t id)
{
	uint32_t pr = prev[id], nx = next[id];
	if (pr != KVT__NIL)
		next[pr] = nx;
	else
		l->head = nx;
	if (nx != KVT__NIL)
		prev[nx] = pr;
	else
		l->tail = pr;
	l->n--;
}

/* ---- heap ---- */

void kvt__heap_init(struct kvt__heap *h)
{
	memset(h, 0, sizeof(*h));
}

void kvt__heap_free(struct kvt__heap *h)
{
	free(h->e);
	free(h->pos);
	free(h->aux);
	memset(h, 0, sizeof(*h));
}

static inline bool ent_less(const struct kvt__hent *a, const struct kvt__hent *b)
{
	return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

static inline void place(struct kvt__heap *h, size_t i, const struct kvt__hent *x)
{
	h->e[i] = *x;
	h->pos[x->id] = (uint32_t)i + 1;
}

static void sift_up(struct kvt__heap *h, size_t i)
{
	struct kvt__hent x = h->e[i];
	while (i > 0) {
		size_t pa = (i - 1) / 2;
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
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && ent_less(&h->e[c + 1], &h->e[c]))
			c++;
		if (!ent_less(&h->e[c], &x))
			break;
		place(h, i, &h->e[c]);
		i = c;
	}
	place(h, i, &x);
}

bool kvt__heap_has(const struct kvt__heap *h, uint32_t id)
{
	return id < h->pos_cap && h->pos[id];
}

double kvt__heap_key(const struct kvt__heap *h, uint32_t id)
{
	return h->e[h->pos[id] - 1].key;
}

int kvt__heap_set(struct kvt__heap *h, uint32_t id, double key)
{
	if (id >= h->pos_cap) {
		size_t nc = kvt__pol_cap_for(h->pos_cap, id);
		if (kvt__pol_grow((void **)&h->pos, sizeof(*h->pos), h->pos_cap, nc))
			return -ENOMEM;
		h->pos_cap = nc;
	}
	if (h->pos[id]) {
		size_t i = h->pos[id] - 1;
		double old = h->e[i].key;
		h->e[i].key = key;
		h->e[i].seq = h->clock++;
		if (key < old)
			sift_up(h, i);
		else
			sift_down(h, i);
		return 0;
	}
	if (h->n == h->cap) {
		size_t nc = h->cap ? h->cap * 2 : 1024;
		if (kvt__pol_grow((void **)&h->e, sizeof(*h->e), h->cap, nc))
			return -ENOMEM;
		h->cap = nc;
	}
	struct kvt__hent x = {key, h->clock++, id};
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
	if (i > 0 && ent_less(&last, &h->e[(i - 1) / 2]))
		sift_up(h, i);
	else
		sift_down(h, i);
}

uint32_t kvt__heap_min(const struct kvt__heap *h)
{
	return h->n ? h->e[0].id : KVT__NIL;
}

/* aux is a min-heap of heap positions, compared by the entries they hold. */
static bool aux_less(const struct kvt__heap *h, uint32_t a, uint32_t b)
{
	return ent_less(&h->e[a], &h->e[b]);
}

static int aux_push(struct kvt__heap *h, size_t *n, uint32_t v)
{
	if (*n == h->aux_cap) {
		size_t nc = h->aux_cap ? h->aux_cap * 2 : 64;
		if (kvt__pol_grow((void **)&h->aux, sizeof(*h->aux), h->aux_cap, nc))
			return -ENOMEM;
		h->aux_cap = nc;
	}
	size_t i = (*n)++;
	while (i > 0 && aux_less(h, v, h->aux[(i - 1) / 2])) {
		h->aux[i] = h->aux[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->aux[i] = v;
	return 0;
}

static uint32_t aux_pop(struct kvt__heap *h, size_t *n)
{
	uint32_t top = h->aux[0], v = h->aux[--(*n)];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && aux_less(h, h->aux[c + 1], h->aux[c]))
			c++;
		if (!aux_less(h, h->aux[c], v))
			break;
		h->aux[i] = h->aux[c];
		i = c;
	}
	if (*n)
		h->aux[i] = v;
	return top;
}

size_t kvt__heap_walk(struct kvt__heap *h, uint32_t *out, size_t max, kvt_policy_evictable_fn ok,
                      void *arg)
{
	size_t got = 0, an = 0;
	if (!h->n || !max)
		return 0;
	if (!ok && max == 1) {
		out[0] = h->e[0].id;
		return 1;
	}
	if (aux_push(h, &an, 0))
		return 0;
	while (an && got < max) {
		uint32_t i = aux_pop(h, &an);
		uint32_t id = h->e[i].id;
		if (!ok || ok(arg, id))
			out[got++] = id;
		for (uint32_t c = 2 * i + 1; c <= 2 * i + 2; c++)
			if (c < h->n && aux_push(h, &an, c))
				return got;
	}
	return got;
}

/* ---- hash set ---- */

#define TOMB 1ULL /* 0 = empty, 1 = deleted; real keys are remapped away from both */

static inline uint64_t fix_key(uint64_t k)
{
	return k < 2 ? k + 2 : k;
}

int kvt__hset_init(struct kvt__hset *s, size_t expect)
{
	size_t cap = 64;
	while (cap < expect * 4)
		cap *= 2;
	memset(s, 0, sizeof(*s));
	s->slots = calloc(cap, sizeof(*s->slots));
	if (!s->slots)
		return -ENOMEM;
	s->cap = cap;
	return 0;
}

void kvt__hset_free(struct kvt__hset *s)
{
	free(s->slots);
	memset(s, 0, sizeof(*s));
}

static size_t find_slot(const struct kvt__hset *s, uint64_t k)
{
	size_t mask = s->cap - 1, i = kvt__mix64(k) & mask;
	while (s->slots[i].key && s->slots[i].key != k)
		i = (i + 1) & mask;
	return i;
}

uint32_t kvt__hset_get(const struct kvt__hset *s, uint64_t k)
{
	if (!s->cap)
		return KVT__NIL;
	size_t i = find_slot(s, fix_key(k));
	return s->slots[i].key ? s->slots[i].val : KVT__NIL;
}

static int rehash(struct kvt__hset *s, size_t cap)
{
	struct kvt__hset t;
	if (kvt__hset_init(&t, cap / 4)) /* exactly cap slots */
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++)
		if (s->slots[i].key > TOMB) {
			t.slots[find_slot(&t, s->slots[i].key)] = s->slots[i];
			t.n++;
		}
	kvt__hset_free(s);
	*s = t;
	return 0;
}

int kvt__hset_put(struct kvt__hset *s, uint64_t k, uint32_t v)
{
	k = fix_key(k);
	/* linear probing stays short below half load; tombstones count as load */
	if ((s->n + s->tomb + 1) * 2 > s->cap &&
	    rehash(s, (s->n + 1) * 4 > s->cap ? s->cap * 2 : s->cap))
		return -ENOMEM;
	size_t mask = s->cap - 1, i = kvt__mix64(k) & mask, t = SIZE_MAX;
	while (s->slots[i].key && s->slots[i].key != k) {
		if (s->slots[i].key == TOMB && t == SIZE_MAX)
			t = i;
		i = (i + 1) & mask;
	}
	int fresh = !s->slots[i].key;
	if (fresh) {
		if (t != SIZE_MAX) {
			i = t;
			s->tomb--;
		}
		s->slots[i].key = k;
		s->n++;
	}
	s->slots[i].val = v;
	return fresh;
}

void kvt__hset_del(struct kvt__hset *s, uint64_t k)
{
	if (!s->cap)
		return;
	size_t i = find_slot(s, fix_key(k));
	if (!s->slots[i].key)
		return;
	s->slots[i].key = TOMB;
	s->n--;
	s->tomb++;
}

bool kvt__hset_del_if(struct kvt__hset *s, uint64_t k, uint32_t v)
{
	if (!s->cap)
		return false;
	size_t i = find_slot(s, fix_key(k));
	if (!s->slots[i].key || s->slots[i].val != v)
		return false;
	s->slots[i].key = TOMB;
	s->n--;
	s->tomb++;
	return true;
}

/* ---- ghost FIFO ---- */

int kvt__ghost_init(struct kvt__ghost *g, size_t expect)
{
	memset(g, 0, sizeof(*g));
	g->cap = 64;
	while (g->cap < expect)
		g->cap *= 2;
	g->ring = malloc(g->cap * sizeof(*g->ring));
	if (!g->ring || kvt__hset_init(&g->set, expect)) {
		free(g->ring);
		return -ENOMEM;
	}
	return 0;
}

void kvt__ghost_free(struct kvt__ghost *g)
{
	kvt__hset_free(&g->set);
	free(g->ring);
	memset(g, 0, sizeof(*g));
}

bool kvt__ghost_has(const struct kvt__ghost *g, uint64_t h)
{
	return kvt__hset_get(&g->set, h) != KVT__NIL;
}

static bool slot_live(const struct kvt__ghost *g, uint64_t seq)
{
	return kvt__hset_get(&g->set, g->ring[seq % g->cap]) == (uint32_t)seq;
}

int kvt__ghost_add(struct kvt__ghost *g, uint64_t h)
{
	if (g->tail - g->head == g->cap) {
		/* drop stale slots first; grow only when the ring is really full of live ghosts */
		while (g->head < g->tail && !slot_live(g, g->head))
			g->head++;
		if (g->tail - g->head == g->cap) {
			uint64_t *r = malloc(2 * g->cap * sizeof(*r));
			if (!r)
				return -ENOMEM;
			for (uint64_t s = g->head; s < g->tail; s++)
				r[s % (2 * g->cap)] = g->ring[s % g->cap];
			free(g->ring);
			g->ring = r;
			g->cap *= 2;
		}
	}
	uint64_t seq = g->tail++;
	g->ring[seq % g->cap] = h;
	int fresh = kvt__hset_put(&g->set, h, (uint32_t)seq); /* an old slot of h goes stale */
	if (fresh < 0) {
		g->tail--;
		return -ENOMEM;
	}
	g->n += (size_t)fresh;
	return 0;
}

void kvt__ghost_del(struct kvt__ghost *g, uint64_t h)
{
	if (!kvt__ghost_has(g, h))
		return;
	kvt__hset_del(&g->set, h);
	g->n--;
}

void kvt__ghost_trim(struct kvt__ghost *g, size_t limit)
{
	while (g->n > limit && g->head < g->tail) {
		uint64_t s = g->head++;
		if (kvt__hset_del_if(&g->set, g->ring[s % g->cap], (uint32_t)s))
			g->n--;
	}
}

int kvt__param_double(const char *value, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(value, &end);
	if (end == value || *end || isnan(v) || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

static const uint64_t *sort_key; /* qsort has no context argument; policies are single-owner */

static int cmp_ids(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (sort_key[x] != sort_key[y])
		return sort_key[x] < sort_key[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

void kvt__sort_ids_by(uint32_t *ids, size_t n, const uint64_t *key)
{
	sort_key = key;
	qsort(ids, n, sizeof(*ids), cmp_ids);
}
