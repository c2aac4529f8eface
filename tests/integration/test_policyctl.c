/*
 * test_policyctl.c -- the host tier's policy switched at run time keeps every cached chunk;
 * parameters are checked; bad names change nothing; the miss-ratio curve answers. The same for
 * the rocksdb tier below host (its policy from the options, switched at run time, its curve fed
 * by the host misses that reach it), and a tier without a policy (nvme) says so. kvtier config
 * get|set: the running options, and runtime changes through the same paths.
 */
#include "testlib.h"
#include "ipc/client/simple.h"
#include "kvtier.h"
#include "put_chain.h"
#include "ipc/proto.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct kvt_test_daemon d;

static int setup(void **state)
{
	const char *sets[] = {"host.bytes=4MiB", NULL};
	return kvt_test_daemon_start(&d, sets);
}

static int teardown(void **state)
{
	kvt_test_daemon_destroy(&d);
	return 0;
}

/* 64 KiB chunks */
static kvt_model_t model(const char *name)
{
	kvt_model_t m = {.name = name,
	                 .dtype = KVT_DTYPE_F16,
	                 .n_layers = 1,
	                 .n_kv_heads = 8,
	                 .head_dim = 128,
	                 .tokens_per_chunk = 16};
	return m;
}

/* A namespace of model(name), and in keys the keys of the first n chunks of one token chain. */
static kvt_id_t chain_keys(kvt_client_t *c, const char *name, kvt_id_t *keys, size_t n)
{
	kvt_model_t m = model(name);
	kvt_id_t ns;
	uint32_t *toks = malloc(n * 16 * sizeof(*toks));
	assert_non_null(toks);
	for (size_t i = 0; i < n * 16; i++)
		toks[i] = (uint32_t)i;
	assert_int_equal(kvt_namespace(c, &m, &ns), 0);
	assert_int_equal(kvt_chunk_keys(ns, toks, n * 16, 16, keys, n), n);
	free(toks);
	return ns;
}

/* Starts *pd with sets and connects to it. @return : the client. */
static kvt_client_t *start_client(struct kvt_test_daemon *pd, const char *const *sets)
{
	kvt_client_t *c;
	assert_int_equal(kvt_test_daemon_start(pd, sets), 0);
	assert_int_equal(kvt_connect(pd->sock, &c), 0);
	return c;
}

static int policy(kvt_client_t *c, const char *cmd, char *out, size_t len)
{
	out[0] = 0;
	return kvt__client_simple(c, KVT_MSG_POLICY, cmd, out, len);
}

static void test_policyctl_switch_keeps_chunks(void **state)
{
	kvt_client_t *c;
	assert_int_equal(kvt_connect(d.sock, &c), 0);
	kvt_model_t m = model("pol");
	kvt_id_t keys[160], ns = chain_keys(c, "pol", keys, 160);
	uint32_t toks[4 * 16];
	for (size_t i = 0; i < 4 * 16; i++)
		toks[i] = (uint32_t)i;
	size_t cb = kvt_chunk_bytes(&m);
	uint8_t *buf = calloc(1, cb);
	const void *ch[32];
	for (int i = 0; i < 32; i++)
		ch[i] = buf;
	assert_int_equal(kvt_put(c, ns, NULL, keys, 32, ch, cb), 32);
	kvt_lease_t l[32];
	assert_int_equal(kvt_acquire(c, ns, keys, 32, l), 32); /* accesses feed the curve */
	assert_int_equal(kvt_release(c, l, 32), 32);

	char out[2048];
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host lru");
	assert_int_equal(kvt_test_stat(&d, "curve_bytes"), 0); /* LRU's curve is SHARDS's */
	const char *names[] = {"s3fifo", "arc",  "sieve",     "lfu",  "prefix",
	                       "gdsf",   "conv", "hindsight", "duel", "lru"};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "set host %s", names[k]);
		assert_int_equal(policy(c, cmd, out, sizeof(out)), 0);
		assert_int_equal(kvt_lookup(c, ns, keys, 32), 32); /* nothing dropped */
	}
	/* a value of many digits is shown as it was set, so get's words set it back exactly (it
	 * was shown to 7 digits: sample=1.343521e+07, which set takes as 13435210) */
	assert_int_equal(policy(c, "set host duel sample=13435208.4", out, sizeof(out)), 0);
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	if (!strstr(out, " sample=13435208.4 "))
		fail_msg("policy get host: %s", out);
	assert_int_equal(policy(c, "set host s3fifo small_ratio=0.2", out, sizeof(out)), 0);
	assert_int_equal(policy(c, "set host nosuch", out, sizeof(out)), -ENOENT);
	assert_int_equal(policy(c, "set host lru bogus=1", out, sizeof(out)), -ENOENT);
	/* a value out of range is refused with the range; what get shows, set takes back */
	assert_int_equal(policy(c, "set host s3fifo small_ratio=2", out, sizeof(out)), -EINVAL);
	assert_string_equal(out, "s3fifo: small_ratio=2: not a number from 0 to 1");
	assert_int_equal(
	    policy(c, "set host s3fifo small_ratio=0.2 move_threshold=1", out, sizeof(out)), 0);
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	/* failed switches changed nothing; get shows the parameters as set takes them */
	assert_string_equal(out, "host s3fifo small_ratio=0.2 move_threshold=1");
	assert_int_equal(policy(c, "get nvme", out, sizeof(out)), -ENOENT); /* not configured */
	assert_int_equal(policy(c, "frobnicate", out, sizeof(out)), -EINVAL);
	/* a word too many, from a client other than the CLI: refused, where host's was said */
	assert_int_equal(policy(c, "get host nvme", out, sizeof(out)), -EINVAL);
	assert_string_equal(out, "usage: kvtier policy get TIER (one tier)");
	assert_int_equal(policy(c, "mrc host nvme", out, sizeof(out)), -EINVAL);
	assert_string_equal(out, "usage: kvtier mrc TIER (one tier)");

	/* the new policy evicts: 4 MiB holds < 64 chunks of 68 KiB (prefixes of their own: a
	 * put never evicts its own prefix) */
	for (int b = 1; b < 5; b++)
		assert_int_equal(kvt_put(c, ns, NULL, keys + b * 32, 32, ch, cb), 32);
	assert_true(kvt_test_stat(&d, "evictions") > 0);
	assert_int_equal(kvt_lookup(c, ns, keys + 128, 32), 32);
	assert_int_equal(kvt_acquire(c, ns, keys, 32, l), 0); /* evicted: a miss at the root */

	assert_int_equal(policy(c, "mrc host", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "0.5x"));
	assert_non_null(strstr(out, "sampling 100 %")); /* few keys: exact */
	char got[256], runs[96];
	assert_int_equal(policy(c, "get host", got, sizeof(got)), 0);
	char *running = strchr(got, ' ') + 1; /* "host NAME k=v ...": the name */
	running[strcspn(running, " ")] = 0;
	snprintf(runs, sizeof(runs), "this one runs %s:", running);
	assert_non_null(strstr(out, runs)); /* the curve says it is LRU's, and what runs */
	/* and the running policy's own curve, by miniature simulation: ~60 chunks fit, so the
	 * five instances replay every acquire (rate 100 %) */
	snprintf(runs, sizeof(runs), "\n%s ", running);
	assert_non_null(strstr(out, runs));
	if (!strstr(out, "own curve, by miniature simulation of 60 chunks at 1x: rate 100 %"))
		fail_msg("mrc host: %s", out);
	/* a namespace of chunks a quarter the size: the tier holds ~4x more, the curve is remade */
	kvt_model_t quarter = m;
	quarter.name = "pol-quarter";
	quarter.n_kv_heads = 2;
	kvt_id_t nq, kq[4];
	assert_int_equal(kvt_namespace(c, &quarter, &nq), 0);
	assert_int_equal(kvt_chunk_keys(nq, toks, 4 * 16, 16, kq, 4), 4);
	assert_int_equal(kvt_acquire(c, nq, kq, 4, l), 0);
	assert_int_equal(policy(c, "mrc host", out, sizeof(out)), 0);
	if (!strstr(out, "own curve, by miniature simulation of 204 chunks at 1x"))
		fail_msg("mrc host: %s", out);
	/* duel: get shows which expert leads, and set hands the tier to one; its own curve is five
	 * duels, replayed on the curve's worker like any other policy's */
	assert_int_equal(policy(c, "set host duel", out, sizeof(out)), 0);
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host duel window=8 sample=16384 z=3 lead=0");
	assert_int_equal(policy(c, "set host duel lead=1", out, sizeof(out)), 0);
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host duel window=8 sample=16384 z=3 lead=1");
	assert_int_equal(kvt_lookup(c, ns, keys + 128, 32), 32);     /* nothing dropped */
	assert_int_equal(kvt_acquire(c, ns, keys + 128, 32, l), 32); /* the curve samples them */
	assert_int_equal(kvt_release(c, l, 32), 32);
	assert_int_equal(policy(c, "mrc host", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "this one runs duel:"));
	if (!strstr(out, "\nduel ") ||
	    !strstr(out, "own curve, by miniature simulation of 204 chunks at 1x"))
		fail_msg("mrc host: %s", out);
	/* five duels of 0.5x-8x 204 chunks: each entry a few hundred bytes (docs/policies.md) */
	long long held = kvt_test_stat(&d, "curve_bytes");
	if (held < 100 * 1024 || held > 16 << 20)
		fail_msg("curve_bytes %lld", held);
	free(buf);
	kvt_close(c);
}

