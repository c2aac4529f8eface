/* test_minillm_model.c -- the model loader (bad files refused) and the data README's test
 * vector through the library, in fp32 and fp16 KV modes. */
#include "testlib.h"
#include "mllm_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int vector_ids[64] = {319, 459, 355, 260, 275, 429, 339, 315, 374, 327, 446, 262, 421,
                                   392, 275, 280, 269, 440, 270, 283, 446, 299, 303, 266, 358, 430,
                                   312, 379, 441, 260, 446, 262, 421, 392, 275, 280, 269, 440, 270,
                                   283, 446, 299, 303, 384, 467, 407, 360, 266, 291, 443, 435, 295,
                                   448, 429, 465, 265, 434, 317, 431, 434, 289, 408, 326, 446};
static const int top5_ids[5] = {319, 459, 461, 373, 267};
static const float top5_vals[5] = {11.064f, 5.239f, 4.879f, 4.446f, 4.350f};

static void run_vector(int dtype, float tol)
{
	struct kvt_llm_model *m;
	struct kvt_llm_tokenizer *t;
	mllm_open(&m, &t);
	struct kvt_llm_engine *e;
	assert_int_equal(kvt_llm_engine_create(m, dtype, &e), 0);
	int bos = KVT_LLM_BOS;
	struct kvt_llm_request req = {.ids = &bos, .n_ids = 1, .steps = 64, .temperature = 0};
	struct kvt_llm_result r;
	assert_int_equal(kvt_llm_engine_run(e, &req, &r), 0);
	assert_int_equal(r.n_out, 64);
	assert_memory_equal(r.output_ids, vector_ids, sizeof(vector_ids));
	for (int i = 0; i < 5; i++) {
		assert_int_equal(r.top5_ids[i], top5_ids[i]);
		assert_true(fabsf(r.top5_vals[i] - top5_vals[i]) <= tol);
	}
	char text[1024];
	kvt_llm_decode(t, KVT_LLM_BOS, r.output_ids, r.n_out, text, sizeof(text));
	assert_non_null(strstr(text, "\"Echoes of vectors unfold, a gentle hum of precision"));
	free(r.output_ids);
	kvt_llm_engine_destroy(e);
	kvt_llm_tokenizer_close(t);
	kvt_llm_model_close(m);
}

static void test_minillm_vector_f32(void **state)
{
	run_vector(KVT_LLM_F32, 1e-3f);
}

static void test_minillm_vector_f16(void **state)
{
	run_vector(KVT_LLM_F16, 2e-3f); /* ids exact; logits within fp16 rounding of the cache */
}

static void test_minillm_context_refused(void **state)
{
	struct kvt_llm_model *m;
	struct kvt_llm_tokenizer *t;
	mllm_open(&m, &t);
	struct kvt_llm_engine *e;
	assert_int_equal(kvt_llm_engine_create(m, KVT_LLM_F16, &e), 0);
	int ids[128] = {1};
	struct kvt_llm_request req = {.ids = ids, .n_ids = 100, .steps = 29};
	struct kvt_llm_result r;
	assert_int_equal(kvt_llm_engine_run(e, &req, &r), -E2BIG);
	req.steps = 28;
	assert_int_equal(kvt_llm_engine_run(e, &req, &r), 0);
	free(r.output_ids);
	ids[3] = 512; /* outside the vocabulary */
	assert_int_equal(kvt_llm_engine_run(e, &req, &r), -EINVAL);
	kvt_llm_engine_destroy(e);
	kvt_llm_tokenizer_close(t);
	kvt_llm_model_close(m);
}

/* Writes the first len bytes of src (patched at off when patch) to a temp file. */
static void write_variant(const char *dst, const char *src, long len, long off, const void *patch,
                          size_t plen)
{
	FILE *in = fopen(src, "rb");
	assert_non_null(in);
	static char buf[1 << 21];
	size_t n = fread(buf, 1, sizeof(buf), in);
	fclose(in);
	if (len >= 0 && (size_t)len < n)
		n = (size_t)len;
	if (patch)
		memcpy(buf + off, patch, plen);
	FILE *out = fopen(dst, "wb");
	assert_non_null(out);
	assert_int_equal(fwrite(buf, 1, n + (len > (long)n ? (size_t)len - n : 0), out),
	                 n + (len > (long)n ? (size_t)len - n : 0));
	fclose(out);
}

