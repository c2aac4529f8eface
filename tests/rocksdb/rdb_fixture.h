/*
 * rdb_fixture.h -- helpers shared by the rocksdb tier tests: deterministic records, an options
 * set for a tier in a temporary directory, and a dropped-callback recorder.
 *
 * Record i has identity (tenant 7, ns {0x6e73, 1}, key {i, 0x6b6579}) and a payload derived
 * from i, so any test can rebuild the expected bytes of any record on its own.
 */
#ifndef KVT_TESTS_RDB_FIXTURE_H
#define KVT_TESTS_RDB_FIXTURE_H
#include "testlib.h"
#include "tiers/rocksdb/rocksdb_int.h"
#include "core/chunk.h"
#include "core/log.h"
#include "core/options.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RDB_TENANT 7u

static inline struct kvt_tier_id rdb_id_of(uint32_t tenant, uint64_t i)
{
	struct kvt_tier_id id = {.tenant = tenant, .ns = {{0x6e73, 1}}, .key = {{i, 0x6b6579}}};
	return id;
}

static inline struct kvt_tier_id rdb_id(uint64_t i)
{
	return rdb_id_of(RDB_TENANT, i);
}

/* Writes record i of tenant with payload_len bytes into buf (aligned, padded).
 * @return : record length. */
static inline size_t rdb_record_of(void *buf, uint32_t tenant, uint64_t i, size_t payload_len)
{
	struct kvt_tier_id id = rdb_id_of(tenant, i);
	uint8_t *p = buf;
	kvt_test_fill(p + KVT_CHUNK_HDR_BYTES, payload_len, i * 2654435761u + 17);
	struct kvt_chunk_hdr h = {.version = KVT_CHUNK_VERSION,
	                          .tenant = id.tenant,
	                          .ns = id.ns,
	                          .key = id.key,
	                          .raw_bytes = payload_len,
	                          .payload_bytes = payload_len,
	                          .seq = i,
	                          .payload_sum =
	                              kvt_chunk_sum(p + KVT_CHUNK_HDR_BYTES, payload_len)};
	kvt_chunk_hdr_encode(p, &h);
	return KVT_CHUNK_HDR_BYTES + payload_len;
}

static inline size_t rdb_record(void *buf, uint64_t i, size_t payload_len)
{
	return rdb_record_of(buf, RDB_TENANT, i, payload_len);
}

static inline size_t rdb_pad(size_t len)
{
	return (len + KVT_TIER_ALIGN - 1) & ~(size_t)(KVT_TIER_ALIGN - 1);
}

static inline void *rdb_buf(size_t len)
{
	void *p = NULL;
	assert_int_equal(posix_memalign(&p, KVT_TIER_ALIGN, rdb_pad(len)), 0);
	return p;
}

/* Options for a tier at dir/db with capacity cap_bytes; extra "name=value" pairs, NULL-ended. */
static inline void rdb_opts(struct kvt_options *o, const char *dir, uint64_t cap_bytes,
                            const char *const *extra)
{
	char v[512];
	kvt_opts_defaults(o);
	snprintf(v, sizeof(v), "%s/db", dir);
	assert_int_equal(kvt_opts_set(o, "rocksdb.path", v), 0);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)cap_bytes);
	assert_int_equal(kvt_opts_set(o, "rocksdb.bytes", v), 0);
	for (; extra && *extra; extra++)
		assert_int_equal(kvt_opts_set_pair(o, *extra), 0);
}

/* Records every id the tier reports dropped (key.w[0] = record number). */
struct rdb_drops {
	uint64_t n;
	uint8_t *seen; /* indexed by record number, max_id long */
	uint64_t max_id;
};

static inline void rdb_dropped(void *arg, const struct kvt_tier_id *id, uint64_t loc)
{
	struct rdb_drops *d = arg;
	(void)loc;
	d->n++;
	if (id->key.w[0] < d->max_id)
		d->seen[id->key.w[0]] = 1;
}

