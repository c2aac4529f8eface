/*
 * test_nvme_stream.c -- write_stream (tier.h): records that arrive while earlier ones are in
 * flight join the running batch. A source hands out records only every third pull (as demotions
 * trickle in behind puts), on a tier of small regions so that the stream crosses regions and
 * reclaims while records are in flight. Checked: every record is reported exactly once, after
 * its result is final; some records joined a run in flight; every record reported written reads
 * back byte for byte (or was dropped by FIFO reclaim, reported); the same under the fault
 * injector with its counters equal to the injections; and after a reopen the walk finds exactly
 * what the tier says it holds.
 * Every record's buffer is scribbled as soon as it is reported, as kvtierd may reuse it.
 * Reads riding a stream (pull_read): each is reported once, before the stream returns, with
 * every byte right or as a miss of a record the tier reported dropped; they start while writes
 * are in flight; beside writes 400 ms slow (the injector) a read ends in milliseconds where,
 * behind the stream, it waits for the writes (both measured here); and a damaged record read
 * beside writes is -EBADMSG, counted, and dropped for good (its tombstone written after the
 * run).
 */
#include "nvme_fixture.h"

#include <time.h>
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
	bool eager; /* a record at every pull */
	uint64_t pulled_ns[N_RECS];
	uint64_t soonest_ns; /* the shortest time from a pull to its report */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct kvt_tier_wreq *pull(void *arg)
{
	struct src *s = arg;
	if (s->next == N_RECS || (++s->pulls % 3 && !s->eager))
		return NULL;
	if (nvt_stats(s->n).queue_depth) /* the tier has I/O in flight: this one joins it */
		s->joined++;
	size_t i = s->next++;
	s->pulled_ns[i] = mono_ns();
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
	uint64_t took = mono_ns() - s->pulled_ns[i];
	if (!s->soonest_ns || took < s->soonest_ns)
		s->soonest_ns = took;
	/* the caller may reuse the buffer at once (kvtierd's host pool): a record reported before
	 * its write landed reads back wrong */
	memset(s->buf[i], 0x5a, q->buf_len);
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
	const struct kvt_tier_wsource ws = {.pull = pull, .done = done, .arg = s};
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

/* ---- reads riding a stream ---- */

#define N_READS 40

struct rsrc {
	struct src w; /* the writes, as above */
	struct nvt *n;
	struct kvt_tier_rreq r[N_READS];
	uint8_t *buf[N_READS];
	uint64_t seed[N_READS], loc[N_READS];
	size_t len[N_READS];
	unsigned done[N_READS];
	size_t next, until, calls, beside; /* reads handed out: [next, until) */
	uint64_t t0_ns, done_ns[N_READS];
	size_t every;            /* a read every this many calls */
	bool after_writes_start; /* none before the tier has a write in flight */
};

static struct kvt_tier_rreq *pull_read(void *arg)
{
	struct rsrc *s = arg;
	if (s->next == s->until || ++s->calls % s->every)
		return NULL;
	if (s->after_writes_start && !nvt_stats(s->n).queue_depth)
		return NULL;
	size_t i = s->next++;
	s->r[i] = (struct kvt_tier_rreq){
	    .id = nvt_id(s->seed[i]),
	    .loc = s->loc[i],
	    .buf = s->buf[i],
	    .buf_len = KVT_ALIGN_UP(KVT_CHUNK_HDR_BYTES + s->len[i], (size_t)KVT_TIER_ALIGN),
	    .res = 12345};
	return &s->r[i];
}

static void read_done(void *arg, struct kvt_tier_rreq *q)
{
	struct rsrc *s = arg;
	size_t i = (size_t)(q - s->r);
	assert_true(i < s->next);
	assert_int_not_equal(q->res, 12345);
	s->done[i]++;
	s->done_ns[i] = mono_ns() - s->t0_ns;
	s->beside += s->w.reported < s->w.next; /* writes it was pulled with still going */
}

/* The write source's callbacks, with the read source around it. */
static struct kvt_tier_wreq *pull_w(void *arg)
{
	return pull(&((struct rsrc *)arg)->w);
}

static void done_w(void *arg, struct kvt_tier_wreq *q)
{
	done(&((struct rsrc *)arg)->w, q);
}

/* N_READS records of the given payload range written before the stream (seeds from 90000). */
static void reads_prepare(struct nvt *n, struct rsrc *s, size_t lo, size_t hi)
{
	s->n = n;
	for (size_t i = 0; i < N_READS; i++) {
		s->seed[i] = 90000 + i;
		s->len[i] = nvt_len(s->seed[i], lo, hi);
		assert_int_equal(nvt_put(n, s->seed[i], s->len[i], &s->loc[i]), 0);
		size_t bl;
		free(nvt_record(s->seed[i], s->len[i], &bl));
		s->buf[i] = aligned_alloc(KVT_TIER_ALIGN, bl);
		assert_non_null(s->buf[i]);
	}
}

/* Read i: every byte right, or (want_ok false) a miss of a record the tier dropped. */
static bool read_right(struct nvt *n, const struct rsrc *s, size_t i)
{
	if (s->r[i].res == -ENOENT) {
		assert_true(nvt_was_dropped(n, s->loc[i]));
		return false;
	}
	size_t bl;
	uint8_t *want = nvt_record(s->seed[i], s->len[i], &bl);
	assert_int_equal(s->r[i].res, KVT_CHUNK_HDR_BYTES + s->len[i]);
	assert_memory_equal(s->buf[i], want, (size_t)s->r[i].res);
	free(want);
	return true;
}

static void reads_free(struct rsrc *s)
{
	for (size_t i = 0; i < N_READS; i++)
		free(s->buf[i]);
}

/* The writes of stream_all, for a source with reads beside: N_RECS records from seed first,
 * payloads in [lo, hi) (lo bytes each when hi is 0), the first skip of them taken already. */
static void writes_prepare(struct nvt *n, struct src *w, uint64_t first, size_t lo, size_t hi,
                           size_t skip)
{
	memset(w, 0, sizeof(*w));
	w->n = n;
	size_t bl;
	for (size_t i = 0; i < N_RECS; i++) {
		w->seed[i] = first + i;
		w->len[i] = hi ? nvt_len(w->seed[i], lo, hi) : lo;
		w->buf[i] = nvt_record(w->seed[i], w->len[i], &bl);
	}
	w->next = skip;
}

static void writes_free(struct src *w)
{
	for (size_t i = 0; i < N_RECS; i++)
		free(w->buf[i]);
}

static const struct kvt_tier_wsource riding = {
    .pull = pull_w, .done = done_w, .pull_read = pull_read, .read_done = read_done};

static void test_nvme_stream_reads(void **state)
{
	struct nvt n;
	nvt_init(&n, "40MiB", "8");
	assert_int_equal(nvt_open(&n), 0);
	struct rsrc *s = calloc(1, sizeof(*s));
	reads_prepare(&n, s, 1000, 300 << 10);
	s->every = 4, s->until = N_READS;
	struct kvt_tier_wsource ws = riding;
	ws.arg = s;
	writes_prepare(&n, &s->w, 1, 100, 700 << 10, 0);
	uint64_t rode0 = nvt_xstats(&n).stream_reads;
	while (s->w.next < N_RECS)
		kvt_tier_nvme.write_stream(n.t, &ws);
	size_t found = 0;
	for (size_t i = 0; i < N_READS; i++) {
		assert_int_equal(s->done[i], 1); /* every read taken is reported, once */
		found += read_right(&n, s, i);
	}
	for (size_t i = 0; i < N_RECS; i++)
		assert_int_equal(s->w.done[i], 1);
	writes_free(&s->w);
	uint64_t rode = nvt_xstats(&n).stream_reads - rode0;
	print_message("%d reads beside %d writes: %zu found, %zu ended with writes in flight, "
	              "%llu rode a run\n",
	              N_READS, N_RECS, found, s->beside, (unsigned long long)rode);
	assert_int_equal(s->next, N_READS);
	assert_true(found > N_READS / 2);
	assert_true(s->beside > 0);
	assert_true(rode > 0 && rode <= N_READS);
	assert_int_equal(check_written(&n, &s->w), nvt_stats(&n).chunks);
	assert_int_equal(nvt_stats(&n).corruptions, 0);
	assert_int_equal(nvt_stats(&n).queue_depth, 0);
	reads_free(s);
	free(s);
	nvt_fini(&n);
}

/* Reads interleaved with writes do not make a write reported before it landed (record k's
 * jobs are not at k * 3 once reads sit between them): with every write 10 ms slow, no record
 * is reported sooner than 10 ms after it was pulled. */
static void test_nvme_stream_reads_report_writes_landed(void **state)
{
	struct kvt__nvme_fault f = {.write_delay_us = 10000, .seed = 5};
	struct nvt n;
	nvt_init(&n, "64MiB", "8");
	nvt_open_faulty(&n, &f);
	struct rsrc *s = calloc(1, sizeof(*s));
	reads_prepare(&n, s, 1000, 100 << 10);
	s->every = 2, s->until = N_READS;
	struct kvt_tier_wsource ws = riding;
	ws.arg = s;
	writes_prepare(&n, &s->w, 1, 100, 200 << 10, N_RECS - 120);
	f.armed = true;
	while (s->w.next < N_RECS)
		kvt_tier_nvme.write_stream(n.t, &ws);
	f.armed = false;
	print_message("%zu reads beside 120 writes 10 ms slow: the soonest report %.1f ms after "
	              "its pull\n",
	              s->next, (double)s->w.soonest_ns / 1e6);
	assert_true(s->next > 0);
	assert_true(s->w.soonest_ns >= 10000000ull);
	for (size_t i = 0; i < s->next; i++)
		assert_true(read_right(&n, s, i));
	for (size_t i = N_RECS - 120; i < N_RECS; i++) {
		assert_int_equal(s->w.done[i], 1);
		assert_int_equal(s->w.w[i].res, 0);
		assert_int_equal(nvt_check(&n, s->w.seed[i], s->w.len[i], s->w.w[i].loc), 0);
	}
	writes_free(&s->w);
	reads_free(s);
	free(s);
	nvt_fini(&n);
}

/* One read, pulled once the stream's first writes are in flight on a device whose writes take
 * WRITE_DELAY_MS: riding the stream, and (the baseline, same tier) after it. */
#define WRITE_DELAY_MS 400
static void test_nvme_stream_read_beside_slow_writes(void **state)
{
	struct kvt__nvme_fault f = {.write_delay_us = WRITE_DELAY_MS * 1000, .seed = 3};
	struct nvt n;
	nvt_init(&n, "64MiB", "8");
	nvt_open_faulty(&n, &f);
	struct rsrc *s = calloc(1, sizeof(*s));
	reads_prepare(&n, s, 200 << 10, 300 << 10);
	double rode_ms = 0, behind_ms = 0, writes_ms = 0;
	for (int round = 0; round < 2; round++) {
		bool base = round == 1; /* the baseline: no reads ride */
		writes_prepare(&n, &s->w, 1 + (uint64_t)round * 1000, 256 << 10, 0,
		               N_RECS - 6); /* six writes of 256 KiB */
		s->w.eager = true;
		s->next = 0, s->until = base ? 0 : 1, s->calls = 0, s->every = 1;
		s->after_writes_start = true;
		struct kvt_tier_wsource ws = riding;
		ws.arg = s;
		if (base)
			ws.pull_read = NULL, ws.read_done = NULL;
		f.armed = true;
		s->t0_ns = mono_ns();
		while (s->w.next < N_RECS)
			kvt_tier_nvme.write_stream(n.t, &ws);
		writes_ms = (double)(mono_ns() - s->t0_ns) / 1e6;
		if (base) {
			s->r[1] = (struct kvt_tier_rreq){
			    .id = nvt_id(s->seed[1]),
			    .loc = s->loc[1],
			    .buf = s->buf[1],
			    .buf_len = KVT_ALIGN_UP(KVT_CHUNK_HDR_BYTES + s->len[1],
			                            (size_t)KVT_TIER_ALIGN)};
			assert_int_equal(kvt_tier_nvme.read_batch(n.t, &s->r[1], 1), 1);
			behind_ms = (double)(mono_ns() - s->t0_ns) / 1e6;
			assert_true(read_right(&n, s, 1));
		} else {
			assert_int_equal(s->next, 1); /* it was taken, and reported once */
			assert_int_equal(s->done[0], 1);
			assert_true(read_right(&n, s, 0));
			rode_ms = (double)s->done_ns[0] / 1e6;
		}
		f.armed = false;
		for (size_t i = N_RECS - 6; i < N_RECS; i++) {
			assert_int_equal(s->w.w[i].res, 0);
			assert_int_equal(nvt_check(&n, s->w.seed[i], s->w.len[i], s->w.w[i].loc),
			                 0);
		}
		writes_free(&s->w);
		print_message("%s: writes %.1f ms, the read ended after %.1f ms\n",
		              base ? "behind the stream (before)" : "riding the stream", writes_ms,
		              base ? behind_ms : rode_ms);
	}
	assert_true(writes_ms >= WRITE_DELAY_MS);
	assert_true(behind_ms >= WRITE_DELAY_MS);  /* the baseline waits for the writes */
	assert_true(rode_ms < WRITE_DELAY_MS / 4); /* riding, it does not */
	reads_free(s);
	free(s);
	nvt_fini(&n);
}

/* A damaged record read beside writes: -EBADMSG, counted, dropped (reported), its tombstone
 * written after the run, so that neither a second read nor a reopen finds it. */
static void test_nvme_stream_read_corrupt(void **state)
{
	struct nvt n;
	nvt_init(&n, "64MiB", "8");
	assert_int_equal(nvt_open(&n), 0);
	struct rsrc *s = calloc(1, sizeof(*s));
	reads_prepare(&n, s, 100 << 10, 200 << 10);
	nvt_close(&n);
	char path[512];
	nvt_path(&n, path, sizeof(path));
	uint64_t off = (s->loc[3] & ((1ull << 40) - 1)) << 12;
	nvt_flip_byte(path, (off_t)(off + KVT_CHUNK_HDR_BYTES + 777), 0x10);
	assert_int_equal(nvt_open(&n), 0);
	writes_prepare(&n, &s->w, 1, 64 << 10, 0, N_RECS - 40);
	s->every = 1, s->until = N_READS, s->after_writes_start = true;
	struct kvt_tier_wsource ws = riding;
	ws.arg = s;
	while (s->w.next < N_RECS)
		kvt_tier_nvme.write_stream(n.t, &ws);
	size_t bad = 0;
	for (size_t i = 0; i < s->next; i++) {
		assert_int_equal(s->done[i], 1);
		if (i == 3)
			bad += s->r[i].res == -EBADMSG;
		else
			assert_true(read_right(&n, s, i));
	}
	assert_true(s->next > 3); /* the damaged one was among those that rode */
	assert_int_equal(bad, 1);
	assert_int_equal(nvt_stats(&n).corruptions, 1);
	assert_true(nvt_was_dropped(&n, s->loc[3]));
	assert_int_equal(nvt_check(&n, s->seed[3], s->len[3], s->loc[3]), -ENOENT);
	writes_free(&s->w);
	nvt_close(&n);
	assert_int_equal(nvt_open(&n), 0); /* its tombstone landed: not back */
	assert_int_equal(nvt_check(&n, s->seed[3], s->len[3], s->loc[3]), -ENOENT);
	assert_int_equal(nvt_check(&n, s->seed[4], s->len[4], s->loc[4]), 0);
	reads_free(s);
	free(s);
	nvt_fini(&n);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nvme_stream),
	    cmocka_unit_test(test_nvme_stream_fault),
	    cmocka_unit_test(test_nvme_stream_reads),
	    cmocka_unit_test(test_nvme_stream_reads_report_writes_landed),
	    cmocka_unit_test(test_nvme_stream_read_beside_slow_writes),
	    cmocka_unit_test(test_nvme_stream_read_corrupt),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
