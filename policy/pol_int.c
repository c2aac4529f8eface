/*
 * pol_int.c -- the helpers of pol_int.h. The heap keeps pos[id] + 1 so that a zeroed array
 * means "absent"; it is 4-ary (shallower than binary; a node's children share a cache line);
 * its non-destructive walk is a best-first search over heap positions with a second small heap
 * (aux), O(k log k) for k proposals. The hash set uses linear probing with tombstones and
 * rebuilds itself when tombstones pile up; the ghost table has no tombstones (backward shift).
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
	if (!*arr) { /* the first: calloc's fresh pages are zero untouched, so a policy built for a
		      * large tier holds memory only as its ids come */
		*arr = calloc(new_n, elem);
		return *arr ? 0 : -ENOMEM;
	}
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

int kvt__cols_grow(const struct kvt__col *c, size_t n, size_t *cap, uint32_t id)
{
	if (id < *cap)
		return 0;
	size_t nc = kvt__pol_cap_for(*cap, id);
	for (size_t i = 0; i < n; i++)
		if (kvt__pol_grow(c[i].arr, c[i].elem, *cap, nc))
			return -ENOMEM; /* grown columns stay valid at their new size */
	*cap = nc;
	return 0;
}

size_t kvt__cols_bytes(const struct kvt__col *c, size_t n, size_t cap)
{
	size_t b = 0;
	for (size_t i = 0; i < n; i++)
		b += c[i].elem * cap;
	return b;
}

void kvt__cols_free(const struct kvt__col *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(*c[i].arr);
		*c[i].arr = NULL;
	}
}

/* ---- resident set ---- */

size_t kvt__res_bytes(const struct kvt__res *r)
{
	return r->cap * sizeof(*r->ids);
}

int kvt__res_add(struct kvt__res *r, uint32_t *slot, uint32_t id)
{
	if (r->n == r->cap) {
		size_t nc = r->cap ? r->cap * 2 : 1024;
		if (kvt__pol_grow((void **)&r->ids, sizeof(*r->ids), r->cap, nc))
			return -ENOMEM;
		r->cap = nc;
	}
	slot[id] = (uint32_t)r->n;
	r->ids[r->n++] = id;
	return 0;
}

void kvt__res_del(struct kvt__res *r, uint32_t *slot, uint32_t id)
{
	uint32_t s = slot[id], moved = r->ids[--r->n];
	r->ids[s] = moved;
	slot[moved] = s;
}

size_t kvt__res_export(const struct kvt__res *r, const uint64_t *key, uint32_t *out, size_t max)
{
	size_t n = r->n < max ? r->n : max;
	if (!n) /* ids is NULL until the first entry */
		return 0;
	uint32_t *tmp = malloc((r->n + 1) * sizeof(*tmp));
	if (!tmp)
		return 0;
	memcpy(tmp, r->ids, r->n * sizeof(*tmp));
	kvt__sort_ids_by(tmp, r->n, key);
	memcpy(out, tmp, n * sizeof(*out));
	free(tmp);
	return n;
}

/* Whether id, of score s, loses to best (of score bs): a higher score, or the same and used
 * no earlier. */
static bool sample_loses(const uint64_t *last, uint32_t id, float s, uint32_t best, float bs)
{
	return best != KVT__NIL && (s > bs || (s == bs && last[id] >= last[best]));
}

size_t kvt__sample_victims(const struct kvt__res *r, uint64_t *rng, unsigned samples,
                           kvt__score_fn score, const void *p, const uint64_t *last, uint32_t *out,
                           size_t max, kvt_policy_evictable_fn ok, void *arg)
{
	size_t n = 0;
	for (size_t round = 0; n < max && r->n && round < 4 * max + 8; round++) {
		uint32_t best = KVT__NIL;
		float bs = 0;
		for (unsigned k = 0; k < samples; k++) {
			uint32_t id = r->ids[kvt__xorshift(rng) % r->n];
			float s = score(p, id);
			if (kvt__proposed(out, n, id) || sample_loses(last, id, s, best, bs))
				continue;
			if (ok && !ok(arg, id))
				continue;
			best = id;
			bs = s;
		}
		if (best != KVT__NIL)
			out[n++] = best;
	}
	if (n || !ok)
		return n;
	/* A filter that takes few residents (a quota's: one tenant, above its guarantee) can
	 * miss them in every round; then one look at every resident finds the best it takes, so
	 * that none comes back only when no resident may go. */
	uint32_t best = KVT__NIL;
	float bs = 0;
	for (size_t i = 0; i < r->n; i++) {
		uint32_t id = r->ids[i];
		float s = score(p, id);
		if (!sample_loses(last, id, s, best, bs) && ok(arg, id))
			best = id, bs = s;
	}
	if (best != KVT__NIL)
		out[n++] = best;
	return n;
}

