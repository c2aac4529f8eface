/*
 * test_nvme_quota.c -- nvme.quota on the log: a flood cannot take another tenant below its
 * guarantee (its records are copied forward at reclaim and reported moved), a tenant past its
 * maximum loses its own oldest records, the accounts survive a restart, faults during a copy
 * drop records but never serve a wrong byte, bad quota lists stop the open, and a quota set at
 * run time holds as one set at open.
 */
#include "nvme_fixture.h"

#define PAY   (60u * 1024) /* 64 KiB on disk with the header, padded */
#define REC   (64u * 1024)
#define A     7u           /* the protected tenant */
#define FLOOD (9ull << 48) /* seeds of tenant 9 */
#define N_A   40u          /* 2.5 MiB of tenant A */

static int setup(void **state)
{
	(void)state;
	return 0;
}

/* A 16 MiB tier of 1 MiB regions (15 of them), with the quota list q (NULL: none). */
static void open_q(struct nvt *n, const char *q, int want)
{
	nvt_init(n, "16MiB", "8");
	n->hooks.region_bytes = 1u << 20;
	if (q)
		assert_int_equal(kvt_opts_set(&n->opts, "nvme.quota", q), 0);
	assert_int_equal(nvt_open(n), want);
}

/* Writes seeds lo..hi-1; locs[i - lo] gets each loc (0 when refused). @return : writes ok. */
static unsigned put_range(struct nvt *n, uint64_t lo, uint64_t hi, uint64_t *locs)
{
	unsigned ok = 0;
	for (uint64_t s = lo; s < hi; s++) {
		uint64_t loc = 0;
		int rc = nvt_put(n, s, PAY, &loc);
		assert_true(rc == 0 || rc == -EDQUOT || rc == -EIO || rc == -EAGAIN ||
		            rc == -ENOSPC);
		ok += rc == 0;
		if (locs)
			locs[s - lo] = rc ? 0 : loc;
	}
	return ok;
}

/* Tenant A's records that are still somewhere, each read back byte for byte where its moves
 * took it; the others must have been reported dropped there. @return : how many live. */
static unsigned live_a(struct nvt *n, const uint64_t *locs, unsigned *moved)
{
	unsigned live = 0;
	*moved = 0;
	for (unsigned i = 0; i < N_A; i++) {
		uint64_t at = nvt_follow(n, locs[i]);
		int rc = nvt_check(n, i, PAY, at);
		if (rc == 0) {
			live++;
			*moved += at != locs[i];
			if (at != locs[i]) /* the old place is gone */
				assert_int_equal(nvt_check(n, i, PAY, locs[i]), -ENOENT);
		} else {
			assert_int_equal(rc, -ENOENT);
			assert_true(nvt_was_dropped(n, at));
		}
	}
	return live;
}

/* Records of tenant key t among what iterate() finds (each checked byte for byte). */
struct by_tenant {
	struct nvt *nv;
	uint32_t tenant;
	unsigned n, all;
	uint64_t bytes, lowest_seed;
};

static int count_visit(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	struct by_tenant *b = arg;
	b->all++;
	b->bytes += KVT_ALIGN_UP(KVT_CHUNK_HDR_BYTES + h->payload_bytes, 4096);
	assert_int_equal(nvt_check(b->nv, h->key.w[0], h->payload_bytes, loc), 0);
	if (h->tenant == b->tenant) {
		b->n++;
		b->lowest_seed = KVT_MIN(b->lowest_seed, h->key.w[0]);
	}
	return 0;
}

static struct by_tenant count(struct nvt *n, uint32_t tenant)
{
	struct by_tenant b = {.nv = n, .tenant = tenant, .lowest_seed = UINT64_MAX};
	assert_int_equal(kvt_tier_nvme.iterate(n->t, count_visit, &b), 0);
	assert_int_equal(b.bytes, nvt_stats(n).used_bytes); /* the accounts are exact */
	return b;
}

