/*
 * test_nvme_summary.c -- region summaries (tiers/nvme/summary.c): an open without the index (a
 * crash, RELIABILITY.md D2/D3) that reads them finds exactly what a walk of every record's header
 * finds, byte for byte, removed records included (the live maps); a summary damaged anywhere is
 * refused and its region walked; one left by a region's earlier use is never read; kill -9 of a
 * writer at random moments loses nothing acknowledged.
 */
#include "nvme_fixture.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <xxhash.h>

#define N 1500

static size_t len_of(uint64_t seed)
{
	return nvt_len(seed, 1000, 200 << 10);
}

static struct kvt_nvme *tier(struct nvt *n)
{
	return (struct kvt_nvme *)n->t;
}

/* A 64 MiB tier (8 MiB regions) written N records through (the ring goes round about twice),
 * with every seventh record removed right away, every eleventh removed once the ring has moved
 * on (in a summarised region: its live map), and every third read once (what clock keeps).
 * Never an index: each open is the open after a crash. @return : removed[seed] set for what was
 * removed (the caller frees it). */
static bool *fill(struct nvt *n, const char *policy)
{
	bool *removed = calloc(N + 1, sizeof(bool));
	assert_non_null(removed);
	uint64_t *loc = calloc(N, sizeof(*loc));
	assert_non_null(loc);
	nvt_init(n, "64MiB", "8");
	assert_int_equal(kvt_opts_set(&n->opts, "nvme.policy", policy), 0);
	n->hooks.no_index = true;
	assert_int_equal(nvt_open(n), 0);
	for (uint64_t i = 0; i < N; i++) {
		assert_int_equal(nvt_put(n, i + 1, len_of(i + 1), &loc[i]), 0);
		if (i % 3 == 0)
			(void)nvt_check(n, i + 1, len_of(i + 1), loc[i]);
		uint64_t gone[2] = {i % 7 == 0 ? i : UINT64_MAX,
		                    i >= 40 && (i - 40) % 11 == 0 ? i - 40 : UINT64_MAX};
		for (int k = 0; k < 2; k++) {
			if (gone[k] == UINT64_MAX)
				continue;
			struct kvt_tier_id id = nvt_id(gone[k] + 1);
			int rc = kvt_tier_nvme.remove(n->t, &id, nvt_follow(n, loc[gone[k]]));
			assert_true(rc == 0 || rc == -ENOENT); /* -ENOENT: reclaimed already */
			removed[gone[k] + 1] |= rc == 0;
		}
	}
	struct kvt__nvme_xstats x = nvt_xstats(n);
	assert_true(x.sum_written > 8);
	assert_true(x.livemaps > 10);
	assert_int_equal(x.unfenced, 0);
	free(loc);
	return removed;
}

/* Every record iterate offers reads back byte for byte, none was removed, and the usage is
 * theirs exactly. */
static size_t verify(struct nvt *n, const bool *removed)
{
	struct nvt_walk w = {.nv = n};
	assert_int_equal(kvt_tier_nvme.iterate(n->t, nvt_verify_visit, &w), 0);
	struct kvt_tier_stats s = nvt_stats(n);
	assert_int_equal(s.chunks, w.n);
	assert_int_equal(s.used_bytes, w.bytes);
	struct nvt_snap *sn = malloc(sizeof(*sn));
	assert_non_null(sn);
	nvt_snap_take(n, sn);
	for (size_t i = 0; i < sn->n; i++)
		if (sn->seed[i] <= N && removed[sn->seed[i]])
			fail_msg("record %llu was removed, and came back",
			         (unsigned long long)sn->seed[i]);
	free(sn);
	return w.n;
}

/* Opens n from the summaries and then by the walk alone; both must find the same. @return :
 * regions read from summaries. */
