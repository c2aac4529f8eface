/*
 * test_nvme_crash.c -- kill -9 of a process writing to the nvme tier (RELIABILITY.md D2, D3):
 * a child writes records as fast as it can and reports each one whose write() returned; the
 * parent kills it at a random moment, reopens the tier and requires every reported record to
 * be found and byte-identical, every recovered record to be correct, and usage to equal the
 * recovered records. Three rounds on the same file.
 *
 * Torn writes (RELIABILITY.md D4): the fault injector makes a random write land as a random
 * subset of its 4 KiB blocks and ends the process there, as a power cut would; the reopen must
 * succeed and serve only whole records, every write reported done must be found, and nothing
 * removed or dropped may come back under a region header written since (it did, when a region
 * was opened with its header and zero block in one write).
 */
#include "nvme_fixture.h"

#include <fcntl.h>

static void write_one_by_one(struct nvt *n, int fd, uint64_t first)
{
	nvt_write_acked(n, fd, first, 600 << 10);
}

static void test_nvme_crash_kill9(void **state)
{
	struct nvt n;
	nvt_init(&n, "256MiB", "8"); /* three rounds of ~40 MiB: nothing is evicted */
	/* + at most the one write in flight per kill, when it landed whole */
	nvt_kill9_rounds(&n, write_one_by_one, 20, 40, 3000, 1);
	nvt_fini(&n);
}

/* What a torn-write child tells its parent, in order: a write about to start (ATTEMPT), done
 * (DONE, with its loc), a remove about to start (REMOVING) and done (REMOVED), a record the
 * tier dropped (DROPPED, its loc). */
enum { ATTEMPT, DONE, REMOVING, REMOVED, DROPPED };
struct torn_msg {
	uint64_t seed, loc, len;
	uint32_t kind;
};
static int g_msg_fd = -1;

static void torn_send(uint32_t kind, uint64_t seed, uint64_t loc, uint64_t len)
{
	struct torn_msg m = {seed, loc, len, kind};
	if (write(g_msg_fd, &m, sizeof(m)) != sizeof(m))
		_exit(4);
}

static void torn_on_drop(void *arg, const struct kvt_tier_id *id, uint64_t loc)
{
	(void)arg;
	torn_send(DROPPED, id->key.w[0], loc, 0);
}

/* Writes records of seeds first.. (and removes every ninth just written) until the injector
 * tears a write and ends the process. */
static _Noreturn void torn_child(struct nvt *n, struct kvt__nvme_fault *f, uint64_t first)
{
	n->hooks.fault = f;
	n->env.dropped = torn_on_drop;
	f->armed = true;
	if (nvt_open(n))
		_exit(2);
	if (f->tear_period) { /* aim at region headers: the geometry is known once open */
		f->tear_base = ((struct kvt_nvme *)n->t)->data_off;
		f->tear_period = ((struct kvt_nvme *)n->t)->region_bytes;
	}
	for (uint64_t seed = first;; seed++) {
		size_t len = nvt_len(seed, 1000, 900 << 10);
		uint64_t loc;
		torn_send(ATTEMPT, seed, 0, len);
		if (nvt_put(n, seed, len, &loc))
			_exit(3);
		torn_send(DONE, seed, loc, len);
		if (seed % 9 == 0) {
			struct kvt_tier_id id = nvt_id(seed);
			torn_send(REMOVING, seed, loc, len);
			if (kvt_tier_nvme.remove(n->t, &id, loc))
				_exit(3);
			torn_send(REMOVED, seed, loc, len);
		}
	}
}

#define TORN_ROUNDS 36
#define TORN_MAX    (TORN_ROUNDS * 4096)

struct torn_state {
	uint8_t state[TORN_MAX]; /* by seed: 0 never written (or gone), 1 done, 2 removed */
	uint8_t seen[TORN_MAX];  /* found by this round's reopen */
	uint64_t loc[TORN_MAX], len[TORN_MAX], dropped_at[TORN_MAX]; /* dropped_at: loc + 1 */
	uint64_t attempted, removing; /* the last write and remove started */
	size_t back_unopened;
	struct nvt *nv;
};

