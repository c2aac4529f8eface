/* test_nvme.c -- the nvme tier on a real file: round trip, reopen, FIFO reclaim, remove, limits. */
#include "nvme_fixture.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define N_RECS 160

struct seen {
	uint64_t locs[4096];
	size_t n;
	uint64_t bytes;
};

static int visit(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	struct seen *s = arg;
	assert_true(s->n < KVT_ARRAY_SIZE(s->locs));
	s->locs[s->n++] = loc;
	s->bytes += KVT_ALIGN_UP(KVT_CHUNK_HDR_BYTES + h->payload_bytes, 4096);
	assert_int_equal(h->key.w[1], ~h->key.w[0]);
	return 0;
}

static size_t rec_len_of(uint64_t seed)
{
	static const size_t sizes[] = {100, 4096 - 128, 64 << 10, (256 << 10) + 100, 1 << 20};
	return sizes[seed % 5] + (seed % 7) * 512;
}

static void test_nvme_roundtrip_reopen(void **state)
{
	struct nvt n;
	nvt_init(&n, "128MiB", "8");
	assert_int_equal(nvt_open(&n), 0);
	assert_string_equal(kvt_tier_nvme_backend(n.t), g_backend);
	uint64_t loc[N_RECS];
	for (uint64_t i = 0; i < N_RECS; i++)
		assert_int_equal(nvt_put(&n, i + 1, rec_len_of(i), &loc[i]), 0);
	for (uint64_t i = 0; i < N_RECS; i++)
		assert_int_equal(nvt_check(&n, i + 1, rec_len_of(i), loc[i]), 0);
	struct kvt_tier_stats s = nvt_stats(&n);
	assert_int_equal(s.chunks, N_RECS);
	assert_int_equal(s.writes, N_RECS);
	assert_int_equal(s.reads, N_RECS);
	assert_int_equal(s.evictions, 0);
	assert_int_equal(n.n_dropped, 0);
	uint64_t used = s.used_bytes;
	nvt_close(&n);

	assert_int_equal(nvt_open(&n), 0);
	s = nvt_stats(&n);
	assert_int_equal(s.chunks, N_RECS);
	assert_int_equal(s.used_bytes, used);
	assert_int_equal(s.corruptions, 0);
	struct seen *seen = calloc(1, sizeof(*seen));
	assert_int_equal(kvt_tier_nvme.iterate(n.t, visit, seen), 0);
	assert_int_equal(seen->n, N_RECS);
	assert_int_equal(seen->bytes, used); /* usage is exactly what is on disk */
	for (uint64_t i = 0; i < N_RECS; i++) {
		assert_int_equal(seen->locs[i], loc[i]); /* log order = write order */
		assert_int_equal(nvt_check(&n, i + 1, rec_len_of(i), loc[i]), 0);
	}
	free(seen);
	/* writes continue after the recovered head */
	uint64_t l2;
	assert_int_equal(nvt_put(&n, 9999, 5000, &l2), 0);
	assert_int_equal(nvt_check(&n, 9999, 5000, l2), 0);
	assert_int_equal(nvt_check(&n, 1, rec_len_of(0), loc[0]), 0);
	nvt_fini(&n);
}

/* One owner (DESIGN.md: one daemon per tier): a second open of a tier's file while the first
 * holds it is -EBUSY and writes nothing (the first's records all read back right, its saved
 * index is not made); once the first closes, the second opens and finds every record. Also
 * through another path to the same file (a hard link): the lock is on the file. */
static void test_nvme_second_owner_refused(void **state)
{
	struct nvt a, b;
	nvt_init(&a, "64MiB", "8");
	assert_int_equal(nvt_open(&a), 0);
	uint64_t loc[16];
	for (uint64_t i = 0; i < 16; i++)
		assert_int_equal(nvt_put(&a, i + 1, rec_len_of(i), &loc[i]), 0);
	b = a; /* the same directory and options */
	b.t = NULL;
	b.env.arg = &b;
	assert_int_equal(nvt_open(&b), -EBUSY);
	assert_null(b.t);
	char path[300], link_path[320];
	nvt_path(&a, path, sizeof(path));
	snprintf(link_path, sizeof(link_path), "%s/other-name.dat", a.dir);
	assert_int_equal(link(path, link_path), 0);
	assert_int_equal(kvt_opts_set(&b.opts, "nvme.path", link_path), 0);
	b.env.opts = &b.opts;
	assert_int_equal(nvt_open(&b), -EBUSY);
	assert_int_equal(unlink(link_path), 0);
	snprintf(link_path, sizeof(link_path), "%s.index", path);
	struct stat st;
	assert_true(stat(link_path, &st) && errno == ENOENT); /* b closed nothing it had opened */
	for (uint64_t i = 0; i < 16; i++)
		assert_int_equal(nvt_check(&a, i + 1, rec_len_of(i), loc[i]), 0);
	uint64_t l2;
	assert_int_equal(nvt_put(&a, 99, 5000, &l2), 0); /* a writes on */
	nvt_close(&a);

	assert_int_equal(kvt_opts_set(&b.opts, "nvme.path", ""), 0);
	assert_int_equal(nvt_open(&b), 0); /* the lock went with a's close */
	assert_int_equal(nvt_stats(&b).chunks, 17);
	for (uint64_t i = 0; i < 16; i++)
		assert_int_equal(nvt_check(&b, i + 1, rec_len_of(i), loc[i]), 0);
	assert_int_equal(nvt_check(&b, 99, 5000, l2), 0);
	nvt_close(&b);
	nvt_fini(&a);
}

