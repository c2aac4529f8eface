/*
 * test_tiers_devices.c -- kvtierd over devices below host that are slow, failing or full
 * (injected nvme and rocksdb faults, a real full tmpfs under rocksdb): a get waits at most
 * promote.wait_ms and host hits never wait on the device; a client killed while it waits frees
 * its wait; a failing device is disabled and its copies kept; a full one refuses writes and
 * recovers; no deleted chunk comes back and no wrong byte is served.
 */
#include "tiers_fixture.h"
#include "core/util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static double ms_since(uint64_t t0)
{
	return (double)(kvt_now_ns() - t0) / 1e6;
}

/* A slow device (RELIABILITY L7): every nvme read takes 1.5 s longer. A get of a chunk only in
 * nvme waits promote.wait_ms (100) and is a miss, not a 1.5 s stall; meanwhile another client's
 * host hit is served; and the promotion the first get started still lands, byte for byte. */
static void test_tiers_slow_device_bounded_wait(void **state)
{
	const char *sets[] = {"host.bytes=2MiB", "tiers.order=host,nvme", "nvme.bytes=64MiB",
	                      "promote.wait_ms=100", NULL};
	setenv("KVTIER_NVME_READ_DELAY_MS", "1500", 1);
	struct spilled sp;
	spill(&sp, sets, 9);
	unsetenv("KVTIER_NVME_READ_DELAY_MS");
	kvt_client_t *other;
	assert_int_equal(kvt_connect(sp.d.sock, &other), 0);
	kvt_model_t m = model(1);
	kvt_id_t ns;
	assert_int_equal(kvt_namespace(other, &m, &ns), 0);
	size_t below[2], up = 0; /* two chunks only in nvme, one at host */
	keys_where(&sp, false, 0, N - 1, below, 2);
	keys_where(&sp, true, N - 1, 0, &up, 1);
	assert_int_equal(kvt_lookup(sp.c, sp.ns, &sp.keys[below[0]], 1), 1);
	uint64_t t0 = kvt_now_ns();
	int rc = get_checked(sp.c, sp.ns, &sp.keys[below[0]], sp.cb, 90000 + below[0]);
	double waited = ms_since(t0);
	t0 = kvt_now_ns();
	int hit = get_checked(other, ns, &sp.keys[up], sp.cb, 90000 + up);
	double host_ms = ms_since(t0);
	print_message("nvme chunk: %d after %.1f ms; host chunk meanwhile: %d after %.2f ms\n", rc,
	              waited, hit, host_ms);
	assert_int_equal(rc, 0);       /* served before the device answered: a miss */
	assert_true(waited >= 99.0);   /* after waiting its promote.wait_ms */
	assert_int_equal(hit, 1);      /* the loop never waits on the device */
	assert_true(host_ms < 1000.0); /* the device is still busy for 1.4 s */
	/* the promotion went on, and lands */
	assert_true(kvt_test_stat_wait(&sp.d, "promoted", 1, 1) >= 1);
	assert_int_equal(get_checked(sp.c, sp.ns, &sp.keys[below[0]], sp.cb, 90000 + below[0]), 1);
	/* the client's timeout bounds the wait too: the daemon waits at most half of it, so a
	 * promote.wait_ms past it costs a miss, not the connection (it was -ETIMEDOUT) */
	char out[256];
	assert_int_equal(kvt_test_cli(&sp.d, "config set promote.wait_ms 60000", out, sizeof(out)),
	                 0);
	assert_int_equal(kvt_set_timeout(sp.c, 600), 0);
	assert_int_equal(kvt_lookup(sp.c, sp.ns, &sp.keys[below[1]], 1), 1);
	t0 = kvt_now_ns();
	rc = get_checked(sp.c, sp.ns, &sp.keys[below[1]], sp.cb, 90000 + below[1]);
	waited = ms_since(t0);
	print_message("with a 600 ms client timeout and promote.wait_ms 60000: %d after %.1f ms\n",
	              rc, waited);
	assert_int_equal(rc, 0);      /* a miss, and not -ETIMEDOUT */
	assert_true(waited >= 299.0); /* after half the client's timeout */
	assert_int_equal(kvt_lookup(sp.c, sp.ns, &sp.keys[below[1]], 1),
	                 1); /* the same connection */
	kvt_close(other);
	unspill(&sp);
}

/* The p99 of HITS gets of the hot chunks keys[N-8..N-1] (each must be a hit, byte for byte). */
static double host_hit_p99(struct spilled *sp, uint32_t salt)
{
	enum { HITS = 2000 };
	static double ms[HITS];
	int found = 0; /* all eight up at host first (the streamer evicts the rest) */
	for (int pass = 0; pass < 200 && found < 8; pass++) {
		found = 0;
		for (size_t k = N - 8; k < N; k++)
			found +=
			    get_checked(sp->c, sp->ns, &sp->keys[k], sp->cb, salt * 10000ull + k);
	}
	assert_int_equal(found, 8);
	for (int i = 0; i < HITS; i++) {
		size_t k = N - 8 + (size_t)(i % 8);
		uint64_t t0 = kvt_now_ns();
		int rc = get_checked(sp->c, sp->ns, &sp->keys[k], sp->cb, salt * 10000ull + k);
		if (rc != 1)
			fail_msg("hot chunk %zu: a miss at get %d of %d", k, i, HITS);
		ms[i] = ms_since(t0);
	}
	kvt_test_sort_ms(ms, HITS);
	return ms[HITS * 99 / 100];
}

/* The lower of two rounds' host_hit_p99(). */
static double better_p99(struct spilled *sp, uint32_t salt)
{
	double a = host_hit_p99(sp, salt), b = host_hit_p99(sp, salt);
	return a < b ? a : b;
}

/* A client process of its own: forks; in the child, k holds a client on sock with the test
 * model's namespace, salt's keys (keys_of) and a buffer of a chunk (the child exits 2 when it
 * cannot attach). @return : the child's pid in the parent, 0 in the child. */
struct child {
	kvt_client_t *c;
	kvt_id_t ns, keys[N];
	size_t cb;
	void *dst[1];
};

