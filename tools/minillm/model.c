/*
 * model.c -- loads a llama2.c version-0 checkpoint (the format in ../shared/data/README.md).
 *
 * The file has no magic number, so the header is checked for plausibility (positive sizes,
 * heads that divide the width, an even head size, bounded dimensions) and the file size must
 * equal exactly the size the header implies: a truncated, padded or foreign file is refused with
 * a message that says which. The whole file is read into one allocation and every weight must be
 * finite. The tensors are then pointers into that allocation, in file order.
 */
#include "minillm.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DIM_MAX   (1 << 16)
#define VOCAB_MAX (1 << 20)

uint64_t kvt_llm_model_file_bytes(const int32_t h[7], char *err, size_t err_len)
{
	int32_t dim = h[0], hidden = h[1], L = h[2], nh = h[3], nkv = h[4], seq = h[6];
	int64_t vocab = h[5] < 0 ? -(int64_t)h[5] : h[5];
	if (dim <= 0 || hidden <= 0 || L <= 0 || nh <= 0 || nkv <= 0 || seq <= 0 || vocab == 0 ||
	    dim > DIM_MAX || hidden > 4 * DIM_MAX || L > 1024 || nh > dim || seq > DIM_MAX ||
	    vocab > VOCAB_MAX) {
		snprintf(
		    err, err_len,
		    "not a llama2.c checkpoint: implausible header (dim %d hidden %d layers %d "
		    "heads %d kv_heads %d vocab %d seq_len %d)",
		    dim, hidden, L, nh, nkv, h[5], seq);
		return 0;
	}
	if (dim % nh || nkv > nh || nh % nkv || (dim / nh) % 2) {
		snprintf(err, err_len,
		         "not a llama2.c checkpoint: %d heads and %d kv heads do not split dim %d "
		         "into even head sizes",
		         nh, nkv, dim);
		return 0;
	}
	uint64_t d = (uint64_t)dim, hd = d / (uint64_t)nh, kv = hd * (uint64_t)nkv, l = (uint64_t)L;
	uint64_t floats = (uint64_t)vocab * d + l * d + l * d * d + 2 * l * kv * d + l * d * d +
	                  l * d + 3 * l * (uint64_t)hidden * d + d + (uint64_t)seq * hd;
	if (h[5] < 0)
		floats += (uint64_t)vocab * d;
	return 28 + 4 * floats;
}

static int read_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t err_len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		int e = errno;
		snprintf(err, err_len, "%s: %s", path, strerror(e));
		return -e;
	}
	struct stat st;
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
		snprintf(err, err_len, "%s: not a regular file", path);
		fclose(f);
		return -EINVAL;
	}
	*len = (size_t)st.st_size;
	*buf = malloc(*len ? *len : 1);
	if (!*buf) {
		fclose(f);
		snprintf(err, err_len, "%s: out of memory", path);
		return -ENOMEM;
	}
	if (fread(*buf, 1, *len, f) != *len) {
		snprintf(err, err_len, "%s: read error", path);
		free(*buf);
		fclose(f);
		return -EIO;
	}
	fclose(f);
	return 0;
}

static void map_tensors(struct kvt_llm_model *m)
{
	const struct kvt_llm_config *c = &m->cfg;
	size_t d = c->dim, L = c->n_layers, kv = c->kv_dim, h = c->hidden_dim;
	const float *p = m->data;
	m->tok_emb = p, p += (size_t)c->vocab_size * d;
	m->rms_att = p, p += L * d;
	m->wq = p, p += L * d * d;
	m->wk = p, p += L * kv * d;
	m->wv = p, p += L * kv * d;
	m->wo = p, p += L * d * d;
	m->rms_ffn = p, p += L * d;
	m->w1 = p, p += L * h * d;
	m->w2 = p, p += L * d * h;
	m->w3 = p, p += L * h * d;
	m->rms_final = p, p += d;
	p += (size_t)c->seq_len * c->head_dim; /* the legacy RoPE tables: recomputed instead */
	m->wcls = c->shared_classifier ? m->tok_emb : p;
}

int kvt_llm_model_open(const char *path, struct kvt_llm_model **out, char *err, size_t err_len)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc = read_file(path, &buf, &len, err, err_len);
	if (rc)
		return rc;
	rc = -EINVAL;
	if (len < 28) {
		snprintf(err, err_len, "%s: truncated model (%zu bytes, the header alone is 28)",
		         path, len);
		goto err_buf;
	}
	int32_t h[7];
	memcpy(h, buf, sizeof(h));
	char why[200];
	uint64_t want = kvt_llm_model_file_bytes(h, why, sizeof(why));
	if (!want) {
		snprintf(err, err_len, "%s: %s", path, why);
		goto err_buf;
	}
	if (want != len) {
		snprintf(
		    err, err_len,
		    "%s: %s model file: %zu bytes, but its header (dim %d, %d layers, vocab %d) "
		    "implies %llu",
		    path, len < want ? "truncated" : "oversized", len, h[0], h[2], h[5],
		    (unsigned long long)want);
		goto err_buf;
	}
	struct kvt_llm_model *m = calloc(1, sizeof(*m));
	if (!m) {
		rc = -ENOMEM;
		snprintf(err, err_len, "out of memory");
		goto err_buf;
	}
	size_t n_floats = (len - 28) / 4;
	m->data = malloc(n_floats * sizeof(float));
	if (!m->data) {
		rc = -ENOMEM;
		snprintf(err, err_len, "out of memory");
		goto err_model;
	}
	memcpy(m->data, buf + 28, n_floats * sizeof(float));
	for (size_t i = 0; i < n_floats; i++) {
		if (!isfinite(m->data[i])) {
			snprintf(err, err_len, "%s: weight %zu is not finite", path, i);
			goto err_data;
		}
	}
	struct kvt_llm_config *c = &m->cfg;
	c->dim = h[0], c->hidden_dim = h[1], c->n_layers = h[2], c->n_heads = h[3];
	c->n_kv_heads = h[4], c->seq_len = h[6];
	c->shared_classifier = h[5] > 0;
	c->vocab_size = h[5] > 0 ? h[5] : -h[5];
	c->head_dim = c->dim / c->n_heads;
	c->kv_dim = c->head_dim * c->n_kv_heads;
	map_tensors(m);
	free(buf);
	*out = m;
	return 0;

err_data:
	free(m->data);
err_model:
	free(m);
err_buf:
	free(buf);
	return rc;
}

void kvt_llm_model_close(struct kvt_llm_model *m)
{
	if (!m)
		return;
	free(m->data);
	free(m);
}
