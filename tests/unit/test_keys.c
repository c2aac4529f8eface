/* test_keys.c -- namespace and chained keys against tests/vectors/keys.txt (docs/keys.md). */
#include "testlib.h"
#include "core/keys.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void hexid(kvt_id_t id, char out[33])
{
	snprintf(out, 33, "%016llx%016llx", (unsigned long long)id.w[1],
	         (unsigned long long)id.w[0]);
}

static kvt_id_t parse_id(const char *s)
{
	kvt_id_t id;
	char hi[17] = {0}, lo[17] = {0};
	memcpy(hi, s, 16);
	memcpy(lo, s + 16, 16);
	id.w[1] = strtoull(hi, NULL, 16);
	id.w[0] = strtoull(lo, NULL, 16);
	return id;
}

static FILE *open_vectors(void)
{
	char path[1024];
	const char *src = getenv("KVT_SOURCE_DIR");
	snprintf(path, sizeof(path), "%s/tests/vectors/keys.txt", src ? src : ".");
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	return f;
}

static void test_keys_namespace_vectors(void **state)
{
	FILE *f = open_vectors();
	static char line[1 << 16];
	int checked = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "ns ", 3))
			continue;
		char name[256], rev[256], want[40];
		unsigned v[9];
		assert_int_equal(sscanf(line, "ns %255s %255s %u %u %u %u %u %u %u %u %u -> %39s",
		                        name, rev, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
		                        &v[7], &v[8], want),
		                 12);
		kvt_model_t m = {.name = name,
		                 .revision = strcmp(rev, "-") ? rev : NULL,
		                 .dtype = v[0],
		                 .n_layers = v[1],
		                 .n_kv_heads = v[2],
		                 .head_dim = v[3],
		                 .tokens_per_chunk = v[4],
		                 .tp_rank = v[5],
		                 .tp_size = v[6],
		                 .kv_group = v[7],
		                 .layout = v[8]};
		kvt_id_t ns;
		assert_int_equal(kvt_namespace_id(&m, &ns), 0);
		char got[33];
		hexid(ns, got);
		assert_string_equal(got, want);
		checked++;
	}
	fclose(f);
	assert_true(checked >= 5);
}

static void test_keys_chain_vectors(void **state)
{
	FILE *f = open_vectors();
	static char line[1 << 16];
	static uint32_t toks[8192];
	static kvt_id_t keys[8192];
	int checked = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "keys ", 5))
			continue;
		char *save;
		strtok_r(line, " ", &save);
		kvt_id_t ns = parse_id(strtok_r(NULL, " ", &save));
		uint32_t c = (uint32_t)strtoul(strtok_r(NULL, " ", &save), NULL, 10);
		char *list = strtok_r(NULL, " ", &save);
		size_t n = 0;
		for (char *t = strtok(list, ","); t; t = strtok(NULL, ","))
			toks[n++] = (uint32_t)strtoul(t, NULL, 10);
		assert_string_equal(strtok_r(NULL, " ", &save), "->");
		size_t nk = kvt_chunk_keys(ns, toks, n, c, keys, 8192);
		assert_int_equal(nk, n / c);
		for (size_t i = 0; i < nk; i++) {
			char *want = strtok_r(NULL, " \n", &save), got[33];
			assert_non_null(want);
			hexid(keys[i], got);
			assert_string_equal(got, want);
		}
		assert_null(strtok_r(NULL, " \n", &save));
		checked++;
	}
	fclose(f);
	assert_true(checked >= 4);
}

