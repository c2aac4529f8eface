/*
 * reclaim.c -- taking the oldest region back for the head of the log.
 *
 * With nvme.policy = fifo (the default) and no nvme.quota, every live record of the region is
 * dropped and the daemon told (env->dropped): write amplification 1. With clock, a record read
 * since it was written (or last copied) gets a second chance, as in CLOCK: it is copied forward
 * and its hit is spent. With nvme.quota, a record whose tenant would go below its guarantee is
 * copied forward too, and so, with a maximum below the tier's size, is any record while the live
 * ones leave the log room (what a capped tenant's trims freed goes to the others). A record kept
 * is read whole, checked like any read (header, identity, payload checksum; a bad one is dropped
 * and counted, never copied), and written again at the start of the same region once it is
 * reopened, and the daemon told where it went (env->moved). So a tenant that floods the tier
 * advances the log over its own records and everyone's unprotected ones, and the protected ones
 * cycle with the log: they cost one rewrite per trip around it, at most the guaranteed bytes
 * (quota.c keeps guarantees under half the tier) and the room a maximum leaves.
 *
 * Crash safety is the write path's (nvme.c): the reopened region's first block after its header
 * is zero, so the recovery walk finds nothing there until the first kept record's header block
 * is written, and that block is written last, after every other block of the kept records and a
 * zero terminator after them. A crash before it loses the kept records (a cache may), and never
 * leaves a record that is not whole. A failed read or write drops what it would have kept.
 *
 * With env->evicted (the daemon's tiers.placement = cascade), the records reclaim drops for room
 * are read back before the region is reopened, checked like any read, and handed over one by
 * one, so the daemon can demote them into the next tier; a record that cannot be read or fails
 * its checks is dropped without being handed over (and counted).
 *
 * Cost: a reclaim that keeps k bytes reads and writes k bytes synchronously on the tier's
 * thread, inside the write that needed the room (kvt__nvme_log_place, never while a run is in
 * flight), and holds k bytes of memory while it does. Handing over reads the dropped bytes too,
 * HAND_BYTES at a time (a larger record alone, in a buffer of its size).
 *
 * A record the engine is done with (kvt_done, the tier's hint_done) is neither kept for a hit
 * or for room nor handed over: reclaim and evicting ahead drop it without reading it back, so
 * a dead chunk costs no copy and no write in the next tier. A guarantee still keeps it.
 *
 * Evicting ahead: that read-back, a whole region inside one write, is what a promotion queued
 * behind the write waits for (`kvtier bench tiers busy`). So once the head region is half
 * written, the daemon's worker hands over the region after it -- the next the head takes back --
 * in steps of its own between other jobs (kvt_tier_nvme_evict_ahead), and the reclaim that
 * reaches it finds nothing left to read. Only where reclaim drops every record anyway (fifo, no
 * nvme.quota) and the log has 4 regions or more: the records go at most half a region early.
 * A record evicted ahead gets a tombstone (4 KiB) once its copy has landed in the next tier
 * (kvt_tier_nvme_handover_landed), or at once when it was not copied: its region stays on disk
 * until the head takes it back, and a restart meanwhile must not find it again, since a delete
 * sent since reaches only the copy below (graves, nvme_int.h). Before the copy lands, a crash
 * finds the record here, so it is in one tier or the other.
 */
#include "nvme_int.h"
#include "core/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HAND_BYTES (16u << 20) /* read back for env->evicted at a time */

struct kept {
	struct kvt_chunk_hdr h;
	uint64_t from_off, from_loc;
	uint32_t rec_len;
	bool bad;
	enum { KEPT_GUARANTEE, KEPT_HIT, KEPT_ROOM } why;
};

static struct kvt_tier_id id_of(const struct kvt_chunk_hdr *h)
{
	return (struct kvt_tier_id){.tenant = h->tenant, .ns = h->ns, .key = h->key};
}

/* Kept record k will not move after all: it is gone, and the daemon must hear of it where it
 * was. A failed copy counts as an eviction (and a guarantee missed); a bad record as what the
 * caller counts. */
