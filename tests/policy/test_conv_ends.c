/*
 * test_conv_ends.c -- conv's victim scan reads each class list's ends from a mirror (struct
 * ends: ids, last uses, child counts, the density of the age's bin, whether the end is an
 * orphan) kept beside the per-id columns and the residents map, and passes over classes by
 * bounds (struct kvt_policy.lb); none of it may change which entry is chosen. This test
 * includes policy/conv.c itself (its export renamed, so the library's copy still links) to call
 * both scans after every step of long random sequences and to require the same entry from
 * best_end() (the mirror) as from best_within(.., 1, ..) (the columns): with and without the
 * request in flight kept out, with ids leased and ids already proposed, across parameter
 * changes, density folds, streams, done hints, removals and ids reused for new chunks.
 */
#define kvt_policy_conv kvt_policy_conv_under_test
#include "policy/conv.c"

#include "testlib.h"

#include <stdio.h>

#define N_IDS 700
#define CAP   160
#define STEPS 60000

struct run {
	struct kvt_policy *p;
	uint8_t held[N_IDS], leased[N_IDS];
	uint32_t depth[N_IDS];
	uint64_t rng, gen;
	size_t n_held;
};

static uint32_t rnd(struct run *r, uint32_t n)
{
	return (uint32_t)(kvt_test_xorshift(&r->rng) % n);
}

static bool not_leased(void *arg, uint32_t id)
{
	const struct run *r = arg;
	return !r->leased[id];
}

/* A free id, or N_IDS. */
static uint32_t free_id(struct run *r)
{
	for (int t = 0; t < 64; t++) {
		uint32_t id = rnd(r, N_IDS);
		if (!r->held[id])
			return id;
	}
	return N_IDS;
}

/* A held id, or KVT__NIL. */
static uint32_t held_id(struct run *r)
{
	for (int t = 0; t < 64; t++) {
		uint32_t id = rnd(r, N_IDS);
		if (r->held[id])
			return id;
	}
	return KVT__NIL;
}

static void drop(struct run *r, uint32_t id)
{
	kvt_policy_conv_under_test.on_remove(r->p, id);
	r->held[id] = 0;
	r->leased[id] = 0;
	r->n_held--;
}

/* Both scans, under walks that differ in what they step over, must pick the same entry. */
static void same_pick(struct run *r, size_t step)
{
	uint32_t out[4];
	size_t n_out = 0;
	for (int i = 0; i < 3 && r->n_held > 4; i++) {
		uint32_t id = held_id(r);
		if (id != KVT__NIL && !kvt__proposed(out, n_out, id))
			out[n_out++] = id;
	}
	for (int v = 0; v < 4; v++) {
		struct walk k = {.ok = v & 1 ? not_leased : NULL,
		                 .arg = r,
		                 .out = v & 2 ? out : NULL,
		                 .n = v & 2 ? n_out : 0,
		                 .not_request = r->p->strict};
		uint32_t want = best_within(r->p, 1, &k), got = best_end(r->p, &k);
		if (want != got)
			fail_msg("step %zu, walk %d: the mirror picks %u, the columns %u", step, v,
			         got, want);
		k.not_request = !k.not_request;
		want = best_within(r->p, 1, &k);
		got = best_end(r->p, &k);
		if (want != got)
			fail_msg(
			    "step %zu, walk %d (request %s): the mirror picks %u, the columns %u",
			    step, v, k.not_request ? "out" : "in", got, want);
	}
}

static void one_step(struct run *r, uint32_t *prev)
{
	const struct kvt_policy_ops *o = &kvt_policy_conv_under_test;
	uint32_t op = rnd(r, 100);
	if (op < 4) {
		o->on_stream(r->p, rnd(r, 5));
	} else if (op < 6) {
		static const char *const names[] = {"leaf_first", "strict", "orphan", "orphan"};
		static const char *const values[] = {"0", "1", "0.5", "1"};
		unsigned i = rnd(r, 4), v = rnd(r, 2);
		o->set_param(r->p, names[i], i >= 2 ? values[2 + v] : values[v]);
	} else if (op < 10) {
		uint32_t id = held_id(r);
		if (id != KVT__NIL)
			r->leased[id] ^= 1;
	} else if (op < 13) {
		uint32_t id = held_id(r);
		if (id != KVT__NIL)
			o->on_done(r->p, id);
	} else if (op < 17) {
		uint32_t id = held_id(r);
		if (id != KVT__NIL)
			drop(r, id); /* a parent may go before its children (strict=0, a delete) */
	} else if (op < 50) {
		uint32_t id = held_id(r);
		if (id != KVT__NIL) {
			o->on_access(r->p, id);
			*prev = id;
		}
	} else {
		if (r->n_held >= CAP) {
			uint32_t v;
			if (o->pick_victims(r->p, &v, 1, not_leased, r) == 1)
				drop(r, v);
			else
				return;
		}
		uint32_t id = free_id(r);
		if (id == N_IDS)
			return;
		bool chain = *prev != KVT__NIL && r->held[*prev] && rnd(r, 5);
		uint32_t parent = chain ? *prev : KVT__NIL;
		uint32_t depth = chain ? r->depth[*prev] + 1 : rnd(r, 3) ? 0 : 1 + rnd(r, 4);
		/* ids are reused for new chunks; now and then two chunks share a key hash */
		struct kvt_policy_meta m = {
		    .key_hash = rnd(r, 50) ? ++r->gen * 0x9e3779b97f4a7c15ULL : 0x1234,
		    .bytes = 1,
		    .parent = parent,
		    .depth = depth};
		o->on_insert(r->p, id, &m);
		r->held[id] = 1;
		r->depth[id] = depth;
		r->n_held++;
		*prev = id;
	}
}

static void test_conv_ends_mirror_the_columns(void **state)
{
	(void)state;
	size_t picks = 0;
	for (uint64_t seed = 1; seed <= 4; seed++) {
		struct run *r = calloc(1, sizeof(*r));
		assert_non_null(r);
		r->rng = seed * 0x2545f4914f6cdd1dULL;
		/* told a small capacity, the residents map grows on the way (parent_of()'s order)
		 */
		assert_int_equal(kvt_policy_conv_under_test.create(seed % 2 ? CAP : 16, &r->p), 0);
		size_t rmap_slots = r->p->rmask + 1;
		uint32_t prev = KVT__NIL;
		for (size_t step = 0; step < STEPS; step++) {
			one_step(r, &prev);
			if (r->n_held && (step % 3 == 0 || r->n_held >= CAP)) {
				same_pick(r, step);
				picks++;
			}
		}
		assert_true(r->p->now > 4 * PERIOD); /* the densities were folded on the way */
		assert_true(seed % 2 || r->p->rmask + 1 > rmap_slots);
		kvt_policy_conv_under_test.destroy(r->p);
		free(r);
	}
	assert_true(picks > 50000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_conv_ends_mirror_the_columns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