static void test_keys_prefix_property(void **state)
{
	kvt_model_t m = {.name = "x",
	                 .dtype = KVT_DTYPE_F16,
	                 .n_layers = 2,
	                 .n_kv_heads = 2,
	                 .head_dim = 8,
	                 .tokens_per_chunk = 4};
	kvt_id_t ns, a[4], b[4];
	assert_int_equal(kvt_namespace_id(&m, &ns), 0);
	uint32_t ta[16], tb[16];
	for (int i = 0; i < 16; i++)
		ta[i] = tb[i] = (uint32_t)i;
	tb[9] = 999; /* differs in chunk 2 */
	assert_int_equal(kvt_chunk_keys(ns, ta, 16, 4, a, 4), 4);
	assert_int_equal(kvt_chunk_keys(ns, tb, 16, 4, b, 4), 4);
	assert_true(kvt_id_eq(a[0], b[0]) && kvt_id_eq(a[1], b[1]));
	assert_false(kvt_id_eq(a[2], b[2]) || kvt_id_eq(a[3], b[3]));
	/* partial chunks have no key; max_keys bounds the output */
	assert_int_equal(kvt_chunk_keys(ns, ta, 15, 4, a, 4), 3);
	assert_int_equal(kvt_chunk_keys(ns, ta, 16, 4, a, 2), 2);
	assert_int_equal(kvt_chunk_keys(ns, ta, 16, 0, a, 4), 0);
}

static void test_keys_model_validation(void **state)
{
	kvt_model_t m = {.name = "x",
	                 .dtype = KVT_DTYPE_F16,
	                 .n_layers = 4,
	                 .n_kv_heads = 4,
	                 .head_dim = 16,
	                 .tokens_per_chunk = 16};
	kvt_id_t ns;
	assert_int_equal(kvt_chunk_bytes(&m), 2u * 4 * 4 * 16 * 16 * 2);
	kvt_model_t bad = m;
	bad.name = NULL;
	assert_int_equal(kvt_namespace_id(&bad, &ns), -EINVAL);
	bad = m, bad.dtype = 9;
	assert_int_equal(kvt_chunk_bytes(&bad), 0);
	bad = m, bad.reserved[3] = 1;
	assert_int_equal(kvt_namespace_id(&bad, &ns), -EINVAL);
	bad = m, bad.tp_size = 2, bad.tp_rank = 2;
	assert_int_equal(kvt_namespace_id(&bad, &ns), -EINVAL);
	bad = m, bad.n_layers = 0;
	assert_int_equal(kvt_namespace_id(&bad, &ns), -EINVAL);
	/* a chunk of 4 GiB or more, also one whose size wraps past 2^64 (to 0 here: found by
	 * make fuzz), is refused; 2^31 bytes is the largest power of two taken */
	bad = m, bad.n_layers = bad.n_kv_heads = bad.head_dim = bad.tokens_per_chunk = 65536;
	assert_int_equal(kvt_namespace_id(&bad, &ns), -EINVAL);
	assert_int_equal(kvt_chunk_bytes(&bad), 0);
	bad.n_kv_heads = bad.head_dim = 1, bad.tokens_per_chunk = 16384; /* 2^32 bytes */
	assert_int_equal(kvt_namespace_id(&bad, &ns), -EINVAL);
	bad.tokens_per_chunk = 8192; /* 2^31 */
	assert_int_equal(kvt_namespace_id(&bad, &ns), 0);
	assert_int_equal(kvt_chunk_bytes(&bad), 1ull << 31);
	bad.n_layers = 65537, bad.tokens_per_chunk = 1; /* a dimension past 65,536 */
	assert_int_equal(kvt_namespace_id(&bad, &ns), -EINVAL);
	/* tp_size 0 counts as 1; NULL revision is "" */
	kvt_id_t a, b;
	kvt_model_t t0 = m, t1 = m;
	t1.tp_size = 1;
	t1.revision = "";
	assert_int_equal(kvt_namespace_id(&t0, &a), 0);
	assert_int_equal(kvt_namespace_id(&t1, &b), 0);
	assert_true(kvt_id_eq(a, b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keys_namespace_vectors),
	    cmocka_unit_test(test_keys_chain_vectors),
	    cmocka_unit_test(test_keys_prefix_property),
	    cmocka_unit_test(test_keys_model_validation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
