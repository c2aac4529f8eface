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
 *
 * Quotas (pick_victims_tenants). As lru.c sets aside the entries of a tenant that may lose
 * nothing (pol_int.h, "Parking"), a tenant-aware walk moves the heap's minimum, while it comes
 * next and its tenant is refused, into a side heap of that tenant's ("parked"): the same 4-ary
 * heap of (key, seq, id), made current first. lru's invariant (parked entries before listed
 * ones) does not hold: a new entry's key L + cost / size may be below a parked key. Nothing
 * relies on it: a parked entry is always current (a hit or a re-insert takes it back to the main
 * heap, a removal leaves garbage told apart as in the main heap), so every walk merges the side
 * heaps of the tenants it may take from into its best-first merge (their frontier in sf), and the
 * order is the one without parking; the minimum that sets L is looked for among their tops too.
 * The main heap keeps room for every parked entry (taking one back never allocates) and
 * renumbering first takes them all back. Once something is parked: 2 bytes an id (its tenant),
 * and per tenant with parked entries a heap of 16 bytes an entry.
 *
 * An entry the engine is done with (on_done, kvt_done) leaves the heap for a list d, proposed
 * before every heap entry, first told first out, and never parked: its hseq becomes TOLD, a seq
 * no entry carries, so its heap entry is garbage like a removed id's. A hit takes it back into
 * the heap with its count one higher, as any hit; its removal leaves L where it was (its fate
 * was told, not observed).
 */
#include "pol_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef KVT__GDSF_CLOCK_MAX /* a build may lower it to test renumbering */
#define KVT__GDSF_CLOCK_MAX UINT32_MAX
#endif

/* hseq of an id on d: next_seq renumbers at KVT__GDSF_CLOCK_MAX, so no seq reaches it */
#define TOLD UINT32_MAX

struct gent {
	uint64_t tie; /* seq << 32 | id */
	uint64_t key; /* the bits of the key (positive doubles order like their bits) */
};

struct gid {
	uint64_t key;   /* current key bits */
	uint32_t seq;   /* current seq */
	uint32_t hseq;  /* seq of the id's valid heap entry; TOLD: none, the id is on d */
	uint32_t count; /* 0 = not resident */
	float value;    /* cost / size */
};

/* A tenant's parked entries: a heap like the main one, current entries and garbage. */
struct side {
	struct gent *e;
	size_t n, cap, garbage;
};

/* An entry of the side heaps' frontier in a walk: side heap t's entry at position i, copied
 * (side heap t may change during the walk once its tenant is refused: parking). */
struct cand {
	struct gent x;
	uint32_t t, i;
};