static void lose(struct kvt_nvme *t, struct kept *k, bool evicted)
{
	k->bad = true;
	if (evicted) {
		KVT_NVME_ADD(t, st.evictions, 1);
		KVT_NVME_ADD(t, xs.guarantee_dropped, k->why == KEPT_GUARANTEE);
	}
	if (t->env.dropped) {
		struct kvt_tier_id id = id_of(&k->h);
		t->env.dropped(t->env.arg, &id, k->from_loc);
	}
}

/* The kept records failed to move. */
static void drop_kept(struct kvt_nvme *t, struct kept *k, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (!k[i].bad)
			lose(t, &k[i], true);
}

/* Reads the kept records back to back into buf, each its own job, so that an I/O error drops
 * only the record it hit (dropped, counted). */
static void read_kept(struct kvt_nvme *t, struct kept *k, uint32_t n, uint8_t *buf,
                      struct kvt__nvme_job *jobs)
{
	uint64_t at = 0;
	for (uint32_t i = 0; i < n; i++) {
		jobs[i] = (struct kvt__nvme_job){.off = k[i].from_off,
		                                 .buf = buf + at,
		                                 .len = kvt__nvme_padded(k[i].rec_len),
		                                 .op = KVT_NVME_READ,
		                                 .ready = true};
		at += kvt__nvme_padded(k[i].rec_len);
	}
	struct kvt__nvme_batch b = {
	    .jobs = jobs, .n = n, .piece = (at + t->eng.depth - 1) / t->eng.depth};
	kvt__nvme_run(t, &b);
	for (uint32_t i = 0; i < n; i++) {
		kvt__nvme_health(t, jobs[i].err); /* a failing device fails reclaim's reads too */
		if (!jobs[i].err)
			continue;
		KVT_NVME_ADD(t, xs.dropped_io, 1);
		lose(t, &k[i], true);
	}
}

/* Checks each kept record as a read would; a bad one is dropped, counted, and squeezed out of
 * buf. @return : the bytes of buf still to write. */
static uint64_t check_kept(struct kvt_nvme *t, struct kept *k, uint32_t n, uint8_t *buf)
{
	uint64_t in = 0, out = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t len = kvt__nvme_padded(k[i].rec_len);
		struct kvt_chunk_hdr h;
		const uint8_t *p = buf + in;
		in += len;
		if (k[i].bad) /* its read failed */
			continue;
		if (!kvt_chunk_hdr_decode(p, &h) && kvt__nvme_same_record(&h, &k[i].h) &&
		    !kvt_chunk_verify(&h, p + KVT_CHUNK_HDR_BYTES,
		                      k[i].rec_len - KVT_CHUNK_HDR_BYTES)) {
			if (out != in - len)
				memmove(buf + out, p, len);
			out += len;
			continue;
		}
		KVT_NVME_ADD(t, st.corruptions, 1);
		kvt_log_rl(KVT_LOG_WARN, "nvme: %s: corrupt record at %llu dropped at reclaim",
		           t->path, (unsigned long long)k[i].from_off);
		lose(t, &k[i], false);
	}
	return out;
}

/* Writes len bytes of kept records at the start of the freshly opened region r: all but the
 * first header block and a terminator, then that block. @return : 0 or -errno, and whether
 * the first header block was issued (then the region must not be written over there). */
