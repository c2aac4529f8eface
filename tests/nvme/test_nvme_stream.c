/*
 * test_nvme_stream.c -- write_stream (tier.h): records that arrive while earlier ones are in
 * flight join the running batch. A source hands out records only every third pull (as demotions
 * trickle in behind puts), on a tier of small regions so that the stream crosses regions and
 * reclaims while records are in flight. Checked: every record is reported exactly once, after
 * its result is final; some records joined a run in flight; every record reported written reads
 * back byte for byte (or was dropped by FIFO reclaim, reported); the same under the fault
 * injector with its counters equal to the injections; and after a reopen the walk finds exactly
 * what the tier says it holds.
 */
#include "nvme_fixture.h"

#include <unistd.h>

#define N_RECS 600

struct src {
	struct nvt *n;
	struct kvt_tier_wreq w[N_RECS];
	uint8_t *buf[N_RECS];
	uint64_t seed[N_RECS];
	size_t len[N_RECS];
	unsigned done[N_RECS];
	size_t next, pulls, joined, reported;
};

static struct kvt_tier_wreq *pull(void *arg)
{
	struct src *s = arg;
	if (s->next == N_RECS || ++s->pulls % 3)
		return NULL;
	if (nvt_stats(s->n).queue_depth) /* the tier has I/O in flight: this one joins it */
		s->joined++;
	size_t i = s->next++;
	s->w[i] = (struct kvt_tier_wreq){
	    .buf = s->buf[i],
	    .rec_len = KVT_CHUNK_HDR_BYTES + s->len[i],
	    .buf_len = KVT_ALIGN_UP(KVT_CHUNK_HDR_BYTES + s->len[i], (size_t)KVT_TIER_ALIGN),
	    .res = 12345};
	return &s->w[i];
}

static void done(void *arg, struct kvt_tier_wreq *q)
{
	struct src *s = arg;
	size_t i = (size_t)(q - s->w);
	assert_true(i < s->next);
	assert_int_not_equal(q->res, 12345); /* final before it is reported */
	s->done[i]++;
	s->reported++;
}

static void stream_all(struct nvt *n, struct src *s, uint64_t first_seed)
{
	memset(s, 0, sizeof(*s));
	s->n = n;
	size_t bl;
	for (size_t i = 0; i < N_RECS; i++) {
		s->seed[i] = first_seed + i;
		s->len[i] = nvt_len(s->seed[i], 100, 700 << 10);
		s->buf[i] = nvt_record(s->seed[i], s->len[i], &bl);
	}
	const struct kvt_tier_wsource ws = {pull, done, s};
	size_t ok = 0;
	while (s->next < N_RECS) /* a NULL at the end of a run ends the call: call again */
		ok += kvt_tier_nvme.write_stream(n->t, &ws);
	size_t want_ok = 0;
	for (size_t i = 0; i < N_RECS; i++) {
		assert_int_equal(s->done[i], 1); /* exactly once */
		want_ok += !s->w[i].res;
		free(s->buf[i]);
	}
	assert_int_equal(ok, want_ok);
	assert_int_equal(s->reported, N_RECS);
	assert_true(s->joined > 0);
	print_message("%zu records, %zu written, %zu joined a run in flight\n", (size_t)N_RECS, ok,
	              s->joined);
}

/* Every record reported written is intact, or was dropped by reclaim (reported as such). */
static size_t check_written(struct nvt *n, const struct src *s)
{
	size_t found = 0;
	for (size_t i = 0; i < N_RECS; i++) {
		if (s->w[i].res)
			continue;
		int rc = nvt_check(n, s->seed[i], s->len[i], s->w[i].loc);
		if (rc == 0)
			found++;
		else
			assert_true(rc == -ENOENT && nvt_was_dropped(n, s->w[i].loc));
	}
	return found;
}

/* After a reopen the walk finds exactly the records the tier held, each byte for byte: none
 * whose write was reported failed, although the injector fails writes after the real I/O. */
static void reopen_and_walk(struct nvt *n, const struct src *s)
{
	uint64_t chunks = nvt_stats(n).chunks;
	bool *acked = calloc(s->seed[N_RECS - 1] + 1, sizeof(*acked));
	for (size_t i = 0; i < N_RECS; i++)
		acked[s->seed[i]] = !s->w[i].res;
	nvt_close(n);
	assert_int_equal(nvt_open(n), 0);
	struct nvt_walk w = {.nv = n, .acked = acked, .seeds = s->seed[N_RECS - 1] + 1};
	assert_int_equal(kvt_tier_nvme.iterate(n->t, nvt_verify_visit, &w), 0);
	assert_int_equal(w.n, chunks);
	free(acked);
	assert_int_equal(w.n, nvt_stats(n).chunks);
	assert_int_equal(w.bytes, nvt_stats(n).used_bytes);
	assert_int_equal(nvt_stats(n).corruptions, 0);
}

static void test_nvme_stream(void **state)
{
	struct nvt n;
	nvt_init(&n, "40MiB", "8"); /* regions of 4 MiB: the stream changes region in flight */
	assert_int_equal(nvt_open(&n), 0);
	struct src *s = calloc(1, sizeof(*s));
	stream_all(&n, s, 1);
	size_t found = check_written(&n, s);
	assert_true(n.n_dropped > 0);
	assert_int_equal(found, nvt_stats(&n).chunks);
	for (size_t i = 0; i < N_RECS; i++)
		assert_int_equal(s->w[i].res, 0);
	assert_int_equal(nvt_stats(&n).queue_depth, 0);
	reopen_and_walk(&n, s);
	free(s);
	nvt_fini(&n);
}

static void test_nvme_stream_fault(void **state)
{
	struct kvt__nvme_fault f = nvt_fault_1pct(78);
	struct nvt n;
	nvt_init(&n, "48MiB", "8");
	nvt_open_faulty(&n, &f);
	struct src *s = calloc(1, sizeof(*s));
	f.armed = true;
	stream_all(&n, s, 5000);
	f.armed = false;
	size_t failed = 0;
	for (size_t i = 0; i < N_RECS; i++) {
		int res = s->w[i].res;
		assert_true(res == 0 || res == -EIO || res == -EAGAIN || res == -ENOSPC);
		failed += res != 0;
	}
	nvt_assert_write_faults_counted(&n, &f);
	assert_true(failed > 0 && failed < N_RECS / 2);
	assert_int_equal(check_written(&n, s), nvt_stats(&n).chunks);
	reopen_and_walk(&n, s);
	free(s);
	nvt_fini(&n);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nvme_stream),
	    cmocka_unit_test(test_nvme_stream_fault),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
