/*
 * test_nvme_crash.c -- kill -9 of a process writing to the nvme tier (RELIABILITY.md D2, D3):
 * a child writes records as fast as it can and reports each one whose write() returned; the
 * parent kills it at a random moment, reopens the tier and requires every reported record to
 * be found and byte-identical, every recovered record to be correct, and usage to equal the
 * recovered records. Three rounds on the same file.
 */
#include "nvme_fixture.h"

static void write_one_by_one(struct nvt *n, int fd, uint64_t first)
{
	for (uint64_t seed = first;; seed++) {
		size_t len = nvt_len(seed, 1000, 600 << 10);
		uint64_t loc;
		if (nvt_put(n, seed, len, &loc))
			_exit(3);
		nvt_ack_send(fd, seed, loc, len);
	}
}

static void test_nvme_crash_kill9(void **state)
{
	struct nvt n;
	nvt_init(&n, "256MiB", "8"); /* three rounds of ~40 MiB: nothing is evicted */
	/* + at most the one write in flight per kill, when it landed whole */
	nvt_kill9_rounds(&n, write_one_by_one, 20, 40, 3000, 1);
	nvt_fini(&n);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nvme_crash_kill9),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