/* The own curve after a fixed run of acquires under conv, from a daemon whose mini-simulations
 * may keep `queue` keys waiting; *samples gets the sampled accesses it counts. */
static void own_curve_after_acquires(const char *queue, char *curve, size_t len,
                                     unsigned long long *samples, long long *on_worker)
{
	char q[64];
	snprintf(q, sizeof(q), "mrc.minisim_queue=%s", queue);
	const char *sets[] = {"host.bytes=4MiB", "host.policy=conv", q, NULL};
	struct kvt_test_daemon pd;
	kvt_client_t *c = start_client(&pd, sets);
	kvt_model_t m = model("pol-queue");
	kvt_id_t keys[64], ns = chain_keys(c, "pol-queue", keys, 64);
	size_t cb = kvt_chunk_bytes(&m);
	uint8_t *buf = calloc(1, cb);
	const void *ch[16];
	for (int i = 0; i < 16; i++)
		ch[i] = buf;
	assert_int_equal(kvt_put(c, ns, NULL, keys, 16, ch, cb), 16); /* host holds chunks */
	kvt_lease_t l[16];
	/* chains that come back, branch and run past what the curve's 1x holds (~60 chunks); a
	 * chain read from its middle numbers its depths from there */
	long long want = 0; /* keys acquired: what the curve replays */
	for (unsigned i = 0; i < 300; i++) {
		unsigned at = (i * 7) % 48, n = 4 + i % 13;
		want += n;
		int got = kvt_acquire(c, ns, keys + at, n, l);
		assert_true(got >= 0);
		assert_int_equal(kvt_release(c, l, (size_t)got), got);
	}
	free(buf);
	/* the stats read the curve as it stands, so the worker may still be replaying: with the
	 * default queue it takes every key (the caller asserts it), and each key is replayed once,
	 * on the worker or on the loop thread */
	if (!strcmp(queue, "65536"))
		kvt_test_stat_wait(&pd, "curve_keys_worker", want, 0);
	*on_worker = kvt_test_stat(&pd, "curve_keys_worker");
	assert_int_equal(*on_worker + kvt_test_stat(&pd, "curve_keys_loop"), want);
	char out[2048];
	assert_int_equal(policy(c, "mrc host", out, sizeof(out)), 0);
	const char *own = strstr(out, "\nconv ");
	const char *n = own ? strstr(own, " sampled accesses, ") : NULL; /* own's, not LRU's */
	if (!own || !n)
		fail_msg("mrc host (queue %s): %s", queue, out);
	while (n > out && n[-1] >= '0' && n[-1] <= '9')
		n--;
	*samples = strtoull(n, NULL, 10);
	snprintf(curve, len, "%.*s", (int)strcspn(own + 1, "\n"), own + 1);
	kvt_close(c);
	kvt_test_daemon_destroy(&pd);
}

/* The host curve's mini-simulations replay acquires on a worker thread (curvework.c), or in
 * the acquire once mrc.minisim_queue keys wait: the curve `mrc host` reads is the same either
 * way, every acquired key counted, in the order acquired. */
