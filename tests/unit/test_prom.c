/*
 * test_prom.c -- the stats object in the Prometheus text format (ipc/daemon/prom.c): the rules
 * on a small object, line for line, and 200,000 damaged copies of it (bytes changed, cut short,
 * never NUL-terminated, in buffers of their exact size so that ASan sees any read past them)
 * that must give a result or an error, never a crash or a read out of bounds.
 */
#include "testlib.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kvd_prom_render(const char *json, size_t json_len, char *out, size_t len);

static const char stats[] =
    "{\"version\":\"1.2.3\",\"protocol\":1,\"tiers\":[{\"name\":\"host\",\"policy\":\"lru\","
    "\"hits\":5,\"used_bytes\":10},{\"name\":\"nvme\",\"backend\":\"uring\",\"hits\":2,"
    "\"full\":true,\"tenant_usage\":[{\"tenant\":7,\"used_bytes\":3,\"max_bytes\":null}]}],"
    "\"lookups\":9,\"latency\":[{\"op\":\"put\",\"buckets\":[1,2]}],\"latency_bounds_us\":[1,"
    "2],\"tenant_stats\":[{\"tenant\":1000,\"hits\":4}],\"draining\":false}";

static const char want[] = "# TYPE kvtier_build_info gauge\n"
                           "kvtier_build_info{version=\"1.2.3\"} 1\n"
                           "# TYPE kvtier_draining gauge\n"
                           "kvtier_draining 0\n"
                           "# TYPE kvtier_lookups counter\n"
                           "kvtier_lookups_total 9\n"
                           "# TYPE kvtier_protocol gauge\n"
                           "kvtier_protocol 1\n"
                           "# TYPE kvtier_tenant_hits counter\n"
                           "kvtier_tenant_hits_total{tenant=\"1000\"} 4\n"
                           "# TYPE kvtier_tier_full gauge\n"
                           "kvtier_tier_full{tier=\"nvme\"} 1\n"
                           "# TYPE kvtier_tier_hits counter\n"
                           "kvtier_tier_hits_total{tier=\"host\"} 5\n"
                           "kvtier_tier_hits_total{tier=\"nvme\"} 2\n"
                           "# TYPE kvtier_tier_info gauge\n"
                           "kvtier_tier_info{tier=\"host\",policy=\"lru\"} 1\n"
                           "kvtier_tier_info{tier=\"nvme\",backend=\"uring\"} 1\n"
                           "# TYPE kvtier_tier_tenant_used_bytes gauge\n"
                           "kvtier_tier_tenant_used_bytes{tier=\"nvme\",tenant=\"7\"} 3\n"
                           "# TYPE kvtier_tier_used_bytes gauge\n"
                           "kvtier_tier_used_bytes{tier=\"host\"} 10\n";

/* Counters get _total and gauges none; strings become an info sample's labels; a nested array
 * adds its label to its parent's; null is left out; the latency members are not flattened;
 * families are sorted, each under one TYPE line. */
static void test_prom_rules(void **state)
{
	char out[4096];
	int n = kvd_prom_render(stats, strlen(stats), out, sizeof(out));
	assert_true(n > 0);
	assert_string_equal(out, want);
	assert_int_equal(kvd_prom_render(stats, strlen(stats), out, 100), -ENOBUFS);
	assert_int_equal(kvd_prom_render("[1,2]", 5, out, sizeof(out)), -EINVAL);
	assert_int_equal(kvd_prom_render("{\"a\":{\"b\":1}}", 13, out, sizeof(out)), -EINVAL);
	assert_int_equal(kvd_prom_render("{\"x\":[1]}", 9, out, sizeof(out)), -EINVAL);
	assert_int_equal(kvd_prom_render("{}", 2, out, sizeof(out)), 0);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
	return *s;
}

static void test_prom_damaged_input(void **state)
{
	static const char alphabet[] = "{}[]\",:0123456789.-etrufalsn \\\n";
	uint64_t s = 0x9e3779b97f4a7c15ull;
	size_t len = strlen(stats), ok = 0;
	char *out = malloc(1 << 16);
	assert_non_null(out);
	for (int i = 0; i < 200000; i++) {
		size_t n = i & 1 ? len : rnd(&s) % (len + 1); /* whole, or cut short */
		char *in = malloc(n ? n : 1); /* exactly n bytes: no terminator to lean on */
		assert_non_null(in);
		memcpy(in, stats, n);
		for (unsigned k = rnd(&s) % 4; k > 0 && n; k--) {
			uint64_t r = rnd(&s);
			in[r % n] = r & 0x100 ? alphabet[(r >> 9) % (sizeof(alphabet) - 1)]
			                      : (char)(r >> 16);
		}
		int rc = kvd_prom_render(in, n, out, 1 << 16);
		assert_true(rc == -EINVAL || rc == -ENOBUFS || (rc >= 0 && rc < (1 << 16)));
		if (rc >= 0) {
			assert_int_equal(strlen(out), (size_t)rc);
			ok++;
		}
		free(in);
	}
	print_message("%zu of 200000 damaged inputs rendered, the rest refused\n", ok);
	assert_true(ok > 0); /* the undamaged and harmlessly damaged ones */
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_prom_rules),
	    cmocka_unit_test(test_prom_damaged_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
