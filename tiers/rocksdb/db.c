/*
 * db.c -- every RocksDB object the tier owns: options, the database handle, error mapping.
 *
 * The database is configured as a cache, not a store of record (docs/rocksdb.md measures why):
 * - WAL off by default: chunks are re-creatable, and close() flushes the memtable, so only a
 *   crash loses the unflushed tail; rocksdb.wal=true makes every acknowledged write survive a
 *   process crash (not a power loss: no fsync per write).
 * - No RocksDB compression by default (the codec already compressed); lz4/zstd as options.
 * - Writes use no_slowdown, so a stalled or failed database answers at once (Incomplete or the
 *   background error) instead of blocking the daemon's tier worker.
 * - Values at least rocksdb.blob_min_bytes go to blob files (0: off) with blob GC on, so
 *   compaction moves 36-byte keys instead of megabyte values.
 * - The block cache is one LRU cache of rocksdb.block_cache_bytes (0: none).
 * - Size is capped by the tier's own eviction (tier.c), not by FIFO compaction, so the tier's
 *   index always knows what is stored.
 * - Each record's metadata (its header and when it was written, 136 bytes) is stored beside it
 *   under a key past every record's: 36 bytes of 0xff, a zero byte, then the record's key (the
 *   meta range, kvt__rdb_meta_key). Every write batch changes both, and one column family has
 *   one memtable, so a flush or a crash keeps or loses them together; the open after a crash
 *   and iterate() walk the meta range, 209 bytes a record, instead of every value (tier.c). A
 *   marker key in the range says it is complete. (A second column family would have needed
 *   atomic_flush, which in RocksDB 7.8 aborts on an assertion when flushes of one family and
 *   of both overlap: seen in test_rocksdb_tier.)
 * - Open table files are bounded by the process's fd limit: RocksDB keeps every table open by
 *   default, a large tier has thousands (64 MiB each), and once a compaction could not open its
 *   tables every later write failed (test_rocksdb_tier few_fds, 128 fds). Half the soft limit
 *   goes to tables (at least 64); past 2^20, all of them.
 *
 * Pitfalls of the C API handled here: every errptr is freed by kvt__rdb_err(); every options
 * object is destroyed in kvt__rdb_db_close(); rocksdb_open copies the options, so they are kept
 * only for reopen.
 *
 * Faults (tests only): the tier's writes and point reads go through kvt__rdb_write and
 * kvt__rdb_get, where conf.fault_ppm (KVTIER_ROCKSDB_FAULT_PPM for a daemon) injects, at that
 * many per million calls each, a write refused before it is applied (-EAGAIN, as no_slowdown
 * answers in a write stall), a write applied and then reported failed (-EIO: with the WAL on a
 * failed sync leaves the batch in the log), and a read that fails (-EIO). RocksDB produces
 * these on a sick disk, but not on demand.
 */
#include "rocksdb_int.h"
#include "core/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WRITE_BUFFER_BYTES (64ull << 20)
#define BLOB_FILE_BYTES    (256ull << 20)
#define PASS_KEY_MIN       40u /* bytes of the keys a walk past damage seeks to, at least */
#define PASS_KEY_MAX       128u
#define PASS_STRETCHES_MAX 4096u /* damaged stretches one walk passes over; then it fails */

/* In the meta range, and not a record's metadata (not KVT__RDB_META_KEY_BYTES long). Present
 * once the range holds every record's metadata: written at the first open of a database, new
 * or made before the metadata, after the walk of its records that filled it. */
static const char meta_marker[] = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
                                  "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
                                  "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
                                  "\0kvtier.meta.complete.v2"; /* v1: 16-byte metadata, no header */