static void test_policyctl_curve_replays_later(void **state)
{
	(void)state;
	unsigned long long keys = 0;
	for (unsigned i = 0; i < 300; i++)
		keys += 4 + i % 13;
	char inline_curve[256], later[256], overflow[256];
	unsigned long long n_inline, n_later, n_overflow;
	long long w_inline, w_later, w_overflow;
	own_curve_after_acquires("0", inline_curve, sizeof(inline_curve), &n_inline, &w_inline);
	own_curve_after_acquires("65536", later, sizeof(later), &n_later, &w_later);
	own_curve_after_acquires("1", overflow, sizeof(overflow), &n_overflow,
	                         &w_overflow); /* each overflows */
	assert_int_equal(w_inline, 0);         /* no worker without a queue */
	assert_int_equal(w_later, keys);       /* every key off the loop thread */
	assert_int_equal(n_inline, keys);
	assert_int_equal(n_later, keys);
	assert_int_equal(n_overflow, keys);
	assert_string_equal(later, inline_curve);
	assert_string_equal(overflow, inline_curve);
	assert_string_not_equal(inline_curve, "conv     0.0000  0.0000  0.0000  0.0000  0.0000");
	print_message("%s (%llu sampled accesses)\n", inline_curve, n_inline);
}

/* The worker is woken once 256 keys wait, or naps 20 ms past the first of fewer: a few keys
 * that come after it emptied the queue and fell asleep are replayed too, not left waiting
 * for the next 256 (a first version of the nap did that). */
static void test_policyctl_curve_worker_takes_a_few(void **state)
{
	(void)state;
	const char *sets[] = {"host.bytes=4MiB", "host.policy=conv", NULL};
	struct kvt_test_daemon pd;
	kvt_client_t *c = start_client(&pd, sets);
	kvt_id_t keys[16], ns = chain_keys(c, "pol-few", keys, 16);
	kvt_lease_t l[16];
	for (long long want = 4; want <= 12; want += 4) { /* three rounds, the worker asleep */
		assert_int_equal(kvt_acquire(c, ns, keys + want - 4, 4, l), 0);
		assert_int_equal(kvt_test_stat_wait(&pd, "curve_keys_worker", want, 0), want);
	}
	assert_int_equal(kvt_test_stat(&pd, "curve_keys_loop"), 0);
	kvt_close(c);
	kvt_test_daemon_destroy(&pd);
}