static uint64_t same_both_ways(struct nvt *n, const bool *removed, uint64_t *refused)
{
	static struct nvt_snap a, b;
	n->hooks.no_summary = false;
	assert_int_equal(nvt_open(n), 0);
	struct kvt__nvme_xstats x = nvt_xstats(n);
	nvt_snap_take(n, &a);
	size_t held = verify(n, removed);
	struct kvt_tier_stats sa = nvt_stats(n);
	nvt_close(n);

	n->hooks.no_summary = true; /* the same file, walked */
	assert_int_equal(nvt_open(n), 0);
	assert_int_equal(nvt_xstats(n).sum_loaded, 0);
	nvt_snap_take(n, &b);
	struct kvt_tier_stats sb = nvt_stats(n);
	nvt_close(n);
	n->hooks.no_summary = false;
	print_message("%zu held; %llu regions from summaries (%llu refused): %zu records, the walk "
	              "%zu\n",
	              held, (unsigned long long)x.sum_loaded, (unsigned long long)x.sum_refused,
	              a.n, b.n);
	assert_true(held > 100);
	assert_int_equal(a.n, b.n);
	assert_memory_equal(a.loc, b.loc, a.n * sizeof(a.loc[0]));
	assert_memory_equal(a.seed, b.seed, a.n * sizeof(a.seed[0]));
	assert_int_equal(sa.used_bytes, sb.used_bytes);
	assert_int_equal(sa.chunks, sb.chunks);
	if (refused)
		*refused = x.sum_refused;
	return x.sum_loaded;
}

static void test_nvme_summary_matches_walk(void **state)
{
	(void)state;
	const char *policies[] = {"fifo", "clock"};
	for (int p = 0; p < 2; p++) {
		struct nvt n;
		bool *removed = fill(&n, policies[p]);
		uint64_t sealed = 0;
		for (uint64_t r = 0; r < tier(&n)->n_regions; r++)
			sealed += tier(&n)->regions[r].sum_start != 0;
		nvt_close(&n);
		uint64_t refused = 1;
		uint64_t loaded = same_both_ways(&n, removed, &refused);
		print_message("%s: %llu regions summarised at the close\n", policies[p],
		              (unsigned long long)sealed);
		assert_true(loaded >= 5);
		assert_int_equal(refused, 0);
		/* the log goes on after an open from summaries, and a second one agrees again */
		assert_int_equal(nvt_open(&n), 0);
		for (uint64_t i = 0; i < 200; i++) {
			uint64_t loc;
			assert_int_equal(nvt_put(&n, N + 1 + i, len_of(N + 1 + i), &loc), 0);
		}
		nvt_close(&n);
		assert_true(same_both_ways(&n, removed, NULL) >= 5);
		free(removed);
		nvt_fini(&n);
	}
}

/* A byte damaged in a summary's entries, its live map or its trailer: that region is walked
 * (refused: counted; a trailer that does not hold: no summary), the rest read from theirs, and
 * the result is the walk's. */
static void test_nvme_summary_damaged_walked(void **state)
{
	(void)state;
	struct nvt n;
	bool *removed = fill(&n, "fifo");
	struct kvt_nvme *t = tier(&n);
	uint64_t at[3], r = 0;
	for (int k = 0; k < 3; k++, r++) { /* three summarised regions, one damage each */
		while (!t->regions[r].sum_start || r == t->head)
			r++;
		uint64_t start = t->data_off + r * t->region_bytes;
		at[k] = k == 0   ? start + t->regions[r].sum_start + 200    /* an entry */
		        : k == 1 ? start + t->region_bytes - 2 * 4096 + 100 /* the live map */
		                 : start + t->region_bytes - 4096 + 40;     /* the trailer */
	}
	nvt_close(&n);
	uint64_t refused_before = 0;
	uint64_t loaded = same_both_ways(&n, removed, &refused_before);
	assert_int_equal(refused_before, 0);
	char p[600];
	for (int k = 0; k < 3; k++)
		nvt_flip_byte(nvt_path(&n, p, sizeof(p)), (off_t)at[k], 0x5a);
	uint64_t refused = 0;
	uint64_t now = same_both_ways(&n, removed, &refused);
	assert_int_equal(refused, 2);      /* the entries and the live map */
	assert_int_equal(now, loaded - 3); /* the trailer's region has none */
	free(removed);
	nvt_fini(&n);
}

