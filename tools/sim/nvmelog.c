/*
 * nvmelog.c -- kvtierd's nvme log as the simulator replays it: records written in order into the
 * head region, and a full head moving on to the next region, whose records from its last use are
 * dropped whole (tiers/nvme/log.c, kvt__nvme_log_place, and reclaim.c).
 *
 * With clock (nvme.policy = clock) a record read since it was written is copied forward instead,
 * to the start of the reopened region, readable all along; a region of which
 * more than half would be kept is passed over as it is, its reads spent, and the head tries the
 * next one; one trip round the ring on, regions are taken whole. With fifo, a tier below to hand
 * the records to and four regions or more, the next region's records go from the moment the head
 * is half written (kvt_tier_nvme_evict_ahead; in kvtierd, in steps between other jobs).
 *
 * Whether a record is still held is the tier's to say (a record it removed is not): held(arg,
 * blk). What the log drops it hands to drop(arg, blk), which evicts it from the tier.
 */
#include "sim_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int kvt__sim_log_init(struct kvt__sim_log *l, uint32_t per, uint32_t n, size_t n_blocks, bool clock,
                      bool ahead)
{
	memset(l, 0, sizeof(*l));
	l->per = per;
	l->n = n;
	l->ahead = ahead && !clock;
	l->fill = calloc(n, sizeof(*l->fill));
	l->opened = calloc(n, 1);
	l->ring = calloc((size_t)n * per, sizeof(*l->ring));
	l->wrote_at = calloc(n_blocks + 1, sizeof(*l->wrote_at));
	l->hit = clock ? calloc(n_blocks + 1, 1) : NULL;
	if (!l->fill || !l->opened || !l->ring || !l->wrote_at || (clock && !l->hit))
		return -ENOMEM;
	l->opened[0] = 1;
	return 0;
}

void kvt__sim_log_free(struct kvt__sim_log *l)
{
	free(l->fill);
	free(l->opened);
	free(l->ring);
	free(l->wrote_at);
	free(l->hit);
	memset(l, 0, sizeof(*l));
}

/* The block written at slot s of region r, when that write is still its record and held. */
static bool live(const struct kvt__sim_log *l, uint32_t r, uint32_t s, kvt__sim_log_held_fn held,
                 void *arg, uint32_t *blk)
{
	uint64_t slot = (uint64_t)r * l->per + s;
	*blk = l->ring[slot];
	return l->wrote_at[*blk] == slot + 1 && held(arg, *blk);
}

void kvt__sim_log_append(struct kvt__sim_log *l, uint32_t blk)
{
	uint64_t slot = (uint64_t)l->head * l->per + l->fill[l->head]++;
	l->ring[slot] = blk;
	l->wrote_at[blk] = slot + 1;
	if (l->hit)
		l->hit[blk] = 0;
}

/* Region r's records from its last use: clock's reads kept (copied to its start), or with keep
 * false, every one dropped; then r is the head, empty but for the copies. */
static void reclaim(struct kvt__sim_log *l, uint32_t r, bool keep, kvt__sim_log_held_fn held,
                    kvt__sim_log_drop_fn drop, void *arg)
{
	uint32_t n_kept = 0, blk, *kept = l->hit ? malloc(l->per * sizeof(*kept)) : NULL;
	for (uint32_t s = 0; s < l->fill[r]; s++) {
		if (!live(l, r, s, held, arg, &blk))
			continue;
		if (keep && kept && l->hit[blk])
			kept[n_kept++] = blk;
		else
			drop(arg, blk);
	}
	l->fill[r] = 0;
	l->head = r;
	for (uint32_t k = 0; k < n_kept; k++)
		kvt__sim_log_append(l, kept[k]);
	free(kept);
}

void kvt__sim_log_room(struct kvt__sim_log *l, kvt__sim_log_held_fn held, kvt__sim_log_drop_fn drop,
                       void *arg)
{
	uint32_t blk, next = (l->head + 1) % l->n;
	if (l->ahead && l->n >= 4 && l->fill[l->head] == l->per / 2 && l->opened[next])
		for (uint32_t s = 0; s < l->fill[next]; s++)
			if (live(l, next, s, held, arg, &blk))
				drop(arg, blk);
	if (l->fill[l->head] < l->per)
		return;
	for (uint32_t step = 0;; step++) {
		next = (l->head + 1) % l->n;
		l->head = next;
		if (!l->opened[next]) {
			l->opened[next] = 1;
			return;
		}
		bool may_keep = l->hit && step < l->n;
		uint32_t keep = 0;
		for (uint32_t s = 0; may_keep && s < l->fill[next]; s++)
			keep += live(l, next, s, held, arg, &blk) && l->hit[blk];
		if (keep * 2 > l->per || keep + 1 > l->per) { /* passed over: its reads spent */
			for (uint32_t s = 0; s < l->fill[next]; s++)
				if (live(l, next, s, held, arg, &blk))
					l->hit[blk] = 0;
			continue;
		}
		reclaim(l, next, may_keep, held, drop, arg);
		return;
	}
}
