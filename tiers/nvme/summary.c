/*
 * summary.c -- per-region summaries: what an open after a crash reads instead of every record's
 * header block.
 *
 * Why: without the index a clean close saves (index.c), an open walks the log one 4 KiB header
 * block per record (log.c): 16 M reads per TB of 64 KiB chunks, 111-118 s per TB on the disk
 * docs/nvme.md measured. When the head leaves a region, the region's records are known and will
 * not change but by tombstones, so the tier writes them down once, at the region's end, and the
 * open after a crash reads that -- one read of ~36 blocks per 1,024 records -- instead.
 *
 * Layout, at the end of a region of E bytes (every block: magic, instance, the region's seq,
 * and XXH3 in its last 8 bytes, as the tier's other blocks):
 *   [E - (S+L+1)*4K, E - (L+1)*4K)  S entry blocks: 29 records each {off_blocks u32, rec_len u32,
 *                                   the 128-byte chunk header}, in place order
 *   [E - (L+1)*4K, E - 4K)          L live-map blocks: one bit per 4 KiB block of the region, set
 *                                   where a listed record starts and its tombstone has not landed
 *   [E - 4K, E)                     the trailer: region, entries, S, L, and the write pointer at
 *                                   the time of the summary
 * The body goes first and the trailer after it has landed: a trailer names a whole summary.
 * Records are placed only below the summary (kvt__nvme_region_fits keeps room for it as a region
 * fills: 136 bytes per record, 0.2 % at 64 KiB; a region's first record may take it all, and
 * then the region has none). A region is summarised once per use: a stale trailer from an
 * earlier use has another seq, and the open ignores it.
 *
 * Tombstones: a record removed after its region was summarised would come back from the
 * summary, so wherever a tombstone lands in such a region the live map is written again
 * (kvt__nvme_livemaps_write: with each remove, and once per region per batch of graves). A live
 * map that never lands is counted as unfenced, as a tombstone that never lands is.
 *
 * The open (kvt__nvme_sum_open): the trailers of all regions are read in batches (one 4 KiB read
 * per region); a valid one marks the region summarised (also after an index load, so that later
 * tombstones keep its live map right). Without the index, each summary is then read whole and
 * checked -- every block, each entry in order and inside the region, each header decoding to the
 * length listed -- and its live records appended; a summary with any fault is refused and the
 * region walked. The walk then goes on from each region's write pointer at the time of its
 * summary (a region the head came back to after passing it over may hold records past it), so
 * the result is what a walk of the whole log finds.
 */
#include "nvme_int.h"
#include "core/log.h"

#include <errno.h>
#include <stdlib.h>

#define SE_MAGIC     0x45534d564e54564bull /* "KVTNVMSE": entries */
#define SL_MAGIC     0x4c534d564e54564bull /* "KVTNVMSL": live map */
#define ST_MAGIC     0x54534d564e54564bull /* "KVTNVMST": trailer */
#define SUM_HEAD     KVT_NVME_SUM_HEAD     /* geometry.h: the layout's numbers */
#define SUM_ENTRY    KVT_NVME_SUM_ENTRY
#define SUM_PER_BLK  KVT_NVME_SUM_PER_BLK  /* 29 */
#define SUM_MAP_BITS KVT_NVME_SUM_MAP_BITS /* 32,448 */
#define SUM_READ_MAX (16u << 20)           /* bytes of summaries read at once at an open */

_Static_assert(SUM_ENTRY == 8u + KVT_CHUNK_HDR_BYTES, "a summary entry holds a chunk header");

static uint32_t entry_blocks(uint32_t n)
{
	return kvt_nvme_sum_entry_blocks(n);
}

static uint32_t map_blocks(const struct kvt_nvme *t)
{
	return kvt_nvme_sum_map_blocks(t->region_bytes);
}

static uint64_t sum_bytes(const struct kvt_nvme *t, uint32_t n)
{
	return kvt_nvme_sum_bytes(t->region_bytes, n);
}

bool kvt__nvme_region_fits(const struct kvt_nvme *t, const struct kvt__nvme_region *R,
                           uint64_t need)
{
	if (R->sum_start)
		return R->wp + need <= R->sum_start;
	return kvt_nvme_fits(t->region_bytes, R->wp, R->n_placed, need);
}

