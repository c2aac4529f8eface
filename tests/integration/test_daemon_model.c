/*
 * test_daemon_model.c -- kvtierd against a model of what one client stored. A real daemon
 * with three tiers (1 MiB host, nvme and rocksdb of 64 MiB: every chunk fits below host, so
 * nothing may be lost) takes long random sequences of every client call, each through one of
 * two clients of the same user (what one stores or deletes, the other sees at once): puts of
 * prefixes (kvt_put, or reserve and commit), lookups, gets, acquires held across other calls,
 * releases, deletes, done hints, keeps, prefetches, policy switches at run time (host to any
 * policy, parameters at the ends of their ranges, admission filters; rocksdb), and SIGTERM and
 * kill -9 restarts. The model is the set of keys put and not deleted since; a chunk's bytes are
 * a function of its key. After every call the daemon must agree with it exactly:
 *  - a put stores all it was given (with host admission on, a leading part); a lookup, get or
 *    acquire finds exactly the leading run of the model's keys, and every byte read is right;
 *  - a delete answers how many of its keys the model holds, and a deleted chunk never comes
 *    back: not from a lower tier, a demotion in flight, a promotion or a restart;
 *  - a leased chunk's bytes stay right until its release, which finds every lease valid;
 *  - after a restart, and at the end, every key of the model is found, and no other; after
 *    kill -9 (which may lose what was only at host, or a delete not yet below) every key found
 *    was put, with the right bytes.
 * As root, a quarter of the calls go to another tenant (uid 65534, a process of its own) that
 * stores the same keys with other bytes, checked against a model of its own: neither tenant
 * ever sees the other's chunks, nor loses one to the other's deletes; seeds 3 and 4 of every
 * four give both host quotas. Odd seeds run the cascade placement, even ones write-through with
 * nvme.policy=clock. Every third seed is lossy: nvme and rocksdb are too small for every chunk
 * (as root with quotas of their own), so they drop chunks, and the model knows only what may be
 * there: a chunk found must have been put and not deleted since, with the right bytes. Every
 * fourth seed runs on failing devices: the nvme tier fails 1 % of its I/Os each way (EIO,
 * EAGAIN, short transfers, busy submits) and rocksdb 1 % of its calls each way (a write
 * refused, a write applied and reported failed, a read that fails), with the lossy model. Its
 * restarts check that a store reported failed (which the injectors let land whole) never comes
 * back (DESIGN.md 4), nor a chunk deleted while a delete below failed.
 * Two things a longer run meets that CI's does not, once the nvme log has come round: a chunk
 * the engine said done (kvt_done) is dropped at reclaim without a hand-over (docs/nvme.md), so
 * once nvme has dropped a told record since it was told, such a chunk may be gone and the model
 * takes its absence (told_gone); and RocksDB without its WAL loses on kill -9 what nvme handed
 * over since its last flush (docs/rocksdb.md), so the crash loop runs it with the WAL where the
 * model is exact.
 */
#include "testlib.h"
#include "ipc/client/simple.h"
#include "kvtier.h"
#include "ipc/proto.h"
#include "sim.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PREFIXES 24
#define DEPTH    8
#define STEPS    1500
/* The fewest calls a seed makes for the checks that it reached every path (both tenants' keys
 * met, the lower tiers used): a run shortened by hand (KVT_MODEL_STEPS, KVT_CRASH_ROUNDS) may
 * not, and is held to the model alone. Valgrind's crash loop makes 500. */
#define MIN_COVERED 500
#define HOLDS       2 /* of at most ACQ_MAX chunks: a quarter of host stays leased at most */
#define ACQ_MAX     2

struct hold {
	kvt_client_t *c; /* the client that took the leases */
	kvt_lease_t l[DEPTH];
	kvt_id_t keys[DEPTH];
	int n;
};

struct run {
	struct kvt_test_daemon d;
	kvt_client_t *c, *cl[2]; /* c: the one this call goes through, of two of the same user */
	kvt_id_t ns, keys[PREFIXES][DEPTH];
	uint8_t present[PREFIXES][DEPTH], ever[PREFIXES][DEPTH]; /* ever: put at least once */
	/* told: kvt_done named it, and it has not been put anew since; told_at: the nvme tier's
	 * told evictions (over every life, told_seen when last asked) when it was told */
	uint8_t told[PREFIXES][DEPTH];
	long long told_at[PREFIXES][DEPTH], told_before, told_seen;
	int told_taken; /* told chunks found gone (told_gone) */
	int switches;   /* do_policy calls: every other one starts a recording, the next ends it */
	const char *sets[12];
	/* the other tenant (root only): its process, the pipes to it, and its own model */
	pid_t other;
	int to_other, from_other;
	uint8_t other_present[PREFIXES][DEPTH], other_ever[PREFIXES][DEPTH];
	long long demoted, promoted, evictions; /* summed over the daemon's lives */
	bool admission;        /* host admission on: a put may store only a leading part */
	bool lossy;            /* lower tiers too small to hold everything: present[] is "may be" */
	bool faults;           /* nvme and rocksdb fail 1 % of their calls (faults_env) */
	long long eagain_seen; /* the daemon's "eagain" count when last looked at (this life) */
	long long cut_seen;    /* and its "puts_cut" count */
	bool loaded;           /* the crash loop's load runs beside (load_run) */
	long asked_again;      /* short answers beside it asked again (short_beside_load) */
	size_t cb;
	uint8_t *buf[DEPTH], *want;
	struct hold holds[HOLDS];
	int n_holds;
	uint64_t rng;
	uint64_t seed; /* the run's, and its step: a failure names both (KVT_MODEL_SEED=N) */
	int step;
};

