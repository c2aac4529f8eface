/*
 * test_nvme_replay.c -- the real nvme tier replays the first half of the Mooncake conversation
 * trace (4 KiB records, a block per record: a read where the tier holds it, a write where not),
 * once as a plain FIFO log (nvme.policy = fifo) and once with nvme.policy = clock. Its hit ratios
 * must match kvtier sim's fifo and clock at the same capacity (the policies sim runs for it) to
 * 0.01, and to the hit where the simulator replays the log's regions (region_blocks), and hits
 * must beat the FIFO: the simulator models the tier the daemon runs, and the reinsertion does
 * what it says. The same for nvme.quota on a synthetic two-tenant trace: a guarantee and a
 * maximum through the real tier beside kvtier sim's quota.
 *
 * Misses are streamed (write_stream) and each record's place is taken as its write lands, as
 * the daemon does: a reclaim may move or drop a record written earlier in the same stream.
 */
#include "nvme_fixture.h"
#include "sim.h"

#include <math.h>

#define PAY (KVT_TIER_ALIGN - KVT_CHUNK_HDR_BYTES) /* one 4 KiB block a record */

enum { RUN = 64 };

struct replay {
	uint64_t *loc; /* per block: where the tier holds it, 0: not held */
	/* the run of misses being written, streamed as the daemon streams demotions */
	struct kvt_tier_wreq w[RUN];
	uint32_t wb[RUN];
	unsigned nw, pulled;
};

static struct kvt_tier_wreq *pull(void *arg)
{
	struct replay *r = arg;
	return r->pulled < r->nw ? &r->w[r->pulled++] : NULL;
}

/* A record's place is known as each write lands, before the next run is placed (and perhaps
 * reclaims it), as the daemon learns it. */
static void done(void *arg, struct kvt_tier_wreq *q)
{
	struct replay *r = arg;
	assert_int_equal(q->res, 0);
	r->loc[r->wb[q - r->w]] = q->loc;
}

static void on_drop(void *arg, const struct kvt_tier_id *id, uint64_t loc)
{
	struct replay *r = arg;
	uint32_t b = (uint32_t)id->key.w[0]; /* seed_of's block */
	if (r->loc[b] == loc)
		r->loc[b] = 0;
}

static void on_move(void *arg, const struct kvt_tier_id *id, uint64_t from, uint64_t to)
{
	struct replay *r = arg;
	uint32_t b = (uint32_t)id->key.w[0];
	assert_int_equal(r->loc[b], from);
	r->loc[b] = to;
}

/* Block b of a request of trace tenant tn, as a record seed: tenant tn's (nvt_id), 7 for 0. */
static uint64_t seed_of(uint32_t b, uint32_t tn)
{
	return (uint64_t)b | (uint64_t)tn << 48;
}

/* Replays t through a tier of 32 regions of 1 MiB (8,160 records) with nvme.policy and
 * nvme.quota (NULL: none). @return : its hit ratio; *records: its capacity in records; *moved:
 * records it copied forward; hits1 (may be NULL): hits and accesses of trace tenant 1. */
static double replay_tier(const struct kvt_trace *t, const char *policy, const char *quota,
                          size_t *records, uint64_t *moved, uint64_t hits1[2])
{
	struct nvt n;
	struct replay r = {.loc = calloc(t->n_blocks, sizeof(uint64_t))};
	assert_non_null(r.loc);
	nvt_init(&n, "33MiB", "8");
	n.hooks.region_bytes = 1u << 20;
	n.env.dropped = on_drop, n.env.moved = on_move, n.env.arg = &r;
	assert_int_equal(kvt_opts_set(&n.opts, "nvme.policy", policy), 0);
	if (quota)
		assert_int_equal(kvt_opts_set(&n.opts, "nvme.quota", quota), 0);
	assert_int_equal(nvt_open(&n), 0);
	*records = (size_t)(nvt_stats(&n).capacity_bytes / KVT_TIER_ALIGN);
	/* runs of misses are streamed, and runs of blocks held are read as one batch; each run is
	 * done before the next starts, so the tier sees the trace's order */
	struct kvt_tier_rreq rd[RUN];
	struct kvt_tier_wsource src = {.pull = pull, .done = done, .arg = &r};
	uint8_t *bufs = aligned_alloc(KVT_TIER_ALIGN, (size_t)2 * RUN * KVT_TIER_ALIGN);
	assert_non_null(bufs);
	uint64_t hits = 0, one_hits = 0, one_acc = 0;
	unsigned nr = 0;
	size_t req = 0;
	for (size_t i = 0; i <= t->n_acc; i++) {
		bool end = i == t->n_acc;
		uint32_t b = end ? 0 : t->blk[i];
		while (!end && t->req_off[req + 1] <= i)
			req++;
		uint32_t tn = end ? 0 : t->tenant[req];
		bool held = !end && r.loc[b];
		if (nr && (end || !held || nr == RUN)) {
			assert_int_equal(kvt_tier_nvme.read_batch(n.t, rd, nr), nr);
			hits += nr;
			nr = 0;
		}
		bool pending = false; /* a block read again before its write: write first */
		for (unsigned k = 0; k < r.nw && !end; k++)
			pending = pending || r.wb[k] == b;
		if (r.nw && (end || held || pending || r.nw == RUN)) {
			assert_int_equal(kvt_tier_nvme.write_stream(n.t, &src), r.nw);
			r.nw = r.pulled = 0;
			held = !end && r.loc[b]; /* the writes may have made room by dropping it */
		}
		if (end)
			break;
		one_acc += tn == 1;
		if (held) {
			one_hits += tn == 1;
			rd[nr] = (struct kvt_tier_rreq){.id = nvt_id(seed_of(b, tn)),
			                                .loc = r.loc[b],
			                                .buf = bufs +
			                                       (size_t)(RUN + nr) * KVT_TIER_ALIGN,
			                                .buf_len = KVT_TIER_ALIGN};
			nr++;
			continue;
		}
		size_t bl;
		uint8_t *one = nvt_record(seed_of(b, tn), PAY, &bl);
		memcpy(bufs + (size_t)r.nw * KVT_TIER_ALIGN, one, KVT_TIER_ALIGN);
		free(one);
		r.w[r.nw] = (struct kvt_tier_wreq){.buf = bufs + (size_t)r.nw * KVT_TIER_ALIGN,
		                                   .rec_len = KVT_TIER_ALIGN,
		                                   .buf_len = bl};
		r.wb[r.nw++] = b;
	}
	*moved = nvt_xstats(&n).moved;
	if (hits1)
		hits1[0] = one_hits, hits1[1] = one_acc;
	free(bufs);
	free(r.loc);
	nvt_fini(&n);
	return (double)hits / (double)t->n_acc;
}