int kvt__rdb_err_code(const char *err)
{
	int rc = -EIO;
	if (strstr(err, "No space left") || strstr(err, "NoSpace"))
		rc = -ENOSPC;
	else if (strstr(err, "While lock file")) /* another process has the database open */
		rc = -EBUSY;
	else if (!strncmp(err, "Result incomplete", 17) || strstr(err, "Write stall") ||
	         !strncmp(err, "Resource busy", 13) ||
	         !strncmp(err, "Operation failed. Try again", 27))
		rc = -EAGAIN;
	else if (!strncmp(err, "Corruption", 10))
		rc = -EBADMSG;
	else if (!strncmp(err, "Invalid argument", 16) || !strncmp(err, "Not implemented", 15))
		rc = -EINVAL;
	return rc;
}

int kvt__rdb_err(char *err)
{
	if (!err)
		return 0;
	int rc = kvt__rdb_err_code(err);
	kvt_log_rl(KVT_LOG_WARN, "rocksdb: %s", err);
	rocksdb_free(err);
	return rc;
}

static int parse_compression(const char *s, int *out)
{
	if (!*s || !strcasecmp(s, "none"))
		*out = rocksdb_no_compression;
	else if (!strcasecmp(s, "lz4"))
		*out = rocksdb_lz4_compression;
	else if (!strcasecmp(s, "zstd"))
		*out = rocksdb_zstd_compression;
	else
		return -EINVAL;
	return 0;
}

int kvt__rdb_conf_from_opts(struct kvt__rdb_conf *c, const struct kvt_options *o,
                            const char *data_dir)
{
	memset(c, 0, sizeof(*c));
	const char *p = kvt_opt_str(o, KVT_OPT_ROCKSDB_PATH);
	int n = *p ? snprintf(c->path, sizeof(c->path), "%s", p)
	           : snprintf(c->path, sizeof(c->path), "%s/rocksdb", data_dir ? data_dir : ".");
	if (n < 0 || (size_t)n >= sizeof(c->path))
		return -ENAMETOOLONG;
	c->wal = kvt_opt_u64(o, KVT_OPT_ROCKSDB_WAL) != 0;
	c->blob_min_bytes = kvt_opt_u64(o, KVT_OPT_ROCKSDB_BLOB_MIN_BYTES);
	c->repair_max_bytes = kvt_opt_u64(o, KVT_OPT_ROCKSDB_REPAIR_MAX_BYTES);
	c->block_cache_bytes = kvt_opt_u64(o, KVT_OPT_ROCKSDB_BLOCK_CACHE_BYTES);
	c->write_buffer_bytes = WRITE_BUFFER_BYTES;
	c->compaction = KVT__RDB_LEVEL;
	return parse_compression(kvt_opt_str(o, KVT_OPT_ROCKSDB_COMPRESSION), &c->compression);
}

/* How many table files RocksDB may keep open: -1 (all) when fds are plentiful. */
static int max_open_files(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= (1u << 20))
		return -1;
	return (int)KVT_MAX(rl.rlim_cur / 2, (rlim_t)64);
}

