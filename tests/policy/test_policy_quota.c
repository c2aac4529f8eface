/* test_policy_quota.c -- per-tenant quotas over every policy (a tenant below its guarantee is
 * never a victim, walks by tenant match the filter, batches honour both) and admission (the
 * TinyLFU sketch and its doorkeeper, counts kept across a growth). */
#include "pol_fixture.h"

#include "policy/admit.h"
#include "policy/quota.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Quotas: tenant 0 floods, tenant 1 keeps its guarantee; at its maximum tenant 0 evicts
 * only its own entries. */
static uint32_t tenant_tab[N_IDS];
static uint32_t q_tenant(void *arg, uint32_t id)
{
	(void)arg;
	return tenant_tab[id];
}
static uint64_t q_bytes(void *arg, uint32_t id)
{
	(void)arg;
	(void)id;
	return 10;
}

static void test_policy_quota_guarantee(void **state)
{
	const struct kvt_policy_ops *o = &kvt_policy_lru;
	struct kvt_policy *p = make("lru", 0);
	struct kvt_quota *q = NULL;
	assert_int_equal(kvt_quota_create(&q), 0);
	assert_int_equal(kvt_quota_set(q, 1, 300, 1000), 0); /* 30 entries guaranteed */
	assert_int_equal(kvt_quota_set(q, 0, 0, 600), 0);
	assert_int_equal(kvt_quota_set(q, 2, 10, 5), -EINVAL);
	struct kvt_quota_view view = {q_tenant, q_bytes, NULL, NULL};
	uint64_t cap = 900, used = 0;
	uint32_t next = 0;
	/* tenant 1 fills 40 entries first (the oldest, LRU's first victims) */
	for (; next < 40; next++) {
		tenant_tab[next] = 1;
		ins(o, p, next, KVT_POLICY_NONE, 0);
		kvt_quota_charge(q, 1, 10);
		used += 10;
	}
	for (int round = 0; round < 500; round++, next++) {
		tenant_tab[next] = 0;
		if (used + 10 > cap || !kvt_quota_fits(q, 0, 10)) {
			uint32_t v[4];
			size_t n = kvt_quota_pick_victims(q, o, p, 0, 10, &view, v, 4);
			assert_int_equal(n, 1);
			o->on_remove(p, v[0]);
			kvt_quota_charge(q, tenant_tab[v[0]], -10);
			used -= 10;
		}
		ins(o, p, next, KVT_POLICY_NONE, 0);
		kvt_quota_charge(q, 0, 10);
		used += 10;
		assert_true(kvt_quota_used(q, 1) >= 300);
		assert_true(kvt_quota_used(q, 0) <= 600);
	}
	assert_int_equal(kvt_quota_used(q, 1), 300); /* above-guarantee part was fair game */
	assert_int_equal(kvt_quota_used(q, 0), 600);
	kvt_quota_destroy(q);
	o->destroy(p);
}

/* pick_victims_tenants against pick_victims with the same filter written per entry: twin
 * policies fed the same random inserts, re-inserts, accesses and removes (of set-aside
 * entries too; lfu's ring resized under them), walked with random closed tenants, per-walk budgets
 * (a tenant closes once it has given that many, as a tenant reaching its guarantee does) and
 * leases. Every walk, and the whole order now and then, must be the same. prefix and gdsf get
 * chains (most new ids hang under a resident one, a level deeper; any tenant's), so that prefix's
 * parents become leaves out of order (its late heap) and gdsf's costs and sizes vary; gdsf's
 * cost exponent changes under them. A build with -DKVT__GDSF_CLOCK_MAX=3000 renumbers gdsf's
 * seqs, parked entries included, every few thousand operations. */
struct tw {
	uint32_t tenant[N_IDS];
	uint8_t closed;   /* bit t: tenant t may lose nothing */
	int budget[4];    /* what each tenant may still give in this walk */
	uint32_t lease_k; /* ids with (id * 7 + lease_k) % 5 == 0 are leased */
};

static uint32_t tw_tenant(void *arg, uint32_t id)
{
	return ((struct tw *)arg)->tenant[id];
}