static void test_policyctl_lower_tiers(void **state)
{
	enum { N = 96 }; /* 6 MiB against a 2 MiB host tier */
	const char *sets[] = {"host.bytes=2MiB",        "tiers.order=host,rocksdb",
	                      "rocksdb.bytes=64MiB",    "rocksdb.policy=s3fifo",
	                      "mrc.sample_ppm=1000000", NULL};
	struct kvt_test_daemon ld;
	kvt_client_t *c = start_client(&ld, sets);
	kvt_model_t m = model("low");
	kvt_id_t ns, keys[N];
	uint32_t toks[N * 16];
	for (size_t i = 0; i < N * 16; i++)
		toks[i] = (uint32_t)i * 7 + 3;
	assert_int_equal(kvt_namespace(c, &m, &ns), 0);
	assert_int_equal(kvt_chunk_keys(ns, toks, N * 16, 16, keys, N), N);
	size_t cb = kvt_chunk_bytes(&m);
	kvt_test_put_chain(c, ns, keys, N, cb, 500);
	assert_true(kvt_test_stat_wait(&ld, "demoted", N, 1) >= N);

	char out[2048];
	assert_int_equal(policy(c, "get rocksdb", out, sizeof(out)), 0);
	assert_string_equal(
	    out, "rocksdb s3fifo small_ratio=0.1 move_threshold=1"); /* from rocksdb.policy */
	assert_int_equal(policy(c, "set rocksdb lfu max_count=100", out, sizeof(out)), 0);
	assert_string_equal(out, "rocksdb lfu max_count=100");
	assert_int_equal(policy(c, "set rocksdb nosuch", out, sizeof(out)), -ENOENT);
	assert_int_equal(policy(c, "set rocksdb sieve bogus=1", out, sizeof(out)), -ENOENT);
	assert_int_equal(policy(c, "set rocksdb", out, sizeof(out)), -EINVAL);
	assert_int_equal(policy(c, "get rocksdb", out, sizeof(out)), 0);
	assert_string_equal(out, "rocksdb lfu max_count=100"); /* failed switches changed nothing */
	assert_int_equal(policy(c, "get rocksdb host", out, sizeof(out)), -EINVAL);
	char js[1 << 14];
	assert_true(kvt_test_stats_json(&ld, js, sizeof(js)) > 0);
	assert_non_null(
	    strstr(js, "\"name\":\"rocksdb\",\"backend\":\"rocksdb\",\"policy\":\"lfu\""));
	assert_int_equal(policy(c, "get nvme", out, sizeof(out)), -ENOENT);
	assert_non_null(strstr(out, "tiers.order"));
	assert_int_equal(policy(c, "mrc rocksdb", out, sizeof(out)), -EAGAIN); /* no read yet */

	/* nothing dropped: every chunk is a byte-identical hit, most promoted from rocksdb */
	assert_int_equal(kvt_lookup(c, ns, keys, N), N);
	uint8_t *got = malloc(cb), *want = malloc(cb);
	for (size_t i = 0; i < N; i++) {
		void *dst[1] = {got};
		assert_int_equal(kvt_get(c, ns, &keys[i], 1, dst, cb), 1);
		kvt_test_fill(want, cb, 500 + i);
		assert_memory_equal(got, want, cb);
	}
	assert_true(kvt_test_stat(&ld, "promoted") > 0);

	/* Every read that reached rocksdb was of a chunk written there before, well within its
	 * size: the curve says ~1 at 1x (demotions count as writes, not as cold misses). */
	assert_int_equal(policy(c, "mrc rocksdb", out, sizeof(out)), 0);
	print_message("%s", out);
	double h[5];
	const char *row = strstr(out, "hit");
	assert_non_null(row);
	assert_int_equal(sscanf(row, "hit %lf %lf %lf %lf %lf", &h[0], &h[1], &h[2], &h[3], &h[4]),
	                 5);
	assert_true(h[1] > 0.95 && h[1] <= 1.0);
	/* the same curve in the tier's stats (and so in its Prometheus gauges) */
	assert_true(kvt_test_stats_json(&ld, js, sizeof(js)) > 0);
	const char *rj = strstr(js, "\"name\":\"rocksdb\""), *x1 = NULL;
	if (rj)
		x1 = strstr(rj, "{\"size\":\"1x\",\"lru_hit_ratio\":");
	assert_non_null(x1);
	assert_true(fabs(strtod(x1 + strlen("{\"size\":\"1x\",\"lru_hit_ratio\":"), NULL) - h[1]) <
	            1e-4);
	/* what the tier's own curve holds: five lfu instances of 0.5x-8x 963 chunks */
	long long held = kvt_test_tier_stat(&ld, "rocksdb", "curve_bytes"); /* -1: absent */
	if (held < 64 * 1024 || held > 64 << 20)
		fail_msg("rocksdb curve_bytes %lld", held);
	/* and lfu's own curve below it: the switch to lfu remade it before these reads, from the
	 * chunks rocksdb held then, so it says ~1 at 1x too (started empty, it read ~0) */
	const char *own = strstr(out, "\nlfu ");
	if (!own ||
	    !strstr(out,
	            "(lfu's own curve, by miniature simulation of 963 chunks at 1x: rate 100 %"))
		fail_msg("mrc rocksdb: %s", out);
	assert_int_equal(
	    sscanf(own, "\nlfu %lf %lf %lf %lf %lf", &h[0], &h[1], &h[2], &h[3], &h[4]), 5);
	assert_true(h[1] > 0.95 && h[1] <= 1.0);
	free(got);
	free(want);
	kvt_close(c);
	kvt_test_daemon_destroy(&ld);

	/* nvme's log is reclaimed as fifo (the default) or clock: get and set say so, a switch
	 * keeps every record, and the tier's own curve is the running one's */
	const char *nv[] = {"host.bytes=2MiB", "tiers.order=host,nvme", "nvme.bytes=16MiB",
	                    "mrc.sample_ppm=1000000", NULL};
	assert_int_equal(kvt_test_daemon_start(&ld, nv), 0);
	assert_int_equal(kvt_connect(ld.sock, &c), 0);
	assert_int_equal(policy(c, "get nvme", out, sizeof(out)), 0);
	assert_string_equal(out, "nvme fifo");
	assert_int_equal(policy(c, "set nvme lru", out, sizeof(out)), -ENOENT);
	assert_non_null(strstr(out, "fifo or clock"));
	assert_int_equal(policy(c, "set nvme clock k=1", out, sizeof(out)), -ENOENT);
	assert_non_null(strstr(out, "no parameters"));
	assert_int_equal(kvt_namespace(c, &m, &ns), 0);
	kvt_test_put_chain(c, ns, keys, N, cb, 500);
	assert_true(kvt_test_stat_wait(&ld, "demoted", N, 1) >= N);
	got = malloc(cb);
	want = malloc(cb);
	for (size_t i = 0; i < 8; i++) { /* the oldest: host evicted them, nvme serves them */
		void *dst[1] = {got};
		assert_int_equal(kvt_get(c, ns, &keys[i], 1, dst, cb), 1);
	}
	assert_int_equal(policy(c, "mrc nvme", out, sizeof(out)), 0);
	if (!strstr(out, "runs fifo") || !strstr(out, "(fifo's own curve, by miniature simulation"))
		fail_msg("mrc nvme: %s", out);
	assert_int_equal(policy(c, "set nvme clock", out, sizeof(out)), 0);
	assert_string_equal(out, "nvme clock");
	assert_int_equal(kvt_test_cli(&ld, "config get nvme.policy", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "nvme.policy = clock"));
	for (size_t i = 0; i < N; i++) { /* the switch dropped nothing */
		void *dst[1] = {got};
		assert_int_equal(kvt_get(c, ns, &keys[i], 1, dst, cb), 1);
		kvt_test_fill(want, cb, 500 + i);
		assert_memory_equal(got, want, cb);
	}
	assert_int_equal(policy(c, "mrc nvme", out, sizeof(out)), 0);
	if (!strstr(out, "(clock's own curve, by miniature simulation"))
		fail_msg("mrc nvme: %s", out);
	free(got);
	free(want);
	kvt_close(c);
	kvt_test_daemon_destroy(&ld);
	const char *bad[] = {"tiers.order=host,nvme", "nvme.bytes=16MiB", "nvme.policy=lru", NULL};
	assert_true(kvt_test_daemon_start(&ld, bad) != 0); /* a log cannot run lru */
}

/* Puts keys one at a time, each chained to the one before; @return : how many were stored. */
static int put_each(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n, size_t cb)
{
	uint8_t *buf = calloc(1, cb);
	const void *ch[1] = {buf};
	int stored = 0;
	for (size_t i = 0; i < n; i++) {
		int rc = kvt_put(c, ns, i ? &keys[i - 1] : NULL, &keys[i], 1, ch, cb);
		assert_true(rc == 0 || rc == 1);
		stored += rc;
	}
	free(buf);
	return stored;
}

/* host.admit: tinylfu keeps a new chain from pushing out a frequently read one (which the same
 * puts do push out with admission off); second_touch stores a chunk on its second put; a bad
 * name changes nothing. */