static int write_kept(struct kvt_nvme *t, uint64_t r, uint8_t *buf, uint64_t len, bool *issued)
{
	uint64_t at = kvt__nvme_region_start(t, r) + KVT_NVME_BLOCK;
	struct kvt__nvme_seg segs[2];
	unsigned m = 0;
	*issued = false;
	if (len > KVT_NVME_BLOCK)
		segs[m++] = (struct kvt__nvme_seg){at + KVT_NVME_BLOCK, buf + KVT_NVME_BLOCK,
		                                   len - KVT_NVME_BLOCK};
	if (KVT_NVME_BLOCK + len < t->region_bytes)
		segs[m++] =
		    (struct kvt__nvme_seg){at + len, t->blk + KVT_NVME_BLOCK, KVT_NVME_BLOCK};
	int rc = m ? kvt__nvme_rw(t, KVT_NVME_WRITE, segs, m) : 0;
	if (rc && m) /* once more: nothing of it is visible yet */
		rc = kvt__nvme_rw(t, KVT_NVME_WRITE, segs, m);
	if (rc) {
		kvt__nvme_health(t, rc);
		return rc;
	}
	*issued = true;
	rc = kvt__nvme_rw1(t, KVT_NVME_WRITE, at, buf, KVT_NVME_BLOCK);
	if (rc) /* the same block again is harmless */
		rc = kvt__nvme_rw1(t, KVT_NVME_WRITE, at, buf, KVT_NVME_BLOCK);
	kvt__nvme_health(t, rc);
	return rc;
}

int kvt__nvme_policy_check(const char *name, const char *params, char *err, size_t err_len)
{
	if (strcmp(name, "clock") && strcmp(name, "fifo")) {
		snprintf(err, err_len,
		         "nvme: no policy '%s': its log is reclaimed as fifo or clock", name);
		return -ENOENT;
	}
	if (params && params[strspn(params, " ")]) {
		snprintf(err, err_len, "nvme: %s takes no parameters ('%s')", name, params);
		return -ENOENT;
	}
	return 0;
}

int kvt__nvme_policy_set(struct kvt_nvme *t, const char *name, const char *params, char *err,
                         size_t err_len)
{
	bool clock = !strcmp(name, "clock");
	int rc = kvt__nvme_policy_check(name, params, err, err_len);
	if (rc)
		return rc;
	if (clock && !t->env.moved) {
		snprintf(err, err_len,
		         "nvme: clock copies records, and this tier's user cannot "
		         "follow a copied record");
		return -EINVAL;
	}
	t->reinsert_hits = clock;
	return 0;
}

/*
 * Beside the guarantees and clock's hits, a tier with a maximum below its size keeps (copies
 * forward) what trims left room for: a record is kept while the tier's live bytes, counting it,
 * are at most keep_live; records are decided oldest first, and dropping one lowers the count. So
 * the bytes a capped tenant gave up go to the others, as a victim filter gives them in
 * policy/quota.h, and the log drops records only once the live ones would not leave it room. A
 * region kept mostly whole is passed over (kvt__nvme_log_place), so no copy is more than half
 * a region.
 */
static bool verdict(struct kvt_nvme *t, const struct kvt__nvme_rec *rec, uint64_t *live, int *why)
{
	if (kvt__nvme_quota_keeps(t, rec))
		*why = KEPT_GUARANTEE;
	else if (t->reinsert_hits && rec->hit)
		*why = KEPT_HIT;
	else if (t->keep_live && *live <= t->keep_live && !rec->done)
		*why = KEPT_ROOM;
	else {
		*live -= kvt__nvme_padded(rec->rec_len);
		return false;
	}
	return true;
}

uint64_t kvt__nvme_reclaim_keeps(struct kvt_nvme *t, uint64_t r)
{
	const struct kvt__nvme_region *R = &t->regions[r];
	uint64_t bytes = 0, live = KVT_NVME_GET(t, st.used_bytes);
	if (!t->guaranteed && !t->reinsert_hits) {
		/* room alone: the oldest are dropped until the live bytes fit, the rest kept; no
		 * walk, so that a log full of live records is not walked a trip per region */
		uint64_t over = live > t->keep_live ? live - t->keep_live : 0;
		return t->keep_live && R->live_bytes > over ? R->live_bytes - over : 0;
	}
	int why;
	KVT_NVME_ADD(t, xs.keeps_walked, R->n_recs);
	for (uint32_t i = 0; i < R->n_recs; i++)
		if (R->recs[i].alive && verdict(t, &R->recs[i], &live, &why))
			bytes += kvt__nvme_padded(R->recs[i].rec_len);
	return bytes; /* more than the reclaim keeps when it drops some of a tenant's first */
}

