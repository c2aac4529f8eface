/*
 * test_nvme_fault.c -- the nvme tier under an injecting backend (RELIABILITY.md F6, F8, D6):
 * -EIO, -EAGAIN, -ENOSPC, short reads and writes and submit backpressure at 1 % each under a
 * mixed load: no wrong byte, counters equal to what was injected, no hang (the ctest timeout);
 * a device that fails everything disables the tier until enable(); -ENOSPC marks it full.
 */
#include "nvme_fixture.h"

#define OPS 1500

struct live {
	uint64_t seed, loc;
	size_t len;
};

static void test_nvme_fault_mix(void **state)
{
	struct kvt__nvme_fault f = {.ppm_eio = 10000,
	                            .ppm_again = 10000,
	                            .ppm_nospc = 10000,
	                            .ppm_short = 10000,
	                            .ppm_busy = 10000,
	                            .seed = 42};
	struct nvt n;
	nvt_init(&n, "48MiB", "8"); /* regions of 4 MiB: reclaim happens under the load */
	n.hooks.fault = &f;
	n.hooks.full_retry_ms = 0, n.hooks.full_retry_set = true; /* every write probes */
	assert_int_equal(nvt_open(&n), 0);
	f.armed = true;
	struct live *live = calloc(OPS, sizeof(*live));
	size_t n_live = 0, ok_reads = 0, failed_reads = 0, ok_writes = 0, failed_writes = 0;
	uint64_t rng = 7;
	for (uint64_t op = 0; op < OPS; op++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		if (n_live && (rng >> 33) % 2) {
			/* mostly recent records: most are still in the tier */
			size_t back = (rng >> 40) % KVT_MIN(n_live, (size_t)64);
			struct live *l = &live[n_live - 1 - back];
			int rc = nvt_check(&n, l->seed, l->len, l->loc); /* fails on a wrong byte */
			if (rc == 0)
				ok_reads++;
			else
				failed_reads++,
				    assert_true(rc == -EIO || rc == -EAGAIN || rc == -ENOENT);
			continue;
		}
		uint64_t seed = op + 1;
		size_t len = nvt_len(seed, 1000, 700 << 10);
		uint64_t loc;
		int rc = nvt_put(&n, seed, len, &loc);
		if (rc == 0) {
			live[n_live++] = (struct live){seed, loc, len};
			ok_writes++;
		} else {
			assert_true(rc == -EIO || rc == -EAGAIN || rc == -ENOSPC);
			failed_writes++;
		}
	}
	f.armed = false;
	struct kvt_tier_stats s = nvt_stats(&n);
	struct kvt__nvme_xstats x = nvt_xstats(&n);
	print_message("ios %llu: eio %llu+%llu again %llu nospc %llu short %llu+%llu busy %llu; "
	              "reads %zu ok %zu failed, writes %zu ok %zu failed\n",
	              (unsigned long long)f.ios, (unsigned long long)f.eio_r,
	              (unsigned long long)f.eio_w, (unsigned long long)f.again,
	              (unsigned long long)f.nospc, (unsigned long long)f.short_r,
	              (unsigned long long)f.short_w, (unsigned long long)f.busy, ok_reads,
	              failed_reads, ok_writes, failed_writes);
	/* every kind was injected, and the tier counted exactly what was injected */
	assert_true(f.eio_r && f.eio_w && f.again && f.nospc && f.short_r && f.short_w && f.busy);
	assert_int_equal(s.err_io, f.eio_r + f.eio_w);
	assert_int_equal(s.err_again, f.again);
	assert_int_equal(s.err_nospc, f.nospc);
	assert_int_equal(x.short_reads, f.short_r);
	assert_int_equal(x.short_writes, f.short_w);
	assert_int_equal(x.submit_busy, f.busy);
	assert_int_equal(f.misaligned, 0);
	/* some failed write had issued its header block, and its fence landed (log.c) */
	print_message("fenced %llu, unfenced %llu\n", (unsigned long long)x.fenced,
	              (unsigned long long)x.unfenced);
	assert_true(x.fenced > 0);
	assert_int_equal(x.unfenced, 0); /* short I/O was resubmitted aligned */
	assert_int_equal(s.queue_depth, 0);
	assert_false(s.disabled);
	/* a write is 3+ I/Os (body pieces, terminator, then its header block), 2 % of which fail */
	assert_true(ok_reads > failed_reads && ok_writes > 5 * failed_writes);
	/* after the storm: each record is intact or a miss (dropped on -EIO, evicted) */
	size_t found = 0;
	for (size_t i = 0; i < n_live; i++) {
		int rc = nvt_check(&n, live[i].seed, live[i].len, live[i].loc);
		assert_true(rc == 0 || rc == -ENOENT);
		found += rc == 0;
		if (rc == -ENOENT)
			assert_true(nvt_was_dropped(&n, live[i].loc) ||
			            kvt_tier_nvme.remove(n.t, &(struct kvt_tier_id){0},
			                                 live[i].loc) == -ENOENT);
	}
	assert_int_equal(found, nvt_stats(&n).chunks);
	assert_int_equal(nvt_stats(&n).corruptions, 0);
	/* and the same after a restart, where nothing whose write was reported failed comes back
	 * (the injector fails a write after the real I/O: its record is whole on disk) */
	nvt_close(&n);
	assert_int_equal(nvt_open(&n), 0);
	size_t found_again = 0;
	bool *acked = calloc(OPS + 1, sizeof(*acked));
	for (size_t i = 0; i < n_live; i++) {
		int rc = nvt_check(&n, live[i].seed, live[i].len, live[i].loc);
		assert_true(rc == 0 || rc == -ENOENT);
		found_again += rc == 0;
		acked[live[i].seed] = true;
	}
	struct nvt_walk w = {.nv = &n, .acked = acked, .seeds = OPS + 1};
	assert_int_equal(kvt_tier_nvme.iterate(n.t, nvt_verify_visit, &w), 0);
	assert_int_equal(w.n, found_again);
	/* a record dropped on a read's -EIO is whole on disk, but its tombstone keeps it from
	 * coming back: the daemon was told it is gone, and would not send a delete for it */
	assert_int_equal(found_again, found);
	free(acked);
	free(live);
	nvt_fini(&n);
}