static void test_nvme_fifo_reclaim(void **state)
{
	struct nvt n;
	nvt_init(&n, "16MiB", "4"); /* 15 regions of 1 MiB */
	assert_int_equal(nvt_open(&n), 0);
	enum { N = 200 };
	uint64_t loc[N];
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(nvt_put(&n, i + 1, 200 << 10, &loc[i]), 0);
	struct kvt_tier_stats s = nvt_stats(&n);
	assert_true(n.n_dropped > 0);
	assert_int_equal(s.evictions, n.n_dropped);
	assert_int_equal(s.chunks, N - n.n_dropped);
	assert_true(s.used_bytes <= s.capacity_bytes);
	/* the oldest went first, every survivor reads back, every dropped one is a miss */
	for (uint64_t i = 0; i < N; i++) {
		bool gone = nvt_was_dropped(&n, loc[i]);
		if (i < n.n_dropped)
			assert_true(gone);
		assert_int_equal(nvt_check(&n, i + 1, 200 << 10, loc[i]), gone ? -ENOENT : 0);
	}
	nvt_close(&n);
	assert_int_equal(nvt_open(&n), 0);
	struct kvt_tier_stats r = nvt_stats(&n);
	assert_int_equal(r.chunks, s.chunks); /* old records of reused regions stay dead */
	assert_int_equal(r.used_bytes, s.used_bytes);
	for (uint64_t i = n.n_dropped; i < N; i++)
		assert_int_equal(nvt_check(&n, i + 1, 200 << 10, loc[i]), 0);
	nvt_fini(&n);
}

/*
 * The log's geometry (tiers/nvme/geometry.h, what kvtier sim lays its nvme tier out with) is
 * the log's own: a fresh log of nvme.bytes takes exactly n_regions x kvt_nvme_region_records
 * records of a size before it drops any, and then drops one whole region's worth at once. Two
 * shapes: 40 MiB of 16 KiB chunks (9 regions of 4 MiB, summaries of 7 entry blocks) and 16 MiB
 * of 200 KiB ones (15 regions of 1 MiB).
 */
static void test_nvme_geometry_is_the_logs(void **state)
{
	static const struct {
		const char *bytes;
		uint64_t file, payload;
	} shape[] = {{"40MiB", 40ull << 20, 16 << 10}, {"16MiB", 16ull << 20, 200 << 10}};
	for (size_t k = 0; k < 2; k++) {
		struct kvt_nvme_geometry g;
		assert_int_equal(kvt_nvme_geometry(shape[k].file, 0, &g), 0);
		uint64_t per =
		    kvt_nvme_region_records(g.region_bytes, KVT_CHUNK_HDR_BYTES + shape[k].payload);
		assert_true(per >= 4 && g.n_regions >= 8);
		struct nvt n;
		nvt_init(&n, shape[k].bytes, "4");
		assert_int_equal(nvt_open(&n), 0);
		assert_int_equal(nvt_stats(&n).capacity_bytes, g.n_regions * g.max_rec);
		uint64_t loc, seed = 1;
		for (; seed <= g.n_regions * per; seed++)
			assert_int_equal(nvt_put(&n, seed, shape[k].payload, &loc), 0);
		assert_int_equal(n.n_dropped, 0); /* every region full, none taken back */
		assert_int_equal(nvt_put(&n, seed, shape[k].payload, &loc), 0);
		assert_int_equal(n.n_dropped, per); /* the oldest region, whole */
		assert_int_equal(nvt_stats(&n).chunks, (g.n_regions - 1) * per + 1);
		nvt_fini(&n);
	}
}

/* What env->evicted was given: each record's seed and loc, its bytes checked on the spot. */
struct handed {
	struct nvt *n;
	uint64_t seed[512], loc[512];
	bool read[512];
	size_t count;
	size_t payload;
	bool refuse;       /* answer the question with -ENOENT: nobody takes them */
	bool queue;        /* answer 1 ("queued") when the tier offers later, as the daemon does */
	size_t later, now; /* records offered with later, and without */
};