/* kvtier sim at the same capacity, a record at a time (per 0) or as the log's regions of per
 * records, with quota q (NULL: none). @return : its hit ratio; hits1
 * (may be NULL): hits and accesses of trace tenant 1. */
static double replay_sim_log(const struct kvt_trace *t, const char *policy, size_t capacity,
                             size_t per, const struct kvt_sim_quota *q, uint64_t hits1[2])
{
	struct kvt_sim_tier tier = {.name = "nvme",
	                            .policy = policy,
	                            .capacity_blocks = capacity,
	                            .region_blocks = per,
	                            .log_rec_bytes = per ? KVT_TIER_ALIGN : 0,
	                            .log_region_bytes = per ? 1u << 20 : 0,
	                            .quotas = q,
	                            .n_quotas = q != NULL};
	struct kvt_sim_result res;
	assert_int_equal(kvt_sim_run(t, &tier, 1, &res), 0);
	for (size_t i = 0; hits1 && i < res.n_tenants; i++)
		if (res.tenants[i].tenant == 1)
			hits1[0] = res.tenants[i].hits, hits1[1] = res.tenants[i].accesses;
	return (double)res.hits / (double)res.accesses;
}

static double replay_sim(const struct kvt_trace *t, const char *policy, size_t capacity,
                         const struct kvt_sim_quota *q, uint64_t hits1[2])
{
	return replay_sim_log(t, policy, capacity, 0, q, hits1);
}

static void test_nvme_replay_matches_sim(void **state)
{
	(void)state;
	char path[1024];
	const char *p =
	    kvt_test_shared("traces/mooncake/conversation_trace.jsonl", path, sizeof(path));
	kvt_test_require_shared(p, "the Mooncake conversation trace");
	struct kvt_trace t;
	assert_int_equal(kvt_trace_load(p, &t), 0);
	size_t full = t.n_acc;
	t.n_req /= 2; /* its first half (144,000 accesses) keeps the test short */
	t.n_acc = (size_t)t.req_off[t.n_req];
	size_t cap_none, cap_hits;
	uint64_t moved_none, moved_hits;
	double none = replay_tier(&t, "fifo", NULL, &cap_none, &moved_none, NULL);
	double hits = replay_tier(&t, "clock", NULL, &cap_hits, &moved_hits, NULL);
	double fifo = replay_sim(&t, "fifo", cap_none, NULL, NULL);
	double clock = replay_sim(&t, "clock", cap_hits, NULL, NULL);
	size_t per = kvt_nvme_region_records(1u << 20, KVT_TIER_ALIGN);
	double fifo_log = replay_sim_log(&t, "fifo", 32 * per, per, NULL, NULL);
	double clock_log = replay_sim_log(&t, "clock", 32 * per, per, NULL, NULL);
	print_message("%zu records: tier none %.4f, sim fifo %.4f; tier hits %.4f (%llu moved), "
	              "sim clock %.4f; as the log's 32 regions of %zu: fifo %.4f, clock %.4f\n",
	              cap_none, none, fifo, hits, (unsigned long long)moved_hits, clock, per,
	              fifo_log, clock_log);
	assert_int_equal(moved_none, 0);
	assert_true(fabs(none - fifo) < 0.01);
	assert_true(fabs(hits - clock) < 0.01);
	/* as the log (kvt_sim_tier region_blocks: tools/sim/nvmelog.c), to the hit */
	assert_true(none == fifo_log && hits == clock_log);
	assert_true(hits > none + 0.005);
	t.n_acc = full;
	kvt_trace_free(&t);
}

