/*
 * log.c -- the nvme tier's on-disk layout: a FIFO log of fixed-size regions.
 *
 *   [0, 4K)      superblock copy A     [4K, 8K) superblock copy B
 *   [1 MiB, ...) n_regions regions of region_bytes each, used as a ring
 *   region:      [header block: magic, instance, seq, index][record][record]...[zero block]
 *                ... [summary: entries, live map, trailer] (summary.c; at the region's end)
 *   record:      the 128-byte chunk header + payload, padded to 4 KiB, written as one request
 *                together with a zero "terminator" block right after it
 *
 * Why a log of regions and not size-class slabs: chunks are immutable and written once, their
 * sizes vary with the codec level (a compressed chunk is any size), and an SSD likes large
 * sequential writes. A slab allocator would waste the gap to the next size class and scatter
 * small random writes; the log packs records back to back (waste: the 4 KiB padding and the
 * unused tail of each region, under one record) and writes sequentially. Reclaim is FIFO by
 * region (CacheLib Navy's block cache): the oldest region is erased as a whole and the daemon is
 * told about each live record in it (env->dropped), so the tier's write amplification is
 * 1 + 4 KiB/record (the terminator), i.e. 1.016 at 256 KiB, 1.002 at 2 MiB. Hot chunks survive
 * because the daemon promotes them. With nvme.quota (quota.c) a tenant's guaranteed records are
 * copied forward at reclaim (reclaim.c), and a region that would keep more than half of itself
 * is passed over whole (kvt__nvme_log_place), so the ring's regions may be out of
 * seq order behind the head; seq still names each region's age and the head is the newest.
 *
 * Superblock: double-buffered; generation g lives in copy g % 2, so a torn superblock write
 * leaves the other copy valid. It holds the geometry and a random instance id; a region or
 * tombstone block from another instance (an older format of the same file) is never trusted.
 * A format-version or geometry mismatch rebuilds the tier (an empty log), never crashes.
 *
 * Recovery: read every region header, order the valid ones by seq (the ring order), then walk
 * each region's records by reading 4 KiB header blocks, depth regions at a time. A walk stops at
 * the first block that is neither a valid record header nor a tombstone: the terminator that
 * every write leaves after its record, or the zero block written after a fresh region header,
 * so records left over from a region's previous use are never resurrected. The records of the
 * head region (the only place a write can be torn by a crash) are read whole and verified.
 * remove() persists by overwriting the record's first block with a tombstone that the walk
 * skips. A write reported failed after its header block was issued may have landed whole: the
 * zero block is written over that header (a fence, nvme.c finish_ready), so the walk stops
 * there and the failed record never becomes visible (DESIGN.md invariant 4). Fences and
 * tombstones are tried KVT_NVME_FENCE_TRIES times; one that never lands is counted and logged.
 * Usage after recovery is the sum of the recovered records' padded lengths: exact. After a
 * close none of this runs: the open reads the index that close saved (index.c). Nor does most of
 * it after a crash: a region the head has left carries a summary of its records at its end
 * (summary.c), which the open reads instead of the region's header blocks; the walk covers only
 * regions without one (the head's, a damaged one) and what lies past a summary's write pointer.
 * A region opened again zeroes its last block (the old summary's trailer) first.
 */
#include "nvme_int.h"
#include "core/log.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>
#include <xxhash.h>

#define SB_MAGIC   0x42534d564e54564bull /* "KVTNVMSB" */
#define RG_MAGIC   0x47524d564e54564bull /* "KVTNVMRG" */
#define TB_MAGIC   0x42544d564e54564bull /* "KVTNVMTB" */
#define SUM_OFF    (KVT_NVME_BLOCK - 8)
#define SCAN_BATCH 256u

static uint64_t block_sum(const uint8_t *b)
{
	return XXH3_64bits(b, SUM_OFF);
}

bool kvt__nvme_block_ok(const uint8_t *b, uint64_t magic)
{
	return kvt_load_le64(b) == magic && kvt_load_le64(b + SUM_OFF) == block_sum(b);
}

void kvt__nvme_block_seal(uint8_t *b)
{
	kvt_store_le64(b + SUM_OFF, block_sum(b));
}

