/*
 * test_nvme_index.c -- the index a clean close saves (tiers/nvme/index.c, RELIABILITY.md D1):
 * the open that reads it finds exactly what a walk of the log finds, byte for byte, and the
 * tier goes on writing where it left off; an index that is stale, damaged, cut short or from
 * before a crash is refused and the open walks; none is written while hand-overs to the next
 * tier are pending; a record whose tombstone never landed stays deleted across a warm roll, and
 * so does one removed while the tier was disabled (its tombstone written at enable(), or the
 * index saved by a close on the failing device).
 */
#include "nvme_fixture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <xxhash.h>

#define N 600

static size_t len_of(uint64_t seed)
{
	return nvt_len(seed, 1000, 200 << 10);
}

static const char *index_path(const struct nvt *n, char *buf, size_t len)
{
	snprintf(buf, len, "%s/nvme.dat.index", n->dir);
	return buf;
}

static bool index_exists(const struct nvt *n)
{
	char p[600];
	return access(index_path(n, p, sizeof(p)), F_OK) == 0;
}

/* A 64 MiB tier (8 MiB regions) written N records through, so the ring has wrapped; every
 * seventh record removed. loc[i] is record i + 1's. */
static void fill(struct nvt *n, uint64_t *loc)
{
	nvt_init(n, "64MiB", "8");
	assert_int_equal(nvt_open(n), 0);
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(nvt_put(n, i + 1, len_of(i + 1), &loc[i]), 0);
	for (uint64_t i = 0; i < N; i += 7) {
		struct kvt_tier_id id = nvt_id(i + 1);
		int rc = kvt_tier_nvme.remove(n->t, &id, loc[i]);
		assert_true(rc == 0 || rc == -ENOENT); /* -ENOENT: reclaimed already */
	}
	assert_true(nvt_stats(n).evictions > 0);
}

/* Every record iterate offers reads back byte for byte, and the usage is theirs exactly. */
static size_t verify(struct nvt *n)
{
	struct nvt_walk w = {.nv = n};
	assert_int_equal(kvt_tier_nvme.iterate(n->t, nvt_verify_visit, &w), 0);
	struct kvt_tier_stats s = nvt_stats(n);
	assert_int_equal(s.chunks, w.n);
	assert_int_equal(s.used_bytes, w.bytes);
	return w.n;
}

static void test_nvme_index_matches_walk(void **state)
{
	(void)state;
	static struct nvt_snap a, b;
	struct nvt n;
	uint64_t loc[N];
	fill(&n, loc);
	nvt_close(&n);
	assert_true(index_exists(&n));

	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(nvt_xstats(&n).index_loads, 1);
	assert_false(index_exists(&n)); /* good for one open only */
	nvt_snap_take(&n, &a);
	size_t held = verify(&n);
	struct kvt_tier_stats sa = nvt_stats(&n);
	nvt_close(&n);

	n.hooks.no_index = true; /* the same file, walked */
	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(nvt_xstats(&n).index_loads, 0);
	nvt_snap_take(&n, &b);
	struct kvt_tier_stats sb = nvt_stats(&n);
	print_message("%zu records written, %zu held; the index and the walk found %zu and %zu\n",
	              (size_t)N, held, a.n, b.n);
	assert_true(held > 100);
	assert_int_equal(a.n, b.n);
	assert_memory_equal(a.loc, b.loc, a.n * sizeof(a.loc[0]));
	assert_memory_equal(a.seed, b.seed, a.n * sizeof(a.seed[0]));
	assert_int_equal(sa.used_bytes, sb.used_bytes);
	assert_int_equal(sa.chunks, sb.chunks);
	nvt_fini(&n);
}

/* After an open from the index the log goes on where it stopped: new records land, old ones
 * stay readable until the ring reclaims them (reported as dropped), and a walk agrees. */
static bool holds(const struct nvt_snap *s, uint64_t loc)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->loc[i] == loc)
			return true;
	return false;
}

/* After an open from the index the log goes on where it stopped: new records land, the records
 * it held stay readable until the ring reclaims them (reported as dropped), and a walk agrees. */