/* Tenant 1's hit ratio in a replay of t through the real tier (nvme.quota q), through kvtier sim
 * (quota sq) at its capacity a record at a time, and through kvtier sim replaying the log's 32
 * regions; both overall ratios to within 0.01 of each other. */
static void quota_pair(const struct kvt_trace *t, const char *q, const struct kvt_sim_quota *sq,
                       double *tier, double *sim, double *log, uint64_t *moved)
{
	size_t cap;
	uint64_t h_tier[2] = {0}, h_sim[2] = {0}; /* both set by the replays; zero if not */
	double all_tier = replay_tier(t, "fifo", q, &cap, moved, h_tier);
	double all_sim = replay_sim(t, "fifo", cap, sq, h_sim);
	*tier = (double)h_tier[0] / (double)h_tier[1];
	*sim = (double)h_sim[0] / (double)h_sim[1];
	uint64_t h_log[2] = {0};
	size_t per = kvt_nvme_region_records(1u << 20, KVT_TIER_ALIGN);
	double all_log = replay_sim_log(t, "fifo", 32 * per, per, sq, h_log);
	*log = (double)h_log[0] / (double)h_log[1];
	print_message("nvme.quota=%s: tier %.4f (tenant 1 %.4f, %llu moved), sim %.4f (tenant 1 "
	              "%.4f), as the log %.4f (tenant 1 %.4f)\n",
	              q ? q : "none", all_tier, *tier, (unsigned long long)*moved, all_sim, *sim,
	              all_log, *log);
}

/*
 * The synthetic two-tenant trace (tenant 1 reads a Zipf set, tenant 2 floods one-off blocks),
 * its first fifth, through the 32 MiB log: with nvme.quota guaranteeing tenant 1 12 MiB (the
 * real tier copies its records forward at reclaim), and holding tenant 2 to 8 MiB (the real tier
 * trims its oldest after a write, and reclaim keeps the others' records in the room that
 * leaves). kvtier sim models both as a FIFO whose quota filters the victims; tenant 1's hit
 * ratio must agree to 0.01 with the guarantee (to 0.1 with the maximum), and each quota must
 * raise it. Replaying the log's regions with nvme.quota's rules (tools/sim/nvmelog.c) it agrees
 * to 0.003 with both.
 */
static void test_nvme_replay_quota_matches_sim(void **state)
{
	(void)state;
	struct kvt_trace t;
	assert_int_equal(kvt_sim_synth("tenants", 1, &t), 0);
	size_t full_req = t.n_req, full = t.n_acc;
	t.n_req = 60000, t.n_acc = (size_t)t.req_off[t.n_req];
	const size_t mib = (1u << 20) / KVT_TIER_ALIGN; /* records a MiB */
	struct kvt_sim_quota keep = {1, 12 * mib, SIZE_MAX}, cap = {2, 0, 8 * mib};
	double none_t, none_s, none_l, keep_t, keep_s, keep_l, cap_t, cap_s, cap_l;
	uint64_t moved_none, moved_keep, moved_cap;
	quota_pair(&t, NULL, NULL, &none_t, &none_s, &none_l, &moved_none);
	quota_pair(&t, "1=12MiB/1TiB", &keep, &keep_t, &keep_s, &keep_l, &moved_keep);
	quota_pair(&t, "2=0/8MiB", &cap, &cap_t, &cap_s, &cap_l, &moved_cap);
	assert_true(fabs(none_t - none_s) < 0.01);
	assert_true(fabs(keep_t - keep_s) < 0.01);
	/* replayed as the log (region_blocks, nvmelog.c), quotas and all: tenant 1 within 0.003
	 * (a run's writes are placed before the trims of its earlier records land) */
	assert_true(none_t == none_l);
	assert_true(fabs(keep_t - keep_l) < 0.003 && fabs(cap_t - cap_l) < 0.003);
	/* the room a maximum frees is kept for the others, but a region more than half live is
	 * passed over rather than rewritten, and the trimmed bytes in it wait a trip round the
	 * log: the reader gets less than sim's victim filter gives it (0.61 against 0.69) */
	assert_true(cap_t > cap_s - 0.1 && cap_t < cap_s + 0.01);
	assert_true(keep_t > none_t + 0.05 && cap_t > none_t + 0.1);
	assert_true(moved_keep > 0 && moved_cap > 0);
	assert_int_equal(moved_none, 0);
	t.n_req = full_req, t.n_acc = full;
	kvt_trace_free(&t);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    /* first: it needs no shared data, and the other skips the program without it */
	    cmocka_unit_test(test_nvme_replay_quota_matches_sim),
	    cmocka_unit_test(test_nvme_replay_matches_sim),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
