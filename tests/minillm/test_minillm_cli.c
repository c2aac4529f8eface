/* test_minillm_cli.c -- the minillm program without a daemon: the test vector end to end,
 * clear refusals (context, bad files, bad options), and --dump-kv / --prefix-kv. */
#include "testlib.h"
#include "mllm_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char out[1 << 16], err[1 << 14];

static void test_minillm_cli_vector(void **state)
{
	assert_int_equal(
	    mllm_exec("--prompt-ids 1 --steps 64 --temperature 0 --kv-dtype f32 --json", out,
	              sizeof(out), err, sizeof(err)),
	    0);
	char ids[1024], top5[256];
	mllm_json_raw(out, 0, "output_ids", ids, sizeof(ids));
	assert_true(!strncmp(ids, "[319,459,355,260,275,429,339,315,374,327,446,262", 48));
	assert_true(!strcmp(ids + strlen(ids) - 16, "289,408,326,446]"));
	mllm_json_raw(out, 0, "top5", top5, sizeof(top5));
	assert_true(!strncmp(top5, "[[319,11.06", 11));
	mllm_json_raw(out, 0, "text", ids, sizeof(ids));
	assert_true(!strncmp(ids, "\"\\\"Echoes of vectors unfold", 27));
}

static void test_minillm_cli_refusals(void **state)
{
	char args[2048] = "--steps 29 --prompt-ids \"1";
	for (int i = 1; i < 100; i++)
		strcat(args, " 300");
	strcat(args, "\"");
	assert_int_equal(mllm_exec(args, out, sizeof(out), err, sizeof(err)), 1);
	assert_non_null(strstr(err, "exceed the model's context (seq_len 128)"));
	args[9] = '8'; /* --steps 28 fits exactly */
	assert_int_equal(mllm_exec(args, out, sizeof(out), err, sizeof(err)), 0);
	assert_int_equal(mllm_exec("--prompt-ids \"1 999\"", out, sizeof(out), err, sizeof(err)),
	                 1);
	assert_non_null(strstr(err, "outside the vocabulary"));
	assert_int_equal(mllm_exec("--prompt-ids \"1 x\"", out, sizeof(out), err, sizeof(err)), 1);
	assert_int_equal(mllm_exec("--steps -3", out, sizeof(out), err, sizeof(err)), 2);
	/* a bad value names its option and what it wants ("bad value for an option: -3"), and
	 * an empty one is no number (--seed '' ran with seed 0) */
	assert_non_null(strstr(err, "minillm: --steps -3: not a whole number from 0"));
	assert_int_equal(mllm_exec("--seed ''", out, sizeof(out), err, sizeof(err)), 2);
	assert_non_null(strstr(err, "minillm: --seed : not a whole number from 0"));
	assert_int_equal(mllm_exec("--kv-dtype f8", out, sizeof(out), err, sizeof(err)), 2);
	assert_non_null(strstr(err, "minillm: --kv-dtype f8: not f16 or f32"));
	assert_int_equal(mllm_exec("--prompt a --prompt-ids 1", out, sizeof(out), err, sizeof(err)),
	                 2);
	/* a word with no option before it (a glob that matched two files) is named */
	assert_int_equal(mllm_exec("--prompt a stray.bin", out, sizeof(out), err, sizeof(err)), 2);
	assert_non_null(strstr(err, "unexpected argument 'stray.bin'"));
	/* a truncated model file, through the program */
	char mp[1024], tp[1024], dir[256], bin[1024], cmd[8192];
	mllm_paths(mp, tp, sizeof(mp));
	kvt_test_tmpdir(dir, sizeof(dir));
	kvt_test_bin("minillm", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd),
	         "head -c 500000 %s > %s/m.bin && %s --model %s/m.bin --tokenizer %s "
	         "2>%s/err; echo $? >> %s/err",
	         mp, dir, bin, dir, tp, dir, dir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/err", dir);
	assert_true(kvt_test_read_file(cmd, err, sizeof(err)) >= 0);
	assert_non_null(strstr(err, "truncated model file: 500000 bytes"));
	assert_non_null(strstr(err, "\n1\n"));
	kvt_test_rmtree(dir);
}

static double num(const char *s, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(s, pat);
	assert_non_null(p);
	return strtod(p + strlen(pat), NULL);
}

static void test_minillm_cli_dump_prefix(void **state)
{
	char dir[256], args[2048], dump[300];
	kvt_test_tmpdir(dir, sizeof(dir));
	snprintf(dump, sizeof(dump), "%s/p.kv", dir);
	const char *prefix = "--prompt-ids \"1 300 301 302 303 304 305 306 307 308 309 310\"";
	snprintf(args, sizeof(args), "%s --steps 1 --dump-kv %s", prefix, dump);
	assert_int_equal(mllm_exec(args, out, sizeof(out), err, sizeof(err)), 0);
	FILE *f = fopen(dump, "rb");
	assert_non_null(f);
	struct kvt_llm_dump_hdr h;
	assert_int_equal(fread(&h, sizeof(h), 1, f), 1);
	assert_memory_equal(h.magic, "KVTLLMKV", 8);
	assert_int_equal(h.n_tokens, 12);
	assert_int_equal(h.dtype, KVT_LLM_F16);
	assert_int_equal(h.payload_bytes, 2u * 4 * 12 * 64 * 2);
	static uint8_t payload[1 << 16];
	assert_int_equal(fread(payload, 1, sizeof(payload), f), h.payload_bytes);
	fclose(f);
	/* the exact prefix: no divergence at all */
	const char *cont = "--prompt-ids \"1 300 301 302 303 304 305 306 307 308 309 310 311 312\"";
	snprintf(args, sizeof(args), "%s --steps 16 --temperature 0 --prefix-kv %s", cont, dump);
	assert_int_equal(mllm_exec(args, out, sizeof(out), err, sizeof(err)), 0);
	assert_true(num(out, "kl_mean") == 0);
	assert_true(num(out, "top1_agreement") == 1);
	assert_true(num(out, "ppl_exact") == num(out, "ppl_prefix"));
	assert_true(num(out, "ppl_exact") > 1);
	/* a damaged prefix (every K of layer 0 scaled by 1.5): measurable divergence */
	f = fopen(dump, "r+b");
	assert_non_null(f);
	uint16_t *k0 = (uint16_t *)payload;
	for (int i = 0; i < 12 * 64; i++)
		k0[i] = kvt_llm_f32_to_f16(kvt_llm_f16_to_f32(k0[i]) * 1.5f);
	fseek(f, sizeof(h), SEEK_SET);
	assert_int_equal(fwrite(payload, 1, h.payload_bytes, f), h.payload_bytes);
	fclose(f);
	assert_int_equal(mllm_exec(args, out, sizeof(out), err, sizeof(err)), 0);
	assert_true(num(out, "kl_mean") > 1e-6);
	assert_true(num(out, "ppl_exact") != num(out, "ppl_prefix"));
	/* a prefix of other tokens is refused */
	snprintf(args, sizeof(args),
	         "--prompt-ids \"1 2 3 4 5 6 7 8 9 10 11 12 13 14\" --prefix-kv %s", dump);
	assert_int_equal(mllm_exec(args, out, sizeof(out), err, sizeof(err)), 1);
	assert_non_null(strstr(err, "not a proper prefix"));
	kvt_test_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_minillm_cli_vector),
	    cmocka_unit_test(test_minillm_cli_refusals),
	    cmocka_unit_test(test_minillm_cli_dump_prefix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