/* The tiers read these at open: the daemon's nvme and rocksdb tiers fail 1 % of their calls. */
static void faults_env(bool on)
{
	if (on) {
		setenv("KVTIER_NVME_FAULT_PPM", "10000", 1);
		setenv("KVTIER_ROCKSDB_FAULT_PPM", "10000", 1);
	} else {
		unsetenv("KVTIER_NVME_FAULT_PPM");
		unsetenv("KVTIER_ROCKSDB_FAULT_PPM");
	}
}

/* Odd seeds hand chunks down on eviction (cascade), even ones write each through to nvme with
 * nvme.policy=clock; as root, seeds 3 and 4 of every four give both tenants host quotas. Every
 * third seed is lossy: nvme and rocksdb are too small to hold every chunk (and, as root, have
 * quotas of their own), so they drop chunks, and the model only knows what may be there. */
static void make_sets(struct run *r, uint64_t seed, bool crash_loop, bool load)
{
	const char **v = r->sets;
	bool root = geteuid() == 0;
	r->faults = seed % 4 == 0;
	r->lossy = seed % 3 == 0 || r->faults;
	*v++ = "host.bytes=1MiB";
	/* kill -9 after the demotions landed finds every chunk of an exact model only if what nvme
	 * handed over to RocksDB (cascade) or dropped while RocksDB held it (write-through) is
	 * still in RocksDB: its WAL keeps the writes since its last flush */
	if (crash_loop && !r->lossy)
		*v++ = "rocksdb.wal=true";
	*v++ = r->lossy ? "nvme.bytes=6MiB" : "nvme.bytes=64MiB";
	*v++ = r->lossy ? "rocksdb.bytes=8MiB" : "rocksdb.bytes=64MiB";
	*v++ = "tiers.order=host,nvme,rocksdb";
	*v++ = seed % 2 ? "tiers.placement=cascade" : "tiers.placement=write-through";
	if (seed % 2 == 0)
		*v++ = "nvme.policy=clock";
	/* the crash loop's load (load_run, uid 65533) may hold one chunk at host (a record is a
	 * little over 64 KiB): at its maximum its puts evict its own, so the model's chunks keep
	 * the room they had without it */
	if (root && seed % 4 >= 2)
		*v++ = load ? "tenant.quota=0=256KiB/768KiB,65534=256KiB/768KiB,65533=0/128KiB"
		            : "tenant.quota=0=256KiB/768KiB,65534=256KiB/768KiB";
	else if (root && load)
		*v++ = "tenant.quota=65533=0/128KiB";
	if (root && r->lossy) {
		*v++ = "nvme.quota=0=1MiB/4MiB,65534=1MiB/4MiB";
		*v++ = "rocksdb.quota=0=1MiB/6MiB,65534=1MiB/6MiB";
	}
	*v = NULL;
}

static uint32_t rnd(struct run *r, uint32_t n)
{
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	return (uint32_t)(r->rng % n);
}

static uint64_t seed_of(kvt_id_t k)
{
	return k.w[0] ^ (k.w[1] << 1);
}

static kvt_model_t model(void)
{
	kvt_model_t m = {.name = "daemon-model",
	                 .dtype = KVT_DTYPE_F16,
	                 .n_layers = 1,
	                 .n_kv_heads = 8,
	                 .head_dim = 128,
	                 .tokens_per_chunk = 16};
	return m; /* 64 KiB chunks: 16 fill host */
}

static void connect_ns(struct run *r)
{
	kvt_model_t m = model();
	for (int k = 0; k < 2; k++) {
		assert_int_equal(kvt_connect(r->d.sock, &r->cl[k]), 0);
		assert_int_equal(kvt_namespace(r->cl[k], &m, &r->ns), 0);
	}
	r->c = r->cl[0];
	r->cb = kvt_chunk_bytes(&m);
	for (int p = 0; p < PREFIXES; p++) {
		uint32_t toks[DEPTH * 16];
		for (int i = 0; i < DEPTH * 16; i++)
			toks[i] = (uint32_t)(p * 7919 + i);
		assert_int_equal(kvt_chunk_keys(r->ns, toks, DEPTH * 16, 16, r->keys[p], DEPTH),
		                 DEPTH);
	}
}

/* Fails with the message, after the daemon's stats (what each tier did) for the log. */
#define FAIL(r, ...)                                                                               \
	do {                                                                                       \
		static char js_[1 << 15];                                                          \
		if (kvt_test_stats_json(&(r)->d, js_, sizeof(js_)) > 0)                            \
			fprintf(stderr, "stats: %s\n", js_);                                       \
		fprintf(stderr, "seed %llu step %d (KVT_MODEL_SEED=%llu replays it)\n",            \
		        (unsigned long long)(r)->seed, (r)->step, (unsigned long long)(r)->seed);  \
		fail_msg(__VA_ARGS__);                                                             \
	} while (0)

/* The leading run of row's first n keys (a prefix in a model). */
static int lead_of(const uint8_t *row, int n)
{
	int k = 0;
	while (k < n && row[k])
		k++;
	return k;
}

static int lead(const struct run *r, int p, int n)
{
	return lead_of(r->present[p], n);
}

/* Whether the daemon's count got agrees with the model's want: equal, or, where the tiers may
 * drop chunks (lossy), no more than the model allows: a chunk found was put and not deleted. */
static bool agrees(const struct run *r, int got, int want)
{
	return r->lossy ? got >= 0 && got <= want : got == want;
}

/* The nvme tier's told evictions over every life of the daemon (a CLI call: only when needed). */
static long long told_evictions(struct run *r)
{
	long long now = kvt_test_tier_stat(&r->d, "nvme", "told_evictions");
	return r->told_seen = r->told_before + (now > 0 ? now : 0);
}

/* Whether chunk i of prefix p, which the daemon did not find, may be gone because the engine
 * said it was done with it: nvme's log drops a told record at reclaim without handing it over,
 * and has dropped one since this chunk was told. If so the model takes the absence. */
