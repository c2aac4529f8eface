/*
 * bench.c -- kvtier-bench-rocksdb: the rocksdb tier's write and read paths against raw RocksDB
 * put/get of the same values with the same options, measured in the same run.
 *
 * Per value size and repetition: fresh databases, both open at once; raw rocksdb_put and tier
 * write() alternate op by op, each op timed alone (EAGAIN retries included, their back-off
 * sleeps not); the flush and compaction they cause write the same bytes for both and are shown
 * once, for scale. Then, in one shuffled key order, raw rocksdb_get (a malloc'd copy, freed), raw
 * pinned get + memcpy into the caller's buffer, and tier read() (the same plus header, identity
 * and payload checksum verification) alternate. Interleaving puts background noise on both sides
 * equally. The median repetition is printed with the tier/raw ratio. Usage: kvtier-bench-rocksdb
 * --help.
 */
#include "rocksdb_int.h"
#include "core/chunk.h"
#include "core/file.h"
#include "core/log.h"
#include "core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct cfg {
	const char *dir;
	bool level0;          /* --mend: the damage in a table of level 0 */
	uint64_t total_bytes; /* per size and phase */
	int reps;
	struct kvt__rdb_conf conf;
	struct kvt_options opts;
};

static void rmtree(const char *path)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd))
		fprintf(stderr, "bench: could not remove %s\n", path);
}

static double secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

static struct kvt_tier_id bench_id(uint64_t i)
{
	struct kvt_tier_id id = {.tenant = 1, .ns = {{0xbe7c, 2}}, .key = {{i, 0x5eed}}};
	return id;
}

/* Re-stamps the header of rec for record i (the payload, and so its checksum, is shared). */
static void stamp(uint8_t *rec, size_t payload, uint64_t sum, uint64_t i)
{
	struct kvt_tier_id id = bench_id(i);
	struct kvt_chunk_hdr h = {.version = KVT_CHUNK_VERSION,
	                          .tenant = id.tenant,
	                          .ns = id.ns,
	                          .key = id.key,
	                          .raw_bytes = payload,
	                          .payload_bytes = payload,
	                          .seq = i,
	                          .payload_sum = sum};
	kvt_chunk_hdr_encode(rec, &h);
}

static int flush_wait(rocksdb_t *db)
{
	char *err = NULL;
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	rocksdb_flushoptions_set_wait(fo, 1);
	rocksdb_flush(db, fo, &err);
	rocksdb_flushoptions_destroy(fo);
	return kvt__rdb_err(err);
}

struct result {
	double raw_put, tier_put, raw_get, raw_pinned, tier_get; /* MB/s */
	double flush_s; /* the final flush of both databases */
	uint64_t eagain;
};

/* Both sides open at once; each operation is timed alone and the two sides alternate op by op,
 * so background noise (flushes, compactions, other processes) lands on both equally. */
struct side {
	struct kvt__rdb_db raw;
	struct kvt_tier *tier;
	uint64_t ns[5]; /* raw put, tier put, raw get, raw pinned get + copy, tier get */
};

static int raw_put(struct side *sd, uint64_t i, const uint8_t *rec, size_t len, struct result *r)
{
	uint8_t k[KVT__RDB_KEY_BYTES];
	struct kvt_tier_id id = bench_id(i);
	kvt__rdb_key_encode(k, &id);
	for (;;) {
		char *err = NULL;
		uint64_t t0 = kvt_now_ns();
		rocksdb_put(sd->raw.db, sd->raw.wo, (const char *)k, sizeof(k), (const char *)rec,
		            len, &err);
		sd->ns[0] += kvt_now_ns() - t0;
		int rc = kvt__rdb_err(err);
		if (rc != -EAGAIN)
			return rc;
		r->eagain++;
		usleep(200);
	}
}

static int tier_put(struct side *sd, uint64_t i, uint8_t *rec, size_t payload, uint64_t sum,
                    struct result *r)
{
	size_t len = KVT_CHUNK_HDR_BYTES + payload;
	uint64_t loc;
	for (;;) {
		uint64_t t0 = kvt_now_ns();
		stamp(rec, payload, sum, i); /* the daemon's header is charged to the tier */
		int rc = kvt_tier_rocksdb.write(sd->tier, rec, len,
		                                KVT_ALIGN_UP(len, KVT_TIER_ALIGN), &loc);
		sd->ns[1] += kvt_now_ns() - t0;
		if (rc != -EAGAIN)
			return rc;
		r->eagain++;
		usleep(200);
	}
}

/* Reads key i raw (rocksdb_get), key p raw (pinned + copy) and key i through the tier: the two
 * raw reads use keys half a pass apart, so neither warms the block cache for the other. */
