/*
 * bench_quota.c -- kvtier-bench-quota: what a quota costs an eviction (policy/quota.h).
 *
 * The case that costs most: a policy's coldest entries belong to a tenant held at its
 * guarantee, so every walk for a victim passes them. CAP entries of one byte in LRU; tenant 1
 * puts CAP/2 first (guaranteed CAP/2, so none of them may go), tenant 2 the rest; then tenant 2
 * puts K entries at a time, each batch making room through kvt_quota_pick_victims(need K,
 * max K). Two baselines in the same run: the policy's own walk with a filter that skips tenant
 * 1 (one pick_victims of K: what any per-entry filter pays, O(tenant 1's entries) in lru), and
 * a plain eviction (the same loop with every entry tenant 2's and no filter: the floor).
 * Printed: nanoseconds per victim, each, and the quota's ratio to the plain eviction, for K = 1
 * and 32.
 * Usage: kvtier-bench-quota [capacity (default 65536)] [victims (default 2000000)] [policy (lru)]
 */
#include "core/util.h"
#include "policy/policy.h"
#include "policy/quota.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint32_t *owner;

static uint32_t tenant_of(void *arg, uint32_t id)
{
	(void)arg;
	return owner[id];
}

static uint64_t one_byte(void *arg, uint32_t id)
{
	(void)arg, (void)id;
	return 1;
}

static bool not_tenant_1(void *arg, uint32_t id)
{
	(void)arg;
	return owner[id] != 1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum mode { FILTER, QUOTA, PLAIN };

/* @return : ns per victim, in mode; -1 on a failure. */
static double run(const struct kvt_policy_ops *o, size_t cap, size_t victims, size_t k,
                  enum mode mode)
{
	bool quota = mode == QUOTA;
	struct kvt_policy *p = NULL;
	struct kvt_quota *q = NULL;
	uint32_t out[32];
	if (o->create(cap, &p) || kvt_quota_create(&q) ||
	    kvt_quota_set(q, 1, cap / 2, KVT_QUOTA_UNLIMITED)) {
		if (p)
			o->destroy(p);
		kvt_quota_destroy(q);
		return -1;
	}
	struct kvt_policy_meta m = {.parent = KVT_POLICY_NONE, .bytes = 1};
	for (uint32_t id = 0; id < cap; id++) {
		owner[id] = id < cap / 2 && mode != PLAIN ? 1 : 2;
		m.key_hash = id, m.tenant = owner[id];
		o->on_insert(p, id, &m);
		kvt_quota_charge(q, owner[id], 1);
	}
	struct kvt_quota_view view = {tenant_of, one_byte, NULL, NULL};
	size_t done = 0;
	double t0 = now_s();
	while (done < victims) {
		size_t n =
		    quota ? kvt_quota_pick_victims(q, o, p, 2, k, &view, out, k)
		          : o->pick_victims(p, out, k, mode == PLAIN ? NULL : not_tenant_1, NULL);
		if (n != k)
			break;
		for (size_t i = 0; i < n; i++) {
			o->on_remove(p, out[i]);
			kvt_quota_charge(q, owner[out[i]], -1);
			m.key_hash = out[i] + ((uint64_t)done << 32), m.tenant = 2;
			o->on_insert(p, out[i], &m); /* tenant 2's next put takes the slot */
			kvt_quota_charge(q, 2, 1);
		}
		done += n;
	}
	double dt = now_s() - t0;
	bool whole = done >= victims && kvt_quota_used(q, 1) == (mode == PLAIN ? 0 : cap / 2);
	o->destroy(p);
	kvt_quota_destroy(q);
	return whole ? dt * 1e9 / (double)done : -1;
}

int main(int argc, char **argv)
{
	char *e1 = NULL, *e2 = NULL;
	size_t cap = argc > 1 ? strtoull(argv[1], &e1, 10) : 65536;
	size_t victims = argc > 2 ? strtoull(argv[2], &e2, 10) : 2000000;
	const struct kvt_policy_ops *o = kvt_policy_find(argc > 3 ? argv[3] : "lru");
	bool help = kvt_help_asked(argc, argv);
	if (help || cap < 64 || cap > (1u << 30) || !victims || !o || argc > 4 || (e1 && *e1) ||
	    (e2 && *e2)) {
		fputs("usage: kvtier bench quota [CAPACITY >= 64 (65536)] [VICTIMS (2000000)] "
		      "[POLICY (lru)]\n",
		      help ? stdout : stderr);
		return help ? 0 : 2;
	}
	owner = calloc(cap, sizeof(*owner));
	if (!owner)
		return 1;
	printf("%s of %zu entries, the coldest %zu a tenant's at its guarantee\n", o->name, cap,
	       cap / 2);
	printf("%6s %16s %18s %16s %8s\n", "batch", "quota ns/victim", "filter ns/victim",
	       "plain ns/victim", "ratio");
	static const size_t ks[] = {1, 32};
	for (size_t i = 0; i < 2; i++) {
		double f = run(o, cap, victims, ks[i], FILTER),
		       qn = run(o, cap, victims, ks[i], QUOTA),
		       pl = run(o, cap, victims, ks[i], PLAIN);
		if (f < 0 || qn < 0 || pl < 0) {
			fprintf(stderr, "bench-quota: a pick came back short\n");
			return 1;
		}
		printf("%6zu %16.1f %18.1f %16.1f %7.2fx\n", ks[i], qn, f, pl, qn / pl);
	}
	free(owner);
	return 0;
}