struct kvt_policy {
	struct gent *e;  /* heap, n used (e[0] unused while hole); from e - 3 (see heap_grow) */
	struct gid *ids; /* per id, cap */
	struct kvt__link *lk; /* per id, cap: links of d */
	struct kvt__list d;   /* told done: proposed first, in the order told */
	struct gent *pend;
	uint32_t *front;
	size_t n, hcap, cap, live, garbage, pend_cap, front_cap;
	bool hole;
	uint32_t clock;
	double L, exponent;
	/* set aside by tenant-aware walks (quotas); NULL until the first. The main heap has room
	 * for its entries and the parked ones: n - hole + n_parked <= hcap. */
	size_t n_parked;
	struct side *side; /* side[t]: tenant t's */
	size_t n_side;
	struct cand *sf; /* a walk's frontier of the side heaps */
	size_t sf_cap;
	uint16_t *ptenant1; /* per id: its tenant + 1 while parked */
	size_t pcap;
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

static inline bool is_told(const struct kvt_policy *p, uint32_t id)
{
	return p->ids[id].count && p->ids[id].hseq == TOLD;
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

static bool is_parked(const struct kvt_policy *p, uint32_t id)
{
	return __builtin_expect(p->n_parked != 0, 0) && id < p->pcap && p->ptenant1[id];
}

/* Puts every parked entry back in the main heap (room is kept for them); heap order is left to
 * the caller (compact). */
static void unpark_all(struct kvt_policy *p)
{
	fill_hole(p);
	for (size_t t = 0; t < p->n_side; t++) {
		struct side *s = &p->side[t];
		for (size_t i = 0; i < s->n; i++)
			if (valid(p, &s->e[i])) {
				p->ptenant1[ent_id(&s->e[i])] = 0;
				p->e[p->n++] = s->e[i];
			}
		s->n = s->garbage = 0;
	}
	p->n_parked = 0;
}

/* Renumbers the seqs 0..live-1 in their order, so the 32-bit clock never wraps; the order of
 * every pair of ids is unchanged. */
static void renumber(struct kvt_policy *p)
{
	if (p->n_parked)
		unpark_all(p);
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

/* Drops side heap s's garbage from its top. */
static void side_fix_top(struct kvt_policy *p, struct side *s)
{
	while (s->n && !valid(p, &s->e[0])) {
		s->garbage--;
		if (--s->n)
			sift_down(s->e, s->n, 0, s->e[s->n]);
	}
}

/* Takes parked id off its side heap (its entry there becomes garbage). */
static void side_drop(struct kvt_policy *p, uint32_t id)
{
	struct side *s = &p->side[p->ptenant1[id] - 1];
	p->ptenant1[id] = 0;
	s->garbage++;
	if (!--p->n_parked) { /* nothing parked: all the side heaps hold is garbage */
		for (size_t t = 0; t < p->n_side; t++)
			p->side[t].n = p->side[t].garbage = 0;
		return;
	}
	if (s->garbage > s->n - s->garbage && s->garbage > 64) {
		size_t m = 0;
		for (size_t i = 0; i < s->n; i++)
			if (valid(p, &s->e[i]))
				s->e[m++] = s->e[i];
		s->n = m;
		s->garbage = 0;
		heapify(s->e, s->n);
	}
}

/* Parked id, hit (its seq is new), goes back to the main heap at its current value. */
static void unpark(struct kvt_policy *p, uint32_t id)
{
	side_drop(p, id);
	p->ids[id].hseq = p->ids[id].seq;
	if (p->hole) {
		p->hole = false;
		sift_down(p->e, p->n, 0, cur_ent(p, id));
	} else { /* room: n + the parked ones, this one included, fit in hcap */
		p->e[p->n] = cur_ent(p, id);
		sift_up(p->e, p->n++);
	}
}

/* Whether live id is the minimum of all, parked entries included (main's top current). */
static bool is_min(struct kvt_policy *p, uint32_t id)
{
	if (__builtin_expect(!p->n_parked, 1))
		return ent_id(&p->e[0]) == id;
	const struct gent *m = p->n ? &p->e[0] : NULL;
	for (size_t t = 0; t < p->n_side; t++) {
		struct side *s = &p->side[t];
		side_fix_top(p, s);
		if (s->n && (!m || ent_less(&s->e[0], m)))
			m = &s->e[0];
	}
	return m && ent_id(m) == id;
}

/* Moves the main heap's minimum (current) to tenant t's side heap, leaving a hole.
 * @return : 0, -EINVAL (t too large), -ENOMEM (it stays). */
static int park(struct kvt_policy *p, uint32_t t)
{
	uint32_t id = ent_id(&p->e[0]);
	int rc = kvt__park_tenant_fit(&p->ptenant1, &p->pcap, p->cap, t);
	if (rc)
		return rc; /* -EINVAL: passed, not parked */
	if (t >= p->n_side) {
		if (kvt__pol_grow((void **)&p->side, sizeof(*p->side), p->n_side, t + 1))
			return -ENOMEM;
		p->n_side = t + 1;
	}
	struct side *s = &p->side[t];
	if (s->n == s->cap) {
		size_t nc = s->cap ? 2 * s->cap : 64;
		if (kvt__pol_grow((void **)&s->e, sizeof(*s->e), s->cap, nc))
			return -ENOMEM;
		s->cap = nc;
	}
	rise(s->e, s->n++, 0, p->e[0]);
	p->ptenant1[id] = (uint16_t)(t + 1);
	p->n_parked++;
	p->hole = true;
	return 0;
}

static void gdsf_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	free(p->e ? p->e - 3 : NULL);
	free(p->ids);
	free(p->lk);
	free(p->pend);
	free(p->front);
	for (size_t t = 0; t < p->n_side; t++)
		free(p->side[t].e);
	free(p->side);
	free(p->ptenant1);
	free(p->sf);
	free(p);
}

static int gdsf_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->exponent = 1.0;
	kvt__list_init(&p->d);
	*out = p;
	return 0;
}

/* Adds id's current entry to the heap (the caller made room). */
static void heap_add(struct kvt_policy *p, uint32_t id)
{
	if (p->hole) {
		p->hole = false;
		sift_down(p->e, p->n, 0, cur_ent(p, id));
	} else {
		p->e[p->n] = cur_ent(p, id);
		sift_up(p->e, p->n++);
	}
}

static bool heap_room(struct kvt_policy *p)
{
	return p->n - p->hole + p->n_parked < p->hcap || !heap_grow(p);
}

static void gdsf_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	if (id >= p->cap) {
		size_t nc = kvt__pol_cap_for(p->cap, id);
		if (kvt__pol_grow((void **)&p->lk, sizeof(*p->lk), p->cap, nc) ||
		    kvt__pol_grow((void **)&p->ids, sizeof(*p->ids), p->cap, nc))
			return;
		p->cap = nc;
	}
	if (!heap_room(p))
		return;
	uint32_t s = next_seq(p); /* first: renumbering reads every id's state */
	struct gid *g = &p->ids[id];
	if (g->count) { /* inserted again: the old entry becomes garbage */
		p->live--;
		if (is_told(p, id))
			kvt__list_unlink(&p->d, p->lk, id); /* its entry is garbage already */
		else if (is_parked(p, id))
			side_drop(p, id);
		else
			p->garbage++;
	}
	double d = (double)m->depth + 1.0;
	double cost = p->exponent == 1.0 ? d : pow(d, p->exponent); /* pow(d, 1) == d exactly */
	g->value = (float)(cost / (double)(m->bytes ? m->bytes : 1));
	g->key = key_bits(p->L + g->value);
	g->count = 1;
	g->seq = g->hseq = s;
	p->live++;
	heap_add(p, id);
}

