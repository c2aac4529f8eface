/*
 * bench_policy.c -- kvtier-bench-policy: policy operations per second on one core. The same
 * loop runs every registered policy, LRU first as the baseline: a skewed key stream over
 * 4 x capacity keys; a resident key is an on_access, a missing one an on_insert preceded, when
 * full, by pick_victims(1) + on_remove. One "op" is one access (whatever it costs the policy).
 * "B/entry" is what the policy says it holds (memory_bytes) at the end, per cached entry.
 * The rows "mrc@R" time what a tier's miss-ratio curve adds to each access (policy/mrc.h,
 * SHARDS at sampling rate R) on the same stream; their "hit" is the curve's estimate at the
 * capacity, beside LRU's measured one.
 * The rows "switch" time `kvtier policy set` (kvt_policy_switch) from an LRU of capacity entries
 * in prefix chains of 16 to each policy: the daemon's loop pauses that long. Beside it, the
 * same entries inserted into a fresh policy of that kind, the least any rebuild can cost.
 * The rows "mini:P" time the miniature simulations of policy P (policy/minisim.h, 4,096
 * entries at 1x) per access on the same stream, one-key requests.
 * Usage: kvtier-bench-policy [ops (default 20000000)] [capacity (default 65536)]
 *                            [policy|mrc|switch|minisim...]
 */
#include "core/util.h"
#include "policy/minisim.h"
#include "policy/mrc.h"
#include "policy/policy.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double run(const struct kvt_policy_ops *o, const uint32_t *keys, size_t n_keys, size_t ops,
                  size_t cap, size_t universe, double *hit_ratio, double *bytes_per_entry)
{
	struct kvt_policy *p = NULL;
	uint8_t *res = calloc(universe, 1);
	if (!res || o->create(cap, &p)) {
		free(res);
		return 0;
	}
	size_t used = 0, hits = 0;
	double t0 = now_s();
	for (size_t i = 0; i < ops; i++) {
		uint32_t k = keys[i % n_keys];
		if (res[k]) {
			o->on_access(p, k);
			hits++;
			continue;
		}
		if (used == cap) {
			uint32_t v;
			if (o->pick_victims(p, &v, 1, NULL, NULL) != 1)
				break;
			o->on_remove(p, v);
			res[v] = 0;
			used--;
		}
		/* key k is chunk k % 16 of chain k / 16; its parent is known while resident */
		struct kvt_policy_meta m = {.key_hash = k * 0x9e3779b97f4a7c15ULL,
		                            .bytes = 1,
		                            .parent =
		                                k % 16 && res[k - 1] ? k - 1 : KVT_POLICY_NONE,
		                            .depth = k % 16};
		o->on_insert(p, k, &m);
		res[k] = 1;
		used++;
	}
	double dt = now_s() - t0;
	*bytes_per_entry = o->memory_bytes && used ? (double)o->memory_bytes(p) / (double)used : 0;
	o->destroy(p);
	free(res);
	*hit_ratio = (double)hits / (double)ops;
	return (double)ops / dt;
}

/* kvt_mrc_access per op on the same stream; @return : ops per second, 0 on failure. */
static double run_mrc(double rate, const uint32_t *keys, size_t n_keys, size_t ops, size_t cap,
                      double *hit_ratio)
{
	struct kvt_mrc *m = NULL;
	if (kvt_mrc_create(rate, &m))
		return 0;
	double t0 = now_s();
	for (size_t i = 0; i < ops; i++)
		kvt_mrc_access(m, keys[i % n_keys] * 0x9e3779b97f4a7c15ULL);
	double dt = now_s() - t0;
	*hit_ratio = kvt_mrc_hit_ratio(m, cap);
	kvt_mrc_destroy(m);
	return (double)ops / dt;
}