void kvt__nvme_reclaim_pass(struct kvt_nvme *t, uint64_t r)
{
	struct kvt__nvme_region *R = &t->regions[r];
	for (uint32_t i = 0; t->reinsert_hits && i < R->n_recs; i++)
		R->recs[i].hit = false;
}

/* Whether someone takes the records dropped for room (env->evicted answers the question; when
 * nobody does, the tier stops asking and reading back). */
static bool handing_over(struct kvt_nvme *t)
{
	if (t->env.evicted && t->env.evicted(t->env.arg, NULL, 0, NULL, 0, false, false) == -ENOENT)
		t->env.evicted = NULL;
	return t->env.evicted != NULL;
}

/* Reads the records idx[0..n) of region r back, HAND_BYTES at a time, gives each that reads and
 * checks well to env->evicted, and then drops them all from the log (env->dropped). */
static void hand_over_and_drop(struct kvt_nvme *t, uint64_t r, const uint32_t *idx, uint32_t n,
                               bool later)
{
	const uint32_t all_n = n;
	struct kvt__nvme_region *R = &t->regions[r];
	uint64_t all = 0; /* a step of evicting ahead reads far less than HAND_BYTES */
	for (uint32_t i = 0; i < n && all < HAND_BYTES; i++)
		all += kvt__nvme_padded(R->recs[idx[i]].rec_len);
	struct kvt__nvme_job *jobs = calloc(n, sizeof(*jobs));
	uint8_t *buf = aligned_alloc(KVT_TIER_ALIGN, KVT_MIN(all, (uint64_t)HAND_BYTES));
	/* later: which copies the caller queued (buried when they land), the rest now */
	uint8_t *queued = later && n ? calloc(n, 1) : NULL;
	if (!jobs || !buf) {
		kvt_log_rl(KVT_LOG_WARN, "nvme: %s: no memory to hand %u evicted records over",
		           t->path, n);
		n = 0;
	}
	for (uint32_t i = 0, j; i < n; i = j) {
		uint64_t at = 0;
		uint8_t *big = NULL, *into = buf; /* a record over HAND_BYTES gets a buffer alone */
		uint64_t first = kvt__nvme_padded(R->recs[idx[i]].rec_len);
		if (first > HAND_BYTES && !(into = big = aligned_alloc(KVT_TIER_ALIGN, first))) {
			j = i + 1; /* no memory for it: dropped without being handed over */
			continue;
		}
		for (j = i; j < n; j++) {
			const struct kvt__nvme_rec *rec = &R->recs[idx[j]];
			uint64_t len = kvt__nvme_padded(rec->rec_len);
			if (j > i && (big || at + len > HAND_BYTES))
				break;
			jobs[j - i] = (struct kvt__nvme_job){.off = kvt__nvme_rec_off(t, r, rec),
			                                     .buf = into + at,
			                                     .len = len,
			                                     .op = KVT_NVME_READ,
			                                     .ready = true};
			at += len;
		}
		struct kvt__nvme_batch b = {
		    .jobs = jobs, .n = j - i, .piece = (at + t->eng.depth - 1) / t->eng.depth};
		kvt__nvme_run(t, &b);
		for (uint32_t q = i; q < j; q++) {
			const struct kvt__nvme_rec *rec = &R->recs[idx[q]];
			const struct kvt__nvme_job *jb = &jobs[q - i];
			kvt__nvme_health(t, jb->err);
			struct kvt_chunk_hdr h;
			if (jb->err) {
				KVT_NVME_ADD(t, xs.dropped_io, 1);
				continue;
			}
			if (kvt_chunk_hdr_decode(jb->buf, &h) ||
			    !kvt__nvme_same_record(&h, &rec->h) ||
			    kvt_chunk_verify(&h, (const uint8_t *)jb->buf + KVT_CHUNK_HDR_BYTES,
			                     rec->rec_len - KVT_CHUNK_HDR_BYTES)) {
				KVT_NVME_ADD(t, st.corruptions, 1);
				kvt_log_rl(KVT_LOG_WARN,
				           "nvme: %s: corrupt record at %llu dropped at reclaim",
				           t->path, (unsigned long long)jb->off);
				continue;
			}
			struct kvt_tier_id id = id_of(&rec->h);
			/* counted before the call: the copy may land (and be told) before it
			 * returns */
			if (later)
				__atomic_fetch_add(&R->handovers_queued, 1, __ATOMIC_RELAXED);
			if (t->env.evicted(t->env.arg, &id, kvt__nvme_loc(jb->off, R->seq), jb->buf,
			                   rec->rec_len, rec->hit, later) != 1) {
				if (later)
					__atomic_fetch_sub(&R->handovers_queued, 1,
					                   __ATOMIC_RELAXED);
			} else if (queued) {
				queued[q] = 1;
			}
			KVT_NVME_ADD(t, xs.handed_over, 1);
			KVT_NVME_ADD(t, xs.handed_bytes, rec->rec_len);
			KVT_NVME_ADD(t, st.reads, 1); /* device reads, as a promotion's */
			KVT_NVME_ADD(t, st.read_bytes, rec->rec_len);
		}
		free(big);
	}
	free(buf);
	free(jobs);
	for (uint32_t i = 0; i < all_n; i++) /* a queued one is buried when its copy lands */
		kvt__nvme_log_kill(t, r, &R->recs[idx[i]],
		                   later && !(queued && queued[i]) ? KVT_NVME_GRAVE_LATER
		                                                   : KVT_NVME_NO_GRAVE);
	free(queued);
}

