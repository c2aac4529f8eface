/*
 * wtinylfu.c -- W-TinyLFU (Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient Cache
 * Admission Policy", ACM ToS 2017; the design of Caffeine): a small LRU window W in front of a
 * segmented LRU main cache (probation P, protected Q), and a TinyLFU frequency sketch that
 * decides which of two entries the main cache keeps.
 *
 * New entries enter W (window_ratio of the resident entries, default 0.01); W's overflow leaves
 * for main as candidates (list F). At an eviction the oldest candidate meets main's next victim
 * (P's oldest, else Q's): the one with the higher estimated recent frequency stays (the
 * candidate joins P), the other is the victim; a tie goes against the candidate. Candidates
 * that arrived before the first eviction ever (the cache was filling) join P without a duel.
 * A hit in W refreshes it; a hit in P or F promotes it to Q, whose share of main is
 * protected_ratio (default 0.8; the overflow goes back to P's newest end); a hit in Q refreshes
 * it. The sketch (admit.h, "tinylfu": count-min, halved every 10 x capacity records) sees
 * every insert and hit. Its doorkeeper is off by default, as in Caffeine (`doorkeeper=1` puts
 * it back): on the Mooncake trace off gives 0.070 / 0.125 / 0.194 at 1,024 / 4,096 / 16,384
 * blocks against 0.067 / 0.115 / 0.191, and +0.002 to +0.007 on the zipf, scan and docqa
 * synthetic traces (docs/policies.md).
 *
 * pick_victims performs those moves (policy state) and proposes entries without removing them,
 * like s3fifo.c; a proposal the caller keeps goes back to the oldest end of its list on the next
 * call. An entry that evictable() rejects (leased) is set aside for the rest of the walk and
 * then goes back to the newest end of its list (a candidate's: P's), as if just used: so a main
 * cache of leased entries does not hide the window's. An entry the engine is done with (on_done,
 * kvt_done) leaves its list for D, proposed before any duel, first told first out; a hit takes
 * it to Q (it was read again). The room such an entry leaves when it is removed goes to the
 * oldest candidate without a duel, as while the cache filled (else candidates pile up in F,
 * kept without ever winning a duel); on removal, not on proposal, since a caller may take fewer
 * victims than proposed. Cost: O(1) per operation plus the sketch (4 counters and a doorkeeper
 * bit); memory: 13 bytes per id and ~5 bytes per capacity entry for the sketch.
 */
#include "pol_int.h"
#include "admit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { NONE, IN_W, IN_F, IN_P, IN_Q, PROPOSED, IN_D, LEASED, NLIST };

struct kvt_policy {
	struct kvt__link *lk;
	uint64_t *hash;
	uint8_t *where, *from; /* from: the list a proposed or leased entry came from */
	size_t cap;
	struct kvt__list l[NLIST]; /* indexed by where: [IN_W] window, [IN_F] candidates, [IN_P]
	                            * probation, [IN_Q] protected, [PROPOSED], [IN_D] told done,
	                            * [LEASED] met by this walk, set aside until its end */
	struct kvt_admit *sketch;
	double window_ratio, protected_ratio;
	bool doorkeeper;
	bool evicted; /* pick_victims was called once: the cache has been full */
};

#define COLS(p)                                                                                    \
	{                                                                                          \
		KVT__COL((p)->lk), KVT__COL((p)->hash), KVT__COL((p)->where), KVT__COL((p)->from)  \
	}

static int ensure(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	struct kvt__col c[] = COLS(p);
	return kvt__cols_grow(c, KVT__NCOLS(c), &p->cap, id);
}

static void wt_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	struct kvt__col c[] = COLS(p);
	kvt__cols_free(c, KVT__NCOLS(c));
	kvt_admit_destroy(p->sketch);
	free(p);
}

