/*
 * test_rocksdb_full.c -- the rocksdb tier on a full filesystem (RELIABILITY.md F7).
 *
 * A 32 MiB tmpfs is mounted for the test (root only; exit 77 where mounting is not permitted)
 * with a ballast file in it. The tier is written until RocksDB meets ENOSPC; then writes must
 * fail fast with -ENOSPC, reads of what was acknowledged keep working, and after the ballast is
 * removed writes resume without closing the tier. Records the failed flushes lost are reported
 * through env->dropped; nothing read is ever wrong.
 */
#include "rdb_fixture.h"

#include <sys/stat.h>
#include <unistd.h>

enum { PAYLOAD = 256 << 10, MAX_REC = 400 };

static char mnt[300]; /* a tmpfs mounted under dir */

static int setup(void **state)
{
	if (kvt_test_mount_tmpfs(dir, sizeof(dir), mnt, sizeof(mnt), "32m"))
		exit(KVT_TEST_SKIP);
	return 0;
}

static int teardown(void **state)
{
	kvt_test_umount_tmpfs(dir, mnt);
	return 0;
}

static void test_rocksdb_disk_full(void **state)
{
	struct kvt_options o;
	struct kvt__rdb_conf c;
	struct rdb_drops d = {.seen = calloc(MAX_REC, 1), .max_id = MAX_REC};
	char bal[400];
	uint64_t loc;
	uint32_t acked = 0;
	int rc = 0;
	snprintf(bal, sizeof(bal), "%s/ballast", mnt);
	kvt_test_ballast(bal, 12 << 20);
	rdb_opts(&o, mnt, 1ull << 30, NULL);
	assert_int_equal(kvt__rdb_conf_from_opts(&c, &o, NULL), 0);
	c.write_buffer_bytes = 2 << 20; /* flush often so ENOSPC comes from a flush soon */
	struct kvt_tier_env env = rdb_env(&o, &d);
	struct kvt_tier *t;
	assert_int_equal(kvt__rdb_open_conf(&env, &c, &t), 0);
	uint8_t *buf = rdb_buf(KVT_CHUNK_HDR_BYTES + PAYLOAD),
	        *exp = rdb_buf(KVT_CHUNK_HDR_BYTES + PAYLOAD);

	/* Fill: with the WAL off, ENOSPC surfaces once a background flush has failed. */
	for (uint32_t i = 0; i < MAX_REC; i++) {
		size_t len = rdb_record(buf, i, PAYLOAD);
		rc = kvt_tier_rocksdb.write(t, buf, len, rdb_pad(len), &loc);
		if (rc == -EAGAIN) {
			usleep(2000);
			i--;
			continue;
		}
		if (rc)
			break;
		acked = i + 1;
	}
	assert_int_equal(rc, -ENOSPC);
	assert_true(acked > 0);
	assert_true(rdb_stats(t).full);
	print_message("full after %u records of %u KiB\n", acked, PAYLOAD >> 10);

	/* Fails fast, and without calling into RocksDB until the next probe. */
	uint64_t worst_ns = 0;
	for (int k = 0; k < 200; k++) {
		size_t len = rdb_record(buf, MAX_REC - 1, PAYLOAD);
		uint64_t t0 = kvt_now_ns();
		assert_int_equal(kvt_tier_rocksdb.write(t, buf, len, rdb_pad(len), &loc), -ENOSPC);
		worst_ns = KVT_MAX(worst_ns, kvt_now_ns() - t0);
	}
	print_message("worst failing write: %.3f ms\n", worst_ns / 1e6);
	assert_true(worst_ns < 50ull * 1000 * 1000);

	/* Reads keep working: every acknowledged record is a verified hit. */
	for (uint32_t i = 0; i < acked; i++)
		assert_int_equal(rdb_check(t, i, PAYLOAD, buf, exp), KVT_CHUNK_HDR_BYTES + PAYLOAD);

	/* Space returns: the tier reopens itself within the probe interval. */
	assert_int_equal(unlink(bal), 0);
	uint64_t t0 = kvt_now_ns();
	do {
		size_t len = rdb_record(buf, MAX_REC - 1, PAYLOAD);
		rc = kvt_tier_rocksdb.write(t, buf, len, rdb_pad(len), &loc);
		if (rc)
			usleep(50 * 1000);
	} while (rc && kvt_now_ns() - t0 < 10ull * 1000 * 1000 * 1000);
	assert_int_equal(rc, 0);
	print_message("resumed after %.0f ms; %llu records reported lost\n",
	              (kvt_now_ns() - t0) / 1e6, (unsigned long long)d.n);
	struct kvt_tier_stats s = rdb_stats(t);
	assert_false(s.full);

	/* After the reopen: each acknowledged record is a hit or was reported dropped. */
	uint64_t live = 1;
	for (uint32_t i = 0; i < acked; i++) {
		ssize_t n = rdb_check(t, i, PAYLOAD, buf, exp);
		if (d.seen[i]) {
			assert_int_equal(n, -ENOENT);
		} else {
			assert_int_equal(n, KVT_CHUNK_HDR_BYTES + PAYLOAD);
			live++;
		}
	}
	s = rdb_stats(t);
	assert_int_equal(s.chunks, live);
	assert_int_equal(s.used_bytes, live * (KVT_CHUNK_HDR_BYTES + PAYLOAD));
	assert_int_equal(s.corruptions, 0);
	assert_int_equal(rdb_check(t, MAX_REC - 1, PAYLOAD, buf, exp),
	                 KVT_CHUNK_HDR_BYTES + PAYLOAD);
	kvt_tier_rocksdb.close(t);
	free(d.seen);
	free(buf);
	free(exp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_rocksdb_disk_full, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