uint64_t kvt__nvme_region_start(const struct kvt_nvme *t, uint64_t r)
{
	return t->data_off + r * t->region_bytes;
}

uint64_t kvt__nvme_rec_off(const struct kvt_nvme *t, uint64_t region, const struct kvt__nvme_rec *r)
{
	return kvt__nvme_region_start(t, region) + (uint64_t)r->off_blocks * KVT_NVME_BLOCK;
}

int kvt__nvme_rw1(struct kvt_nvme *t, int op, uint64_t off, void *buf, size_t len)
{
	struct kvt__nvme_seg s = {off, buf, len};
	return kvt__nvme_rw(t, op, &s, 1);
}

/* ---- superblock ---- */

int kvt__nvme_log_sb_write(struct kvt_nvme *t, bool clean)
{
	uint8_t *b = t->blk;
	memset(b, 0, KVT_NVME_BLOCK);
	t->sb_gen++;
	kvt_store_le64(b, SB_MAGIC);
	kvt_store_le32(b + 8, KVT_NVME_FORMAT);
	kvt_store_le32(b + 12, t->align);
	kvt_store_le64(b + 16, t->sb_gen);
	kvt_store_le64(b + 24, t->region_bytes);
	kvt_store_le64(b + 32, t->n_regions);
	kvt_store_le64(b + 40, t->data_off);
	kvt_store_le64(b + 48, t->file_bytes);
	kvt_store_le64(b + 56, t->instance);
	kvt_store_le32(b + 64, clean);
	kvt__nvme_block_seal(b);
	int rc =
	    kvt__nvme_rw1(t, KVT_NVME_WRITE, (t->sb_gen & 1) * KVT_NVME_BLOCK, b, KVT_NVME_BLOCK);
	if (!rc && fdatasync(t->fd))
		rc = -errno;
	return rc;
}

struct sb {
	bool valid;
	uint32_t format;
	uint64_t gen, region_bytes, n_regions, data_off, instance;
};

static struct sb sb_decode(const uint8_t *b)
{
	struct sb s = {0};
	if (!kvt__nvme_block_ok(b, SB_MAGIC))
		return s;
	s.valid = true;
	s.format = kvt_load_le32(b + 8);
	s.gen = kvt_load_le64(b + 16);
	s.region_bytes = kvt_load_le64(b + 24);
	s.n_regions = kvt_load_le64(b + 32);
	s.data_off = kvt_load_le64(b + 40);
	s.instance = kvt_load_le64(b + 56);
	return s;
}

/* @return : 1 when the superblock matches this geometry (recover), 0 (format), or -errno. */
static int sb_read(struct kvt_nvme *t)
{
	int rc = kvt__nvme_rw1(t, KVT_NVME_READ, 0, t->scan_buf, 2 * KVT_NVME_BLOCK);
	if (rc)
		return rc;
	struct sb a = sb_decode(t->scan_buf), b = sb_decode(t->scan_buf + KVT_NVME_BLOCK);
	struct sb *best = a.valid && (!b.valid || a.gen > b.gen) ? &a : b.valid ? &b : NULL;
	if (!best)
		return 0;
	t->sb_gen = best->gen;
	if (best->format != KVT_NVME_FORMAT) {
		kvt_log(KVT_LOG_WARN, "nvme: %s has format %u, not %u: rebuilding the tier",
		        t->path, best->format, KVT_NVME_FORMAT);
		return 0;
	}
	if (best->region_bytes != t->region_bytes || best->n_regions != t->n_regions ||
	    best->data_off != t->data_off) {
		kvt_log(
		    KVT_LOG_WARN,
		    "nvme: %s geometry changed (%llu regions of %llu bytes, now %llu of %llu: "
		    "nvme.bytes or nvme.region_bytes): its chunks are dropped, the tier rebuilt",
		    t->path, (unsigned long long)best->n_regions,
		    (unsigned long long)best->region_bytes, (unsigned long long)t->n_regions,
		    (unsigned long long)t->region_bytes);
		return 0;
	}
	t->instance = best->instance;
	return 1;
}