static int wt_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	for (int i = 0; i < NLIST; i++)
		kvt__list_init(&p->l[i]);
	p->window_ratio = 0.01;
	p->protected_ratio = 0.8;
	if (kvt_admit_create("tinylfu", hint ? hint : 1024, &p->sketch) ||
	    (hint && ensure(p, (uint32_t)(hint - 1)))) {
		wt_destroy(p);
		return -ENOMEM;
	}
	kvt_admit_doorkeeper(p->sketch, false);
	*out = p;
	return 0;
}

static void put(struct kvt_policy *p, uint32_t id, uint8_t w)
{
	p->where[id] = w;
	kvt__list_push_head(&p->l[w], p->lk, id);
}

static void take(struct kvt_policy *p, uint32_t id)
{
	kvt__list_unlink(&p->l[p->where[id]], p->lk, id);
	p->where[id] = NONE;
}

/* Resident entries the duels and the window's share count: all but those told done. */
static size_t resident(const struct kvt_policy *p)
{
	return p->l[IN_W].n + p->l[IN_F].n + p->l[IN_P].n + p->l[IN_Q].n;
}

/* Q keeps protected_ratio of main: its oldest entries go back to P's newest end. */
static void trim_protected(struct kvt_policy *p)
{
	double main_n = (double)(p->l[IN_F].n + p->l[IN_P].n + p->l[IN_Q].n);
	while (p->l[IN_Q].n > 1 && (double)p->l[IN_Q].n > p->protected_ratio * main_n) {
		uint32_t id = p->l[IN_Q].tail;
		take(p, id);
		put(p, id, IN_P);
	}
}

static void wt_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	if (ensure(p, id))
		return;
	if (p->where[id])
		take(p, id);
	p->hash[id] = m->key_hash;
	kvt_admit_record(p->sketch, m->key_hash);
	put(p, id, IN_W);
	if ((double)p->l[IN_W].n > p->window_ratio * (double)resident(p) && p->l[IN_W].n > 1) {
		uint32_t old = p->l[IN_W].tail; /* the window's overflow: a candidate for main */
		take(p, old);
		put(p, old, IN_F);
	}
}

static void wt_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->where[id])
		return;
	kvt_admit_record(p->sketch, p->hash[id]);
	uint8_t w = p->where[id];
	if (w == PROPOSED) /* proposed but kept: used again */
		w = p->from[id];
	take(p, id);
	if (w == IN_P || w == IN_F || w == IN_D) {
		put(p, id, IN_Q);
		trim_protected(p);
	} else {
		put(p, id, w);
	}
}

static void wt_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->where[id])
		return;
	bool told = p->where[id] == IN_D;
	take(p, id);
	if (told && p->l[IN_F].n) { /* the room it leaves goes to the oldest candidate */
		uint32_t c = p->l[IN_F].tail;
		take(p, c);
		put(p, c, IN_P);
	}
}

static bool wt_is_done(struct kvt_policy *p, uint32_t id)
{
	return id < p->cap && p->where[id] == IN_D;
}

static void wt_done(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->where[id] || p->where[id] == IN_D)
		return;
	take(p, id);      /* a proposal too: D is proposed first anyway */
	put(p, id, IN_D); /* walks start at the tail: first told, first out */
}

/* Returns last call's unclaimed proposals to the oldest ends of their lists. */
static void unpropose(struct kvt_policy *p)
{
	while (p->l[PROPOSED].head != KVT__NIL) {
		uint32_t id =
		    p->l[PROPOSED].head; /* newest proposal: lands nearest the tail last */
		take(p, id);
		p->where[id] = p->from[id];
		kvt__list_push_tail(&p->l[p->from[id]], p->lk, id);
	}
}

/* The next victim when no candidate waits: main's oldest, else the window's. */
static uint32_t plain_victim(const struct kvt_policy *p)
{
	return p->l[IN_P].n   ? p->l[IN_P].tail
	       : p->l[IN_Q].n ? p->l[IN_Q].tail
	       : p->l[IN_F].n ? p->l[IN_F].tail
	                      : p->l[IN_W].tail;
}

