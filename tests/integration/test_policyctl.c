/*
 * test_policyctl.c -- the host tier's policy switched at run time keeps every cached chunk;
 * parameters are checked; bad names change nothing; the miss-ratio curve answers.
 */
#include "testlib.h"
#include "kvtier.h"
#include "ipc/proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kvt__client_simple(kvt_client_t *c, uint16_t type, const char *in, char *out, size_t out_len);

static struct kvt_test_daemon d;

static int setup(void **state)
{
	const char *sets[] = {"host.bytes=4MiB", NULL};
	return kvt_test_daemon_start(&d, sets);
}

static int teardown(void **state)
{
	kvt_test_daemon_destroy(&d);
	return 0;
}

static int policy(kvt_client_t *c, const char *cmd, char *out, size_t len)
{
	out[0] = 0;
	return kvt__client_simple(c, KVT_MSG_POLICY, cmd, out, len);
}

static void test_policyctl_switch_keeps_chunks(void **state)
{
	kvt_client_t *c;
	assert_int_equal(kvt_connect(d.sock, &c), 0);
	kvt_model_t m = {.name = "pol",
	                 .dtype = KVT_DTYPE_F16,
	                 .n_layers = 1,
	                 .n_kv_heads = 8,
	                 .head_dim = 128,
	                 .tokens_per_chunk = 16}; /* 64 KiB chunks */
	kvt_id_t ns, keys[160];
	uint32_t toks[160 * 16];
	for (size_t i = 0; i < 160 * 16; i++)
		toks[i] = (uint32_t)i;
	assert_int_equal(kvt_namespace(c, &m, &ns), 0);
	assert_int_equal(kvt_chunk_keys(ns, toks, 160 * 16, 16, keys, 160), 160);
	size_t cb = kvt_chunk_bytes(&m);
	uint8_t *buf = calloc(1, cb);
	const void *ch[32];
	for (int i = 0; i < 32; i++)
		ch[i] = buf;
	assert_int_equal(kvt_put(c, ns, NULL, keys, 32, ch, cb), 32);
	kvt_lease_t l[32];
	assert_int_equal(kvt_acquire(c, ns, keys, 32, l), 32); /* accesses feed the curve */
	assert_int_equal(kvt_release(c, l, 32), 32);

	char out[2048];
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host lru");
	const char *names[] = {"s3fifo", "arc",  "sieve",     "lfu", "prefix",
	                       "gdsf",   "conv", "hindsight", "lru"};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "set host %s", names[k]);
		assert_int_equal(policy(c, cmd, out, sizeof(out)), 0);
		assert_int_equal(kvt_lookup(c, ns, keys, 32), 32); /* nothing dropped */
	}
	assert_int_equal(policy(c, "set host s3fifo small_ratio=0.2", out, sizeof(out)), 0);
	assert_int_equal(policy(c, "set host nosuch", out, sizeof(out)), -ENOENT);
	assert_int_equal(policy(c, "set host lru bogus=1", out, sizeof(out)), -ENOENT);
	assert_int_equal(policy(c, "get host", out, sizeof(out)), 0);
	assert_string_equal(out, "host s3fifo"); /* failed switches changed nothing */
	assert_int_equal(policy(c, "get nvme", out, sizeof(out)), -EOPNOTSUPP);
	assert_int_equal(policy(c, "frobnicate", out, sizeof(out)), -EINVAL);

	/* the new policy evicts: 4 MiB holds < 64 chunks of 68 KiB */
	for (int b = 1; b < 5; b++)
		assert_int_equal(kvt_put(c, ns, &keys[b * 32 - 1], keys + b * 32, 32, ch, cb), 32);
	assert_true(kvt_test_stat(&d, "evictions") > 0);
	assert_int_equal(kvt_lookup(c, ns, keys + 128, 32), 32);

	assert_int_equal(policy(c, "mrc host", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "0.5x"));
	free(buf);
	kvt_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_policyctl_switch_keeps_chunks),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