int kvt__nvme_log_probe(struct kvt_nvme *t)
{
	int rc = kvt__nvme_rw1(t, KVT_NVME_READ, 0, t->scan_buf, 2 * KVT_NVME_BLOCK);
	if (rc)
		return rc;
	struct sb a = sb_decode(t->scan_buf), b = sb_decode(t->scan_buf + KVT_NVME_BLOCK);
	if ((a.valid && a.instance == t->instance) || (b.valid && b.instance == t->instance))
		return 0;
	return -EIO;
}

/* ---- regions ---- */

int kvt__nvme_region_open(struct kvt_nvme *t, uint64_t r)
{
	uint8_t *b = t->blk;
	memset(b, 0, KVT_NVME_BLOCK);
	kvt_store_le64(b, RG_MAGIC);
	kvt_store_le64(b + 8, t->instance);
	kvt_store_le64(b + 16, t->next_seq);
	kvt_store_le64(b + 24, r);
	kvt__nvme_block_seal(b);
	/* The zero block after the header first, then the header: nothing of the region's past use
	 * survives a scan. As one write, a power cut could land the header without the zero block
	 * (a device keeps no order among a write's blocks), and the walk would go on into the
	 * records of the region's past use, under the new header: records dropped, removed or
	 * reported failed would come back (test_nvme_crash torn_writes). Now a cut between the two
	 * leaves the old header over a zero block: an empty region of the old seq. Before both,
	 * the region's last block is zeroed: the trailer of the old use's summary (summary.c),
	 * which still names the old seq and, over that zero block, would bring back records whose
	 * first block is gone. */
	uint64_t at = kvt__nvme_region_start(t, r);
	int rc = kvt__nvme_rw1(t, KVT_NVME_WRITE, at + t->region_bytes - KVT_NVME_BLOCK,
	                       b + KVT_NVME_BLOCK, KVT_NVME_BLOCK);
	if (!rc)
		rc = kvt__nvme_rw1(t, KVT_NVME_WRITE, at + KVT_NVME_BLOCK, b + KVT_NVME_BLOCK,
		                   KVT_NVME_BLOCK);
	if (!rc)
		rc = kvt__nvme_rw1(t, KVT_NVME_WRITE, at, b, KVT_NVME_BLOCK);
	if (rc)
		return rc;
	t->regions[r].seq = t->next_seq++;
	t->regions[r].wp = KVT_NVME_BLOCK;
	t->regions[r].n_recs = 0;
	t->regions[r].live_bytes = 0;
	t->regions[r].n_placed = 0;
	t->regions[r].sum_start = 0;
	t->sums_due -= t->regions[r].sum_due;
	t->regions[r].sum_due = false;
	return 0;
}

int64_t kvt__nvme_log_place(struct kvt_nvme *t, uint32_t rec_len, uint64_t avoid)
{
	uint64_t need = kvt__nvme_padded(rec_len);
	bool passed = false; /* the head is a region this call passed over: not written to */
	for (uint64_t step = 0;; step++) {
		struct kvt__nvme_region *R = &t->regions[t->head];
		if (!passed) {
			if (!R->seq) {
				int rc = kvt__nvme_region_open(t, t->head);
				if (rc)
					return rc;
			}
			if (kvt__nvme_region_fits(t, R, need)) {
				R->n_placed++;
				return (int64_t)(kvt__nvme_region_start(t, t->head) + R->wp);
			}
		}
		uint64_t next = (t->head + 1) % t->n_regions;
		if (next == avoid)
			return -EAGAIN;
		if (__atomic_load_n(&t->regions[next].handovers_queued, __ATOMIC_ACQUIRE)) {
			KVT_NVME_ADD(t, xs.handover_waits, 1); /* its records are not below yet */
			return -EAGAIN;
		}
		/* the head leaves it: its summary is written after the run (summary.c) */
		if (!passed && R->seq && !R->sum_start && !R->sum_due) {
			R->sum_due = true;
			t->sums_due++;
		}
		t->head = next;
		passed = false;
		if (!t->regions[next].seq)
			continue;
		/* A region that nvme.quota (or clock) would keep more than half of, or too much of
		 * to leave room for this record, is passed over as it is: no I/O, its hits are
		 * spent, and the rest of it stays readable a trip longer. A copy forward is left
		 * for regions it frees at least half of, so it writes at most half a region. One
		 * trip round the ring on, regions are taken whole, so a write never waits on a log
		 * full of guarantees. */
		bool may_keep = step < t->n_regions;
		uint64_t keep = may_keep ? kvt__nvme_reclaim_keeps(t, next) : 0;
		if (keep > t->max_rec / 2 || keep + need > t->max_rec) {
			kvt__nvme_reclaim_pass(t, next);
			KVT_NVME_ADD(t, xs.passed, 1);
			passed = true;
			continue;
		}
		int rc = kvt__nvme_reclaim(t, next, may_keep);
		if (rc)
			return rc;
	}
}