/* One eviction step; @return : a victim, or KVT__NIL when this step only moved an entry. */
static uint32_t step(struct kvt_policy *p, kvt_policy_evictable_fn ok, void *arg)
{
	uint32_t id = p->l[IN_P].n ? p->l[IN_P].tail : p->l[IN_Q].n ? p->l[IN_Q].tail : KVT__NIL;
	if (p->l[IN_F].n) {
		uint32_t cand = p->l[IN_F].tail;
		if (id != KVT__NIL && kvt_admit_estimate(p->sketch, p->hash[cand]) >
		                          kvt_admit_estimate(p->sketch, p->hash[id])) {
			take(p, cand); /* the candidate is worth more: it joins main */
			put(p, cand, IN_P);
		} else {
			id = cand;
		}
	} else {
		id = plain_victim(p);
	}
	uint8_t w = p->where[id];
	take(p, id);
	if (ok && !ok(arg, id)) { /* set aside: the walk goes on to the lists' other entries */
		p->from[id] = w == IN_F ? IN_P : w; /* a candidate joins main */
		put(p, id, LEASED);
		return KVT__NIL;
	}
	p->from[id] = w;
	put(p, id, PROPOSED);
	return id;
}

static size_t wt_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                         kvt_policy_evictable_fn ok, void *arg)
{
	unpropose(p);
	size_t n = kvt__list_walk(&p->l[IN_D], p->lk, out, 0, max, ok, arg);
	if (!p->evicted) { /* the window's overflow so far found room: it is in main */
		p->evicted = true;
		while (p->l[IN_F].n) {
			uint32_t id = p->l[IN_F].head; /* oldest last: P keeps their order */
			take(p, id);
			kvt__list_push_tail(&p->l[IN_P], p->lk, id);
			p->where[id] = IN_P;
		}
		trim_protected(p);
	}
	size_t steps = 0, limit = 4 * resident(p) + 8;
	while (n < max && resident(p) && steps++ < limit) {
		uint32_t v = step(p, ok, arg);
		if (v != KVT__NIL)
			out[n++] = v;
	}
	while (p->l[LEASED].tail != KVT__NIL) { /* leased: back as just used, in the order met */
		uint32_t id = p->l[LEASED].tail;
		take(p, id);
		put(p, id, p->from[id]);
	}
	return n;
}

static const struct kvt__param wt_params[] = {
    KVT__PARAM(window_ratio, KVT__P_DOUBLE, 0, 1),
    KVT__PARAM(protected_ratio, KVT__P_DOUBLE, 0, 1),
    KVT__PARAM(doorkeeper, KVT__P_BOOL, 0, 1),
};

static int wt_set_param(struct kvt_policy *p, const char *name, const char *value)
{
	int rc = kvt__param_set(p, wt_params, KVT_ARRAY_SIZE(wt_params), name, value);
	if (!rc && !strcmp(name, "protected_ratio"))
		trim_protected(p);
	if (!rc && !strcmp(name, "doorkeeper"))
		kvt_admit_doorkeeper(p->sketch, p->doorkeeper);
	return rc;
}

static int wt_get_param(struct kvt_policy *p, size_t i, struct kvt_policy_param *out)
{
	return kvt__param_get(p, wt_params, KVT_ARRAY_SIZE(wt_params), i, out);
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t wt_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	return sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap) +
	       (p->sketch ? kvt_admit_bytes(p->sketch) : 0);
}

const struct kvt_policy_ops kvt_policy_wtinylfu = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "wtinylfu",
    .create = wt_create,
    .destroy = wt_destroy,
    .on_insert = wt_insert,
    .on_access = wt_access,
    .on_remove = wt_remove,
    .pick_victims = wt_victims,
    .set_param = wt_set_param,
    .get_param = wt_get_param,
    .memory_bytes = wt_memory,
    .on_done = wt_done,
    .is_done = wt_is_done,
};