/* Tenant 9 writes 1,000 records (64 MiB: four trips round the log) over tenant A's 40. */
static void test_nvme_quota_guarantee(void **state)
{
	(void)state;
	uint64_t locs[N_A];
	unsigned moved;
	struct nvt n;

	/* the control: without a quota the flood leaves A nothing */
	open_q(&n, NULL, 0);
	assert_int_equal(put_range(&n, 0, N_A, locs), N_A);
	assert_int_equal(put_range(&n, FLOOD, FLOOD + 1000, NULL), 1000);
	assert_int_equal(live_a(&n, locs, &moved), 0);
	assert_int_equal(nvt_xstats(&n).moved, 0);
	nvt_fini(&n);

	/* A is guaranteed 2 MiB (32 records): it keeps at least that, copied forward */
	open_q(&n, "7=2MiB/16MiB,9=0/16MiB", 0);
	assert_int_equal(put_range(&n, 0, N_A, locs), N_A);
	assert_int_equal(put_range(&n, FLOOD, FLOOD + 1000, NULL), 1000);
	unsigned live = live_a(&n, locs, &moved);
	assert_true(live >= 32 && live <= 33);
	struct kvt__nvme_xstats x = nvt_xstats(&n);
	print_message("guarantee: %u of A live, %u of them moved, %llu moves\n", live, moved,
	              (unsigned long long)x.moved);
	/* A's second and third regions (15 and 10 of their 15 records kept) are passed over
	 * whole, never rewritten; the 7 kept of its first went round with the log, once a trip
	 * (three trips at least) */
	assert_int_equal(live - moved, 25);
	assert_true(x.moved >= 3 * moved);
	assert_int_equal(x.moved, n.n_moves);
	assert_int_equal(x.moved_bytes, x.moved * REC);
	assert_int_equal(x.guarantee_dropped, 0);
	assert_int_equal(count(&n, A).n, live);
	struct kvt_tier_tenant ten[4]; /* the accounts kvtier stats shows */
	assert_int_equal(kvt_tier_nvme.tenant_usage(n.t, ten, 4), 2);
	assert_int_equal(ten[0].tenant, A);
	assert_int_equal(ten[0].used_bytes, live * REC);
	assert_int_equal(ten[0].guaranteed_bytes, 2u << 20);
	assert_int_equal(ten[1].tenant, 9);
	assert_int_equal(ten[1].max_bytes, 16u << 20);

	/* reopened: the moved records are found where they went, the account is rebuilt from
	 * them, and the next flood still cannot take A below its guarantee */
	nvt_close(&n);
	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(count(&n, A).n, live);
	assert_int_equal(put_range(&n, FLOOD + 1000, FLOOD + 1500, NULL), 500);
	assert_true(live_a(&n, locs, &moved) >= 32);
	nvt_fini(&n);
}

/* A maximum: tenant 9 keeps its newest 4 MiB, losing its oldest records as it writes (before
 * the log is even full), and A is untouched; a record above a maximum is refused. */