static int gets(struct side *sd, uint64_t i, uint64_t p, size_t len, uint8_t *out)
{
	uint8_t k[KVT__RDB_KEY_BYTES];
	struct kvt_tier_id id = bench_id(i), idp = bench_id(p);
	char *err = NULL;
	size_t vlen = 0;
	int rc;
	kvt__rdb_key_encode(k, &id);
	uint64_t t0 = kvt_now_ns();
	char *v = rocksdb_get(sd->raw.db, sd->raw.ro, (const char *)k, sizeof(k), &vlen, &err);
	rocksdb_free(v);
	uint64_t t1 = kvt_now_ns();
	if ((rc = kvt__rdb_err(err)) || vlen != len)
		return rc ? rc : -EIO;
	kvt__rdb_key_encode(k, &idp);
	t1 = kvt_now_ns();
	rocksdb_pinnableslice_t *ps =
	    rocksdb_get_pinned(sd->raw.db, sd->raw.ro, (const char *)k, sizeof(k), &err);
	if (ps)
		memcpy(out, rocksdb_pinnableslice_value(ps, &vlen), len);
	rocksdb_pinnableslice_destroy(ps);
	uint64_t t2 = kvt_now_ns();
	if ((rc = kvt__rdb_err(err)) || !ps)
		return rc ? rc : -EIO;
	ssize_t got =
	    kvt_tier_rocksdb.read(sd->tier, &id, 0, out, KVT_ALIGN_UP(len, KVT_TIER_ALIGN));
	uint64_t t3 = kvt_now_ns();
	sd->ns[2] += t1 - t0, sd->ns[3] += t2 - t1, sd->ns[4] += t3 - t2;
	return got == (ssize_t)len ? 0 : got < 0 ? (int)got : -EIO;
}

static int run_rep(const struct cfg *c, uint8_t *rec, size_t payload, uint64_t sum, uint64_t n,
                   const uint64_t *order, uint8_t *out, struct result *r)
{
	struct kvt__rdb_conf conf = c->conf;
	struct kvt_tier_env env = {.opts = &c->opts};
	struct side sd = {0};
	size_t len = KVT_CHUNK_HDR_BYTES + payload;
	int rc;
	snprintf(conf.path, sizeof(conf.path), "%s/raw", c->dir);
	if ((rc = kvt__rdb_db_open(&sd.raw, &conf)))
		return rc;
	snprintf(conf.path, sizeof(conf.path), "%s/tier", c->dir);
	if ((rc = kvt__rdb_open_conf(&env, &conf, &sd.tier)))
		goto err_raw;
	stamp(rec, payload, sum, 0);
	for (uint64_t i = 0; i < n; i++)
		if ((rc = raw_put(&sd, i, rec, len, r)) ||
		    (rc = tier_put(&sd, i, rec, payload, sum, r)))
			goto out;
	/* Background work is the same bytes on both sides; its total is shown for scale. */
	uint64_t t0 = kvt_now_ns();
	if ((rc = flush_wait(sd.raw.db)) || (rc = kvt__rdb_flush(sd.tier, true)))
		goto out;
	r->flush_s = secs(kvt_now_ns() - t0);
	for (uint64_t j = 0; j < n; j++)
		if ((rc = gets(&sd, order[j], order[(j + n / 2) % n], len, out)))
			goto out;
	double mb = (double)(n * len) / 1e6;
	r->raw_put = mb / secs(sd.ns[0]), r->tier_put = mb / secs(sd.ns[1]);
	r->raw_get = mb / secs(sd.ns[2]), r->raw_pinned = mb / secs(sd.ns[3]);
	r->tier_get = mb / secs(sd.ns[4]);
out:
	kvt_tier_rocksdb.close(sd.tier);
err_raw:
	kvt__rdb_db_close(&sd.raw);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(struct result *rs, int reps, size_t off)
{
	double v[16];
	for (int i = 0; i < reps; i++)
		v[i] = *(const double *)((const char *)&rs[i] + off);
	qsort(v, (size_t)reps, sizeof(v[0]), cmp_double);
	return v[reps / 2];
}

static int bench_size(const struct cfg *c, size_t payload)
{
	size_t len = KVT_CHUNK_HDR_BYTES + payload, buf_len = KVT_ALIGN_UP(len, KVT_TIER_ALIGN);
	uint64_t n = KVT_MAX(c->total_bytes / len, 8);
	uint8_t *rec = NULL, *out = NULL;
	uint64_t *order = calloc(n, sizeof(*order));
	struct result rs[16];
	int rc = -ENOMEM;
	if (!order || posix_memalign((void **)&rec, KVT_TIER_ALIGN, buf_len) ||
	    posix_memalign((void **)&out, KVT_TIER_ALIGN, buf_len))
		goto out;
	for (size_t i = 0; i < payload; i++) /* incompressible-ish, like quantised KV */
		rec[KVT_CHUNK_HDR_BYTES + i] = (uint8_t)((i * 2654435761u) >> 13);
	uint64_t sum = kvt_chunk_sum(rec + KVT_CHUNK_HDR_BYTES, payload);
	srand(42);
	for (uint64_t i = 0; i < n; i++)
		order[i] = i;
	for (uint64_t i = n - 1; i > 0; i--) {
		uint64_t j = (uint64_t)rand() % (i + 1), x = order[i];
		order[i] = order[j], order[j] = x;
	}
	memset(out, 0, buf_len);
	memset(rs, 0, sizeof(rs));
	for (int rep = 0; rep < c->reps; rep++) {
		rmtree(c->dir);
		if (mkdir(c->dir, 0700)) {
			rc = -errno;
			goto out;
		}
		if ((rc = run_rep(c, rec, payload, sum, n, order, out, &rs[rep]))) {
			fprintf(stderr, "bench: %s\n", strerror(-rc));
			goto out;
		}
	}
	double rp = median(rs, c->reps, offsetof(struct result, raw_put));
	double tp = median(rs, c->reps, offsetof(struct result, tier_put));
	double rg = median(rs, c->reps, offsetof(struct result, raw_get));
	double rpin = median(rs, c->reps, offsetof(struct result, raw_pinned));
	double tg = median(rs, c->reps, offsetof(struct result, tier_get));
	double fl = median(rs, c->reps, offsetof(struct result, flush_s));
	printf("value %7zu B x %4llu | put MB/s raw %6.0f tier %6.0f (%.2fx) | get MB/s raw %6.0f "
	       "tier %6.0f (%.2fx) raw-pinned+copy %6.0f (%.2fx) | final flush %.2f s, eagain "
	       "%llu\n",
	       len, (unsigned long long)n, rp, tp, tp / rp, rg, tg, tg / rg, rpin, tg / rpin, fl,
	       (unsigned long long)rs[0].eagain);
	rc = 0;
out:
	rmtree(c->dir);
	free(order);
	free(rec);
	free(out);
	return rc;
}

/* ---- --recover: what a restart costs ---- */

/* Drops the page cache of every file in dir (written and synced, or closed). */
static void uncache_dir(const char *dir)
{
	DIR *d = opendir(dir);
	char f[PATH_MAX + 256];
	for (struct dirent *e; d && (e = readdir(d));) {
		snprintf(f, sizeof(f), "%s/%s", dir, e->d_name);
		int fd = e->d_name[0] == '.' ? -1 : open(f, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			fdatasync(fd);
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			close(fd);
		}
	}
	if (d)
		closedir(d);
}

/* The least an open that reads every record can do: one raw iterator over every value; or (meta)
 * over every record's metadata, the least a walk of the meta range can do. unverified: RocksDB's
 * checksums not checked (what the tier's walks did until they were found to risk an abort on a
 * damaged block: what checking costs; this database is not damaged). */
static int raw_scan(const struct kvt__rdb_conf *conf, bool meta, bool unverified, uint64_t *n,
                    double *s)
{
	struct kvt__rdb_db raw = {0};
	uint64_t t0 = kvt_now_ns();
	int rc = kvt__rdb_db_open(&raw, conf);
	if (rc)
		return rc;
	rocksdb_readoptions_set_verify_checksums(raw.walk[meta], !unverified);
	rocksdb_iterator_t *it = rocksdb_create_iterator(raw.db, raw.walk[meta]);
	uint64_t sum = 0;
	*n = 0;
	for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t vl;
		const char *v = rocksdb_iter_value(it, &vl);
		sum += vl ? (uint8_t)v[0] : 0; /* touch it */
		++*n;
	}
	rocksdb_iter_destroy(it);
	*s = secs(kvt_now_ns() - t0);
	kvt__rdb_db_close(&raw);
	*n -= meta && *n; /* the marker */
	return sum == UINT64_MAX ? -EIO : 0;
}

