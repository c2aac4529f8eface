/* pol_fixture.h -- what the policy unit tests share: ids with remembered metadata, a policy by
 * name, inserts, and the victim order expected. */
#ifndef KVT_TESTS_POL_FIXTURE_H
#define KVT_TESTS_POL_FIXTURE_H
#include "testlib.h"

#include "policy/policy.h"

#include <stdint.h>
#include <stdlib.h>

#define N_IDS 4096

/* Every id's metadata as meta() made it. */
static struct kvt_policy_meta metas[N_IDS];

/* The metadata of id (a chain link to parent at depth), remembered in metas[] for fill_meta. */
static inline struct kvt_policy_meta meta(uint32_t id, uint32_t parent, uint32_t depth)
{
	struct kvt_policy_meta m = {
	    .key_hash = 0x1234567ULL * (id + 1), .bytes = 1, .parent = parent, .depth = depth};
	metas[id] = m;
	return m;
}

/* A policy by name, made for hint entries; it must be made. */
static inline struct kvt_policy *make(const char *name, size_t hint)
{
	const struct kvt_policy_ops *ops = kvt_policy_find(name);
	assert_non_null(ops);
	struct kvt_policy *p = NULL;
	assert_int_equal(ops->create(hint, &p), 0);
	return p;
}

/* Inserts id, a child of parent at depth. */
static inline void ins(const struct kvt_policy_ops *ops, struct kvt_policy *p, uint32_t id,
                       uint32_t parent, uint32_t depth)
{
	struct kvt_policy_meta m = meta(id, parent, depth);
	ops->on_insert(p, id, &m);
}

/* The policy's first n victims are want[0..n), in that order. */
static inline void expect_victims(const char *name, const uint32_t *want, size_t n,
                                  struct kvt_policy *p)
{
	uint32_t got[16];
	size_t k = kvt_policy_find(name)->pick_victims(p, got, n, NULL, NULL);
	assert_int_equal(k, n);
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i])
			fail_msg("%s: victim %zu is %u, want %u", name, i, got[i], want[i]);
}

/* A switch's source of each id's metadata: what meta() remembered. */
static inline void fill_meta(void *arg, uint32_t id, struct kvt_policy_meta *out)
{
	(void)arg;
	*out = metas[id];
}

#endif