static void test_nvme_quota_maximum(void **state)
{
	(void)state;
	uint64_t locs[N_A];
	unsigned moved;
	struct nvt n;
	open_q(&n, "9=0/4MiB", 0);
	assert_int_equal(put_range(&n, 0, 10, locs), 10);
	assert_int_equal(put_range(&n, FLOOD, FLOOD + 200, NULL), 200); /* 12.5 MiB < the tier */
	struct by_tenant b = count(&n, 9);
	assert_int_equal(b.n, 64);
	assert_int_equal(b.lowest_seed, FLOOD + 136); /* the newest 64 */
	assert_int_equal(count(&n, A).n, 10);
	assert_int_equal(nvt_xstats(&n).quota_trims, 136);
	assert_int_equal(n.n_dropped, 136); /* each reported */
	for (unsigned i = 0; i < 10; i++)
		assert_int_equal(nvt_check(&n, i, PAY, locs[i]), 0);
	(void)moved;

	/* reopened, the dropped records are found again (they carry no tombstone) and trimmed
	 * again at once; a lowered maximum applies at the open */
	nvt_close(&n);
	assert_int_equal(nvt_open(&n), 0);
	b = count(&n, 9);
	assert_int_equal(b.n, 64);
	assert_int_equal(b.lowest_seed, FLOOD + 136);
	nvt_close(&n);
	assert_int_equal(kvt_opts_set(&n.opts, "nvme.quota", "9=0/2MiB"), 0);
	assert_int_equal(nvt_open(&n), 0);
	b = count(&n, 9);
	assert_int_equal(b.n, 32);
	assert_int_equal(b.lowest_seed, FLOOD + 168);
	assert_int_equal(count(&n, A).n, 10);
	nvt_fini(&n);

	/* the room a maximum leaves goes to the others: a flood of four trips round the log
	 * by the capped tenant (the control in test_nvme_quota_guarantee leaves A nothing)
	 * leaves every one of A's records, copied forward, and the flood its newest 64 */
	open_q(&n, "9=0/4MiB", 0);
	assert_int_equal(put_range(&n, 0, N_A, locs), N_A);
	assert_int_equal(put_range(&n, FLOOD, FLOOD + 1000, NULL), 1000);
	assert_int_equal(live_a(&n, locs, &moved), N_A);
	b = count(&n, 9);
	assert_int_equal(b.n, 64);
	assert_int_equal(b.lowest_seed, FLOOD + 936);
	struct kvt__nvme_xstats x = nvt_xstats(&n);
	print_message("maximum: all %u of A live, %u moved, %llu moves\n", N_A, moved,
	              (unsigned long long)x.moved);
	assert_int_equal(x.guarantee_dropped, 0);
	assert_int_equal(x.moved, n.n_moves);
	nvt_fini(&n);

	/* a maximum for a tenant that does not write leaves the log a FIFO for the others: no
	 * copies, and no walks of the records to decide on regions full of live ones */
	open_q(&n, "9=0/4MiB", 0);
	assert_int_equal(put_range(&n, 0, 1000, NULL), 1000);
	x = nvt_xstats(&n);
	print_message("idle maximum: %llu moves, %llu regions passed over\n",
	              (unsigned long long)x.moved, (unsigned long long)x.passed);
	assert_int_equal(x.moved, 0);
	assert_int_equal(x.keeps_walked, 0);
	nvt_fini(&n);

	/* the same with one record in four removed as it is written: every region is three
	 * quarters live, the live bytes are well under the tier */
	open_q(&n, "9=0/4MiB", 0);
	for (uint64_t s = 0; s < 1000; s++) {
		uint64_t loc;
		assert_int_equal(nvt_put(&n, s, PAY, &loc), 0);
		struct kvt_tier_id id = nvt_id(s);
		if (s % 4 == 0)
			assert_int_equal(kvt_tier_nvme.remove(n.t, &id, loc), 0);
	}
	x = nvt_xstats(&n);
	print_message("idle maximum, removes: %llu moves, %llu regions passed over\n",
	              (unsigned long long)x.moved, (unsigned long long)x.passed);
	assert_int_equal(x.keeps_walked, 0); /* passing over costs no walk of the records */
	nvt_fini(&n);

	/* one record above the tenant's maximum: -EDQUOT, and that is not a full tier */
	open_q(&n, "9=0/32KiB", 0);
	uint64_t loc;
	assert_int_equal(nvt_put(&n, FLOOD, PAY, &loc), -EDQUOT);
	assert_false(nvt_stats(&n).full);
	assert_int_equal(nvt_put(&n, 1, PAY, &loc), 0);
	assert_int_equal(nvt_check(&n, 1, PAY, loc), 0);
	nvt_fini(&n);
}

/* I/O faults while the log copies records forward: a record is moved whole or dropped and
 * reported, never served wrong, and the accounts match what is there. */