static bool told_gone(struct run *r, int p, int i)
{
	if (!r->told[p][i] || told_evictions(r) <= r->told_at[p][i])
		return false;
	r->present[p][i] = r->told[p][i] = 0;
	r->told_taken++;
	return true;
}

/* agrees() for the leading run of n chunks of prefix p, where the first one missing may be a
 * told chunk gone (told_gone). */
static bool agrees_lead(struct run *r, int got, int p, int n)
{
	int want = lead(r, p, n);
	return agrees(r, got, want) || (got >= 0 && got < want && told_gone(r, p, got));
}

static bool right_bytes(struct run *r, kvt_id_t key, const void *got)
{
	kvt_test_fill(r->want, r->cb, seed_of(key));
	return !memcmp(r->want, got, r->cb);
}

/* A call the daemon may push back while host waits for demotions (-EAGAIN, -EINPROGRESS) is
 * tried again, as an engine would. */
static bool pushed_back(int rc)
{
	if (rc != -EAGAIN && rc != -EINPROGRESS)
		return false;
	usleep(2000);
	return true;
}

/* Whether the daemon gave up waiting for demotions (demote.wait_ms) since last asked: a put
 * that did stores only the leading part it had room for, as documented (a slow machine, or a
 * tool like valgrind, makes demotions outlast the default 100 ms). */
static bool waited_out(struct run *r)
{
	long long now = kvt_test_stat(&r->d, "eagain");
	bool grew = now > r->eagain_seen;
	r->eagain_seen = now;
	return grew;
}

/* Whether the daemon ended a put early since last asked: the host policy's first victim was
 * the put's own prefix, so the rest of it is not cached (ipc/daemon/store.c, put_evict_one). */
static bool cut_by_policy(struct run *r)
{
	long long now = kvt_test_stat(&r->d, "puts_cut");
	bool grew = now > r->cut_seen;
	r->cut_seen = now;
	return grew;
}

/* Whether a put of n chunks that stored rc may stop short of n: with host admission on, after
 * the daemon waited out demotions, or where the host policy ended it. */
static bool short_put_allowed(struct run *r, int rc, int n)
{
	if (rc < 0 || rc >= n)
		return false;
	bool waited = waited_out(r), cut = cut_by_policy(r);
	return r->admission || waited || cut;
}

/* The zero-copy put: chunks written straight into the client's staging area, then committed.
 * @return : as kvt_put; *n becomes the number of buffers the reserve handed out. */
static int put_reserved(struct run *r, int p, int *n)
{
	void *bufs[DEPTH];
	int k = kvt_put_reserve(r->c, r->ns, (size_t)*n, bufs);
	if (k < 1 || k > *n)
		FAIL(r, "reserve of %d chunks: %d", *n, k);
	for (int i = 0; i < k; i++)
		kvt_test_fill(bufs[i], r->cb, seed_of(r->keys[p][i]));
	*n = k;
	return kvt_put_commit(r->c, r->ns, NULL, r->keys[p], (size_t)k);
}

/* A put, through kvt_put or (one in four) reserve and commit. All of it is stored, unless
 * short_put_allowed: then a leading part of it. */
static void do_put(struct run *r, int p, int n)
{
	const void *ch[DEPTH];
	for (int i = 0; i < n; i++) {
		kvt_test_fill(r->buf[i], r->cb, seed_of(r->keys[p][i]));
		ch[i] = r->buf[i];
	}
	bool reserved = rnd(r, 4) == 0;
	int rc, tries = 0;
	while (pushed_back(
	           rc = reserved ? put_reserved(r, p, &n)
	                         : kvt_put(r->c, r->ns, NULL, r->keys[p], (size_t)n, ch, r->cb)) &&
	       ++tries < 1000)
		;
	if (rc != n && !short_put_allowed(r, rc, n))
		FAIL(r, "put of %d chunks of prefix %d%s: %d", n, p, reserved ? " (reserved)" : "",
		     rc);
	for (int i = 0; i < rc; i++)
		if (!r->present[p][i]) /* a new record: no one told it done */
			r->told[p][i] = 0;
	memset(r->present[p], 1, (size_t)rc);
	memset(r->ever[p], 1, (size_t)rc);
}

/* Beside the crash loop's load a get or acquire may come back short with every chunk still
 * there: a promotion found host full while the load's one chunk was leased or waiting to be
 * written, a miss the daemon's contract allows and the exact model does not. Such an answer is
 * asked again, up to 100 times 2 ms apart; a chunk that was lost stays short every time. */
static bool short_beside_load(struct run *r, int rc, int want, int *times)
{
	if (!r->loaded || r->lossy || rc < 0 || rc >= want || ++*times > 100)
		return false;
	r->asked_again++;
	return true;
}

static void do_get(struct run *r, int p, int n)
{
	void *dst[DEPTH];
	for (int i = 0; i < n; i++)
		dst[i] = r->buf[i];
	int rc, shorts = 0;
	for (;;) {
		int tries = 0;
		while (pushed_back(rc = kvt_get(r->c, r->ns, r->keys[p], (size_t)n, dst, r->cb)) &&
		       ++tries < 1000)
			;
		if (!short_beside_load(r, rc, lead(r, p, n), &shorts))
			break;
		usleep(2000);
	}
	if (!agrees_lead(r, rc, p, n))
		FAIL(r, "get of %d chunks of prefix %d: %d, the model holds %d", n, p, rc,
		     lead(r, p, n));
	for (int i = 0; i < rc; i++)
		if (!right_bytes(r, r->keys[p][i], r->buf[i]))
			FAIL(r, "get: wrong bytes in chunk %d of prefix %d", i, p);
}