static void build_options(struct kvt__rdb_db *d, const struct kvt__rdb_conf *c)
{
	rocksdb_options_t *o = d->opts;
	rocksdb_options_set_create_if_missing(o, 1);
	rocksdb_options_set_compression(o, c->compression);
	rocksdb_options_set_write_buffer_size(o, c->write_buffer_bytes);
	rocksdb_options_set_max_write_buffer_number(o, 4);
	rocksdb_options_set_max_background_jobs(o, 2);
	rocksdb_options_set_max_open_files(o, max_open_files());
	if (c->target_file_bytes)
		rocksdb_options_set_target_file_size_base(o, c->target_file_bytes);
	rocksdb_options_set_info_log_level(o, 2 /* WARN: the LOG file stays small */);
	rocksdb_options_set_keep_log_file_num(o, 2);
	rocksdb_options_set_max_log_file_size(o, 1 << 20);
	rocksdb_options_set_compaction_style(o, c->compaction == KVT__RDB_UNIVERSAL
	                                            ? rocksdb_universal_compaction
	                                            : rocksdb_level_compaction);
	if (c->compaction == KVT__RDB_LEVEL)
		rocksdb_options_set_level_compaction_dynamic_level_bytes(o, 1);
	if (c->blob_min_bytes) {
		rocksdb_options_set_enable_blob_files(o, 1);
		rocksdb_options_set_min_blob_size(o, c->blob_min_bytes);
		rocksdb_options_set_blob_file_size(o, BLOB_FILE_BYTES);
		rocksdb_options_set_blob_compression_type(o, c->compression);
		rocksdb_options_set_enable_blob_gc(o, 1);
	}
	/* Every table's key range reaches the meta range at the end of the key space, so the
	 * level-0 tables all overlap and a point read would read a data block of each; a bloom
	 * filter (10 bits a key, owned by bbto) skips the tables that do not hold the key. */
	rocksdb_block_based_options_set_filter_policy(
	    d->bbto, rocksdb_filterpolicy_create_bloom_full(KVT__RDB_BLOOM_BITS));
	if (d->cache)
		rocksdb_block_based_options_set_block_cache(d->bbto, d->cache);
	else
		rocksdb_block_based_options_set_no_block_cache(d->bbto, 1);
	rocksdb_options_set_block_based_table_factory(o, d->bbto);

	rocksdb_writeoptions_set_no_slowdown(d->wo, 1);
	rocksdb_writeoptions_disable_WAL(d->wo, !c->wal);
	/* Every read verifies RocksDB's checksums (the default): a damaged block read unverified
	 * can trip an assertion Debian's build keeps, and abort the daemon (the cursor's note in
	 * rocksdb_int.h). A walk of the records passes over a block it cannot read instead
	 * (tier.c, "Damage"). */
	kvt__rdb_meta_lo(d->meta_lo);
	for (int m = 0; m < 2; m++)
		rocksdb_readoptions_set_fill_cache(d->walk[m], 0);
	rocksdb_readoptions_set_iterate_upper_bound(d->walk[0], (const char *)d->meta_lo,
	                                            sizeof(d->meta_lo));
	rocksdb_readoptions_set_iterate_lower_bound(d->walk[1], (const char *)d->meta_lo,
	                                            sizeof(d->meta_lo));
	rocksdb_flushoptions_set_wait(d->fo, 0);
}

static int open_db(struct kvt__rdb_db *d)
{
	char *err = NULL;
	d->meta_whole = false;
	rocksdb_options_set_disable_auto_compactions(d->opts, d->quiet);
	d->db = rocksdb_open(d->opts, d->path, &err);
	if (err) { /* logged once per open, not rate-limited as kvt__rdb_err's line is */
		int rc = kvt__rdb_err_code(err);
		/* a manifest that CURRENT names and that is not there is damage, not a failing disk
		 */
		if (rc == -EIO && strstr(err, "MANIFEST") && strstr(err, "No such file"))
			rc = -EBADMSG;
		kvt_log(KVT_LOG_WARN, "rocksdb: %s: open: %s", d->path, err);
		rocksdb_free(err);
		return rc;
	}
	rocksdb_pinnableslice_t *ps =
	    rocksdb_get_pinned(d->db, d->ro, meta_marker, sizeof(meta_marker) - 1, &err);
	d->meta_whole = ps != NULL && !err;
	if (ps)
		rocksdb_pinnableslice_destroy(ps);
	kvt__rdb_err(err); /* damage: logged; the open reads the records */
	return 0;
}

void kvt__rdb_meta_lo(uint8_t out[KVT__RDB_META_LO_BYTES])
{
	memset(out, 0xff, KVT__RDB_KEY_BYTES);
	out[KVT__RDB_KEY_BYTES] = 0;
}

void kvt__rdb_meta_key(uint8_t out[KVT__RDB_META_KEY_BYTES], const uint8_t *key)
{
	kvt__rdb_meta_lo(out);
	memcpy(out + KVT__RDB_META_LO_BYTES, key, KVT__RDB_KEY_BYTES);
}

