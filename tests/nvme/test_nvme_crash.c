/*
 * test_nvme_crash.c -- kill -9 of a process writing to the nvme tier (RELIABILITY.md D2, D3):
 * a child writes records as fast as it can and reports each one whose write() returned; the
 * parent kills it at a random moment, reopens the tier and requires every reported record to
 * be found and byte-identical, every recovered record to be correct, and usage to equal the
 * recovered records. Three rounds on the same file.
 */
#include "nvme_fixture.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct ack {
	uint64_t seed, loc, len;
};

static void child_write(struct nvt *n, int fd, uint64_t first)
{
	if (nvt_open(n))
		_exit(2);
	for (uint64_t seed = first;; seed++) {
		size_t len = nvt_len(seed, 1000, 600 << 10);
		uint64_t loc;
		if (nvt_put(n, seed, len, &loc))
			_exit(3);
		struct ack a = {seed, loc, len};
		if (write(fd, &a, sizeof(a)) != sizeof(a))
			_exit(4);
	}
}

static void test_nvme_crash_kill9(void **state)
{
	struct nvt n;
	nvt_init(&n, "256MiB", "8"); /* three rounds of ~40 MiB: nothing is evicted */
	struct ack *acks = calloc(100000, sizeof(*acks));
	size_t n_acks = 0;
	srand((unsigned)time(NULL));
	for (int round = 0; round < 3; round++) {
		int p[2];
		assert_int_equal(pipe(p), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			child_write(&n, p[1], 1 + (uint64_t)round * 1000000);
		}
		close(p[1]);
		/* wait for some acknowledged writes, then kill at a random moment */
		size_t want = n_acks + 20 + (size_t)(rand() % 40);
		while (n_acks < want) {
			ssize_t r = read(p[0], &acks[n_acks], sizeof(*acks));
			assert_int_equal(r, sizeof(*acks));
			n_acks++;
		}
		usleep((useconds_t)(rand() % 3000));
		kill(pid, SIGKILL);
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status));
		ssize_t r;
		while ((r = read(p[0], &acks[n_acks], sizeof(*acks))) == sizeof(*acks))
			n_acks++;
		close(p[0]);

		assert_int_equal(nvt_open(&n), 0);
		for (size_t i = 0; i < n_acks; i++)
			assert_int_equal(nvt_check(&n, acks[i].seed, acks[i].len, acks[i].loc), 0);
		struct nvt_walk w = {.nv = &n};
		assert_int_equal(kvt_tier_nvme.iterate(n.t, nvt_verify_visit, &w), 0);
		struct kvt_tier_stats s = nvt_stats(&n);
		/* + at most the one write in flight per kill, when it landed whole */
		assert_true(w.n >= n_acks && w.n <= n_acks + (size_t)round + 1);
		assert_int_equal(s.chunks, w.n);
		assert_int_equal(s.used_bytes, w.bytes);
		assert_int_equal(s.evictions, 0);
		print_message("round %d: %zu acknowledged, %zu recovered, %llu torn dropped\n",
		              round, n_acks, w.n, (unsigned long long)s.corruptions);
		nvt_close(&n);
	}
	free(acks);
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