static void head_fill(const struct kvt_nvme *t, uint8_t *b, uint64_t magic, uint64_t seq,
                      uint32_t index, uint32_t count)
{
	memset(b, 0, KVT_NVME_BLOCK);
	kvt_store_le64(b, magic);
	kvt_store_le64(b + 8, t->instance);
	kvt_store_le64(b + 16, seq);
	kvt_store_le32(b + 24, index);
	kvt_store_le32(b + 28, count);
}

static bool head_ok(const struct kvt_nvme *t, const uint8_t *b, uint64_t magic, uint64_t seq,
                    uint32_t index)
{
	return kvt__nvme_block_ok(b, magic) && kvt_load_le64(b + 8) == t->instance &&
	       kvt_load_le64(b + 16) == seq && kvt_load_le32(b + 24) == index;
}

/* The L live-map blocks of region r into map: a bit per record on disk whose tombstone has not
 * landed (dead in memory but not buried: a hand-over not landed below, a grave not yet written:
 * a crash must find those, as a walk would). */
static void map_fill(const struct kvt_nvme *t, uint64_t r, uint8_t *map)
{
	const struct kvt__nvme_region *R = &t->regions[r];
	uint32_t L = map_blocks(t);
	for (uint32_t i = 0; i < L; i++)
		head_fill(t, map + (size_t)i * KVT_NVME_BLOCK, SL_MAGIC, R->seq, i, 0);
	for (uint32_t i = 0; i < R->n_recs; i++) {
		const struct kvt__nvme_rec *rec = &R->recs[i];
		if (rec->buried)
			continue;
		uint64_t bit = rec->off_blocks;
		uint8_t *b = map + (size_t)(bit / SUM_MAP_BITS) * KVT_NVME_BLOCK + SUM_HEAD;
		b[(bit % SUM_MAP_BITS) / 8] |= (uint8_t)(1u << (bit % 8));
	}
	for (uint32_t i = 0; i < L; i++)
		kvt__nvme_block_seal(map + (size_t)i * KVT_NVME_BLOCK);
}

static bool map_bit(const uint8_t *map, uint64_t bit)
{
	const uint8_t *b = map + (size_t)(bit / SUM_MAP_BITS) * KVT_NVME_BLOCK + SUM_HEAD;
	return b[(bit % SUM_MAP_BITS) / 8] >> (bit % 8) & 1;
}

/* Writes region r's summary. @return : 0 (written, or no room: none), or -errno. */
static int sum_write(struct kvt_nvme *t, uint64_t r)
{
	struct kvt__nvme_region *R = &t->regions[r];
	uint32_t n = 0;
	for (uint32_t i = 0; i < R->n_recs; i++)
		n += !R->recs[i].buried;
	uint64_t bytes = sum_bytes(t, n);
	if (!R->seq || R->sum_start || !n || R->wp + bytes > t->region_bytes)
		return 0;
	uint32_t S = entry_blocks(n), L = map_blocks(t);
	uint8_t *buf = aligned_alloc(KVT_TIER_ALIGN, bytes);
	if (!buf)
		return -ENOMEM;
	uint32_t k = 0;
	for (uint32_t i = 0; i < R->n_recs; i++) {
		const struct kvt__nvme_rec *rec = &R->recs[i];
		if (rec->buried)
			continue;
		uint8_t *b = buf + (size_t)(k / SUM_PER_BLK) * KVT_NVME_BLOCK;
		if (k % SUM_PER_BLK == 0)
			head_fill(t, b, SE_MAGIC, R->seq, k / SUM_PER_BLK,
			          KVT_MIN(SUM_PER_BLK, n - k));
		uint8_t *e = b + SUM_HEAD + (size_t)(k % SUM_PER_BLK) * SUM_ENTRY;
		kvt_store_le32(e, rec->off_blocks);
		kvt_store_le32(e + 4, rec->rec_len);
		kvt_chunk_hdr_encode(e + 8, &rec->h);
		k++;
	}
	for (uint32_t i = 0; i < S; i++)
		kvt__nvme_block_seal(buf + (size_t)i * KVT_NVME_BLOCK);
	map_fill(t, r, buf + (size_t)S * KVT_NVME_BLOCK);
	uint8_t *tr = buf + (size_t)(S + L) * KVT_NVME_BLOCK;
	head_fill(t, tr, ST_MAGIC, R->seq, (uint32_t)r, n);
	kvt_store_le32(tr + 32, S);
	kvt_store_le32(tr + 36, L);
	kvt_store_le64(tr + 40, R->wp);
	kvt__nvme_block_seal(tr);
	uint64_t start = t->region_bytes - bytes, at = kvt__nvme_region_start(t, r);
	int rc = kvt__nvme_rw1(t, KVT_NVME_WRITE, at + start, buf, bytes - KVT_NVME_BLOCK);
	bool trailer_issued = false;
	if (!rc) {
		trailer_issued = true;
		rc = kvt__nvme_rw1(t, KVT_NVME_WRITE, at + t->region_bytes - KVT_NVME_BLOCK, tr,
		                   KVT_NVME_BLOCK);
	}
	kvt__nvme_health(t, rc);
	free(buf);
	if (rc) {
		/* a trailer reported failed may have landed: zero it, or later tombstones would
		 * not reach a summary the open could trust */
		if (trailer_issued)
			kvt__nvme_log_fence(t, at + t->region_bytes - KVT_NVME_BLOCK,
			                    t->blk + KVT_NVME_BLOCK,
			                    "the zero block over a summary");
		kvt_log_rl(
		    KVT_LOG_WARN,
		    "nvme: %s: the summary of region %llu not written (%s): a crash walks it",
		    t->path, (unsigned long long)r, strerror(-rc));
		return rc;
	}
	R->sum_start = start;
	KVT_NVME_ADD(t, xs.sum_written, 1);
	return 0;
}

