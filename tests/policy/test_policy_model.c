/*
 * test_policy_model.c -- every policy against a model of what its caller holds, under long
 * random sequences of every operation the seam has: inserts (with a resident parent, an absent
 * one, or none), hits, hits on ids it does not hold, removals, done hints, victims with some
 * ids leased and some tenants refused, export_order, parameter changes and run-time switches
 * to every other policy. After each operation the policy must agree with the model:
 *  - victims are held, evictable, of an open tenant, distinct, and no more than asked;
 *  - while one held id is evictable, a request for one victim gets one (the daemon's reclaim
 *    relies on it to make progress; prefix too, whose leaves may all be leased);
 *  - export_order lists exactly the held ids, each once;
 *  - is_done says what the model says: told since the last hit, as long as it is held (a
 *    policy may decline a hint when told, as conv does on a chunk that others' prefixes share,
 *    and end one when the conversation shows it goes on: see sync_hint);
 *  - a switch (kvt_policy_set) keeps every id, and no hint appears that was not given;
 *  - with quotas (every other seed), kvt_quota_pick_victims's victims leave every tenant at its
 *    guarantee (at the requester's maximum: are its own), and none comes back only when no
 *    single held id could go.
 * The sequences mimic the daemon: prefix chains that grow, parents removed before their
 * children, ids reused after removal. A second test runs them at tiers of 1 to 8 chunks. Under
 * ASan (`make asan`) this is also a memory test.
 */
#include "testlib.h"

#include "policy/policy.h"
#include "policy/quota.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDS_MAX 600 /* ids a run may use (n_ids: 600, or 6 per chunk in the tiny tiers) */
#define STEPS   40000
#define SEEDS   3 /* per policy; KVT_MODEL_SEEDS=N for a longer search */
#define TENANT  3

struct model {
	const struct kvt_policy_ops *ops;
	struct kvt_policy *p;
	uint8_t held[IDS_MAX], told[IDS_MAX], leased[IDS_MAX], closed[TENANT];
	struct kvt_policy_meta meta[IDS_MAX];
	size_t n_held;
	uint32_t prev;           /* the id last inserted or hit */
	struct kvt_quota *quota; /* NULL, or quotas on every tenant, charged in meta.bytes */
	uint64_t rng;
	const char *first; /* the policy the run began with, for messages */
};

/* The tier's size in chunks, the ids a run draws from and its steps
 * (test_policy_model_tiny_tiers sets them smaller). */
static uint32_t cap = 128, n_ids = IDS_MAX;
static int steps = STEPS;

static uint32_t rnd(struct model *m, uint32_t n)
{
	return (uint32_t)(kvt_test_xorshift(&m->rng) % n);
}

static bool evictable(void *arg, uint32_t id)
{
	const struct model *m = arg;
	return id < n_ids && !m->leased[id];
}

static uint32_t tenant_of(void *arg, uint32_t id)
{
	return ((const struct model *)arg)->meta[id].tenant;
}

static bool tenant_open(void *arg, uint32_t t)
{
	return t < TENANT && !((const struct model *)arg)->closed[t];
}

static void fill_meta(void *arg, uint32_t id, struct kvt_policy_meta *out)
{
	*out = ((const struct model *)arg)->meta[id];
}

static uint32_t random_id(struct model *m, bool held)
{
	if (held && !m->n_held)
		return KVT_POLICY_NONE;
	for (;;) {
		uint32_t id = rnd(m, n_ids);
		if (m->held[id] == held)
			return id;
	}
}

/* The run a failure is in: KVT_MODEL_SEED=N replays that seed alone. */
static unsigned long long run_seed;
static int run_step;

#define CHECK(cond, fmt, ...)                                                                      \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fail_msg("seed %llu step %d (tier of %u): %s (began as %s): " fmt,         \
			         run_seed, run_step, cap, __VA_ARGS__);                            \
	} while (0)

/* Asks for up to max victims, leasing about a quarter of the held ids and, with tenants,
 * refusing some; checks what comes back. @return : how many. */