/* ---- heap ---- */

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

#ifndef GHOST_SPARSE
#define GHOST_SPARSE 8 /* table slots per live ghost after a rebuild */
#endif

#define ghost_fp kvt__ghost_fp

static inline bool seq_live(const struct kvt__ghost *g, uint64_t slot)
{
	return (uint32_t)((uint32_t)slot - (uint32_t)g->head) < (uint32_t)(g->tail - g->head);
}

/* Rebuilds the table at cap slots with its live entries only (expired ones are dropped here,
 * not when they expire, so that trimming touches the ring alone). */
static int ghost_table(struct kvt__ghost *g, size_t cap)
{
	uint64_t *t = calloc(cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	uint64_t *old = g->slots;
	size_t old_cap = g->cap;
	g->slots = t;
	g->cap = cap;
	g->occ = 0;
	for (size_t i = 0; i < old_cap; i++) {
		if (!old[i] || !seq_live(g, old[i]))
			continue;
		size_t j = (old[i] >> 32) & (cap - 1);
		while (t[j])
			j = (j + 1) & (cap - 1);
		t[j] = old[i];
		g->occ++;
	}
	free(old);
	return 0;
}

int kvt__ghost_init(struct kvt__ghost *g, size_t expect)
{
	memset(g, 0, sizeof(*g));
	g->rcap = 64;
	while (g->rcap < expect)
		g->rcap *= 2;
	g->ring = malloc(g->rcap * sizeof(*g->ring));
	if (!g->ring || ghost_table(g, GHOST_SPARSE * g->rcap)) {
		free(g->ring);
		return -ENOMEM;
	}
	return 0;
}

size_t kvt__ghost_bytes(const struct kvt__ghost *g)
{
	return g->cap * sizeof(*g->slots) + g->rcap * sizeof(*g->ring);
}

void kvt__ghost_free(struct kvt__ghost *g)
{
	free(g->slots);
	free(g->ring);
	memset(g, 0, sizeof(*g));
}

/* @return : the slot of fingerprint fp, live or expired, or SIZE_MAX. */
static size_t ghost_find(const struct kvt__ghost *g, uint32_t fp)
{
	size_t mask = g->cap - 1;
	for (size_t i = fp & mask; g->slots[i]; i = (i + 1) & mask)
		if ((uint32_t)(g->slots[i] >> 32) == fp)
			return i;
	return SIZE_MAX;
}

/* Empties slot i, shifting back later members of its probe run (Knuth's algorithm R). */
static void ghost_erase(struct kvt__ghost *g, size_t i)
{
	size_t mask = g->cap - 1;
	for (size_t j = (i + 1) & mask; g->slots[j]; j = (j + 1) & mask) {
		size_t home = (g->slots[j] >> 32) & mask;
		/* j's entry may move to i when i lies cyclically within [home, j) */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			g->slots[i] = g->slots[j];
			i = j;
		}
	}
	g->slots[i] = 0;
	g->occ--;
}

bool kvt__ghost_has(const struct kvt__ghost *g, uint64_t h)
{
	size_t i = ghost_find(g, ghost_fp(h));
	return i != SIZE_MAX && seq_live(g, g->slots[i]);
}

