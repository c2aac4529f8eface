/* test_policy_conv.c -- conv, the policy of conversations: its order untrained, chains relinked
 * across evictions, strict prefixes (leaves first, the open request spared), streams told apart,
 * tips that die learned, orphans first, done hints, and a switch into it. */
#include "pol_fixture.h"

#include "policy/minisim.h"
#include "policy/pol_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A conv with the chain 0 -> 1 -> 2 and the root 3, inserted in that order. */
static struct kvt_policy *conv_chain_and_root(const struct kvt_policy_ops *o)
{
	struct kvt_policy *p = make("conv", 16);
	ins(o, p, 0, KVT_POLICY_NONE, 0);
	ins(o, p, 1, 0, 1);
	ins(o, p, 2, 1, 2);
	ins(o, p, 3, KVT_POLICY_NONE, 0);
	return p;
}

/* conv before it has learned anything (every density 0): leaves go before inner entries, least
 * recently used first, so an untrained conv trims a chain from its tip, like prefix. Strict (the
 * default) also leaves the request in flight (3, just read) for last; strict=0 does not. */
static void test_policy_conv_untrained_order(void **state)
{
	const struct kvt_policy_ops *o = &kvt_policy_conv;
	struct kvt_policy *p = conv_chain_and_root(o);
	o->on_access(p, 3);
	expect_victims("conv", (uint32_t[]){2, 1, 0, 3}, 4, p);
	assert_int_equal(o->set_param(p, "strict", "0"), 0);
	expect_victims("conv", (uint32_t[]){2, 3, 0, 1}, 4, p);
	o->on_remove(p, 2);
	expect_victims("conv", (uint32_t[]){1, 3}, 2, p);
	o->on_remove(p, 1);
	expect_victims("conv", (uint32_t[]){0}, 1, p);
	assert_int_equal(o->set_param(p, "horizon", "0"), -EINVAL);
	assert_int_equal(o->set_param(p, "leaf_first", "0"), 0);
	assert_int_equal(o->set_param(p, "nope", "1"), -ENOENT);
	o->destroy(p);
}

/* conv: a parent evicted and re-inserted under a resident child gets the child back when the
 * child is next read right after it, so the parent still goes after its descendants. */
static void test_policy_conv_relinks_reinserted_parent(void **state)
{
	const struct kvt_policy_ops *o = &kvt_policy_conv;
	struct kvt_policy *p = conv_chain_and_root(o);
	assert_int_equal(o->set_param(p, "strict", "0"),
	                 0); /* the soft order, which relies on it */
	o->on_remove(p, 1);
	ins(o, p, 1, 0, 1); /* back from the history; 2 stayed */
	o->on_access(p, 2);
	/* leaves 3 then 2, then the inner chunks oldest first; 1 was taken for a leaf before */
	expect_victims("conv", (uint32_t[]){3, 2, 0, 1}, 4, p);
	o->on_remove(p, 2);
	expect_victims("conv", (uint32_t[]){3, 1, 0}, 3, p);
	o->destroy(p);
}

/* A caller may give a removed chunk's id to the next chunk it inserts (kvtierd's index does).
 * Chain 0 -> 1 -> 2 and root 3; 1 goes, and its id is given to a stranger x under 3, with a
 * child y (id 4). When 2 goes, its stale link to id 1 must not take x's child off x's count:
 * x stays inner, so leaf_first offers y before it. Before, x was taken for a leaf and went
 * first ("0 3 1 4"). */
static void test_policy_conv_reused_id_is_not_the_parent(void **state)
{
	const struct kvt_policy_ops *o = &kvt_policy_conv;
	struct kvt_policy *p = conv_chain_and_root(o);
	o->on_remove(p, 1);
	struct kvt_policy_meta x = {
	    .key_hash = 0xabcdef12345ULL, .bytes = 1, .parent = 3, .depth = 1};
	o->on_insert(p, 1, &x);
	ins(o, p, 4, 1, 2);
	o->on_remove(p, 2);
	uint32_t v[4];
	assert_int_equal(o->pick_victims(p, v, 4, NULL, NULL), 4);
	size_t at_x = 4, at_y = 4;
	for (size_t i = 0; i < 4; i++) {
		at_x = v[i] == 1 ? i : at_x;
		at_y = v[i] == 4 ? i : at_y;
	}
	if (!(at_y < at_x))
		fail_msg("x (id 1) is victim %zu, before its child y (id 4) at %zu", at_x, at_y);
	o->destroy(p);
}