static size_t victims(struct model *m, uint32_t *out, size_t max, bool tenants)
{
	for (uint32_t id = 0; id < n_ids; id++)
		m->leased[id] = m->held[id] && rnd(m, 4) == 0;
	for (uint32_t t = 0; t < TENANT; t++)
		m->closed[t] = tenants && rnd(m, 3) == 0;
	size_t open_evictable = 0;
	for (uint32_t id = 0; id < n_ids; id++)
		open_evictable +=
		    m->held[id] && !m->leased[id] && !(tenants && m->closed[m->meta[id].tenant]);
	size_t n = tenants ? m->ops->pick_victims_tenants(m->p, out, max, evictable, tenant_of,
	                                                  tenant_open, m)
	                   : m->ops->pick_victims(m->p, out, max, evictable, m);
	CHECK(n <= max, "%zu victims for %zu", m->ops->name, m->first, n, max);
	static uint8_t seen[IDS_MAX];
	memset(seen, 0, sizeof(seen));
	for (size_t i = 0; i < n; i++) {
		uint32_t v = out[i];
		CHECK(v < n_ids && m->held[v], "victim %u is not held", m->ops->name, m->first, v);
		CHECK(!m->leased[v], "victim %u is leased", m->ops->name, m->first, v);
		CHECK(!seen[v], "victim %u twice", m->ops->name, m->first, v);
		CHECK(!tenants || !m->closed[m->meta[v].tenant], "victim %u of a refused tenant",
		      m->ops->name, m->first, v);
		seen[v] = 1;
	}
	CHECK(n > 0 || !open_evictable || !max, "no victim while %zu held ids may go", m->ops->name,
	      m->first, open_evictable);
	return n;
}

/* A hint may end without a hit on the chunk itself when its conversation shows that it goes
 * on: a child inserted under it, or (conv) a hit on the chunk one level down right after it.
 * Such a hint may go, but none may appear. */
static void sync_hint(struct model *m, uint32_t id)
{
	if (id >= n_ids || !m->held[id] || !m->ops->is_done)
		return;
	bool now = m->ops->is_done(m->p, id);
	CHECK(!now || m->told[id], "is_done(%u) without a hint", m->ops->name, m->first, id);
	m->told[id] = now;
}

static void remove_id(struct model *m, uint32_t id)
{
	if (m->quota)
		assert_int_equal(
		    kvt_quota_charge(m->quota, m->meta[id].tenant, -(int64_t)m->meta[id].bytes), 0);
	for (uint32_t c = 0; c < n_ids; c++) /* its children are orphans now */
		if (m->held[c] && m->meta[c].parent == id)
			m->meta[c].parent = KVT_POLICY_NONE;
	m->ops->on_remove(m->p, id);
	m->held[id] = 0;
	m->told[id] = 0;
	m->n_held--;
}

static uint64_t bytes_of(void *arg, uint32_t id)
{
	return ((const struct model *)arg)->meta[id].bytes;
}

/* Whether quota q lets id go for requester, with pending[] already chosen. */
static bool quota_allows(const struct model *m, bool own_only, uint32_t requester,
                         const uint64_t *pending, uint32_t id)
{
	uint32_t t = m->meta[id].tenant;
	if (own_only)
		return t == requester;
	uint64_t g, max, left = kvt_quota_used(m->quota, t) - pending[t];
	kvt_quota_limits(m->quota, t, &g, &max);
	return left >= m->meta[id].bytes && left - m->meta[id].bytes >= g;
}

/* kvt_quota_pick_victims for tenant's need: the victims are held, evictable, distinct, and
 * each leaves its tenant at its guarantee (or, at the requester's maximum, are its own); none
 * comes back only when no single held id could go. @return : how many. */
