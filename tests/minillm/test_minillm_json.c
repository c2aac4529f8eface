/* test_minillm_json.c -- the --requests line reader. */
#include "testlib.h"
#include "mllm_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void test_minillm_json_requests(void **state)
{
	char *text, err[256];
	int ids[8], n, steps;
	assert_int_equal(
	    kvt_llm_parse_request("{\"prompt\": \"a \\\"b\\\"\\n\\u00e9\\ud83d\\ude42\"}", &text,
	                          ids, 8, &n, &steps, err, sizeof(err)),
	    0);
	assert_string_equal(text, "a \"b\"\n\xc3\xa9\xf0\x9f\x99\x82");
	assert_int_equal(steps, -1);
	free(text);
	assert_int_equal(
	    kvt_llm_parse_request(" {\"x\": [1, {\"y\": null}], \"prompt_ids\": [1, 22,"
	                          "333], \"steps\": 5, \"z\": true}\n",
	                          &text, ids, 8, &n, &steps, err, sizeof(err)),
	    0);
	assert_null(text);
	assert_int_equal(n, 3);
	assert_int_equal(ids[2], 333);
	assert_int_equal(steps, 5);
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
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		assert_true(
		    kvt_llm_parse_request(bad[i], &text, ids, 8, &n, &steps, err, sizeof(err)) < 0);
		assert_null(text);
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