/*
 * conv, strict (the default): no victim ever has a resident child, also once trained, when an
 * inner chunk's density is the lowest. Requests of 2-6 chunks (ids never reused) start a new
 * conversation, or read a resident prefix -- of their own earlier turn, or of a shared root that
 * many conversations branch from -- and extend it; one chunk in 8 is read again later. The same
 * replay with strict=0 must evict some inner chunk, or the test proves nothing.
 */
static size_t conv_inner_victims(bool strict)
{
	const struct kvt_policy_ops *o = &kvt_policy_conv;
	struct kvt_policy *p = make("conv", 128);
	assert_int_equal(o->set_param(p, "strict", strict ? "1" : "0"), 0);
	static uint32_t parent[N_IDS], nchild[N_IDS], last_of[64];
	static uint8_t res[N_IDS];
	memset(res, 0, sizeof(res));
	memset(nchild, 0, sizeof(nchild));
	memset(last_of, 0xff, sizeof(last_of));
	srand(11);
	size_t used = 0, inner = 0;
	uint32_t next = 0;
	while (next + 8 < N_IDS) {
		/* the prefix this request reads: a conversation's last chunk and its ancestors */
		uint32_t conv = (uint32_t)(rand() % 64), chain[64], n = 0, depth = 0;
		uint32_t at = rand() % 4 ? last_of[conv] : (rand() % 2 ? 0 : UINT32_MAX);
		for (uint32_t x = at; x != UINT32_MAX && x < N_IDS && n < 64; x = parent[x])
			chain[n++] = x;
		uint32_t pa = UINT32_MAX;
		for (uint32_t i = n; i-- > 0 && res[chain[i]];) { /* the leading run still held */
			o->on_access(p, chain[i]);
			pa = chain[i];
			depth++;
		}
		for (uint32_t k = 0, m = 2 + (uint32_t)(rand() % 5); k < m; k++) {
			uint32_t id = next++;
			if (used == 128) {
				uint32_t v;
				assert_int_equal(o->pick_victims(p, &v, 1, NULL, NULL), 1);
				assert_true(res[v]);
				inner += nchild[v] != 0;
				o->on_remove(p, v);
				res[v] = 0;
				used--;
				if (parent[v] != UINT32_MAX)
					nchild[parent[v]]--;
			}
			bool held = pa != UINT32_MAX && res[pa];
			parent[id] = held ? pa : UINT32_MAX;
			if (held)
				nchild[pa]++;
			ins(o, p, id, held ? pa : KVT_POLICY_NONE, held ? depth : 0);
			depth = held ? depth + 1 : 1;
			res[id] = 1;
			used++;
			pa = id;
		}
		last_of[conv] = pa;
	}
	o->destroy(p);
	return inner;
}

static void test_policy_conv_strict_leaves_first(void **state)
{
	size_t strict = conv_inner_victims(true), soft = conv_inner_victims(false);
	fprintf(stderr, "inner chunks evicted: %zu strict, %zu with strict=0\n", strict, soft);
	assert_int_equal(strict, 0);
	assert_true(soft > 0);
}

/* conv, strict: the request in flight (its chunks read or put since it began at depth 0) is
 * left alone while anything else can go -- its put does not evict its own prefix -- and it goes
 * when nothing else is left (leaf first). strict=0 may take it at once. */
static void test_policy_conv_strict_spares_request(void **state)
{
	const struct kvt_policy_ops *o = &kvt_policy_conv;
	for (int strict = 1; strict >= 0; strict--) {
		struct kvt_policy *p = make("conv", 16);
		assert_int_equal(o->set_param(p, "strict", strict ? "1" : "0"), 0);
		ins(o, p, 0, KVT_POLICY_NONE, 0); /* an earlier request: 0 -> 1 */
		ins(o, p, 1, 0, 1);
		o->on_access(p, 0); /* ... read again, then a new request: 2 -> 3 -> 4 */
		o->on_access(p, 1);
		ins(o, p, 2, KVT_POLICY_NONE, 0);
		ins(o, p, 3, 2, 1);
		ins(o, p, 4, 3, 2);
		uint32_t v[5];
		assert_int_equal(o->pick_victims(p, v, 5, NULL, NULL), 5);
		if (strict) {
			assert_true(v[0] == 1 && v[1] == 0); /* the earlier request, tip first */
			assert_true(v[2] == 4 && v[3] == 3 && v[4] == 2);
		} else {
			assert_true(v[0] != 1 || v[1] != 0 || v[2] != 4);
		}
		o->destroy(p);
	}
}

