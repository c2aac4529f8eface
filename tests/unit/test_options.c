/* test_options.c -- the options table: defaults, units, bounds, files, environment. */
#include "testlib.h"
#include "core/options.h"
#include "core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static void test_options_units_and_bounds(void **state)
{
	struct kvt_options o;
	kvt_opts_defaults(&o);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_LEASE_TIMEOUT_MS), 30000);
	assert_int_equal(kvt_opts_set(&o, "host.bytes", "64MiB"), 0);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_HOST_BYTES), 64ull << 20);
	assert_int_equal(kvt_opts_set(&o, "host.bytes", "4GiB"), 0);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_HOST_BYTES), 4ull << 30);
	assert_int_equal(kvt_opts_set(&o, "host.bytes", "12 parsecs"), -EINVAL);
	assert_int_equal(kvt_opts_set(&o, "host.bytes", "1k"), -ERANGE);
	assert_int_equal(kvt_opts_set(&o, "host.bytes", "-5"), -EINVAL);
	assert_int_equal(kvt_opts_set(&o, "no.such", "1"), -ENOENT);
	assert_int_equal(kvt_opts_set(&o, "rocksdb.wal", "maybe"), -EINVAL);
	assert_int_equal(kvt_opts_set_pair(&o, " lease.timeout_ms = 250 "), 0);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_LEASE_TIMEOUT_MS), 250);
	/* a policy's parameter one at a time: "host.policy.small_ratio = 0.1" */
	assert_int_equal(kvt_opts_set(&o, "host.policy.small_ratio", "0.1"), 0);
	assert_int_equal(kvt_opts_set_pair(&o, "host.policy.move_threshold = 2"), 0);
	assert_string_equal(kvt_opt_str(&o, KVT_OPT_HOST_POLICY_PARAMS),
	                    "small_ratio=0.1 move_threshold=2");
	assert_int_equal(kvt_opts_set(&o, "rocksdb.policy.max_count", "100"), 0);
	assert_string_equal(kvt_opt_str(&o, KVT_OPT_ROCKSDB_POLICY_PARAMS), "max_count=100");
	assert_int_equal(kvt_opts_set(&o, "nvme.policy.x", "1"), -ENOENT);
	assert_int_equal(kvt_opts_set(&o, "host.policy.a.b", "1"), -ENOENT);
	assert_int_equal(kvt_opts_set(&o, "host.policy.x", "1 y=2"), -EINVAL);
	/* the same parameter again replaces its value where it stands (was appended: the option
	 * grew with every set, up to -ERANGE) */
	assert_int_equal(kvt_opts_set(&o, "host.policy.small_ratio", "0.3"), 0);
	assert_string_equal(kvt_opt_str(&o, KVT_OPT_HOST_POLICY_PARAMS),
	                    "small_ratio=0.3 move_threshold=2");
	for (int i = 0; i < 100; i++)
		assert_int_equal(kvt_opts_set(&o, "host.policy.move_threshold", "3"), 0);
	assert_string_equal(kvt_opt_str(&o, KVT_OPT_HOST_POLICY_PARAMS),
	                    "small_ratio=0.3 move_threshold=3");
	uint64_t v;
	assert_int_equal(kvt_parse_size("18446744073709551615", &v), 0);
	assert_int_equal(kvt_parse_size("99999999999999TiB", &v), -ERANGE);
}

/* kvt_params_merge: each key once, in first place, with its last value; bad words change
 * nothing; a result that does not fit changes nothing. */
static void test_options_params_merge(void **state)
{
	char p[32] = "";
	assert_int_equal(kvt_params_merge(p, sizeof(p), ""), 0);
	assert_string_equal(p, "");
	assert_int_equal(kvt_params_merge(p, sizeof(p), "a=1  b=2\tc=3"), 0);
	assert_string_equal(p, "a=1 b=2 c=3");
	assert_int_equal(kvt_params_merge(p, sizeof(p), "b=9 d=4 b=8 ab=5"), 0);
	assert_string_equal(p, "a=1 b=8 c=3 d=4 ab=5");
	const char *bad[] = {"x", "=1", "k=", "k=1=2", "ok=1 bad", NULL};
	for (size_t i = 0; bad[i]; i++) {
		assert_int_equal(kvt_params_merge(p, sizeof(p), bad[i]), -EINVAL);
		assert_string_equal(p, "a=1 b=8 c=3 d=4 ab=5");
	}
	assert_int_equal(kvt_params_merge(p, sizeof(p), "a=0123456789ab"), 0); /* 31 bytes */
	assert_string_equal(p, "a=0123456789ab b=8 c=3 d=4 ab=5");
	assert_int_equal(kvt_params_merge(p, sizeof(p), "a=0123456789abc"), -ERANGE); /* 32 */
	assert_string_equal(p, "a=0123456789ab b=8 c=3 d=4 ab=5");
}

static void test_options_file_and_env(void **state)
{
	char dir[256], path[300], err[256];
	kvt_test_tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/kvtier.conf", dir);
	FILE *f = fopen(path, "w");
	fprintf(f, "# comment\nhost.bytes = 128MiB\n\nlease.timeout_ms=1000 # trailing\n");
	fclose(f);
	struct kvt_options o;
	kvt_opts_defaults(&o);
	assert_int_equal(kvt_opts_load_file(&o, path, err, sizeof(err)), 0);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_HOST_BYTES), 128ull << 20);
	setenv("KVTIER_LEASE_TIMEOUT_MS", "2000", 1);
	assert_int_equal(kvt_opts_load_env(&o, err, sizeof(err)), 0);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_LEASE_TIMEOUT_MS), 2000);
	setenv("KVTIER_HOST_BYTES", "lots", 1);
	assert_int_equal(kvt_opts_load_env(&o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "KVTIER_HOST_BYTES"));
	unsetenv("KVTIER_HOST_BYTES");
	f = fopen(path, "w");
	fprintf(f, "host.bytes = 1MiB\nbogus.option = 3\n");
	fclose(f);
	assert_int_equal(kvt_opts_load_file(&o, path, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, ":2:"));
	kvt_test_rmtree(dir);
}

static void test_options_auto_resolves(void **state)
{
	struct kvt_options o;
	kvt_opts_defaults(&o);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_HOST_BYTES), 0);
	kvt_opts_resolve(&o, "/tmp");
	assert_true(kvt_opt_u64(&o, KVT_OPT_HOST_BYTES) >= (64ull << 20));
	assert_true(kvt_opt_u64(&o, KVT_OPT_NVME_BYTES) >= (64ull << 20));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_options_units_and_bounds),
	    cmocka_unit_test(test_options_params_merge),
	    cmocka_unit_test(test_options_file_and_env),
	    cmocka_unit_test(test_options_auto_resolves),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
