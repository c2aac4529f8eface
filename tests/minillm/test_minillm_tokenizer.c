/* test_minillm_tokenizer.c -- BPE encode/decode: round trips, merges, byte fallback, limits. */
#include "testlib.h"
#include "mllm_util.h"

#include <errno.h>
#include <string.h>

static struct kvt_llm_model *model;
static struct kvt_llm_tokenizer *tok;

static int setup(void **state)
{
	mllm_open(&model, &tok);
	return 0;
}

static int teardown(void **state)
{
	kvt_llm_tokenizer_close(tok);
	kvt_llm_model_close(model);
	return 0;
}

static void roundtrip(const char *text, int *n_out)
{
	int ids[512], n;
	assert_int_equal(kvt_llm_encode(tok, text, 1, ids, 512, &n), 0);
	assert_int_equal(ids[0], KVT_LLM_BOS);
	for (int i = 1; i < n; i++)
		assert_true(ids[i] > KVT_LLM_EOS && ids[i] < 512);
	char out[2048];
	size_t len = kvt_llm_decode(tok, -1, ids, n, out, sizeof(out));
	assert_int_equal(len, strlen(text));
	assert_string_equal(out, text);
	*n_out = n;
}

static void test_minillm_tokenizer_roundtrip(void **state)
{
	static const char *texts[] = {
	    "Echoes of vectors unfold, a gentle hum of precision",
	    "I dream of circuits.\nNew line, tabs\tand \"quotes\"",
	    "héllo wörld ✓ 日本 🙂", /* characters without pieces: byte fallback */
	    "  leading and trailing spaces  ",
	    "x",
	};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		int n;
		roundtrip(texts[i], &n);
	}
}

static void test_minillm_tokenizer_merges(void **state)
{
	int n;
	const char *t = "Echoes of vectors unfold, a gentle hum of precision";
	roundtrip(t, &n);
	/* merges must have happened: far fewer tokens than bytes (+ BOS + leading space) */
	assert_true(n < (int)strlen(t) / 2);
	/* the greedy test vector's text re-encodes to pieces that decode to the same text */
	int ids[8];
	assert_int_equal(kvt_llm_encode(tok, "precision", 0, ids, 8, &n), 0);
	const char *piece;
	char bb[2];
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += kvt_llm_piece(tok, i ? ids[i - 1] : -1, ids[i], bb, &piece);
	assert_int_equal(len, strlen(" precision"));
	/* regression: text longer in bytes than max_ids fits once merged */
	char long_text[400] = "";
	for (int i = 0; i < 6; i++)
		strcat(long_text, "Echoes of vectors unfold, ");
	int many[128];
	assert_true(strlen(long_text) > 128);
	assert_int_equal(kvt_llm_encode(tok, long_text, 1, many, 128, &n), 0);
	assert_true(n <= 128);
}

static void test_minillm_tokenizer_bytes(void **state)
{
	int ids[16], n;
	/* U+00E9 has no piece: two byte tokens, 0xC3 + 3 and 0xA9 + 3 */
	assert_int_equal(kvt_llm_encode(tok, "\xc3\xa9", 0, ids, 16, &n), 0);
	int found = 0;
	for (int i = 0; i + 1 < n; i++)
		found |= ids[i] == 0xC3 + 3 && ids[i + 1] == 0xA9 + 3;
	assert_true(found);
	/* empty text: no leading space, just BOS */
	assert_int_equal(kvt_llm_encode(tok, "", 1, ids, 16, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ids[0], KVT_LLM_BOS);
	/* too little room is an error, not an overflow */
	assert_int_equal(kvt_llm_encode(tok, "a b c d e f g h i j k", 1, ids, 4, &n), -ENOSPC);
	/* BOS and EOS print nothing; a leading space is dropped only right after BOS */
	char out[64];
	int seq[] = {KVT_LLM_BOS, ids[0]};
	assert_int_equal(kvt_llm_decode(tok, -1, seq, 1, out, sizeof(out)), 0);
	assert_int_equal(kvt_llm_encode(tok, "dream", 0, ids, 16, &n), 0);
	size_t with = kvt_llm_decode(tok, -1, ids, n, out, sizeof(out));
	size_t after_bos = kvt_llm_decode(tok, KVT_LLM_BOS, ids, n, out, sizeof(out));
	assert_int_equal(with, after_bos + 1);
	assert_string_equal(out, "dream");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_minillm_tokenizer_roundtrip),
	    cmocka_unit_test(test_minillm_tokenizer_merges),
	    cmocka_unit_test(test_minillm_tokenizer_bytes),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