static int count_visit(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	(void)h, (void)loc;
	++*(uint64_t *)arg;
	return 0;
}

/* kvtierd's start of the tier at conf from a cold page cache: its open and the iterate() after
 * it, timed (*s), and its stats; *found: the records it holds when iterate() visited each of
 * them, else 0. The tier stays open in *t. @return : 0 or -errno (the tier closed). */
static int timed_start(const struct kvt_tier_env *env, const struct kvt__rdb_conf *conf,
                       struct kvt_tier **t, double *s, struct kvt_tier_stats *st, uint64_t *found)
{
	uint64_t visited = 0;
	uncache_dir(conf->path);
	uint64_t t0 = kvt_now_ns();
	int rc = kvt__rdb_open_conf(env, conf, t);
	if (rc)
		return rc;
	rc = kvt_tier_rocksdb.iterate(*t, count_visit, &visited);
	*s = secs(kvt_now_ns() - t0);
	kvt_tier_rocksdb.stats(*t, st);
	*found = st->chunks == visited ? visited : 0;
	if (rc)
		kvt_tier_rocksdb.close(*t);
	return rc > 0 ? -EIO : rc;
}

/* Makes the database at conf look as one from before the metadata: the meta range deleted. */
static int drop_meta(const struct kvt__rdb_conf *conf)
{
	struct kvt__rdb_db raw = {0};
	int rc = kvt__rdb_db_open(&raw, conf);
	if (rc)
		return rc;
	rocksdb_writebatch_t *b = rocksdb_writebatch_create();
	kvt__rdb_meta_clear(b);
	rc = kvt__rdb_write(&raw, b);
	rocksdb_writebatch_destroy(b);
	kvt__rdb_db_close(&raw);
	return rc;
}