static int on_evicted(void *arg, const struct kvt_tier_id *id, uint64_t loc, const void *rec,
                      size_t rec_len, bool read, bool later)
{
	struct handed *h = arg;
	if (!rec) /* the question before a reclaim reads back: yes */
		return h->refuse ? -ENOENT : 0;
	uint64_t seed = id->key.w[0];
	assert_true(h->count < 512);
	assert_false(nvt_was_dropped(h->n, loc)); /* handed over before it is dropped */
	size_t bl;
	uint8_t *want = nvt_record(seed, h->payload, &bl);
	assert_int_equal(rec_len, KVT_CHUNK_HDR_BYTES + h->payload);
	assert_memory_equal(rec, want, rec_len); /* the record as written, byte for byte */
	free(want);
	h->seed[h->count] = seed;
	h->read[h->count] = read;
	h->loc[h->count++] = loc;
	*(later ? &h->later : &h->now) += 1;
	return later && h->queue ? 1 : 0;
}

static void on_drop_handed(void *arg, const struct kvt_tier_id *id, uint64_t loc)
{
	nvt_on_drop(((struct handed *)arg)->n, id, loc);
}

static void on_move_handed(void *arg, const struct kvt_tier_id *id, uint64_t from, uint64_t to)
{
	nvt_on_move(((struct handed *)arg)->n, id, from, to);
}

/* A 16 MiB log (15 regions of 1 MiB) whose evictions go to h. */
static void open_handing(struct nvt *n, struct handed *h)
{
	nvt_init(n, "16MiB", "4");
	n->env.evicted = on_evicted;
	n->env.dropped = on_drop_handed;
	n->env.moved = on_move_handed;
	n->env.arg = h;
	assert_int_equal(nvt_open(n), 0);
}

/*
 * env->evicted (tiers.placement = cascade): every record reclaim drops for room is handed over,
 * once, with its exact bytes, before the drop is reported, and marked read when it was read
 * since it was written (second_touch admission below); a record removed by the caller is not,
 * nor one whose bytes were damaged on disk (counted as a corruption instead).
 */
static void test_nvme_hands_over_evictions(void **state)
{
	struct nvt n;
	struct handed h = {.n = &n, .payload = 200 << 10};
	open_handing(&n, &h);
	enum { N = 200, REMOVED = 3, DAMAGED = 7 };
	uint64_t loc[N];
	for (uint64_t i = 0; i < N; i++) {
		assert_int_equal(nvt_put(&n, i + 1, h.payload, &loc[i]), 0);
		if (i % 3 == 0 && i != DAMAGED) /* every third read once while it is there */
			assert_int_equal(nvt_check(&n, i + 1, h.payload, loc[i]), 0);
		if (i == REMOVED + 5) { /* before the log comes round to them */
			struct kvt_tier_id id = nvt_id(REMOVED + 1);
			assert_int_equal(kvt_tier_nvme.remove(n.t, &id, loc[REMOVED]), 0);
			char path[300];
			int fd = open(nvt_path(&n, path, sizeof(path)), O_WRONLY);
			assert_true(fd >= 0);
			uint64_t off = (loc[DAMAGED] & ((1ull << 40) - 1)) << 12;
			uint8_t junk[16];
			memset(junk, 0x5a, sizeof(junk));
			assert_int_equal(pwrite(fd, junk, sizeof(junk), (off_t)(off + 8192)), 16);
			close(fd);
		}
	}
	struct kvt_tier_stats s = nvt_stats(&n);
	struct kvt__nvme_xstats xs;
	kvt__nvme_xstats(n.t, &xs);
	assert_true(s.evictions > 100);
	assert_int_equal(xs.handed_over, h.count);
	assert_int_equal(xs.handed_bytes, h.count * (KVT_CHUNK_HDR_BYTES + h.payload));
	assert_int_equal(s.corruptions, 1);
	/* each record the log dropped for room was handed over at its place, the two others not */
	size_t evicted = 0;
	for (uint64_t i = 0; i < N; i++) {
		if (!nvt_was_dropped(&n, loc[i]))
			continue;
		bool given = false;
		for (size_t k = 0; k < h.count; k++)
			if (h.loc[k] == loc[i]) {
				assert_false(given); /* once */
				assert_int_equal(h.seed[k], i + 1);
				assert_int_equal(h.read[k], i % 3 == 0);
				given = true;
			}
		assert_true(given == (i != REMOVED && i != DAMAGED));
		evicted += i != REMOVED;
	}
	assert_int_equal(evicted, s.evictions);
	nvt_fini(&n);
}

/*
 * kvt_done (hint_done): a record the engine is done with is dropped at reclaim without being
 * read back or handed over (cascade), and with nvme.policy = clock a read before the hint
 * earns it no second chance (a quarter of the records unread, so that half of each region is
 * kept and reclaimed rather than passed over); a read after the hint cancels it. A hint naming
 * another record's loc, or a loc long gone, changes nothing.
 */