/* Engines interleave (on_stream): engine 1 has read its prefix 2 -> 3 when engine 2 begins a
 * request (5). Engine 1's request is still in flight -- its put of 4 under 3 comes next -- so
 * strict conv leaves 2 and 3 alone and takes the earlier request (1, then 0). Told nothing of
 * streams, conv takes 5's start for the end of 2 -> 3 and offers its tip, 3, next after 1. */
/*
 * Chains read from their middle: the caller numbers depths from the first chunk it names (as
 * kvtierd and the miniature simulations do), so a chunk is one level below another in one
 * request and above it in the next, and conv's parent links (the chunk touched before, one level
 * up) came to loop. Its strict victim walk then went round the loop for ever -- kvtierd hung in
 * an acquire. Now it must give victims and keep going; an alarm fails the test if it hangs.
 */
static void test_policy_conv_survives_link_loops(void **state)
{
	(void)state;
	struct kvt_minisim *m;
	/* 60 chunks at 1x, every key sampled: five conv instances of 30 to 480 entries */
	assert_int_equal(kvt_minisim_create(kvt_policy_find("conv"), NULL, 60, 4096, &m), 0);
	uint64_t keys[64];
	for (int i = 0; i < 64; i++)
		keys[i] = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
	alarm(60);
	size_t n_keys = 0;
	for (unsigned i = 0; i < 300; i++) {
		unsigned at = (i * 7) % 48, n = 4 + i % 13;
		kvt_minisim_request(m, keys + at, n);
		n_keys += n;
	}
	alarm(0);
	assert_int_equal(kvt_minisim_samples(m), n_keys);
	double c[5];
	kvt_minisim_curve(m, c);
	assert_true(c[1] > 0 && c[1] <= c[4]);
	kvt_minisim_destroy(m);
}

static void test_policy_conv_streams_apart(void **state)
{
	const struct kvt_policy_ops *o = &kvt_policy_conv;
	for (int told = 1; told >= 0; told--) {
		struct kvt_policy *p = make("conv", 16);
		if (told)
			o->on_stream(p, 1);
		ins(o, p, 0, KVT_POLICY_NONE, 0); /* an earlier request: 0 -> 1, read again */
		ins(o, p, 1, 0, 1);
		o->on_access(p, 0);
		o->on_access(p, 1);
		ins(o, p, 2, KVT_POLICY_NONE, 0); /* engine 1's request: 2 -> 3 ... */
		ins(o, p, 3, 2, 1);
		if (told)
			o->on_stream(p, 2);
		ins(o, p, 5, KVT_POLICY_NONE, 0); /* engine 2's */
		if (told)
			o->on_stream(p, 1);
		uint32_t v[2];
		assert_int_equal(o->pick_victims(p, v, 2, NULL, NULL), 2);
		if (told)
			assert_true(v[0] == 1 && v[1] == 0);
		else
			assert_true(v[1] == 3);
		ins(o, p, 4, 3, 2); /* ... -> 4 */
		o->destroy(p);
	}
}

/* Trains a conv of 64 entries: conversations of 3 chained chunks and a tip, each one coming
 * back (its inner chunks read) 8 conversations later. res[id] says which ids are resident.
 * @return : the ids used, 0 to the return value. */
static uint32_t conv_train(const struct kvt_policy_ops *o, struct kvt_policy *p, uint8_t *res)
{
	size_t used = 0;
	uint32_t next_id = 0;
	for (int round = 0; round < 600; round++) {
		/* a new conversation: 3 chained chunks + a tip; conversation round-8 returns */
		uint32_t base = next_id;
		next_id += 4;
		if (next_id >= N_IDS)
			break;
		for (uint32_t k = 0; k < 4; k++) {
			if (used == 64) {
				uint32_t v;
				assert_int_equal(o->pick_victims(p, &v, 1, NULL, NULL), 1);
				o->on_remove(p, v);
				res[v] = 0;
				used--;
			}
			ins(o, p, base + k, k ? base + k - 1 : KVT_POLICY_NONE, k);
			res[base + k] = 1;
			used++;
		}
		if (round >= 8) {
			uint32_t old = base - 32;
			for (uint32_t k = 0; k < 3; k++)
				if (res[old + k])
					o->on_access(p, old + k);
		}
	}
	return next_id;
}

/* conv learns: chains whose inner chunks come back a few hundred events later, and whose tips
 * (no child) never do. Once trained it evicts a fresh tip before an older inner chunk. */