bool kvt__rdb_is_marker(const void *k, size_t len)
{
	return len == sizeof(meta_marker) - 1 && !memcmp(k, meta_marker, len);
}

void kvt__rdb_marker_put(rocksdb_writebatch_t *b)
{
	rocksdb_writebatch_put(b, meta_marker, sizeof(meta_marker) - 1, "", 0);
}

void kvt__rdb_marker_del(rocksdb_writebatch_t *b)
{
	rocksdb_writebatch_delete(b, meta_marker, sizeof(meta_marker) - 1);
}

void kvt__rdb_meta_clear(rocksdb_writebatch_t *b)
{
	uint8_t lo[KVT__RDB_META_LO_BYTES], hi[KVT__RDB_META_LO_BYTES];
	kvt__rdb_meta_lo(lo);
	memset(hi, 0xff, sizeof(hi)); /* past every key of the range */
	rocksdb_writebatch_delete_range(b, (const char *)lo, sizeof(lo), (const char *)hi,
	                                sizeof(hi));
}

int kvt__rdb_db_open(struct kvt__rdb_db *d, const struct kvt__rdb_conf *c)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path), "%s", c->path);
	d->fault_ppm = c->fault_ppm;
	d->fault_rng = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull | 1;
	d->repair_max_bytes = c->repair_max_bytes;
	d->compression = c->compression;
	d->write_buffer_bytes = c->write_buffer_bytes;
	kvt__rdb_rebuild_finish(d->path);
	if (mkdir(d->path, 0750) && errno != EEXIST)
		return -errno;
	d->opts = rocksdb_options_create();
	d->bbto = rocksdb_block_based_options_create();
	d->wo = rocksdb_writeoptions_create();
	d->ro = rocksdb_readoptions_create();
	d->walk[0] = rocksdb_readoptions_create();
	d->walk[1] = rocksdb_readoptions_create();
	d->fo = rocksdb_flushoptions_create();
	if (c->block_cache_bytes)
		d->cache = rocksdb_cache_create_lru(c->block_cache_bytes);
	if (!d->opts || !d->bbto || !d->wo || !d->ro || !d->walk[0] || !d->walk[1] || !d->fo ||
	    (c->block_cache_bytes && !d->cache)) {
		kvt__rdb_db_close(d);
		return -ENOMEM;
	}
	char current[sizeof(d->path) + 8];
	snprintf(current, sizeof(current), "%s/CURRENT", d->path);
	d->created = access(current, F_OK) && errno == ENOENT;
	build_options(d, c);
	d->blob_files = c->blob_min_bytes != 0;
	int rc;
	if (d->created && kvt__rdb_orphan_tables(d->path)) { /* an open would delete them */
		d->created = false;
		rc = kvt__rdb_repair(d, "its tables are there and its CURRENT file is not");
	} else if (!d->created && kvt__rdb_manifest_read_short(d->path)) { /* no older version */
		rc = kvt__rdb_repair(
		    d, "its manifest is damaged where RocksDB would read it as its end");
	} else {
		rc = open_db(d);
		/* a table whose footer says "no checksums" opens, and would be read unchecked */
		if (!rc && kvt__rdb_unchecked_table(d))
			rc = -EBADMSG;
		if (rc == -EBADMSG) /* a table RocksDB cannot open: dropped (salvage.c) */
			rc = kvt__rdb_salvage_open(d);
		if (rc == -EBADMSG) /* a damaged manifest, or tables that cannot be dropped */
			rc = kvt__rdb_repair(d, "the database cannot be opened");
	}
	/* not repairable: it is a cache, made anew */
	if (rc == -EBADMSG) {
		kvt_log(KVT_LOG_ERROR, "rocksdb: %s is corrupt: destroying it and starting empty",
		        d->path);
		rc = kvt__rdb_db_wipe(d);
	}
	if (rc)
		kvt__rdb_db_close(d);
	return rc;
}