static int torn_visit(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	struct torn_state *t = arg;
	uint64_t seed = h->key.w[0];
	assert_true(seed < TORN_MAX);
	t->seen[seed] = 1;
	assert_int_equal(nvt_check(t->nv, seed, h->payload_bytes, loc),
	                 0); /* whole, or not at all */
	if (t->state[seed] == 2)
		fail_msg("record %llu was removed, and came back", (unsigned long long)seed);
	if (t->dropped_at[seed]) {
		/* dropped by a reclaim whose region header never landed: the region is as it was */
		if (t->dropped_at[seed] - 1 != loc)
			fail_msg(
			    "record %llu was dropped at %llx and came back at %llx, under a region "
			    "header written since",
			    (unsigned long long)seed, (unsigned long long)t->dropped_at[seed] - 1,
			    (unsigned long long)loc);
		t->back_unopened++;
		return 0;
	}
	if (t->state[seed] != 1 && seed != t->attempted)
		fail_msg("record %llu was never written", (unsigned long long)seed);
	if (t->state[seed] != 1) /* the write in flight landed whole: live from now on */
		t->state[seed] = 1, t->loc[seed] = loc, t->len[seed] = h->payload_bytes;
	return 0;
}

static void test_nvme_crash_torn_writes(void **state)
{
	struct nvt n;
	static struct torn_state t;
	memset(&t, 0, sizeof(t));
	t.nv = &n;
	nvt_init(&n, "16MiB", "8"); /* 2 MiB regions: region headers are written often */
	size_t torn_found = 0;
	uint64_t from_summaries = 0;
	for (uint64_t round = 0; round < TORN_ROUNDS; round++) {
		int p[2];
		assert_int_equal(pipe(p), 0);
		/* a third of the rounds tear any write; a third a single-block one (a record's
		 * header or terminator, a tombstone, a superblock, a region's header or zero
		 * block, a summary's trailer or live map); a third the write of a region's header
		 * (or its zero block), 1st to 4th */
		unsigned mode = round % 3;
		struct kvt__nvme_fault f = {.tear_at = mode == 0   ? 5 + (round * 7919) % 120
		                                       : mode == 1 ? 1 + (round * 31) % 40
		                                                   : 1 + round / 3 % 4,
		                            .tear_len = mode == 1 ? 4096 : 0,
		                            .tear_period =
		                                mode == 2, /* set to the region size once open */
		                            .seed = round + 1};
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			g_msg_fd = p[1];
			torn_child(&n, &f, 1 + round * 4096);
		}
		close(p[1]);
		struct torn_msg m;
		while (read(p[0], &m, sizeof(m)) == sizeof(m)) {
			assert_true(m.seed < TORN_MAX);
			if (m.kind == ATTEMPT)
				t.attempted = m.seed;
			else if (m.kind == DONE)
				t.state[m.seed] = 1, t.loc[m.seed] = m.loc, t.len[m.seed] = m.len;
			else if (m.kind == REMOVING)
				t.removing = m.seed;
			else if (m.kind == REMOVED)
				t.state[m.seed] = 2;
			else
				t.dropped_at[m.seed] = m.loc + 1;
		}
		close(p[0]);
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), KVT_NVME_TORN_EXIT);

		assert_int_equal(nvt_open(&n), 0);           /* the superblock always opens */
		from_summaries += nvt_xstats(&n).sum_loaded; /* no index: the full regions' */
		size_t back = t.back_unopened;
		assert_int_equal(kvt_tier_nvme.iterate(n.t, torn_visit, &t), 0);
		/* every write reported done, and neither removed nor dropped since, is found (the
		 * one whose remove was in flight may be gone) */
		for (uint64_t s = 1; s < TORN_MAX; s++)
			if (t.state[s] == 1 && !t.dropped_at[s] && s != t.removing) {
				int rc = nvt_check(&n, s, t.len[s], t.loc[s]);
				if (rc)
					fail_msg("round %llu: record %llu (at %llx) is lost: %d",
					         (unsigned long long)round, (unsigned long long)s,
					         (unsigned long long)t.loc[s], rc);
			}
		torn_found += nvt_stats(&n).corruptions;
		if (t.back_unopened > back)
			print_message("round %llu: %zu dropped records back (their region was not "
			              "reopened)\n",
			              (unsigned long long)round, t.back_unopened - back);
		nvt_close(&n);
		/* what the reopen found is what lives: dropped records that came back are live
		 * again (the next round may drop them), the others are gone */
		for (uint64_t s = 1; s < TORN_MAX; s++) {
			if (t.seen[s] && t.dropped_at[s])
				t.state[s] = 1;
			else if (!t.seen[s] && t.state[s] == 1)
				t.state[s] = 0;
			t.dropped_at[s] = 0, t.seen[s] = 0;
		}
	}
	print_message("%d torn writes: %zu torn records found and dropped at the reopen, %zu "
	              "dropped records back from regions never reopened; %llu regions read from "
	              "their summaries\n",
	              TORN_ROUNDS, torn_found, t.back_unopened, (unsigned long long)from_summaries);
	assert_true(from_summaries > TORN_ROUNDS); /* the reopens read summaries */
	nvt_fini(&n);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nvme_crash_kill9),
	    cmocka_unit_test(test_nvme_crash_torn_writes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