static void test_nvme_index_writes_after_load(void **state)
{
	(void)state;
	static struct nvt_snap held, a, b;
	struct nvt n;
	uint64_t loc[N], more[200];
	fill(&n, loc);
	nvt_close(&n);
	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(nvt_xstats(&n).index_loads, 1);
	nvt_snap_take(&n, &held);
	size_t dropped_before = n.n_dropped;
	for (uint64_t i = 0; i < 200; i++)
		assert_int_equal(nvt_put(&n, 10000 + i, len_of(10000 + i), &more[i]), 0);
	assert_true(n.n_dropped > dropped_before); /* the ring wrapped again */
	size_t right = 0;
	for (uint64_t i = 0; i < 200; i++)
		if (!nvt_was_dropped(&n, more[i]))
			assert_int_equal(nvt_check(&n, 10000 + i, len_of(10000 + i), more[i]), 0);
	for (uint64_t i = 0; i < N; i++) {
		int rc = nvt_check(&n, i + 1, len_of(i + 1), loc[i]);
		bool live = holds(&held, loc[i]) && !nvt_was_dropped(&n, loc[i]);
		assert_int_equal(rc, live ? 0 : -ENOENT);
		right += rc == 0;
	}
	print_message("%zu held after the load, %zu of them read back after 200 more writes\n",
	              held.n, right);
	assert_true(right > 0);
	verify(&n);
	nvt_snap_take(&n, &a);
	nvt_close(&n);
	n.hooks.no_index = true;
	assert_int_equal(nvt_open(&n), 0);
	nvt_snap_take(&n, &b);
	assert_int_equal(a.n, b.n);
	assert_memory_equal(a.loc, b.loc, a.n * sizeof(a.loc[0]));
	verify(&n);
	nvt_fini(&n);
}

/* Opens n (the index of the last close in place, damaged by the caller): refused, walked. */
static void assert_refused(struct nvt *n, size_t want_records, const char *what)
{
	assert_int_equal(nvt_open(n), 0);
	struct kvt__nvme_xstats x = nvt_xstats(n);
	print_message("%s: refused %llu, loaded %llu\n", what, (unsigned long long)x.index_refused,
	              (unsigned long long)x.index_loads);
	assert_int_equal(x.index_refused, 1);
	assert_int_equal(x.index_loads, 0);
	assert_false(index_exists(n));
	assert_int_equal(verify(n), want_records);
	nvt_close(n);
}

static void test_nvme_index_refused(void **state)
{
	(void)state;
	struct nvt n;
	uint64_t loc[N], l;
	char ip[600];
	fill(&n, loc);
	index_path(&n, ip, sizeof(ip));
	nvt_close(&n);
	size_t old_len;
	void *old = nvt_slurp(ip, &old_len);

	/* stale: the index of an earlier close, after records were written since */
	assert_int_equal(nvt_open(&n), 0);
	size_t held = verify(&n);
	for (uint64_t i = 0; i < 5; i++)
		assert_int_equal(nvt_put(&n, 20000 + i, 3000, &l), 0);
	held = verify(&n);
	nvt_close(&n);
	nvt_spill(ip, old, old_len);
	assert_refused(&n, held, "an older index");

	/* one byte of the body */
	nvt_flip_byte(ip, 4096 + (off_t)(old_len / 2), 0x10);
	assert_refused(&n, held, "a damaged body");

	/* cut short */
	assert_int_equal(truncate(ip, (off_t)old_len / 2), 0);
	assert_refused(&n, held, "a short file");

	/* one byte of the header */
	nvt_flip_byte(ip, 20, 0x10);
	assert_refused(&n, held, "a damaged header");

	/* larger than any index of this tier could be: refused before it is read */
	assert_int_equal(truncate(ip, 1ll << 30), 0);
	assert_refused(&n, held, "a file of 1 GiB");

	/* and an intact one is still taken */
	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(nvt_xstats(&n).index_loads, 1);
	assert_int_equal(verify(&n), held);
	free(old);
	nvt_fini(&n);
}

/* A crash after an open from the index: the superblock says the tier is not closed cleanly, so
 * even the index put back in place is not read, and the walk finds what the crashed process
 * wrote. */
static void test_nvme_index_crash_after_open(void **state)
{
	(void)state;
	struct nvt n;
	uint64_t loc[N];
	char ip[600];
	fill(&n, loc);
	index_path(&n, ip, sizeof(ip));
	nvt_close(&n);
	size_t old_len;
	void *old = nvt_slurp(ip, &old_len);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		uint64_t l;
		if (nvt_open(&n) || nvt_xstats(&n).index_loads != 1)
			_exit(2);
		for (uint64_t i = 0; i < 20; i++)
			if (nvt_put(&n, 30000 + i, 5000, &l))
				_exit(3);
		_exit(0); /* no close: as a crash leaves it */
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	nvt_spill(ip, old, old_len);
	assert_int_equal(nvt_open(&n), 0);
	struct kvt__nvme_xstats x = nvt_xstats(&n);
	assert_int_equal(x.index_loads, 0);
	assert_int_equal(x.index_refused, 1); /* its generation is not the device's */
	assert_false(index_exists(&n));
	static struct nvt_snap s;
	nvt_snap_take(&n, &s);
	size_t found = 0;
	for (size_t i = 0; i < s.n; i++)
		found += s.seed[i] >= 30000 && s.seed[i] < 30020;
	assert_int_equal(found, 20);
	verify(&n);
	free(old);
	nvt_fini(&n);
}

