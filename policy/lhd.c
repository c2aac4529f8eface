/*
 * lhd.c -- "lhd": learned hit density (after LHD, Beckmann et al., NSDI'18), adapted to prefix
 * chunks. Instead of a fixed rule, the policy learns from what happened to past entries which
 * ones earn their space: for each class of entry it keeps histograms of the ages (in accesses
 * since the entry's last use) at which entries of that class were hit or evicted, and turns
 * them into a hit density: P(hit eventually | survived to age a) / E[further space-time spent].
 * The victim is the sampled entry with the lowest density.
 *
 * Classes come from the structure of the workload, not from constants: an entry's hit count
 * (1, 2, 3, 4+), whether a later chunk of some prefix was ever chained to it (an entry that
 * ended its prefix, typically a partial last chunk or an abandoned conversation's tip, is rarely
 * asked for again), and whether it is a root chunk (depth 0, shared system prompts). The tables
 * are refolded every `period` events (default 4096) with exponential decay (0.9), so the model
 * follows the workload. An entry the engine is done with (on_done, kvt_done) moves to classes
 * of its own until it is read again, learned like the others (as conv.c does): right hints
 * earn a low density, wrong ones are found out. Cost: one table lookup per sampled candidate (64
 * per eviction) and O(classes x bins) every period; memory 22 bytes per id plus 2 x 32 x 128
 * doubles. Eviction samples with a fixed-seed xorshift generator, so runs are reproducible.
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NCLASS 32 /* 16, and the same told done */
#define NBIN   128

struct kvt_policy {
	uint64_t *last;
	uint32_t *slot; /* index in res[] */
	uint8_t *cnt, *flags;
	size_t cap;
	struct kvt__res res; /* resident ids, dense, for sampling */
	double hits[NCLASS][NBIN], evs[NCLASS][NBIN];
	float density[NCLASS][NBIN];
	uint64_t now, events, rng;
	unsigned samples, period;
	double decay;
};

enum { F_LIVE = 1, F_CHILD = 2, F_ROOT = 4, F_DONE = 8 };

static unsigned age_bin(uint64_t age)
{
	if (age < 8)
		return (unsigned)age;
	unsigned e = 63u - (unsigned)__builtin_clzll(age); /* >= 3 */
	unsigned m = (unsigned)(age >> (e - 2)) & 3u;
	unsigned b = 8 + (e - 3) * 4 + m;
	return b < NBIN ? b : NBIN - 1;
}

static double bin_width(unsigned b)
{
	if (b < 8)
		return 1.0;
	unsigned e = (b - 8) / 4 + 3;
	return (double)(1ULL << (e - 2));
}

static unsigned class_of(const struct kvt_policy *p, uint32_t id)
{
	unsigned c = p->cnt[id] > 4 ? 3 : p->cnt[id] - 1u;
	return c * 4 + (p->flags[id] & F_CHILD ? 1u : 0u) + (p->flags[id] & F_ROOT ? 2u : 0u) +
	       (p->flags[id] & F_DONE ? 16u : 0u);
}

static void refold(struct kvt_policy *p)
{
	for (unsigned c = 0; c < NCLASS; c++) {
		double h = 0, e = 0, life = 0;
		for (unsigned b = NBIN; b-- > 0;) {
			h += p->hits[c][b];
			e += p->hits[c][b] + p->evs[c][b];
			life += e * bin_width(b);
			p->density[c][b] = life > 0 ? (float)(h / life) : 0.0f;
			p->hits[c][b] *= p->decay;
			p->evs[c][b] *= p->decay;
		}
	}
}

static void tick(struct kvt_policy *p)
{
	p->now++;
	if (++p->events % p->period == 0)
		refold(p);
}

#define COLS(p)                                                                                    \
	{                                                                                          \
		KVT__COL((p)->last), KVT__COL((p)->slot), KVT__COL((p)->cnt), KVT__COL((p)->flags) \
	}

static int ensure(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	struct kvt__col c[] = COLS(p);
	return kvt__cols_grow(c, KVT__NCOLS(c), &p->cap, id);
}