void kvt__nvme_sum_write_due(struct kvt_nvme *t, unsigned max)
{
	if (KVT_NVME_GET(t, st.disabled) || !t->sums_due)
		return;
	/* from where the last call stopped: many owed (an open after an older build) cost a
	 * walk of the regions once, not once per call */
	for (uint64_t step = 0; step < t->n_regions && max && t->sums_due; step++) {
		uint64_t r = t->sum_cursor;
		t->sum_cursor = (r + 1) % t->n_regions;
		struct kvt__nvme_region *R = &t->regions[r];
		if (!R->sum_due || r == t->head)
			continue;
		R->sum_due = false;
		t->sums_due--;
		if (sum_write(t, r) == 0 && R->sum_start)
			max--;
	}
}

void kvt__nvme_livemaps_write(struct kvt_nvme *t, const uint64_t *regions, unsigned n)
{
	uint32_t L = map_blocks(t);
	uint8_t *map = NULL;
	for (unsigned i = 0; i < n; i++) {
		uint64_t r = regions[i];
		if (!t->regions[r].sum_start)
			continue;
		bool seen = false;
		for (unsigned j = 0; j < i && !seen; j++)
			seen = regions[j] == r;
		if (seen)
			continue;
		if (!map && !(map = aligned_alloc(KVT_TIER_ALIGN, (size_t)L * KVT_NVME_BLOCK))) {
			KVT_NVME_ADD(t, xs.unfenced, 1);
			kvt_log_rl(KVT_LOG_ERROR,
			           "nvme: %s: no memory for a live map: removed records may come "
			           "back after a crash",
			           t->path);
			return;
		}
		map_fill(t, r, map);
		uint64_t at = kvt__nvme_region_start(t, r) + t->region_bytes -
		              (uint64_t)(L + 1) * KVT_NVME_BLOCK;
		if (!kvt__nvme_log_fence_len(t, at, map, (size_t)L * KVT_NVME_BLOCK,
		                             "a summarised region's live map"))
			KVT_NVME_ADD(t, xs.livemaps, 1);
	}
	free(map);
}

int kvt__nvme_bury_now(struct kvt_nvme *t, uint64_t r, struct kvt__nvme_rec *rec, void *tomb)
{
	uint64_t off = kvt__nvme_rec_off(t, r, rec);
	uint32_t L = map_blocks(t);
	uint8_t *map = t->regions[r].sum_start
	                   ? aligned_alloc(KVT_TIER_ALIGN, (size_t)L * KVT_NVME_BLOCK)
	                   : NULL;
	if (map) { /* the tombstone and the live map without it, side by side: one round trip */
		rec->buried = true;
		map_fill(t, r, map);
		struct kvt__nvme_seg segs[2] = {{off, tomb, KVT_NVME_BLOCK},
		                                {kvt__nvme_region_start(t, r) + t->region_bytes -
		                                     (uint64_t)(L + 1) * KVT_NVME_BLOCK,
		                                 map, (size_t)L * KVT_NVME_BLOCK}};
		int rc = kvt__nvme_rw(t, KVT_NVME_WRITE, segs, 2);
		kvt__nvme_health(t, rc);
		free(map);
		if (!rc) {
			KVT_NVME_ADD(t, xs.livemaps, 1);
			return 0;
		}
	}
	/* no summary, no memory for its map, or the pair failed: each alone, with retries */
	rec->buried = !kvt__nvme_log_fence(t, off, tomb, "the tombstone of a dropped record");
	if (rec->buried)
		kvt__nvme_livemaps_write(t, &r, 1);
	return rec->buried ? 0 : -EIO;
}

