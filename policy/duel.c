/*
 * duel.c -- "duel": conv or arc, whichever would have hit more on the traffic of late.
 *
 * Why. conv learns reuse-time distributions per class of chunk and keeps the long reuses a
 * conversation workload is made of; on Mooncake's conversation trace it leads ARC by 0.02-0.05.
 * On a workload of documents read by runs of questions (Mooncake's second trace) recency is
 * what pays, and ARC leads conv by 0.012 / 0.014 at 1,024 / 4,096 blocks (docs/policies.md, the
 * seventeenth look). An operator can switch by hand (`kvtier policy set`); duel switches itself.
 *
 * How. Both experts see every call (insert, access, remove, stream, done), so each holds the
 * tier's residents in its own order and can take over at any eviction; victims come from the
 * one that leads. Who leads is decided by two shadow caches (struct kvt__mini, the miniature
 * cache of minisim.c), one per expert, each of rate x the tier's size, fed the keys sampled by
 * hash at rate = sample / capacity (at most 1), with each request's chain rebuilt from its
 * sampled keys (per stream) as kvt_minisim does. A shadow hit adds 1 to its expert's score;
 * both scores decay by 1 - 1 / (window x the shadow's size) per sampled access, so the lead
 * follows roughly the last `window` (8) turnovers of the tier. The lead changes when the other
 * score is ahead by z (3) standard errors, sqrt(the sum of both scores) as if hits were
 * independent: each change costs, because the new lead evicts what the old one kept for later
 * (on `--synth scan` at 16,384 blocks two changes cost 0.020), so a lead of noise must not move
 * it. Set dueling (Qureshi et al., ISCA 2007) samples sets; a fully associative tier samples
 * keys instead.
 *
 * What it gives (docs/policies.md, "An eighteenth look"): on the conversation trace conv's
 * figures exactly (the lead never changes); on the second trace 0.0946 / 0.2524 / 0.5598
 * against conv's 0.0829 / 0.2404 / 0.5598 and ARC's 0.0946 / 0.2547 / 0.5621.
 *
 * Without a capacity hint there is nothing to size the shadows by: duel is conv alone.
 *
 * Cost: per operation both experts' cost, plus at rate r the two shadows' (at r = 1, for tiers
 * of up to `sample` chunks, about as much again), inside the daemon's requests: 2-3x conv's
 * replay time on the Mooncake trace, 1.45 us/op against conv's 1.23 at 65,536 entries
 * (r = 1/4); in kvtierd at 4,096 chunks 1.29-1.38x LRU's request time against conv's
 * 1.25-1.41x, 1.14x with sample=512 (kvtierd builds no miniature simulation of duel). Memory: both
 * experts, 12 bytes per id, and two shadows of at most `sample` (16,384) entries each: 891 bytes
 * per entry at 65,536 against conv's 472 (kvtier-bench-policy).
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>

#define NSTREAM        64 /* as conv: streams told apart */
#define SAMPLE_DEFAULT 16384

struct kvt_policy {
	const struct kvt_policy_ops *ops[2]; /* conv, arc */
	struct kvt_policy *e[2];
	struct kvt__mini sh[2]; /* the shadows; sh[0].p NULL without a capacity hint */
	uint64_t *key;          /* per id: key hash, depth */
	uint32_t *depth;
	size_t cap;
	size_t c;      /* the capacity hint */
	double sample; /* entries a shadow holds at most */
	double window; /* the scores' memory, in shadow sizes of sampled accesses */
	double z;      /* the lead changes when the other leads by z standard errors */
	double rate, keep;
	uint64_t threshold;
	double score[2];
	unsigned lead; /* 0: conv, 1: arc */
	uint8_t cur;
	struct {
		uint32_t prev[2], depth;
	} st[NSTREAM];
};

#define COLS(p)                                                                                    \
	{                                                                                          \
		KVT__COL((p)->key), KVT__COL((p)->depth)                                           \
	}

static int ensure(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	struct kvt__col c[] = COLS(p);
	return kvt__cols_grow(c, KVT__NCOLS(c), &p->cap, id);
}

static void shadows_free(struct kvt_policy *p)
{
	for (int k = 0; k < 2; k++) {
		kvt__mini_free(p->ops[k], &p->sh[k]);
		p->sh[k] = (struct kvt__mini){0};
	}
}

/* The scores' decay per sampled access: they remember about `window` shadow sizes of them. */
static void set_keep(struct kvt_policy *p)
{
	p->keep = 1 - 1 / (p->window * (double)p->sh[0].cap);
}

/* (Re)builds empty shadows for p->sample and the decay for p->window. @return : 0, -ENOMEM. */
static int shadows_init(struct kvt_policy *p)
{
	shadows_free(p);
	p->score[0] = p->score[1] = 0;
	for (unsigned s = 0; s < NSTREAM; s++)
		p->st[s].prev[0] = p->st[s].prev[1] = KVT_POLICY_NONE;
	if (!p->c)
		return 0;
	p->rate = p->sample >= (double)p->c ? 1 : p->sample / (double)p->c;
	p->threshold = kvt__sample_threshold(p->rate);
	double n = p->rate * (double)p->c + 0.5;
	size_t cap = n < 1 ? 1 : (size_t)n;
	for (int k = 0; k < 2; k++) {
		int rc = kvt__mini_init(&p->sh[k], p->ops[k], NULL, cap);
		if (rc) {
			shadows_free(p);
			return rc;
		}
	}
	set_keep(p);
	return 0;
}

static void du_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	shadows_free(p);
	for (int k = 0; k < 2; k++)
		if (p->e[k])
			p->ops[k]->destroy(p->e[k]);
	struct kvt__col c[] = COLS(p);
	kvt__cols_free(c, KVT__NCOLS(c));
	free(p);
}