static size_t quota_victims(struct model *m, uint32_t tenant, uint64_t need, uint32_t *out,
                            size_t max)
{
	for (uint32_t id = 0; id < n_ids; id++)
		m->leased[id] = m->held[id] && rnd(m, 4) == 0;
	bool own_only = !kvt_quota_fits(m->quota, tenant, need);
	struct kvt_quota_view view = {
	    .tenant_of = tenant_of, .bytes_of = bytes_of, .evictable = evictable, .arg = m};
	size_t n = kvt_quota_pick_victims(m->quota, m->ops, m->p, tenant, need, &view, out, max);
	uint64_t pending[TENANT] = {0};
	static uint8_t seen[IDS_MAX];
	memset(seen, 0, sizeof(seen));
	CHECK(n <= max, "%zu quota victims for %zu", m->ops->name, m->first, n, max);
	for (size_t i = 0; i < n; i++) {
		uint32_t v = out[i];
		CHECK(v < n_ids && m->held[v] && !m->leased[v] && !seen[v],
		      "quota victim %u: held %d, leased %d, twice %d", m->ops->name, m->first, v,
		      v < n_ids && m->held[v], v < n_ids && m->leased[v], v < n_ids && seen[v]);
		CHECK(quota_allows(m, own_only, tenant, pending, v),
		      "quota victim %u (tenant %u) breaks the quota for tenant %u", m->ops->name,
		      m->first, v, m->meta[v].tenant, tenant);
		seen[v] = 1;
		pending[m->meta[v].tenant] += m->meta[v].bytes;
	}
	if (n)
		return n;
	for (uint32_t id = 0; id < n_ids; id++)
		CHECK(!m->held[id] || m->leased[id] ||
		          !quota_allows(m, own_only, tenant, pending, id),
		      "no quota victim for tenant %u, but %u (tenant %u) may go", m->ops->name,
		      m->first, tenant, id, m->meta[id].tenant);
	return 0;
}

static void insert_id(struct model *m)
{
	uint32_t id = random_id(m, false), tenant = rnd(m, TENANT), bytes = 1 + rnd(m, 4);
	if (m->quota && (m->n_held >= cap || !kvt_quota_fits(m->quota, tenant, bytes))) {
		uint32_t v[8];
		size_t n = quota_victims(m, tenant, bytes, v, 1 + rnd(m, 8));
		for (size_t i = 0; i < n; i++)
			remove_id(m, v[i]);
		if (m->n_held >= cap || !kvt_quota_fits(m->quota, tenant, bytes))
			return;        /* refused, as kvtierd refuses the put */
	} else if (m->n_held >= cap) { /* full: evict as the daemon does, one or a batch */
		uint32_t v[8];
		size_t n = victims(m, v, 1 + rnd(m, 8), false);
		for (size_t i = 0; i < n; i++)
			remove_id(m, v[i]);
		if (m->n_held >= cap)
			return;
	}
	struct kvt_policy_meta *me = &m->meta[id];
	uint32_t r = rnd(m, 10);
	uint32_t parent = r < 6 ? random_id(m, true) : KVT_POLICY_NONE;
	me->key_hash = 0x9e3779b97f4a7c15ULL * (id + 1 + m->rng % 3); /* ids reused by other keys */
	me->bytes = bytes;
	me->parent = parent;
	me->depth = parent != KVT_POLICY_NONE ? m->meta[parent].depth + 1
	                                      : (r < 8 ? 0 : 1 + rnd(m, 20)); /* absent parent */
	me->tenant = tenant;
	me->flags = 0;
	if (m->ops->admit && !m->ops->admit(m->p, me))
		return;
	m->ops->on_insert(m->p, id, me);
	if (m->quota)
		assert_int_equal(kvt_quota_charge(m->quota, tenant, bytes), 0);
	m->held[id] = 1;
	m->n_held++;
	sync_hint(m, parent);
	m->prev = id;
}