static void test_nvme_done_hint(void **state)
{
	for (int clock = 0; clock < 2; clock++) {
		struct nvt n;
		struct handed h = {.n = &n, .payload = 200 << 10};
		open_handing(&n, &h);
		char err[128], name[] = "clock", none[] = "";
		if (clock)
			assert_int_equal(
			    kvt_tier_nvme.policy_set(n.t, name, none, err, sizeof(err)), 0);
		enum { N = 200 };
		uint64_t loc[N];
		for (uint64_t i = 0; i < N; i++) {
			assert_int_equal(nvt_put(&n, i + 1, h.payload, &loc[i]), 0);
			struct kvt_tier_id id = nvt_id(i + 1), other = nvt_id(i + 2);
			if (clock && i % 4) /* read once: a second chance, unless told */
				assert_int_equal(nvt_check(&n, i + 1, h.payload, loc[i]), 0);
			if (i % 4 == 1) /* told done */
				kvt_tier_nvme.hint_done(n.t, &id, loc[i]);
			if (i % 4 == 2) { /* told, then read again */
				kvt_tier_nvme.hint_done(n.t, &id, loc[i]);
				assert_int_equal(nvt_check(&n, i + 1, h.payload, loc[i]), 0);
			}
			if (i % 4 == 3) /* another record's name: not this one's hint */
				kvt_tier_nvme.hint_done(n.t, &other, loc[i]);
		}
		struct kvt_tier_stats s = nvt_stats(&n);
		struct kvt__nvme_xstats xs = nvt_xstats(&n);
		size_t told = 0, handed = 0, gone[4] = {0};
		for (uint64_t i = 0; i < N; i++) {
			gone[i % 4] += nvt_was_dropped(&n, loc[i]);
			bool given = false;
			for (size_t k = 0; k < h.count; k++) /* by seed: clock moves records */
				given |= h.seed[k] == i + 1;
			if (i % 4 == 1 && nvt_was_dropped(&n, loc[i])) {
				told++;
				assert_false(given); /* not read back, not handed over */
				assert_int_equal(nvt_check(&n, i + 1, h.payload, loc[i]), -ENOENT);
			}
			handed += given;
		}
		print_message("%s: %zu told done and dropped, %zu handed over, %llu evictions, "
		              "dropped by class %zu %zu %zu %zu, %llu passed\n",
		              clock ? "clock" : "fifo", told, handed,
		              (unsigned long long)s.evictions, gone[0], gone[1], gone[2], gone[3],
		              (unsigned long long)xs.passed);
		assert_true(told > 10);
		assert_int_equal(s.told_evictions, told);
		assert_int_equal(xs.handed_over, handed);
		assert_int_equal(handed + told, s.evictions);
		if (clock) { /* read and not told: a second chance; read and told: none */
			assert_true(xs.reinserted > 0);
			assert_true(gone[1] > gone[3] + 10);
		}
		nvt_fini(&n);
	}
}

/* The region a loc is in. */
static uint64_t region_of(struct nvt *n, uint64_t loc)
{
	const struct kvt_nvme *t = (const struct kvt_nvme *)n->t;
	return (((loc & ((1ull << 40) - 1)) << 12) - t->data_off) / t->region_bytes;
}

/*
 * Evicting ahead: once the head region is half written (due 1; 2 at three quarters), the region
 * after it is handed over a step at a time (oldest first, each record once, before its drop),
 * and the write that later reaches that region reads nothing back. With nvme.policy = clock it is
 * never due (reclaim keeps records there).
 */
static void test_nvme_evicts_ahead(void **state)
{
	struct nvt n;
	struct handed h = {.n = &n, .payload = 200 << 10};
	open_handing(&n, &h);
	uint64_t loc[200], i = 0;
	while (i < 60 || kvt_tier_nvme_ahead_due(n.t) != 1) { /* round the log once, then half
		                                               * a region */
		assert_int_equal(nvt_put(&n, i + 1, h.payload, &loc[i]), 0);
		assert_true(++i < 200);
	}
	assert_int_equal(kvt_tier_nvme_ahead_due(n.t), 1); /* 3 of 4 records: half written */
	assert_int_equal(nvt_put(&n, i + 1, h.payload, &loc[i]), 0);
	i++;
	assert_int_equal(kvt_tier_nvme_ahead_due(n.t), 2); /* 4 of 4: a write reclaims it next */
	uint64_t r = (region_of(&n, loc[i - 1]) + 1) % 15, oldest = 0;
	while (region_of(&n, loc[oldest]) != r || nvt_was_dropped(&n, loc[oldest]))
		oldest++; /* the first live record of the next region */
	size_t before = h.count;
	assert_true(kvt_tier_nvme_evict_ahead(n.t, 1) >= h.payload); /* one record a step */
	assert_int_equal(h.count, before + 1);
	assert_int_equal(h.loc[before], loc[oldest]);
	assert_true(nvt_was_dropped(&n, loc[oldest]));
	while (kvt_tier_nvme_evict_ahead(n.t, 1))
		;
	assert_false(kvt_tier_nvme_ahead_due(n.t));
	for (uint64_t k = 0; k < i; k++) /* the region holds nothing live now */
		if (region_of(&n, loc[k]) == r)
			assert_true(nvt_was_dropped(&n, loc[k]));
	size_t handed = h.count;
	struct kvt_tier_stats s = nvt_stats(&n);
	for (;;) { /* on to the region: nothing more to read back there */
		assert_int_equal(nvt_put(&n, i + 1, h.payload, &loc[i]), 0);
		if (region_of(&n, loc[i++]) == r)
			break;
		assert_true(i < 200);
	}
	assert_int_equal(h.count, handed);
	assert_int_equal(nvt_stats(&n).reads, s.reads);
	struct kvt__nvme_xstats xs;
	kvt__nvme_xstats(n.t, &xs);
	assert_true(xs.evicted_ahead >= 4);
	assert_int_equal(xs.handed_over, h.count);

	char err[128], name[] = "clock", none[] = "";
	assert_int_equal(kvt_tier_nvme.policy_set(n.t, name, none, err, sizeof(err)), 0);
	for (uint64_t k = 0; k < 8; k++) {
		assert_int_equal(nvt_put(&n, 1000 + k, h.payload, &loc[0]), 0);
		assert_false(kvt_tier_nvme_ahead_due(n.t));
		assert_int_equal(kvt_tier_nvme_evict_ahead(n.t, 1 << 20), 0);
	}
	nvt_fini(&n);
}