int kvt__nvme_ahead_due(const struct kvt_nvme *t)
{
	if (!t->env.evicted || t->quota || t->reinsert_hits || t->n_regions < 4)
		return 0;
	const struct kvt__nvme_region *H = &t->regions[t->head];
	const struct kvt__nvme_region *R = &t->regions[(t->head + 1) % t->n_regions];
	if (!H->seq || !R->seq || !R->live_bytes || H->wp < t->region_bytes / 2)
		return 0;
	return H->wp < t->region_bytes / 4 * 3 ? 1 : 2;
}

size_t kvt__nvme_evict_ahead(struct kvt_nvme *t, size_t max_bytes)
{
	if (!kvt__nvme_ahead_due(t) || !handing_over(t))
		return 0; /* nobody takes them: reclaim just drops */
	uint64_t r = (t->head + 1) % t->n_regions;
	struct kvt__nvme_region *R = &t->regions[r];
	uint32_t *idx = calloc(R->n_recs, sizeof(*idx)), n = 0;
	size_t bytes = 0;
	if (!idx)
		return 0; /* the reclaim does it */
	for (uint32_t i = 0; i < R->n_recs && (!n || bytes < max_bytes); i++) {
		if (!R->recs[i].alive)
			continue;
		if (R->recs[i].done) { /* nobody wants it: not read back, not handed over */
			KVT_NVME_ADD(t, st.told_evictions, 1);
			KVT_NVME_ADD(t, st.evictions, 1);
			kvt__nvme_log_kill(t, r, &R->recs[i], KVT_NVME_GRAVE_LATER);
			continue;
		}
		idx[n++] = i;
		bytes += kvt__nvme_padded(R->recs[i].rec_len);
	}
	hand_over_and_drop(t, r, idx, n, true);
	KVT_NVME_ADD(t, st.evictions, n);
	KVT_NVME_ADD(t, xs.evicted_ahead, n);
	kvt__nvme_bury_due(t); /* those not queued below (bury_later in hand_over_and_drop) */
	free(idx);
	return bytes;
}