static bool tw_open(void *arg, uint32_t t)
{
	struct tw *w = arg;
	return !(w->closed >> t & 1) && w->budget[t] > 0;
}

static bool tw_ok(void *arg, uint32_t id)
{
	struct tw *w = arg;
	uint32_t t = w->tenant[id];
	if ((id * 7 + w->lease_k) % 5 == 0 || !tw_open(w, t))
		return false;
	w->budget[t]--;
	return true;
}

static void test_policy_tenant_walk_matches_filter(void **state)
{
	static struct tw w;
	size_t checked = 0;
	for (size_t k = 0; kvt_policy_at(k); k++) {
		const struct kvt_policy_ops *o = kvt_policy_at(k);
		if (!o->pick_victims_tenants)
			continue;
		checked++;
		struct kvt_policy *a = make(o->name, 0), *b = make(o->name, 0);
		uint8_t res[N_IDS] = {0};
		uint32_t depth[N_IDS] = {0};
		bool chains = !strcmp(o->name, "prefix") || !strcmp(o->name, "gdsf");
		/* gdsf's walks are best first over heaps, ~20x a list's step: fewer ids keep the
		 * test short (most walks here pass every resident id, budgets ending before max) */
		uint32_t ids = !strcmp(o->name, "gdsf") ? 1024 : 2048;
		srand(17 + (unsigned)k);
		size_t walks = 0, parked_hits = 0;
		for (int op = 0; op < 200000; op++) {
			uint32_t id = (uint32_t)rand() % ids;
			int r = rand() % 100;
			if (r < 45) { /* insert, or re-insert */
				w.tenant[id] = res[id] ? w.tenant[id] : (uint32_t)rand() % 4;
				struct kvt_policy_meta m = meta(id, KVT_POLICY_NONE, 0);
				if (chains) {
					uint32_t pa = (uint32_t)rand() % ids;
					if (rand() % 4 && res[pa] && pa != id)
						m.parent = pa, m.depth = depth[pa] + 1;
					m.bytes = 1 + (uint64_t)rand() % 8;
				}
				depth[id] = m.depth;
				o->on_insert(a, id, &m);
				o->on_insert(b, id, &m);
				res[id] = 1;
			} else if (r < 75) {
				if (res[id] && r >= 72 && o->on_done) { /* kvt_done */
					o->on_done(a, id);
					o->on_done(b, id);
				} else if (res[id]) {
					o->on_access(a, id);
					o->on_access(b, id);
				}
			} else if (r < 85) {
				if (res[id]) {
					o->on_remove(a, id);
					o->on_remove(b, id);
					res[id] = 0;
				}
			} else {
				uint32_t va[64], vb[64];
				size_t max = 1 + (size_t)rand() % 64;
				w.closed = (uint8_t)(rand() % 16);
				w.lease_k = (uint32_t)rand();
				int bud[4];
				for (int t = 0; t < 4; t++)
					bud[t] = rand() % 24;
				memcpy(w.budget, bud, sizeof(bud));
				size_t na = o->pick_victims_tenants(a, va, max, tw_ok, tw_tenant,
				                                    tw_open, &w);
				memcpy(w.budget, bud, sizeof(bud));
				size_t nb = o->pick_victims(b, vb, max, tw_ok, &w);
				assert_int_equal(na, nb);
				for (size_t i = 0; i < na; i++) {
					assert_int_equal(va[i], vb[i]);
					parked_hits += w.closed != 0;
				}
				walks++;
			}
			if (op % 50000 == 49999 &&
			    !strcmp(o->name, "lfu")) { /* re-rings, parked too */
				static const char *const mc[] = {"1000", "300", "4000", "255"};
				assert_int_equal(o->set_param(a, "max_count", mc[op / 50000 % 4]),
				                 0);
				assert_int_equal(o->set_param(b, "max_count", mc[op / 50000 % 4]),
				                 0);
			}
			if (op % 30000 == 29999 && !strcmp(o->name, "gdsf")) { /* new costs */
				static const char *const ce[] = {"0.5", "2", "0", "1"};
				const char *v = ce[op / 30000 % 4];
				assert_int_equal(o->set_param(a, "cost_exponent", v), 0);
				assert_int_equal(o->set_param(b, "cost_exponent", v), 0);
			}
			if (op % 20000 == 19999) { /* the whole order, set-aside entries included */
				uint32_t *fa = malloc(N_IDS * 4), *fb = malloc(N_IDS * 4);
				size_t na = o->pick_victims(a, fa, N_IDS, NULL, NULL),
				       nb = o->pick_victims(b, fb, N_IDS, NULL, NULL);
				assert_int_equal(na, nb);
				assert_memory_equal(fa, fb, na * 4);
				free(fa);
				free(fb);
			}
		}
		assert_true(walks > 10000 && parked_hits > 0);
		assert_true(o->memory_bytes(a) > o->memory_bytes(b)); /* a set some aside */
		o->destroy(a);
		o->destroy(b);
	}
	assert_int_equal(checked, 6); /* lru, fifo, arc, lfu, prefix, gdsf */
}