static void do_acquire(struct run *r, int p, int n)
{
	struct hold *h = &r->holds[r->n_holds];
	int rc, shorts = 0;
	for (;;) {
		int tries = 0;
		while (pushed_back(rc = kvt_acquire(r->c, r->ns, r->keys[p], (size_t)n, h->l)) &&
		       ++tries < 1000)
			;
		if (!short_beside_load(r, rc, lead(r, p, n), &shorts))
			break;
		if (rc > 0 && kvt_release(r->c, h->l, (size_t)rc) != rc)
			FAIL(r, "release of a short acquire's %d leases", rc);
		usleep(2000);
	}
	if (!agrees_lead(r, rc, p, n))
		FAIL(r, "acquire of %d chunks of prefix %d: %d, the model holds %d", n, p, rc,
		     lead(r, p, n));
	for (int i = 0; i < rc; i++) {
		if (!right_bytes(r, r->keys[p][i], h->l[i].data))
			FAIL(r, "acquire: wrong bytes in chunk %d of prefix %d", i, p);
		h->keys[i] = r->keys[p][i];
	}
	h->n = rc;
	h->c = r->c;
	if (rc > 0)
		r->n_holds++;
}

/* Releases the oldest hold: its bytes are still right, and every lease stayed valid. */
static void do_release(struct run *r)
{
	struct hold *h = &r->holds[0];
	for (int i = 0; i < h->n; i++)
		if (!right_bytes(r, h->keys[i], h->l[i].data))
			FAIL(r, "a leased chunk changed under its lease");
	int rc = kvt_release(h->c, h->l, (size_t)h->n);
	if (rc != h->n)
		FAIL(r, "release of %d leases: %d valid", h->n, rc);
	memmove(&r->holds[0], &r->holds[1], sizeof(r->holds[0]) * (size_t)(r->n_holds - 1));
	r->n_holds--;
}

static void do_delete(struct run *r, int p, int i)
{
	int rc = kvt_delete(r->c, r->ns, &r->keys[p][i], 1);
	if (!agrees(r, rc, r->present[p][i]) && !(rc == 0 && told_gone(r, p, i)))
		FAIL(r, "delete of chunk %d of prefix %d: %d, the model holds %d", i, p, rc,
		     r->present[p][i]);
	r->present[p][i] = r->told[p][i] = 0;
}

/* `kvtier policy set`: host to any policy, with parameters at the ends of their ranges and
 * admission filters, or rocksdb to another policy. */
static void do_policy(struct run *r)
{
	static const char *const host[] = {"lru",
	                                   "arc admit=tinylfu",
	                                   "s3fifo small_ratio=0",
	                                   "s3fifo small_ratio=1 admit=none",
	                                   "sieve",
	                                   "lfu admit=second_touch",
	                                   "prefix admit=none",
	                                   "gdsf",
	                                   "lhd",
	                                   "conv orphan=0 leaf_first=0",
	                                   "conv admit=none",
	                                   "wtinylfu window_ratio=1",
	                                   "wtinylfu window_ratio=0 protected_ratio=1",
	                                   "hindsight",
	                                   "duel",
	                                   "duel z=0 window=0.5",
	                                   "auto admit=none"};
	static const char *const lower[] = {"lru", "arc", "s3fifo", "lfu", "conv", "wtinylfu"};
	const size_t n_host = sizeof(host) / sizeof(host[0]);
	char cmd[96], out[512];
	const char *h = host[rnd(r, (uint32_t)n_host)];
	if (rnd(r, 2))
		snprintf(cmd, sizeof(cmd), "set host %s", h);
	else
		snprintf(cmd, sizeof(cmd), "set rocksdb %s", lower[rnd(r, 6)]);
	int rc = kvt__client_simple(r->c, KVT_MSG_POLICY, cmd, out, sizeof(out));
	if (rc)
		FAIL(r, "policy %s: %d (%s)", cmd, rc, out);
	if (!strncmp(cmd, "set host", 8) && strstr(h, "admit="))
		r->admission = !strstr(h, "admit=none");
	/* and trace.file on or off, by turns (no draw: the seeds' calls stay as they were) */
	char set[400];
	if (r->switches++ % 2)
		snprintf(set, sizeof(set), "set trace.file none");
	else
		snprintf(set, sizeof(set), "set trace.file %s/model.trace", r->d.dir);
	if ((rc = kvt__client_simple(r->c, KVT_MSG_CONFIG, set, out, sizeof(out))))
		FAIL(r, "config %s: %d (%s)", set, rc, out);
}

/* What trace.file recorded over every life of the daemon, kill -9s included: a trace the
 * simulator loads, of no chunks but the run's keys (two tenants: at most twice them), and with
 * requests in it once the run is long enough to have switched (reach). */
static void check_recording(struct run *r, bool reach)
{
	char path[400], out[512];
	snprintf(path, sizeof(path), "%s/model.trace", r->d.dir);
	assert_int_equal(
	    kvt__client_simple(r->c, KVT_MSG_CONFIG, "set trace.file none", out, sizeof(out)), 0);
	struct stat st;
	if (stat(path, &st)) {
		assert_true(!reach || !r->switches);
		return; /* no switch came */
	}
	struct kvt_trace t;
	int rc = kvt_trace_load(path, &t);
	if (rc)
		FAIL(r, "the recording %s does not load: %d", path, rc);
	if (t.n_blocks > 2 * PREFIXES * DEPTH)
		FAIL(r, "the recording names %zu chunks, the run has %d keys", t.n_blocks,
		     PREFIXES * DEPTH);
	for (size_t q = 0; q < t.n_req; q++)
		if (t.req_off[q + 1] == t.req_off[q])
			FAIL(r, "request %zu of the recording is empty", q);
	print_message("seed %llu: %d switches; the recording holds %zu requests of %zu chunks\n",
	              (unsigned long long)r->seed, r->switches, t.n_req, t.n_blocks);
	assert_true(t.n_req > 0 || !reach);
	kvt_trace_free(&t);
}

