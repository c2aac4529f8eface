/*
 * s3fifo.c -- S3-FIFO (Yang et al., SOSP'23): a small FIFO S (small_ratio of the resident
 * entries, default 0.1) that filters one-hit wonders, a main FIFO M with reinsertion, and a
 * ghost FIFO G of keys recently evicted from S (as many as M holds). New keys enter S, or M when
 * G remembers them. Each entry has a 2-bit hit counter. Evicting from S moves an entry that was
 * hit at least move_threshold times (default 1) to M, else evicts it into G; evicting from M
 * reinserts an entry with a non-zero counter (decremented) and evicts one with zero.
 *
 * pick_victims performs those moves (policy state) and proposes entries without removing them;
 * a proposed entry that the caller keeps goes back to the tail of its queue on the next call.
 * An entry the caller's filter rejects (leased) is set aside for the rest of the walk and then
 * goes back to the head of its queue, as if just used: so the walk meets every other entry
 * before giving up, whichever queue small_ratio points it at.
 *
 * An entry the engine is done with (on_done, kvt_done) leaves its queue for D, proposed before
 * any step, first told first out; a hit takes it to M (it was read again), and its eviction
 * leaves no ghost.
 */
#include "pol_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NONE, IN_S, IN_M, PROPOSED, IN_D, LEASED };

struct kvt_policy {
	struct kvt__link *lk;
	uint64_t *hash;
	uint8_t *where, *freq, *from; /* from: the queue a proposed or leased entry came from */
	size_t cap;
	struct kvt__list s, m, prop, d;
	struct kvt__list leased; /* met by this walk, set aside until its end */
	struct kvt__ghost g;
	double small_ratio;
	unsigned move_threshold;
};

#define COLS(p)                                                                                    \
	{                                                                                          \
		KVT__COL((p)->lk), KVT__COL((p)->hash), KVT__COL((p)->where), KVT__COL((p)->freq), \
		    KVT__COL((p)->from)                                                            \
	}

static int ensure(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	struct kvt__col c[] = COLS(p);
	return kvt__cols_grow(c, KVT__NCOLS(c), &p->cap, id);
}

static void s3_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	struct kvt__col c[] = COLS(p);
	kvt__cols_free(c, KVT__NCOLS(c));
	kvt__ghost_free(&p->g);
	free(p);
}

static int s3_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	kvt__list_init(&p->s);
	kvt__list_init(&p->m);
	kvt__list_init(&p->prop);
	kvt__list_init(&p->d);
	kvt__list_init(&p->leased);
	p->small_ratio = 0.1;
	p->move_threshold = 1;
	if (kvt__ghost_init(&p->g, hint) || (hint && ensure(p, (uint32_t)(hint - 1)))) {
		s3_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

static struct kvt__list *queue(struct kvt_policy *p, uint8_t w)
{
	return w == IN_S     ? &p->s
	       : w == IN_M   ? &p->m
	       : w == IN_D   ? &p->d
	       : w == LEASED ? &p->leased
	                     : &p->prop;
}

static void put(struct kvt_policy *p, uint32_t id, uint8_t w)
{
	p->where[id] = w;
	kvt__list_push_head(queue(p, w), p->lk, id);
}

static void take(struct kvt_policy *p, uint32_t id)
{
	kvt__list_unlink(queue(p, p->where[id]), p->lk, id);
	p->where[id] = NONE;
}

static void s3_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	if (ensure(p, id))
		return;
	if (p->where[id])
		take(p, id);
	p->hash[id] = m->key_hash;
	p->freq[id] = 0;
	if (kvt__ghost_has(&p->g, m->key_hash)) {
		kvt__ghost_del(&p->g, m->key_hash);
		put(p, id, IN_M);
	} else {
		put(p, id, IN_S);
	}
}

static void s3_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->where[id])
		return;
	if (p->where[id] == IN_D) { /* read again after all */
		take(p, id);
		put(p, id, IN_M);
	}
	if (p->freq[id] < 3)
		p->freq[id]++;
}