int kvt__nvme_log_append(struct kvt_nvme *t, const struct kvt_chunk_hdr *h, uint64_t file_off,
                         uint32_t rec_len)
{
	uint64_t r = (file_off - t->data_off) / t->region_bytes;
	struct kvt__nvme_region *R = &t->regions[r];
	if (R->n_recs == R->cap_recs) {
		uint32_t cap = R->cap_recs ? R->cap_recs * 2 : 64;
		void *p = realloc(R->recs, cap * sizeof(*R->recs));
		if (!p)
			return -ENOMEM;
		R->recs = p, R->cap_recs = cap;
	}
	uint64_t in = file_off - kvt__nvme_region_start(t, r);
	struct kvt__nvme_rec *rec = &R->recs[R->n_recs++];
	rec->h = *h;
	rec->off_blocks = (uint32_t)(in / KVT_NVME_BLOCK);
	rec->rec_len = rec_len;
	rec->alive = true;
	rec->hit = false;
	rec->done = false;
	rec->buried = false;
	uint64_t need = kvt__nvme_padded(rec_len);
	R->wp = KVT_MAX(R->wp, in + need); /* a write run may have placed records past it */
	R->live_bytes += need;
	KVT_NVME_ADD(t, st.used_bytes, need);
	KVT_NVME_ADD(t, st.chunks, 1);
	kvt__nvme_quota_account(t, rec, +1);
	return 0;
}

void kvt__nvme_log_unlink(struct kvt_nvme *t, uint64_t region, struct kvt__nvme_rec *rec)
{
	if (!rec->alive)
		return;
	rec->alive = false;
	t->regions[region].live_bytes -= kvt__nvme_padded(rec->rec_len);
	KVT_NVME_ADD(t, st.used_bytes, -kvt__nvme_padded(rec->rec_len));
	KVT_NVME_ADD(t, st.chunks, (uint64_t)-1);
	kvt__nvme_quota_account(t, rec, -1);
}

int kvt__nvme_log_fence(struct kvt_nvme *t, uint64_t off, void *blk, const char *what)
{
	return kvt__nvme_log_fence_len(t, off, blk, KVT_NVME_BLOCK, what);
}

int kvt__nvme_log_fence_len(struct kvt_nvme *t, uint64_t off, void *buf, size_t len,
                            const char *what)
{
	int rc = -EIO;
	for (unsigned i = 0; i < KVT_NVME_FENCE_TRIES && rc; i++) {
		rc = kvt__nvme_rw1(t, KVT_NVME_WRITE, off, buf, len);
		kvt__nvme_health(t, rc);
	}
	if (rc) {
		KVT_NVME_ADD(t, xs.unfenced, 1);
		kvt_log_rl(KVT_LOG_ERROR,
		           "nvme: %s at %s+%llu not written (%s): what it hides may come back "
		           "after a restart",
		           what, t->path, (unsigned long long)off, strerror(-rc));
	}
	return rc;
}

static void tombstone_fill(const struct kvt_nvme *t, uint8_t *b, uint32_t rec_len)
{
	memset(b, 0, KVT_NVME_BLOCK);
	kvt_store_le64(b, TB_MAGIC);
	kvt_store_le64(b + 8, t->instance);
	kvt_store_le32(b + 16, rec_len);
	kvt__nvme_block_seal(b);
}