/* ---- the open ---- */

struct trailer {
	uint32_t n, S, L;
	uint64_t wp;
};

static bool trailer_decode(const struct kvt_nvme *t, uint64_t r, const uint8_t *b,
                           struct trailer *o)
{
	const struct kvt__nvme_region *R = &t->regions[r];
	if (!head_ok(t, b, ST_MAGIC, R->seq, (uint32_t)r) || r > UINT32_MAX)
		return false;
	o->n = kvt_load_le32(b + 28);
	o->S = kvt_load_le32(b + 32);
	o->L = kvt_load_le32(b + 36);
	o->wp = kvt_load_le64(b + 40);
	return o->n && o->S == entry_blocks(o->n) && o->L == map_blocks(t) &&
	       o->wp > KVT_NVME_BLOCK && o->wp % KVT_NVME_BLOCK == 0 &&
	       o->wp + sum_bytes(t, o->n) <= t->region_bytes;
}

/* Checks region r's summary in buf (S+L blocks) and appends its live records. @return : true
 * when it was whole and applied; false (nothing applied): walk the region. */
static bool sum_apply(struct kvt_nvme *t, uint64_t r, const struct trailer *tr, const uint8_t *buf)
{
	struct kvt__nvme_region *R = &t->regions[r];
	const uint8_t *map = buf + (size_t)tr->S * KVT_NVME_BLOCK;
	for (uint32_t i = 0; i < tr->S; i++) {
		const uint8_t *b = buf + (size_t)i * KVT_NVME_BLOCK;
		if (!head_ok(t, b, SE_MAGIC, R->seq, i) ||
		    kvt_load_le32(b + 28) != KVT_MIN(SUM_PER_BLK, tr->n - i * SUM_PER_BLK))
			return false;
	}
	for (uint32_t i = 0; i < tr->L; i++)
		if (!head_ok(t, map + (size_t)i * KVT_NVME_BLOCK, SL_MAGIC, R->seq, i))
			return false;
	uint64_t next = KVT_NVME_BLOCK; /* the first byte the next entry may start at */
	for (uint32_t k = 0; k < tr->n; k++) {
		const uint8_t *e = buf + (size_t)(k / SUM_PER_BLK) * KVT_NVME_BLOCK + SUM_HEAD +
		                   (size_t)(k % SUM_PER_BLK) * SUM_ENTRY;
		uint64_t off = (uint64_t)kvt_load_le32(e) * KVT_NVME_BLOCK;
		uint32_t len = kvt_load_le32(e + 4);
		struct kvt_chunk_hdr h;
		if (off < next || len <= KVT_CHUNK_HDR_BYTES || len > t->max_rec ||
		    off + kvt__nvme_padded(len) > tr->wp || kvt_chunk_hdr_decode(e + 8, &h) ||
		    h.payload_bytes != len - KVT_CHUNK_HDR_BYTES)
			return false;
		next = off + kvt__nvme_padded(len);
	}
	for (uint32_t k = 0; k < tr->n; k++) {
		const uint8_t *e = buf + (size_t)(k / SUM_PER_BLK) * KVT_NVME_BLOCK + SUM_HEAD +
		                   (size_t)(k % SUM_PER_BLK) * SUM_ENTRY;
		uint32_t off_blocks = kvt_load_le32(e);
		if (!map_bit(map, off_blocks))
			continue;
		struct kvt_chunk_hdr h;
		kvt_chunk_hdr_decode(e + 8, &h);
		uint64_t at = kvt__nvme_region_start(t, r) + (uint64_t)off_blocks * KVT_NVME_BLOCK;
		if (kvt__nvme_log_append(t, &h, at, kvt_load_le32(e + 4)))
			return false; /* no memory: the walk will fail the same way, and say so */
	}
	R->wp = tr->wp;
	return true;
}