/*
 * Hand-overs queued by the caller (evicted() answers 1 to a record offered with later, as the
 * daemon does when it copies it for the next tier's worker): the head does not take the region
 * back while any of them has not landed -- a write that needs it answers -EAGAIN -- so that a
 * crash finds each record in one tier or the other. A reopen meanwhile (a crash) still finds the
 * region's records; once every copy has landed, the write goes there. Reclaim at the head offers
 * without later (the caller writes at once).
 */
/* Puts records (seeds from seed) until evicting ahead is due, then evicts ahead all it may.
 * @return : where h's offers of this step begin (at least 4 of them). */
static size_t put_and_evict_ahead(struct nvt *n, struct handed *h, uint64_t seed)
{
	uint64_t lp;
	for (uint64_t k = 0; kvt_tier_nvme_ahead_due(n->t) < 2; k++) {
		assert_int_equal(nvt_put(n, seed + k, h->payload, &lp), 0);
		assert_true(k < 20);
	}
	size_t from = h->count;
	while (kvt_tier_nvme_evict_ahead(n->t, 1 << 20))
		;
	assert_true(h->count - from >= 4);
	return from;
}

static void test_nvme_keeps_queued_handovers(void **state)
{
	struct nvt n;
	struct handed h = {.n = &n, .payload = 200 << 10, .queue = true};
	open_handing(&n, &h);
	uint64_t loc[200], i = 0;
	while (i < 60 || kvt_tier_nvme_ahead_due(n.t) < 2) {
		assert_int_equal(nvt_put(&n, i + 1, h.payload, &loc[i]), 0);
		assert_true(++i < 200);
	}
	size_t now_before = h.now, first = h.count;
	while (kvt_tier_nvme_evict_ahead(n.t, 1 << 20))
		;
	assert_true(h.count - first >= 4);
	assert_int_equal(h.later, h.count - now_before); /* ahead: each offered with later */
	uint64_t r = region_of(&n, h.loc[first]);
	uint64_t lp;
	int rc = 0;
	for (int k = 0; k < 4 && !rc; k++) /* the head region's last room, then it needs r */
		rc = nvt_put(&n, 7000 + (uint64_t)k, h.payload, &lp);
	assert_int_equal(rc, -EAGAIN);
	struct kvt__nvme_xstats xs;
	kvt__nvme_xstats(n.t, &xs);
	assert_true(xs.handover_waits >= 1);
	for (size_t k = first; k + 1 < h.count; k++) /* all but one land: still waiting */
		kvt_tier_nvme_handover_landed(n.t, h.loc[k]);
	assert_int_equal(nvt_put(&n, 7777, h.payload, &lp), -EAGAIN);
	kvt_tier_nvme_handover_landed(n.t, h.loc[h.count - 1]);
	assert_int_equal(nvt_put(&n, 7777, h.payload, &lp), 0); /* now it takes r */
	assert_int_equal(region_of(&n, lp), r);
	/* again, and a crash while the copies wait: the reopened log still has every record (they
	 * left the index, not the log) */
	size_t again = put_and_evict_ahead(&n, &h, 8000);
	nvt_close(&n);
	assert_int_equal(nvt_open(&n), 0);
	for (size_t k = again; k < h.count; k++)
		assert_int_equal(nvt_check(&n, h.seed[k], h.payload, h.loc[k]), 0);
	/* once their copies have landed, a restart finds them no more (their tombstones: a delete
	 * sent since reaches only the copy below), although their region is still on disk */
	n.n_dropped = 0; /* what the last life dropped, this one found again */
	size_t third = put_and_evict_ahead(&n, &h, 9000);
	for (size_t k = third; k < h.count; k++)
		kvt_tier_nvme_handover_landed(n.t, h.loc[k]);
	nvt_close(&n);
	assert_int_equal(nvt_open(&n), 0);
	for (size_t k = third; k < h.count; k++)
		assert_int_equal(nvt_check(&n, h.seed[k], h.payload, h.loc[k]), -ENOENT);
	/* reclaim at the head, with nothing evicted ahead (clock): offered without later */
	char err[128], name[] = "clock", none[] = "";
	assert_int_equal(kvt_tier_nvme.policy_set(n.t, name, none, err, sizeof(err)), 0);
	size_t now0 = h.now;
	for (uint64_t k = 0; k < 40; k++)
		assert_int_equal(nvt_put(&n, 2000 + k, h.payload, &lp), 0);
	assert_true(h.now > now0);
	nvt_fini(&n);
}

