/*
 * index.c -- the nvme tier's index, saved at a clean close so that the next open need not walk
 * the log (RELIABILITY.md D1: a warm roll rebuilds the index in <= 30 s per TB).
 *
 * Why: the walk (log.c) reads one 4 KiB header block per record. With 64 KiB chunks that is
 * 15 M random reads per TB, ~95 s on the disk this was measured on before any walking. At a
 * clean close the tier knows its whole index, so it writes it out as one sequential file, and
 * the next open reads that back instead: ~2.2 GB per TB of 64 KiB records (144 bytes each),
 * read in order.
 *
 * Where: "<nvme.path>.index" beside a regular file; DATA_DIR/nvme.index for a block device (no
 * index without a data directory). It is written to "<name>.tmp", synced, renamed over the old
 * one, and the directory synced, before the clean superblock is written.
 *
 * When it is trusted: only when it names the same instance and geometry as the superblock found
 * at the open, and that superblock's generation, and both of its checksums hold. A clean close
 * writes the index for the generation of the clean superblock it writes right after; a close on
 * a device that fails (the tier disabled: no superblock, grave or tombstone can be written)
 * writes it for the generation already on the device, so that what was removed meanwhile is not
 * brought back by a walk. Every open writes a new superblock (the next generation) before its
 * first write, so an index is good for one open only: a crash after that open leaves a
 * generation no index names, and the open after it walks. The file is removed once an open has
 * read it (or refused it). Anything odd -- a short file, a checksum, a record out of place, a
 * header that does not decode -- makes the open walk the log, with a warning; nothing is applied
 * before the whole file has been checked.
 *
 * What it holds: per region its seq, write pointer and live records (the encoded 128-byte chunk
 * header, its place, its length, and the clock and kvt_done bits, which a walk cannot know). A
 * record dropped in memory whose tombstone never landed (`unfenced`) is not in it, so a warm
 * roll does not bring it back as a walk would. Records handed over to the next tier and not yet
 * landed there are dead in memory but must be found by a restart (the copy below may be lost):
 * while any region has such records, no index is written and the next open walks.
 *
 * Layout (little-endian): a 4 KiB header block (magic, version, record size, instance,
 * superblock generation, region bytes, regions, data offset, records, body bytes, body checksum;
 * the block's own checksum in its last 8 bytes), then the body: n_regions x {seq u64, wp u64,
 * live u32, 0 u32}, then the records in region order, 144 bytes each {header[128], off_blocks
 * u32, rec_len u32, flags u32, 0 u32}. The body's checksum is XXH3-64.
 *
 * What trusting it gives up: damage done to the device while the daemon was down is found when
 * a record is read (its checksum and identity are checked on every read: -EBADMSG, dropped), not
 * at the open; the walk would have left such records out. No wrong byte is served either way.
 */
#include "nvme_int.h"
#include "core/file.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

#define IX_MAGIC   0x58494d564e54564bull /* "KVTNVMIX" */
#define IX_VERSION 1u
#define IX_HDR     4096u
#define IX_REGION  24u
#define IX_REC     144u
#define IX_SUM_OFF (IX_HDR - 8)
#define IX_BUF     (1u << 20)
#define IX_F_HIT   1u
#define IX_F_DONE  2u

void kvt__nvme_index_path(struct kvt_nvme *t)
{
	int n;
	t->index_path[0] = '\0';
	if (t->hooks.no_index)
		return;
	if (!t->is_blk)
		n = snprintf(t->index_path, sizeof(t->index_path), "%s.index", t->path);
	else if (t->env.data_dir)
		n = snprintf(t->index_path, sizeof(t->index_path), "%s/nvme.index",
		             t->env.data_dir);
	else
		return;
	if (n < 0 || (size_t)n >= sizeof(t->index_path))
		t->index_path[0] = '\0';
}

/* ---- save ---- */

