/*
 * nvmelog.c -- kvtierd's nvme log as the simulator replays it: records written in order into the
 * head region, and a full head moving on to the next region, whose records from its last use are
 * dropped whole (tiers/nvme/log.c, kvt__nvme_log_place, and reclaim.c).
 *
 * Some records are kept instead, copied forward to the start of the reopened region and readable
 * all along: with clock (nvme.policy = clock) those read since they were written; with quotas
 * (nvme.quota) those whose tenant would go below its guarantee without them, and, where a
 * maximum is below the log's size, any record while the live ones leave two regions free (the
 * room a capped tenant's trims freed goes to the others). A region of which more than half would
 * be kept is passed over as it is, its reads spent, and the head tries the next one; one trip
 * round the ring on, regions are taken whole. After each write, a tenant above its maximum loses
 * its oldest records. With fifo and no quota, a tier below to hand the records to and four
 * regions or more, the next region's records go from the moment the head is half written
 * (kvt_tier_nvme_evict_ahead; in kvtierd, in steps between other jobs).
 *
 * Sizes are the log's bytes where the tier was laid out in them (layout.c: a record's padded
 * bytes and the region's), else a record each and a region of per. The tier says which records
 * it still holds and drops what the log drops (struct kvt__sim_log_env).
 */
#include "sim_int.h"

#include "policy/quota.h"
#include "tiers/nvme/geometry.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int kvt__sim_log_init(struct kvt__sim_log *l, const struct kvt__sim_log_shape *s, size_t n_blocks,
                      const struct kvt__sim_log_env *env)
{
	memset(l, 0, sizeof(*l));
	l->per = s->per;
	l->n = s->n;
	l->env = *env;
	l->need = s->rec_bytes ? s->rec_bytes : 1;
	l->max_rec = s->rec_bytes ? s->region_bytes - KVT_NVME_BLOCK : s->per;
	l->ahead = s->ahead && !s->clock && !env->quota;
	uint64_t cap = (uint64_t)l->n * l->max_rec,
	         region = s->rec_bytes ? s->region_bytes : s->per;
	if (env->quota && s->least_max_blocks != SIZE_MAX && s->least_max_blocks * l->need < cap &&
	    cap > 2 * region) /* a maximum below the log frees room for the others (quota.c) */
		l->keep_live = cap - 2 * region;
	l->guaranteed = s->guaranteed;
	l->fill = calloc(l->n, sizeof(*l->fill));
	l->gen = calloc(l->n, sizeof(*l->gen));
	l->ring = calloc((size_t)l->n * l->per, sizeof(*l->ring));
	l->wrote_at = calloc(n_blocks + 1, sizeof(*l->wrote_at));
	l->hit = s->clock ? calloc(n_blocks + 1, 1) : NULL;
	l->cursor = env->quota ? calloc(s->n_tenants, sizeof(*l->cursor)) : NULL;
	if (!l->fill || !l->gen || !l->ring || !l->wrote_at || (s->clock && !l->hit) ||
	    (env->quota && !l->cursor))
		return -ENOMEM;
	l->gen[0] = 1;
	return 0;
}

void kvt__sim_log_free(struct kvt__sim_log *l)
{
	free(l->fill);
	free(l->gen);
	free(l->ring);
	free(l->wrote_at);
	free(l->hit);
	free(l->cursor);
	memset(l, 0, sizeof(*l));
}

/* The block written at slot s of region r, when that write is still its record and held. */
static bool live(const struct kvt__sim_log *l, uint32_t r, uint32_t s, uint32_t *blk)
{
	uint64_t slot = (uint64_t)r * l->per + s;
	*blk = l->ring[slot];
	return l->wrote_at[*blk] == slot + 1 && l->env.held(l->env.arg, *blk);
}

static uint32_t tenant_of(const struct kvt__sim_log *l, uint32_t blk)
{
	return l->env.owner[blk];
}

/* Whether reclaim keeps blk (reclaim.c, verdict): a guarantee, a read since written (clock), or
 * room while the live records, counted down as others are dropped, leave two regions free. */
static bool verdict(const struct kvt__sim_log *l, uint32_t blk, uint64_t *live_bytes)
{
	if (l->env.quota) {
		uint64_t g, m;
		kvt_quota_limits(l->env.quota, tenant_of(l, blk), &g, &m);
		if (kvt_quota_used(l->env.quota, tenant_of(l, blk)) < g + 1)
			return true;
	}
	if (l->hit && l->hit[blk])
		return true;
	if (l->keep_live && *live_bytes <= l->keep_live && !l->env.told(l->env.arg, blk))
		return true;
	*live_bytes -= l->need;
	return false;
}

/* The bytes reclaiming region r would keep, or a little more (reclaim.c, kvt__nvme_reclaim_keeps).
 */