/* Every key: found exactly when the model holds it, and its bytes right. */
static void sweep(struct run *r, const char *when)
{
	for (int p = 0; p < PREFIXES; p++)
		for (int i = 0; i < DEPTH; i++) {
			r->c = r->cl[(p + i) % 2];
			int rc = kvt_lookup(r->c, r->ns, &r->keys[p][i], 1);
			if (!agrees(r, rc, r->present[p][i]) && !(rc == 0 && told_gone(r, p, i)))
				FAIL(r, "%s: chunk %d of prefix %d: lookup %d, the model holds %d",
				     when, i, p, rc, r->present[p][i]);
			if (r->lossy) /* it holds what it found */
				r->present[p][i] = (uint8_t)rc;
			if (!rc)
				continue;
			void *dst[1] = {r->buf[0]};
			int tries = 0;
			while (
			    pushed_back(rc = kvt_get(r->c, r->ns, &r->keys[p][i], 1, dst, r->cb)) &&
			    ++tries < 1000)
				;
			if (!agrees(r, rc, 1) ||
			    (rc == 1 && !right_bytes(r, r->keys[p][i], r->buf[0])))
				FAIL(r, "%s: chunk %d of prefix %d: get %d, or wrong bytes", when,
				     i, p, rc);
		}
}

/*
 * The other tenant: a process of uid 65534 (root only) that makes the calls the parent sends it
 * over a pipe, through its own client. Its chunks have the same keys as this user's and other
 * bytes (OTHER_SALT), so a chunk served across tenants shows up as wrong bytes, and a delete
 * or a quota of one tenant that touched the other's chunks shows up in its model.
 */
enum { O_PUT, O_LOOKUP, O_GET, O_DELETE, O_RECONNECT, O_QUIT };
#define OTHER_SALT  0xb0b0b0b0b0ULL
#define WRONG_BYTES (-1000)

struct ocall {
	int op, p, i, n; /* keys[p][i .. i + n) */
};

static int other_do(struct run *r, const struct ocall *o)
{
	kvt_id_t *k = &r->keys[o->p][o->i];
	void *dst[DEPTH];
	const void *ch[DEPTH];
	int rc, tries = 0;
	switch (o->op) {
	case O_PUT:
		for (int i = 0; i < o->n; i++) {
			kvt_test_fill(r->buf[i], r->cb, seed_of(k[i]) ^ OTHER_SALT);
			ch[i] = r->buf[i];
		}
		while (pushed_back(rc = kvt_put(r->c, r->ns, NULL, k, (size_t)o->n, ch, r->cb)) &&
		       ++tries < 1000)
			;
		return rc;
	case O_LOOKUP:
		return kvt_lookup(r->c, r->ns, k, (size_t)o->n);
	case O_GET:
		for (int i = 0; i < o->n; i++)
			dst[i] = r->buf[i];
		while (pushed_back(rc = kvt_get(r->c, r->ns, k, (size_t)o->n, dst, r->cb)) &&
		       ++tries < 1000)
			;
		for (int i = 0; i < rc; i++) {
			kvt_test_fill(r->want, r->cb, seed_of(k[i]) ^ OTHER_SALT);
			if (memcmp(r->want, r->buf[i], r->cb))
				return WRONG_BYTES;
		}
		return rc;
	case O_DELETE:
		return kvt_delete(r->c, r->ns, k, (size_t)o->n);
	case O_RECONNECT:
		kvt_close(r->cl[0]);
		kvt_close(r->cl[1]);
		connect_ns(r);
		return 0;
	}
	return -EINVAL;
}

static void other_main(struct run *r, int in, int out)
{
	connect_ns(r); /* r is the child's copy: its own clients and buffers */
	struct ocall o;
	while (read(in, &o, sizeof(o)) == (ssize_t)sizeof(o) && o.op != O_QUIT) {
		int rc = other_do(r, &o);
		if (write(out, &rc, sizeof(rc)) != (ssize_t)sizeof(rc))
			break;
	}
	_exit(0);
}

static void other_start(struct run *r)
{
	int to[2], from[2];
	kvt_test_open_to_others(&r->d);
	assert_int_equal(pipe(to), 0);
	assert_int_equal(pipe(from), 0);
	r->other = kvt_test_fork_as_nobody();
	assert_true(r->other >= 0);
	if (!r->other) {
		close(to[1]);
		close(from[0]);
		other_main(r, to[0], from[1]);
	}
	close(to[0]);
	close(from[1]);
	r->to_other = to[1];
	r->from_other = from[0];
}

static int other(struct run *r, int op, int p, int i, int n)
{
	struct ocall o = {op, p, i, n};
	int rc;
	if (write(r->to_other, &o, sizeof(o)) != (ssize_t)sizeof(o) ||
	    read(r->from_other, &rc, sizeof(rc)) != (ssize_t)sizeof(rc))
		FAIL(r, "the other tenant's process is gone");
	return rc;
}

static void other_stop(struct run *r)
{
	struct ocall o = {.op = O_QUIT};
	int st;
	assert_int_equal(write(r->to_other, &o, sizeof(o)), sizeof(o));
	assert_int_equal(waitpid(r->other, &st, 0), r->other);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(r->to_other);
	close(r->from_other);
	r->other = 0;
}

/* One call of the other tenant, checked against its own model. */
static void other_step(struct run *r, int p, int n)
{
	int i = (int)rnd(r, DEPTH), want, rc;
	switch (rnd(r, 4)) {
	case 0:
		rc = other(r, O_PUT, p, 0, n);
		if (rc != n && !short_put_allowed(r, rc, n))
			FAIL(r, "other tenant: put of %d chunks of prefix %d: %d", n, p, rc);
		memset(r->other_present[p], 1, (size_t)rc);
		memset(r->other_ever[p], 1, (size_t)rc);
		break;
	case 1:
		rc = other(r, O_LOOKUP, p, 0, n);
		if (!agrees(r, rc, want = lead_of(r->other_present[p], n)))
			FAIL(r, "other tenant: lookup of %d of prefix %d: %d, its model holds %d",
			     n, p, rc, want);
		break;
	case 2:
		rc = other(r, O_GET, p, 0, n);
		if (!agrees(r, rc, want = lead_of(r->other_present[p], n)))
			FAIL(r,
			     "other tenant: get of %d of prefix %d: %d (%d: wrong bytes), its "
			     "model holds %d",
			     n, p, rc, WRONG_BYTES, want);
		break;
	default:
		rc = other(r, O_DELETE, p, i, 1);
		if (!agrees(r, rc, r->other_present[p][i]))
			FAIL(r, "other tenant: delete of chunk %d of prefix %d: %d, its model %d",
			     i, p, rc, r->other_present[p][i]);
		r->other_present[p][i] = 0;
	}
}

