/*
 * tokenizer.c -- the llama2.c BPE tokenizer (format in ../shared/data/README.md).
 *
 * The file is an int32 longest-piece length, then vocab_size records {float score, int32 n,
 * n bytes}. It is parsed with bounds checks and must end exactly after the last record. Pieces
 * are kept NUL-terminated in one arena; a sorted index of ids serves the string lookups that
 * encoding needs. Encoding follows llama2.c: a leading space when the text is not empty, UTF-8
 * characters mapped to their piece or to byte-fallback tokens (byte b is id b + 3), then the
 * adjacent pair whose concatenation has the best score is merged until none is left.
 */
#include "minillm.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kvt_llm_tokenizer {
	int vocab_size, max_len;
	char **vocab;   /* vocab[i] points into arena, NUL-terminated */
	uint32_t *lens; /* byte length of each piece */
	float *scores;
	int *sorted; /* ids sorted by piece (strcmp) */
	char *arena;
};

static const struct kvt_llm_tokenizer *sort_ctx;

static int cmp_ids(const void *a, const void *b)
{
	return strcmp(sort_ctx->vocab[*(const int *)a], sort_ctx->vocab[*(const int *)b]);
}

void kvt_llm_tokenizer_close(struct kvt_llm_tokenizer *t)
{
	if (!t)
		return;
	free(t->vocab);
	free(t->lens);
	free(t->scores);
	free(t->sorted);
	free(t->arena);
	free(t);
}

static int parse(struct kvt_llm_tokenizer *t, const uint8_t *buf, size_t len, const char *path,
                 char *err, size_t err_len)
{
	size_t off = 4, arena_off = 0;
	int32_t max_len;
	if (len < 4)
		goto truncated;
	memcpy(&max_len, buf, 4);
	if (max_len <= 0 || max_len > 1024) {
		snprintf(err, err_len, "%s: not a tokenizer: longest piece length %d", path,
		         max_len);
		return -EINVAL;
	}
	t->max_len = max_len;
	for (int i = 0; i < t->vocab_size; i++) {
		int32_t n;
		if (len - off < 8)
			goto truncated;
		memcpy(&t->scores[i], buf + off, 4);
		memcpy(&n, buf + off + 4, 4);
		off += 8;
		if (n < 0 || n > max_len || !isfinite(t->scores[i])) {
			snprintf(err, err_len,
			         "%s: not a tokenizer: record %d has length %d (longest %d) or a "
			         "non-finite score",
			         path, i, n, max_len);
			return -EINVAL;
		}
		if (len - off < (size_t)n)
			goto truncated;
		t->vocab[i] = t->arena + arena_off;
		memcpy(t->vocab[i], buf + off, (size_t)n);
		t->vocab[i][n] = 0;
		t->lens[i] = (uint32_t)n;
		arena_off += (size_t)n + 1;
		off += (size_t)n;
	}
	if (off != len) {
		snprintf(
		    err, err_len,
		    "%s: %zu bytes after the %d records: not the tokenizer of this model (wrong "
		    "vocab size?)",
		    path, len - off, t->vocab_size);
		return -EINVAL;
	}
	return 0;
truncated:
	snprintf(err, err_len, "%s: truncated tokenizer (%zu bytes; fewer than %d records)", path,
	         len, t->vocab_size);
	return -EINVAL;
}

int kvt_llm_tokenizer_open(const char *path, int vocab_size, struct kvt_llm_tokenizer **out,
                           char *err, size_t err_len)
{
	int rc = -ENOMEM;
	uint8_t *buf = NULL;
	FILE *f = fopen(path, "rb");
	if (!f) {
		rc = -errno;
		snprintf(err, err_len, "%s: %s", path, strerror(-rc));
		return rc;
	}
	long len = -1;
	if (!fseek(f, 0, SEEK_END))
		len = ftell(f);
	if (len < 0 || fseek(f, 0, SEEK_SET) || vocab_size <= 0) {
		fclose(f);
		snprintf(err, err_len, "%s: cannot size the file", path);
		return -EINVAL;
	}
	struct kvt_llm_tokenizer *t = calloc(1, sizeof(*t));
	buf = malloc((size_t)len + 1);
	if (!t || !buf)
		goto err;
	t->vocab_size = vocab_size;
	t->vocab = calloc((size_t)vocab_size, sizeof(*t->vocab));
	t->lens = calloc((size_t)vocab_size, sizeof(*t->lens));
	t->scores = calloc((size_t)vocab_size, sizeof(*t->scores));
	t->sorted = calloc((size_t)vocab_size, sizeof(*t->sorted));
	t->arena = malloc((size_t)len + (size_t)vocab_size); /* pieces + terminators fit */
	if (!t->vocab || !t->lens || !t->scores || !t->sorted || !t->arena)
		goto err;
	if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
		rc = -EIO;
		snprintf(err, err_len, "%s: read error", path);
		goto err_msg;
	}
	rc = parse(t, buf, (size_t)len, path, err, err_len);
	if (rc)
		goto err_msg;
	for (int i = 0; i < vocab_size; i++)
		t->sorted[i] = i;
	sort_ctx = t;
	qsort(t->sorted, (size_t)vocab_size, sizeof(int), cmp_ids);
	sort_ctx = NULL;
	free(buf);
	fclose(f);
	*out = t;
	return 0;
err:
	snprintf(err, err_len, "out of memory");