/* iterate() visitor: each record offered reads back as its own bytes or is found bad. */
struct bad_count {
	size_t n, bad;
	struct nvt *nv;
};

static int count_bad(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	struct bad_count *w = arg;
	int rc = nvt_check(w->nv, h->key.w[0], h->payload_bytes, loc);
	assert_true(rc == 0 || rc == -EBADMSG);
	w->n++;
	w->bad += rc != 0;
	return 0;
}

/* A region taken back and opened again zeroes its old trailer before anything else: the
 * summary of its earlier use is never read, even where the open stops after the first write. */
static void test_nvme_summary_stale_never_read(void **state)
{
	(void)state;
	struct nvt n;
	bool *removed = fill(&n, "fifo");
	struct kvt_nvme *t = tier(&n);
	/* the next region the head takes back holds a summary of its current use */
	uint64_t r = (t->head + 1) % t->n_regions;
	assert_true(t->regions[r].sum_start != 0);
	uint64_t start = t->data_off + r * t->region_bytes, end = start + t->region_bytes;
	nvt_close(&n); /* t is gone from here on */
	char p[600];
	int fd = open(nvt_path(&n, p, sizeof(p)), O_RDWR);
	assert_true(fd >= 0);
	uint8_t blk[4096], zero[4096] = {0};
	/* as if a reopen's first write (the trailer's zero block) landed and nothing after it */
	assert_int_equal(pread(fd, blk, 4096, (off_t)(end - 4096)), 4096);
	assert_int_equal(pwrite(fd, zero, 4096, (off_t)(end - 4096)), 4096);
	/* and as if the zero block after the header landed too: the old header over a zero block */
	assert_int_equal(pwrite(fd, zero, 4096, (off_t)(start + 4096)), 4096);
	close(fd);
	n.hooks.no_summary = false;
	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(tier(&n)->regions[r].n_recs, 0); /* an empty region of the old seq */
	verify(&n, removed);
	nvt_close(&n);
	/* the same with the old trailer put back: its summary would list records whose first
	 * block is gone; without the zeroing a reopen would leave exactly this */
	fd = open(nvt_path(&n, p, sizeof(p)), O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, blk, 4096, (off_t)(end - 4096)), 4096);
	close(fd);
	assert_int_equal(nvt_open(&n), 0);
	struct bad_count w = {.nv = &n};
	assert_int_equal(kvt_tier_nvme.iterate(n.t, count_bad, &w), 0);
	print_message("with the stale trailer back, %zu records offered, %zu of them found bad on "
	              "reading (none wrong)\n",
	              w.n, w.bad);
	assert_true(w.bad >= 1); /* the first record: its header block is the zero block */
	free(removed);
	nvt_fini(&n);
}

/*
 * 120 summaries whose block checksums hold but whose contents are wrong (fields set to 0, 1, one
 * off, all ones, or random bytes, in the entries, the live map or the trailer; every block's
 * checksum recomputed, as a bug that wrote them would): each open succeeds, reads the summary
 * or walks the region, and every record offered then reads back byte for byte or is found bad
 * -- never a wrong byte, never a crash -- and the tier still writes.
 */
