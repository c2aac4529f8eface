/* mllm_util.c -- see mllm_util.h. */
#include "testlib.h"
#include "mllm_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void mllm_paths(char *model, char *tok, size_t len)
{
	kvt_test_require_shared(kvt_test_shared("models/aidreams260K/aidreams260K.bin", model, len),
	                        "models/aidreams260K/aidreams260K.bin");
	kvt_test_require_shared(kvt_test_shared("models/aidreams260K/tok512.bin", tok, len),
	                        "models/aidreams260K/tok512.bin");
}

void mllm_open(struct kvt_llm_model **m, struct kvt_llm_tokenizer **t)
{
	char mp[1024], tp[1024], err[512];
	mllm_paths(mp, tp, sizeof(mp));
	if (kvt_llm_model_open(mp, m, err, sizeof(err)) ||
	    kvt_llm_tokenizer_open(tp, (*m)->cfg.vocab_size, t, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		fail();
	}
}

static void slurp(FILE *f, char *buf, size_t len)
{
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;
	buf[n] = 0;
}

int mllm_exec(const char *args, char *out, size_t out_len, char *err, size_t err_len)
{
	char mp[1024], tp[1024], bin[1024], errf[64] = "/tmp/mllm-err-XXXXXX";
	mllm_paths(mp, tp, sizeof(mp));
	kvt_test_bin("minillm", bin, sizeof(bin));
	int fd = mkstemp(errf);
	assert_true(fd >= 0);
	close(fd);
	size_t cap = strlen(args) + 4096;
	char *cmd = malloc(cap);
	snprintf(cmd, cap, "%s --model %s --tokenizer %s %s 2>%s", bin, mp, tp, args, errf);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	slurp(p, out, out_len);
	int st = pclose(p);
	FILE *e = fopen(errf, "r");
	if (err)
		slurp(e, err, err_len);
	if (e)
		fclose(e);
	unlink(errf);
	free(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static const char *nth_line(const char *s, int line)
{
	for (int i = 0; i < line && s; i++) {
		s = strchr(s, '\n');
		if (s)
			s++;
	}
	return s;
}

static const char *find_key(const char *s, int line, const char *key)
{
	s = nth_line(s, line);
	if (!s)
		return NULL;
	const char *eol = strchr(s, '\n');
	char pat[128];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(s, pat);
	if (!p || (eol && p > eol))
		return NULL;
	return p + strlen(pat);
}

long mllm_json_int(const char *s, int line, const char *key)
{
	const char *p = find_key(s, line, key);
	return p ? strtol(p, NULL, 10) : -1;
}

const char *mllm_json_raw(const char *s, int line, const char *key, char *buf, size_t len)
{
	const char *p = find_key(s, line, key);
	buf[0] = 0;
	if (!p)
		return buf;
	int depth = 0, in_str = 0;
	size_t n = 0;
	for (; *p && n + 1 < len; p++) {
		if (*p == '"' && (n == 0 || p[-1] != '\\'))
			in_str = !in_str;
		if (!in_str && (*p == '[' || *p == '{'))
			depth++;
		if (!in_str && (*p == ']' || *p == '}')) {
			if (!depth)
				break;
			depth--;
		}
		if (!in_str && !depth && *p == ',')
			break;
		buf[n++] = *p;
	}
	buf[n] = 0;
	return buf;
}