static int du_create(size_t capacity_hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ops[0] = &kvt_policy_conv;
	p->ops[1] = &kvt_policy_arc;
	p->c = capacity_hint;
	p->sample = SAMPLE_DEFAULT;
	p->window = 8;
	p->z = 3;
	int rc = 0;
	for (int k = 0; k < 2 && !rc; k++)
		rc = p->ops[k]->create(capacity_hint, &p->e[k]);
	if (!rc)
		rc = shadows_init(p);
	if (rc) {
		du_destroy(p);
		return rc;
	}
	*out = p;
	return 0;
}

static bool sampled(const struct kvt_policy *p, uint64_t key)
{
	return kvt__mix64(key ^ 0x9e3779b97f4a7c15ULL) <= p->threshold;
}

/* The key of a request's chunk at depth d, as the shadows see it; the lead follows the scores. */
static void shadow(struct kvt_policy *p, uint64_t key, uint32_t d)
{
	if (!p->sh[0].p)
		return;
	if (d == 0) {
		p->st[p->cur].prev[0] = p->st[p->cur].prev[1] = KVT_POLICY_NONE;
		p->st[p->cur].depth = 0;
	}
	if (!sampled(p, key))
		return;
	for (int k = 0; k < 2; k++) {
		bool hit = kvt__mini_touch(p->ops[k], &p->sh[k], key, p->st[p->cur].depth,
		                           &p->st[p->cur].prev[k], true);
		p->score[k] = p->score[k] * p->keep + hit;
	}
	p->st[p->cur].depth++;
	unsigned other = 1 - p->lead;
	double gap = p->score[other] - p->score[p->lead];
	if (gap > 0 && gap * gap > p->z * p->z * (p->score[0] + p->score[1])) {
		p->lead = other;
	}
}

static void du_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	if (ensure(p, id))
		return;
	p->key[id] = m->key_hash ? m->key_hash : 1; /* 0: not resident */
	p->depth[id] = m->depth;
	for (int k = 0; k < 2; k++)
		p->ops[k]->on_insert(p->e[k], id, m);
	shadow(p, p->key[id], m->depth);
}

static void du_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->key[id]) /* a stale id would feed the shadows its old key */
		return;
	for (int k = 0; k < 2; k++)
		p->ops[k]->on_access(p->e[k], id);
	shadow(p, p->key[id], p->depth[id]);
}

static void du_remove(struct kvt_policy *p, uint32_t id)
{
	for (int k = 0; k < 2; k++)
		p->ops[k]->on_remove(p->e[k], id);
	if (id < p->cap)
		p->key[id] = 0;
}

static size_t du_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                         kvt_policy_evictable_fn ok, void *arg)
{
	return p->ops[p->lead]->pick_victims(p->e[p->lead], out, max, ok, arg);
}

static size_t du_export(struct kvt_policy *p, uint32_t *out, size_t max)
{
	return kvt_policy_order(p->ops[p->lead], p->e[p->lead], out, max);
}

static void du_done(struct kvt_policy *p, uint32_t id)
{
	for (int k = 0; k < 2; k++)
		if (p->ops[k]->on_done)
			p->ops[k]->on_done(p->e[k], id);
}

static bool du_is_done(struct kvt_policy *p, uint32_t id)
{
	return p->ops[0]->is_done(p->e[0], id); /* both were told; conv knows */
}

static void du_stream(struct kvt_policy *p, uint32_t s)
{
	p->cur = (uint8_t)(s % NSTREAM);
	for (int k = 0; k < 2; k++) {
		if (!p->ops[k]->on_stream)
			continue;
		p->ops[k]->on_stream(p->e[k], s);
		if (p->sh[k].p)
			p->ops[k]->on_stream(p->sh[k].p, s);
	}
}

static const struct kvt__param du_params[] = {
    KVT__PARAM(window, KVT__P_DOUBLE, 0.01, 1e6),
    KVT__PARAM(sample, KVT__P_DOUBLE, 1, 1 << 24),
    KVT__PARAM(z, KVT__P_DOUBLE, 0, 100),
    KVT__PARAM(lead, KVT__P_UNSIGNED, 0, 1),
};

/* window keeps the scores; a new sample size starts both shadows empty. */
static int du_set_param(struct kvt_policy *p, const char *name, const char *value)
{
	double before = p->sample;
	int rc = kvt__param_set(p, du_params, KVT_ARRAY_SIZE(du_params), name, value);
	if (rc)
		return rc;
	if (p->sample != before)
		return shadows_init(p);
	if (p->sh[0].p)
		set_keep(p);
	return 0;
}

static int du_get_param(struct kvt_policy *p, size_t i, struct kvt_policy_param *out)
{
	return kvt__param_get(p, du_params, KVT_ARRAY_SIZE(du_params), i, out);
}

static size_t du_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	size_t b = sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap);
	for (int k = 0; k < 2; k++) {
		if (p->ops[k]->memory_bytes)
			b += p->ops[k]->memory_bytes(p->e[k]);
		if (p->sh[k].p)
			b += kvt__mini_bytes(p->ops[k], &p->sh[k]);
	}
	return b;
}

const struct kvt_policy_ops kvt_policy_duel = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "duel",
    .create = du_create,
    .destroy = du_destroy,
    .on_insert = du_insert,
    .on_access = du_access,
    .on_remove = du_remove,
    .on_done = du_done,
    .is_done = du_is_done,
    .pick_victims = du_victims,
    .export_order = du_export,
    .set_param = du_set_param,
    .get_param = du_get_param,
    .memory_bytes = du_memory,
    .on_stream = du_stream,
};