static void test_policyctl_host_admission(void **state)
{
	enum { A = 16, B = 64 };
	const char *sets[] = {"host.bytes=2MiB", "host.admit=tinylfu", NULL};
	struct kvt_test_daemon ad;
	kvt_client_t *c = start_client(&ad, sets);
	kvt_model_t m = model("adm");
	kvt_id_t ns, keys[A + 3 * B];
	uint32_t toks[(A + 3 * B) * 16 + 5]; /* chains B, C, D start 5 tokens in */
	for (size_t i = 0; i < sizeof(toks) / sizeof(toks[0]); i++)
		toks[i] = (uint32_t)i * 13 + 1;
	assert_int_equal(kvt_namespace(c, &m, &ns), 0);
	assert_int_equal(kvt_chunk_keys(ns, toks, A * 16, 16, keys, A), A); /* chain A */
	for (int k = 0; k < 3; k++) /* chains B, C, D: other prefixes */
		assert_int_equal(kvt_chunk_keys(ns, toks + (A + k * B) * 16 + 5, B * 16, 16,
		                                keys + A + k * B, B),
		                 B);
	size_t cb = kvt_chunk_bytes(&m);
	char out[512];
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host lru admit=tinylfu");

	assert_int_equal(put_each(c, ns, keys, A, cb), A);
	kvt_lease_t l[A];
	for (int r = 0; r < 3; r++) { /* A is read often */
		assert_int_equal(kvt_acquire(c, ns, keys, A, l), A);
		assert_int_equal(kvt_release(c, l, A), A);
	}
	int stored = put_each(c, ns, keys + A, B, cb); /* B: new, read never */
	assert_true(stored > 0 && stored < B);         /* admitted while there was room */
	assert_true(kvt_test_stat(&ad, "not_admitted") >= B - stored);
	assert_int_equal(kvt_lookup(c, ns, keys, A), A); /* A kept */

	assert_int_equal(policy(c, "set host lru admit=none", out, sizeof(out)), 0);
	assert_string_equal(out, "host lru");
	/* C, in one put: in from its start as far as host holds it (a put never evicts its own
	 * prefix) */
	uint8_t *zero = calloc(1, cb);
	const void *ch[B];
	for (int i = 0; i < B; i++)
		ch[i] = zero;
	int in = kvt_put(c, ns, NULL, keys + A + B, B, ch, cb);
	free(zero);
	assert_true(in > A);
	assert_int_equal(kvt_lookup(c, ns, keys + A + B, B), in);
	assert_true(kvt_lookup(c, ns, keys, A) < A); /* and A pushed out */

	assert_int_equal(policy(c, "set host lru admit=second_touch", out, sizeof(out)), 0);
	assert_string_equal(out, "host lru admit=second_touch");
	kvt_id_t *dk = keys + A + 2 * B;
	assert_int_equal(put_each(c, ns, dk, 1, cb), 0); /* first put: turned away */
	assert_int_equal(kvt_lookup(c, ns, dk, 1), 0);
	assert_int_equal(put_each(c, ns, dk, 1, cb), 1); /* second: stored */
	assert_int_equal(kvt_lookup(c, ns, dk, 1), 1);

	assert_int_equal(policy(c, "set host sieve admit=bogus", out, sizeof(out)), -ENOENT);
	assert_int_equal(policy(c, "set host nosuch admit=tinylfu", out, sizeof(out)), -ENOENT);
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host lru admit=second_touch"); /* refused: nothing changed */
	kvt_close(c);
	kvt_test_daemon_destroy(&ad);

	const char *bad[] = {"host.admit=bogus", NULL};
	assert_true(kvt_test_daemon_start(&ad, bad) != 0); /* a bad name stops the start */
	kvt_test_daemon_destroy(&ad);
}

/* The config form, one parameter a line: host.policy = s3fifo, host.policy.small_ratio =
 * 0.2; a parameter the policy does not have stops the start. */
static void test_policyctl_config_params(void **state)
{
	const char *ok[] = {"host.policy=s3fifo", "host.policy.small_ratio=0.2",
	                    "host.policy.move_threshold=2", NULL};
	struct kvt_test_daemon pd;
	assert_int_equal(kvt_test_daemon_start(&pd, ok), 0);
	kvt_client_t *c;
	char out[256];
	assert_int_equal(kvt_connect(pd.sock, &c), 0);
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host s3fifo small_ratio=0.2 move_threshold=2");
	kvt_close(c);
	kvt_test_daemon_destroy(&pd);
	const char *bad[] = {"host.policy=s3fifo", "host.policy.bogus=1", NULL};
	assert_true(kvt_test_daemon_start(&pd, bad) != 0);
	kvt_test_daemon_destroy(&pd);
}

static int config(kvt_client_t *c, const char *cmd, char *out, size_t len)
{
	out[0] = 0;
	return kvt__client_simple(c, KVT_MSG_CONFIG, cmd, out, len);
}

/* Puts n chunks of a fresh chain; @return : not_admitted's growth. */
static uint64_t put_fresh(kvt_client_t *c, struct kvt_test_daemon *pd, kvt_id_t ns, uint32_t base,
                          size_t n, size_t cb)
{
	uint32_t toks[8 * 16];
	kvt_id_t keys[8];
	assert_true(n <= 8);
	for (size_t i = 0; i < n * 16; i++)
		toks[i] = base + (uint32_t)i;
	assert_int_equal(kvt_chunk_keys(ns, toks, n * 16, 16, keys, n), n);
	uint64_t before = kvt_test_stat(pd, "not_admitted");
	kvt_test_put_chain(c, ns, keys, n, cb, base);
	return kvt_test_stat(pd, "not_admitted") - before;
}

/* kvtier config: get shows the effective options; set changes a runtime option through its
 * owner (a policy switch keeps the chunks; an admission filter changes what is demoted at once)
 * and refuses the rest with a reason, changing nothing. */