static pid_t fork_client(const char *sock, uint32_t salt, struct child *k)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid)
		return pid;
	kvt_model_t m = model(1);
	if (kvt_connect(sock, &k->c) || kvt_namespace(k->c, &m, &k->ns))
		_exit(2);
	keys_of(k->ns, k->keys, N, salt);
	k->cb = kvt_chunk_bytes(&m);
	k->dst[0] = malloc(k->cb);
	return 0;
}

/* A child that gets keys[0..63] round and round, 10 ms apart, until *stop: with 32 chunks of
 * host, each is a promotion from nvme (a miss first, while the device is slow). */
static pid_t streamer(const char *sock, uint32_t salt, volatile int *stop)
{
	struct child k;
	pid_t pid = fork_client(sock, salt, &k);
	if (pid)
		return pid;
	for (size_t i = 0; !__atomic_load_n(stop, __ATOMIC_ACQUIRE); i = (i + 1) % 64) {
		if (kvt_get(k.c, k.ns, &k.keys[i], 1, k.dst, k.cb) < 0)
			_exit(3);
		usleep(10000); /* about the same load whether the device is fast or slow */
	}
	_exit(0);
}

/* RELIABILITY L7 as it is written: 50 ms more on every batch of nvme reads, armed while a file
 * exists. While another client streams promotions from nvme, the host hits' p99 is measured
 * with the device fast and then slow, in the same daemon: the slow p99 may not pass 1.2x the
 * fast one (plus 2 ms: a loop that waited on the device would show 50). A get of a chunk only
 * in nvme is a miss once promote.wait_ms (20) has passed, within 25 ms of it (less than the
 * device's 50: it never waited for the device). The slowest I/O
 * the engine saw (io_max_us) stays under 1 s: no thread blocked past it. */
static void test_tiers_slow_device_50ms(void **state)
{
	const char *sets[] = {"host.bytes=2MiB", "tiers.order=host,nvme", "nvme.bytes=64MiB",
	                      "promote.wait_ms=20", NULL};
	char dir[256], flag[300];
	kvt_test_tmpdir(dir, sizeof(dir));
	snprintf(flag, sizeof(flag), "%s/slow", dir);
	setenv("KVTIER_NVME_READ_DELAY_MS", "50", 1);
	setenv("KVTIER_NVME_FAULT_FILE", flag, 1);
	struct spilled sp;
	spill(&sp, sets, 13);
	unsetenv("KVTIER_NVME_READ_DELAY_MS");
	unsetenv("KVTIER_NVME_FAULT_FILE");
	volatile int *stop =
	    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(stop != MAP_FAILED);
	pid_t st = streamer(sp.d.sock, 13, stop);
	/* each p99 is the better of two rounds of 2,000 hits: on a shared 2-core VM one round's
	 * p99 read 0.15-3.2 ms with the device fast (another process took the vCPU); a loop that
	 * waited on the device would read 50 ms in both */
	double fast = better_p99(&sp, 13);
	long long promoted = kvt_test_stat(&sp.d, "promoted");
	int fd = open(flag, O_CREAT | O_WRONLY | O_CLOEXEC, 0600); /* the device turns slow */
	assert_true(fd >= 0);
	close(fd);
	usleep(200000);
	double slow = better_p99(&sp, 13);
	/* chunks only in nvme (the streamer reads 0..63, the hot ones are N-8..N-1): each a miss
	 * after promote.wait_ms */
	size_t below[8];
	keys_where(&sp, false, 64, N - 9, below, 8);
	/* the catalogue's 10 ms holds on an idle machine (20.2-21.3 ms); beside another test on
	 * 2 cores one miss took 30.5 ms, and 50.5 ms beside test_tiers and test_stress (so ctest
	 * runs none of the three at once: tests/integration/ipc.cmake). 25 ms still tells a wait on
	 * the device (50 ms) apart */
	double worst = 0, least = 1e9, slack = kvt_test_slowed() ? 100 : 25;
	for (size_t j = 0; j < 8; j++) {
		size_t k = below[j];
		uint64_t t0 = kvt_now_ns();
		int rc = get_checked(sp.c, sp.ns, &sp.keys[k], sp.cb, 13 * 10000ull + k);
		double waited = ms_since(t0);
		assert_int_equal(rc, 0);
		worst = waited > worst ? waited : worst;
		least = waited < least ? waited : least;
	}
	__atomic_store_n(stop, 1, __ATOMIC_RELEASE);
	int status;
	assert_int_equal(waitpid(st, &status, 0), st);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	long long io_max_us = kvt_test_tier_stat(&sp.d, "nvme", "io_max_us");
	print_message("host hits' p99 with promotions streaming: %.3f ms (device fast), %.3f ms "
	              "(50 ms slower: %.2fx); nvme-only gets: misses after %.1f to %.1f ms "
	              "(promote.wait_ms 20); %lld promotions; slowest I/O %.1f ms\n",
	              fast, slow, slow / fast, least, worst,
	              kvt_test_stat(&sp.d, "promoted") - promoted, io_max_us / 1000.0);
	assert_true(slow <= 1.2 * fast + 2.0);
	assert_true(least >= 19.0 && worst <= 20.0 + slack);
	assert_true(io_max_us >= 50000 && io_max_us < 1000000);
	unlink(flag); /* the device is fast again: the chunks come back up, byte for byte */
	assert_true(kvt_test_stat_wait(&sp.d, "promoted", promoted + 8, 1) >= promoted + 8);
	for (size_t k = 64; k < 72; k++)
		get_checked(sp.c, sp.ns, &sp.keys[k], sp.cb, 13 * 10000ull + k);
	assert_int_equal(kvt_test_stat(&sp.d, "corruptions"), 0);
	kvt_test_check_books(&sp.d, 0);
	munmap((void *)stop, 4096);
	kvt_test_rmtree(dir);
	unspill(&sp);
}

/* What a client waiting inside a call saw when kvtierd died: the call's result and when it
 * returned (CLOCK_MONOTONIC, as kvt_now_ns). */
struct waited {
	int rc;
	uint64_t end_ns;
};

/* A child that connects, tells `ready`, and gets key (the chunk of salt's keys_of at i); it
 * writes what it saw to `out`. */