void kvt__nvme_log_kill(struct kvt_nvme *t, uint64_t region, struct kvt__nvme_rec *rec,
                        enum kvt__nvme_grave grave)
{
	if (!rec->alive)
		return;
	kvt__nvme_log_unlink(t, region, rec);
	uint64_t off = kvt__nvme_rec_off(t, region, rec);
	uint64_t loc = kvt__nvme_loc(off, t->regions[region].seq);
	if (grave == KVT_NVME_GRAVE_NOW) {
		tombstone_fill(t, t->blk, rec->rec_len);
		kvt__nvme_bury_now(t, region, rec, t->blk);
	} else if (grave == KVT_NVME_GRAVE_LATER) {
		kvt__nvme_bury_later(t, loc);
	}
	if (t->env.dropped && !t->recovering) {
		struct kvt_tier_id id = {
		    .tenant = rec->h.tenant, .ns = rec->h.ns, .key = rec->h.key};
		t->env.dropped(t->env.arg, &id, loc);
	}
}

/* The record at loc, live or dead, while its region has not been reused since. */
static struct kvt__nvme_rec *rec_at(struct kvt_nvme *t, uint64_t loc, uint64_t *region)
{
	uint64_t off = (loc & ((1ull << 40) - 1)) << 12;
	if (off < t->data_off)
		return NULL;
	uint64_t r = (off - t->data_off) / t->region_bytes;
	if (r >= t->n_regions)
		return NULL;
	struct kvt__nvme_region *R = &t->regions[r];
	if (!R->seq || (R->seq & 0xffffff) != loc >> 40)
		return NULL;
	uint32_t want = (uint32_t)((off - kvt__nvme_region_start(t, r)) / KVT_NVME_BLOCK);
	uint32_t lo = 0, hi = R->n_recs;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (R->recs[mid].off_blocks < want)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == R->n_recs || R->recs[lo].off_blocks != want)
		return NULL;
	*region = r;
	return &R->recs[lo];
}

struct kvt__nvme_rec *kvt__nvme_log_find(struct kvt_nvme *t, uint64_t loc, uint64_t *region)
{
	uint64_t r;
	struct kvt__nvme_rec *rec = rec_at(t, loc, &r);
	if (!rec || !rec->alive)
		return NULL;
	*region = r;
	return rec;
}

/* ---- graves: records dropped while their region stays on disk ---- */

void kvt__nvme_bury_later(struct kvt_nvme *t, uint64_t loc)
{
	pthread_mutex_lock(&t->bury_lock);
	if (t->n_bury == t->cap_bury) {
		uint32_t cap = t->cap_bury ? 2 * t->cap_bury : 64;
		uint64_t *v = realloc(t->bury, cap * sizeof(*v));
		if (!v) {
			pthread_mutex_unlock(&t->bury_lock);
			KVT_NVME_ADD(t, xs.unfenced, 1);
			kvt_log_rl(KVT_LOG_ERROR,
			           "nvme: %s: no memory to remember a dropped record's tombstone: "
			           "it may come back after a restart",
			           t->path);
			return;
		}
		t->bury = v, t->cap_bury = cap;
	}
	t->bury[t->n_bury++] = loc;
	pthread_mutex_unlock(&t->bury_lock);
}

