/* test_options.c -- the options table: defaults, units, bounds, files, environment. */
#include "testlib.h"
#include "core/options.h"
#include "core/tenants.h"
#include "core/util.h"

#include <ctype.h>
#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

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
	char why[96]; /* a range error says the range */
	assert_string_equal(kvt_opts_reason("host.bytes = 1k", -ERANGE, why, sizeof(why)),
	                    "out of range (1.0 MiB to 16.0 TiB)");
	assert_string_equal(kvt_opts_reason("lease.timeout_ms", -ERANGE, why, sizeof(why)),
	                    "out of range (1 to 86400000)");
	assert_string_equal(kvt_opts_reason("no.such=1", -ENOENT, why, sizeof(why)),
	                    "no such option");
	/* a value of the wrong form says what form is wanted (it said "Invalid argument") */
	assert_string_equal(kvt_opts_reason("host.bytes=12 parsecs", -EINVAL, why, sizeof(why)),
	                    "not a size (a whole number, then B, KiB, MiB, GiB or TiB: 512MiB)");
	assert_string_equal(kvt_opts_reason("lease.timeout_ms", -EINVAL, why, sizeof(why)),
	                    "not a whole number (1 to 86400000)");
	assert_string_equal(kvt_opts_reason("rocksdb.wal = maybe", -EINVAL, why, sizeof(why)),
	                    "not true or false (or on, off, yes, no, 1, 0)");
	/* the pool counts 4 KiB granules in 32 bits: 16 TiB was taken, and every attach failed */
	assert_int_equal(kvt_opts_set(&o, "host.bytes", "16TiB"), -ERANGE);
	assert_int_equal(kvt_opts_set(&o, "host.bytes", "15TiB"), 0);
	assert_int_equal(kvt_opts_set(&o, "host.bytes", "-5"), -EINVAL);
	assert_int_equal(kvt_opts_set(&o, "no.such", "1"), -ENOENT);
	assert_int_equal(kvt_opts_set(&o, "rocksdb.wal", "maybe"), -EINVAL);
	/* the index's largest size fits the u32 the daemon passes it (2^32 was taken and cut to
	 * 0: the host held 4,096 chunks and refused every put past them) */
	assert_int_equal(kvt_opts_set(&o, "index.max_chunks", "2147483648"), 0);
	assert_int_equal(kvt_opts_set(&o, "index.max_chunks", "4294967296"), -ERANGE);
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
	fprintf(f, "# comment\nhost.bytes = 128MiB\n\nlease.timeout_ms=1000 # trailing\n"
	           "nvme.path = /srv/kv#2/nvme.dat\t# a '#' inside a value is the value's\n"
	           "  #indented\n");
	fclose(f);
	struct kvt_options o;
	kvt_opts_defaults(&o);
	assert_int_equal(kvt_opts_load_file(&o, path, err, sizeof(err)), 0);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_HOST_BYTES), 128ull << 20);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_LEASE_TIMEOUT_MS), 1000);
	assert_string_equal(kvt_opt_str(&o, KVT_OPT_NVME_PATH), "/srv/kv#2/nvme.dat");
	setenv("KVTIER_LEASE_TIMEOUT_MS", "2000", 1);
	assert_int_equal(kvt_opts_load_env(&o, err, sizeof(err)), 0);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_LEASE_TIMEOUT_MS), 2000);
	setenv("KVTIER_LEASE_TIMEOUT_MS", " 2500 ", 1); /* trimmed, as --set and the file are */
	assert_int_equal(kvt_opts_load_env(&o, err, sizeof(err)), 0);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_LEASE_TIMEOUT_MS), 2500);
	setenv("KVTIER_LEASE_TIMEOUT_MS", "2000", 1);
	setenv("KVTIER_HOST_BYTES", "lots", 1);
	assert_int_equal(kvt_opts_load_env(&o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "KVTIER_HOST_BYTES"));
	unsetenv("KVTIER_HOST_BYTES");
	f = fopen(path, "w");
	fprintf(f, "host.bytes = 1MiB\nbogus.option = 3\n");
	fclose(f);
	assert_int_equal(kvt_opts_load_file(&o, path, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, ":2:"));
	assert_non_null(strstr(err, "no such option"));
	/* a line that is no option at all, and a value of the wrong form, say what is wanted */
	f = fopen(path, "w");
	fprintf(f, "host.bytes = 1MiB\nroot:x:0:0:root:/root:/bin/bash\n");
	fclose(f);
	assert_int_equal(kvt_opts_load_file(&o, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":2: root:x:0:0:root:/root:/bin/bash: not NAME = VALUE"));
	f = fopen(path, "w");
	fprintf(f, "lease.timeout_ms = soon\n");
	fclose(f);
	assert_int_equal(kvt_opts_load_file(&o, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":1: lease.timeout_ms = soon: not a whole number (1 to "));
	/* a line too long to read whole is refused, not split into two (its tail an option) */
	f = fopen(path, "w");
	fprintf(f, "# %01021d lease.timeout_ms = 7\nhost.bytes = 2MiB\n", 0);
	fclose(f);
	kvt_opts_defaults(&o);
	assert_int_equal(kvt_opts_load_file(&o, path, err, sizeof(err)), -E2BIG);
	assert_non_null(strstr(err, ":1: a line over"));
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_LEASE_TIMEOUT_MS), 30000);
	/* a directory and a FIFO are not config files (both read as empty before; the FIFO's
	 * open waited for a writer) */
	assert_int_equal(kvt_opts_load_file(&o, dir, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	snprintf(path, sizeof(path), "%s/fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(kvt_opts_load_file(&o, path, err, sizeof(err)), -EINVAL);
	kvt_test_rmtree(dir);
}

struct unknown_seen {
	char text[512];
	size_t len;
};

static void note_unknown(void *arg, const char *name, const char *near)
{
	struct unknown_seen *u = arg;
	u->len += (size_t)snprintf(u->text + u->len, sizeof(u->text) - u->len, "%s>%s;", name,
	                           near ? near : "-");
}

/* A KVTIER_ variable that is neither an option's nor one kvtier reads otherwise is named, with
 * the known name within two edits (before, a typo of an option was ignored without a word). */
static void test_options_env_unknown(void **state)
{
	char *const env[] = {
	    "KVTIER_HOST_BYTE=8GiB",  /* a typo: the option's name is one letter away */
	    "KVTIER_HOST_BYTES=1GiB", /* options, and the others kvtier reads: not named */
	    "KVTIER_ROCKSDB_POLICY_PARAMS=a=1",
	    "KVTIER_SOCKET=/run/kvtier/kvtier.sock",
	    "KVTIER_TIMEOUT_MS=500",
	    "KVTIER_NVME_FAULT_PPM=10",
	    "KVTIER_ROCKSDB_FAULT_PPM=10",
	    "PATH=/bin",
	    "KVTIERHOST_BYTES=1",     /* not a KVTIER_ name */
	    "KVTIER_SOCKT=/tmp/s",    /* a typo of a variable that is no option */
	    "KVTIER_host_bytes=1GiB", /* the case wrong: read as nothing */
	    "KVTIER_LEASE_TIMEOUT=5", /* three edits from KVTIER_LEASE_TIMEOUT_MS: no guess */
	    "KVTIER_WHATEVER",        /* no '=' */
	    "KVTIER_=1",
	    NULL,
	};
	struct unknown_seen u = {.len = 0};
	assert_int_equal(kvt_opts_env_unknown(env, note_unknown, &u), 6);
	assert_string_equal(u.text, "KVTIER_HOST_BYTE>KVTIER_HOST_BYTES;"
	                            "KVTIER_SOCKT>KVTIER_SOCKET;"
	                            "KVTIER_host_bytes>KVTIER_HOST_BYTES;"
	                            "KVTIER_LEASE_TIMEOUT>-;KVTIER_WHATEVER>-;KVTIER_>-;");
	u.len = 0;
	assert_int_equal(kvt_opts_env_unknown(env + 1, note_unknown, &u), 5);
	assert_int_equal(kvt_opts_env_unknown(NULL, note_unknown, &u), 0);
	/* every option's own variable is read: none is named */
	for (int i = 0; i < KVT_OPT__COUNT; i++) {
		char var[160], *one[] = {var, NULL};
		size_t n = (size_t)snprintf(var, sizeof(var), "KVTIER_");
		for (const char *p = kvt_opt_def(i)->name; *p; p++)
			var[n++] = *p == '.' ? '_' : (char)toupper((unsigned char)*p);
		snprintf(var + n, sizeof(var) - n, "=1");
		assert_int_equal(kvt_opts_env_unknown(one, note_unknown, &u), 0);
	}
}

static int source_unknown; /* names read in the source that kvt_opts_env_unknown names */

static void source_note(void *arg, const char *name, const char *near)
{
	fprintf(stderr, "%s reads %s, which core/options.c's list lacks\n", (const char *)arg,
	        name);
	source_unknown++;
}

/* Every "KVTIER_NAME" string of a source file (as getenv and the tiers' knobs spell them). */
static int source_scan(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	size_t len = strlen(path);
	if (flag != FTW_F || len < 2 || path[len - 2] != '.' || !strchr("ch", path[len - 1]))
		return 0;
	static char text[1 << 20];
	if (kvt_test_read_file(path, text, sizeof(text)) < 0)
		return 0;
	for (char *p = text; (p = strstr(p, "\"KVTIER_")); p++) {
		size_t n = strspn(p + 8, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
		char var[128], *one[] = {var, NULL};
		if (!n || p[8 + n] != '"' || n > 100)
			continue;
		snprintf(var, sizeof(var), "%.*s", (int)(7 + n), p + 1);
		kvt_opts_env_unknown(one, source_note, (void *)path);
	}
	return 0;
}

/* The list of the KVTIER_ variables that are no options is whole: each one the source reads is
 * in it, or every daemon would warn that a variable it reads is ignored. */
static void test_options_env_list_whole(void **state)
{
	char root[512];
	const char *src = getenv("KVT_SOURCE_DIR"); /* ctest sets it */
	if (src)
		snprintf(root, sizeof(root), "%s", src);
	else /* this file's tree: tests/unit/test_options.c */
		snprintf(root, sizeof(root), "%.*s", (int)(strlen(__FILE__) - 26), __FILE__);
	static const char *const dirs[] = {"core", "gpu", "ipc", "tiers", "tools", "include"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char d[600];
		snprintf(d, sizeof(d), "%s/%s", root, dirs[i]);
		assert_int_equal(nftw(d, source_scan, 16, FTW_PHYS), 0);
	}
	assert_int_equal(source_unknown, 0);
	/* the scan finds what it looks for */
	char d[256], f[300];
	kvt_test_tmpdir(d, sizeof(d));
	snprintf(f, sizeof(f), "%s/x.c", d);
	FILE *fp = fopen(f, "w");
	fprintf(fp, "getenv(\"KVTIER_SOCKET\"); getenv(\"KVTIER_NEW_KNOB\");\n");
	fclose(fp);
	assert_int_equal(nftw(d, source_scan, 16, FTW_PHYS), 0);
	assert_int_equal(source_unknown, 1);
	kvt_test_rmtree(d);
}

static int count_item(void *arg, uint32_t key, uint64_t g, uint64_t m)
{
	(void)g;
	(void)m;
	*(uint32_t *)arg = key;
	return 0;
}

/* A quota's uid past 2^31 - 1 is refused (it was taken modulo 2^31: 4294967296 capped root). */
static void test_options_quota_uid_range(void **state)
{
	uint32_t key = 7;
	char err[128];
	assert_int_equal(kvt_quota_list_each("1000=0/1MiB", count_item, &key, err, sizeof(err)), 0);
	assert_int_equal(key, 1000);
	assert_int_equal(
	    kvt_quota_list_each("2147483647=0/1MiB", count_item, &key, err, sizeof(err)), 0);
	const char *bad[] = {"4294967296=0/1MiB", "2147483648=0/1MiB", "99999999999=0/1MiB",
	                     "99999999999999999999999=0/1MiB"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		key = 7;
		assert_int_equal(kvt_quota_list_each(bad[i], count_item, &key, err, sizeof(err)),
		                 -ERANGE);
		assert_int_equal(key, 7);
		assert_non_null(strstr(err, "out of range"));
		assert_int_equal(kvt_quota_list_check(bad[i], err, sizeof(err)), -ERANGE);
	}
	/* the tiers' check before they open: off, a good list, a malformed one */
	assert_int_equal(kvt_quota_list_check("", err, sizeof(err)), 0);
	assert_int_equal(kvt_quota_list_check("none", err, sizeof(err)), 0);
	assert_int_equal(kvt_quota_list_check("1000=0/1MiB,team=1GiB/2GiB", err, sizeof(err)), 0);
	assert_int_equal(kvt_quota_list_check("x", err, sizeof(err)), -EINVAL);
}

static void test_options_auto_resolves(void **state)
{
	struct kvt_options o;
	kvt_opts_defaults(&o);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_HOST_BYTES), 0);
	kvt_opts_resolve(&o, "/tmp");
	assert_true(kvt_opt_u64(&o, KVT_OPT_HOST_BYTES) >= (64ull << 20));
	assert_true(kvt_opt_u64(&o, KVT_OPT_NVME_BYTES) >= (64ull << 20));
	/* an nvme file already there keeps its size, whatever the free space says now (another
	 * writer on the filesystem moved it, and a log of another size was rebuilt empty) */
	char dir[256], f[300];
	kvt_test_tmpdir(dir, sizeof(dir));
	snprintf(f, sizeof(f), "%s/nvme.dat", dir);
	int fd = open(f, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 97ll << 20), 0); /* 97 MiB: no share is that */
	close(fd);
	kvt_opts_defaults(&o);
	kvt_opts_resolve(&o, dir);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_NVME_BYTES), 97ull << 20);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_ROCKSDB_BYTES), kvt_opts_tier_share(&o, dir));
	assert_int_equal(kvt_opts_set(&o, "nvme.bytes", "64MiB"), 0); /* named: as named */
	kvt_opts_resolve(&o, dir);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_NVME_BYTES), 64ull << 20);
	unlink(f); /* none: the share */
	kvt_opts_defaults(&o);
	kvt_opts_resolve(&o, dir);
	assert_int_equal(kvt_opt_u64(&o, KVT_OPT_NVME_BYTES), kvt_opts_tier_share(&o, dir));
	kvt_test_rmtree(dir);
}