/* The other tenant's every key: found exactly when its model holds it (after kill -9: only if
 * it was put, and the model takes what is found), with its own bytes. */
static void other_sweep(struct run *r, const char *when, bool kill9)
{
	for (int p = 0; p < PREFIXES; p++)
		for (int i = 0; i < DEPTH; i++) {
			int rc = other(r, O_LOOKUP, p, i, 1);
			if (kill9 && rc >= 0 && rc <= r->other_ever[p][i])
				r->other_present[p][i] = (uint8_t)rc;
			if (!agrees(r, rc, r->other_present[p][i]))
				FAIL(r,
				     "%s: the other tenant's chunk %d of prefix %d: lookup %d, "
				     "its model holds %d",
				     when, i, p, rc, r->other_present[p][i]);
			if (r->lossy)
				r->other_present[p][i] = (uint8_t)rc;
			if (rc && !agrees(r, rc = other(r, O_GET, p, i, 1), 1))
				FAIL(r, "%s: the other tenant's chunk %d of prefix %d: get %d",
				     when, i, p, rc);
		}
}

/* Adds what the tiers did in this life of the daemon (its counters start again at a restart). */
static void count_tiers(struct run *r)
{
	r->demoted += kvt_test_stat(&r->d, "demoted");
	r->promoted += kvt_test_stat(&r->d, "promoted");
	r->evictions += kvt_test_stat(&r->d, "evictions");
	long long told = kvt_test_tier_stat(&r->d, "nvme", "told_evictions");
	r->told_before += told > 0 ? told : 0;
	/* no policy proposed a leased chunk, or one in a tier job, as a victim */
	assert_int_equal(kvt_test_stat(&r->d, "victims_refused"), 0);
}

/* After kill -9 the chunks only at host are gone, and a delete may not have reached a lower
 * tier: what is found must have been put, with the right bytes; the model takes what is found.
 * With durable (the kill came once every demotion had landed, and the lower tiers hold every
 * chunk) no chunk of the model may be missing: each was on nvme or, handed over, in RocksDB's
 * WAL (make_sets), which kill -9 cannot undo -- unless it was told done and nvme's log has
 * dropped told records since (told_gone). */
static void resync(struct run *r, bool durable)
{
	int held = 0;
	for (int p = 0; p < PREFIXES; p++)
		for (int i = 0; i < DEPTH; i++) {
			int rc = kvt_lookup(r->c, r->ns, &r->keys[p][i], 1);
			if (rc < 0 || rc > r->ever[p][i])
				FAIL(r, "after kill -9: chunk %d of prefix %d: lookup %d, put %d",
				     i, p, rc, r->ever[p][i]);
			if (durable && r->present[p][i] && rc != 1 && !told_gone(r, p, i))
				FAIL(r, "after kill -9: chunk %d of prefix %d was demoted; lost", i,
				     p);
			held += durable && r->present[p][i];
			r->present[p][i] = (uint8_t)rc;
		}
	if (durable)
		print_message(
		    "kill -9 after the demotions landed: all %d chunks of the model found\n", held);
	sweep(r, "after kill -9");
}

static void restart(struct run *r, bool kill9, bool durable)
{
	while (r->n_holds)
		do_release(r);
	if (durable) /* every demotion landed: what the model holds is below host */
		assert_int_equal(kvt_test_stat_wait(&r->d, "dirty_bytes", 0, 0), 0);
	count_tiers(r);
	if (kill9) /* nvme's told evictions after count_tiers looked go uncounted: count one */
		r->told_before++;
	kvt_close(r->cl[0]);
	kvt_close(r->cl[1]);
	kvt_test_daemon_stop(&r->d, kill9 ? SIGKILL : SIGTERM);
	chmod(r->d.dir, 0750); /* the daemon starts only in a directory others cannot enter */
	r->admission = false;  /* policy set does not outlive the daemon */
	faults_env(r->faults);
	assert_int_equal(kvt_test_daemon_restart(&r->d, r->sets), 0);
	faults_env(false);
	r->eagain_seen = r->cut_seen = 0; /* a new life counts from 0 */
	connect_ns(r);
	if (kill9)
		resync(r, durable);
	else
		sweep(r, "after a restart");
	if (r->other) {
		kvt_test_open_to_others(&r->d);
		assert_int_equal(other(r, O_RECONNECT, 0, 0, 0), 0);
		other_sweep(r, kill9 ? "after kill -9" : "after a restart", kill9);
	}
}

/* Load beside the crash loop (D3 "under concurrent load", root only): another tenant's process
 * (uid 65533) puts and gets chunks of 16 keys of its own without pause, reconnecting whenever the
 * daemon is killed, and checks the bytes of every hit. Its host quota (make_sets: at most one
 * chunk) keeps it from taking the room the model's gets count on: without it a promotion of the
 * model's found no room in the 1 MiB host, a miss the daemon's contract allows and the exact
 * model does not. It pauses (and says so) while a durable kill waits for the demotions to land. */
struct load {
	int stop, pause, paused;
	long puts, hits, wrong, reconnects;
};