/* Fills a tier at c->dir/tier (conf) with n records of payload bytes from rec (its payload
 * written here, *sum its checksum) and closes it, saving its index. @return : 0 or -errno. */
static int fill_closed(const struct cfg *c, struct kvt__rdb_conf *conf, uint8_t *rec,
                       size_t payload, uint64_t n, uint64_t *sum)
{
	struct kvt_tier_env env = {.opts = &c->opts};
	struct kvt_tier *t;
	struct result r = {0};
	for (size_t i = 0; i < payload; i++)
		rec[KVT_CHUNK_HDR_BYTES + i] = (uint8_t)(i * 131 + 7);
	*sum = kvt_chunk_sum(rec + KVT_CHUNK_HDR_BYTES, payload);
	snprintf(conf->path, sizeof(conf->path), "%s/tier", c->dir);
	mkdir(c->dir, 0700);
	int rc = kvt__rdb_open_conf(&env, conf, &t);
	struct side sd = {.tier = t};
	for (uint64_t i = 0; !rc && i < n; i++)
		rc = tier_put(&sd, i, rec, payload, *sum, &r);
	if (!rc)
		kvt_tier_rocksdb.close(t);
	return rc;
}

/* A tier at c->dir/tier (its configuration into conf) filled with total_bytes of payload-byte
 * records (*n of them) and closed. @return : 0 or -errno. */
static int filled(const struct cfg *c, size_t payload, struct kvt__rdb_conf *conf, uint64_t *n)
{
	size_t len = KVT_CHUNK_HDR_BYTES + payload;
	uint8_t *rec = aligned_alloc(KVT_TIER_ALIGN, KVT_ALIGN_UP(len, KVT_TIER_ALIGN));
	uint64_t sum;
	*conf = c->conf;
	*n = KVT_MAX(c->total_bytes / payload, 1);
	int rc = rec ? fill_closed(c, conf, rec, payload, *n, &sum) : -ENOMEM;
	free(rec);
	return rc;
}

/* Fills a tier with total_bytes of payload-byte records, closes it (saving its index), and times
 * its open, with the iterate() kvtierd makes after it, from that index, then (the index removed,
 * as after a crash) walking the records' metadata; then raw iterators over the metadata and
 * over the values, the least each walk can do; then, the metadata deleted (a database from an
 * older kvtier), its open reading every value. */
static int recover_size(const struct cfg *c, size_t payload)
{
	struct kvt__rdb_conf conf;
	struct kvt_tier_env env = {.opts = &c->opts};
	struct kvt_tier *t;
	size_t len = KVT_CHUNK_HDR_BYTES + payload;
	uint64_t n;
	int rc = filled(c, payload, &conf, &n);
	if (rc)
		return rc;
	char ix[PATH_MAX + 16];
	snprintf(ix, sizeof(ix), "%s.index", conf.path);
	double open_s[3], raw_s[3];
	uint64_t found[3], found_raw[3];
	for (int k = 0; k < 3; k++) { /* from the index, walking the metadata, reading values */
		if (k)
			unlink(ix);
		if (k == 2) {
			for (int m = 0; m < 3; m++) { /* metadata, values, values unverified */
				uncache_dir(conf.path);
				if ((rc =
				         raw_scan(&conf, m == 0, m == 2, &found_raw[m], &raw_s[m])))
					return rc;
			}
			if ((rc = drop_meta(&conf)))
				return rc;
		}
		struct kvt_tier_stats st;
		if ((rc = timed_start(&env, &conf, &t, &open_s[k], &st, &found[k])))
			return rc;
		kvt_tier_rocksdb.close(t);
		if (st.opened_from_index != (k == 0) || (st.open_values_read != 0) != (k == 2))
			return -ENOENT;
	}
	char bs[32];
	double tb = 1e12 / ((double)n * (double)len);
	printf("| %s | %llu | %llu / %llu / %llu | %.3f | %.3f | %.3f | %.2f | %.3f | %.3f | "
	       "%.2f | %.3f | %.1f, %.1f, %.0f |\n",
	       kvt_fmt_bytes(payload, bs, sizeof(bs)), (unsigned long long)n,
	       (unsigned long long)found[0], (unsigned long long)found[1],
	       (unsigned long long)found[2], open_s[0], open_s[1], raw_s[0], open_s[1] / raw_s[0],
	       open_s[2], raw_s[1], open_s[2] / raw_s[1], raw_s[2], open_s[0] * tb, open_s[1] * tb,
	       open_s[2] * tb);
	if (found_raw[0] != n || found_raw[1] != n || found_raw[2] != n)
		return -ENOENT;
	fflush(stdout);
	rmtree(c->dir);
	return 0;
}

/* ---- --repair: what a damaged manifest costs ---- */