static void gdsf_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->ids[id].count)
		return;
	bool told = is_told(p, id);
	if (told && !heap_room(p))
		return; /* no room to take it back: it stays told */
	uint32_t s = next_seq(p);
	struct gid *g = &p->ids[id];
	if (g->count < UINT32_MAX)
		g->count++;
	g->key = key_bits(p->L + (double)g->count * g->value);
	g->seq = s;
	if (told) {
		kvt__list_unlink(&p->d, p->lk, id);
		g->hseq = s;
		heap_add(p, id);
	} else if (is_parked(p, id)) {
		unpark(p, id);
	}
}

static bool gdsf_is_done(struct kvt_policy *p, uint32_t id)
{
	return id < p->cap && is_told(p, id);
}

/* One more entry in the main heap is garbage: compacted once garbage outnumbers the live. */
static void add_garbage(struct kvt_policy *p)
{
	p->garbage++;
	if (p->garbage > p->live && p->garbage > 64)
		compact(p);
}

/* A finished conversation's entry leaves the heap (its entry there, or in its tenant's side
 * heap, becomes garbage) for d. */
static void gdsf_done(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->ids[id].count || is_told(p, id))
		return;
	bool parked = is_parked(p, id);
	p->ids[id].hseq = TOLD;
	if (parked)
		side_drop(p, id);
	else
		add_garbage(p);
	kvt__list_push_head(&p->d, p->lk, id); /* walks start at the tail */
}

static void gdsf_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->ids[id].count)
		return;
	struct gid *g = &p->ids[id];
	if (is_told(p, id)) { /* L stays: its fate was told, not observed */
		kvt__list_unlink(&p->d, p->lk, id);
		g->count = 0;
		p->live--;
		return;
	}
	fill_hole(p);
	fix_top(p);
	bool parked = is_parked(p, id);
	if (is_min(p, id)) /* the minimum leaves: the inflation catches up with it */
		memcpy(&p->L, &g->key, sizeof(p->L));
	g->count = 0;
	p->live--;
	if (parked) {
		side_drop(p, id);
		return;
	}
	if (ent_id(&p->e[0]) == id) { /* the main heap's minimum: it is current after fix_top */
		p->hole = true;
		return;
	}
	add_garbage(p);
}

/* pend: a min-heap of entries, by value. */
static bool pend_less(const void *ctx, const void *a, const void *b)
{
	(void)ctx;
	return ent_less(a, b);
}

static int pend_push(struct kvt_policy *p, size_t *n, struct gent x)
{
	return kvt__bheap_push((void **)&p->pend, &p->pend_cap, n, sizeof(x), &x, pend_less, NULL);
}

