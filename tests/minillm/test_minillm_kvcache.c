/* test_minillm_kvcache.c -- fp16 conversion, the paged cache's gather/scatter round trip, and
 * the engine's bit-identity between computing a prefix and copying it in (no daemon). */
#include "testlib.h"
#include "mllm_util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_minillm_f16_conversion(void **state)
{
	assert_int_equal(kvt_llm_f32_to_f16(1.0f), 0x3c00);
	assert_int_equal(kvt_llm_f32_to_f16(-2.0f), 0xc000);
	assert_int_equal(kvt_llm_f32_to_f16(65504.0f), 0x7bff);
	assert_int_equal(kvt_llm_f32_to_f16(65520.0f), 0x7c00);           /* rounds up to inf */
	assert_int_equal(kvt_llm_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00); /* tie to even */
	assert_int_equal(kvt_llm_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02); /* tie to even, up */
	assert_int_equal(kvt_llm_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);  /* smallest subnormal */
	assert_int_equal(kvt_llm_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);  /* tie to even: zero */
	assert_int_equal(kvt_llm_f32_to_f16(ldexpf(3.0f, -26)), 0x0001);
	assert_true(kvt_llm_f16_to_f32(0x7e00) != kvt_llm_f16_to_f32(0x7e00)); /* nan */
	/* every finite half survives half -> float -> half */
	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
			continue;
		assert_int_equal(kvt_llm_f32_to_f16(kvt_llm_f16_to_f32((uint16_t)h)), h);
	}
}

static void check_gather_scatter(int dtype)
{
	struct kvt_llm_kvcache *a, *b;
	assert_int_equal(kvt_llm_kv_create(dtype, 4, 64, 128, &a), 0);
	assert_int_equal(kvt_llm_kv_create(dtype, 4, 64, 128, &b), 0);
	kvt_llm_kv_reset(a, 1);
	kvt_llm_kv_reset(b, 2);
	/* the shuffles differ, so the copies really follow the block tables */
	assert_memory_not_equal(a->table, b->table, 4 * 8 * sizeof(int32_t));
	float k[64], v[64];
	for (int l = 0; l < 4; l++)
		for (int p = 0; p < 128; p++) {
			for (int i = 0; i < 64; i++) {
				k[i] = (float)(l * 1000 + p) + (float)i / 64;
				v[i] = -k[i];
			}
			kvt_llm_kv_store(a, l, p, k, v);
		}
	/* an unaligned range that crosses blocks */
	int pos = 5, n = 40;
	size_t len = kvt_llm_kv_bytes(a, n);
	assert_int_equal(len, 2u * 4 * 40 * 64 * (dtype == KVT_LLM_F32 ? 4 : 2));
	uint8_t *buf = malloc(len), *buf2 = malloc(len);
	assert_int_equal(kvt_llm_kv_gather(a, pos, n, buf, len), 0);
	/* canonical layout: [layer][K,V][token][kv_dim] */
	size_t row = a->row_bytes;
	for (int l = 0; l < 4; l++)
		for (int w = 0; w < 2; w++)
			for (int t = 0; t < n; t++)
				assert_memory_equal(buf + (((size_t)l * 2 + w) * n + t) * row,
				                    kvt_llm_kv_row(a, l, w, pos + t), row);
	if (dtype == KVT_LLM_F32) {
		float first;
		memcpy(&first, buf + ((size_t)2 * 2 * n + 3) * row, 4); /* layer 2, K, token 3 */
		assert_true(first == 2000.0f + 8);
	}
	assert_int_equal(kvt_llm_kv_scatter(b, pos, n, buf, len), 0);
	assert_int_equal(kvt_llm_kv_gather(b, pos, n, buf2, len), 0);
	assert_memory_equal(buf, buf2, len);
	/* bad ranges and short buffers are refused */
	assert_int_equal(kvt_llm_kv_gather(a, 100, 40, buf, len), -EINVAL);
	assert_int_equal(kvt_llm_kv_gather(a, -1, 4, buf, len), -EINVAL);
	assert_int_equal(kvt_llm_kv_scatter(b, 0, n, buf, len - 1), -EINVAL);
	free(buf);
	free(buf2);
	kvt_llm_kv_destroy(a);
	kvt_llm_kv_destroy(b);
}

static void test_minillm_gather_scatter_f16(void **state)
{
	check_gather_scatter(KVT_LLM_F16);
}

static void test_minillm_gather_scatter_f32(void **state)
{
	check_gather_scatter(KVT_LLM_F32);
}

/* Engine A computes a prompt; its prefix KV, gathered and scattered into engine B (another
 * block shuffle), gives B the same logits and tokens bit for bit. */
static void check_copy_in_identical(int dtype, int prefix)
{
	struct kvt_llm_model *m;
	struct kvt_llm_tokenizer *t;
	mllm_open(&m, &t);
	struct kvt_llm_engine *a, *b;
	assert_int_equal(kvt_llm_engine_create(m, dtype, &a), 0);
	assert_int_equal(kvt_llm_engine_create(m, dtype, &b), 0);
	int ids[128], n;
	assert_int_equal(kvt_llm_encode(t,
	                                "Echoes of vectors unfold, a gentle hum of precision, as I "
	                                "sense the nodes",
	                                1, ids, 128, &n),
	                 0);
	assert_true(n > prefix);
	struct kvt_llm_request req = {
	    .ids = ids, .n_ids = n, .steps = 20, .temperature = 0.8f, .seed = 7};
	struct kvt_llm_result ra, rb;
	assert_int_equal(kvt_llm_engine_run(a, &req, &ra), 0);
	size_t len = kvt_llm_kv_bytes(a->kv, prefix);
	void *kv = malloc(len + 1);
	assert_int_equal(kvt_llm_kv_gather(a->kv, 0, prefix, kv, len), 0);
	b->runs = 5; /* another block shuffle than a's */
	req.prefix_kv = kv;
	req.prefix_tokens = prefix;
	assert_int_equal(kvt_llm_engine_run(b, &req, &rb), 0);
	assert_int_equal(rb.reused_tokens, prefix);
	assert_true(ra.logits_hash == rb.logits_hash);
	assert_memory_equal(ra.output_ids, rb.output_ids, 20 * sizeof(int));
	assert_memory_equal(ra.top5_vals, rb.top5_vals, sizeof(ra.top5_vals));
	/* and a perturbed prefix does change the logits: the check can fail */
	((uint8_t *)kv)[len / 2] ^= 0x40;
	struct kvt_llm_result rc;
	assert_int_equal(kvt_llm_engine_run(b, &req, &rc), 0);
	assert_true(rc.logits_hash != ra.logits_hash);
	free(ra.output_ids);
	free(rb.output_ids);
	free(rc.output_ids);
	free(kv);
	kvt_llm_engine_destroy(a);
	kvt_llm_engine_destroy(b);
	kvt_llm_tokenizer_close(t);
	kvt_llm_model_close(m);
}

static void test_minillm_copy_in_identical(void **state)
{
	check_copy_in_identical(KVT_LLM_F16, 16);
	check_copy_in_identical(KVT_LLM_F16, 21);
	check_copy_in_identical(KVT_LLM_F32, 16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_minillm_f16_conversion),
	    cmocka_unit_test(test_minillm_gather_scatter_f16),
	    cmocka_unit_test(test_minillm_gather_scatter_f32),
	    cmocka_unit_test(test_minillm_copy_in_identical),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