static void test_nvme_quota_faults(void **state)
{
	(void)state;
	uint64_t locs[N_A];
	unsigned moved;
	struct nvt n;
	nvt_init(&n, "16MiB", "8");
	n.hooks.region_bytes = 1u << 20;
	assert_int_equal(kvt_opts_set(&n.opts, "nvme.quota", "7=2MiB/16MiB"), 0);
	struct kvt__nvme_fault f = nvt_fault_1pct(42);
	nvt_open_faulty(&n, &f);
	assert_int_equal(put_range(&n, 0, N_A, locs), N_A);
	f.armed = true;
	put_range(&n, FLOOD, FLOOD + 1000, NULL);
	f.armed = false;
	unsigned live = live_a(&n, locs, &moved);
	struct kvt__nvme_xstats x = nvt_xstats(&n);
	assert_true(x.moved > 0);
	assert_true(live >= 8 && live <= 33); /* a fault drops what it hit, not the share */
	print_message("faults: %u of A live, %llu moved, %llu guaranteed dropped, %llu ios\n", live,
	              (unsigned long long)x.moved, (unsigned long long)x.guarantee_dropped,
	              (unsigned long long)f.ios);
	struct by_tenant b = count(&n, A);
	assert_int_equal(b.n, live);
	nvt_fini(&n);
}

/* kill -9 while the log copies records forward: after each of three kills at random moments the
 * reopened tier holds only whole records (each read back byte for byte), its usage is exactly
 * theirs, and A keeps its guarantee but for the records of at most one region being rewritten. */
static void test_nvme_quota_kill9(void **state)
{
	(void)state;
	struct nvt n;
	open_q(&n, "7=2MiB/16MiB", 0);
	nvt_close(&n);
	srand(kvt_test_seed("kill -9 mid-copy"));
	for (int round = 0; round < 3; round++) {
		int ready[2]; /* the child says when A is in and the flood has begun */
		assert_int_equal(pipe(ready), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (!pid) {
			close(ready[0]);
			if (nvt_open(&n))
				_exit(3);
			if (round == 0 && put_range(&n, 0, N_A, NULL) != N_A)
				_exit(4);
			for (uint64_t s = FLOOD + (uint64_t)round * 100000;; s++) {
				put_range(&n, s, s + 1, NULL);
				if (s == FLOOD + (uint64_t)round * 100000 &&
				    write(ready[1], "r", 1) != 1)
					_exit(5);
			}
		}
		close(ready[1]);
		char c;
		assert_int_equal(read(ready[0], &c, 1), 1); /* not timed: a loaded machine waits */
		close(ready[0]);
		usleep(50000 + (useconds_t)((unsigned)rand() % 300000));
		kill(pid, SIGKILL);
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status));
		assert_int_equal(nvt_open(&n), 0);
		struct by_tenant b = count(&n, A); /* every record whole, usage exact */
		print_message("kill -9 round %d: %u records, %u of A\n", round, b.all, b.n);
		assert_true(b.n >= 32 - 15 && b.n <= N_A);
		assert_true(b.all > b.n); /* the flood was under way */
		nvt_close(&n);
	}
	nvt_fini(&n);
}

/* Lists the tier refuses at open, each with a reason in the log. */
static void test_nvme_quota_refused(void **state)
{
	(void)state;
	struct nvt n;
	open_q(&n, "7=9MiB/16MiB", -EINVAL); /* guarantees above half the tier */
	nvt_fini(&n);
	open_q(&n, "7=2MiB/1MiB", -EINVAL); /* guaranteed above maximum */
	nvt_fini(&n);
	open_q(&n, "7=2MiB", -EINVAL); /* not WHO=G/M */
	nvt_fini(&n);
	nvt_init(&n, "16MiB", "8"); /* a user that cannot follow a moved record */
	n.env.moved = NULL;
	assert_int_equal(kvt_opts_set(&n.opts, "nvme.quota", "7=1MiB/2MiB"), 0);
	assert_int_equal(nvt_open(&n), -EINVAL);
	nvt_fini(&n);
}

/* nvme.quota set at run time (quota_set) holds as one set at open: the accounts come from the
 * records the log holds; a list the tier cannot keep changes nothing; none lifts it; a lowered
 * maximum is given back as the tenant writes. */