void kvt__nvme_bury_due(struct kvt_nvme *t)
{
	if (KVT_NVME_GET(t, st.disabled))
		return; /* no I/O: they wait for enable() */
	pthread_mutex_lock(&t->bury_lock);
	uint64_t *locs = t->bury;
	uint32_t n = t->n_bury;
	t->bury = NULL, t->n_bury = 0, t->cap_bury = 0;
	pthread_mutex_unlock(&t->bury_lock);
	struct kvt__nvme_seg segs[KVT_NVME_RW_MAX];
	struct kvt__nvme_rec *recs[KVT_NVME_RW_MAX];
	uint64_t regions[KVT_NVME_RW_MAX];
	uint8_t *buf =
	    n ? aligned_alloc(KVT_TIER_ALIGN, (size_t)KVT_MIN(n, KVT_NVME_RW_MAX) * KVT_NVME_BLOCK)
	      : NULL;
	for (uint32_t i = 0; i < n;) {
		unsigned m = 0;
		for (; i < n && m < KVT_NVME_RW_MAX; i++) {
			uint64_t r;
			struct kvt__nvme_rec *rec = rec_at(t, locs[i], &r);
			if (!rec || rec->alive) /* its region was taken back: nothing to hide */
				continue;
			uint64_t off = kvt__nvme_rec_off(t, r, rec);
			recs[m] = rec;
			regions[m] = r;
			segs[m] = (struct kvt__nvme_seg){off, NULL, KVT_NVME_BLOCK};
			if (buf) {
				segs[m].buf = buf + (size_t)m * KVT_NVME_BLOCK;
				tombstone_fill(t, segs[m].buf, rec->rec_len);
			}
			m++;
		}
		if (!m)
			continue;
		int rc = buf ? kvt__nvme_rw(t, KVT_NVME_WRITE, segs, m) : -ENOMEM;
		kvt__nvme_health(t, rc);
		for (unsigned k = 0; k < m; k++) { /* one at a time, each with its retries */
			if (rc) {
				tombstone_fill(t, t->blk, recs[k]->rec_len);
				recs[k]->buried = !kvt__nvme_log_fence(
				    t, segs[k].off, t->blk, "the tombstone of a dropped record");
			} else {
				recs[k]->buried = true;
			}
		}
		kvt__nvme_livemaps_write(t, regions, m);
		KVT_NVME_ADD(t, xs.buried, m);
	}
	free(buf);
	free(locs);
}

/* ---- recovery ---- */

static int read_region_headers(struct kvt_nvme *t)
{
	struct kvt__nvme_seg segs[SCAN_BATCH];
	for (uint64_t r0 = 0; r0 < t->n_regions; r0 += SCAN_BATCH) {
		unsigned n = (unsigned)KVT_MIN((uint64_t)SCAN_BATCH, t->n_regions - r0);
		for (unsigned i = 0; i < n; i++)
			segs[i] = (struct kvt__nvme_seg){kvt__nvme_region_start(t, r0 + i),
			                                 t->scan_buf + (size_t)i * KVT_NVME_BLOCK,
			                                 KVT_NVME_BLOCK};
		int rc = kvt__nvme_rw(t, KVT_NVME_READ, segs, n);
		if (rc)
			return rc;
		for (unsigned i = 0; i < n; i++) {
			const uint8_t *b = t->scan_buf + (size_t)i * KVT_NVME_BLOCK;
			struct kvt__nvme_region *R = &t->regions[r0 + i];
			R->seq = 0;
			if (kvt__nvme_block_ok(b, RG_MAGIC) &&
			    kvt_load_le64(b + 8) == t->instance &&
			    kvt_load_le64(b + 24) == r0 + i && kvt_load_le64(b + 16)) {
				R->seq = kvt_load_le64(b + 16);
				R->wp = KVT_NVME_BLOCK;
				if (R->seq >= t->next_seq)
					t->next_seq = R->seq + 1;
			}
		}
	}
	return 0;
}

/* Looks at the block at cursor wp of region r and moves wp past it. @return : false to stop. */
static bool scan_block(struct kvt_nvme *t, uint64_t r, const uint8_t *b)
{
	struct kvt__nvme_region *R = &t->regions[r];
	uint64_t room = kvt__nvme_region_end(t, R) - R->wp;
	if (kvt__nvme_block_ok(b, TB_MAGIC) && kvt_load_le64(b + 8) == t->instance) {
		uint64_t need =
		    KVT_ALIGN_UP((uint64_t)kvt_load_le32(b + 16), (uint64_t)KVT_NVME_BLOCK);
		if (!need || need > room)
			return false;
		R->wp += need;
		return true;
	}
	struct kvt_chunk_hdr h;
	if (kvt_chunk_hdr_decode(b, &h) || h.payload_bytes > t->max_rec - KVT_CHUNK_HDR_BYTES)
		return false;
	uint32_t rec_len = (uint32_t)(KVT_CHUNK_HDR_BYTES + h.payload_bytes);
	uint64_t need = kvt__nvme_padded(rec_len);
	/* append moves wp past the record */
	return need <= room &&
	       !kvt__nvme_log_append(t, &h, kvt__nvme_region_start(t, r) + R->wp, rec_len);
}