struct ix_out {
	int fd;
	uint8_t *buf;
	size_t n;
	XXH3_state_t *sum;
	int err;
};

static void out_flush(struct ix_out *o)
{
	if (!o->err)
		o->err = kvt_file_write_all(o->fd, o->buf, o->n);
	o->n = 0;
}

static void out_put(struct ix_out *o, const void *p, size_t len)
{
	XXH3_64bits_update(o->sum, p, len);
	while (len) {
		size_t m = KVT_MIN(len, IX_BUF - o->n);
		memcpy(o->buf + o->n, p, m);
		o->n += m, p = (const uint8_t *)p + m, len -= m;
		if (o->n == IX_BUF)
			out_flush(o);
	}
}

static int sync_dir_of(const char *path)
{
	char d[sizeof(((struct kvt_nvme *)0)->index_path)];
	snprintf(d, sizeof(d), "%s", path);
	int fd = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) ? -errno : 0;
	close(fd);
	return rc;
}

static int write_all(struct kvt_nvme *t, struct ix_out *o, uint64_t gen)
{
	uint64_t n_recs = 0;
	uint8_t e[IX_REC];
	memset(e, 0, sizeof(e));
	for (uint64_t r = 0; r < t->n_regions; r++) {
		const struct kvt__nvme_region *R = &t->regions[r];
		uint32_t live = 0;
		for (uint32_t i = 0; R->seq && i < R->n_recs; i++)
			live += R->recs[i].alive;
		kvt_store_le64(e, R->seq);
		kvt_store_le64(e + 8, R->seq ? R->wp : 0);
		kvt_store_le32(e + 16, live);
		out_put(o, e, IX_REGION);
		n_recs += live;
	}
	memset(e, 0, sizeof(e));
	for (uint64_t r = 0; r < t->n_regions; r++) {
		const struct kvt__nvme_region *R = &t->regions[r];
		for (uint32_t i = 0; R->seq && i < R->n_recs; i++) {
			const struct kvt__nvme_rec *rec = &R->recs[i];
			if (!rec->alive)
				continue;
			kvt_chunk_hdr_encode(e, &rec->h);
			kvt_store_le32(e + 128, rec->off_blocks);
			kvt_store_le32(e + 132, rec->rec_len);
			kvt_store_le32(e + 136,
			               (rec->hit ? IX_F_HIT : 0) | (rec->done ? IX_F_DONE : 0));
			out_put(o, e, IX_REC);
		}
	}
	out_flush(o);
	if (o->err)
		return o->err;
	uint8_t *h = o->buf;
	memset(h, 0, IX_HDR);
	kvt_store_le64(h, IX_MAGIC);
	kvt_store_le32(h + 8, IX_VERSION);
	kvt_store_le32(h + 12, IX_REC);
	kvt_store_le64(h + 16, t->instance);
	kvt_store_le64(h + 24, gen);
	kvt_store_le64(h + 32, t->region_bytes);
	kvt_store_le64(h + 40, t->n_regions);
	kvt_store_le64(h + 48, t->data_off);
	kvt_store_le64(h + 56, n_recs);
	kvt_store_le64(h + 64, t->n_regions * IX_REGION + n_recs * IX_REC);
	kvt_store_le64(h + 72, XXH3_64bits_digest(o->sum));
	kvt_store_le64(h + IX_SUM_OFF, XXH3_64bits(h, IX_SUM_OFF));
	if (pwrite(o->fd, h, IX_HDR, 0) != (ssize_t)IX_HDR)
		return errno ? -errno : -EIO;
	return fsync(o->fd) ? -errno : 0;
}

