/*
 * hindsight.c -- "hindsight": learn from what Belady's MIN would have done on the recent past
 * (after Hawkeye, Jain and Lin, ISCA'16), adapted to prefix chunks.
 *
 * OPTgen: the policy keeps a history of the last access of recently seen keys (a direct-mapped
 * table of 4 x window slots keyed by key_hash, so evicted keys are remembered too) and an
 * occupancy vector over the last window = 8 x c accesses, in 256 quanta (c = the capacity
 * hint, or the largest resident count seen). When a key comes back, MIN with capacity c would
 * have kept it over [previous access, now) exactly when every quantum of that interval still
 * had room; if so the interval is charged to the occupancy vector. The outcome trains a
 * saturating counter for the class the entry had at its previous access: up if MIN hits, down
 * if MIN misses or the key falls out of the window unseen.
 *
 * The outcome feeds a decayed hit rate per class (weights x 0.99 per event of that class).
 *
 * Classes describe the entry's place in the prefix tree rather than anything fitted to a trace:
 * hit count (1, 2, 3-4, 5+), whether a later chunk has been chained to it (a chunk that ended
 * its prefix -- the partial tail of a prompt, an abandoned conversation -- rarely returns),
 * whether several different chunks were chained to it (a shared prefix), depth (0, 1-7, 8-31,
 * 32+), and its parent's hit count when it was inserted (how many turns its conversation had).
 * Victims: among 64 sampled entries, a class whose MIN hit rate is below `threshold` (default
 * 0.5: MIN would more likely drop it than keep it) goes first, lowest rate first; entries of
 * classes at or above it are ranked by recency alone (LRU), as Hawkeye treats friendly lines.
 * An entry the engine is done with (on_done, kvt_done) ranks below every class until it is
 * read again: sampled, it goes first.
 *
 * Cost: insert/access O(1) plus an OPTgen check of at most 256 quanta on a reuse; eviction
 * samples 64 entries (about 1 us per operation in all). Memory: 23 bytes per id and 16 bytes
 * per history slot (32 x c slots, c rounded up to a power of two).
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NCLASS 256
#define NQ     256
#define CMAX   15

struct hist {
	uint64_t tag;    /* key_hash, 0 = empty */
	uint32_t time_q; /* access time in quanta */
	uint8_t cls, live;
	uint16_t pad;
};

struct kvt_policy {
	uint64_t *last, *hash;
	uint32_t *slot;
	uint8_t *cnt, *flags, *depth, *pcb;
	size_t cap;
	struct kvt__res res;
	struct hist *hist;
	size_t hist_n;
	uint32_t occ[NQ];
	float hitw[NCLASS], totw[NCLASS];
	uint64_t now, rng, quantum, c;
	unsigned samples;
	float threshold;
};

enum { F_LIVE = 1, F_CHILD = 2, F_FAN = 4, F_DONE = 8 };

static unsigned class_of(const struct kvt_policy *p, uint32_t id)
{
	unsigned n = p->cnt[id], d = p->depth[id];
	unsigned cb = n <= 1 ? 0 : n == 2 ? 1 : n <= 4 ? 2 : 3;
	unsigned db = d == 0 ? 0 : d < 8 ? 1 : d < 32 ? 2 : 3;
	return cb | (p->flags[id] & F_CHILD ? 4u : 0u) | (p->flags[id] & F_FAN ? 8u : 0u) | db << 4;
}

static void train(struct kvt_policy *p, unsigned cls, bool hit)
{
	p->hitw[cls] = p->hitw[cls] * 0.99f + (hit ? 1.0f : 0.0f);
	p->totw[cls] = p->totw[cls] * 0.99f + 1.0f;
}

static int setup_window(struct kvt_policy *p, uint64_t c)
{
	size_t n = 64;
	while (n < 32 * c)
		n *= 2;
	struct hist *h = calloc(n, sizeof(*h));
	if (!h)
		return -ENOMEM;
	free(p->hist);
	p->hist = h;
	p->hist_n = n;
	p->c = c;
	p->quantum = (8 * c + NQ - 1) / NQ;
	memset(p->occ, 0, sizeof(p->occ));
	return 0;
}

static struct hist *hslot(struct kvt_policy *p, uint64_t h)
{
	return &p->hist[kvt__mix64(h) & (p->hist_n - 1)];
}

/* OPTgen on a reuse of key h (or its first sight); records this access with class cls. */
static void optgen(struct kvt_policy *p, uint64_t h, unsigned cls)
{
	uint64_t tq = p->now / p->quantum;
	struct hist *e = hslot(p, h);
	if (e->tag == h && e->live) {
		uint64_t from = e->time_q;
		bool hit = tq - from < NQ;
		for (uint64_t q = from; hit && q < tq; q++)
			hit = p->occ[q % NQ] < p->c;
		for (uint64_t q = from; hit && q < tq; q++)
			p->occ[q % NQ]++;
		train(p, e->cls, hit);
	} else if (e->tag && e->live) {
		train(p, e->cls, false); /* displaced unseen: MIN would not have kept it */
	}
	e->tag = h;
	e->time_q = (uint32_t)tq;
	e->cls = (uint8_t)cls;
	e->live = 1;
	if (p->now % p->quantum == 0)
		p->occ[(tq + 1) % NQ] = 0; /* the quantum about to start forgets its old lap */
}