static int ghost_grow_ring(struct kvt__ghost *g)
{
	uint32_t *r = malloc(2 * g->rcap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (uint64_t s = g->head; s < g->tail; s++)
		r[s & (2 * g->rcap - 1)] = g->ring[s & (g->rcap - 1)];
	free(g->ring);
	g->ring = r;
	g->rcap *= 2;
	return 0;
}

int kvt__ghost_add(struct kvt__ghost *g, uint64_t h)
{
	if (g->tail - g->head == g->rcap) {
		/* drop stale slots first; grow only when the ring is really full of live ghosts */
		while (g->head < g->tail && !g->ring[g->head & (g->rcap - 1)])
			g->head++;
		if (g->tail - g->head == g->rcap && ghost_grow_ring(g))
			return -ENOMEM;
	}
	if ((g->occ + 1) * 2 > g->cap) {
		size_t cap = g->cap;
		while (cap < GHOST_SPARSE * (g->n + 1))
			cap *= 2;
		if (ghost_table(g, cap))
			return -ENOMEM;
	}
	uint32_t fp = ghost_fp(h);
	size_t mask = g->cap - 1, i = fp & mask;
	while (g->slots[i] && (uint32_t)(g->slots[i] >> 32) != fp)
		i = (i + 1) & mask;
	if (!g->slots[i])
		g->occ++;
	if (g->slots[i] && seq_live(g, g->slots[i]))
		g->ring[(uint32_t)g->slots[i] & (g->rcap - 1)] = 0; /* its old place goes stale */
	else
		g->n++;
	uint64_t seq = g->tail++;
	g->ring[seq & (g->rcap - 1)] = fp;
	g->slots[i] = (uint64_t)fp << 32 | (uint32_t)seq;
	return 0;
}

void kvt__ghost_del(struct kvt__ghost *g, uint64_t h)
{
	size_t i = ghost_find(g, ghost_fp(h));
	if (i == SIZE_MAX || !seq_live(g, g->slots[i]))
		return;
	g->ring[(uint32_t)g->slots[i] & (g->rcap - 1)] = 0;
	ghost_erase(g, i);
	g->n--;
}

void kvt__ghost_trim(struct kvt__ghost *g, size_t limit)
{
	while (g->n > limit && g->head < g->tail)
		if (g->ring[g->head++ & (g->rcap - 1)])
			g->n--; /* its table entry is expired from now on */
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

int kvt__param_set(void *p, const struct kvt__param *tab, size_t n, const char *name,
                   const char *value)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(tab[i].name, name))
			continue;
		double v;
		if (kvt__param_double(value, tab[i].lo, tab[i].hi, &v))
			return -EINVAL;
		void *f = (char *)p + tab[i].off;
		switch (tab[i].type) {
		case KVT__P_FLOAT:
			*(float *)f = (float)v;
			break;
		case KVT__P_UNSIGNED:
			*(unsigned *)f = (unsigned)v;
			break;
		case KVT__P_BOOL:
			*(bool *)f = v != 0;
			break;
		default:
			*(double *)f = v;
			break;
		}
		return 0;
	}
	return -ENOENT;
}