static void load_run(const char *sock, struct load *L)
{
	kvt_model_t m = model();
	size_t cb = kvt_chunk_bytes(&m);
	uint8_t *buf = malloc(cb), *got = malloc(cb);
	kvt_client_t *c = NULL;
	kvt_id_t ns;
	uint64_t x = 0x51ed27ull;
	for (uint64_t i = 0; !__atomic_load_n(&L->stop, __ATOMIC_ACQUIRE); i++) {
		if (__atomic_load_n(&L->pause, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&L->paused, 1, __ATOMIC_RELEASE);
			while (__atomic_load_n(&L->pause, __ATOMIC_ACQUIRE) &&
			       !__atomic_load_n(&L->stop, __ATOMIC_ACQUIRE))
				usleep(1000);
			__atomic_store_n(&L->paused, 0, __ATOMIC_RELEASE);
			continue;
		}
		if (!c) {
			if (kvt_connect(sock, &c) || kvt_namespace(c, &m, &ns)) {
				if (c)
					kvt_close(c);
				c = NULL;
				usleep(5000);
				continue;
			}
			__atomic_add_fetch(&L->reconnects, 1, __ATOMIC_RELAXED);
		}
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		kvt_id_t key = {{i % 16, 0xb0b0}}, old = {{x % 16, 0xb0b0}};
		kvt_test_fill(buf, cb, key.w[0] * 31 + 7);
		const void *src[1] = {buf};
		void *dst[1] = {got};
		int rc = kvt_put(c, ns, NULL, &key, 1, src, cb);
		if (rc == 1)
			__atomic_add_fetch(&L->puts, 1, __ATOMIC_RELAXED);
		if (rc >= 0 || rc == -EAGAIN)
			rc = kvt_get(c, ns, &old, 1, dst, cb);
		if (rc == 1) {
			kvt_test_fill(buf, cb, old.w[0] * 31 + 7);
			__atomic_add_fetch(&L->hits, 1, __ATOMIC_RELAXED);
			if (memcmp(buf, got, cb))
				__atomic_add_fetch(&L->wrong, 1, __ATOMIC_RELAXED);
		} else if (rc < 0 && rc != -EAGAIN) { /* the daemon is gone: connect again */
			kvt_close(c);
			c = NULL;
		}
	}
	if (c)
		kvt_close(c);
	free(buf);
	free(got);
}