static pid_t get_child(const char *sock, uint32_t salt, size_t i, int ready, int out)
{
	struct child k;
	pid_t pid = fork_client(sock, salt, &k);
	if (pid)
		return pid;
	if (write(ready, "g", 1) != 1)
		_exit(3);
	struct waited w = {.rc = kvt_get(k.c, k.ns, &k.keys[i], 1, k.dst, k.cb)};
	w.end_ns = kvt_now_ns();
	_exit(write(out, &w, sizeof(w)) == sizeof(w) ? 0 : 4);
}

/* RELIABILITY F4 under load: kvtierd is killed (-9) while 96 clients wait inside a get each (a
 * promotion from a device 10 s slow). Every call returns -ENOTCONN within 1 s of the kill, not
 * when the device would have answered. After a restart another client handle, which held its
 * connection through the kill, is served again within 5 s of the daemon being ready, and the
 * chunk the get waited for is found byte for byte. */
static void test_tiers_kill9_frees_waiting_client(void **state)
{
	const char *sets[] = {"host.bytes=2MiB", "tiers.order=host,nvme", "nvme.bytes=64MiB",
	                      "promote.wait_ms=30000", NULL};
	int ready[2], out[2];
	char b;
	/* slow past the time it takes to start the 96 clients (3 s was not, under ASan on a busy
	 * machine: the first gets were served before the kill) */
	setenv("KVTIER_NVME_READ_DELAY_MS", "10000", 1); /* its most */
	struct spilled sp;
	spill(&sp, sets, 5);
	unsetenv("KVTIER_NVME_READ_DELAY_MS");
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(out), 0);
	enum { WAITERS = 96 };
	pid_t pid[WAITERS];
	size_t only[WAITERS]; /* host holds ~30 of the 128 (it took keys[0..95] on trust) */
	keys_where(&sp, false, 0, N - 1, only, WAITERS);
	for (int k = 0; k < WAITERS; k++)
		pid[k] = get_child(sp.d.sock, 5, only[k], ready[1], out[1]);
	for (int k = 0; k < WAITERS; k++)
		assert_int_equal(read(ready[0], &b, 1), 1);
	usleep(300000); /* the gets are parked: their promotions wait on the device */
	uint64_t killed = kvt_now_ns();
	kvt_test_daemon_stop(&sp.d, SIGKILL);
	struct waited w = {0};
	double ms = 0; /* the slowest to return */
	for (int k = 0; k < WAITERS; k++) {
		struct waited one;
		assert_int_equal(read(out[0], &one, sizeof(one)), sizeof(one));
		assert_int_equal(one.rc, -ENOTCONN);
		if ((double)(one.end_ns - killed) / 1e6 >= ms)
			w = one, ms = (double)(one.end_ns - killed) / 1e6;
	}
	for (int k = 0; k < WAITERS; k++) {
		int st;
		assert_int_equal(waitpid(pid[k], &st, 0), pid[k]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	assert_int_equal(kvt_test_daemon_restart(&sp.d, sets), 0);
	uint64_t up = kvt_now_ns();
	int rc = -ENOTCONN;
	for (int k = 0; k < 500 && rc == -ENOTCONN; k++)
		if ((rc = kvt_lookup(sp.c, sp.ns, sp.keys, 1)) == -ENOTCONN)
			usleep(10000);
	double back_ms = ms_since(up);
	print_message("the %d waiting gets returned %d, the last %.1f ms after the kill; served "
	              "again %.1f ms after the restart\n",
	              WAITERS, w.rc, ms, back_ms);
	assert_int_equal(w.rc, -ENOTCONN);
	assert_true(ms < 1000.0);
	assert_int_equal(rc, 1); /* demoted before the kill: found */
	assert_true(back_ms < 5000.0);
	assert_int_equal(get_checked(sp.c, sp.ns, &sp.keys[0], sp.cb, 50000), 1);
	for (int i = 0; i < 2; i++)
		close(ready[i]), close(out[i]);
	unspill(&sp);
}

/* Whether tier's entry in `kvtier stats --json` says "flag":true (disabled, full). */
static bool tier_flag(struct kvt_test_daemon *d, const char *tier, const char *flag)
{
	static char out[1 << 16];
	char pat[64];
	assert_true(kvt_test_stats_json(d, out, sizeof(out)) > 0);
	snprintf(pat, sizeof(pat), "\"name\":\"%s\"", tier);
	const char *p = strstr(out, pat);
	assert_non_null(p);
	snprintf(pat, sizeof(pat), "\"%s\":", flag);
	p = strstr(p, pat);
	assert_non_null(p);
	return !strncmp(p + strlen(pat), "true", 4);
}

static bool tier_disabled(struct kvt_test_daemon *d, const char *tier)
{
	return tier_flag(d, tier, "disabled");
}

/* Waits up to 5 s for tier's flag to turn true. */
static void wait_tier_flag(struct kvt_test_daemon *d, const char *tier, const char *flag)
{
	for (int k = 0; k < 500 && !tier_flag(d, tier, flag); k++)
		usleep(10000);
	assert_true(tier_flag(d, tier, flag));
}

/* Spills N chunks (salt's) to a working nvme whose injector `knob`=`ppm` is armed only while
 * the file named in arm exists (KVTIER_NVME_FAULT_FILE); arm is made up here, not created. */
static void spill_armed(struct spilled *sp, const char *const *sets, uint32_t salt,
                        const char *knob, const char *ppm, char *arm, size_t arm_len)
{
	snprintf(arm, arm_len, "/tmp/kvt-nvme-arm-%d-%u", (int)getpid(), salt);
	unlink(arm);
	setenv(knob, ppm, 1);
	setenv("KVTIER_NVME_FAULT_FILE", arm, 1);
	spill(sp, sets, salt); /* the file is not there: the device works, all N demoted */
	unsetenv(knob);
	unsetenv("KVTIER_NVME_FAULT_FILE");
}

static void arm_faults(const char *arm)
{
	int fd = open(arm, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
}

/* Restarts the spilled daemon (SIGTERM) and reconnects its client. */
static void respill(struct spilled *sp, const char *const *sets)
{
	kvt_test_daemon_stop(&sp->d, SIGTERM);
	assert_int_equal(kvt_test_daemon_restart(&sp->d, sets), 0);
	kvt_close(sp->c);
	kvt_model_t m = model(1);
	assert_int_equal(kvt_connect(sp->d.sock, &sp->c), 0);
	assert_int_equal(kvt_namespace(sp->c, &m, &sp->ns), 0);
}

/* The first `gone` of the spilled keys are deleted, every other one reads back right. */
static void check_spilled_but(struct spilled *sp, int gone, uint64_t seed0)
{
	for (int i = 0; i < gone; i++)
		assert_int_equal(kvt_lookup(sp->c, sp->ns, &sp->keys[i], 1), 0);
	for (int i = gone; i < N; i++)
		assert_int_equal(
		    get_checked(sp->c, sp->ns, &sp->keys[i], sp->cb, seed0 + (uint64_t)i), 1);
}

/* F8 with D6: the device under a running daemon's nvme tier fails (KVTIER_NVME_FAULT_FILE arms
 * the injector while its file exists) until the tier disables itself. A get of a chunk only nvme
 * holds is a miss meanwhile, but the daemon keeps the chunk (a disabled tier reads nothing, and
 * its records are whole), and a delete made meanwhile reaches the tier at its enable. Once the
 * device recovers and the tier is enabled, every chunk but the deleted ones reads back byte for
 * byte, also after a restart, and the deleted ones stay deleted. Before, each failed read made
 * the daemon forget its chunk: lost until a restart found it, and a delete of it never reached
 * the tier, so the restart brought the deleted chunk back. */
static void test_tiers_disabled_tier_keeps_copies(void **state)
{
	enum { GONE = 4 };
	char arm[64];
	const char *sets[] = {"host.bytes=2MiB", "tiers.order=host,nvme", "nvme.bytes=64MiB", NULL};
	struct spilled sp;
	spill_armed(&sp, sets, 5, "KVTIER_NVME_FAULT_PPM", "500000", arm, sizeof(arm));
	struct kvt_test_daemon *d = &sp.d;
	kvt_id_t *keys = sp.keys;
	static kvt_id_t other[N];
	keys_of(sp.ns, other, N, 6);

	arm_faults(arm); /* the device fails from now on */
	kvt_test_put_chains(sp.c, sp.ns, other, N, sp.cb, 60000, 4); /* their demotions fail */
	wait_tier_flag(d, "nvme", "disabled");
	int misses = 0;
	for (int i = 0; i < N; i++)
		misses += !get_checked(sp.c, sp.ns, &keys[i], sp.cb, 50000 + (uint64_t)i);
	print_message("%d of %d chunks only in the disabled tier: misses\n", misses, N);
	assert_true(misses >= GONE);
	assert_int_equal(kvt_lookup(sp.c, sp.ns, keys, N), N); /* and still known */
	assert_int_equal(kvt_delete(sp.c, sp.ns, keys, GONE), GONE);

	assert_int_equal(unlink(arm), 0); /* the device recovers; the operator enables the tier */
	char out[512];
	assert_int_equal(kvt_test_cli(d, "tier enable nvme", out, sizeof(out)), 0);
	assert_false(tier_disabled(d, "nvme"));
	check_spilled_but(&sp, GONE, 50000);
	respill(&sp, sets);
	check_spilled_but(&sp, GONE, 50000);
	unspill(&sp);
}

/* F6 with ENOSPC in a running daemon: the device under nvme fills up (KVTIER_NVME_NOSPC_PPM
 * answers every write ENOSPC while the file `arm` exists). The tier marks itself full; demotions
 * fail and host drops what it cannot keep, but no chunk nvme already holds is lost: each reads
 * back byte for byte while the device is full. Once it has room again, a probe write (one per
 * second) clears full and demotions go on; deletes made meanwhile hold across a restart. */
static void test_tiers_full_device_in_running_daemon(void **state)
{
	enum { GONE = 4 };
	char arm[64];
	const char *sets[] = {"host.bytes=2MiB", "tiers.order=host,nvme", "nvme.bytes=64MiB", NULL};
	struct spilled sp;
	spill_armed(&sp, sets, 8, "KVTIER_NVME_NOSPC_PPM", "1000000", arm, sizeof(arm));
	struct kvt_test_daemon *d = &sp.d;
	static kvt_id_t other[N], later[8];
	keys_of(sp.ns, other, N, 9);

	arm_faults(arm); /* the device is full from now on */
	long long demoted = kvt_test_stat(d, "demoted");
	kvt_test_put_chains(sp.c, sp.ns, other, N, sp.cb, 90000, 4); /* their demotions fail */
	wait_tier_flag(d, "nvme", "full");
	assert_false(tier_disabled(d, "nvme")); /* full is not failing */
	assert_true(kvt_test_stat(d, "demote_failed") > 0);
	assert_int_equal(get_checked(sp.c, sp.ns, &other[N - 1], sp.cb, 90000 + N - 1), 1);
	int kept = 0;
	for (int i = N - 1; i >= 0; i--) /* what host could not keep is a miss, never wrong */
		kept += get_checked(sp.c, sp.ns, &other[i], sp.cb, 90000 + (uint64_t)i);
	assert_true(kept > 0 && kept < N);
	for (int i = 0; i < N; i++) /* reads go on: nvme's chunks come back whole */
		assert_int_equal(get_checked(sp.c, sp.ns, &sp.keys[i], sp.cb, 80000 + (uint64_t)i),
		                 1);
	print_message("nvme full: %lld demotions failed, %d of %d new chunks kept\n",
	              kvt_test_stat(d, "demote_failed"), kept, N);
	assert_int_equal(kvt_delete(sp.c, sp.ns, sp.keys, GONE), GONE);

	assert_int_equal(unlink(arm), 0); /* room again: a probe write clears full */
	demoted = kvt_test_stat(d, "demoted");
	for (int k = 0; k < 300 && tier_flag(d, "nvme", "full"); k++) {
		keys_of(sp.ns, later, 8, 100 + (uint32_t)k); /* new chunks push others down */
		kvt_test_put_chain(sp.c, sp.ns, later, 8, sp.cb, 100000);
		usleep(10000);
	}
	assert_false(tier_flag(d, "nvme", "full"));
	wait_stat(d, "demoted", demoted + 1);
	respill(&sp, sets);
	check_spilled_but(&sp, GONE, 80000);
	unspill(&sp);
}

/* A device that fails every I/O in a running daemon (RELIABILITY F8): the nvme tier disables
 * itself, the daemon goes on serving and storing at host, `kvtier tier enable nvme` is refused
 * while the device still fails, and the daemon stops cleanly. */
static void test_tiers_failing_device_disables(void **state)
{
	const char *sets[] = {"host.bytes=2MiB", "tiers.order=host,nvme", "nvme.bytes=64MiB", NULL};
	static kvt_id_t keys[N];
	kvt_model_t m = model(1);
	struct kvt_test_daemon d;
	kvt_id_t ns;
	/* every I/O completes with EIO or EAGAIN, half the submits are refused (after the open) */
	setenv("KVTIER_NVME_FAULT_PPM", "500000", 1);
	kvt_client_t *c = start_ns(&d, sets, &m, &ns);
	unsetenv("KVTIER_NVME_FAULT_PPM");
	assert_false(tier_disabled(&d, "nvme"));
	keys_of(ns, keys, N, 11);
	size_t cb = kvt_chunk_bytes(&m);
	kvt_test_put_chains(c, ns, keys, N, cb, 110000, 4); /* every put is taken */
	wait_tier_flag(&d, "nvme", "disabled");
	assert_true(kvt_test_stat(&d, "demote_failed") > 0);
	assert_int_equal(kvt_test_stat(&d, "demoted"), 0);
	/* host goes on: the newest chunks are there, byte for byte, and new puts are taken */
	assert_int_equal(get_checked(c, ns, &keys[N - 1], cb, 110000 + N - 1), 1);
	kvt_test_put_chain(c, ns, keys, 8, cb, 110000);
	assert_int_equal(get_checked(c, ns, &keys[7], cb, 110007), 1);
	char out[512];
	int rc = kvt_test_cli(&d, "tier enable nvme", out, sizeof(out));
	print_message("tier enable nvme: exit %d: %s", rc, out);
	assert_true(rc != 0);
	assert_non_null(strstr(out, "tier nvme stays disabled: its device still fails"));
	assert_true(tier_disabled(&d, "nvme"));
	kvt_close(c);
	kvt_test_check_books(&d, 0);
	kvt_test_daemon_destroy(&d); /* and it stops cleanly */
}

/* RELIABILITY F7 in a running daemon: rocksdb's filesystem (a 64 MiB tmpfs, 40 MiB of it
 * ballast; root only) fills while chunks are written through to nvme and rocksdb. rocksdb says
 * full and its copies fail; puts are still taken, and every chunk reads back byte for byte
 * from host and nvme. Once the ballast is gone rocksdb takes writes again, without a restart,
 * and the daemon stops cleanly. */
static void test_tiers_rocksdb_disk_full(void **state)
{
	enum { ROUNDS_MAX = 12 };
	char dir[256], mnt[300], bal[320], path[340];
	if (kvt_test_mount_tmpfs(dir, sizeof(dir), mnt, sizeof(mnt), "64m"))
		skip(); /* not root */
	snprintf(bal, sizeof(bal), "%s/ballast", mnt);
	kvt_test_ballast(bal, 40 << 20);
	snprintf(path, sizeof(path), "rocksdb.path=%s/db", mnt);
	const char *sets[] = {"host.bytes=2MiB",
	                      "tiers.order=host,nvme,rocksdb",
	                      "nvme.bytes=128MiB",
	                      "rocksdb.bytes=256MiB",
	                      path,
	                      "rocksdb.wal=true",
	                      "tiers.placement=write-through",
	                      NULL};
	static kvt_id_t keys[ROUNDS_MAX * N];
	kvt_model_t m = model(1);
	struct kvt_test_daemon d;
	kvt_id_t ns;
	kvt_client_t *c = start_ns(&d, sets, &m, &ns);
	keys_of(ns, keys, ROUNDS_MAX * N, 41);
	size_t cb = kvt_chunk_bytes(&m);
	int r = 0;
	for (; r < ROUNDS_MAX / 2 && !tier_flag(&d, "rocksdb", "full"); r++) {
		kvt_test_put_chain(c, ns, keys + r * N, N, cb, 410000 + (uint64_t)r * N);
		kvt_test_stat_wait(&d, "demoted",
		                   2ll * (r + 1) * N - kvt_test_stat(&d, "demote_failed"), 1);
	}
	long long rdb_full_at = kvt_test_tier_stat(&d, "rocksdb", "chunks");
	print_message("rocksdb full after %d rounds: %lld chunks, %lld demotions failed\n", r,
	              rdb_full_at, kvt_test_stat(&d, "demote_failed"));
	assert_true(tier_flag(&d, "rocksdb", "full"));
	assert_true(kvt_test_stat(&d, "demote_failed") > 0);
	/* full: puts are taken, nvme takes every copy, and every chunk reads back right */
	kvt_test_put_chain(c, ns, keys + r * N, N, cb, 410000 + (uint64_t)r * N);
	r++;
	kvt_test_stat_wait(&d, "demoted", kvt_test_stat(&d, "demoted") + 1, 1);
	for (int k = 0; k < 500 && kvt_test_tier_stat(&d, "nvme", "chunks") < (long long)r * N; k++)
		usleep(10000);
	assert_int_equal(kvt_test_tier_stat(&d, "nvme", "chunks"), (long long)r * N);
	for (int k = 0; k < r * N; k++)
		if (!get_checked(c, ns, &keys[k], cb, 410000 + (uint64_t)k))
			fail_msg("chunk %d of %d missed while rocksdb was full", k, r * N);
	/* space again: the next writes find it (a probe every 500 ms) and rocksdb resumes */
	assert_int_equal(unlink(bal), 0);
	uint64_t t0 = kvt_now_ns();
	long long writes = kvt_test_tier_stat(&d, "rocksdb", "writes");
	for (; r < ROUNDS_MAX && kvt_test_tier_stat(&d, "rocksdb", "writes") <= writes; r++) {
		kvt_test_put_chain(c, ns, keys + r * N, 16, cb, 410000 + (uint64_t)r * N);
		usleep(200000);
	}
	print_message("rocksdb took writes again %.0f ms after the space came back (%d rounds)\n",
	              (double)(kvt_now_ns() - t0) / 1e6, r);
	assert_true(kvt_test_tier_stat(&d, "rocksdb", "writes") > writes);
	assert_false(tier_flag(&d, "rocksdb", "full"));
	kvt_close(c);
	kvt_test_check_books(&d, 0);
	kvt_test_daemon_destroy(&d); /* and it stops cleanly */
	kvt_test_umount_tmpfs(dir, mnt);
}

/* A daemon started with sets (and a config file, for SIGHUP) whose nvme writes take 1.5 s while
 * flag (in dir, a new tmpdir) exists: a client of the test model's namespace ns, fit + extra
 * keys, and X = keys[0] put (salt) and demoted while the writes are fast; then they turn slow. */
struct slow {
	struct kvt_test_daemon d;
	kvt_client_t *c;
	kvt_id_t ns, keys[72];
	size_t cb;
	long long fit; /* the chunks host holds */
	char dir[256], flag[300];
};

static void slow_writes_start(struct slow *s, const char *const *sets, size_t extra, uint64_t seed,
                              uint64_t salt)
{
	kvt_test_tmpdir(s->dir, sizeof(s->dir));
	snprintf(s->flag, sizeof(s->flag), "%s/slow", s->dir);
	setenv("KVTIER_NVME_WRITE_DELAY_MS", "1500", 1);
	setenv("KVTIER_NVME_FAULT_FILE", s->flag, 1); /* slow while it exists */
	kvt_model_t m = model(1);
	assert_int_equal(kvt_test_daemon_start_config(&s->d, "# slow writes\n", sets), 0);
	assert_int_equal(kvt_connect(s->d.sock, &s->c), 0);
	assert_int_equal(kvt_namespace(s->c, &m, &s->ns), 0);
	unsetenv("KVTIER_NVME_WRITE_DELAY_MS");
	unsetenv("KVTIER_NVME_FAULT_FILE");
	s->cb = kvt_chunk_bytes(&m);
	/* host's records of a 64 KiB chunk and its header, 4 KiB granules: 30 in 2 MiB */
	s->fit = kvt_test_tier_stat(&s->d, "host", "capacity_bytes") / (long long)(s->cb + 4096);
	assert_true(s->fit >= 4 && (size_t)s->fit + extra <= sizeof(s->keys) / sizeof(s->keys[0]));
	keys_of(s->ns, s->keys, (size_t)s->fit + extra, seed);
	kvt_test_put_chains(s->c, s->ns, s->keys, 1, s->cb, salt, 1); /* X */
	wait_stat(&s->d, "demoted", 1);
	int fd = open(s->flag, O_CREAT | O_WRONLY | O_CLOEXEC, 0600); /* writes turn slow */
	assert_true(fd >= 0);
	close(fd);
}

static void slow_writes_end(struct slow *s)
{
	kvt_close(s->c);
	kvt_test_daemon_destroy(&s->d);
	kvt_test_rmtree(s->dir);
}

/* A put whose victim, host's first choice (lru's oldest chunk), is a host copy still being
 * demoted waits for the demotion and then evicts that chunk (host.evict_waits, the default), as
 * kvtier sim does with the copy it wrote below at once, rather than pass it over for one the
 * policy ranks later. Here nvme writes take 1.5 s and host is full of chunks being demoted but
 * for X, demoted before and read last; the put of one more chunk evicts the oldest, and X stays.
 * Until 2026-12-07 the put evicted X, the one chunk not in a tier job (host.evict_waits = false
 * still does): arc passed over its newest list so, and served 0.1067 over rocksdb where the
 * simulator's replay read 0.1164 (docs/policies.md). And kvtier stats answers meanwhile (the
 * tier's tenant accounts as last read, tierctl.c). */
static void demoted_victim(bool waits)
{
	const char *sets[] = {"host.bytes=2MiB",
	                      "tiers.order=host,nvme",
	                      "nvme.bytes=64MiB",
	                      "host.dirty_pct=100",
	                      "demote.wait_ms=20000",
	                      waits ? "host.evict_waits=true" : "host.evict_waits=false",
	                      NULL};
	struct slow s;
	slow_writes_start(&s, sets, 1, 77, 7700); /* X = keys[0], demoted at once */
	/* the rest of host, each chunk a request of its own, all being demoted for a while */
	kvt_test_put_chains(s.c, s.ns, s.keys + 1, (size_t)s.fit - 1, s.cb, 7701, 1);
	/* kvtier stats answers while the worker is in a 1.5 s write (it waited for the tier's
	 * lock: 6 s, the loop held) */
	uint64_t t0 = kvt_now_ns();
	long long dirty = kvt_test_tier_stat(&s.d, "host", "dirty_bytes");
	double stats_ms = ms_since(t0);
	print_message("kvtier stats during slow writes: %.1f ms (dirty %lld bytes)\n", stats_ms,
	              dirty);
	assert_true(dirty > 0);
	assert_true(stats_ms < 1000.0);
	assert_int_equal(kvt_test_tier_stat(&s.d, "host", "chunks"), s.fit);
	assert_int_equal(kvt_test_tier_stat(&s.d, "host", "evictions"), 0);
	assert_int_equal(get_checked(s.c, s.ns, &s.keys[0], s.cb, 7700),
	                 1); /* X: lru's newest now */
	long long parked = kvt_test_stat(&s.d, "puts_parked");
	kvt_test_put_chains(s.c, s.ns, s.keys + s.fit, 1, s.cb, 7700 + (uint64_t)s.fit, 1);
	char x[64], oldest[64];
	assert_int_equal(kvt_test_chunk_in(&s.d, s.ns, s.keys[0], x, sizeof(x)), 0);
	assert_int_equal(kvt_test_chunk_in(&s.d, s.ns, s.keys[1], oldest, sizeof(oldest)), 0);
	print_message("host.evict_waits=%d: X in %s, the oldest in %s\n", waits, x, oldest);
	if (waits) {
		assert_non_null(strstr(x, "host"));      /* kept: the policy's last choice */
		assert_null(strstr(oldest, "host"));     /* evicted, once below: its first */
		assert_non_null(strstr(oldest, "nvme")); /* ... */
		assert_true(kvt_test_stat(&s.d, "puts_parked") > parked); /* the put waited */
	} else { /* passed over at once: X, the one chunk not being demoted, went */
		assert_null(strstr(x, "host"));
		assert_non_null(strstr(oldest, "host"));
		assert_int_equal(kvt_test_stat(&s.d, "puts_parked"), parked);
	}
	assert_int_equal(unlink(s.flag), 0);
	wait_stat(&s.d, "demoted", s.fit + 1);
	for (long long i = 0; i <= s.fit; i++) /* every chunk, every byte, wherever it is */
		assert_int_equal(get_checked(s.c, s.ns, &s.keys[i], s.cb, 7700 + (uint64_t)i), 1);
	slow_writes_end(&s);
}

static void test_tiers_put_waits_for_demoted_victim(void **state)
{
	(void)state;
	demoted_victim(true);
}

/* host.evict_waits = false: the put passes its victim over while it is being demoted. */
static void test_tiers_put_passes_demoted_victim(void **state)
{
	(void)state;
	demoted_victim(false);
}

/* Whether f's command has answered (its output or its end is readable). */
static bool cli_answered(FILE *f)
{
	struct pollfd p = {.fd = fileno(f), .events = POLLIN};
	return poll(&p, 1, 0) == 1;
}

/* Keeps slow_writes_start's tier writing: when host has nothing left to demote (a build slowed
 * by a sanitizer may have written it all), 4 more chains, keys[*n] on. */
static void more_to_write(struct slow *s, long long *n, uint64_t salt)
{
	if (kvt_test_tier_stat(&s->d, "host", "dirty_bytes"))
		return;
	kvt_test_put_chains(s->c, s->ns, s->keys + *n, 4, s->cb, salt + (uint64_t)*n, 1);
	*n += 4;
}

/*
 * An operator's command on a tier busy with I/O (here `config set nvme.quota`, `tier enable
 * nvme` and `policy get nvme`, at once) is parked until the tier's worker is between writes, and
 * the loop serves the engines meanwhile: a host hit is as fast as ever while the commands wait.
 * Until 2026-12-07 the loop took the tier's lock itself and every request waited with it, 3-10.5 s
 * with writes of 1.5 s. Past tiers.command_wait_ms the command is answered -EBUSY, "busy
 * with I/O", and nothing changed.
 */
static void test_tiers_commands_wait_off_loop(void **state)
{
	(void)state;
	const char *sets[] = {"host.bytes=2MiB",    "tiers.order=host,nvme", "nvme.bytes=64MiB",
	                      "host.dirty_pct=100", "demote.wait_ms=20000",  NULL};
	char out[2048];
	struct slow s;
	slow_writes_start(&s, sets, 8, 91, 9100); /* X = keys[0], at host, demoted */
	long long n = s.fit;                      /* chunks put */
	/* the rest of host, ~3 s each below */
	kvt_test_put_chains(s.c, s.ns, s.keys + 1, (size_t)s.fit - 1, s.cb, 9101, 1);
	usleep(100000);
	uint64_t t0 = kvt_now_ns();
	/* SIGHUP's reload waits for the tier likewise, the loop serving */
	FILE *f = fopen(s.d.config, "w");
	assert_non_null(f);
	assert_true(fputs("nvme.quota = 0=3MiB/16MiB\n", f) >= 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(kill(s.d.pid, SIGHUP), 0);
	double worst_hup = 0;
	bool reloaded = false;
	while (!reloaded && ms_since(t0) < 10000) {
		uint64_t t1 = kvt_now_ns();
		assert_int_equal(get_checked(s.c, s.ns, &s.keys[0], s.cb, 9100), 1);
		worst_hup = KVT_MAX(worst_hup, ms_since(t1));
		assert_int_equal(kvt_test_cli(&s.d, "config get nvme.quota", out, sizeof(out)), 0);
		reloaded = strstr(out, "0=3MiB/16MiB") != NULL;
		usleep(20000);
	}
	print_message(
	    "SIGHUP during 1.5 s writes: reloaded after %.0f ms; host hits meanwhile, the "
	    "slowest %.2f ms\n",
	    ms_since(t0), worst_hup);
	assert_true(reloaded);
	assert_true(worst_hup < 500);
	more_to_write(&s, &n, 9100);
	t0 = kvt_now_ns();
	/* three commands at once, each parked, each run once the worker is between writes */
	static const char *const cmds[] = {"config set nvme.quota 0=1MiB/16MiB", "tier enable nvme",
	                                   "policy get nvme"};
	static const char *const want[] = {"0=1MiB/16MiB", "tier nvme enabled", "nvme fifo"};
	FILE *cmd[3];
	for (int k = 0; k < 3; k++)
		assert_non_null(cmd[k] = kvt_test_cli_start(&s.d, cmds[k]));
	double worst = 0;
	int hits = 0;
	while (ms_since(t0) < 1000) {
		uint64_t t1 = kvt_now_ns();
		assert_int_equal(get_checked(s.c, s.ns, &s.keys[0], s.cb, 9100), 1);
		worst = KVT_MAX(worst, ms_since(t1));
		hits++;
		usleep(20000);
	}
	bool parked[3];
	for (int k = 0; k < 3; k++)
		parked[k] = !cli_answered(cmd[k]);
	for (int k = 0; k < 3; k++) {
		int rc = kvt_test_cmd_end(cmd[k], out, sizeof(out));
		print_message("%s during 1.5 s writes: rc %d after %.0f ms (%s)\n", cmds[k], rc,
		              ms_since(t0),
		              parked[k] ? "parked for the first second" : "not parked");
		assert_int_equal(rc, 0);
		assert_non_null(strstr(out, want[k]));
		assert_true(parked[k]); /* the tier was busy: the command waited, ... */
	}
	print_message("%d host hits meanwhile, the slowest %.2f ms\n", hits, worst);
	assert_int_equal(kvt_test_stat(&s.d, "commands_parked"), 3); /* each once */
	assert_int_equal(kvt_test_stat(&s.d, "commands_busy"), 0);
	assert_true(worst < 500); /* ... and the loop served (it waited as long: > 1000) */
	/* past tiers.command_wait_ms: -EBUSY, and nothing changed */
	more_to_write(&s, &n, 9100);
	assert_int_equal(
	    kvt_test_cli(&s.d, "config set tiers.command_wait_ms 200", out, sizeof(out)), 0);
	char last[64] = "0=1MiB/16MiB", val[64];
	bool busy = false;
	int rc;
	for (int a = 0; a < 5 && !busy; a++) { /* a set that finds the worker between writes runs */
		snprintf(val, sizeof(val), "0=%dMiB/16MiB", 2 + a);
		char args[128];
		snprintf(args, sizeof(args), "config set nvme.quota %s", val);
		uint64_t t1 = kvt_now_ns();
		rc = kvt_test_cli(&s.d, args, out, sizeof(out));
		double ms = ms_since(t1);
		if (!rc) {
			snprintf(last, sizeof(last), "%s", val);
			continue;
		}
		busy = true;
		print_message("with tiers.command_wait_ms=200: rc %d after %.0f ms: %s", rc, ms,
		              out);
		assert_non_null(strstr(out, "busy with I/O"));
		assert_true(ms >= 190 && ms < 1500);
	}
	assert_true(busy);
	assert_int_equal(kvt_test_stat(&s.d, "commands_busy"), 1);
	assert_int_equal(kvt_test_cli(&s.d, "config get nvme.quota", out, sizeof(out)), 0);
	assert_non_null(strstr(out, last));
	assert_int_equal(unlink(s.flag), 0); /* fast again: every chunk goes down, byte for byte */
	wait_stat(&s.d, "demoted", n);
	for (long long i = 0; i < n; i++)
		assert_int_equal(get_checked(s.c, s.ns, &s.keys[i], s.cb, 9100 + (uint64_t)i), 1);
	slow_writes_end(&s);
}

/*
 * A promotion while the nvme tier is inside writes 1.5 s slow rides the write stream: the tier
 * reads it beside its writes (a slot kept for reads, issued ahead of the writes not yet issued)
 * and the get is served in milliseconds. Until 2026-12-07 it waited for the writes in flight,
 * 2.9 s here (a miss past promote.wait_ms). X = keys[0] and the oldest of a spill are only
 * in nvme, put while the writes were fast; then the writes turn slow and a few puts keep the
 * worker writing.
 */
static void test_tiers_promotion_beside_slow_writes(void **state)
{
	(void)state;
	const char *sets[] = {"host.bytes=2MiB", "tiers.order=host,nvme", "nvme.bytes=64MiB",
	                      "demote.wait_ms=20000", NULL};
	struct slow s;
	slow_writes_start(&s, sets, 20, 93, 9300); /* X = keys[0], demoted */
	assert_int_equal(unlink(s.flag), 0);       /* fast again, for the spill */
	long long n = s.fit + 4;
	kvt_test_put_chains(s.c, s.ns, s.keys + 1, (size_t)n - 1, s.cb, 9301, 1);
	wait_stat(&s.d, "demoted", n);
	char where[64];
	int below[3], nb = 0;
	for (int i = 0; i < n && nb < 3; i++) /* the oldest: evicted, only in nvme */
		if (!kvt_test_chunk_in(&s.d, s.ns, s.keys[i], where, sizeof(where)) &&
		    !strstr(where, "host") && strstr(where, "nvme"))
			below[nb++] = i;
	assert_int_equal(nb, 3);
	int fd = open(s.flag, O_CREAT | O_WRONLY | O_CLOEXEC, 0600); /* slow again */
	assert_true(fd >= 0);
	close(fd);
	long long rode0 = kvt_test_tier_stat(&s.d, "nvme", "reads_beside_writes");
	double worst = 0;
	for (int k = 0; k < nb; k++) {
		more_to_write(&s, &n, 9300); /* the worker writes (1.5 s) ... */
		usleep(100000);
		assert_true(kvt_test_tier_stat(&s.d, "host", "dirty_bytes") > 0);
		uint64_t t0 = kvt_now_ns(); /* ... while the get promotes */
		int rc = get_checked(s.c, s.ns, &s.keys[below[k]], s.cb, 9300 + (uint64_t)below[k]);
		double ms = ms_since(t0);
		print_message("get of a chunk only in nvme during 1.5 s writes: %d after %.1f ms\n",
		              rc, ms);
		assert_int_equal(rc, 1); /* served, byte for byte */
		worst = KVT_MAX(worst, ms);
	}
	long long rode = kvt_test_tier_stat(&s.d, "nvme", "reads_beside_writes") - rode0;
	print_message("the slowest %.1f ms; %lld reads rode the tier's writes\n", worst, rode);
	assert_true(rode >= 1);
	assert_true(worst < 1000);           /* behind the writes it took 1.5 s or more */
	assert_int_equal(unlink(s.flag), 0); /* fast again: every chunk goes down, byte for byte */
	wait_stat(&s.d, "demoted", n);
	for (long long i = 0; i < n; i++)
		assert_int_equal(get_checked(s.c, s.ns, &s.keys[i], s.cb, 9300 + (uint64_t)i), 1);
	slow_writes_end(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tiers_slow_device_bounded_wait),
	    cmocka_unit_test(test_tiers_slow_device_50ms),
	    cmocka_unit_test(test_tiers_put_waits_for_demoted_victim),
	    cmocka_unit_test(test_tiers_put_passes_demoted_victim),
	    cmocka_unit_test(test_tiers_commands_wait_off_loop),
	    cmocka_unit_test(test_tiers_promotion_beside_slow_writes),
	    cmocka_unit_test(test_tiers_kill9_frees_waiting_client),
	    cmocka_unit_test(test_tiers_failing_device_disables),
	    cmocka_unit_test(test_tiers_disabled_tier_keeps_copies),
	    cmocka_unit_test(test_tiers_full_device_in_running_daemon),
	    cmocka_unit_test(test_tiers_rocksdb_disk_full),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
