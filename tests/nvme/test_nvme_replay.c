/*
 * test_nvme_replay.c -- the real nvme tier replays the first half of the Mooncake conversation
 * trace (4 KiB records, a block per record: a read where the tier holds it, a write where not),
 * once as a plain FIFO log (nvme.policy = fifo) and once with nvme.policy = clock. Its hit ratios
 * must match kvtier sim's fifo and clock at the same capacity (the policies sim runs for it), and
 * hits must beat the FIFO: the simulator models the tier the daemon runs, and the reinsertion does
 * what it says.
 */
#include "nvme_fixture.h"
#include "sim.h"

#include <math.h>

#define PAY (KVT_TIER_ALIGN - KVT_CHUNK_HDR_BYTES) /* one 4 KiB block a record */

struct replay {
	uint64_t *loc; /* per block: where the tier holds it, 0: not held */
};

static void on_drop(void *arg, const struct kvt_tier_id *id, uint64_t loc)
{
	struct replay *r = arg;
	if (r->loc[id->key.w[0]] == loc)
		r->loc[id->key.w[0]] = 0;
}

static void on_move(void *arg, const struct kvt_tier_id *id, uint64_t from, uint64_t to)
{
	struct replay *r = arg;
	assert_int_equal(r->loc[id->key.w[0]], from);
	r->loc[id->key.w[0]] = to;
}

/* Replays t through a tier of 32 regions of 1 MiB (8,160 records). @return : its hit ratio;
 * *records: its capacity in records; *moved: records it copied forward. */
static double replay_tier(const struct kvt_trace *t, const char *policy, size_t *records,
                          uint64_t *moved)
{
	struct nvt n;
	struct replay r = {calloc(t->n_blocks, sizeof(uint64_t))};
	assert_non_null(r.loc);
	nvt_init(&n, "33MiB", "8");
	n.hooks.region_bytes = 1u << 20;
	n.env.dropped = on_drop, n.env.moved = on_move, n.env.arg = &r;
	assert_int_equal(kvt_opts_set(&n.opts, "nvme.policy", policy), 0);
	assert_int_equal(nvt_open(&n), 0);
	*records = (size_t)(nvt_stats(&n).capacity_bytes / KVT_TIER_ALIGN);
	/* runs of misses are written as one batch, as the daemon streams demotions, and runs of
	 * blocks held are read as one; each run is done before the next starts, so the tier sees
	 * the trace's order */
	enum { RUN = 64 };
	struct kvt_tier_wreq w[RUN];
	struct kvt_tier_rreq rd[RUN];
	uint32_t wb[RUN];
	uint8_t *bufs = aligned_alloc(KVT_TIER_ALIGN, (size_t)2 * RUN * KVT_TIER_ALIGN);
	assert_non_null(bufs);
	uint64_t hits = 0;
	unsigned nw = 0, nr = 0;
	for (size_t i = 0; i <= t->n_acc; i++) {
		bool end = i == t->n_acc;
		uint32_t b = end ? 0 : t->blk[i];
		bool held = !end && r.loc[b];
		if (nr && (end || !held || nr == RUN)) {
			assert_int_equal(kvt_tier_nvme.read_batch(n.t, rd, nr), nr);
			hits += nr;
			nr = 0;
		}
		if (nw && (end || held || nw == RUN)) {
			assert_int_equal(kvt_tier_nvme.write_batch(n.t, w, nw), nw);
			for (unsigned k = 0; k < nw; k++)
				r.loc[wb[k]] = w[k].loc;
			nw = 0;
			held = !end && r.loc[b]; /* the writes may have made room by dropping it */
		}
		if (end)
			break;
		if (held) {
			rd[nr] = (struct kvt_tier_rreq){.id = nvt_id(b),
			                                .loc = r.loc[b],
			                                .buf = bufs +
			                                       (size_t)(RUN + nr) * KVT_TIER_ALIGN,
			                                .buf_len = KVT_TIER_ALIGN};
			nr++;
			continue;
		}
		size_t bl;
		uint8_t *one = nvt_record(b, PAY, &bl);
		memcpy(bufs + (size_t)nw * KVT_TIER_ALIGN, one, KVT_TIER_ALIGN);
		free(one);
		w[nw] = (struct kvt_tier_wreq){.buf = bufs + (size_t)nw * KVT_TIER_ALIGN,
		                               .rec_len = KVT_TIER_ALIGN,
		                               .buf_len = bl};
		wb[nw++] = b;
	}
	*moved = nvt_xstats(&n).moved;
	free(bufs);
	free(r.loc);
	nvt_fini(&n);
	return (double)hits / (double)t->n_acc;
}

static double replay_sim(const struct kvt_trace *t, const char *policy, size_t capacity)
{
	struct kvt_sim_tier tier = {.name = "nvme", .policy = policy, .capacity_blocks = capacity};
	struct kvt_sim_result res;
	assert_int_equal(kvt_sim_run(t, &tier, 1, &res), 0);
	return (double)res.hits / (double)res.accesses;
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
	double none = replay_tier(&t, "fifo", &cap_none, &moved_none);
	double hits = replay_tier(&t, "clock", &cap_hits, &moved_hits);
	double fifo = replay_sim(&t, "fifo", cap_none), clock = replay_sim(&t, "clock", cap_hits);
	print_message("%zu records: tier none %.4f, sim fifo %.4f; tier hits %.4f (%llu moved), "
	              "sim clock %.4f\n",
	              cap_none, none, fifo, hits, (unsigned long long)moved_hits, clock);
	assert_int_equal(moved_none, 0);
	assert_true(fabs(none - fifo) < 0.01);
	assert_true(fabs(hits - clock) < 0.01);
	assert_true(hits > none + 0.005);
	t.n_acc = full;
	kvt_trace_free(&t);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nvme_replay_matches_sim),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