err_msg:
	free(buf);
	kvt_llm_tokenizer_close(t);
	fclose(f);
	return rc;
}

int kvt_llm_tokenizer_vocab(const struct kvt_llm_tokenizer *t)
{
	return t->vocab_size;
}

static int lookup(const struct kvt_llm_tokenizer *t, const char *s)
{
	int lo = 0, hi = t->vocab_size - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(s, t->vocab[t->sorted[mid]]);
		if (!c)
			return t->sorted[mid];
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return -1;
}

static int push(int *ids, int max_ids, int *n, int id)
{
	if (*n >= max_ids)
		return -ENOSPC;
	ids[(*n)++] = id;
	return 0;
}

/* One character (1-4 bytes of UTF-8) to its piece, or to byte tokens. */
static int push_char(const struct kvt_llm_tokenizer *t, const char *c, size_t n, int *ids,
                     int max_ids, int *n_ids)
{
	char s[8];
	memcpy(s, c, n);
	s[n] = 0;
	int id = lookup(t, s);
	if (id >= 0)
		return push(ids, max_ids, n_ids, id);
	for (size_t i = 0; i < n; i++) {
		int rc = push(ids, max_ids, n_ids, (unsigned char)s[i] + 3);
		if (rc)
			return rc;
	}
	return 0;
}

static void merge(const struct kvt_llm_tokenizer *t, int *ids, int *n, char *pair)
{
	for (;;) {
		float best = -INFINITY;
		int best_id = -1, best_i = -1;
		for (int i = 0; i + 1 < *n; i++) {
			const char *a = t->vocab[ids[i]], *b = t->vocab[ids[i + 1]];
			size_t la = t->lens[ids[i]], lb = t->lens[ids[i + 1]];
			if (la + lb > (size_t)t->max_len)
				continue; /* no piece that long exists */
			memcpy(pair, a, la);
			memcpy(pair + la, b, lb + 1);
			int id = lookup(t, pair);
			if (id >= 0 && t->scores[id] > best) {
				best = t->scores[id];
				best_id = id;
				best_i = i;
			}
		}
		if (best_i < 0)
			return;
		ids[best_i] = best_id;
		memmove(&ids[best_i + 1], &ids[best_i + 2],
		        (size_t)(*n - best_i - 2) * sizeof(int));
		(*n)--;
	}
}

int kvt_llm_encode(const struct kvt_llm_tokenizer *t, const char *text, int bos, int *ids,
                   int max_ids, int *n_out)
{
	/* before merging, every byte may be a token: encode into scratch, copy what fits */
	size_t cap = strlen(text) + 3;
	int n = 0, rc = -ENOMEM;
	int *tmp = cap < (size_t)1 << 28 ? malloc(cap * sizeof(int)) : NULL;
	char *pair = malloc(2 * (size_t)t->max_len + 2);
	if (!tmp || !pair)
		goto out;
	if (bos)
		tmp[n++] = KVT_LLM_BOS;
	int first = n;
	if (text[0] && (rc = push_char(t, " ", 1, tmp, (int)cap, &n)))
		goto out;
	for (const char *c = text; *c;) {
		size_t len = 1;
		while (len < 4 && ((unsigned char)c[len] & 0xC0) == 0x80)
			len++;
		if ((rc = push_char(t, c, len, tmp, (int)cap, &n)))
			goto out;
		c += len;
	}
	int m = n - first;
	merge(t, tmp + first, &m, pair);
	n = first + m;
	rc = -ENOSPC;
	if (n > max_ids)
		goto out;
	memcpy(ids, tmp, (size_t)n * sizeof(int));
	*n_out = n;
	rc = 0;
out:
	free(tmp);
	free(pair);
	return rc;
}

static int byte_piece(const char *p, size_t len)
{
	if (len != 6 || memcmp(p, "<0x", 3) || p[5] != '>')
		return -1;
	int v = 0;
	for (int i = 3; i < 5; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
		        : c >= 'A' && c <= 'F' ? c - 'A' + 10
		        : c >= 'a' && c <= 'f' ? c - 'a' + 10
		                               : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

size_t kvt_llm_piece(const struct kvt_llm_tokenizer *t, int prev, int token, char *byte_buf,
                     const char **piece)
{
	if (token < 0 || token >= t->vocab_size || token == KVT_LLM_BOS || token == KVT_LLM_EOS) {
		*piece = "";
		return 0;
	}
	const char *p = t->vocab[token];
	size_t len = t->lens[token];
	if (prev == KVT_LLM_BOS && len && p[0] == ' ')
		p++, len--;
	int b = byte_piece(p, len);
	if (b >= 0) {
		byte_buf[0] = (char)b;
		byte_buf[1] = 0;
		p = byte_buf;
		len = 1;
	}
	*piece = p;
	return len;
}

size_t kvt_llm_decode(const struct kvt_llm_tokenizer *t, int prev, const int *ids, int n, char *dst,
                      size_t dst_len)
{
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		char bb[2];
		const char *p;
		size_t len = kvt_llm_piece(t, i ? ids[i - 1] : prev, ids[i], bb, &p);
		for (size_t j = 0; j < len; j++, off++)
			if (off + 1 < dst_len)
				dst[off] = p[j];
	}
	if (dst_len)
		dst[off < dst_len ? off : dst_len - 1] = 0;
	return off;
}