static struct gent pend_pop(struct kvt_policy *p, size_t *n)
{
	struct gent top;
	kvt__bheap_pop(p->pend, n, sizeof(top), &top, pend_less, NULL);
	return top;
}

/* sf: a min-heap of side heap entries, by value. */
static bool sf_less(const void *ctx, const void *a, const void *b)
{
	(void)ctx;
	return ent_less(&((const struct cand *)a)->x, &((const struct cand *)b)->x);
}

static int sf_push(struct kvt_policy *p, size_t *n, struct cand x)
{
	return kvt__bheap_push((void **)&p->sf, &p->sf_cap, n, sizeof(x), &x, sf_less, NULL);
}

static struct cand sf_pop(struct kvt_policy *p, size_t *n)
{
	struct cand top;
	kvt__bheap_pop(p->sf, n, sizeof(top), &top, sf_less, NULL);
	return top;
}

/* front: a min-heap of heap positions, by the entries stored there. */
static bool front_less(const void *ctx, const void *a, const void *b)
{
	const struct kvt_policy *p = ctx;
	return ent_less(&p->e[*(const uint32_t *)a], &p->e[*(const uint32_t *)b]);
}

static int front_push(struct kvt_policy *p, size_t *n, uint32_t v)
{
	return kvt__bheap_push((void **)&p->front, &p->front_cap, n, sizeof(v), &v, front_less, p);
}

static uint32_t front_pop(struct kvt_policy *p, size_t *n)
{
	uint32_t top;
	kvt__bheap_pop(p->front, n, sizeof(top), &top, front_less, p);
	return top;
}

struct walk_state {
	uint32_t *out;
	size_t got, pn, sn; /* proposed; in pend; in sf */
	kvt_policy_evictable_fn ok;
	uint32_t (*tenant_of)(void *, uint32_t);
	bool (*open)(void *, uint32_t); /* NULL: every tenant may give */
	void *arg;
};

/* Proposes id when open() (if any) lets its tenant and ok() accepts it. */
static void offer(struct walk_state *w, uint32_t id, uint32_t t)
{
	if (w->open && !w->open(w->arg, t))
		return;
	if (!w->ok || w->ok(w->arg, id))
		w->out[w->got++] = id;
}

/* Takes sf's minimum: brings its children in and offers it if valid, unless open() refuses its
 * tenant (whose side heap may have changed since: parking). @return : 0 or -ENOMEM. */
static int take_side(struct kvt_policy *p, struct walk_state *w)
{
	struct cand c = sf_pop(p, &w->sn);
	if (w->open && !w->open(w->arg, c.t))
		return 0;
	const struct side *s = &p->side[c.t];
	for (uint32_t k = ARY * c.i + 1; k <= ARY * c.i + ARY; k++)
		if (k < s->n && sf_push(p, &w->sn, (struct cand){s->e[k], c.t, k}))
			return -ENOMEM;
	if (valid(p, &c.x))
		offer(w, ent_id(&c.x), c.t);
	return 0;
}

/*
 * Best-first over stored entries (front), each valid id visited moves to pend with its current
 * (key, seq); pend's minimum is proposed once it is below every entry still in front, which
 * bounds everything not yet visited (heap order, and a stored entry <= its id's current). The
 * side heaps (of the tenants open() lets) are walked best first too, their frontier in sf: their
 * entries are current, so sf's minimum is as good as pend's. With open, the main heap's minimum
 * is first parked while it comes next and open() refuses its tenant (only at the top: the walk
 * needs the heap still). Proposals go to out[w->got..max) (d's come before).
 */