int kvt__param_get(const void *p, const struct kvt__param *tab, size_t n, size_t i,
                   struct kvt_policy_param *out)
{
	if (i >= n)
		return -ENOENT;
	const void *f = (const char *)p + tab[i].off;
	double v;
	switch (tab[i].type) {
	case KVT__P_FLOAT:
		v = *(const float *)f;
		break;
	case KVT__P_UNSIGNED:
		v = *(const unsigned *)f;
		break;
	case KVT__P_BOOL:
		v = *(const bool *)f;
		break;
	default:
		v = *(const double *)f;
		break;
	}
	*out = (struct kvt_policy_param){tab[i].name, v, tab[i].lo, tab[i].hi};
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

/* ---- parking (quotas) ---- */

void kvt__park_del(struct kvt__park *k, struct kvt__link *lk, uint32_t id)
{
	kvt__list_unlink(&k->lists[k->tenant1[id] - 1], lk, id);
	k->tenant1[id] = 0;
	k->n--;
}

void kvt__park_free(struct kvt__park *k)
{
	free(k->tenant1);
	free(k->seq);
	free(k->lists);
	memset(k, 0, sizeof(*k));
}

size_t kvt__park_bytes(const struct kvt__park *k)
{
	return k->cap * (sizeof(*k->tenant1) + sizeof(*k->seq)) + k->n_lists * sizeof(*k->lists);
}

#ifndef KVT__PARK_CLOCK_MAX /* a build may lower it to test renumbering */
#define KVT__PARK_CLOCK_MAX UINT32_MAX
#endif

/* Gives the parked entries 1..n in their order, once the clock is about to wrap. */
static int park_renumber(struct kvt__park *k, const struct kvt__link *lk)
{
	uint32_t *c = malloc((k->n_lists ? k->n_lists : 1) * sizeof(*c)), t;
	if (!c)
		return -ENOMEM;
	for (t = 0; t < k->n_lists; t++)
		c[t] = k->lists[t].tail;
	k->clock = 0;
	while ((t = kvt__park_first(k->seq, c, k->n_lists)) != KVT__NIL) {
		uint32_t id = c[t];
		c[t] = lk[id].prev;
		k->seq[id] = ++k->clock;
	}
	free(c);
	return 0;
}

/* Moves id from l's tail end to tenant t's parked list. @return : 0, -EINVAL (t too large),
 * -ENOMEM (id stays). */
static int park(struct kvt__park *k, struct kvt__list *l, struct kvt__link *lk, uint8_t *mark,
                uint8_t bit, size_t cap, uint32_t id, uint32_t t)
{
	if (t >= UINT16_MAX)
		return -EINVAL;
	if (k->clock >= KVT__PARK_CLOCK_MAX && park_renumber(k, lk))
		return -ENOMEM;
	if (k->cap < cap) {
		if (kvt__pol_grow((void **)&k->tenant1, sizeof(*k->tenant1), k->cap, cap) ||
		    kvt__pol_grow((void **)&k->seq, sizeof(*k->seq), k->cap, cap))
			return -ENOMEM;
		k->cap = cap;
	}
	if (t >= k->n_lists) {
		size_t n = t + 1 > 2 * k->n_lists ? t + 1 : 2 * k->n_lists;
		struct kvt__list *ls = realloc(k->lists, n * sizeof(*ls));
		if (!ls)
			return -ENOMEM;
		for (size_t i = k->n_lists; i < n; i++)
			kvt__list_init(&ls[i]);
		k->lists = ls, k->n_lists = n;
	}
	kvt__list_unlink(l, lk, id);
	kvt__list_push_head(&k->lists[t], lk, id);
	k->tenant1[id] = (uint16_t)(t + 1);
	k->seq[id] = ++k->clock;
	mark[id] |= bit;
	k->n++;
	return 0;
}

size_t kvt__park_walk_all(const struct kvt__park *k, const struct kvt__link *lk, uint32_t *out,
                          size_t n, size_t max, kvt_policy_evictable_fn ok,
                          bool (*open)(void *, uint32_t), void *arg)
{
	uint32_t cur[64], *c = k->n_lists <= 64 ? cur : malloc(k->n_lists * sizeof(*c));
	if (!c)
		return n; /* no memory: the parked entries are not offered this time */
	for (size_t t = 0; t < k->n_lists; t++)
		c[t] = k->lists[t].tail;
	while (n < max) {
		uint32_t best = kvt__park_first(k->seq, c, k->n_lists);
		if (best == KVT__NIL)
			break;
		uint32_t id = c[best];
		if (open && !open(arg, best)) {
			c[best] = KVT__NIL; /* closed for the rest of this walk */
			continue;
		}
		c[best] = lk[id].prev;
		if (!ok || ok(arg, id))
			out[n++] = id;
	}
	if (c != cur)
		free(c);
	return n;
}

size_t kvt__list_walk_tenants(struct kvt__list *l, struct kvt__park *k, struct kvt__link *lk,
                              uint8_t *mark, uint8_t bit, size_t cap, uint32_t *out, size_t n,
                              size_t max, kvt_policy_evictable_fn ok,
                              uint32_t (*tenant_of)(void *, uint32_t),
                              bool (*open)(void *, uint32_t), void *arg)
{
	n = kvt__park_walk(k, lk, out, n, max, ok, open, arg);
	bool tail = true;
	for (uint32_t id = l->tail; id != KVT__NIL && n < max;) {
		uint32_t prev = lk[id].prev, t = tenant_of(arg, id);
		if (!open(arg, t)) {
			tail = tail && !park(k, l, lk, mark, bit, cap, id, t);
		} else {
			tail = false;
			if (!ok || ok(arg, id))
				out[n++] = id;
		}
		id = prev;
	}
	return n;
}