int kvt__rdb_db_wipe(struct kvt__rdb_db *d)
{
	char *err = NULL;
	if (d->db)
		rocksdb_close(d->db);
	d->db = NULL;
	rocksdb_destroy_db(d->opts, d->path, &err);
	int rc = kvt__rdb_err(err);
	if (!rc)
		rc = open_db(d);
	if (!rc) { /* empty: complete; a seal that fails costs a scan of nothing */
		rocksdb_writebatch_t *b = rocksdb_writebatch_create();
		kvt__rdb_marker_put(b);
		d->meta_whole = b && kvt__rdb_write(d, b) == 0;
		rocksdb_writebatch_destroy(b);
	}
	return rc;
}

void kvt__rdb_db_close(struct kvt__rdb_db *d)
{
	if (d->db)
		rocksdb_close(d->db); /* flushes the memtable when the WAL is off */
	d->db = NULL;
	if (d->fo)
		rocksdb_flushoptions_destroy(d->fo);
	for (int m = 0; m < 2; m++)
		if (d->walk[m])
			rocksdb_readoptions_destroy(d->walk[m]);
	if (d->ro)
		rocksdb_readoptions_destroy(d->ro);
	if (d->wo)
		rocksdb_writeoptions_destroy(d->wo);
	if (d->opts)
		rocksdb_options_destroy(d->opts);
	if (d->bbto)
		rocksdb_block_based_options_destroy(d->bbto);
	if (d->cache)
		rocksdb_cache_destroy(d->cache);
	d->fo = NULL, d->walk[0] = d->walk[1] = d->ro = NULL, d->wo = NULL;
	d->opts = NULL, d->bbto = NULL, d->cache = NULL;
}

int kvt__rdb_db_reopen_lax(struct kvt__rdb_db *d)
{
	if (d->db)
		rocksdb_close(d->db);
	d->db = NULL;
	rocksdb_options_set_paranoid_checks(d->opts, 0);
	int rc = open_db(d);
	rocksdb_options_set_paranoid_checks(d->opts, 1);
	return rc;
}

int kvt__rdb_err_db(struct kvt__rdb_db *d, char *err)
{
	if (err && !strncmp(err, "Corruption", 10))
		d->bad_table = kvt__rdb_table_named(err);
	return kvt__rdb_err(err);
}

int kvt__rdb_db_reopen(struct kvt__rdb_db *d)
{
	if (d->db)
		rocksdb_close(d->db);
	d->db = NULL;
	return open_db(d);
}

/* ---- the tier's calls, with the test-only fault injector ---- */

enum fault { NO_FAULT, FAULT_REFUSED, FAULT_AFTER };

/* One draw per call: each kind of fault at fault_ppm per million (xorshift64). */
static enum fault draw(struct kvt__rdb_db *d, bool write)
{
	if (!d->fault_ppm)
		return NO_FAULT;
	if (d->fault_ppm == KVT__RDB_REFUSE_ALL)
		return write ? FAULT_REFUSED : NO_FAULT;
	d->fault_rng ^= d->fault_rng << 13;
	d->fault_rng ^= d->fault_rng >> 7;
	d->fault_rng ^= d->fault_rng << 17;
	uint32_t r = (uint32_t)(d->fault_rng % 1000000u);
	if (r < d->fault_ppm)
		return FAULT_AFTER;
	if (write && r < 2 * (uint64_t)d->fault_ppm)
		return FAULT_REFUSED;
	return NO_FAULT;
}

