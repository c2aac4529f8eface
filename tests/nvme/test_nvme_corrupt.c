/*
 * test_nvme_corrupt.c -- on-disk damage (RELIABILITY.md B7, D4): flip one random bit per MiB of
 * the tier file (superblocks and region headers included), then truncate it; copy whole 4 KiB
 * blocks to other places (misdirected writes: record headers, tombstones and region headers
 * where the walk will meet them) and zero others (lost writes); after each, open never fails or
 * crashes and every read is the right bytes, -EBADMSG (counted) or -ENOENT. The damage is done
 * after a clean close: even trials walk the log at the reopen (what the walk makes of damage),
 * odd ones read the index the close saved (the damage is found when a record is read).
 */
#include "nvme_fixture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 120

static size_t len_of(uint64_t seed)
{
	return nvt_len(seed, 1000, 400 << 10);
}

static void flip_bits(const char *path, uint64_t seed, size_t per_mib, bool headers)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	uint64_t x = seed;
	size_t flips = (size_t)(st.st_size >> 20) * per_mib;
	for (size_t i = 0; i < flips; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		off_t off = (off_t)((x >> 16) % (uint64_t)st.st_size);
		if (headers) /* aim at 4 KiB block starts: record headers and tombstones */
			off = off & ~(off_t)4095, off += (off_t)((x >> 8) % 128);
		uint8_t b;
		assert_int_equal(pread(fd, &b, 1, off), 1);
		b ^= (uint8_t)(1u << (x % 8));
		assert_int_equal(pwrite(fd, &b, 1, off), 1);
	}
	close(fd);
}

/* Record i's payload length; with small, every fourth fits one block with its header. */
static size_t rec_len(uint64_t i, bool small)
{
	return small && i % 4 == 0 ? 500 + i : len_of(i + 1);
}

/* A fresh 64 MiB tier holding N records (record i has seed i + 1), its path and their locs. */
static void open_filled(struct nvt *n, char *path, size_t path_len, uint64_t *loc, bool small)
{
	nvt_init(n, "64MiB", "8");
	nvt_path(n, path, path_len);
	assert_int_equal(nvt_open(n), 0);
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(nvt_put(n, i + 1, rec_len(i, small), &loc[i]), 0);
}

/* Reads all N records. @return : how many were -EBADMSG; fails on a wrong byte. */
static size_t read_all(struct nvt *n, const uint64_t *loc, size_t *missing)
{
	size_t bad = 0;
	*missing = 0;
	for (uint64_t i = 0; i < N; i++) {
		int rc = nvt_check(n, i + 1, len_of(i + 1), loc[i]);
		assert_true(rc == 0 || rc == -EBADMSG || rc == -ENOENT);
		bad += rc == -EBADMSG;
		*missing += rc == -ENOENT;
	}
	return bad;
}

static void test_nvme_corrupt_flip_truncate(void **state)
{
	for (uint64_t trial = 0; trial < 3; trial++) {
		struct nvt n;
		char path[512];
		uint64_t loc[N];
		open_filled(&n, path, sizeof(path), loc, false);
		nvt_close(&n);
		n.hooks.no_index = trial % 2 == 0;

		flip_bits(path, 1000 + trial, 1, false);
		flip_bits(path, 2000 + trial, 1, true);
		assert_int_equal(nvt_open(&n), 0);
		assert_int_equal(nvt_xstats(&n).index_loads, trial % 2);
		size_t missing, bad = read_all(&n, loc, &missing);
		struct kvt_tier_stats s = nvt_stats(&n);
		print_message(
		    "trial %llu (%s) flips: %zu -EBADMSG, %zu -ENOENT, %llu corruptions counted\n",
		    (unsigned long long)trial, trial % 2 ? "index" : "walk", bad, missing,
		    (unsigned long long)s.corruptions);
		assert_true(bad + missing > 0);    /* the damage was seen ... */
		assert_true(s.corruptions >= bad); /* ... and counted */
		/* by the checksum that follows each read's pieces as they land */
		assert_true(nvt_xstats(&n).landed_sums > 0);
		/* a corrupt record was dropped: the second read is a miss */
		assert_int_equal(read_all(&n, loc, &missing), 0);
		nvt_close(&n);

		/* truncate in the middle of the records, then reopen (the file is re-extended) */
		assert_int_equal(truncate(path, (off_t)(20 + trial * 7) << 20), 0);
		assert_int_equal(nvt_open(&n), 0);
		bad = read_all(&n, loc, &missing);
		assert_true(missing > 0);
		uint64_t l2;
		assert_int_equal(nvt_put(&n, 5000, 5000, &l2), 0); /* and it still works */
		assert_int_equal(nvt_check(&n, 5000, 5000, l2), 0);
		nvt_fini(&n);
	}
}