static void test_nvme_quota_runtime(void **state)
{
	(void)state;
	uint64_t locs[N_A];
	unsigned moved;
	struct nvt n;
	struct kvt_tier_tenant ten[4];
	char err[256];

	open_q(&n, NULL, 0);
	assert_int_equal(put_range(&n, 0, N_A, locs), N_A);
	assert_int_equal(kvt_tier_nvme.tenant_usage(n.t, ten, 4), 0);
	assert_int_equal(kvt_tier_nvme.quota_set(n.t, "7=2MiB/16MiB,9=0/16MiB", err, sizeof(err)),
	                 0);
	assert_int_equal(kvt_tier_nvme.tenant_usage(n.t, ten, 4), 2);
	assert_int_equal(ten[0].tenant, A);
	assert_int_equal(ten[0].used_bytes, N_A * REC);
	assert_int_equal(put_range(&n, FLOOD, FLOOD + 1000, NULL), 1000);
	unsigned live = live_a(&n, locs, &moved);
	assert_true(live >= 32 && live <= 33); /* without the quota: 0 (the control above) */
	assert_int_equal(nvt_xstats(&n).guarantee_dropped, 0);

	/* refused, with a reason, and nothing changed */
	static const char *const bad[] = {"7=9MiB/16MiB", "7=2MiB/1MiB", "7=2MiB"};
	for (size_t i = 0; i < 3; i++) {
		err[0] = 0;
		assert_int_equal(kvt_tier_nvme.quota_set(n.t, bad[i], err, sizeof(err)), -EINVAL);
		assert_true(err[0] != 0);
	}
	assert_int_equal(kvt_tier_nvme.tenant_usage(n.t, ten, 4), 2);
	assert_int_equal(ten[0].used_bytes, live * REC);
	assert_int_equal(ten[0].guaranteed_bytes, 2u << 20);
	assert_int_equal(put_range(&n, FLOOD + 1000, FLOOD + 1300, NULL), 300);
	assert_true(live_a(&n, locs, &moved) >= 32);

	/* tenant 9's maximum lowered to 4 MiB: it holds more, and its next write trims it */
	assert_int_equal(kvt_tier_nvme.quota_set(n.t, "7=2MiB/16MiB,9=0/4MiB", err, sizeof(err)),
	                 0);
	assert_true(count(&n, 9).n * REC > 4u << 20);
	kvt_tier_nvme.tenant_usage(n.t, ten, 4);
	print_message("acct %u %llu %u %llu max %llu\n", ten[0].tenant,
	              (unsigned long long)ten[0].used_bytes, ten[1].tenant,
	              (unsigned long long)ten[1].used_bytes, (unsigned long long)ten[1].max_bytes);
	assert_int_equal(put_range(&n, FLOOD + 1300, FLOOD + 1301, NULL), 1);
	assert_true(count(&n, 9).n * REC <= 4u << 20);
	assert_true(count(&n, 9).n * REC > (4u << 20) - REC);
	assert_true(live_a(&n, locs, &moved) >= 32);

	/* off: the next flood takes everything of A's */
	assert_int_equal(kvt_tier_nvme.quota_set(n.t, "none", err, sizeof(err)), 0);
	assert_int_equal(kvt_tier_nvme.tenant_usage(n.t, ten, 4), 0);
	assert_int_equal(put_range(&n, FLOOD + 2000, FLOOD + 2500, NULL), 500);
	assert_int_equal(live_a(&n, locs, &moved), 0);
	nvt_fini(&n);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_nvme_quota_guarantee, setup),
	    cmocka_unit_test_setup(test_nvme_quota_maximum, setup),
	    cmocka_unit_test_setup(test_nvme_quota_faults, setup),
	    cmocka_unit_test_setup(test_nvme_quota_kill9, setup),
	    cmocka_unit_test_setup(test_nvme_quota_refused, setup),
	    cmocka_unit_test_setup(test_nvme_quota_runtime, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