/* Walks the records of up to SCAN_BATCH regions in lock step: one header read each per round. */
static int scan_regions(struct kvt_nvme *t)
{
	uint64_t active[SCAN_BATCH];
	struct kvt__nvme_seg segs[SCAN_BATCH];
	unsigned batch = KVT_MIN(SCAN_BATCH, KVT_MAX(t->eng.depth, 8u));
	for (uint64_t r0 = 0; r0 < t->n_regions; r0 += batch) {
		unsigned n = 0;
		for (uint64_t r = r0; r < KVT_MIN(r0 + batch, t->n_regions); r++)
			if (t->regions[r].seq)
				active[n++] = r;
		while (n) {
			for (unsigned i = 0; i < n; i++)
				segs[i] = (struct kvt__nvme_seg){
				    kvt__nvme_region_start(t, active[i]) + t->regions[active[i]].wp,
				    t->scan_buf + (size_t)i * KVT_NVME_BLOCK, KVT_NVME_BLOCK};
			int rc = kvt__nvme_rw(t, KVT_NVME_READ, segs, n);
			if (rc)
				return rc;
			unsigned m = 0;
			for (unsigned i = 0; i < n; i++) {
				struct kvt__nvme_region *R = &t->regions[active[i]];
				if (scan_block(t, active[i], segs[i].buf) &&
				    R->wp < kvt__nvme_region_end(t, R))
					active[m++] = active[i];
			}
			n = m;
		}
	}
	return 0;
}

/* Verifies every record of the head region (where a crash can tear a write): read in batches of
 * up to KVT_NVME_RW_MAX records and VERIFY_BUF bytes (a larger record alone), all at once. */
#define VERIFY_BUF (8u << 20)
static int verify_head(struct kvt_nvme *t)
{
	struct kvt__nvme_region *R = &t->regions[t->head];
	if (!R->seq || !R->n_recs)
		return 0;
	size_t cap = (size_t)KVT_MIN((uint64_t)VERIFY_BUF, t->region_bytes);
	for (uint32_t i = 0; i < R->n_recs; i++)
		cap = KVT_MAX(cap, (size_t)kvt__nvme_padded(R->recs[i].rec_len));
	uint8_t *buf = aligned_alloc(KVT_TIER_ALIGN, cap);
	struct kvt__nvme_seg *segs = calloc(KVT_NVME_RW_MAX, sizeof(*segs));
	if (!buf || !segs) {
		free(buf), free(segs);
		return -ENOMEM;
	}
	for (uint32_t i0 = 0, m; i0 < R->n_recs; i0 += m) {
		size_t used = 0;
		for (m = 0; m < KVT_NVME_RW_MAX && i0 + m < R->n_recs; m++) {
			const struct kvt__nvme_rec *rec = &R->recs[i0 + m];
			size_t len = kvt__nvme_padded(rec->rec_len);
			if (used + len > cap)
				break;
			segs[m] = (struct kvt__nvme_seg){kvt__nvme_rec_off(t, t->head, rec),
			                                 buf + used, len};
			used += len;
		}
		int batch_rc = kvt__nvme_rw(t, KVT_NVME_READ, segs, m);
		for (uint32_t k = 0; k < m; k++) {
			uint32_t i = i0 + k;
			struct kvt__nvme_rec *rec = &R->recs[i];
			/* a batch that failed: each record read again alone, to tell which */
			int rc = batch_rc ? kvt__nvme_rw(t, KVT_NVME_READ, &segs[k], 1) : 0;
			const uint8_t *b = segs[k].buf;
			struct kvt_chunk_hdr h;
			bool ok = !rc && !kvt_chunk_hdr_decode(b, &h) &&
			          !kvt_chunk_verify(&h, b + KVT_CHUNK_HDR_BYTES,
			                            rec->rec_len - KVT_CHUNK_HDR_BYTES);
			if (ok)
				continue;
			KVT_NVME_ADD(t, st.corruptions, 1);
			bool last = i + 1 == R->n_recs;
			kvt__nvme_log_kill(t, t->head, rec, KVT_NVME_NO_GRAVE);
			if (last) { /* a torn tail: the next write goes where it was */
				R->wp = (uint64_t)rec->off_blocks * KVT_NVME_BLOCK;
				R->n_recs--;
			}
		}
	}
	free(segs);
	free(buf);
	return 0;
}