static inline struct kvt_tier_env rdb_env(const struct kvt_options *o, struct rdb_drops *d)
{
	struct kvt_tier_env env = {.opts = o, .data_dir = NULL, .dropped = rdb_dropped, .arg = d};
	return env;
}

/* Writes records lo..hi-1 of payload_len bytes each through the tier; each must land. */
static inline void rdb_put_range(struct kvt_tier *t, void *buf, uint64_t lo, uint64_t hi,
                                 size_t payload_len)
{
	uint64_t loc;
	for (uint64_t i = lo; i < hi; i++) {
		size_t len = rdb_record(buf, i, payload_len);
		assert_int_equal(kvt_tier_rocksdb.write(t, buf, len, rdb_pad(len), &loc), 0);
	}
}

/* Puts records [0, n) and moves them to the bottom level (a flush, then a full compaction). */
static inline void rdb_put_compacted(struct kvt_tier *t, void *buf, uint64_t n, size_t payload_len)
{
	rdb_put_range(t, buf, 0, n, payload_len);
	assert_int_equal(kvt__rdb_flush(t, true), 0);
	assert_int_equal(kvt__rdb_compact(t), 0);
}

/* Reads record i and checks it byte for byte. @return : read()'s result. */
static inline ssize_t rdb_check(struct kvt_tier *t, uint64_t i, size_t payload_len, void *scratch,
                                void *expect)
{
	struct kvt_tier_id id = rdb_id(i);
	size_t len = rdb_record(expect, i, payload_len);
	ssize_t n = kvt_tier_rocksdb.read(t, &id, 0, scratch, rdb_pad(len));
	if (n >= 0) {
		assert_int_equal(n, len);
		assert_memory_equal(scratch, expect, len);
	}
	return n;
}

/* The tier's database opened with the raw C API (the tier is closed): for tests that change it
 * behind the tier's back. */
struct rdb_raw {
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_writeoptions_t *wo;
};

static inline void rdb_raw_open(struct rdb_raw *r, const char *path)
{
	char *err = NULL;
	r->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(r->opts, 1);
	r->db = rocksdb_open(r->opts, path, &err);
	assert_null(err);
	r->wo = rocksdb_writeoptions_create();
}

/* Puts (val) or deletes (val NULL) key k. */
static inline void rdb_raw_set(struct rdb_raw *r, const void *k, size_t klen, const void *val,
                               size_t len)
{
	char *err = NULL;
	if (val)
		rocksdb_put(r->db, r->wo, k, klen, val, len, &err);
	else
		rocksdb_delete(r->db, r->wo, k, klen, &err);
	assert_null(err);
}

static inline void rdb_raw_close(struct rdb_raw *r)
{
	rocksdb_close(r->db);
	rocksdb_writeoptions_destroy(r->wo);
	rocksdb_options_destroy(r->opts);
}

static inline struct kvt_tier_stats rdb_stats(struct kvt_tier *t)
{
	struct kvt_tier_stats s;
	kvt_tier_rocksdb.stats(t, &s);
	return s;
}

/* Writes record i (payload bytes), waiting out write stalls for up to 10 s. @return : write()'s
 * result. */
static inline int rdb_write_waiting(struct kvt_tier *t, uint8_t *buf, uint64_t i, size_t payload)
{
	size_t len = rdb_record(buf, i, payload);
	uint64_t loc;
	int rc;
	for (int k = 0;
	     (rc = kvt_tier_rocksdb.write(t, buf, len, rdb_pad(len), &loc)) == -EAGAIN && k < 10000;
	     k++)
		usleep(1000); /* a write stall: RocksDB's flushes are behind */
	return rc;
}

/* The path of the nth table (1..) of the database at path that holds records only (its keys all
 * before the meta range), into out. @return : how many tables the database has. */