/* Reads and applies the summaries of regions[0..n) (trailers in tr), with bytes in all. */
static int sum_load(struct kvt_nvme *t, const uint64_t *regions, const struct trailer *tr,
                    unsigned n, uint64_t bytes)
{
	uint8_t *buf = aligned_alloc(KVT_TIER_ALIGN, bytes);
	struct kvt__nvme_seg *segs = calloc(n, sizeof(*segs));
	if (!buf || !segs) {
		free(buf), free(segs);
		return -ENOMEM;
	}
	uint64_t at = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t len = ((uint64_t)tr[i].S + tr[i].L) * KVT_NVME_BLOCK;
		segs[i] = (struct kvt__nvme_seg){kvt__nvme_region_start(t, regions[i]) +
		                                     t->region_bytes - len - KVT_NVME_BLOCK,
		                                 buf + at, len};
		at += len;
	}
	int rc = kvt__nvme_rw(t, KVT_NVME_READ, segs, n);
	for (unsigned i = 0; !rc && i < n; i++) {
		struct kvt__nvme_region *R = &t->regions[regions[i]];
		uint32_t before = R->n_recs;
		if (sum_apply(t, regions[i], &tr[i], segs[i].buf)) {
			KVT_NVME_ADD(t, xs.sum_loaded, 1);
			continue;
		}
		/* refused: whatever it appended goes (nothing is appended before the checks, but
		 * an append that ran out of memory leaves a part) and the region is walked */
		for (uint32_t k = before; k < R->n_recs; k++)
			kvt__nvme_log_unlink(t, regions[i], &R->recs[k]);
		R->n_recs = before;
		R->sum_start = 0;
		R->wp = KVT_NVME_BLOCK;
		KVT_NVME_ADD(t, xs.sum_refused, 1);
		kvt_log(KVT_LOG_WARN, "nvme: %s: the summary of region %llu is damaged: walking it",
		        t->path, (unsigned long long)regions[i]);
	}
	free(buf);
	free(segs);
	return rc;
}

int kvt__nvme_sum_open(struct kvt_nvme *t, bool load)
{
	enum { BATCH = 256 };
	struct kvt__nvme_seg segs[BATCH] = {{0}};
	uint64_t regions[BATCH], want[BATCH];
	struct trailer got[BATCH];
	uint8_t *blocks = aligned_alloc(KVT_TIER_ALIGN, (size_t)BATCH * KVT_NVME_BLOCK);
	if (!blocks)
		return -ENOMEM;
	int rc = 0;
	unsigned n_load = 0;
	uint64_t load_bytes = 0;
	for (uint64_t r0 = 0; !rc && r0 < t->n_regions; r0 += BATCH) {
		unsigned n = 0;
		for (uint64_t r = r0; r < KVT_MIN(r0 + BATCH, t->n_regions); r++) {
			t->regions[r].sum_start = 0;
			if (!t->regions[r].seq)
				continue;
			regions[n] = r;
			segs[n] = (struct kvt__nvme_seg){
			    kvt__nvme_region_start(t, r) + t->region_bytes - KVT_NVME_BLOCK,
			    blocks + (size_t)n * KVT_NVME_BLOCK, KVT_NVME_BLOCK};
			n++;
		}
		if (!n || (rc = kvt__nvme_rw(t, KVT_NVME_READ, segs, n)))
			continue;
		for (unsigned i = 0; !rc && i < n; i++) {
			struct trailer x;
			uint64_t r = regions[i];
			if (!trailer_decode(t, r, segs[i].buf, &x))
				continue;
			t->regions[r].sum_start = t->region_bytes - sum_bytes(t, x.n);
			if (!load)
				continue;
			uint64_t len = ((uint64_t)x.S + x.L) * KVT_NVME_BLOCK;
			if (n_load == BATCH || load_bytes + len > SUM_READ_MAX) {
				rc = sum_load(t, want, got, n_load, load_bytes);
				n_load = 0, load_bytes = 0;
			}
			want[n_load] = r, got[n_load++] = x;
			load_bytes += len;
		}
	}
	if (!rc && n_load)
		rc = sum_load(t, want, got, n_load, load_bytes);
	free(blocks);
	return rc;
}
