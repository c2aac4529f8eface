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
	uint64_t v;
	assert_int_equal(kvt_parse_size("18446744073709551615", &v), 0);
	assert_int_equal(kvt_parse_size("99999999999999TiB", &v), -ERANGE);
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
	    cmocka_unit_test(test_options_file_and_env),
	    cmocka_unit_test(test_options_auto_resolves),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