static void test_nvme_fault_persistent_disables(void **state)
{
	struct kvt__nvme_fault f = {.seed = 1};
	struct nvt n;
	nvt_init(&n, "16MiB", "4");
	n.hooks.fault = &f;
	assert_int_equal(nvt_open(&n), 0);
	uint64_t keep, loc;
	assert_int_equal(nvt_put(&n, 1, 50000, &keep), 0);
	f.ppm_eio = 1000000, f.armed = true; /* the device fails every I/O */
	int i = 0;
	for (; i < 100 && !nvt_stats(&n).disabled; i++)
		assert_int_equal(nvt_put(&n, 100 + i, 50000, &loc), -EIO);
	assert_int_equal(i, KVT_NVME_DISABLE_AFTER);
	assert_true(nvt_stats(&n).disabled);
	uint64_t ios = f.ios;
	assert_int_equal(nvt_put(&n, 99, 50000, &loc), -EIO);     /* fails fast, no I/O */
	assert_int_equal(nvt_check(&n, 1, 50000, keep), -EAGAIN); /* kept for enable() */
	assert_int_equal(f.ios, ios);
	assert_int_equal(kvt_tier_nvme.enable(n.t), -EIO); /* the probe still fails */
	assert_true(nvt_stats(&n).disabled);
	f.armed = false; /* the device recovers: only an explicit probe re-enables */
	assert_int_equal(nvt_put(&n, 99, 50000, &loc), -EIO);
	assert_int_equal(kvt_tier_nvme.enable(n.t), 0);
	assert_false(nvt_stats(&n).disabled);
	assert_int_equal(nvt_check(&n, 1, 50000, keep), 0);
	assert_int_equal(nvt_put(&n, 99, 50000, &loc), 0);
	assert_int_equal(nvt_check(&n, 99, 50000, loc), 0);
	nvt_fini(&n);
}

static void test_nvme_fault_nospc_marks_full(void **state)
{
	struct kvt__nvme_fault f = {.seed = 3};
	struct nvt n;
	nvt_init(&n, "16MiB", "4");
	n.hooks.fault = &f;
	n.hooks.full_retry_ms = 60000, n.hooks.full_retry_set = true;
	assert_int_equal(nvt_open(&n), 0);
	uint64_t keep, loc;
	assert_int_equal(nvt_put(&n, 1, 50000, &keep), 0);
	f.ppm_nospc = 1000000, f.armed = true;
	assert_int_equal(nvt_put(&n, 2, 50000, &loc), -ENOSPC);
	assert_true(nvt_stats(&n).full);
	assert_int_equal(nvt_stats(&n).err_nospc, f.nospc);
	f.armed = false;
	assert_int_equal(nvt_put(&n, 3, 50000, &loc), -ENOSPC); /* rejected without I/O */
	assert_int_equal(nvt_xstats(&n).rejected_full, 1);
	assert_int_equal(nvt_check(&n, 1, 50000, keep), 0); /* reads keep working */
	assert_false(nvt_stats(&n).disabled);
	assert_int_equal(kvt_tier_nvme.enable(n.t), 0);
	assert_false(nvt_stats(&n).full);
	assert_int_equal(nvt_put(&n, 3, 50000, &loc), 0);
	assert_int_equal(nvt_check(&n, 3, 50000, loc), 0);
	nvt_fini(&n);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nvme_fault_mix),
	    cmocka_unit_test(test_nvme_fault_persistent_disables),
	    cmocka_unit_test(test_nvme_fault_nospc_marks_full),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