static inline int rdb_records_table(const char *path, int nth, char *out, size_t len)
{
	uint8_t lo[KVT__RDB_META_LO_BYTES];
	kvt__rdb_meta_lo(lo);
	struct rdb_raw r;
	rdb_raw_open(&r, path);
	const rocksdb_livefiles_t *lf = rocksdb_livefiles(r.db);
	int tables = rocksdb_livefiles_count(lf), k = 0;
	out[0] = 0;
	for (int i = 0; i < tables && !out[0]; i++) {
		size_t hl;
		const char *hi = rocksdb_livefiles_largestkey(lf, i, &hl);
		if (hl == KVT__RDB_KEY_BYTES && memcmp(hi, lo, KVT__RDB_KEY_BYTES) < 0 &&
		    ++k == nth)
			snprintf(out, len, "%s%s", path, rocksdb_livefiles_name(lf, i));
	}
	rocksdb_livefiles_destroy(lf);
	rdb_raw_close(&r);
	assert_true(out[0] != 0);
	return tables;
}

/* Flips bit 2 of the byte at off of the file at path. */
static inline void rdb_flip(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t c;
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &c, 1, off), 1);
	c ^= 4;
	assert_int_equal(pwrite(fd, &c, 1, off), 1);
	close(fd);
}

/* The temporary directory a test's database lives in: made before each test, removed after
 * (rdb_setup, rdb_teardown). */
static char dir[256];

static inline int rdb_setup(void **state)
{
	(void)state;
	kvt_test_tmpdir(dir, sizeof(dir));
	return 0;
}

static inline int rdb_teardown(void **state)
{
	(void)state;
	kvt_test_rmtree(dir);
	return 0;
}

static int rdb_passed_lines; /* "passed over a block it cannot read" lines logged */

/* A log sink that counts rdb_passed_lines (a walk passing over damage). */
static inline void rdb_passed_log(enum kvt_log_level lvl, const char *msg)
{
	(void)lvl;
	rdb_passed_lines += strstr(msg, "passed over a block it cannot read") != NULL;
	if (getenv("KVT_TEST_VERBOSE"))
		fprintf(stderr, "log: %s\n", msg);
}

/* Opens the tier at o; it must open. */
static inline struct kvt_tier *rdb_open_tier(struct kvt_options *o, struct rdb_drops *d)
{
	struct kvt_tier_env env = rdb_env(o, d);
	struct kvt_tier *t = NULL;
	assert_int_equal(kvt_tier_rocksdb.open(&env, &t), 0);
	return t;
}

/* iterate()'s visits of records 0..max-1 (64 when max is 0), each at most once. */
struct rdb_visit_ctx {
	uint64_t n, bytes, max;
	uint8_t *seen;
};

static inline int rdb_visit(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	struct rdb_visit_ctx *v = arg;
	(void)loc;
	assert_int_equal(h->tenant, RDB_TENANT);
	assert_true(h->key.w[0] < (v->max ? v->max : 64));
	assert_false(v->seen[h->key.w[0]]);
	v->seen[h->key.w[0]] = 1;
	v->n++;
	v->bytes += KVT_CHUNK_HDR_BYTES + h->payload_bytes;
	return 0;
}

/* Writes val under record i's key, or its metadata's (meta), with the raw C API (the tier is
 * closed); val NULL deletes it. */
static inline void rdb_raw_record_set(const char *path, bool meta, uint64_t i, const void *val,
                                      size_t len)
{
	struct rdb_raw r;
	uint8_t k[KVT__RDB_KEY_BYTES], mk[KVT__RDB_META_KEY_BYTES];
	struct kvt_tier_id id = rdb_id(i);
	kvt__rdb_key_encode(k, &id);
	kvt__rdb_meta_key(mk, k);
	rdb_raw_open(&r, path);
	if (meta)
		rdb_raw_set(&r, mk, sizeof(mk), val, len);
	else
		rdb_raw_set(&r, k, sizeof(k), val, len);
	rdb_raw_close(&r);
}

/* Opens the tier at o after a "crash": the index a clean close saved is removed first. */
static inline struct kvt_tier *rdb_open_unsaved(struct kvt_options *o, struct rdb_drops *d)
{
	char ix[600];
	snprintf(ix, sizeof(ix), "%s/db.index", dir);
	unlink(ix);
	return rdb_open_tier(o, d);
}

#endif