static void test_policyctl_config_runtime(void **state)
{
	/* written through, so that a put meets both tiers' admission (cascading, rocksdb fills
	 * from nvme's evictions alone: test_tiers_cascade) */
	const char *sets[] = {
	    "host.bytes=2MiB",     "tiers.order=host,nvme,rocksdb", "nvme.bytes=16MiB",
	    "rocksdb.bytes=64MiB", "tiers.placement=write-through", NULL};
	struct kvt_test_daemon pd;
	kvt_client_t *c = start_client(&pd, sets);
	static char out[8192];
	assert_int_equal(config(c, "get", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "\nhost.admit = none\n")); /* was "" (copied onto itself) */
	assert_non_null(strstr(out, "\nnvme.admit = all\n"));
	assert_non_null(strstr(out, "\nrocksdb.policy = auto\n"));
	/* rocksdb.policy = auto: arc, then conv once a namespace of 64 KiB chunks registers */
	assert_int_equal(policy(c, "get rocksdb", out, sizeof(out)), 0);
	assert_string_equal(out, "rocksdb arc (auto)");
	kvt_model_t m = model("cfg");
	kvt_id_t ns;
	assert_int_equal(kvt_namespace(c, &m, &ns), 0);
	assert_int_equal(policy(c, "get rocksdb", out, sizeof(out)), 0);
	assert_string_equal(
	    out, "rocksdb conv (auto) walk=1 leaf_first=1 horizon=1 orphan=0.5 strict=1");
	assert_true(kvt_test_stats_json(&pd, out, sizeof(out)) > 0);
	assert_non_null(
	    strstr(out, "\"name\":\"rocksdb\",\"backend\":\"rocksdb\",\"policy\":\"conv\""));
	assert_int_equal(config(c, "get rocksdb.policy", out, sizeof(out)), 0);
	assert_string_equal(out, "rocksdb.policy = auto");
	assert_int_equal(policy(c, "set rocksdb auto max_count=1", out, sizeof(out)), -EINVAL);
	size_t cb = kvt_chunk_bytes(&m);
	assert_int_equal(put_fresh(c, &pd, ns, 1000, 8, cb), 0);

	/* refused, each with its reason, and nothing changed */
	assert_int_equal(config(c, "set host.bytes 1GiB", out, sizeof(out)), -EPERM);
	assert_non_null(strstr(out, "restart"));
	assert_int_equal(config(c, "set nosuch 1", out, sizeof(out)), -ENOENT);
	assert_int_equal(config(c, "set nvme.admit maybe", out, sizeof(out)), -EINVAL);
	assert_int_equal(config(c, "set lease.timeout_ms 0", out, sizeof(out)), -ERANGE);
	assert_int_equal(config(c, "set log.level loud", out, sizeof(out)), -EINVAL);
	assert_int_equal(config(c, "set host.policy nosuch", out, sizeof(out)), -ENOENT);
	assert_int_equal(config(c, "set host.policy", out, sizeof(out)), -EINVAL);
	assert_int_equal(config(c, "get nvme.admit", out, sizeof(out)), 0);
	assert_string_equal(out, "nvme.admit = all");
	assert_int_equal(config(c, "get lease.timeout_ms", out, sizeof(out)), 0);
	assert_string_equal(out, "lease.timeout_ms = 30000");

	/* the host policy and its parameters, as `kvtier policy set` would; no chunk dropped */
	assert_int_equal(config(c, "set host.policy s3fifo", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy = s3fifo");
	assert_int_equal(config(c, "set host.policy.small_ratio 0.2", out, sizeof(out)), 0);
	assert_int_equal(config(c, "set host.policy.bogus 1", out, sizeof(out)), -ENOENT);
	assert_int_equal(config(c, "get host.policy_params", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy_params = small_ratio=0.2");
	/* the option reads every parameter set on the running policy, whichever command set it:
	 * a key again replaces its value, `policy set` with the running name adds its words, a
	 * whole list is merged in (what it leaves out keeps its value), and a switch starts over */
	assert_int_equal(config(c, "set host.policy.small_ratio 0.25", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy_params = small_ratio=0.25");
	assert_int_equal(policy(c, "set host s3fifo move_threshold=2", out, sizeof(out)), 0);
	assert_int_equal(config(c, "get host.policy_params", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy_params = small_ratio=0.25 move_threshold=2");
	assert_int_equal(config(c, "set host.policy_params small_ratio=0.2", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy_params = small_ratio=0.2 move_threshold=2");
	assert_int_equal(config(c, "set host.policy_params small_ratio=x", out, sizeof(out)),
	                 -EINVAL);
	assert_int_equal(policy(c, "set host s3fifo small_ratio", out, sizeof(out)), -EINVAL);
	assert_int_equal(config(c, "get host.policy_params", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy_params = small_ratio=0.2 move_threshold=2");
	assert_int_equal(policy(c, "set host lru", out, sizeof(out)), 0);
	assert_int_equal(config(c, "get host.policy_params", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy_params = ");
	assert_int_equal(policy(c, "set host s3fifo small_ratio=0.2", out, sizeof(out)), 0);
	assert_int_equal(config(c, "get host.policy_params", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy_params = small_ratio=0.2");
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host s3fifo small_ratio=0.2 move_threshold=1");
	kvt_id_t keys[8];
	uint32_t toks[8 * 16];
	for (size_t i = 0; i < 8 * 16; i++)
		toks[i] = 1000 + (uint32_t)i;
	assert_int_equal(kvt_chunk_keys(ns, toks, 8 * 16, 16, keys, 8), 8);
	assert_int_equal(kvt_lookup(c, ns, keys, 8), 8);

	/* the rocksdb policy; a parameter set alone keeps the policy's name */
	assert_int_equal(config(c, "set rocksdb.policy lfu", out, sizeof(out)), 0);
	assert_int_equal(config(c, "set rocksdb.policy.max_count 100", out, sizeof(out)), 0);
	assert_int_equal(policy(c, "get rocksdb", out, sizeof(out)), 0);
	assert_string_equal(out, "rocksdb lfu max_count=100");
	assert_int_equal(config(c, "get rocksdb.policy", out, sizeof(out)), 0);
	assert_string_equal(out, "rocksdb.policy = lfu");
	assert_int_equal(policy(c, "set rocksdb lfu max_count=50", out, sizeof(out)), 0);
	assert_int_equal(config(c, "get rocksdb.policy_params", out, sizeof(out)), 0);
	assert_string_equal(out, "rocksdb.policy_params = max_count=50");
	/* and back to auto: conv again, its parameters gone, every chunk kept */
	assert_int_equal(policy(c, "set rocksdb auto", out, sizeof(out)), 0);
	assert_int_equal(policy(c, "get rocksdb", out, sizeof(out)), 0);
	assert_string_equal(
	    out, "rocksdb conv (auto) walk=1 leaf_first=1 horizon=1 orphan=0.5 strict=1");
	assert_int_equal(config(c, "get rocksdb.policy_params", out, sizeof(out)), 0);
	assert_string_equal(out, "rocksdb.policy_params = ");
	assert_int_equal(kvt_lookup(c, ns, keys, 8), 8);

	/* demotion admission takes effect on the next put: nvme skips it, rocksdb does not */
	assert_int_equal(config(c, "set nvme.admit second_touch", out, sizeof(out)), 0);
	assert_int_equal(put_fresh(c, &pd, ns, 2000, 4, cb), 4);
	assert_int_equal(config(c, "set rocksdb.admit second_touch", out, sizeof(out)), 0);
	assert_int_equal(put_fresh(c, &pd, ns, 3000, 4, cb), 8);
	assert_int_equal(config(c, "set nvme.admit all", out, sizeof(out)), 0);
	assert_int_equal(config(c, "set rocksdb.admit all", out, sizeof(out)), 0);
	assert_int_equal(put_fresh(c, &pd, ns, 4000, 4, cb), 0);

	/* a lower tier's quota (test_ipc_nvme_quota and test_rocksdb_quota_runtime show it kept):
	 * the accounts start from what the tier holds, a bad list is refused, none ends it */
	/* 12 demotions into nvme, 16 into rocksdb (written through; none of the 3000s) */
	assert_true(kvt_test_stat_wait(&pd, "demoted", 28, 1) >= 28);
	assert_true(kvt_test_stats_json(&pd, out, sizeof(out)) > 0);
	assert_null(strstr(out, "\"guaranteed_bytes\":1048576"));
	assert_int_equal(config(c, "set rocksdb.quota 0=1MiB/32MiB", out, sizeof(out)), 0);
	assert_int_equal(config(c, "set rocksdb.quota 0=1GiB/1MiB", out, sizeof(out)), -EINVAL);
	assert_non_null(strstr(
	    out, "rocksdb.quota: bad sizes for 0: its guarantee 1GiB is above its maximum 1MiB"));
	assert_int_equal(config(c, "set rocksdb.quota 0=lots/1MiB", out, sizeof(out)), -EINVAL);
	assert_non_null(strstr(out, "rocksdb.quota: bad sizes for 0: 'lots' is not a size"));
	assert_int_equal(config(c, "set nvme.quota 0=9MiB/16MiB", out, sizeof(out)), -EINVAL);
	assert_int_equal(config(c, "set nvme.quota 0=1MiB/16MiB", out, sizeof(out)), 0);
	assert_int_equal(config(c, "get rocksdb.quota", out, sizeof(out)), 0);
	assert_string_equal(out, "rocksdb.quota = 0=1MiB/32MiB");
	assert_true(kvt_test_stats_json(&pd, out, sizeof(out)) > 0);
	const char *rq = strstr(out, "\"name\":\"rocksdb\""),
	           *nq = strstr(out, "\"name\":\"nvme\"");
	assert_non_null(rq);
	assert_non_null(nq);
	const char *ru = strstr(rq, "\"tenant_usage\":[{\"tenant\":0,\"used_bytes\":");
	assert_non_null(ru);
	assert_true(strtoll(ru + strlen("\"tenant_usage\":[{\"tenant\":0,\"used_bytes\":"), NULL,
	                    10) >= 16 * (long long)cb);
	assert_non_null(strstr(ru, "\"guaranteed_bytes\":1048576,\"max_bytes\":33554432"));
	assert_non_null(strstr(nq, "\"guaranteed_bytes\":1048576,\"max_bytes\":16777216"));
	assert_int_equal(config(c, "set rocksdb.quota none", out, sizeof(out)), 0);
	assert_int_equal(config(c, "set nvme.quota none", out, sizeof(out)), 0);
	assert_true(kvt_test_stats_json(&pd, out, sizeof(out)) > 0);
	assert_null(strstr(out, "\"guaranteed_bytes\":1048576"));

	assert_int_equal(config(c, "set log.level debug", out, sizeof(out)), 0);
	assert_int_equal(config(c, "set lease.timeout_ms 5000", out, sizeof(out)), 0);
	assert_int_equal(config(c, "set host.dirty_pct 0", out, sizeof(out)), -ERANGE);
	assert_int_equal(config(c, "set host.dirty_pct 30", out, sizeof(out)), 0);
	assert_int_equal(config(c, "get", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "\nlog.level = debug\n"));
	assert_non_null(strstr(out, "\nlease.timeout_ms = 5000\n"));
	assert_non_null(strstr(out, "\nhost.dirty_pct = 30\n"));

	/* the CLI: the same answers, one line each, and exit 1 with the reason on a refusal */
	assert_int_equal(kvt_test_cli(&pd, "config get", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "host.policy = s3fifo\n"));
	assert_int_equal(kvt_test_cli(&pd, "config set host.policy lru", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy = lru\n");
	assert_int_equal(kvt_test_cli(&pd, "config set host.bytes 1GiB", out, sizeof(out)), 1);
	assert_non_null(strstr(out, "read at start only"));
	assert_int_equal(kvt_test_cli(&pd, "config", out, sizeof(out)), 1);
	kvt_close(c);
	kvt_test_daemon_destroy(&pd);

	const char *bad[] = {"tiers.order=host,rocksdb", "rocksdb.bytes=64MiB",
	                     "rocksdb.admit=maybe", NULL};
	assert_true(kvt_test_daemon_start(&pd, bad) != 0); /* a bad admission stops the start */
	kvt_test_daemon_destroy(&pd);
}

/* host.policy = auto (the default outside the tests): lru until a namespace registers, conv
 * while every namespace's chunks are 64 KiB or more, lru again once a smaller one registers;
 * each switch keeps every chunk. An operator's choice ends auto; setting auto again resumes it. */
static void test_policyctl_auto(void **state)
{
	const char *sets[] = {"host.bytes=8MiB", "host.policy=auto", "tiers.order=host,rocksdb",
	                      "rocksdb.bytes=64MiB", NULL};
	struct kvt_test_daemon pd;
	kvt_client_t *c = start_client(&pd, sets);
	static char out[4096];
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host lru (auto)");
	assert_int_equal(config(c, "get host.policy", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy = auto");
	/* a blank parameter list sets nothing, and auto stays (it ended auto, fixing lru) */
	assert_int_equal(config(c, "set host.policy_params  ", out, sizeof(out)), 0);
	assert_int_equal(config(c, "get host.policy", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy = auto");

	kvt_model_t big = model("auto-big"); /* 64 KiB chunks */
	kvt_id_t nb, ns;
	assert_int_equal(kvt_namespace(c, &big, &nb), 0);
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out,
	                    "host conv (auto) walk=1 leaf_first=1 horizon=1 orphan=0.5 strict=1");
	assert_int_equal(policy(c, "get rocksdb", out, sizeof(out)), 0);
	/* rocksdb.policy = auto follows */
	assert_string_equal(
	    out, "rocksdb conv (auto) walk=1 leaf_first=1 horizon=1 orphan=0.5 strict=1");
	size_t cb = kvt_chunk_bytes(&big);
	assert_int_equal(cb, 64 << 10);
	assert_int_equal(put_fresh(c, &pd, nb, 5000, 8, cb), 0);
	uint32_t toks[8 * 16];
	kvt_id_t keys[8];
	for (size_t i = 0; i < 8 * 16; i++)
		toks[i] = 5000 + (uint32_t)i;
	assert_int_equal(kvt_chunk_keys(nb, toks, 8 * 16, 16, keys, 8), 8);
	assert_int_equal(kvt_lookup(c, nb, keys, 8), 8);
	assert_int_equal(kvt_test_cli(&pd, "tier enable rocksdb", out, sizeof(out)), 1);
	assert_string_equal(out, "kvtier: tier rocksdb is never disabled by device errors (it "
	                         "reopens itself), so there is nothing to enable\n");
	/* a parameter ends auto; auto again runs its choice, the same policy, at its defaults */
	assert_int_equal(config(c, "set host.policy.horizon 2", out, sizeof(out)), 0);
	assert_int_equal(config(c, "set rocksdb.policy.horizon 2", out, sizeof(out)), 0);
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host conv walk=1 leaf_first=1 horizon=2 orphan=0.5 strict=1");
	assert_int_equal(policy(c, "set host auto", out, sizeof(out)), 0);
	assert_int_equal(policy(c, "set rocksdb auto", out, sizeof(out)), 0);
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out,
	                    "host conv (auto) walk=1 leaf_first=1 horizon=1 orphan=0.5 strict=1");
	assert_int_equal(policy(c, "get rocksdb", out, sizeof(out)), 0);
	assert_string_equal(
	    out, "rocksdb conv (auto) walk=1 leaf_first=1 horizon=1 orphan=0.5 strict=1");
	assert_int_equal(kvt_lookup(c, nb, keys, 8), 8);

	kvt_model_t small = big; /* 32 KiB chunks */
	small.name = "auto-small";
	small.n_kv_heads = 4;
	assert_int_equal(kvt_namespace(c, &small, &ns), 0);
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host lru (auto)");
	assert_int_equal(policy(c, "get rocksdb", out, sizeof(out)), 0);
	assert_string_equal(out, "rocksdb arc (auto)");
	assert_int_equal(kvt_lookup(c, nb, keys, 8), 8); /* both switches kept every chunk */

	assert_int_equal(policy(c, "set host auto small_ratio=0.1", out, sizeof(out)), -EINVAL);
	assert_int_equal(policy(c, "set host lru", out, sizeof(out)), 0);
	assert_string_equal(out, "host lru");
	assert_int_equal(config(c, "get host.policy", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy = lru");
	assert_int_equal(config(c, "set host.policy auto", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy = auto");
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host lru (auto)");
	assert_int_equal(kvt_lookup(c, nb, keys, 8), 8);
	kvt_close(c);
	kvt_test_daemon_destroy(&pd);

	const char *bad[] = {"host.policy=auto", "host.policy_params=small_ratio=0.1", NULL};
	assert_true(kvt_test_daemon_start(&pd, bad) != 0); /* auto takes no parameters */
	kvt_test_daemon_destroy(&pd);
}

/* kvt_done reaches the rocksdb tier's policy too (rocksdb.policy = lru): chains A then B are
 * written through to a 4 MiB rocksdb, B is hinted, and C overflows it. With the hint the
 * evictions take B before the older A; without it, A goes first. @return : A's chunks left. */
static int rocksdb_done_keeps_older(bool hint, long long *hints)
{
	enum { A = 24, B = 24, C = 24 }; /* 64 KiB chunks; 4 MiB hold fewer than 72 */
	const char *sets[] = {"host.bytes=1MiB",    "tiers.order=host,rocksdb",
	                      "rocksdb.bytes=4MiB", "rocksdb.policy=lru",
	                      "host.policy=lru",    NULL};
	struct kvt_test_daemon rd;
	kvt_client_t *c = start_client(&rd, sets);
	kvt_model_t m = model("done");
	kvt_id_t ns, keys[A + B + C];
	uint32_t toks[(A + B + C) * 16 + 10];
	for (size_t i = 0; i < sizeof(toks) / sizeof(toks[0]); i++)
		toks[i] = (uint32_t)i * 7 + 3;
	assert_int_equal(kvt_namespace(c, &m, &ns), 0);
	for (int k = 0; k < 3; k++) /* three prefixes, 5 tokens apart */
		assert_int_equal(
		    kvt_chunk_keys(ns, toks + k * (A * 16 + 5), A * 16, 16, keys + k * A, A), A);
	size_t cb = kvt_chunk_bytes(&m);
	kvt_test_put_chain(c, ns, keys, A, cb, 1);
	kvt_test_put_chain(c, ns, keys + A, B, cb, 100);
	assert_true(kvt_test_stat_wait(&rd, "demoted", A + B, 1) >= A + B);
	if (hint)
		assert_int_equal(kvt_done(c, ns, keys + A, B), 0);
	*hints = kvt_test_stat_wait(&rd, "done_hints", hint ? B : 0, 0);
	kvt_test_put_chain(c, ns, keys + A + B, C, cb, 200);
	assert_true(kvt_test_stat_wait(&rd, "demoted", A + B + C, 1) >= A + B + C);
	int a_left = 0;
	for (int i = 0; i < A; i++)
		a_left += kvt_lookup(c, ns, keys + i, 1) == 1;
	long long told = kvt_test_tier_stat(&rd, "rocksdb", "told_evictions");
	assert_true(hint ? told > 0 : told == 0);
	kvt_close(c);
	kvt_test_daemon_destroy(&rd);
	return a_left;
}

static void test_policyctl_done_hint_rocksdb(void **state)
{
	long long hints;
	int plain = rocksdb_done_keeps_older(false, &hints);
	assert_int_equal(hints, 0);
	int hinted = rocksdb_done_keeps_older(true, &hints);
	assert_int_equal(hints, 24);
	fprintf(stderr, "A's chunks left in rocksdb: %d of 24 without the hint, %d with B hinted\n",
	        plain, hinted);
	assert_true(plain < 24);
	assert_int_equal(hinted, 24);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_policyctl_switch_keeps_chunks),
	    cmocka_unit_test(test_policyctl_curve_replays_later),
	    cmocka_unit_test(test_policyctl_curve_worker_takes_a_few),
	    cmocka_unit_test(test_policyctl_lower_tiers),
	    cmocka_unit_test(test_policyctl_host_admission),
	    cmocka_unit_test(test_policyctl_config_params),
	    cmocka_unit_test(test_policyctl_config_runtime),
	    cmocka_unit_test(test_policyctl_auto),
	    cmocka_unit_test(test_policyctl_done_hint_rocksdb),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