/* Copies `moves` random 4 KiB blocks over other random blocks, and zeroes `zeros` more. */
static void move_blocks(const char *path, uint64_t seed, size_t moves, size_t zeros)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	uint64_t blocks = (uint64_t)st.st_size / 4096, x = seed;
	static uint8_t b[4096];
	for (size_t i = 0; i < moves + zeros; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		off_t from = (off_t)((x >> 20) % blocks) * 4096;
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		off_t to = (off_t)((x >> 20) % blocks) * 4096;
		if (i < moves)
			assert_int_equal(pread(fd, b, 4096, from), 4096);
		else
			memset(b, 0, sizeof(b));
		assert_int_equal(pwrite(fd, b, 4096, to), 4096);
	}
	close(fd);
}

static void test_nvme_corrupt_moved_blocks(void **state)
{
	for (uint64_t trial = 0; trial < 4; trial++) {
		struct nvt n;
		char path[512];
		uint64_t loc[N];
		open_filled(&n, path, sizeof(path), loc, true); /* small records too */
		for (uint64_t i = 0; i < N; i += 5) {           /* tombstones to misplace */
			struct kvt_tier_id id = nvt_id(i + 1);
			assert_int_equal(kvt_tier_nvme.remove(n.t, &id, loc[i]), 0);
		}
		nvt_close(&n);
		n.hooks.no_index = trial % 2 == 0;
		move_blocks(path, 3000 + trial, 48, 16);
		assert_int_equal(nvt_open(&n), 0);
		assert_int_equal(nvt_xstats(&n).index_loads, trial % 2);
		size_t right = 0, bad = 0, missing = 0;
		for (uint64_t i = 0; i < N; i++) {
			int rc = nvt_check(&n, i + 1, rec_len(i, true), loc[i]);
			assert_true(rc == 0 || rc == -EBADMSG || rc == -ENOENT);
			right += rc == 0, bad += rc == -EBADMSG, missing += rc == -ENOENT;
		}
		struct nvt_offered w = {0, &n};
		assert_int_equal(kvt_tier_nvme.iterate(n.t, nvt_visit_right_or_bad, &w), 0);
		print_message(
		    "trial %llu (%s): %zu right, %zu -EBADMSG, %zu -ENOENT; %zu offered by "
		    "iterate\n",
		    (unsigned long long)trial, trial % 2 ? "index" : "walk", right, bad, missing,
		    w.n);
		assert_true(right > 0);
		uint64_t l2;
		assert_int_equal(nvt_put(&n, 6000, 7000, &l2), 0); /* and it still works */
		assert_int_equal(nvt_check(&n, 6000, 7000, l2), 0);
		nvt_fini(&n);
	}
}

static void test_nvme_corrupt_garbage_file(void **state)
{
	struct nvt n;
	char path[512];
	nvt_init(&n, "16MiB", "4");
	nvt_path(&n, path, sizeof(path));
	int fd = open(path, O_RDWR | O_CREAT, 0600);
	uint8_t *junk = malloc(16 << 20);
	kvt_test_fill(junk, 16 << 20, 99);
	assert_int_equal(write(fd, junk, 16 << 20), 16 << 20);
	close(fd);
	free(junk);
	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(nvt_stats(&n).chunks, 0);
	uint64_t loc;
	assert_int_equal(nvt_put(&n, 1, 5000, &loc), 0);
	assert_int_equal(nvt_check(&n, 1, 5000, loc), 0);
	nvt_fini(&n);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nvme_corrupt_flip_truncate),
	    cmocka_unit_test(test_nvme_corrupt_garbage_file),
	    cmocka_unit_test(test_nvme_corrupt_moved_blocks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