static void expect_model_refused(const char *path, const char *needle)
{
	struct kvt_llm_model *m = NULL;
	char err[512] = "";
	assert_true(kvt_llm_model_open(path, &m, err, sizeof(err)) < 0);
	assert_null(m);
	if (!strstr(err, needle)) {
		fprintf(stderr, "message \"%s\" lacks \"%s\"\n", err, needle);
		fail();
	}
}

static void test_minillm_bad_model(void **state)
{
	char mp[1024], tp[1024], dir[256], f[1100];
	mllm_paths(mp, tp, sizeof(mp));
	kvt_test_tmpdir(dir, sizeof(dir));
	snprintf(f, sizeof(f), "%s/m.bin", dir);
	write_variant(f, mp, 932124 - 4, 0, NULL, 0);
	expect_model_refused(f, "truncated");
	write_variant(f, mp, 20, 0, NULL, 0);
	expect_model_refused(f, "truncated");
	write_variant(f, mp, 932124 + 4, 0, NULL, 0);
	expect_model_refused(f, "oversized");
	int32_t bad_heads = 5; /* does not divide dim 64 */
	write_variant(f, mp, -1, 12, &bad_heads, 4);
	expect_model_refused(f, "heads");
	int32_t neg = -7;
	write_variant(f, mp, -1, 0, &neg, 4);
	expect_model_refused(f, "implausible header");
	int32_t vocab_unshared = -512; /* claims its own classifier: size no longer matches */
	write_variant(f, mp, -1, 20, &vocab_unshared, 4);
	expect_model_refused(f, "truncated");
	float nan = NAN;
	write_variant(f, mp, -1, 28 + 4 * 1000, &nan, 4);
	expect_model_refused(f, "not finite");
	expect_model_refused(tp, tp); /* a tokenizer is not a model: any message naming it */
	snprintf(f, sizeof(f), "%s/absent.bin", dir);
	expect_model_refused(f, "No such file");
	kvt_test_rmtree(dir);
}

static void expect_tok_refused(const char *path, int vocab, const char *needle)
{
	struct kvt_llm_tokenizer *t = NULL;
	char err[512] = "";
	assert_true(kvt_llm_tokenizer_open(path, vocab, &t, err, sizeof(err)) < 0);
	assert_null(t);
	if (!strstr(err, needle)) {
		fprintf(stderr, "message \"%s\" lacks \"%s\"\n", err, needle);
		fail();
	}
}

static void test_minillm_bad_tokenizer(void **state)
{
	char mp[1024], tp[1024], dir[256], f[1100];
	mllm_paths(mp, tp, sizeof(mp));
	kvt_test_tmpdir(dir, sizeof(dir));
	snprintf(f, sizeof(f), "%s/t.bin", dir);
	write_variant(f, tp, 6290 - 3, 0, NULL, 0);
	expect_tok_refused(f, 512, "truncated");
	write_variant(f, tp, 6290 + 5, 0, NULL, 0);
	expect_tok_refused(f, 512, "bytes after");
	expect_tok_refused(tp, 600, "truncated"); /* another model's vocabulary size */
	expect_tok_refused(tp, 500, "bytes after");
	int32_t huge = 1 << 30;
	write_variant(f, tp, -1, 0, &huge, 4);
	expect_tok_refused(f, 512, "not a tokenizer");
	int32_t long_piece = 11; /* record 0's length above the declared longest (10) */
	write_variant(f, tp, -1, 8, &long_piece, 4);
	expect_tok_refused(f, 512, "record 0");
	expect_tok_refused(mp, 512, "tokenizer"); /* a model is not a tokenizer */
	kvt_test_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_minillm_vector_f32),
	    cmocka_unit_test(test_minillm_vector_f16),
	    cmocka_unit_test(test_minillm_context_refused),
	    cmocka_unit_test(test_minillm_bad_model),
	    cmocka_unit_test(test_minillm_bad_tokenizer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