int kvt__rdb_write(struct kvt__rdb_db *d, rocksdb_writebatch_t *b)
{
	char *err = NULL;
	if (!d->db)
		return -EIO;
	enum fault f = draw(d, true);
	if (f == FAULT_REFUSED) {
		d->faults++;
		kvt_log_rl(KVT_LOG_WARN, "rocksdb: injected fault: write refused");
		return -EAGAIN;
	}
	rocksdb_write(d->db, d->wo, b, &err);
	int rc = kvt__rdb_err_db(d, err);
	if (!rc && f == FAULT_AFTER) {
		d->faults++;
		kvt_log_rl(KVT_LOG_WARN, "rocksdb: injected fault: write applied, reported failed");
		return -EIO;
	}
	return rc;
}

rocksdb_pinnableslice_t *kvt__rdb_get(struct kvt__rdb_db *d, const void *k, size_t klen, int *rc)
{
	char *err = NULL;
	if (!d->db) { /* closed by a reopen that failed (disk full): kept for the next one */
		*rc = -EAGAIN;
		return NULL;
	}
	if (draw(d, false) == FAULT_AFTER) {
		d->faults++;
		kvt_log_rl(KVT_LOG_WARN, "rocksdb: injected fault: read failed");
		*rc = -EIO;
		return NULL;
	}
	rocksdb_pinnableslice_t *ps = rocksdb_get_pinned(d->db, d->ro, (const char *)k, klen, &err);
	*rc = kvt__rdb_err_db(d, err);
	if (*rc && ps) {
		rocksdb_pinnableslice_destroy(ps);
		ps = NULL;
	}
	return ps;
}

rocksdb_pinnableslice_t *kvt__rdb_get_quiet(struct kvt__rdb_db *d, const void *k, size_t klen,
                                            const char **v, size_t *vlen)
{
	char *err = NULL;
	rocksdb_pinnableslice_t *ps =
	    d->db ? rocksdb_get_pinned(d->db, d->ro, (const char *)k, klen, &err) : NULL;
	*v = ps && !err ? rocksdb_pinnableslice_value(ps, vlen) : NULL;
	rocksdb_free(err);
	if (ps && !*v) {
		rocksdb_pinnableslice_destroy(ps);
		ps = NULL;
	}
	return ps;
}

/* Whether it stands nowhere because a read failed (not at the end). */
static bool iter_failed(rocksdb_iterator_t *it)
{
	char *err = NULL;
	if (rocksdb_iter_valid(it))
		return false;
	rocksdb_iter_get_error(it, &err);
	rocksdb_free(err);
	return err != NULL;
}

/* A new iterator of c's database at the first key >= k (NULL: out of memory). */
static rocksdb_iterator_t *seek_fresh(const struct kvt__rdb_cursor *c, const uint8_t *k, size_t n)
{
	rocksdb_iterator_t *it = rocksdb_create_iterator(c->db, c->ro);
	if (it)
		rocksdb_iter_seek(it, (const char *)k, n);
	return it;
}

/* Whether a seek to k fails, made by an iterator of its own: one that failed a seek may fail
 * the next into a block it had read before (RocksDB 7.8 reuses that block's state). */
static bool seek_fails(const struct kvt__rdb_cursor *c, const uint8_t *k, size_t n)
{
	rocksdb_iterator_t *it = seek_fresh(c, k, n);
	bool failed = !it || iter_failed(it);
	if (it)
		rocksdb_iter_destroy(it);
	return failed;
}

/* m = a + b, keys read as n-byte big-endian numbers. @return : whether it overflowed. */
static bool key_add(const uint8_t *a, const uint8_t *b, uint8_t *m, size_t n)
{
	unsigned carry = 0;
	for (size_t i = n; i-- > 0;) {
		unsigned v = a[i] + b[i] + carry;
		m[i] = (uint8_t)v, carry = v >> 8;
	}
	return carry != 0;
}

/* m = (f + s) / 2 (n-byte big-endian). */
static void key_mid(const uint8_t *f, const uint8_t *s, uint8_t *m, size_t n)
{
	unsigned carry = key_add(f, s, m, n);
	for (size_t i = 0; i < n; i++) {
		unsigned v = carry << 8 | m[i];
		m[i] = (uint8_t)(v >> 1), carry = v & 1;
	}
}