static void test_nvme_summary_mutated_never_wrong(void **state)
{
	(void)state;
	struct nvt n;
	char path[512];
	nvt_init(&n, "16MiB", "8"); /* 2 MiB regions */
	n.hooks.no_index = true;
	nvt_path(&n, path, sizeof(path));
	assert_int_equal(nvt_open(&n), 0);
	uint64_t l, loc[150];
	for (uint64_t i = 0; i < 150; i++)
		assert_int_equal(nvt_put(&n, i + 1, nvt_len(i + 1, 100, 60000), &loc[i]), 0);
	for (uint64_t i = 0; i < 150; i += 5) { /* dead bits in the live maps */
		struct kvt_tier_id id = nvt_id(i + 1);
		assert_int_equal(kvt_tier_nvme.remove(n.t, &id, loc[i]), 0);
	}
	assert_true(nvt_xstats(&n).livemaps > 0);
	struct kvt_nvme *t = tier(&n);
	uint64_t r = 0;
	while (!t->regions[r].sum_start || r == t->head)
		r++;
	uint64_t from = t->data_off + r * t->region_bytes + t->regions[r].sum_start;
	uint64_t to = t->data_off + (r + 1) * t->region_bytes;
	nvt_close(&n);
	assert_int_equal(nvt_open(&n), 0);
	uint64_t loaded_whole = nvt_xstats(&n).sum_loaded;
	nvt_close(&n);
	size_t dat_len;
	uint8_t *dat = nvt_slurp(path, &dat_len), *m = malloc(dat_len);
	assert_non_null(m);
	uint64_t x = 91;
	unsigned read_from = 0, walked = 0;
	for (int it = 0; it < 120; it++) {
		memcpy(m, dat, dat_len);
		for (int k = 0; k <= it % 3; k++)
			nvt_mutate(m + from, (size_t)(to - from), &x);
		for (uint64_t b = from; b < to; b += 4096)
			kvt_store_le64(m + b + 4088, XXH3_64bits(m + b, 4088));
		nvt_spill(path, m, dat_len);
		assert_int_equal(nvt_open(&n), 0);
		uint64_t loaded = nvt_xstats(&n).sum_loaded;
		assert_true(loaded == loaded_whole || loaded + 1 == loaded_whole);
		read_from += loaded == loaded_whole, walked += loaded + 1 == loaded_whole;
		struct nvt_offered w = {0, &n};
		assert_int_equal(kvt_tier_nvme.iterate(n.t, nvt_visit_right_or_bad, &w), 0);
		assert_int_equal(nvt_put(&n, 9999, 5000, &l), 0); /* and it still works */
		assert_int_equal(nvt_check(&n, 9999, 5000, l), 0);
		nvt_close(&n);
	}
	print_message("120 mutated summaries: %u read, %u refused or untrusted (walked)\n",
	              read_from, walked);
	assert_true(read_from > 0 && walked > 0); /* both ways were exercised */
	free(m);
	free(dat);
	nvt_fini(&n);
}

/* kill -9 of a writer (RELIABILITY.md D2, D3): every acknowledged record found byte for byte
 * after each of three kills, regions read from their summaries, and a walk agrees. */
static void writer(struct nvt *n, int ack_fd, uint64_t first)
{
	nvt_write_acked(n, ack_fd, first, 300 << 10);
}

static void test_nvme_summary_kill9(void **state)
{
	(void)state;
	struct nvt n;
	nvt_init(&n, "512MiB", "32");
	n.hooks.region_bytes = 16 << 20;
	n.hooks.no_index = true; /* the rounds' own reopens close cleanly: no index from them */
	/* kill -9 leaves no index; the acks are checked in each round. A tier that never fills: no
	 * eviction, so every acknowledged record must be there. */
	nvt_kill9_rounds(&n, writer, 300, 200, 20000, 32);
	assert_int_equal(nvt_open(&n), 0);
	uint64_t loaded = nvt_xstats(&n).sum_loaded;
	nvt_close(&n);
	static struct nvt_snap a, b;
	assert_int_equal(nvt_open(&n), 0);
	nvt_snap_take(&n, &a);
	nvt_close(&n);
	n.hooks.no_summary = true;
	assert_int_equal(nvt_open(&n), 0);
	nvt_snap_take(&n, &b);
	nvt_close(&n);
	print_message("after the kills: %llu regions read from summaries; %zu records, the walk "
	              "%zu\n",
	              (unsigned long long)loaded, a.n, b.n);
	assert_true(loaded >= 3);
	assert_int_equal(a.n, b.n);
	assert_memory_equal(a.loc, b.loc, a.n * sizeof(a.loc[0]));
	nvt_fini(&n);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nvme_summary_matches_walk),
	    cmocka_unit_test(test_nvme_summary_damaged_walked),
	    cmocka_unit_test(test_nvme_summary_stale_never_read),
	    cmocka_unit_test(test_nvme_summary_mutated_never_wrong),
	    cmocka_unit_test(test_nvme_summary_kill9),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