static void test_policy_conv_learns_tips_die(void **state)
{
	const struct kvt_policy_ops *o = &kvt_policy_conv;
	struct kvt_policy *p = make("conv", 64);
	uint8_t res[N_IDS] = {0};
	uint32_t next_id = conv_train(o, p, res);
	/* the freshest tip has no child and lives in a class that never returned */
	uint32_t tip = next_id - 1, v[4];
	size_t n = o->pick_victims(p, v, 4, NULL, NULL);
	assert_true(n == 4);
	bool tip_early = false;
	for (size_t i = 0; i < n; i++)
		tip_early = tip_early || (v[i] % 4 == 3);
	if (!tip_early)
		fail_msg("conv proposed %u %u %u %u, no tip (e.g. %u)", v[0], v[1], v[2], v[3],
		         tip);
	o->destroy(p);
}

/* Rank of id in export_order (0 = coldest), or SIZE_MAX when absent. */
static size_t export_rank(const struct kvt_policy_ops *o, struct kvt_policy *p, uint32_t id)
{
	static uint32_t ids[N_IDS];
	size_t n = o->export_order(p, ids, N_IDS);
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return i;
	return SIZE_MAX;
}

/*
 * conv ranks orphans first with orphan = 0 (the default, 0.5, ranks them lower as well). Two
 * trained convs get two fresh
 * conversations x and y of the trained shape and lose x's second chunk: x's third has no
 * parent now. With orphan = 0 it ranks before x's first chunk and y's first three, all fresh
 * and of classes that come back; with orphan = 1 it ranks among them. (Victims are offered
 * from the ends of the class lists, so an orphan goes first once it reaches an end.)
 */
static void test_policy_conv_orphans_first(void **state)
{
	const struct kvt_policy_ops *o = &kvt_policy_conv;
	size_t at[2], others[2];
	for (int k = 0; k < 2; k++) {
		struct kvt_policy *p = make("conv", 64);
		uint8_t res[N_IDS] = {0};
		uint32_t x = conv_train(o, p, res), y = x + 4;
		for (uint32_t i = 0; i < 4; i++)
			ins(o, p, x + i, i ? x + i - 1 : KVT_POLICY_NONE, i);
		for (uint32_t i = 0; i < 4; i++)
			ins(o, p, y + i, i ? y + i - 1 : KVT_POLICY_NONE, i);
		struct kvt_policy_param pp;
		assert_int_equal(o->get_param(p, 3, &pp), 0);
		assert_string_equal(pp.name, "orphan");
		assert_true(pp.value == 0.5);
		assert_int_equal(o->set_param(p, "orphan", "1.5"), -EINVAL);
		assert_int_equal(o->set_param(p, "orphan", k ? "1" : "0"), 0);
		o->on_remove(p, x + 1);
		at[k] = export_rank(o, p, x + 2);
		others[k] = export_rank(o, p, x);
		for (uint32_t i = 0; i < 3; i++) {
			size_t r = export_rank(o, p, y + i);
			others[k] = r < others[k] ? r : others[k];
		}
		assert_true(at[k] != SIZE_MAX && others[k] != SIZE_MAX);
		o->destroy(p);
	}
	fprintf(stderr,
	        "the orphan ranks %zu with orphan=0, %zu with orphan=1; the first fresh "
	        "chunk %zu and %zu\n",
	        at[0], at[1], others[0], others[1]);
	assert_true(at[0] < others[0]);
	assert_true(at[1] > others[1]);
}

/* conv learns what a done hint is worth as it learns its classes (test_policy_sim replays
 * right and wrong hints); a chunk other conversations branch from keeps its place. */
static void test_policy_conv_done_hint(void **state)
{
	const struct kvt_policy_ops *o = &kvt_policy_conv;
	struct kvt_policy *p = conv_chain_and_root(o); /* 0 <- 1 <- 2, and 3 */
	ins(o, p, 4, 0, 1);                            /* 0 has two children now */
	uint32_t before[5], after[5];
	assert_int_equal(o->export_order(p, before, 5), 5);
	o->on_done(p, 0);
	assert_int_equal(o->export_order(p, after, 5), 5);
	assert_memory_equal(before, after, sizeof(before));
	o->on_done(p, 2); /* a leaf: hinted; then read again */
	o->on_access(p, 2);
	o->on_remove(p, 2);
	expect_victims("conv", (uint32_t[]){1, 3, 4, 0}, 4, p);
	o->destroy(p);
}

/* conv: a chunk just inserted has no child yet, but is no tip while its request may still
 * extend it; it becomes one (a dead class, once trained) when the next request begins. */