/*
 * After a read failed just past c->last: finds the first key (at least PASS_KEY_MIN bytes, one
 * longer than the last key read) past it that a seek reaches without an error (a seek into a
 * block that cannot be read fails; one past it lands on the first key after it). Seeks at
 * doubling distances until one reaches, then halves the stretch between that one and the last
 * that failed: 16 seeks per byte of key at most. Another damaged block in that stretch can make
 * it pass a good block too (the keys are spaced unevenly); evacuate.c reads the records it knows
 * there one by one. Then *it is replaced by an iterator that stands there. @return : whether it
 * stands past the damage (at a key, or at the end).
 */
static bool pass_damage(rocksdb_iterator_t **it, struct kvt__rdb_cursor *c, const char *why)
{
	uint8_t f[PASS_KEY_MAX], s[PASS_KEY_MAX], m[PASS_KEY_MAX], f0[PASS_KEY_MAX],
	    d[PASS_KEY_MAX];
	const char *from = c->last ? c->last : c->lo; /* the last key read, or the walk's start */
	size_t from_len = c->last ? c->len : c->lo_len;
	size_t n = KVT_MAX(from_len + 1, (size_t)PASS_KEY_MIN);
	if (n > sizeof(f) || c->stretches >= PASS_STRETCHES_MAX)
		return false;
	memset(f0, 0, n);
	if (from_len)
		memcpy(f0, from, from_len); /* and zeros: just past it */
	memcpy(f, f0, n);
	memcpy(s, f0, n);
	if (seek_fails(c, f, n)) {
		bool reached = false, top = false;
		memset(d, 0, n);
		d[n - 1] = 1;
		while (!reached && !top) {
			if (key_add(f0, d, m, n))
				memset(m, 0xff, n); /* past the largest key */
			top = true;
			for (size_t i = 0; i < n; i++)
				top &= m[i] == 0xff; /* the last try */
			reached = !seek_fails(c, m, n);
			memcpy(reached ? s : f, m, n);
			if (key_add(d, d, d, n)) /* twice as far, or as far as keys go */
				memset(d, 0xff, n);
		}
		if (!reached)
			return false; /* damage up to the end of the key space */
		for (;;) {
			key_mid(f, s, m, n);
			if (!memcmp(m, f, n))
				break; /* s = f + 1: the first key a seek reaches */
			memcpy(seek_fails(c, m, n) ? f : s, m, n);
		}
	} /* else a seek reads past what Next() could not */
	rocksdb_iterator_t *at = seek_fresh(c, s, n);
	if (!at || iter_failed(at)) { /* damage up to the end of the key space */
		if (at)
			rocksdb_iter_destroy(at);
		return false;
	}
	rocksdb_iter_destroy(*it);
	*it = at;
	c->stretches++;
	c->confirmed = true; /* a seek's end is the end */
	c->passed(c->arg, (const char *)f0, n, (const char *)s, n, why);
	return true;
}

bool kvt__rdb_iter_more(rocksdb_iterator_t **it, struct kvt__rdb_cursor *c)
{
	while (!rocksdb_iter_valid(*it)) {
		char *err = NULL;
		rocksdb_iter_get_error(*it, &err);
		if (err) {
			bool past = c->passed && pass_damage(it, c, err);
			rocksdb_free(err);
			if (!past)
				return false;
		} else {
			if (c->confirmed || !c->last)
				return false; /* a walk that read nothing began with a seek: it
				                 reports */
			c->confirmed = true;
			rocksdb_iter_seek(*it, c->last, c->len + 1);
		}
	}
	size_t kl;
	const char *k = rocksdb_iter_key(*it, &kl);
	if (kl + 1 > c->cap) {
		size_t cap = KVT_MAX(kl + 1, 2 * c->cap);
		char *g = realloc(c->last, KVT_MAX(cap, (size_t)128));
		if (!g) { /* the key is read; only the check of the end is lost */
			free(c->last);
			c->last = NULL, c->len = c->cap = 0, c->confirmed = false;
			return true;
		}
		c->last = g, c->cap = KVT_MAX(cap, (size_t)128);
	}
	memcpy(c->last, k, kl);
	c->last[kl] = 0;
	c->len = kl;
	c->confirmed = false;
	return true;
}