int kvt__nvme_index_save(struct kvt_nvme *t, uint64_t gen)
{
	if (!t->index_path[0])
		return 0;
	unlink(t->index_path); /* whatever happens below, an older index is of no use */
	for (uint64_t r = 0; r < t->n_regions; r++)
		if (__atomic_load_n(&t->regions[r].handovers_queued, __ATOMIC_ACQUIRE)) {
			kvt_log(KVT_LOG_INFO,
			        "nvme: %s: records handed to the next tier have not landed there: "
			        "no index written, the next open walks the log",
			        t->path);
			return -EBUSY;
		}
	char tmp[sizeof(t->index_path) + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", t->index_path);
	struct ix_out o = {.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600),
	                   .buf = malloc(IX_BUF),
	                   .sum = XXH3_createState()};
	int rc = o.fd < 0 ? -errno : !o.buf || !o.sum ? -ENOMEM : 0;
	if (!rc && XXH3_64bits_reset(o.sum) != XXH_OK)
		rc = -EINVAL;
	if (!rc && lseek(o.fd, IX_HDR, SEEK_SET) < 0)
		rc = -errno;
	if (!rc)
		rc = write_all(t, &o, gen);
	if (o.fd >= 0 && close(o.fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, t->index_path))
		rc = -errno;
	if (!rc)
		rc = sync_dir_of(t->index_path);
	free(o.buf);
	XXH3_freeState(o.sum);
	if (rc) {
		unlink(tmp);
		unlink(t->index_path);
		kvt_log(KVT_LOG_WARN,
		        "nvme: index %s not written (%s): the next open walks the log",
		        t->index_path, strerror(-rc));
		return rc;
	}
	KVT_NVME_ADD(t, xs.index_saves, 1);
	return 0;
}

/* ---- load ---- */

/* Checks the body against the tier. @return : NULL, or why the index cannot be used. */
static const char *check_body(struct kvt_nvme *t, const uint8_t *body, uint64_t n_recs)
{
	const uint8_t *rec = body + t->n_regions * IX_REGION;
	uint64_t seen = 0;
	for (uint64_t r = 0; r < t->n_regions; r++) {
		const uint8_t *e = body + r * IX_REGION;
		uint64_t seq = kvt_load_le64(e), wp = kvt_load_le64(e + 8);
		uint32_t live = kvt_load_le32(e + 16);
		if (!seq) {
			if (live)
				return "records in a free region";
			continue;
		}
		if (seq >= 1ull << 62 || wp < KVT_NVME_BLOCK || wp > t->region_bytes ||
		    wp % KVT_NVME_BLOCK)
			return "a region's seq or write pointer is out of range";
		if (live > n_recs - seen)
			return "more records than the header says";
		uint64_t end = KVT_NVME_BLOCK;
		for (uint32_t i = 0; i < live; i++, rec += IX_REC) {
			struct kvt_chunk_hdr h;
			uint64_t off = (uint64_t)kvt_load_le32(rec + 128) * KVT_NVME_BLOCK;
			uint32_t len = kvt_load_le32(rec + 132);
			if (kvt_chunk_hdr_decode(rec, &h))
				return "a chunk header does not decode";
			if (len != KVT_CHUNK_HDR_BYTES + h.payload_bytes || len > t->max_rec)
				return "a record's length does not match its header";
			if (off < end || off + kvt__nvme_padded(len) > wp)
				return "a record is out of place";
			end = off + kvt__nvme_padded(len);
		}
		seen += live;
	}
	return seen == n_recs ? NULL : "fewer records than the header says";
}