#define COLS(p)                                                                                    \
	{                                                                                          \
		KVT__COL((p)->last), KVT__COL((p)->hash), KVT__COL((p)->slot), KVT__COL((p)->cnt), \
		    KVT__COL((p)->flags), KVT__COL((p)->depth), KVT__COL((p)->pcb)                 \
	}

static int ensure(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	struct kvt__col c[] = COLS(p);
	return kvt__cols_grow(c, KVT__NCOLS(c), &p->cap, id);
}

static void hs_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	struct kvt__col c[] = COLS(p);
	kvt__cols_free(c, KVT__NCOLS(c));
	free(p->res.ids);
	free(p->hist);
	free(p);
}

static int hs_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->samples = 64;
	p->threshold = 0.5f;
	p->rng = 0x9e3779b97f4a7c15ULL;
	if (setup_window(p, hint ? hint : 1024)) {
		hs_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

static void on_touch(struct kvt_policy *p, uint32_t id)
{
	p->now++;
	p->last[id] = p->now;
	optgen(p, p->hash[id], class_of(p, id));
}

static void hs_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	if (ensure(p, id))
		return;
	if (!(p->flags[id] & F_LIVE)) {
		if (kvt__res_add(&p->res, p->slot, id))
			return;
		if (p->res.n > p->c && setup_window(p, 2 * p->c))
			return; /* keeps the old window: only the estimate suffers */
	}
	p->flags[id] = F_LIVE;
	p->hash[id] = m->key_hash;
	p->depth[id] = m->depth > 255 ? 255 : (uint8_t)m->depth;
	struct hist *e = hslot(p, m->key_hash);
	p->cnt[id] = e->tag == m->key_hash && e->live ? 2 : 1; /* seen before: a return */
	uint32_t pa = m->parent;
	p->pcb[id] = 0;
	if (pa < p->cap && (p->flags[pa] & F_LIVE)) {
		unsigned n = p->cnt[pa];
		p->pcb[id] = n <= 1 ? 0 : n == 2 ? 1 : n <= 4 ? 2 : 3;
		p->flags[pa] |= p->flags[pa] & F_CHILD ? F_FAN : F_CHILD;
		struct hist *ph = hslot(p, p->hash[pa]);
		if (ph->tag == p->hash[pa])
			ph->cls = (uint8_t)class_of(p, pa); /* its class now knows it has a child */
	}
	on_touch(p, id);
}

static void hs_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !(p->flags[id] & F_LIVE))
		return;
	if (p->cnt[id] < 255)
		p->cnt[id]++;
	p->flags[id] &= (uint8_t)~F_DONE;
	on_touch(p, id);
}

static bool hs_is_done(struct kvt_policy *p, uint32_t id)
{
	return id < p->cap && (p->flags[id] & (F_LIVE | F_DONE)) == (F_LIVE | F_DONE);
}

static void hs_done(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap && (p->flags[id] & F_LIVE))
		p->flags[id] |= F_DONE;
}

static void hs_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !(p->flags[id] & F_LIVE))
		return;
	kvt__res_del(&p->res, p->slot, id);
	p->flags[id] = 0;
}

/* MIN's hit rate for id's class; at or above the threshold every class ranks alike (LRU). */
static float score(const void *pv, uint32_t id)
{
	const struct kvt_policy *p = pv;
	if (p->flags[id] & F_DONE)
		return -1.0f;
	unsigned c = class_of(p, id);
	float s = (p->hitw[c] + 0.5f) / (p->totw[c] + 1.0f);
	return p->threshold > 0 && s >= p->threshold ? 1.0f : s;
}

static size_t hs_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                         kvt_policy_evictable_fn ok, void *arg)
{
	return kvt__sample_victims(&p->res, &p->rng, p->samples, score, p, p->last, out, max, ok,
	                           arg);
}

static const struct kvt__param hs_params[] = {
    KVT__PARAM(samples, KVT__P_UNSIGNED, 1, 1024),
    KVT__PARAM(threshold, KVT__P_FLOAT, 0, 1),
};

static int hs_set_param(struct kvt_policy *p, const char *name, const char *value)
{
	double v;
	if (strcmp(name, "capacity"))
		return kvt__param_set(p, hs_params, KVT_ARRAY_SIZE(hs_params), name, value);
	if (kvt__param_double(value, 1, 1e9, &v))
		return -EINVAL;
	return setup_window(p, (uint64_t)v);
}

static size_t hs_export(struct kvt_policy *p, uint32_t *out, size_t max)
{
	return kvt__res_export(&p->res, p->last, out, max);
}

static int hs_get_param(struct kvt_policy *p, size_t i, struct kvt_policy_param *out)
{
	return kvt__param_get(p, hs_params, KVT_ARRAY_SIZE(hs_params), i, out);
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t hs_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	return sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap) + kvt__res_bytes(&p->res) +
	       p->hist_n * sizeof(*p->hist);
}

const struct kvt_policy_ops kvt_policy_hindsight = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "hindsight",
    .create = hs_create,
    .destroy = hs_destroy,
    .on_insert = hs_insert,
    .on_access = hs_access,
    .on_remove = hs_remove,
    .pick_victims = hs_victims,
    .export_order = hs_export,
    .set_param = hs_set_param,
    .get_param = hs_get_param,
    .memory_bytes = hs_memory,
    .on_done = hs_done,
    .is_done = hs_is_done,
};
