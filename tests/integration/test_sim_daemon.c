/*
 * test_sim_daemon.c -- `kvtier sim --daemon` (tools/cli/simd.c): the simulator's words for the
 * running kvtierd's layout, read from a real daemon with three tiers and nothing at its
 * defaults: every tier's size (nvme's as its file), policy as it runs and parameters as set,
 * admissions, placement, quotas by tenant key (a recording's t=), and the chunk size of its
 * namespace. The operator's words come after the daemon's and change what they name: a --tier
 * resizes that tier in place, a --policy TIER=P is replayed. The refusals say why: a daemon
 * with no namespace (no chunk size) unless --block-bytes is given, a tier it does not have, a
 * --policy list that would name no tier, no daemon. (kvtier bench trace --record, run by
 * test_policy_sim, replays each recording through --daemon too and requires the same ratio as
 * the bench's own layout, exactly (the same counts), for host alone, rocksdb and the nvme log.)
 */
#include "testlib.h"
#include "kvtier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static kvt_model_t model(void)
{
	kvt_model_t m = {.name = "simd",
	                 .dtype = KVT_DTYPE_F16,
	                 .n_layers = 1,
	                 .n_kv_heads = 8,
	                 .head_dim = 128,
	                 .tokens_per_chunk = 16}; /* 64 KiB chunks */
	return m;
}

/* A short native trace (two conversations, one returning) at dir/name into path. */
static void write_trace(const char *dir, char *path, size_t len)
{
	snprintf(path, len, "%s/simd.trace", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "1000 1 2 3\n1001 t=1 10 11\n1002 1 2 3 4 5\n1003 10 11 12\n1004 1 2 3 4 5 6\n");
	fclose(f);
}

/* Three tiers, none at its defaults, and a namespace with chunks in it. */
static void start(struct kvt_test_daemon *d, kvt_client_t **c)
{
	char quota[64], nquota[64];
	/* the test's own tenant (its uid), and one never connected */
	snprintf(quota, sizeof(quota), "tenant.quota=%u=8MiB/32MiB,4242=1MiB/2MiB",
	         (unsigned)geteuid());
	snprintf(nquota, sizeof(nquota), "nvme.quota=%u=4MiB/16MiB", (unsigned)geteuid());
	const char *sets[] = {"host.bytes=64MiB",
	                      "host.policy=s3fifo",
	                      "host.policy_params=small_ratio=0.2",
	                      "host.admit=tinylfu",
	                      "tiers.order=host,nvme,rocksdb",
	                      "tiers.placement=write-through",
	                      "nvme.bytes=32MiB",
	                      "nvme.policy=clock",
	                      "nvme.admit=second_touch",
	                      "rocksdb.bytes=48MiB",
	                      "rocksdb.policy=lfu",
	                      "rocksdb.policy_params=max_count=7",
	                      quota,
	                      nquota,
	                      NULL};
	assert_int_equal(kvt_test_daemon_start(d, sets), 0);
	assert_int_equal(kvt_connect(d->sock, c), 0);
	kvt_model_t m = model();
	kvt_id_t ns, keys[4];
	assert_int_equal(kvt_namespace(*c, &m, &ns), 0);
	uint32_t toks[64];
	for (int i = 0; i < 64; i++)
		toks[i] = (uint32_t)i * 13 + 5;
	assert_int_equal(kvt_chunk_keys(ns, toks, 64, 16, keys, 4), 4);
	size_t cb = kvt_chunk_bytes(&m);
	uint8_t *buf = malloc(4 * cb);
	assert_non_null(buf);
	const void *src[4];
	for (int i = 0; i < 4; i++) {
		kvt_test_fill(buf + (size_t)i * cb, cb, (uint64_t)i);
		src[i] = buf + (size_t)i * cb;
	}
	assert_int_equal(kvt_put(*c, ns, NULL, keys, 4, src, cb), 4);
	free(buf);
}

/* Every word from the daemon, in the order it writes them. */
static void test_words(void **state)
{
	(void)state;
	struct kvt_test_daemon d;
	kvt_client_t *c;
	start(&d, &c);
	char out[8192], want[2048], path[400];
	write_trace(d.dir, path, sizeof(path));
	char args[600];
	snprintf(args, sizeof(args), "sim --daemon --show --trace %s", path);
	assert_int_equal(kvt_test_cli(&d, args, out, sizeof(out)), 0);
	print_message("%s", out);
	unsigned me = (unsigned)geteuid(); /* this tenant's key: a recording's t= */
	snprintf(want, sizeof(want),
	         "kvtier sim --engine --block-bytes 65536 --placement write-through"
	         " --tier host=67108864B --policy host=s3fifo"
	         " --param host:small_ratio=0.2"
	         " --admission host=tinylfu"
	         " --tier nvme=33554432B --policy nvme=clock --admission nvme=second_touch"
	         " --tier rocksdb=50331648B --policy rocksdb=lfu --param rocksdb:max_count=7"
	         " --quota host:%u=8388608B/33554432B --quota host:4242=1048576B/2097152B"
	         " --quota nvme:%u=4194304B/16777216B"
	         " --trace %s\n",
	         me, me, path);
	assert_non_null(strstr(out, want));
	kvt_close(c);
	kvt_test_daemon_destroy(&d);
}