/* share * 8 against the filesystem's free space read just before and just after it. */
static void assert_share(const struct kvt_options *o, const char *dir, const char *fs, uint64_t own)
{
	struct statvfs a, b;
	assert_int_equal(statvfs(fs, &a), 0);
	uint64_t share = kvt_opts_tier_share(o, dir);
	assert_int_equal(statvfs(fs, &b), 0);
	uint64_t lo = KVT_MIN(a.f_bavail * a.f_frsize, b.f_bavail * b.f_frsize) + own;
	uint64_t hi = KVT_MAX(a.f_bavail * a.f_frsize, b.f_bavail * b.f_frsize) + own;
	uint64_t slack = 4ull << 20; /* the 1 MiB rounding, and other tests' files meanwhile */
	assert_true(share + (1ull << 20) + slack >= lo / 8);
	assert_true(share <= hi / 8 + slack);
}

/* Makes dir/name a file of bytes, allocated. @return : the bytes the filesystem gave it, 0 when
 * it cannot allocate (no fallocate). */
static uint64_t own_file(const char *dir, const char *name, long long bytes)
{
	char f[300];
	struct stat st;
	snprintf(f, sizeof(f), "%s/%s", dir, name);
	int fd = open(f, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	int rc = fallocate(fd, 0, 0, bytes);
	if (rc)
		print_message("(own files not checked: fallocate: %s)\n", strerror(errno));
	assert_int_equal(fstat(fd, &st), 0);
	close(fd);
	return rc ? 0 : (uint64_t)st.st_blocks * 512u;
}

/* The auto size of the tiers stays the same as their files fill the disk, and a data directory
 * not made yet is sized by its parent's filesystem (it was 64 MiB on a first start). */
static void test_options_tier_share_is_stable(void **state)
{
	char dir[256], sub[300], f[300];
	kvt_test_tmpdir(dir, sizeof(dir));
	struct kvt_options o;
	kvt_opts_defaults(&o);
	struct statvfs sv;
	assert_int_equal(statvfs(dir, &sv), 0);
	if ((uint64_t)sv.f_bavail * sv.f_frsize < (4ull << 30)) {
		print_message("(skipped: under 4 GiB free in %s)\n", dir);
		kvt_test_rmtree(dir);
		return;
	}
	snprintf(sub, sizeof(sub), "%s/not/made/yet", dir);
	assert_share(&o, sub, dir, 0);
	assert_true(kvt_opts_tier_share(&o, sub) > (64ull << 20));

	/* 512 MiB in DATA_DIR/nvme.dat: the share does not move (it would by 64 MiB) */
	uint64_t own = own_file(dir, "nvme.dat", 512ll << 20);
	if (!own) {
		kvt_test_rmtree(dir);
		return;
	}
	assert_true(own >= (512ull << 20));
	assert_share(&o, dir, dir, own);
	/* and the 64 MiB index a clean stop left beside it (the next open removes it) */
	own += own_file(dir, "nvme.dat.index", 64ll << 20);
	assert_share(&o, dir, dir, own);
	/* the same file as nvme.path, and a rocksdb directory of files */
	snprintf(f, sizeof(f), "%s/nvme.dat", dir);
	assert_int_equal(kvt_opts_set(&o, "nvme.path", f), 0);
	snprintf(sub, sizeof(sub), "%s/elsewhere", dir);
	assert_share(&o, sub, dir, own);
	snprintf(sub, sizeof(sub), "%s/rocksdb", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	own += own_file(dir, "rocksdb/000001.sst", 256ll << 20);
	assert_share(&o, dir, dir, own);
	/* and the index a clean stop saved beside the rocksdb directory */
	own += own_file(dir, "rocksdb.index", 64ll << 20);
	assert_share(&o, dir, dir, own);
	kvt_test_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_options_units_and_bounds),
	    cmocka_unit_test(test_options_params_merge),
	    cmocka_unit_test(test_options_file_and_env),
	    cmocka_unit_test(test_options_env_unknown),
	    cmocka_unit_test(test_options_env_list_whole),
	    cmocka_unit_test(test_options_quota_uid_range),
	    cmocka_unit_test(test_options_auto_resolves),
	    cmocka_unit_test(test_options_tier_share_is_stable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