static int apply(struct kvt_nvme *t, const uint8_t *body)
{
	const uint8_t *rec = body + t->n_regions * IX_REGION;
	for (uint64_t r = 0; r < t->n_regions; r++) {
		const uint8_t *e = body + r * IX_REGION;
		struct kvt__nvme_region *R = &t->regions[r];
		R->seq = kvt_load_le64(e);
		if (!R->seq)
			continue;
		R->wp = KVT_NVME_BLOCK;
		if (R->seq >= t->next_seq)
			t->next_seq = R->seq + 1;
		uint32_t live = kvt_load_le32(e + 16);
		if (live > R->cap_recs) { /* room for them all at once (append would double) */
			void *p = realloc(R->recs, live * sizeof(*R->recs));
			if (!p)
				return -ENOMEM;
			R->recs = p, R->cap_recs = live;
		}
		for (uint32_t i = 0; i < live; i++, rec += IX_REC) {
			struct kvt_chunk_hdr h;
			kvt_chunk_hdr_decode(rec, &h); /* checked */
			uint64_t off = (uint64_t)kvt_load_le32(rec + 128) * KVT_NVME_BLOCK;
			int rc = kvt__nvme_log_append(t, &h, kvt__nvme_region_start(t, r) + off,
			                              kvt_load_le32(rec + 132));
			if (rc)
				return rc;
			uint32_t f = kvt_load_le32(rec + 136);
			R->recs[R->n_recs - 1].hit = f & IX_F_HIT;
			R->recs[R->n_recs - 1].done = f & IX_F_DONE;
		}
		R->wp = kvt_load_le64(e + 8);
	}
	return 0;
}

static const char *check_header(struct kvt_nvme *t, const uint8_t *h, uint64_t size)
{
	if (size < IX_HDR)
		return "shorter than its header";
	if (kvt_load_le64(h) != IX_MAGIC ||
	    kvt_load_le64(h + IX_SUM_OFF) != XXH3_64bits(h, IX_SUM_OFF))
		return "its header is damaged";
	if (kvt_load_le32(h + 8) != IX_VERSION || kvt_load_le32(h + 12) != IX_REC)
		return "another version";
	if (kvt_load_le64(h + 16) != t->instance || kvt_load_le64(h + 24) != t->sb_gen)
		return "written for another instance or generation of the tier";
	if (kvt_load_le64(h + 32) != t->region_bytes || kvt_load_le64(h + 40) != t->n_regions ||
	    kvt_load_le64(h + 48) != t->data_off)
		return "written for another geometry";
	uint64_t n = kvt_load_le64(h + 56), body = kvt_load_le64(h + 64);
	if (n > (size - IX_HDR) / IX_REC || body != size - IX_HDR ||
	    body != t->n_regions * IX_REGION + n * IX_REC)
		return "its size does not match its header";
	if (XXH3_64bits(h + IX_HDR, body) != kvt_load_le64(h + 72))
		return "its body is damaged";
	return NULL;
}

int kvt__nvme_index_load(struct kvt_nvme *t)
{
	if (!t->index_path[0])
		return 0;
	/* a larger file is no index of this tier: not read, it could be anything */
	size_t max = IX_HDR + t->n_regions * IX_REGION +
	             t->n_regions * (t->region_bytes / KVT_NVME_BLOCK) * IX_REC;
	const uint8_t *m = NULL;
	size_t size = 0;
	int rc = kvt_file_map(t->index_path, max, &m, &size);
	if (rc == -ENOENT)
		return 0;
	const char *why = rc == -EFBIG ? "larger than any index of this tier" : NULL;
	if (rc && !why)
		why = strerror(-rc);
	if (!why)
		why = check_header(t, m, size);
	if (!why)
		why = check_body(t, m + IX_HDR, kvt_load_le64(m + 56));
	rc = 0;
	if (!why) {
		rc = apply(t, m + IX_HDR);
		if (!rc) {
			KVT_NVME_ADD(t, xs.index_loads, 1);
			kvt_log(KVT_LOG_INFO,
			        "nvme: %s: %llu records from the index saved at the last clean "
			        "close (no walk)",
			        t->path, (unsigned long long)kvt_load_le64(m + 56));
			rc = 1;
		}
	} else {
		KVT_NVME_ADD(t, xs.index_refused, 1);
		kvt_log(KVT_LOG_WARN, "nvme: index %s not used (%s): walking the log",
		        t->index_path, why);
	}
	kvt_file_unmap(m, size);
	unlink(t->index_path); /* good for this open only (the superblock moves on) */
	return rc;
}