static void check_export(struct model *m)
{
	static uint32_t out[IDS_MAX + 1];
	static uint8_t seen[IDS_MAX];
	if (!m->ops->export_order)
		return;
	size_t n = m->ops->export_order(m->p, out, n_ids + 1);
	CHECK(n == m->n_held, "exports %zu of %zu held", m->ops->name, m->first, n, m->n_held);
	memset(seen, 0, sizeof(seen));
	for (size_t i = 0; i < n; i++) {
		CHECK(out[i] < n_ids && m->held[out[i]] && !seen[out[i]], "exports %u wrongly",
		      m->ops->name, m->first, out[i]);
		seen[out[i]] = 1;
	}
}

static void check_hints(struct model *m)
{
	if (!m->ops->is_done)
		return;
	for (uint32_t id = 0; id < n_ids; id++)
		if (m->held[id])
			CHECK(m->ops->is_done(m->p, id) == m->told[id],
			      "is_done(%u) is %d, told %d", m->ops->name, m->first, id,
			      !m->told[id], m->told[id]);
}

/* A run-time change: mostly a switch to a random policy, else a parameter of the current one
 * set to a random value in its range. */
static void change(struct model *m)
{
	char words[96] = "", err[160];
	const struct kvt_policy_ops *to = m->ops;
	struct kvt_policy_param pa;
	size_t n_pol = 0;
	while (kvt_policy_at(n_pol))
		n_pol++;
	if (rnd(m, 3) || !m->ops->get_param) {
		to = kvt_policy_at(rnd(m, (uint32_t)n_pol));
	} else {
		size_t n_par = 0;
		while (!m->ops->get_param(m->p, n_par, &pa))
			n_par++;
		assert_int_equal(m->ops->get_param(m->p, rnd(m, (uint32_t)n_par), &pa), 0);
		double v = pa.lo + (pa.hi - pa.lo) * rnd(m, 1001) / 1000.0;
		if (pa.lo == (double)(long long)pa.lo && pa.hi == (double)(long long)pa.hi)
			v = (double)(long long)v; /* counts and switches: whole numbers */
		snprintf(words, sizeof(words), "%s=%.9g", pa.name, v);
	}
	const struct kvt_policy_ops *was = m->ops;
	int rc = kvt_policy_set(&m->ops, &m->p, m->n_held, to->name, words, cap, fill_meta, m, err,
	                        sizeof(err));
	CHECK(rc == 0, "-> %s %s: %s", was->name, m->first, to->name, words, err);
	for (uint32_t id = 0; id < n_ids; id++) { /* the new policy may decline some */
		bool now = m->ops->is_done && m->held[id] && m->ops->is_done(m->p, id);
		CHECK(!now || m->told[id], "%u told after the switch only", m->ops->name, m->first,
		      id);
		m->told[id] = now;
	}
	check_export(m);
}

