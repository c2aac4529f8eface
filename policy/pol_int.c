/*
 * pol_int.c -- the helpers of pol_int.h but the heap (heap.c) and the ghost FIFO (ghost.c):
 * arrays grown zeroed, the resident set and its sampling, the hash set (linear probing with
 * tombstones, rebuilt when they pile up), parameter tables, sorting ids by a key, and the
 * quotas' parking lists.
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