static void lhd_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	struct kvt__col c[] = COLS(p);
	kvt__cols_free(c, KVT__NCOLS(c));
	free(p->res.ids);
	free(p);
}

static int lhd_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->samples = 64;
	p->period = 4096;
	p->decay = 0.9;
	p->rng = 0x9e3779b97f4a7c15ULL;
	/* before the first refold: older is worse, like LRU */
	for (unsigned c = 0; c < NCLASS; c++)
		for (unsigned b = 0; b < NBIN; b++)
			p->density[c][b] = 1.0f / (float)(b + 1);
	*out = p;
	return 0;
}

static void lhd_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	if (ensure(p, id))
		return;
	if (!(p->flags[id] & F_LIVE) && kvt__res_add(&p->res, p->slot, id))
		return;
	tick(p);
	p->flags[id] = F_LIVE | (m->depth == 0 ? F_ROOT : 0);
	p->cnt[id] = 1;
	p->last[id] = p->now;
	if (m->parent < p->cap && (p->flags[m->parent] & F_LIVE))
		p->flags[m->parent] |= F_CHILD;
}

static void lhd_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !(p->flags[id] & F_LIVE))
		return;
	tick(p);
	p->hits[class_of(p, id)][age_bin(p->now - p->last[id])] += 1;
	if (p->cnt[id] < 255)
		p->cnt[id]++;
	p->last[id] = p->now;
	p->flags[id] &= (uint8_t)~F_DONE; /* read again: the hint was wrong */
}

static bool lhd_is_done(struct kvt_policy *p, uint32_t id)
{
	return id < p->cap && (p->flags[id] & (F_LIVE | F_DONE)) == (F_LIVE | F_DONE);
}

static void lhd_done(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap && (p->flags[id] & F_LIVE))
		p->flags[id] |= F_DONE;
}

static void lhd_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !(p->flags[id] & F_LIVE))
		return;
	p->evs[class_of(p, id)][age_bin(p->now - p->last[id])] += 1;
	kvt__res_del(&p->res, p->slot, id);
	p->flags[id] = 0;
}

static float score(const void *pv, uint32_t id)
{
	const struct kvt_policy *p = pv;
	return p->density[class_of(p, id)][age_bin(p->now - p->last[id])];
}

static size_t lhd_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                          kvt_policy_evictable_fn ok, void *arg)
{
	return kvt__sample_victims(&p->res, &p->rng, p->samples, score, p, p->last, out, max, ok,
	                           arg);
}

static const struct kvt__param lhd_params[] = {
    KVT__PARAM(samples, KVT__P_UNSIGNED, 1, 1024),
    KVT__PARAM(period, KVT__P_UNSIGNED, 16, 1e9),
    KVT__PARAM(decay, KVT__P_DOUBLE, 0, 1),
};

static int lhd_set_param(struct kvt_policy *p, const char *name, const char *value)
{
	return kvt__param_set(p, lhd_params, KVT_ARRAY_SIZE(lhd_params), name, value);
}

static size_t lhd_export(struct kvt_policy *p, uint32_t *out, size_t max)
{
	return kvt__res_export(&p->res, p->last, out, max);
}

static int lhd_get_param(struct kvt_policy *p, size_t i, struct kvt_policy_param *out)
{
	return kvt__param_get(p, lhd_params, KVT_ARRAY_SIZE(lhd_params), i, out);
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t lhd_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	return sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap) + kvt__res_bytes(&p->res);
}

const struct kvt_policy_ops kvt_policy_lhd = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "lhd",
    .create = lhd_create,
    .destroy = lhd_destroy,
    .on_insert = lhd_insert,
    .on_access = lhd_access,
    .on_remove = lhd_remove,
    .pick_victims = lhd_victims,
    .export_order = lhd_export,
    .set_param = lhd_set_param,
    .get_param = lhd_get_param,
    .memory_bytes = lhd_memory,
    .on_done = lhd_done,
    .is_done = lhd_is_done,
};