int kvt__nvme_reclaim(struct kvt_nvme *t, uint64_t r, bool may_keep)
{
	struct kvt__nvme_region *R = &t->regions[r];
	struct kept *k = NULL;
	uint32_t n = 0, n_out = 0;
	uint64_t bytes = 0;
	uint64_t live = KVT_NVME_GET(t, st.used_bytes);
	/* the records dropped for room, when they are handed over first (and someone takes them) */
	uint32_t *out = R->n_recs && handing_over(t) ? malloc(R->n_recs * sizeof(*out)) : NULL;
	for (uint32_t i = 0; i < R->n_recs; i++) {
		struct kvt__nvme_rec *rec = &R->recs[i];
		int why;
		if (!rec->alive)
			continue;
		if (may_keep && verdict(t, rec, &live, &why)) {
			if (!k && !(k = malloc(R->n_recs * sizeof(*k))))
				may_keep =
				    false; /* no memory to keep with: drop, as without a quota */
			else {
				uint64_t off = kvt__nvme_rec_off(t, r, rec);
				k[n++] = (struct kept){.h = rec->h,
				                       .from_off = off,
				                       .from_loc = kvt__nvme_loc(off, R->seq),
				                       .rec_len = rec->rec_len,
				                       .why = why};
				bytes += kvt__nvme_padded(rec->rec_len);
				/* the accounts get it back when it lands */
				kvt__nvme_log_unlink(t, r, rec);
				continue;
			}
		}
		if (!may_keep && kvt__nvme_quota_keeps(t, rec)) /* verdict() ruled it out */
			KVT_NVME_ADD(t, xs.guarantee_dropped, 1);
		KVT_NVME_ADD(t, st.evictions, 1);
		KVT_NVME_ADD(t, st.told_evictions, rec->done);
		if (out && !rec->done)
			out[n_out++] = i;
		else
			kvt__nvme_log_kill(t, r, rec, KVT_NVME_NO_GRAVE);
	}
	if (n_out)
		hand_over_and_drop(t, r, out, n_out, false);
	free(out);
	uint8_t *buf = n ? aligned_alloc(KVT_TIER_ALIGN, bytes) : NULL;
	struct kvt__nvme_job *jobs = n ? calloc(n, sizeof(*jobs)) : NULL;
	if (n && (!buf || !jobs)) {
		kvt_log_rl(KVT_LOG_WARN, "nvme: %s: no memory to copy %u records forward", t->path,
		           n);
		drop_kept(t, k, n);
		n = 0;
	}
	if (n)
		read_kept(t, k, n, buf, jobs);
	free(jobs);
	uint64_t len = n ? check_kept(t, k, n, buf) : 0;
	R->n_recs = 0;
	R->seq = 0;
	int rc = kvt__nvme_region_open(t, r);
	bool issued = false;
	if (!rc && len && (rc = write_kept(t, r, buf, len, &issued))) {
		kvt_log_rl(KVT_LOG_WARN, "nvme: %s: reclaim could not rewrite kept records: %s",
		           t->path, strerror(-rc));
		if (issued)
			R->wp = t->region_bytes; /* a header may sit there: the region is spent */
		rc = 0;                          /* the region is open: the write goes on */
		len = 0;
	}
	if (rc || !len) {
		drop_kept(t, k, n);
		free(buf);
		free(k);
		return rc;
	}
	uint64_t at = kvt__nvme_region_start(t, r) + KVT_NVME_BLOCK;
	for (uint32_t i = 0; i < n; i++) {
		if (k[i].bad)
			continue;
		if (kvt__nvme_log_append(t, &k[i].h, at, k[i].rec_len)) {
			drop_kept(t, &k[i], 1); /* no memory to track it: as good as gone */
		} else {
			KVT_NVME_ADD(t, xs.moved, 1);
			KVT_NVME_ADD(t, xs.reinserted, k[i].why == KEPT_HIT);
			KVT_NVME_ADD(t, xs.moved_bytes, kvt__nvme_padded(k[i].rec_len));
			struct kvt_tier_id id = id_of(&k[i].h);
			t->env.moved(t->env.arg, &id, k[i].from_loc, kvt__nvme_loc(at, R->seq));
		}
		at += kvt__nvme_padded(k[i].rec_len);
	}
	R->wp = KVT_NVME_BLOCK + len; /* past every kept record, tracked or not */
	R->n_placed = n;
	free(buf);
	free(k);
	return 0;
}
