/* mllm_util.h -- helpers for the minillm tests: the shared model, running the program, JSON. */
#ifndef KVT_MLLM_UTIL_H
#define KVT_MLLM_UTIL_H
#include "minillm.h"

#include <stddef.h>

/* Paths of the shared model and tokenizer; skips (or fails in CI) when absent. */
void mllm_paths(char *model, char *tok, size_t len);
/* Opens the shared model and tokenizer (asserting success). */
void mllm_open(struct kvt_llm_model **m, struct kvt_llm_tokenizer **t);
/* Runs build/bin/minillm with the model, tokenizer and args; stdout into out (NUL-terminated),
 * stderr into err when not NULL. @return : the exit status. */
int mllm_exec(const char *args, char *out, size_t out_len, char *err, size_t err_len);
/* Integer after "key": in the first JSON object of s at or after line (0-based); -1 if absent. */
long mllm_json_int(const char *s, int line, const char *key);
/* Copies the raw value (up to the next ',' at depth 0, or '}') of "key" in line into buf. */
const char *mllm_json_raw(const char *s, int line, const char *key, char *buf, size_t len);
#endif