static bool s3_is_done(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap)
		return false;
	return p->where[id] == IN_D || (p->where[id] == PROPOSED && p->from[id] == IN_D);
}

static void s3_done(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->where[id] || p->where[id] == IN_D)
		return;
	take(p, id);
	put(p, id, IN_D); /* walks start at the tail: first told, first out */
}

static void s3_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->where[id])
		return;
	uint8_t w = p->where[id] == PROPOSED ? p->from[id] : p->where[id];
	take(p, id); /* from D: told, not observed, so no ghost */
	if (w == IN_S) {
		kvt__ghost_add(&p->g, p->hash[id]);
		kvt__ghost_trim(&p->g, p->m.n + 1);
	}
}

/* Returns last call's unclaimed proposals to the tails of their queues, oldest first. */
static void unpropose(struct kvt_policy *p)
{
	while (p->prop.head != KVT__NIL) {
		uint32_t id = p->prop.head; /* newest proposal: lands nearest the tail last */
		take(p, id);
		struct kvt__list *q = queue(p, p->from[id]);
		p->where[id] = p->from[id];
		kvt__list_push_tail(q, p->lk, id);
	}
}

/* One eviction step; @return : a victim, or KVT__NIL when this step only moved entries. */
static uint32_t step(struct kvt_policy *p, kvt_policy_evictable_fn ok, void *arg)
{
	size_t total = p->s.n + p->m.n;
	bool from_s = p->s.n && ((double)p->s.n >= p->small_ratio * (double)total || !p->m.n);
	uint32_t id = from_s ? p->s.tail : p->m.tail;
	take(p, id);
	if (from_s && p->freq[id] >= p->move_threshold) {
		p->freq[id] = 0;
		put(p, id, IN_M);
		return KVT__NIL;
	}
	if (!from_s && p->freq[id]) {
		p->freq[id]--;
		put(p, id, IN_M);
		return KVT__NIL;
	}
	if (ok && !ok(arg, id)) { /* set aside: the walk goes on to the queues' other entries */
		p->from[id] = from_s ? IN_S : IN_M;
		put(p, id, LEASED);
		return KVT__NIL;
	}
	p->from[id] = from_s ? IN_S : IN_M;
	put(p, id, PROPOSED);
	return id;
}

static size_t s3_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                         kvt_policy_evictable_fn ok, void *arg)
{
	unpropose(p);
	size_t n = kvt__list_walk(&p->d, p->lk, out, 0, max, ok, arg);
	size_t steps = 0, limit = 6 * (p->s.n + p->m.n) + 8;
	while (n < max && p->s.n + p->m.n && steps++ < limit) {
		uint32_t v = step(p, ok, arg);
		if (v != KVT__NIL)
			out[n++] = v;
	}
	while (p->leased.tail != KVT__NIL) { /* leased: back as just used, in the order met */
		uint32_t id = p->leased.tail;
		take(p, id);
		put(p, id, p->from[id]);
	}
	return n;
}

static const struct kvt__param s3_params[] = {
    KVT__PARAM(small_ratio, KVT__P_DOUBLE, 0, 1),
    KVT__PARAM(move_threshold, KVT__P_UNSIGNED, 0, 3),
};

static int s3_set_param(struct kvt_policy *p, const char *name, const char *value)
{
	return kvt__param_set(p, s3_params, KVT_ARRAY_SIZE(s3_params), name, value);
}

static int s3_get_param(struct kvt_policy *p, size_t i, struct kvt_policy_param *out)
{
	return kvt__param_get(p, s3_params, KVT_ARRAY_SIZE(s3_params), i, out);
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t s3_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	return sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap) + kvt__ghost_bytes(&p->g);
}

const struct kvt_policy_ops kvt_policy_s3fifo = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "s3fifo",
    .create = s3_create,
    .destroy = s3_destroy,
    .on_insert = s3_insert,
    .on_access = s3_access,
    .on_remove = s3_remove,
    .on_done = s3_done,
    .is_done = s3_is_done,
    .pick_victims = s3_victims,
    .set_param = s3_set_param,
    .get_param = s3_get_param,
    .memory_bytes = s3_memory,
};