/* Nobody to take them (the daemon's next tier left out): the tier stops reading back. */
static void test_nvme_hand_over_refused(void **state)
{
	struct nvt n;
	struct handed h = {.n = &n, .payload = 200 << 10, .refuse = true};
	open_handing(&n, &h);
	uint64_t loc;
	for (uint64_t i = 0; i < 200; i++)
		assert_int_equal(nvt_put(&n, i + 1, h.payload, &loc), 0);
	struct kvt_tier_stats s = nvt_stats(&n);
	assert_true(s.evictions > 100);
	assert_int_equal(h.count, 0);
	assert_int_equal(s.reads, 0); /* nothing read back for nobody */
	nvt_fini(&n);
}

/* A record larger than the hand-over buffer (16 MiB) is handed over too, whole. */
static void test_nvme_hands_over_large_records(void **state)
{
	struct nvt n;
	struct handed h = {.n = &n, .payload = 17 << 20};
	nvt_init(&n, "112MiB", "4");
	n.hooks.region_bytes = 36ull << 20; /* 3 regions, one 17 MiB record fits two */
	n.env.evicted = on_evicted;
	n.env.dropped = on_drop_handed;
	n.env.moved = on_move_handed;
	n.env.arg = &h;
	assert_int_equal(nvt_open(&n), 0);
	uint64_t loc[8];
	for (uint64_t i = 0; i < 8; i++)
		assert_int_equal(nvt_put(&n, i + 1, h.payload, &loc[i]), 0);
	struct kvt_tier_stats s = nvt_stats(&n);
	assert_true(s.evictions >= 2);
	assert_int_equal(h.count, s.evictions); /* each, byte for byte (on_evicted compares) */
	for (size_t k = 0; k < h.count; k++)
		assert_int_equal(h.loc[k], loc[h.seed[k] - 1]);
	nvt_fini(&n);
}

static void test_nvme_remove_persists(void **state)
{
	struct nvt n;
	nvt_init(&n, "16MiB", "4");
	assert_int_equal(nvt_open(&n), 0);
	uint64_t a, b, c;
	assert_int_equal(nvt_put(&n, 1, 10000, &a), 0);
	assert_int_equal(nvt_put(&n, 2, 10000, &b), 0);
	assert_int_equal(nvt_put(&n, 3, 10000, &c), 0);
	struct kvt_tier_id id2 = nvt_id(2), id9 = nvt_id(9);
	assert_int_equal(kvt_tier_nvme.remove(n.t, &id9, b), -ENOENT); /* wrong identity */
	assert_int_equal(kvt_tier_nvme.remove(n.t, &id2, b), 0);
	assert_int_equal(kvt_tier_nvme.remove(n.t, &id2, b), -ENOENT);
	assert_int_equal(nvt_check(&n, 2, 10000, b), -ENOENT);
	assert_int_equal(n.n_dropped, 0); /* the daemon asked: no callback */
	nvt_close(&n);
	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(nvt_stats(&n).chunks, 2);
	assert_int_equal(nvt_check(&n, 1, 10000, a), 0);
	assert_int_equal(nvt_check(&n, 2, 10000, b), -ENOENT);
	assert_int_equal(nvt_check(&n, 3, 10000, c), 0); /* the walk skips the tombstone */
	nvt_fini(&n);
}