/* A key cut or padded with zeros to a record key's length. */
static void key_fit(uint8_t *to, const char *k, size_t len)
{
	memset(to, 0, KVT__RDB_KEY_BYTES);
	memcpy(to, k, KVT_MIN(len, (size_t)KVT__RDB_KEY_BYTES));
}

void kvt__rdb_passed_add(struct kvt__rdb_passed *p, const char *lo, size_t lo_len, const char *hi,
                         size_t hi_len)
{
	bool apart = p->n < KVT__RDB_PASSED_MAX;
	unsigned i = apart ? p->n++ : KVT__RDB_PASSED_MAX - 1; /* past the last: it widens */
	if (apart)
		key_fit(p->lo[i], lo, lo_len);
	key_fit(p->hi[i], hi, hi_len);
	for (int b = KVT__RDB_KEY_BYTES - 1; hi_len > KVT__RDB_KEY_BYTES && b >= 0; b--)
		if (++p->hi[i][b]) /* up to the next record key */
			break;
}

bool kvt__rdb_passed_has(const struct kvt__rdb_passed *p, const uint8_t *k)
{
	for (unsigned i = 0; i < p->n; i++)
		if (memcmp(k, p->lo[i], KVT__RDB_KEY_BYTES) >= 0 &&
		    memcmp(k, p->hi[i], KVT__RDB_KEY_BYTES) < 0)
			return true;
	return false;
}

void kvt__rdb_cursor_fini(struct kvt__rdb_cursor *c)
{
	free(c->last);
	*c = (struct kvt__rdb_cursor){0};
}

int kvt__rdb_write_to(rocksdb_t *to, rocksdb_writeoptions_t *wo, rocksdb_writebatch_t *b)
{
	char *err = NULL;
	if (rocksdb_writebatch_count(b))
		rocksdb_write(to, wo, b, &err);
	rocksdb_writebatch_clear(b);
	return kvt__rdb_err(err);
}

int kvt__rdb_copy_walk(rocksdb_iterator_t **it, struct kvt__rdb_cursor *cur, rocksdb_t *to,
                       rocksdb_writeoptions_t *wo,
                       int (*keep)(void *arg, const char *k, size_t klen), void *arg)
{
	rocksdb_writebatch_t *b = rocksdb_writebatch_create();
	size_t bytes = 0;
	int rc = b ? 0 : -ENOMEM;
	for (; !rc && kvt__rdb_iter_more(it, cur); rocksdb_iter_next(*it)) {
		size_t kl, vl;
		const char *k = rocksdb_iter_key(*it, &kl);
		int take = keep ? keep(arg, k, kl) : 1;
		if (take <= 0) {
			rc = take;
			continue;
		}
		const char *v = rocksdb_iter_value(*it, &vl);
		rocksdb_writebatch_put(b, k, kl, v, vl);
		if ((bytes += kl + vl) >= (4u << 20)) {
			rc = kvt__rdb_write_to(to, wo, b);
			bytes = 0;
		}
	}
	if (!rc)
		rc = kvt__rdb_write_to(to, wo, b);
	if (!rc) {
		char *err = NULL;
		rocksdb_iter_get_error(*it, &err);
		rc = kvt__rdb_err(err) ? -EBADMSG : 0;
	}
	if (b)
		rocksdb_writebatch_destroy(b);
	return rc;
}