/* Batches of 8 through every policy (sampling ones included, which show the filter entries
 * they do not return): the 8 victims are distinct and resident, and taken together they leave
 * tenant 1 at or above its guarantee; tenant 0 at its maximum gets only its own. */
static void test_policy_quota_batches_all_policies(void **state)
{
	for (size_t k = 0; kvt_policy_at(k); k++) {
		const struct kvt_policy_ops *o = kvt_policy_at(k);
		struct kvt_policy *p = make(o->name, 512);
		struct kvt_quota *q = NULL;
		uint8_t res[N_IDS] = {0};
		assert_int_equal(kvt_quota_create(&q), 0);
		assert_int_equal(kvt_quota_set(q, 1, 1000, KVT_QUOTA_UNLIMITED),
		                 0); /* 100 entries */
		assert_int_equal(kvt_quota_set(q, 0, 0, 3000), 0);
		struct kvt_quota_view view = {q_tenant, q_bytes, NULL, NULL};
		uint32_t next = 0, used = 0;
		for (; next < 400; next++) { /* 150 of tenant 1's, then 250 of tenant 0's, mixed */
			tenant_tab[next] = next % 8 < 3 ? 1 : 0;
			ins(o, p, next, KVT_POLICY_NONE, 0);
			res[next] = 1;
			kvt_quota_charge(q, tenant_tab[next], 10);
			used++;
		}
		for (int round = 0; round < 200; round++) {
			uint32_t v[8];
			bool at_max = !kvt_quota_fits(q, 0, 80);
			size_t n = kvt_quota_pick_victims(q, o, p, 0, 80, &view, v, 8);
			assert_int_equal(n, 8);
			uint64_t from1 = 0;
			for (size_t i = 0; i < n; i++) {
				assert_true(v[i] < next && res[v[i]]);
				for (size_t j = 0; j < i; j++)
					assert_true(v[i] != v[j]);
				from1 += tenant_tab[v[i]] == 1 ? 10 : 0;
				if (at_max && tenant_tab[v[i]] != 0)
					fail_msg("%s: tenant 0 at its maximum took tenant 1's %u",
					         o->name, v[i]);
			}
			if (kvt_quota_used(q, 1) - from1 < 1000)
				fail_msg("%s: the batch takes tenant 1 below its guarantee",
				         o->name);
			for (size_t i = 0; i < n; i++) {
				o->on_remove(p, v[i]);
				res[v[i]] = 0;
				kvt_quota_charge(q, tenant_tab[v[i]], -10);
			}
			for (size_t i = 0; i < n && next < N_IDS; i++, next++) {
				tenant_tab[next] = 0;
				ins(o, p, next, KVT_POLICY_NONE, 0);
				res[next] = 1;
				kvt_quota_charge(q, 0, 10);
			}
		}
		assert_true(kvt_quota_used(q, 1) >= 1000); /* never below its guarantee */
		assert_true(kvt_quota_used(q, 0) <= 3000); /* nor tenant 0 above its maximum */
		kvt_quota_destroy(q);
		o->destroy(p);
	}
}