static void test_nvme_limits(void **state)
{
	struct kvt__nvme_fault f = {0}; /* no faults: it only watches what reaches the kernel */
	struct nvt n;
	nvt_init(&n, "16MiB", "4");
	n.hooks.fault = &f;
	assert_int_equal(nvt_open(&n), 0);
	uint64_t loc;
	/* larger than a region: -EFBIG, counted, nothing written */
	assert_int_equal(nvt_put(&n, 1, (1 << 20), &loc), -EFBIG);
	assert_int_equal(nvt_xstats(&n).efbig, 1);
	assert_int_equal(nvt_stats(&n).err_other, 1);
	assert_int_equal(nvt_put(&n, 2, (1 << 20) - 4096 - 128, &loc), 0); /* the largest fits */
	assert_int_equal(nvt_check(&n, 2, (1 << 20) - 4096 - 128, loc), 0);
	/* misaligned or short buffers are refused before any I/O */
	size_t bl;
	uint8_t *b = nvt_record(3, 5000, &bl);
	uint8_t *odd = malloc(bl + 1);
	memcpy(odd + 1, b, bl);
	if ((uintptr_t)(odd + 1) % 4096)
		assert_int_equal(kvt_tier_nvme.write(n.t, odd + 1, 5128, bl, &loc), -EINVAL);
	assert_int_equal(kvt_tier_nvme.write(n.t, b, 5128, 4096, &loc), -EINVAL);
	b[200] ^= 1; /* a header that does not match its length */
	assert_int_equal(kvt_tier_nvme.write(n.t, b, 5128 + 1, bl, &loc), -EINVAL);
	b[200] ^= 1;
	assert_int_equal(kvt_tier_nvme.write(n.t, b, 5128, bl, &loc), 0);
	struct kvt_tier_id id3 = nvt_id(3), id4 = nvt_id(4);
	assert_int_equal(kvt_tier_nvme.read(n.t, &id3, loc, b, 4096), -ENOBUFS);
	assert_int_equal(kvt_tier_nvme.read(n.t, &id4, loc, b, bl), -ENOENT);
	assert_int_equal(kvt_tier_nvme.read(n.t, &id3, loc ^ (1ull << 40), b, bl), -ENOENT);
	assert_int_equal(kvt_tier_nvme.read(n.t, &id3, 12345, b, bl), -ENOENT);
	assert_int_equal(nvt_check(&n, 3, 5000, loc), 0);
	free(odd);
	free(b);
	assert_true(f.ios > 0);
	assert_int_equal(f.misaligned, 0);
	assert_int_equal(nvt_xstats(&n).misaligned, 0);
	nvt_fini(&n);
}

static void rewrite_sb(const char *path, uint32_t format)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint8_t b[4096];
	for (int copy = 0; copy < 2; copy++) {
		assert_int_equal(pread(fd, b, 4096, copy * 4096), 4096);
		kvt_store_le32(b + 8, format);
		kvt_store_le64(b + 4088, XXH3_64bits(b, 4088));
		assert_int_equal(pwrite(fd, b, 4096, copy * 4096), 4096);
	}
	close(fd);
}

static void test_nvme_format_mismatch_rebuilds(void **state)
{
	struct nvt n;
	char path[512];
	nvt_init(&n, "16MiB", "4");
	assert_int_equal(nvt_open(&n), 0);
	uint64_t loc;
	assert_int_equal(nvt_put(&n, 1, 10000, &loc), 0);
	nvt_close(&n);
	rewrite_sb(nvt_path(&n, path, sizeof(path)), KVT_NVME_FORMAT + 1);
	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(nvt_stats(&n).chunks, 0);
	assert_int_equal(nvt_check(&n, 1, 10000, loc), -ENOENT);
	assert_int_equal(nvt_put(&n, 2, 10000, &loc), 0);
	nvt_close(&n);
	/* one torn superblock copy: the other one opens it */
	int fd = open(path, O_RDWR);
	uint8_t junk[4096];
	memset(junk, 0x5a, sizeof(junk));
	assert_int_equal(pread(fd, junk, 8, 0), 8);
	uint8_t b0[4096], b1[4096];
	assert_int_equal(pread(fd, b0, 4096, 0), 4096);
	assert_int_equal(pread(fd, b1, 4096, 4096), 4096);
	uint64_t g0 = kvt_load_le64(b0 + 16), g1 = kvt_load_le64(b1 + 16);
	memset(junk, 0x5a, sizeof(junk));
	assert_int_equal(pwrite(fd, junk, 4096, g0 > g1 ? 0 : 4096), 4096);
	close(fd);
	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(nvt_stats(&n).chunks, 1);
	assert_int_equal(nvt_check(&n, 2, 10000, loc), 0);
	nvt_close(&n);
	/* another size: a new geometry, rebuilt */
	assert_int_equal(kvt_opts_set(&n.opts, "nvme.bytes", "24MiB"), 0);
	assert_int_equal(nvt_open(&n), 0);
	assert_int_equal(nvt_stats(&n).chunks, 0);
	nvt_fini(&n);
}

/* Memory declared for fixed I/O is pinned a region at a time, by the tier's pinning thread,
 * once an I/O has needed the region (that I/O is plain). Then every piece in it is fixed, a
 * record across a region's end included (its pieces are cut there), and a region no I/O has
 * needed stays unpinned (the daemon declares host.bytes per tenant). Regions of 256 KiB here,
 * so that the test pins under 2 MiB in all, the tier's own blocks included, and runs without
 * privilege under the default RLIMIT_MEMLOCK of 8 MiB, which io_uring's teardown of the
 * earlier tests' rings may still hold part of (the daemon's regions: KVT_NVME_PIN_REGION). */