static void run(const struct kvt_policy_ops *ops, uint64_t seed)
{
	static struct model m;
	memset(&m, 0, sizeof(m));
	m.ops = ops;
	m.first = ops->name;
	m.prev = KVT_POLICY_NONE;
	m.rng = seed * 0x2545f4914f6cdd1dULL | 1;
	assert_int_equal(ops->create(cap, &m.p), 0);
	if (seed % 2 == 0) { /* guarantees within a third of the tier, maxima above them */
		assert_int_equal(kvt_quota_create(&m.quota), 0);
		for (uint32_t t = 0; t < TENANT; t++) {
			uint64_t g = rnd(&m, cap >= 3 ? cap / 3 : 1),
			         max = g + 20 + rnd(&m, 2 * cap);
			assert_int_equal(kvt_quota_set(m.quota, t, g, max), 0);
		}
	}
	uint32_t v[16];
	run_seed = seed;
	for (int step = 0; step < steps; step++) {
		run_step = step;
		uint32_t r = rnd(&m, 1000), id;
		if (r < 350) {
			insert_id(&m);
		} else if (r < 650 && (id = random_id(&m, true)) != KVT_POLICY_NONE) {
			m.ops->on_access(m.p, id);
			m.told[id] = 0;
			sync_hint(&m, m.prev);
			m.prev = id;
		} else if (r < 700) { /* a hit the policy does not hold (a kept chunk) */
			id = random_id(&m, false);
			m.ops->on_access(m.p, id);
			if (m.ops->on_done)
				m.ops->on_done(m.p, id);
		} else if (r < 800 && (id = random_id(&m, true)) != KVT_POLICY_NONE) {
			remove_id(&m, id);
		} else if (r < 860 && m.ops->on_done &&
		           (id = random_id(&m, true)) != KVT_POLICY_NONE) {
			m.ops->on_done(m.p, id);
			/* a policy may decline a hint (conv: a chunk others' prefixes share) */
			m.told[id] = !m.ops->is_done || m.ops->is_done(m.p, id);
		} else if (r < 940) { /* asked and not taken: the victims stay */
			victims(&m, v, 1 + rnd(&m, 16), false);
		} else if (r < 970 && m.ops->pick_victims_tenants) {
			size_t n = victims(&m, v, 1 + rnd(&m, 16), true);
			for (size_t i = 0; i < n && rnd(&m, 2); i++)
				remove_id(&m, v[i]);
		} else if (r < 990) {
			check_export(&m);
			check_hints(&m);
		} else if (r < 993) {
			change(&m);
		}
	}
	check_export(&m);
	check_hints(&m);
	while (m.n_held) { /* empty it the way reclaim does */
		memset(m.leased, 0, sizeof(m.leased));
		size_t n = m.ops->pick_victims(m.p, v, 16, NULL, NULL);
		CHECK(n > 0, "no victim with %zu held", m.ops->name, m.first, m.n_held);
		for (size_t i = 0; i < n; i++) {
			CHECK(m.held[v[i]], "victim %u is not held", m.ops->name, m.first, v[i]);
			remove_id(&m, v[i]);
		}
	}
	CHECK(m.ops->pick_victims(m.p, v, 16, NULL, NULL) == 0, "victims from an empty policy",
	      m.ops->name, m.first);
	if (m.ops->memory_bytes)
		assert_true(m.ops->memory_bytes(m.p) > 0);
	m.ops->destroy(m.p);
	if (m.quota)
		for (uint32_t t = 0; t < TENANT; t++)
			assert_int_equal(kvt_quota_used(m.quota, t), 0);
	kvt_quota_destroy(m.quota);
}

static void test_policy_model_random_ops(void **state)
{
	(void)state;
	size_t n = 0;
	uint64_t seeds = kvt_test_env_u64("KVT_MODEL_SEEDS", SEEDS);
	uint64_t only = kvt_test_env_u64("KVT_MODEL_SEED", 0); /* a failure's seed, alone */
	for (size_t k = 0; kvt_policy_at(k); k++, n++)
		for (uint64_t seed = 1; seed <= (only ? 1 : seeds); seed++)
			run(kvt_policy_at(k), only ? only : seed * 7919 + k);
	assert_true(n >= 13);
}

/* The same at tiers of 1 to 8 chunks, 6 ids a chunk: every insert evicts, the one chunk is
 * leased, a tenant's guarantee is the whole tier (a failure's KVT_MODEL_SEED replays at every
 * size). */
static void test_policy_model_tiny_tiers(void **state)
{
	(void)state;
	static const uint32_t sizes[] = {1, 2, 3, 4, 8};
	uint64_t seeds = kvt_test_env_u64("KVT_MODEL_SEEDS", 1);
	uint64_t only = kvt_test_env_u64("KVT_MODEL_SEED", 0);
	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		cap = sizes[z];
		n_ids = 6 * cap;
		steps = STEPS / 4;
		for (size_t k = 0; kvt_policy_at(k); k++)
			for (uint64_t seed = 1; seed <= (only ? 1 : seeds); seed++)
				run(kvt_policy_at(k), only ? only : seed * 7919 + k + cap * 104729);
	}
	cap = 128;
	n_ids = IDS_MAX;
	steps = STEPS;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_policy_model_random_ops),
	    cmocka_unit_test(test_policy_model_tiny_tiers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