static void find_head(struct kvt_nvme *t)
{
	uint64_t best = 0;
	t->head = 0;
	for (uint64_t r = 0; r < t->n_regions; r++)
		if (t->regions[r].seq > best)
			best = t->regions[r].seq, t->head = r;
}

int kvt__nvme_log_open(struct kvt_nvme *t)
{
	t->regions = calloc(t->n_regions, sizeof(*t->regions));
	t->blk = aligned_alloc(KVT_TIER_ALIGN, 2 * KVT_NVME_BLOCK);
	t->scan_buf = aligned_alloc(KVT_TIER_ALIGN, (size_t)SCAN_BATCH * KVT_NVME_BLOCK);
	if (!t->regions || !t->blk || !t->scan_buf)
		return -ENOMEM;
	memset(t->blk, 0, 2 * KVT_NVME_BLOCK);
	/* the tier's own blocks (terminators, superblock, tombstones, scans) are fixed buffers
	 * too where the ring allows it; without, they are plain I/O, which works as well */
	kvt__nvme_pins_add(&t->eng.pins, t->blk, 2 * KVT_NVME_BLOCK, 0);
	kvt__nvme_pins_add(&t->eng.pins, t->scan_buf, (size_t)SCAN_BATCH * KVT_NVME_BLOCK, 0);
	t->next_seq = 1;
	int rc = sb_read(t);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		/* a new tier: regions of any older instance are ignored from now on */
		if (getrandom(&t->instance, sizeof(t->instance), 0) != sizeof(t->instance))
			t->instance = kvt_now_ns() ^ (uint64_t)getpid() << 32;
	} else {
		t->recovering = true;
		/* the index the last close saved, when it matches, replaces the walk (index.c) */
		rc = kvt__nvme_index_load(t);
		bool loaded = rc == 1;
		if (loaded)
			rc = 0;
		else if (!rc && !(rc = read_region_headers(t)) &&
		         !(rc = kvt__nvme_sum_open(t, !t->hooks.no_summary)))
			rc = scan_regions(t);
		if (!rc && loaded) /* which regions have summaries, for their live maps */
			rc = kvt__nvme_sum_open(t, false);
		find_head(t);
		if (!rc && !loaded)
			rc = verify_head(t);
		uint64_t used = 0;
		for (uint64_t r = 0; r < t->n_regions; r++) {
			struct kvt__nvme_region *R = &t->regions[r];
			used += R->seq != 0;
			R->n_placed = R->n_recs;
			/* sealed before the crash (or by an older build) without one: owed now */
			R->sum_due = R->seq && R->n_recs && !R->sum_start && r != t->head;
			t->sums_due += R->sum_due;
		}
		if (!rc && !loaded) {
			uint64_t with = KVT_NVME_GET(t, xs.sum_loaded);
			kvt_log(KVT_LOG_INFO,
			        "nvme: %s: %llu records found without an index: %llu regions read "
			        "from their summaries, %llu walked",
			        t->path, (unsigned long long)KVT_NVME_GET(t, st.chunks),
			        (unsigned long long)with, (unsigned long long)(used - with));
		}
		if (!rc)
			kvt__nvme_quota_trim_all(t);
		t->recovering = false;
		if (rc)
			return rc;
	}
	if (t->index_path[0])
		unlink(t->index_path); /* one the open did not read is stale from here on */
	return kvt__nvme_log_sb_write(t, false);
}

void kvt__nvme_log_close(struct kvt_nvme *t)
{
	if (t->regions)
		for (uint64_t r = 0; r < t->n_regions; r++)
			free(t->regions[r].recs);
	free(t->regions);
	free(t->blk);
	free(t->scan_buf);
	free(t->bury);
	t->regions = NULL, t->blk = NULL, t->scan_buf = NULL, t->bury = NULL;
	t->n_bury = t->cap_bury = 0;
}