static void test_nvme_pins_regions(void **state)
{
	const size_t R = 256u << 10;
	struct nvt n;
	nvt_init(&n, "64MiB", "4");
	assert_int_equal(nvt_open(&n), 0);
	uint8_t *pool =
	    mmap(NULL, 3 * R, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(pool != MAP_FAILED);
	int rc = kvt__nvme_register_regions(n.t, pool, 3 * R, R);
	if (!strcmp(g_backend, "pio")) {
		assert_int_equal(rc, -EOPNOTSUPP); /* no fixed I/O at all: nothing to pin */
		goto out;
	}
	assert_int_equal(rc, 0);
	kvt__nvme_pin_wait(n.t); /* the tier's own blocks, used by the open */
	struct kvt_tier_stats s0 = nvt_stats(&n);
	struct kvt__nvme_xstats x0 = nvt_xstats(&n), x;
	size_t la, lb;
	uint8_t *a = nvt_record(5, 100000, &la), *b = nvt_record(6, 128 << 10, &lb);
	const size_t ra = KVT_CHUNK_HDR_BYTES + 100000, rb = KVT_CHUNK_HDR_BYTES + (128 << 10);
	uint8_t *at_a = pool, *at_b = pool + R - (64 << 10); /* b crosses region 0's end */
	memcpy(at_a, a, la), memcpy(at_b, b, lb);
	uint64_t loc_a, loc_b;
	struct kvt_tier_id ia = nvt_id(5), ib = nvt_id(6);
	assert_int_equal(kvt_tier_nvme.write(n.t, at_a, ra, la, &loc_a), 0);
	kvt__nvme_pin_wait(n.t);
	x = nvt_xstats(&n);
	assert_int_equal(x.pin_failures, 0);
	assert_int_equal(x.pins - x0.pins, 1); /* region 0 */
	assert_true(x.plain_ios > x0.plain_ios);
	/* b: its pieces in region 0 fixed, in region 1 plain, and region 1 then pinned */
	uint64_t fixed = x.fixed_ios, plain = x.plain_ios;
	assert_int_equal(kvt_tier_nvme.write(n.t, at_b, rb, lb, &loc_b), 0);
	kvt__nvme_pin_wait(n.t);
	x = nvt_xstats(&n);
	assert_true(x.fixed_ios > fixed && x.plain_ios > plain);
	assert_int_equal(x.pins - x0.pins, 2);
	assert_int_equal(nvt_stats(&n).pinned_bytes - s0.pinned_bytes, 2 * R);
	/* read back where they were written: all fixed, the piece at region 0's end too */
	memset(at_a, 0, la), memset(at_b, 0, lb);
	plain = x.plain_ios;
	assert_int_equal(kvt_tier_nvme.read(n.t, &ia, loc_a, at_a, la), ra);
	assert_int_equal(kvt_tier_nvme.read(n.t, &ib, loc_b, at_b, lb), rb);
	assert_memory_equal(at_a, a, ra);
	assert_memory_equal(at_b, b, rb);
	assert_int_equal(nvt_xstats(&n).plain_ios, plain);
	/* region 2: plain the first time, pinned after, fixed the second time */
	uint8_t *at_b2 = pool + 2 * R;
	for (int i = 0; i < 2; i++) {
		memset(at_b2, 0, lb);
		assert_int_equal(kvt_tier_nvme.read(n.t, &ib, loc_b, at_b2, lb), rb);
		assert_memory_equal(at_b2, b, rb);
		kvt__nvme_pin_wait(n.t);
		x = nvt_xstats(&n);
		assert_true(i ? x.plain_ios == plain : x.plain_ios > plain);
		plain = x.plain_ios;
	}
	assert_int_equal(x.pins - x0.pins, 3);
	assert_int_equal(nvt_stats(&n).pinned_bytes - s0.pinned_bytes, 3 * R);
	assert_int_equal(x.pin_failures, 0);
	free(a), free(b);
out:
	munmap(pool, 3 * R);
	nvt_fini(&n);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    /* first: without privilege, the memory-lock the earlier tests' rings pinned is given
	     * back by io_uring's teardown, later; this one needs ~2 MiB of the 8 MiB default */
	    cmocka_unit_test(test_nvme_pins_regions),
	    cmocka_unit_test(test_nvme_roundtrip_reopen),
	    cmocka_unit_test(test_nvme_second_owner_refused),
	    cmocka_unit_test(test_nvme_fifo_reclaim),
	    cmocka_unit_test(test_nvme_geometry_is_the_logs),
	    cmocka_unit_test(test_nvme_hands_over_evictions),
	    cmocka_unit_test(test_nvme_hands_over_large_records),
	    cmocka_unit_test(test_nvme_evicts_ahead),
	    cmocka_unit_test(test_nvme_keeps_queued_handovers),
	    cmocka_unit_test(test_nvme_done_hint),
	    cmocka_unit_test(test_nvme_hand_over_refused),
	    cmocka_unit_test(test_nvme_remove_persists),
	    cmocka_unit_test(test_nvme_limits),
	    cmocka_unit_test(test_nvme_format_mismatch_rebuilds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