static void chain_meta(void *arg, uint32_t id, struct kvt_policy_meta *m)
{
	(void)arg;
	*m = (struct kvt_policy_meta){.key_hash = (id + 1) * 0x9e3779b97f4a7c15ULL,
	                              .bytes = 1,
	                              .parent = id % 16 ? id - 1 : KVT_POLICY_NONE,
	                              .depth = id % 16};
}

/* Seconds to switch an LRU of n chained entries to o, and (*fresh) to insert them into a new o. */
static double run_switch(const struct kvt_policy_ops *o, size_t n, double *fresh)
{
	struct kvt_policy *lru = NULL, *to = NULL;
	struct kvt_policy_meta m;
	if (kvt_policy_lru.create(n, &lru))
		return 0;
	for (uint32_t id = 0; id < n; id++) {
		chain_meta(NULL, id, &m);
		kvt_policy_lru.on_insert(lru, id, &m);
	}
	double t0 = now_s();
	int rc = kvt_policy_switch(&kvt_policy_lru, lru, n, o, n, chain_meta, NULL, &to);
	double dt = now_s() - t0;
	kvt_policy_lru.destroy(lru);
	if (rc)
		return 0;
	o->destroy(to);
	if (o->create(n, &to))
		return 0;
	t0 = now_s();
	for (uint32_t id = 0; id < n; id++) {
		chain_meta(NULL, id, &m);
		o->on_insert(to, id, &m);
	}
	*fresh = now_s() - t0;
	o->destroy(to);
	return dt;
}

/* Miniature simulations of o per access; *curve1x its 1x estimate, *bytes what it holds. */
static double run_minisim(const struct kvt_policy_ops *o, const uint32_t *keys, size_t n_keys,
                          size_t ops, size_t cap, double *curve1x, size_t *bytes)
{
	struct kvt_minisim *m = NULL;
	if (kvt_minisim_create(o, NULL, cap, KVT_MINISIM_ENTRIES, &m))
		return 0;
	double t0 = now_s();
	for (size_t i = 0; i < ops; i++) {
		uint64_t k = keys[i % n_keys] * 0x9e3779b97f4a7c15ULL;
		kvt_minisim_request(m, &k, 1);
	}
	double dt = now_s() - t0, c[5];
	kvt_minisim_curve(m, c);
	*curve1x = c[1];
	*bytes = kvt_minisim_bytes(m);
	kvt_minisim_destroy(m);
	return (double)ops / dt;
}

/* @return : s as a count from 1 to 2^32, or 0 when it is not one. */
static size_t count_arg(const char *s)
{
	char *end = NULL;
	unsigned long long v = strtoull(s, &end, 10);
	return s[0] >= '0' && s[0] <= '9' && end && !*end && v <= (1ull << 32) ? (size_t)v : 0;
}

/* Whether every word after the two counts names a row: a policy, mrc, switch or minisim. */
static bool rows_known(int argc, char **argv)
{
	for (int a = 3; a < argc; a++)
		if (!kvt_policy_find(argv[a]) && strcmp(argv[a], "mrc") &&
		    strcmp(argv[a], "switch") && strcmp(argv[a], "minisim")) {
			fprintf(stderr,
			        "bench policy: '%s' is not a policy, mrc, switch or minisim\n",
			        argv[a]);
			return false;
		}
	return true;
}

