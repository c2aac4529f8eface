/* test_extent.c -- the host pool's extent allocator against a reference bitmap. */
#include "testlib.h"
#include "tiers/host/extent.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void check_invariants(const struct kvt_extent *e)
{
	assert_int_equal(kvt_extent_audit(e, NULL), 0);
}

static void test_extent_random_churn(void **state)
{
	enum { N = 4096, LIVE = 512 };
	struct kvt_extent e;
	assert_int_equal(kvt_extent_init(&e, N), 0);
	static uint8_t owner[N];
	int64_t heads[LIVE];
	uint32_t lens[LIVE];
	for (int i = 0; i < LIVE; i++)
		heads[i] = -1;
	srand(1);
	for (int step = 0; step < 20000; step++) {
		int i = rand() % LIVE;
		if (heads[i] >= 0) {
			assert_int_equal(kvt_extent_free(&e, (uint32_t)heads[i]), lens[i]);
			memset(owner + heads[i], 0, lens[i]);
			heads[i] = -1;
		} else {
			uint32_t n = (rand() % 4) ? 1 + rand() % 8 : 1 + rand() % 200;
			int64_t h = kvt_extent_alloc(&e, n);
			if (h < 0) {
				assert_int_equal(h, -ENOSPC);
				continue;
			}
			for (uint32_t k = 0; k < n; k++)
				assert_int_equal(owner[h + k], 0); /* no overlap */
			memset(owner + h, 1, n);
			heads[i] = h, lens[i] = n;
		}
		if (step % 997 == 0)
			check_invariants(&e);
	}
	for (int i = 0; i < LIVE; i++)
		if (heads[i] >= 0)
			kvt_extent_free(&e, (uint32_t)heads[i]);
	check_invariants(&e);
	assert_int_equal(e.free_granules, N);
	assert_int_equal(kvt_extent_largest(&e), N);
	kvt_extent_fini(&e);
}

static void test_extent_bad_free_and_full(void **state)
{
	struct kvt_extent e;
	assert_int_equal(kvt_extent_init(&e, 100), 0);
	int64_t a = kvt_extent_alloc(&e, 60);
	assert_int_equal(a, 0);
	assert_int_equal(kvt_extent_alloc(&e, 41), -ENOSPC);
	int64_t b = kvt_extent_alloc(&e, 40);
	assert_int_equal(b, 60);
	assert_int_equal(kvt_extent_alloc(&e, 1), -ENOSPC);
	assert_int_equal(kvt_extent_free(&e, 1), -EINVAL); /* not a head */
	assert_int_equal(kvt_extent_free(&e, 60), 40);
	assert_int_equal(kvt_extent_free(&e, 60), -EINVAL); /* double free */
	assert_int_equal(kvt_extent_free(&e, 0), 60);
	assert_int_equal(kvt_extent_alloc(&e, 100), 0);
	kvt_extent_fini(&e);
}

/* The audit (kvtier check's view of a pool) finds each kind of damage to the books. */
static void test_extent_audit_finds_damage(void **state)
{
	struct kvt_extent e;
	assert_int_equal(kvt_extent_init(&e, 256), 0);
	int64_t a = kvt_extent_alloc(&e, 16), b = kvt_extent_alloc(&e, 16);
	assert_int_equal(kvt_extent_alloc(&e, 8), 32);
	assert_int_equal(kvt_extent_free(&e, (uint32_t)a), 16);
	uint32_t used = 0;
	assert_int_equal(kvt_extent_audit(&e, &used), 0);
	assert_int_equal(used, 2);
	assert_true(kvt_extent_is_allocated(&e, (uint32_t)b, 16));
	assert_false(kvt_extent_is_allocated(&e, (uint32_t)b, 8));     /* another size */
	assert_false(kvt_extent_is_allocated(&e, (uint32_t)a, 16));    /* freed */
	assert_false(kvt_extent_is_allocated(&e, (uint32_t)b + 1, 1)); /* not a head */

	e.free_granules++; /* a count off by one */
	assert_int_equal(kvt_extent_audit(&e, NULL), -EUCLEAN);
	e.free_granules--;
	e.is_free[b] = 1; /* an allocation marked free: two free neighbours */
	assert_int_equal(kvt_extent_audit(&e, NULL), -EUCLEAN);
	e.is_free[b] = 0;
	uint32_t len = e.len[b];
	e.len[b] = 0; /* a lost head */
	assert_int_equal(kvt_extent_audit(&e, NULL), -EUCLEAN);
	e.len[b] = len;
	uint64_t mask = e.bin_mask[0];
	e.bin_mask[0] = 0; /* free extents no list reaches */
	assert_int_equal(kvt_extent_audit(&e, NULL), -EUCLEAN);
	e.bin_mask[0] = mask;
	assert_int_equal(kvt_extent_audit(&e, NULL), 0);
	kvt_extent_fini(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_extent_random_churn),
	    cmocka_unit_test(test_extent_bad_free_and_full),
	    cmocka_unit_test(test_extent_audit_finds_damage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