/* Records handed over to the next tier and not landed: the close writes no index. */
static void test_nvme_index_not_with_handovers_pending(void **state)
{
	(void)state;
	struct nvt n;
	uint64_t loc[N];
	fill(&n, loc);
	size_t held = verify(&n);
	struct kvt_nvme *t = (struct kvt_nvme *)n.t;
	t->regions[t->head].handovers_queued = 1;
	nvt_close(&n);
	assert_false(index_exists(&n));
	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(nvt_xstats(&n).index_loads, 0);
	assert_int_equal(verify(&n), held);
	nvt_fini(&n);
}

/* A tier on f (not armed) with 40 records of 9,000 bytes; loc[i] is seed i + 1's. */
static void fill40(struct nvt *n, struct kvt__nvme_fault *f, uint64_t *loc)
{
	nvt_init(n, "64MiB", "8");
	n->hooks.fault = f;
	assert_int_equal(nvt_open(n), 0);
	for (uint64_t i = 0; i < 40; i++)
		assert_int_equal(nvt_put(n, i + 1, 9000, &loc[i]), 0);
}

/* fill40, then disabled: the device fails every I/O until the tier stops issuing any. */
static void fill_and_disable(struct nvt *n, struct kvt__nvme_fault *f, uint64_t *loc)
{
	fill40(n, f, loc);
	f->ppm_eio = 1000000, f->armed = true;
	uint64_t l;
	for (uint64_t i = 0; i < 100 && !nvt_stats(n).disabled; i++)
		assert_int_equal(nvt_put(n, 100 + i, 9000, &l), -EIO);
	assert_true(nvt_stats(n).disabled);
}

/* After a close that saved the index, record 8 (of fill40's) removed but its tombstone never
 * on disk: the open from the index does not find it, a walk of the same file does. */
static void index_hides_walk_finds(struct nvt *n, uint64_t loc8)
{
	assert_int_equal(nvt_open(n), 0);
	assert_int_equal(nvt_xstats(n).index_loads, 1);
	assert_int_equal(nvt_check(n, 8, 9000, loc8), -ENOENT);
	assert_int_equal(verify(n), 39); /* and none of the writes that failed */
	nvt_close(n);
	n->hooks.no_index = true; /* what the walk alone would do */
	assert_int_equal(nvt_open(n), 0);
	assert_int_equal(nvt_check(n, 8, 9000, loc8), 0);
	assert_int_equal(verify(n), 40);
	nvt_fini(n);
}

/* A removed record whose tombstone failed three times: a walk brings it back, the index does
 * not. */
static void test_nvme_index_keeps_failed_removes(void **state)
{
	(void)state;
	struct nvt n;
	uint64_t loc[40];
	struct kvt__nvme_fault f = {.ppm_eio = 1000000, .seed = 5};
	fill40(&n, &f, loc);
	/* The injector fails an I/O after making it, so the tombstone lands; putting the header
	 * block back afterwards is the tombstone that never did. */
	char path[512];
	static uint8_t hdr[4096];
	off_t off = (off_t)((loc[7] & ((1ull << 40) - 1)) << 12);
	int fd = open(nvt_path(&n, path, sizeof(path)), O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, hdr, sizeof(hdr), off), sizeof(hdr));
	struct kvt_tier_id id = nvt_id(8);
	f.armed = true;
	assert_int_equal(kvt_tier_nvme.remove(n.t, &id, loc[7]), 0);
	f.armed = false;
	assert_int_equal(nvt_xstats(&n).unfenced, 1);
	assert_int_equal(pwrite(fd, hdr, sizeof(hdr), off), sizeof(hdr));
	assert_int_equal(fsync(fd), 0);
	close(fd);
	assert_int_equal(nvt_check(&n, 8, 9000, loc[7]), -ENOENT);
	nvt_close(&n);
	n.hooks.fault = NULL;
	index_hides_walk_finds(&n, loc[7]);
}

/* fill_and_disable, then record 8 removed while disabled (no I/O), and the device back. */
static void disable_and_remove8(struct nvt *n, struct kvt__nvme_fault *f, uint64_t *loc)
{
	fill_and_disable(n, f, loc);
	uint64_t ios = f->ios;
	struct kvt_tier_id id = nvt_id(8);
	assert_int_equal(kvt_tier_nvme.remove(n->t, &id, loc[7]), 0);
	assert_int_equal(f->ios, ios); /* no I/O while disabled */
	f->armed = false;
}

/* Removed while the tier is disabled, then closed still disabled: no tombstone or superblock
 * can be written, so a walk brings the record back; the index saved for the device's
 * generation does not. */