static void test_policy_conv_tip_waits_for_request_end(void **state)
{
	const struct kvt_policy_ops *o = &kvt_policy_conv;
	struct kvt_policy *p = make("conv", 64);
	assert_int_equal(o->set_param(p, "leaf_first", "0"), 0);
	static uint8_t res[N_IDS];
	memset(res, 0, sizeof(res));
	size_t used = 0;
	uint64_t key = 0;
	uint32_t b = 0, c = 0;
	size_t before = 0;
	/* 3 chained chunks + a tip per request; inner chunks return 8 requests later. Ids are
	 * recycled (2,048 of them), keys never. */
	for (uint32_t round = 0; round < 3001; round++) {
		uint32_t base = (round * 4) % 2048;
		for (uint32_t k = 0; k < 4; k++) {
			uint32_t id = base + k, v;
			if (res[id]) {
				o->on_remove(p, id);
				res[id] = 0;
				used--;
			}
			if (used == 64) {
				assert_int_equal(o->pick_victims(p, &v, 1, NULL, NULL), 1);
				o->on_remove(p, v);
				res[v] = 0;
				used--;
			}
			struct kvt_policy_meta m = {.key_hash = ++key * 0x9e3779b97f4a7c15ULL,
			                            .bytes = 1,
			                            .parent = k ? id - 1 : KVT_POLICY_NONE,
			                            .depth = k};
			o->on_insert(p, id, &m);
			res[id] = 1;
			used++;
			if (round == 3000 && k == 0)
				break; /* the next request has begun */
		}
		if (round == 2999) {
			/* before the next request: the last chunk is pending, no tip */
			b = base + 2;
			c = base + 3;
			before = export_rank(o, p, c);
		}
		if (round >= 8 && round < 3000)
			for (uint32_t k = 0; k < 3; k++) {
				uint32_t id = (base + 2048 - 32 + k) % 2048;
				if (res[id])
					o->on_access(p, id);
			}
	}
	size_t after = export_rank(o, p, c);
	assert_true(res[c] && before != SIZE_MAX);
	if (!(after < before) || !(after < export_rank(o, p, b)))
		fail_msg("conv: tip rank %zu before its request ended, %zu after; b at %zu", before,
		         after, export_rank(o, p, b));
	o->destroy(p);
}

/* A switch replays the entries into the new policy; the last one replayed is no engine's
 * "chunk touched just before". conv took it for one: the next hit one level below it relinked
 * the hit chunk under it and cancelled its done hint (test_policy_model, seed 934449). */
static void test_policy_conv_rebuild_is_no_touch(void **state)
{
	(void)state;
	const struct kvt_policy_ops *lru = &kvt_policy_lru, *cv = &kvt_policy_conv;
	struct kvt_policy *from = make("lru", 16), *to = NULL;
	ins(lru, from, 1, KVT_POLICY_NONE, 0); /* a chain: 1 <- 2 */
	ins(lru, from, 2, 1, 1);
	ins(lru, from, 3, KVT_POLICY_NONE, 0); /* alone, the hottest: replayed last */
	assert_int_equal(kvt_policy_switch(lru, from, 3, cv, 16, fill_meta, NULL, &to), 0);
	cv->on_done(to, 3); /* the engine is done with 3's conversation */
	assert_true(cv->is_done(to, 3));
	cv->on_access(to, 2); /* a hit at depth 1, right after the switch */
	assert_true(cv->is_done(to, 3));
	uint32_t got[4];
	size_t n = cv->pick_victims(to, got, 1, NULL, NULL);
	assert_int_equal(n, 1);
	assert_int_equal(got[0], 3); /* the done chunk goes first */
	lru->destroy(from);
	cv->destroy(to);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_policy_conv_untrained_order),
	    cmocka_unit_test(test_policy_conv_relinks_reinserted_parent),
	    cmocka_unit_test(test_policy_conv_survives_link_loops),
	    cmocka_unit_test(test_policy_conv_reused_id_is_not_the_parent),
	    cmocka_unit_test(test_policy_conv_strict_leaves_first),
	    cmocka_unit_test(test_policy_conv_strict_spares_request),
	    cmocka_unit_test(test_policy_conv_streams_apart),
	    cmocka_unit_test(test_policy_conv_learns_tips_die),
	    cmocka_unit_test(test_policy_conv_orphans_first),
	    cmocka_unit_test(test_policy_conv_tip_waits_for_request_end),
	    cmocka_unit_test(test_policy_conv_done_hint),
	    cmocka_unit_test(test_policy_conv_rebuild_is_no_touch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