/* The line of out that begins with prefix, NUL-terminated in place, or NULL. */
static char *line_of(char *out, const char *prefix)
{
	for (char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, prefix, strlen(prefix))) {
			char *nl = strchr(l, '\n');
			if (nl)
				*nl = 0;
			return l;
		}
	return NULL;
}

/* The operator's words: --tier resizes the daemon's tier in place, the rest follow and win; the
 * replay runs the words --show prints (kvtier-sim given them itself gives the same figures),
 * and they are what was asked: host of 128 MiB in records of a 64 KiB chunk and its 4 KiB-padded
 * header, policy arc; nvme's clock and rocksdb's lfu with its parameter as the daemon runs them. */
static void test_overrides_replayed(void **state)
{
	(void)state;
	struct kvt_test_daemon d;
	kvt_client_t *c;
	start(&d, &c);
	static char out[16384], direct[16384];
	char path[400], args[600], bin[512], cmd[4096];
	write_trace(d.dir, path, sizeof(path));
	snprintf(args, sizeof(args),
	         "sim --daemon --show --trace %s --tier host=128MiB --policy host=arc --json",
	         path);
	assert_int_equal(kvt_test_cli(&d, args, out, sizeof(out)), 0);
	char *words = line_of(out, "kvtier sim --engine ");
	assert_non_null(words);
	assert_non_null(strstr(words, " --tier host=128MiB --policy host=s3fifo "));
	assert_non_null(strstr(words, " --policy host=arc --json"));
	assert_null(strstr(words, "67108864B"));
	kvt_test_bin("kvtier-sim", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", bin, words + strlen("kvtier sim "));
	assert_int_equal(kvt_test_cmd(cmd, direct, sizeof(direct)), 0);

	snprintf(args, sizeof(args),
	         "sim --daemon --trace %s --tier host=128MiB --policy host=arc --json", path);
	assert_int_equal(kvt_test_cli(&d, args, out, sizeof(out)), 0);
	print_message("%s", out);
	assert_non_null(strstr(out, "kvtier sim --daemon runs: kvtier sim --engine"));
	char cap[64];
	snprintf(cap, sizeof(cap), "\"capacity_blocks\":%lld,", 128ll * 1048576 / (65536 + 4096));
	char *host = strstr(out, "{\"tier\":\"host\",\"policy\":\"arc\"");
	assert_non_null(host);
	assert_non_null(strstr(host, cap));
	assert_non_null(strstr(out, "{\"tier\":\"nvme\",\"policy\":\"clock\""));
	char *rdb = strstr(out, "{\"tier\":\"rocksdb\",\"policy\":\"lfu\"");
	assert_non_null(rdb);
	assert_non_null(strstr(rdb, "\"params\":\"max_count=7\""));
	char *all = line_of(out, "{\"tier\":\"all\""),
	     *all_direct = line_of(direct, "{\"tier\":\"all\"");
	assert_non_null(all);
	assert_non_null(all_direct);
	assert_string_equal(all, all_direct);
	/* 19 accesses, and host has room for all 11 blocks: every re-read hits (3 of request 3,
	 * 2 of request 4, 5 of request 5), 10 of 19 */
	assert_non_null(
	    strstr(all, "{\"tier\":\"all\",\"capacity_blocks\":3128,\"hit_ratio\":0.526316,"));
	kvt_close(c);
	kvt_test_daemon_destroy(&d);
}

/* What --daemon refuses, in words. */
static void test_refusals(void **state)
{
	(void)state;
	struct kvt_test_daemon d;
	char out[4096], path[400], args[600];
	assert_int_equal(kvt_test_daemon_start(&d, NULL), 0);
	write_trace(d.dir, path, sizeof(path));
	snprintf(args, sizeof(args), "sim --daemon --trace %s", path);
	assert_int_equal(kvt_test_cli(&d, args, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "kvtierd holds no namespace, so its chunk size is unknown: "
	                            "give --block-bytes N"));
	snprintf(args, sizeof(args), "sim --daemon --show --trace %s --block-bytes 4096", path);
	assert_int_equal(kvt_test_cli(&d, args, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "--tier host=67108864B --policy host=lru --trace"));
	snprintf(args, sizeof(args), "sim --daemon --trace %s --block-bytes 4096 --tier nvme=1GiB",
	         path);
	assert_int_equal(kvt_test_cli(&d, args, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "--tier nvme=1GiB: kvtierd has no such tier"));
	snprintf(args, sizeof(args), "sim --daemon --trace %s --block-bytes 4096 --policy lru,arc",
	         path);
	assert_int_equal(kvt_test_cli(&d, args, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "the daemon names each tier's policy; --policy TIER=P"));
	/* kvtier-sim itself does not know the word */
	char bin[512], cmd[1200];
	kvt_test_bin("kvtier-sim", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "%s --daemon --trace %s 2>&1", bin, path);
	assert_int_not_equal(kvt_test_cmd(cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "--daemon is kvtier's"));
	kvt_test_daemon_destroy(&d);
	/* no daemon */
	snprintf(args, sizeof(args), "sim --daemon --trace %s --block-bytes 4096", path);
	assert_int_equal(kvt_test_cli(&d, args, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "kvtier sim --daemon: cannot reach kvtierd"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_words),
	    cmocka_unit_test(test_overrides_replayed),
	    cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