int main(int argc, char **argv)
{
	size_t ops = argc > 1 ? count_arg(argv[1]) : 20000000;
	size_t cap = argc > 2 ? count_arg(argv[2]) : 65536;
	bool help = kvt_help_asked(argc, argv);
	if (help || !ops || !cap || !rows_known(argc, argv)) {
		fputs("usage: kvtier bench policy [OPS (20000000)] [CAPACITY (65536)] "
		      "[POLICY|mrc|switch|minisim ...]\n",
		      help ? stdout : stderr);
		return help ? 0 : 2;
	}
	size_t universe = 4 * cap, n_keys = 1 << 22;
	uint32_t *keys = malloc(n_keys * sizeof(*keys));
	if (!keys)
		return 1;
	uint64_t x = 88172645463325252ULL;
	for (size_t i = 0; i < n_keys; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		double u = (double)(x >> 11) / 9007199254740992.0;
		keys[i] = (uint32_t)((double)universe * u * u); /* skewed popularity */
	}
	double base_hr, hr, bpe,
	    base = run(&kvt_policy_lru, keys, n_keys, ops, cap, universe, &base_hr, &bpe);
	bool any = argc <= 3;
	for (int a = 3; a < argc; a++)
		any = any || kvt_policy_find(argv[a]);
	if (any)
		printf("%-10s %8s %12s %8s %6s %9s\n", "policy", "Mops/s", "ns/op", "vs lru", "hit",
		       "B/entry");
	for (size_t i = 0; kvt_policy_at(i); i++) {
		const struct kvt_policy_ops *o = kvt_policy_at(i);
		bool wanted = argc <= 3;
		for (int a = 3; a < argc; a++)
			wanted = wanted || !strcmp(argv[a], o->name);
		if (!wanted)
			continue;
		double r = !strcmp(o->name, "lru")
		               ? base
		               : run(o, keys, n_keys, ops, cap, universe, &hr, &bpe);
		if (!strcmp(o->name, "lru"))
			run(o, keys, n_keys, ops / 10 ? ops / 10 : 1, cap, universe, &hr, &bpe);
		printf("%-10s %8.1f %12.1f %7.2fx %6.3f %9.1f\n", o->name, r / 1e6, 1e9 / r,
		       r / base, hr, bpe);
	}
	bool sw = false;
	for (int a = 3; a < argc; a++)
		sw = sw || !strcmp(argv[a], "switch");
	if (sw)
		printf("%-10s %12s %12s %8s   (%zu entries, from lru)\n", "switch to", "switch ms",
		       "insert ms", "ratio", cap);
	for (size_t i = 0; sw && kvt_policy_at(i); i++) {
		double fresh = 0, dt = run_switch(kvt_policy_at(i), cap, &fresh);
		if (dt > 0 && fresh > 0)
			printf("%-10s %12.1f %12.1f %7.2fx\n", kvt_policy_at(i)->name, dt * 1e3,
			       fresh * 1e3, dt / fresh);
	}
	bool mini = false;
	for (int a = 3; a < argc; a++)
		mini = mini || !strcmp(argv[a], "minisim");
	static const char *const mini_pols[] = {"lru", "arc", "conv"};
	for (size_t i = 0; mini && i < 3; i++) {
		size_t bytes = 0;
		double r =
		    run_minisim(kvt_policy_find(mini_pols[i]), keys, n_keys, ops, cap, &hr, &bytes);
		char name[32];
		snprintf(name, sizeof(name), "mini:%s", mini_pols[i]);
		if (r > 0)
			printf("%-10s %8.1f %12.1f %7.2fx %6.3f %9s  (%zu KiB)\n", name, r / 1e6,
			       1e9 / r, r / base, hr, "-", bytes >> 10);
	}
	bool mrc = argc <= 3;
	for (int a = 3; a < argc; a++)
		mrc = mrc || !strcmp(argv[a], "mrc");
	static const double rates[] = {0.01, 0.1, 1};
	for (size_t i = 0; mrc && i < 3; i++) {
		double r = run_mrc(rates[i], keys, n_keys, ops, cap, &hr);
		char name[48];
		snprintf(name, sizeof(name), "mrc@%g%%", rates[i] * 100);
		if (r > 0)
			printf("%-10s %8.1f %12.1f %7.2fx %6.3f %9s\n", name, r / 1e6, 1e9 / r,
			       r / base, hr, "-");
		if (r > 0 && i == 2)
			printf("(the mrc rows' hit: the curve at the capacity; lru's over the same "
			       "%zu "
			       "ops: %.3f)\n",
			       ops, base_hr);
	}
	free(keys);
	return 0;
}