/* Inverts 64 bytes in the middle of the manifest that path/CURRENT names. */
static int damage_manifest(const char *path)
{
	char f[PATH_MAX + 300], name[256] = {0};
	snprintf(f, sizeof(f), "%s/CURRENT", path);
	FILE *cur = fopen(f, "r");
	if (!cur)
		return -errno;
	bool ok = fgets(name, sizeof(name), cur) != NULL;
	fclose(cur);
	name[strcspn(name, "\n")] = 0;
	snprintf(f, sizeof(f), "%s/%s", path, name);
	int fd = ok ? open(f, O_RDWR | O_CLOEXEC) : -1;
	struct stat st;
	uint8_t b[64];
	if (fd < 0 || fstat(fd, &st) || st.st_size < 128 ||
	    pread(fd, b, 64, st.st_size / 2 - 32) != 64) {
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	for (int k = 0; k < 64; k++)
		b[k] = (uint8_t)~b[k];
	ok = pwrite(fd, b, 64, st.st_size / 2 - 32) == 64 && !fdatasync(fd);
	close(fd);
	return ok ? 0 : -EIO;
}

/* Mean microseconds of a read of each of 1,000 records spread over 0..n-1 through the tier
 * (-1: one was not found whole). */
static double read_us(struct kvt_tier *t, uint64_t n, size_t len, uint8_t *out)
{
	enum { SAMPLES = 1000 };
	uint64_t t0 = kvt_now_ns();
	for (uint64_t s = 0; s < SAMPLES; s++) {
		struct kvt_tier_id id = bench_id(s * 2654435761u % n);
		if (kvt_tier_rocksdb.read(t, &id, 0, out, KVT_ALIGN_UP(len, KVT_TIER_ALIGN)) !=
		    (ssize_t)len)
			return -1;
	}
	return (double)(kvt_now_ns() - t0) / 1e3 / SAMPLES;
}

/* Seconds until a write of record i lands (refused meanwhile: a write stall). */
static double first_write_s(struct kvt_tier *t, uint8_t *rec, size_t payload, uint64_t sum,
                            uint64_t i)
{
	struct side sd = {.tier = t};
	struct result r = {0};
	uint64_t t0 = kvt_now_ns();
	return tier_put(&sd, i, rec, payload, sum, &r) ? -1 : secs(kvt_now_ns() - t0);
}

/* Fills a tier with total_bytes of payload-byte records and closes it; times its open (with
 * kvtierd's iterate() after it) from the saved index, a read of 1,000 records and the first
 * write; then a raw iterator over every value (what a repair must read at least); then the
 * manifest damaged, the same open, which repairs the database from its tables, the same reads
 * and write, and the reads again once that write got through. */
static int repair_size(const struct cfg *c, size_t payload)
{
	struct kvt__rdb_conf conf = c->conf;
	struct kvt_tier_env env = {.opts = &c->opts};
	struct kvt_tier *t;
	size_t len = KVT_CHUNK_HDR_BYTES + payload;
	uint64_t n = KVT_MAX(c->total_bytes / payload, 1);
	uint8_t *rec = aligned_alloc(KVT_TIER_ALIGN, KVT_ALIGN_UP(len, KVT_TIER_ALIGN));
	uint8_t *out = aligned_alloc(KVT_TIER_ALIGN, KVT_ALIGN_UP(len, KVT_TIER_ALIGN));
	uint64_t sum;
	int rc = rec && out ? fill_closed(c, &conf, rec, payload, n, &sum) : -ENOMEM;
	double open_s[2], rd[3], wr[2], raw_s = 0;
	uint64_t found[2], raw_n = 0;
	struct kvt_tier_stats st;
	for (int k = 0; !rc && k < 2; k++) { /* from the index; then repaired */
		if (k) {
			uncache_dir(conf.path);
			if ((rc = raw_scan(&conf, false, false, &raw_n, &raw_s)) ||
			    (rc = damage_manifest(conf.path)))
				break;
		}
		if ((rc = timed_start(&env, &conf, &t, &open_s[k], &st, &found[k])))
			break;
		if (st.repairs != (uint64_t)k && (k == 0 || found[k]))
			rc = -EIO;      /* a repair that failed made it anew: found 0 */
		uncache_dir(conf.path); /* the repair read every table: each read set starts cold */
		rd[k] = read_us(t, n, len, out);
		wr[k] = first_write_s(t, rec, payload, sum, n + (uint64_t)k);
		if (k) {
			uncache_dir(conf.path);
			rd[2] = read_us(t, n, len, out);
		}
		kvt_tier_rocksdb.close(t);
	}
	free(rec);
	free(out);
	if (rc)
		return rc < 0 ? rc : -EIO;
	char bs[32];
	double tb = 1e12 / ((double)n * (double)len);
	printf("| %s | %llu | %llu / %llu | %.3f | %.3f | %.3f | %.2f | %.0f / %.0f / %.0f | "
	       "%.3f / %.3f | %.0f |\n",
	       kvt_fmt_bytes(payload, bs, sizeof(bs)), (unsigned long long)n,
	       (unsigned long long)found[0], (unsigned long long)found[1], open_s[0], open_s[1],
	       raw_s, open_s[1] / raw_s, rd[0], rd[1], rd[2], wr[0], wr[1], open_s[1] * tb);
	fflush(stdout);
	rmtree(c->dir);
	if (raw_n != n + 1 || found[0] != n || (found[1] != n + 1 && found[1]))
		fprintf(stderr, "bench: records: raw %llu, from the index %llu, repaired %llu\n",
		        (unsigned long long)raw_n, (unsigned long long)found[0],
		        (unsigned long long)found[1]);
	return raw_n == n + 1 && found[0] == n && (found[1] == n + 1 || found[1] == 0) &&
	               rd[0] > 0 && wr[1] >= 0
	           ? 0
	           : -ENOENT;
}

/* ---- --mend: what a damaged block of metadata costs a start ---- */

/* The table of the closed database at conf to damage: one holding metadata, in level 0 when
 * level0, else in the deepest level that holds metadata, one that also holds records where
 * there is one (its records are what the mend must keep). @return : its number (its level in
 * *at_level), or 0. */
static uint64_t meta_table(const struct kvt__rdb_conf *conf, bool level0, int *at_level)
{
	struct kvt__rdb_db raw = {0};
	if (kvt__rdb_db_open(&raw, conf))
		return 0;
	const rocksdb_livefiles_t *lf = rocksdb_livefiles(raw.db);
	uint64_t pick = 0;
	int best = -1; /* level * 2 + holds records */
	for (int i = 0; lf && i < rocksdb_livefiles_count(lf); i++) {
		size_t lo_len, hi_len;
		const char *lo = rocksdb_livefiles_smallestkey(lf, i, &lo_len);
		const char *hi = rocksdb_livefiles_largestkey(lf, i, &hi_len);
		int level = rocksdb_livefiles_level(lf, i);
		bool meta = memcmp(hi, raw.meta_lo, KVT_MIN(hi_len, sizeof(raw.meta_lo))) >= 0;
		bool records = memcmp(lo, raw.meta_lo, KVT_MIN(lo_len, sizeof(raw.meta_lo))) < 0;
		int score = level * 2 + records;
		if (meta && (level == 0) == level0 && score > best) {
			best = score, *at_level = level;
			pick = kvt__rdb_table_named(rocksdb_livefiles_name(lf, i));
		}
	}
	if (lf)
		rocksdb_livefiles_destroy(lf);
	kvt__rdb_db_close(&raw);
	return pick;
}

/* Flips a bit of the first metadata key (0xff x 36, 0, ...) in table no of the database at
 * conf (not compressed: the key is there as written), so that its block fails its checksum.
 * @return : 0, or -ENOENT where there is none. */
static int damage_metadata(const struct kvt__rdb_conf *conf, uint64_t no)
{
	uint8_t lo[KVT__RDB_META_LO_BYTES];
	char f[PATH_MAX + 32];
	const uint8_t *m;
	size_t size;
	kvt__rdb_meta_lo(lo);
	snprintf(f, sizeof(f), "%s/%06llu.sst", conf->path, (unsigned long long)no);
	if (!no || kvt_file_map(f, SIZE_MAX, &m, &size))
		return -ENOENT;
	const uint8_t *at = memmem(m, size, lo, sizeof(lo));
	off_t off = at && (size_t)(at - m) + sizeof(lo) + 8 < size
	                ? (off_t)(at - m) + (off_t)sizeof(lo) + 8
	                : -1;
	kvt_file_unmap(m, size);
	int fd = off < 0 ? -1 : open(f, O_RDWR | O_CLOEXEC), rc = -ENOENT;
	uint8_t b;
	if (fd >= 0 && pread(fd, &b, 1, off) == 1) {
		b ^= 1;
		rc = pwrite(fd, &b, 1, off) == 1 && !fdatasync(fd) ? 0 : -EIO;
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Fills a tier with total_bytes of payload-byte records and closes it; times its open with
 * kvtierd's iterate() after it, from the saved index; then a raw iterator over every value (the
 * least a walk of the records can do); then a block of metadata damaged (in a table of the
 * deepest level holding metadata, or with c->level0 of level 0), the same open and iterate(),
 * which walks the records instead and puts their metadata again; then the same once more (the
 * next start), and in it a compaction of every table and a write: a damaged block left in a
 * table fails the compaction, and then the write, which sends the tier to its mend. */
static int mend_size(const struct cfg *c, size_t payload)
{
	struct kvt__rdb_conf conf = c->conf;
	struct kvt_tier_env env = {.opts = &c->opts};
	struct kvt_tier *t;
	size_t len = KVT_CHUNK_HDR_BYTES + payload;
	uint64_t n = KVT_MAX(c->total_bytes / payload, 1), raw_n = 0, found[3] = {0},
	         values[3] = {0}, after = 0, sum, no = 0;
	double open_s[3] = {0}, raw_s = 0, write_s = -1;
	uint8_t *rec = aligned_alloc(KVT_TIER_ALIGN, KVT_ALIGN_UP(len, KVT_TIER_ALIGN));
	int rc = rec ? fill_closed(c, &conf, rec, payload, n, &sum) : -ENOMEM, level = -1;
	for (int k = 0; !rc && k < 3; k++) { /* whole; damaged; the next start */
		if (k == 1) {
			uncache_dir(conf.path);
			if ((rc = raw_scan(&conf, false, false, &raw_n, &raw_s)) ||
			    (rc =
			         damage_metadata(&conf, no = meta_table(&conf, c->level0, &level))))
				break;
		}
		struct kvt_tier_stats st;
		if ((rc = timed_start(&env, &conf, &t, &open_s[k], &st, &found[k])))
			break;
		found[k] = st.opened_from_index ? found[k] : 0;
		values[k] = st.open_values_read;
		if (k == 2) {
			if (!kvt__rdb_compact(t))
				write_s = first_write_s(t, rec, payload, sum, n);
			kvt_tier_rocksdb.stats(t, &st);
			after = st.chunks;
		}
		kvt_tier_rocksdb.close(t);
	}
	free(rec);
	if (rc)
		return rc < 0 ? rc : -EIO;
	char bs[32];
	double tb = 1e12 / ((double)n * (double)len);
	printf("| %s | %llu | %d | %llu / %llu / %llu | %.3f | %.3f | %.3f | %.2f | %.3f | %llu, "
	       "%llu | %s | %llu | %.0f, %.0f |\n",
	       kvt_fmt_bytes(payload, bs, sizeof(bs)), (unsigned long long)n, level,
	       (unsigned long long)found[0], (unsigned long long)found[1],
	       (unsigned long long)found[2], open_s[0], open_s[1], raw_s, open_s[1] / raw_s,
	       open_s[2], (unsigned long long)values[1], (unsigned long long)values[2],
	       write_s >= 0 ? "lands" : "fails", (unsigned long long)after, open_s[1] * tb,
	       open_s[2] * tb);
	fflush(stdout);
	rmtree(c->dir);
	/* in level 0 the damaged table stays (evacuate.c): only the mend itself is promised */
	bool right =
	    raw_n == n && found[0] == n && found[1] == n && values[0] == 0 && values[1] == n &&
	    (c->level0 || (found[2] == n && values[2] == 0 && write_s >= 0 && after == n + 1));
	if (!right)
		fprintf(stderr,
		        "bench: records: raw %llu, found %llu / %llu / %llu, values read %llu / "
		        "%llu / %llu, the write after a compaction %s, %llu records after it\n",
		        (unsigned long long)raw_n, (unsigned long long)found[0],
		        (unsigned long long)found[1], (unsigned long long)found[2],
		        (unsigned long long)values[0], (unsigned long long)values[1],
		        (unsigned long long)values[2], write_s >= 0 ? "landed" : "failed",
		        (unsigned long long)after);
	return right ? 0 : -ENOENT;
}

static void log_stderr(enum kvt_log_level lvl, const char *msg)
{
	(void)lvl;
	fprintf(stderr, "%s\n", msg);
}

static void usage(void)
{
	puts("kvtier-bench-rocksdb: the rocksdb tier against raw RocksDB, same options, same run\n"
	     "  --dir DIR           scratch directory (default /tmp/kvtier-bench-rocksdb.PID)\n"
	     "  --mib N             bytes written per size and phase (default 256)\n"
	     "  --reps N            repetitions, the median is printed (default 3)\n"
	     "  --sizes A,B         payload sizes (default 256KiB,2MiB)\n"
	     "  --set NAME=VALUE    a rocksdb.* option (rocksdb.wal, rocksdb.blob_min_bytes, ...)\n"
	     "  --universal         universal compaction instead of level\n"
	     "  --recover           time the open of a tier of --mib from the index its close "
	     "saved,\n"
	     "                      walking the records' metadata (after a crash) and reading "
	     "every\n"
	     "                      value (a database from before the metadata), against raw\n"
	     "                      iterators over the metadata and over the values\n"
	     "  --repair            the same tier's open from its index, then with its manifest\n"
	     "                      damaged (RocksDB's repair), against a raw iterator over\n"
	     "                      every value; reads and the first write after each\n"
	     "  --mend              the same tier's open and iterate() from its index, then with\n"
	     "                      a block of its metadata damaged (the records walked instead),\n"
	     "                      against a raw iterator over every value; then the next\n"
	     "                      start, a compaction of every table and a write\n"
	     "  --level0            with --mend: the damaged block in a table of level 0 (the\n"
	     "                      default: the deepest level holding metadata)");
}

/* s as a whole number from lo to hi. @return : 0 or -EINVAL. */
static int whole(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"dir", 1, 0, 'd'},   {"mib", 1, 0, 'm'},     {"reps", 1, 0, 'r'},
	    {"sizes", 1, 0, 's'}, {"set", 1, 0, 'o'},     {"universal", 0, 0, 'u'},
	    {"help", 0, 0, 'h'},  {"recover", 0, 0, 'R'}, {"repair", 0, 0, 'P'},
	    {"mend", 0, 0, 'M'},  {"level0", 0, 0, 'L'},  {0, 0, 0, 0},
	};
	struct cfg c = {.total_bytes = 256ull << 20, .reps = 3};
	char dir[PATH_MAX], sizes[256] = "256KiB,2MiB";
	bool universal = false, recover = false, repair = false, mend = false;
	int opt;
	snprintf(dir, sizeof(dir), "/tmp/kvtier-bench-rocksdb.%d", (int)getpid());
	c.dir = dir;
	kvt_opts_defaults(&c.opts);
	kvt_opts_set(&c.opts, "rocksdb.bytes", "1TiB");
	kvt_log_set(log_stderr, KVT_LOG_WARN); /* why a phase failed */
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'd':
			snprintf(dir, sizeof(dir), "%s", optarg);
			break;
		case 'm': /* a word it could not read ran as 0 MiB: a phase of one record */
			if (whole(optarg, 1, 1 << 24, &c.total_bytes)) {
				fprintf(stderr, "bench: --mib %s: not a count of MiB from 1\n",
				        optarg);
				return 2;
			}
			c.total_bytes <<= 20;
			break;
		case 'r': {
			uint64_t reps;
			if (whole(optarg, 1, 16, &reps)) { /* 0 and "x" ran as 1, 99 as 16 */
				fprintf(stderr, "bench: --reps %s: not a count from 1 to 16\n",
				        optarg);
				return 2;
			}
			c.reps = (int)reps;
			break;
		}
		case 's':
			snprintf(sizes, sizeof(sizes), "%s", optarg);
			break;
		case 'o':
			/* another option (host.bytes=1MiB) was taken, and nothing read it */
			if (strncmp(optarg, "rocksdb.", 8)) {
				fprintf(stderr, "bench: --set %s: not a rocksdb.* option\n",
				        optarg);
				return 2;
			}
			if (kvt_opts_set_pair(&c.opts, optarg)) {
				fprintf(stderr, "bench: bad option %s\n", optarg);
				return 2;
			}
			break;
		case 'u':
			universal = true;
			break;
		case 'R':
			recover = true;
			break;
		case 'P':
			repair = true;
			break;
		case 'M':
			mend = true;
			break;
		case 'L':
			c.level0 = true;
			break;
		default:
			usage();
			return opt == 'h' ? 0 : 2;
		}
	}
	if (optind < argc) { /* a word that is no option */
		usage();
		return 2;
	}
	if (kvt__rdb_conf_from_opts(&c.conf, &c.opts, dir))
		return 2;
	if (universal)
		c.conf.compaction = KVT__RDB_UNIVERSAL;
	printf("rocksdb bench: wal=%d compression=%s blob_min_bytes=%llu block_cache=%llu "
	       "compaction=%s reps=%d\n",
	       c.conf.wal, kvt_opt_str(&c.opts, KVT_OPT_ROCKSDB_COMPRESSION),
	       (unsigned long long)c.conf.blob_min_bytes,
	       (unsigned long long)c.conf.block_cache_bytes, universal ? "universal" : "level",
	       c.reps);
	if (recover)
		printf(
		    "| payload | records | found: index / metadata / values | open + iterate from "
		    "index s | the same walking metadata s | raw metadata iterator s | walk/raw | "
		    "the same reading values s | raw value iterator s | values/raw | the raw "
		    "one, checksums unchecked s | s per TB: index, metadata, values |\n"
		    "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	else if (repair)
		printf("| payload | records | found: index / repaired | open + iterate from index "
		       "s | the same repairing s | raw value iterator s | repair/raw | read us: "
		       "index / repaired / after the first write | first write s: index / repaired "
		       "| s "
		       "per TB repairing |\n"
		       "|---|---|---|---|---|---|---|---|---|---|---|\n");
	else if (mend)
		printf(
		    "| payload | records | damaged table's level | found: index / damaged / next | "
		    "open + iterate from "
		    "index s | the same, a metadata block damaged s | raw value iterator s | "
		    "damaged/raw | the next start s | values read: damaged, next | then a "
		    "compaction and a write | records after | s per TB: damaged, next |\n"
		    "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (char *save = NULL, *s = strtok_r(sizes, ",", &save); s;
	     s = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (kvt_parse_size(s, &v) || !v) {
			fprintf(stderr, "bench: bad size %s\n", s);
			return 2;
		}
		int rc = recover  ? recover_size(&c, (size_t)v)
		         : repair ? repair_size(&c, (size_t)v)
		         : mend   ? mend_size(&c, (size_t)v)
		                  : bench_size(&c, (size_t)v);
		if (rc) {
			fprintf(stderr, "bench: %s\n", strerror(rc < 0 ? -rc : EIO));
			return 1;
		}
	}
	return 0;
}