static size_t walk(struct kvt_policy *p, struct walk_state *w, size_t max)
{
	size_t fn = 0;
	fill_hole(p);
	fix_top(p);
	if (w->got >= max)
		return w->got;
	for (uint32_t t = 0; p->n_parked && t < p->n_side; t++)
		if (p->side[t].n && (!w->open || w->open(w->arg, t)) &&
		    sf_push(p, &w->sn, (struct cand){p->side[t].e[0], t, 0}))
			return w->got;
	while (w->open && w->got < max) {
		fill_hole(p);
		fix_top(p);
		if (!p->n)
			break;
		if (w->sn && ent_less(&p->sf[0].x, &p->e[0])) {
			if (take_side(p, w))
				return w->got;
			continue;
		}
		uint32_t t = w->tenant_of(w->arg, ent_id(&p->e[0]));
		if (w->open(w->arg, t) || park(p, t))
			break;
	}
	fill_hole(p);
	if (p->n && front_push(p, &fn, 0))
		return w->got;
	while (w->got < max) {
		/* the smallest known: pend's minimum, or sf's */
		bool side = w->sn && (!w->pn || ent_less(&p->sf[0].x, &p->pend[0]));
		const struct gent *k = side ? &p->sf[0].x : w->pn ? &p->pend[0] : NULL;
		if (k && (!fn || ent_less(k, &p->e[p->front[0]]))) {
			if (side) {
				if (take_side(p, w))
					break;
				continue;
			}
			struct gent x = pend_pop(p, &w->pn);
			uint32_t id = ent_id(&x);
			offer(w, id, w->open ? w->tenant_of(w->arg, id) : 0);
			continue;
		}
		if (!fn)
			break;
		uint32_t i = front_pop(p, &fn);
		for (uint32_t c = ARY * i + 1; c <= ARY * i + ARY; c++)
			if (c < p->n && front_push(p, &fn, c))
				return w->got;
		if (valid(p, &p->e[i]) && pend_push(p, &w->pn, cur_ent(p, ent_id(&p->e[i]))))
			return w->got;
	}
	return w->got;
}

static size_t gdsf_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                           kvt_policy_evictable_fn ok, void *arg)
{
	size_t n = kvt__list_walk(&p->d, p->lk, out, 0, max, ok, arg);
	fill_hole(p);
	fix_top(p);
	if (n == 0 && max == 1 && p->n && !p->n_parked) {
		uint32_t top = ent_id(&p->e[0]);
		if (!ok || ok(arg, top)) {
			out[0] = top;
			return 1;
		}
	}
	struct walk_state w = {.out = out, .got = n, .ok = ok, .arg = arg};
	return walk(p, &w, max);
}

/* As gdsf_victims with every entry of a tenant open() refuses rejected; such entries at the
 * top of the main heap are parked on the way (told ones are not: d is walked as it is). */
static size_t gdsf_victims_tenants(struct kvt_policy *p, uint32_t *out, size_t max,
                                   kvt_policy_evictable_fn ok,
                                   uint32_t (*tenant_of)(void *, uint32_t),
                                   bool (*open)(void *, uint32_t), void *arg)
{
	size_t n = kvt__list_walk_open(&p->d, p->lk, out, 0, max, ok, tenant_of, open, arg);
	struct walk_state w = {
	    .out = out, .got = n, .ok = ok, .tenant_of = tenant_of, .open = open, .arg = arg};
	return walk(p, &w, max);
}

static int gdsf_set_param(struct kvt_policy *p, const char *name, const char *value)
{
	if (strcmp(name, "cost_exponent"))
		return -ENOENT;
	return kvt__param_double(value, 0, 4, &p->exponent);
}

static int gdsf_get_param(struct kvt_policy *p, size_t i, struct kvt_policy_param *out)
{
	if (i)
		return -ENOENT;
	*out = (struct kvt_policy_param){"cost_exponent", p->exponent, 0, 4};
	return 0;
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t gdsf_memory(struct kvt_policy *p)
{
	size_t b = sizeof(*p) + (p->e ? (p->hcap + 4) * sizeof(*p->e) : 0) +
	           p->cap * (sizeof(*p->ids) + sizeof(*p->lk)) + p->pend_cap * sizeof(*p->pend) +
	           p->front_cap * sizeof(*p->front) + p->n_side * sizeof(*p->side) +
	           p->pcap * sizeof(*p->ptenant1) + p->sf_cap * sizeof(*p->sf);
	for (size_t t = 0; t < p->n_side; t++)
		b += p->side[t].cap * sizeof(*p->side[t].e);
	return b;
}

const struct kvt_policy_ops kvt_policy_gdsf = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "gdsf",
    .create = gdsf_create,
    .destroy = gdsf_destroy,
    .on_insert = gdsf_insert,
    .on_access = gdsf_access,
    .on_done = gdsf_done,
    .is_done = gdsf_is_done,
    .on_remove = gdsf_remove,
    .pick_victims = gdsf_victims,
    .set_param = gdsf_set_param,
    .get_param = gdsf_get_param,
    .memory_bytes = gdsf_memory,
    .pick_victims_tenants = gdsf_victims_tenants,
};