static void test_policy_admission(void **state)
{
	struct kvt_admit *a = NULL;
	assert_int_equal(kvt_admit_create("bogus", 100, &a), -ENOENT);
	assert_int_equal(kvt_admit_create("second_touch", 100, &a), 0);
	kvt_admit_record(a, 42);
	assert_false(kvt_admit_check(a, 42, NULL));
	kvt_admit_record(a, 42);
	assert_true(kvt_admit_check(a, 42, NULL));
	kvt_admit_destroy(a);
	assert_int_equal(kvt_admit_create("tinylfu", 100, &a), 0);
	for (int i = 0; i < 5; i++)
		kvt_admit_record(a, 7);
	kvt_admit_record(a, 9);
	uint64_t hot = 7, cold = 9;
	assert_true(kvt_admit_estimate(a, 7) > kvt_admit_estimate(a, 9));
	assert_false(kvt_admit_check(a, 9, &hot));
	assert_true(kvt_admit_check(a, 7, &cold));
	assert_true(kvt_admit_check(a, 9, NULL)); /* room: admit */
	/* the aging period (10 x 100 records) halves the counters and clears the doorkeeper: key 7
	 * is still warmer than a key never seen (it read 0 when its doorkeeper bit was gone) */
	for (uint64_t k = 1000; k < 2000; k++)
		kvt_admit_record(a, k * 0x9e3779b97f4a7c15ULL);
	uint64_t never = 123456789;
	assert_true(kvt_admit_estimate(a, 7) >= 1);
	assert_true(kvt_admit_check(a, 7, &never));
	assert_false(kvt_admit_check(a, never, &hot));
	/* without the doorkeeper a key counts from its first record */
	kvt_admit_doorkeeper(a, false);
	kvt_admit_record(a, 31);
	assert_int_equal(kvt_admit_estimate(a, 31), 1);
	kvt_admit_destroy(a);
}

/* kvt_admit_grow keeps every count: after growing from 1,000 to 64,000 keys (64 x the width)
 * each key's estimate is what it was, doorkeeper bit included, and the new size shows in the
 * bytes and in the aging period. */
static void test_policy_admission_grow_keeps_counts(void **state)
{
	enum { KEYS = 1500 };
	struct kvt_admit *a = NULL;
	assert_int_equal(kvt_admit_create("tinylfu", 1000, &a), 0);
	for (uint64_t k = 0; k < KEYS; k++) /* 4,500 records: inside the period of 10,000 */
		for (uint64_t r = 0; r <= k % 5; r++)
			kvt_admit_record(a, (k + 1) * 0x9e3779b97f4a7c15ULL);
	static unsigned before[KEYS];
	for (uint64_t k = 0; k < KEYS; k++) {
		before[k] = kvt_admit_estimate(a, (k + 1) * 0x9e3779b97f4a7c15ULL);
		assert_true(before[k] >= 1 + k % 5);
	}
	size_t bytes = kvt_admit_bytes(a);
	assert_int_equal(kvt_admit_grow(a, 500), 0); /* never shrinks */
	assert_int_equal(kvt_admit_bytes(a), bytes);
	assert_int_equal(kvt_admit_grow(a, 64000), 0);
	assert_true(kvt_admit_bytes(a) >= 32 * bytes);
	for (uint64_t k = 0; k < KEYS; k++)
		assert_int_equal(kvt_admit_estimate(a, (k + 1) * 0x9e3779b97f4a7c15ULL), before[k]);
	/* the period is 640,000 records now: 6,000 more do not halve anything (at the old 10,000
	 * they would have: counts never fall otherwise) */
	for (uint64_t k = 0; k < 6000; k++)
		kvt_admit_record(a, (k + 7777) * 0xc2b2ae3d27d4eb4fULL);
	for (uint64_t k = 0; k < KEYS; k++)
		assert_true(kvt_admit_estimate(a, (k + 1) * 0x9e3779b97f4a7c15ULL) >= before[k]);
	kvt_admit_destroy(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_policy_quota_guarantee),
	    cmocka_unit_test(test_policy_quota_batches_all_policies),
	    cmocka_unit_test(test_policy_tenant_walk_matches_filter),
	    cmocka_unit_test(test_policy_admission),
	    cmocka_unit_test(test_policy_admission_grow_keeps_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