static void test_nvme_index_disabled_close_keeps_removes(void **state)
{
	(void)state;
	struct kvt__nvme_fault f = {.seed = 9};
	struct nvt n;
	uint64_t loc[40];
	disable_and_remove8(&n, &f, loc);
	nvt_close(&n);
	n.hooks.fault = NULL;
	assert_true(index_exists(&n));
	index_hides_walk_finds(&n, loc[7]);
}

/* Removed while the tier is disabled: the tombstone is written once enable() finds the device
 * back, so even a walk does not bring the record back. */
static void test_nvme_index_disabled_removes_buried_at_enable(void **state)
{
	(void)state;
	struct kvt__nvme_fault f = {.seed = 10};
	struct nvt n;
	uint64_t loc[40];
	disable_and_remove8(&n, &f, loc);
	n.hooks.no_index = true; /* the next open walks */
	assert_int_equal(nvt_xstats(&n).buried, 0);
	assert_int_equal(kvt_tier_nvme.enable(n.t), 0);
	assert_int_equal(nvt_xstats(&n).buried, 1);
	nvt_close(&n);
	n.hooks.fault = NULL;
	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(nvt_xstats(&n).index_loads, 0);
	assert_int_equal(nvt_check(&n, 8, 9000, loc[7]), -ENOENT);
	assert_int_equal(verify(&n), 39);
	nvt_fini(&n);
}

/*
 * 120 indexes whose checksums hold but whose contents are wrong (fields set to 0, 1, one off, all
 * ones, or random bytes; the checksums recomputed, as a bug that wrote them would): each open
 * succeeds, either refuses the index or takes it, and every record offered then reads back
 * byte for byte or is found bad (-EBADMSG, -ENOENT) -- never a wrong byte, never a crash.
 */
static void test_nvme_index_mutated_never_wrong(void **state)
{
	(void)state;
	struct nvt n;
	char path[512], ip[600];
	nvt_init(&n, "16MiB", "8");
	nvt_path(&n, path, sizeof(path));
	index_path(&n, ip, sizeof(ip));
	assert_int_equal(nvt_open(&n), 0);
	uint64_t l;
	for (uint64_t i = 0; i < 150; i++)
		assert_int_equal(nvt_put(&n, i + 1, nvt_len(i + 1, 100, 60000), &l), 0);
	nvt_close(&n);
	size_t dat_len, ix_len;
	uint8_t *dat = nvt_slurp(path, &dat_len), *ix = nvt_slurp(ip, &ix_len);
	uint8_t *m = malloc(ix_len);
	assert_non_null(m);
	uint64_t x = 77;
	unsigned taken = 0, refused = 0;
	for (int it = 0; it < 120; it++) {
		memcpy(m, ix, ix_len);
		for (int k = 0; k <= it % 3; k++)
			nvt_mutate(m + 4096, ix_len - 4096, &x);
		kvt_store_le64(m + 72, XXH3_64bits(m + 4096, ix_len - 4096));
		kvt_store_le64(m + 4088, XXH3_64bits(m, 4088));
		nvt_spill(path, dat, dat_len); /* the device as the close left it */
		nvt_spill(ip, m, ix_len);
		assert_int_equal(nvt_open(&n), 0);
		struct kvt__nvme_xstats xs = nvt_xstats(&n);
		taken += (unsigned)xs.index_loads, refused += (unsigned)xs.index_refused;
		assert_int_equal(xs.index_loads + xs.index_refused, 1);
		struct nvt_offered w = {0, &n};
		assert_int_equal(kvt_tier_nvme.iterate(n.t, nvt_visit_right_or_bad, &w), 0);
		assert_int_equal(nvt_put(&n, 9999, 5000, &l), 0); /* and it still works */
		assert_int_equal(nvt_check(&n, 9999, 5000, l), 0);
		nvt_close(&n);
	}
	print_message("120 mutated indexes: %u taken, %u refused\n", taken, refused);
	assert_true(taken > 0 && refused > 0); /* both ways were exercised */
	free(m);
	free(ix);
	free(dat);
	nvt_fini(&n);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nvme_index_matches_walk),
	    cmocka_unit_test(test_nvme_index_writes_after_load),
	    cmocka_unit_test(test_nvme_index_refused),
	    cmocka_unit_test(test_nvme_index_crash_after_open),
	    cmocka_unit_test(test_nvme_index_not_with_handovers_pending),
	    cmocka_unit_test(test_nvme_index_keeps_failed_removes),
	    cmocka_unit_test(test_nvme_index_disabled_close_keeps_removes),
	    cmocka_unit_test(test_nvme_index_disabled_removes_buried_at_enable),
	    cmocka_unit_test(test_nvme_index_mutated_never_wrong),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