static uint64_t keeps(const struct kvt__sim_log *l, uint32_t r)
{
	uint64_t live_bytes = *l->env.used * l->need, bytes = 0;
	uint32_t blk;
	if (!l->guaranteed && !l->hit) { /* room alone: the oldest dropped until the rest fit */
		uint64_t region = 0,
		         over = live_bytes > l->keep_live ? live_bytes - l->keep_live : 0;
		for (uint32_t s = 0; s < l->fill[r]; s++)
			region += live(l, r, s, &blk) ? l->need : 0;
		return l->keep_live && region > over ? region - over : 0;
	}
	for (uint32_t s = 0; s < l->fill[r]; s++)
		if (live(l, r, s, &blk) && verdict(l, blk, &live_bytes))
			bytes += l->need;
	return bytes;
}

static void charge(const struct kvt__sim_log *l, uint32_t blk, int delta)
{
	if (l->env.quota)
		kvt_quota_charge(l->env.quota, tenant_of(l, blk), delta);
}

static void write_at_head(struct kvt__sim_log *l, uint32_t blk)
{
	uint64_t slot = (uint64_t)l->head * l->per + l->fill[l->head]++;
	l->ring[slot] = blk;
	l->wrote_at[blk] = slot + 1;
	if (l->hit)
		l->hit[blk] = 0;
}

/* Tenant's oldest live record, walking the ring from the head's next region (quota.c, oldest:
 * a cursor per tenant that only moves forward while its region is not reused). */
static bool oldest(struct kvt__sim_log *l, uint32_t tenant, uint32_t *out)
{
	struct kvt__sim_log_cursor *c = &l->cursor[tenant];
	uint32_t r = c->r, s = c->s, blk;
	if (!c->gen || l->gen[r] != c->gen)
		r = (l->head + 1) % l->n, s = 0;
	for (uint32_t step = 0; step < l->n; step++, r = (r + 1) % l->n, s = 0) {
		for (; l->gen[r] && s < l->fill[r]; s++)
			if (live(l, r, s, &blk) && tenant_of(l, blk) == tenant) {
				*c = (struct kvt__sim_log_cursor){.r = r, .s = s, .gen = l->gen[r]};
				*out = blk;
				return true;
			}
		if (r == l->head)
			break;
	}
	return false;
}

void kvt__sim_log_append(struct kvt__sim_log *l, uint32_t blk)
{
	write_at_head(l, blk);
	if (!l->env.quota)
		return;
	uint32_t tenant = tenant_of(l, blk), v;
	uint64_t g, m;
	kvt_quota_limits(l->env.quota, tenant, &g, &m);
	while (kvt_quota_used(l->env.quota, tenant) > m && oldest(l, tenant, &v))
		l->env.drop(l->env.arg, v); /* a trim: its room comes back with its region */
}

/* Region r's records from its last use: those verdict() keeps copied to its start (may_keep),
 * the others dropped; then r is the head, empty but for the copies. */
static void reclaim(struct kvt__sim_log *l, uint32_t r, bool may_keep)
{
	uint64_t live_bytes = *l->env.used * l->need;
	uint32_t n_kept = 0, blk, *kept = may_keep ? malloc(l->per * sizeof(*kept)) : NULL;
	for (uint32_t s = 0; s < l->fill[r]; s++) {
		if (!live(l, r, s, &blk))
			continue;
		if (kept && verdict(l, blk, &live_bytes)) {
			kept[n_kept++] = blk;
			charge(l, blk, -1); /* its tenant gets it back when it lands */
		} else {
			l->env.drop(l->env.arg, blk);
		}
	}
	l->fill[r] = 0;
	l->gen[r]++;
	l->head = r;
	for (uint32_t k = 0; k < n_kept; k++) {
		write_at_head(l, kept[k]);
		charge(l, kept[k], +1);
	}
	free(kept);
}

void kvt__sim_log_room(struct kvt__sim_log *l)
{
	uint32_t blk, next = (l->head + 1) % l->n;
	if (l->ahead && l->n >= 4 && l->fill[l->head] == l->per / 2 && l->gen[next])
		for (uint32_t s = 0; s < l->fill[next]; s++)
			if (live(l, next, s, &blk))
				l->env.drop(l->env.arg, blk);
	if (l->fill[l->head] < l->per)
		return;
	for (uint32_t step = 0;; step++) {
		next = (l->head + 1) % l->n;
		l->head = next;
		if (!l->gen[next]) {
			l->gen[next] = 1;
			return;
		}
		bool may_keep = step < l->n;
		uint64_t keep = may_keep ? keeps(l, next) : 0;
		if (keep > l->max_rec / 2 || keep + l->need > l->max_rec) {
			for (uint32_t s = 0; l->hit && s < l->fill[next]; s++)
				if (live(l, next, s, &blk)) /* passed over: its reads spent */
					l->hit[blk] = 0;
			continue;
		}
		reclaim(l, next, may_keep);
		return;
	}
}