static void load_pause(struct load *L, bool on)
{
	__atomic_store_n(&L->pause, on, __ATOMIC_RELEASE);
	for (int i = 0; on && i < 5000 && !__atomic_load_n(&L->paused, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	assert_true(!on || __atomic_load_n(&L->paused, __ATOMIC_ACQUIRE));
}

/* seed's run; crash_every > 0: a crash loop, kill -9 and a restart every crash_every calls and
 * no other restart (and no policy switch: second_touch admission would keep a chunk off nvme). */
static void run_seed(uint64_t seed, int steps, int crash_every)
{
	int kills = 0;
	static struct run r;
	memset(&r, 0, sizeof(r));
	r.rng = seed * 0x9e3779b97f4a7c15ULL | 1;
	r.seed = seed;
	print_message("seed %llu%s\n", (unsigned long long)seed,
	              crash_every ? " (crash loop)" : "");
	make_sets(&r, seed, crash_every != 0, crash_every && geteuid() == 0);
	faults_env(r.faults);
	assert_int_equal(kvt_test_daemon_start(&r.d, r.sets), 0);
	faults_env(false);
	connect_ns(&r);
	for (int i = 0; i < DEPTH; i++)
		r.buf[i] = malloc(r.cb);
	r.want = malloc(r.cb);
	if (geteuid() == 0)
		other_start(&r);
	struct load *L = NULL;
	pid_t loader = 0;
	if (crash_every && geteuid() != 0)
		print_message(
		    "seed %llu: no load beside the crash loop: it needs a tenant of its own "
		    "(uid 65533), which only root can start\n",
		    (unsigned long long)seed);
	if (crash_every && geteuid() == 0) {
		L = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		assert_true(L != MAP_FAILED);
		memset(L, 0, sizeof(*L));
		if (!(loader = fork())) {
			/* a tenant of its own, capped at host (make_sets); it goes with the test */
			if (kvt_test_become(65533))
				_exit(126);
			load_run(r.d.sock, L);
			_exit(0);
		}
		r.loaded = true;
	}
	for (int step = 0; step < steps; step++) {
		r.step = step;
		int p = (int)rnd(&r, PREFIXES), n = 1 + (int)rnd(&r, DEPTH);
		uint32_t k = rnd(&r, 1000);
		r.c = r.cl[rnd(&r, 2)];
		if (r.other && rnd(&r, 4) == 0) {
			other_step(&r, p, n);
		} else if (k < 250) {
			do_put(&r, p, n);
		} else if (k < 450) {
			int rc = kvt_lookup(r.c, r.ns, r.keys[p], (size_t)n);
			if (!agrees_lead(&r, rc, p, n))
				FAIL(&r, "lookup of %d chunks of prefix %d: %d, the model holds %d",
				     n, p, rc, lead(&r, p, n));
		} else if (k < 600) {
			do_get(&r, p, n);
		} else if (k < 700 && r.n_holds < HOLDS) {
			do_acquire(&r, p, n < ACQ_MAX ? n : ACQ_MAX);
		} else if (k < 760 && r.n_holds) {
			do_release(&r);
		} else if (k < 840) {
			do_delete(&r, p, (int)rnd(&r, DEPTH));
		} else if (k < 880) {
			assert_int_equal(kvt_done(r.c, r.ns, r.keys[p], (size_t)n), 0);
			for (int i = 0; i < n; i++)
				if (r.present[p][i] && !r.told[p][i]) {
					r.told[p][i] = 1;
					r.told_at[p][i] = r.told_seen; /* at most the count now */
				}
		} else if (k < 910) {
			int rc = kvt_keep(r.c, r.ns, r.keys[p], (size_t)n, rnd(&r, 100));
			if (rc != -ENOSPC && (rc < 0 || rc > n))
				FAIL(&r, "keep of %d chunks: %d", n, rc);
		} else if (k < 940) {
			assert_int_equal(kvt_prefetch(r.c, r.ns, r.keys[p], (size_t)n), 0);
		} else if (k < 960 && !crash_every) {
			do_policy(&r);
		} else if (k < 962 && !crash_every) {
			restart(&r, false, false);
		} else if (k < 963 && !crash_every) {
			restart(&r, true, false);
		}
		if (crash_every && step % crash_every == crash_every - 1) {
			/* every other kill once the demotions have landed (then nothing the model
			 * holds may be lost), the rest at once, with demotions and promotions in
			 * flight */
			bool durable = kills % 2 && !r.lossy;
			if (durable)
				load_pause(L, true); /* else its puts keep demotions coming */
			restart(&r, true, durable);
			if (durable)
				load_pause(L, false);
			kvt_test_check_books(&r.d, 0);
			kills++;
		}
		if (step % 250 == 249) /* the daemon's books, with leases held and jobs running */
			kvt_test_check_books(&r.d, 0);
	}
	if (L) {
		__atomic_store_n(&L->stop, 1, __ATOMIC_RELEASE);
		int st;
		assert_int_equal(waitpid(loader, &st, 0), loader);
		print_message(
		    "seed %llu: %d kills of kvtierd; beside it the load put %ld chunks, read "
		    "%ld back (%ld wrong) and reconnected %ld times; %ld short answers to "
		    "the model asked again\n",
		    (unsigned long long)seed, kills, L->puts, L->hits, L->wrong, L->reconnects,
		    r.asked_again);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		assert_int_equal(L->wrong, 0);
		assert_true(L->puts > kills && L->hits > kills);
		assert_true(2 * L->reconnects >= kills); /* it met the kills (half, of 2 too) */
		munmap(L, 4096);
	}
	while (r.n_holds)
		do_release(&r);
	sweep(&r, "at the end");
	if (r.told_taken)
		print_message("seed %llu: %d chunks told done were gone (nvme dropped %lld told "
		              "records)\n",
		              (unsigned long long)seed, r.told_taken, told_evictions(&r));
	const bool reach = steps >= MIN_COVERED; /* long enough to be held to every path */
	if (r.other) {
		other_sweep(&r, "at the end", false);
		other_stop(&r);
		int both = 0; /* keys both tenants stored: isolation was put to the test */
		for (int p = 0; p < PREFIXES; p++)
			for (int i = 0; i < DEPTH; i++)
				both += r.ever[p][i] && r.other_ever[p][i];
		assert_true(both > PREFIXES || !reach);
	}
	count_tiers(&r); /* the lower tiers were used */
	assert_true((r.evictions > 0 && r.demoted > 0 && r.promoted > 0) || !reach);
	assert_int_equal(kvt_test_stat(&r.d, "corruptions"), 0);
	kvt_test_check_books(&r.d, 1);
	check_recording(&r, reach);
	for (int i = 0; i < DEPTH; i++)
		free(r.buf[i]);
	free(r.want);
	kvt_close(r.cl[0]);
	kvt_close(r.cl[1]);
	kvt_test_daemon_destroy(&r.d);
}

/* The seeds a test runs: 1 to n, or KVT_MODEL_SEED=N alone (a failure's, or a soak's). */
static void seeds_to_run(uint64_t n, uint64_t *first, uint64_t *last)
{
	uint64_t only = kvt_test_env_u64("KVT_MODEL_SEED", 0);
	*first = only ? only : 1;
	*last = only ? only : n;
}

static void test_daemon_model_random_calls(void **state)
{
	(void)state;
	uint64_t first, last; /* 4 seeds: the third is lossy, the fourth fails */
	seeds_to_run(kvt_test_env_u64("KVT_MODEL_SEEDS", 4), &first, &last);
	int steps = (int)kvt_test_env_u64("KVT_MODEL_STEPS", STEPS);
	for (uint64_t s = first; s <= last; s++)
		run_seed(s, steps, 0);
}

/*
 * RELIABILITY D3: a crash loop, 50 rounds in each of two seeds (100 kills; 10 a seed under
 * make valgrind): 50 random calls (puts, gets, acquires held, deletes, keeps, prefetches), then
 * kill -9 of kvtierd, a restart, and the whole model checked, while (as root) another tenant's
 * process loads the daemon all the while (load_run): every chunk found was put and has the right
 * bytes, and when the kill came after every demotion had landed (every other time), every chunk
 * of the model is there; the load reads 0 wrong bytes and meets the kills. kvtier check after
 * each restart. Seed 1 (cascade) and seed 2 (write-through, nvme clock); KVT_MODEL_SEED=N runs
 * seed N's instead (odd: cascade, even: write-through), as it replays the random calls' seed N.
 * KVT_CRASH_ROUNDS=N and KVT_CRASH_CALLS=N change the rounds a seed and the calls a round, for
 * the catalogue's longer loads by hand.
 */
static void test_daemon_model_crash_loop(void **state)
{
	(void)state;
	/* under valgrind, fewer rounds */
	uint64_t rounds = kvt_test_env_in("KVT_CRASH_ROUNDS",
	                                  getenv("KVT_TEST_DAEMON_WRAPPER") ? 10 : 50, 1, 10000u);
	uint64_t calls = kvt_test_env_in("KVT_CRASH_CALLS", 50, 1, 1000000u);
	uint64_t first, last;
	seeds_to_run(2, &first, &last);
	for (uint64_t s = first; s <= last; s++)
		run_seed(s, (int)(rounds * calls), (int)calls);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_daemon_model_random_calls),
	    cmocka_unit_test(test_daemon_model_crash_loop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
