/* test_minillm_json.c -- the --requests line reader. */
#include "testlib.h"
#include "mllm_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void test_minillm_json_requests(void **state)
{
	struct kvt_llm_line l;
	char err[256];
	int ids[8];
	assert_int_equal(
	    kvt_llm_parse_request("{\"prompt\": \"a \\\"b\\\"\\n\\u00e9\\ud83d\\ude42\"}", &l, ids,
	                          8, err, sizeof(err)),
	    0);
	assert_string_equal(l.text, "a \"b\"\n\xc3\xa9\xf0\x9f\x99\x82");
	assert_int_equal(l.steps, -1);
	assert_null(l.session);
	assert_int_equal(l.end, 0);
	assert_int_equal(l.keep_ms, -1);
	kvt_llm_line_free(&l);
	assert_int_equal(
	    kvt_llm_parse_request(" {\"x\": [1, {\"y\": null}], \"prompt_ids\": [1, 22,"
	                          "333], \"steps\": 5, \"z\": true}\n",
	                          &l, ids, 8, err, sizeof(err)),
	    0);
	assert_null(l.text);
	assert_int_equal(l.n_ids, 3);
	assert_int_equal(ids[2], 333);
	assert_int_equal(l.steps, 5);
	kvt_llm_line_free(&l);
	assert_int_equal(kvt_llm_parse_request("{\"prompt_ids\": [1], \"session\": \"chat 7\", "
	                                       "\"end\": true}",
	                                       &l, ids, 8, err, sizeof(err)),
	                 0);
	assert_string_equal(l.session, "chat 7");
	assert_int_equal(l.end, 1);
	kvt_llm_line_free(&l);
	assert_int_equal(kvt_llm_parse_request("{\"prompt_ids\": [1], \"session\": \"s\", "
	                                       "\"end\": false}",
	                                       &l, ids, 8, err, sizeof(err)),
	                 0);
	assert_int_equal(l.end, 0);
	kvt_llm_line_free(&l);
	assert_int_equal(kvt_llm_parse_request("{\"prompt_ids\": [1], \"keep_ms\": 4294967295}", &l,
	                                       ids, 8, err, sizeof(err)),
	                 0);
	assert_int_equal(l.keep_ms, 4294967295L);
	kvt_llm_line_free(&l);
	assert_int_equal(kvt_llm_parse_request("{\"keep_ms\": 0, \"prompt_ids\": [1]}", &l, ids, 8,
	                                       err, sizeof(err)),
	                 0);
	assert_int_equal(l.keep_ms, 0);
	kvt_llm_line_free(&l);
	assert_int_equal(kvt_llm_parse_request("{\"prompt\": \"a\", \"session\": \"s\", "
	                                       "\"end\": true, \"keep_ms\": 5}",
	                                       &l, ids, 8, err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "contradict"));
	static const char *bad[] = {
	    "",
	    "{}",
	    "{\"prompt\": \"a\", \"prompt_ids\": [1]}",
	    "{\"prompt\": \"unterminated}",
	    "{\"prompt_ids\": [1, -2]}",
	    "{\"prompt_ids\": [1.5]}",
	    "{\"prompt_ids\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}",
	    "{\"prompt\": \"a\"} trailing",
	    "{\"steps\": 3}",
	    "[1]",
	    "{\"prompt\": \"a\", \"end\": true}",
	    "{\"prompt\": \"a\", \"session\": \"s\", \"end\": 1}",
	    "{\"prompt\": \"a\", \"session\": \"s\", \"end\": trueish}",
	    "{\"prompt\": \"a\", \"session\": 3}",
	    "{\"prompt\": \"a\", \"keep_ms\": -1}",
	    "{\"prompt\": \"a\", \"keep_ms\": 4294967296}",
	    "{\"prompt\": \"a\", \"keep_ms\": 1.5}",
	    "{\"prompt\": \"a\", \"keep_ms\": \"60000\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		l.text = l.session = (char *)"stale";
		if (kvt_llm_parse_request(bad[i], &l, ids, 8, err, sizeof(err)) >= 0)
			fail_msg("accepted: %s", bad[i]);
		assert_null(l.text);
		assert_null(l.session);
		assert_true(err[0] != 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_minillm_json_requests),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
