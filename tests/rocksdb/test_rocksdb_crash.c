/*
 * test_rocksdb_crash.c -- kill -9 of a process writing through the rocksdb tier, then reopen.
 *
 * What the tier promises across a process crash (not a power loss, which needs fsync):
 * - rocksdb.wal=true: every acknowledged write is found.
 * - rocksdb.wal=false (default): every write acknowledged before the last completed memtable
 *   flush is found (flushes happen when the 64 MiB memtable fills, at close, and on
 *   kvt__rdb_flush); later ones may be lost.
 * In both: nothing found is wrong (iterate and read verify every byte), usage equals the sum of
 * what is found, nothing found was never written, and the open found it all through the
 * records' metadata without reading a value.
 */
#include "rdb_fixture.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

enum { PAYLOAD = 48 << 10, MAX_REC = 4000, KILL_AFTER = 300, FLUSHED = 100 };

/* The child: writes records 0.., acknowledging each on the pipe after write() returned. */
static _Noreturn void writer(const struct kvt_options *o, int fd, bool flush_first)
{
	struct kvt_tier_env env = {.opts = o};
	struct kvt_tier *t;
	uint64_t loc;
	uint8_t *buf = NULL;
	if (kvt_tier_rocksdb.open(&env, &t) ||
	    posix_memalign((void **)&buf, KVT_TIER_ALIGN, rdb_pad(KVT_CHUNK_HDR_BYTES + PAYLOAD)))
		_exit(2);
	for (uint32_t i = 0; i < MAX_REC; i++) {
		size_t len = rdb_record(buf, i, PAYLOAD);
		int rc = kvt_tier_rocksdb.write(t, buf, len, rdb_pad(len), &loc);
		if (rc == -EAGAIN) { /* stall: the caller retries later */
			usleep(1000);
			i--;
			continue;
		}
		if (rc)
			_exit(3);
		if (flush_first && i + 1 == FLUSHED && kvt__rdb_flush(t, true))
			_exit(4);
		if (write(fd, &i, sizeof(i)) != sizeof(i))
			_exit(5);
	}
	pause();
	_exit(0);
}

struct found {
	uint64_t n, bytes;
	uint8_t seen[MAX_REC];
};

static int visit(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	struct found *f = arg;
	assert_int_equal(h->tenant, RDB_TENANT);
	assert_true(h->key.w[0] < MAX_REC);
	f->seen[h->key.w[0]] = 1;
	f->n++;
	f->bytes += KVT_CHUNK_HDR_BYTES + h->payload_bytes;
	return 0;
}

/* RELIABILITY D2's "actual bytes": the records in the database as RocksDB itself iterates
 * them (the raw C API, the tier closed): how many, and the sum of their values' lengths. */
static uint64_t raw_record_bytes(const char *dir_, uint64_t *n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/db", dir_);
	struct rdb_raw r;
	rdb_raw_open(&r, path);
	uint8_t lo[KVT__RDB_META_LO_BYTES];
	kvt__rdb_meta_lo(lo);
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_iterator_t *it = rocksdb_create_iterator(r.db, ro);
	uint64_t bytes = 0;
	*n = 0;
	for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl, vl;
		const char *k = rocksdb_iter_key(it, &kl);
		rocksdb_iter_value(it, &vl);
		if (kl == KVT__RDB_KEY_BYTES && memcmp(k, lo, KVT__RDB_KEY_BYTES) < 0) {
			bytes += vl; /* a record (the metadata's keys sort after them) */
			(*n)++;
		}
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	rdb_raw_close(&r);
	return bytes;
}

static void crash_and_check(bool wal)
{
	struct kvt_options o;
	const char *extra[] = {wal ? "rocksdb.wal=true" : "rocksdb.wal=false", NULL};
	int p[2];
	uint32_t acked = 0, i;
	rdb_opts(&o, dir, 1ull << 30, extra);
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* A fresh image: RocksDB's background threads do not survive fork(), and this
		 * process has used RocksDB in an earlier test. */
		char fd[16];
		snprintf(fd, sizeof(fd), "%d", p[1]);
		close(p[0]);
		execl("/proc/self/exe", "test_rocksdb_crash", "writer", dir, wal ? "1" : "0", fd,
		      (char *)NULL);
		_exit(6);
	}
	close(p[1]);
	while (acked < KILL_AFTER && read(p[0], &i, sizeof(i)) == sizeof(i))
		acked = i + 1;
	assert_int_equal(acked, KILL_AFTER);
	kill(pid, SIGKILL);
	while (read(p[0], &i, sizeof(i)) == sizeof(i)) /* acks sent before the kill landed */
		acked = i + 1;
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	close(p[0]);

	uint64_t raw_n, raw_bytes = raw_record_bytes(dir, &raw_n);
	struct rdb_drops d = {0};
	struct kvt_tier_env env = rdb_env(&o, &d);
	struct kvt_tier *t;
	assert_int_equal(kvt_tier_rocksdb.open(&env, &t), 0);
	struct found *f = calloc(1, sizeof(*f));
	assert_int_equal(kvt_tier_rocksdb.iterate(t, visit, f), 0);
	struct kvt_tier_stats s = rdb_stats(t);
	/* no index saved: the open walked the records' metadata, not their values */
	assert_int_equal(s.opened_from_index, 0);
	assert_int_equal(s.open_values_read, 0);
	assert_int_equal(s.used_bytes, f->bytes);
	assert_int_equal(s.chunks, f->n);
	/* and what RocksDB holds: the same records, the same bytes (D2 allows 1 %) */
	print_message("wal=%d: usage %llu bytes in %llu chunks; RocksDB holds %llu records of "
	              "%llu bytes\n",
	              wal, (unsigned long long)s.used_bytes, (unsigned long long)s.chunks,
	              (unsigned long long)raw_n, (unsigned long long)raw_bytes);
	assert_int_equal(s.chunks, raw_n);
	assert_int_equal(s.used_bytes, raw_bytes);
	assert_int_equal(s.corruptions, 0);
	uint32_t must = wal ? acked : FLUSHED;
	uint8_t *buf = rdb_buf(KVT_CHUNK_HDR_BYTES + PAYLOAD),
	        *exp = rdb_buf(KVT_CHUNK_HDR_BYTES + PAYLOAD);
	for (i = 0; i < MAX_REC; i++) {
		if (i < must)
			assert_true(f->seen[i]);
		if (i > acked) /* at most one write in flight past the last ack */
			assert_false(f->seen[i]);
		if (f->seen[i])
			assert_int_equal(rdb_check(t, i, PAYLOAD, buf, exp),
			                 KVT_CHUNK_HDR_BYTES + PAYLOAD);
	}
	print_message("wal=%d: acked %u, found %llu\n", wal, acked, (unsigned long long)f->n);
	kvt_tier_rocksdb.close(t);
	free(f);
	free(buf);
	free(exp);
}

static void test_rocksdb_crash_wal(void **state)
{
	crash_and_check(true);
}

static void test_rocksdb_crash_nowal_flushed(void **state)
{
	crash_and_check(false);
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "writer")) {
		struct kvt_options o;
		const char *extra[] = {atoi(argv[3]) ? "rocksdb.wal=true" : "rocksdb.wal=false",
		                       NULL};
		rdb_opts(&o, argv[2], 1ull << 30, extra);
		writer(&o, atoi(argv[4]), !atoi(argv[3]));
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_rocksdb_crash_wal, rdb_setup, rdb_teardown),
	    cmocka_unit_test_setup_teardown(test_rocksdb_crash_nowal_flushed, rdb_setup,
	                                    rdb_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
