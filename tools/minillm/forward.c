/*
 * forward.c -- one token through the Llama-architecture model (llama2.c's forward pass).
 *
 * Per layer: RMSNorm (epsilon 1e-5 inside the square root) and the q/k/v projections, RoPE on
 * adjacent pairs of q and k, K and V stored into the paged cache, then causal attention over
 * positions 0..pos with K and V read back from the cache -- the current position included -- so
 * the result depends only on the cache's bytes, never on whether they were computed or copied
 * in. Grouped-query attention: query head h reads KV head h / (n_heads / n_kv_heads). Then the
 * output projection, a second RMSNorm and the SwiGLU FFN, each added to the residual.
 *
 * Determinism: every reduction runs in a fixed order (dot products in eight fixed lanes summed
 * by a fixed tree, softmax and attention sums in ascending position), and no code path depends
 * on how many positions are processed at once.
 */
#include "minillm.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int kvt_llm_state_create(const struct kvt_llm_config *c, struct kvt_llm_state **out)
{
	struct kvt_llm_state *s = calloc(1, sizeof(*s));
	size_t d = c->dim, h = c->hidden_dim, kv = c->kv_dim;
	size_t n = 3 * d + 2 * h + d + 3 * kv + (size_t)c->n_heads * c->seq_len + c->vocab_size;
	float *p = s ? calloc(n, sizeof(float)) : NULL;
	if (!p) {
		free(s);
		return -ENOMEM;
	}
	s->x = p, p += d;
	s->xb = p, p += d;
	s->xb2 = p, p += d;
	s->hb = p, p += h;
	s->hb2 = p, p += h;
	s->q = p, p += d;
	s->k = p, p += kv;
	s->v = p, p += kv;
	s->kvrow = p, p += kv;
	s->att = p, p += (size_t)c->n_heads * c->seq_len;
	s->logits = p;
	*out = s;
	return 0;
}

void kvt_llm_state_destroy(struct kvt_llm_state *s)
{
	if (!s)
		return;
	free(s->x); /* the one allocation */
	free(s);
}

static float dot(const float *a, const float *b, int n)
{
	float acc[8] = {0};
	int i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] += a[i + j] * b[i + j];
	for (int j = 0; i < n; i++, j++)
		acc[j] += a[i] * b[i];
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* out[i] = w[i] . x for i < d; w is [d][n]. */
static void matmul(float *out, const float *x, const float *w, int n, int d)
{
	for (int i = 0; i < d; i++)
		out[i] = dot(w + (size_t)i * n, x, n);
}

static void rmsnorm(float *out, const float *x, const float *g, int n)
{
	float ss = dot(x, x, n) / (float)n;
	ss = 1.0f / sqrtf(ss + 1e-5f);
	for (int i = 0; i < n; i++)
		out[i] = g[i] * (ss * x[i]);
}

static void softmax(float *x, int n)
{
	float max = x[0];
	for (int i = 1; i < n; i++)
		if (x[i] > max)
			max = x[i];
	float sum = 0;
	for (int i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	for (int i = 0; i < n; i++)
		x[i] /= sum;
}

static void rope(float *vec, int n, int head_dim, int pos)
{
	for (int i = 0; i < n; i += 2) {
		float freq = 1.0f / powf(10000.0f, (float)(i % head_dim) / (float)head_dim);
		float a = (float)pos * freq, c = cosf(a), s = sinf(a);
		float v0 = vec[i], v1 = vec[i + 1];
		vec[i] = v0 * c - v1 * s;
		vec[i + 1] = v0 * s + v1 * c;
	}
}

static const float *load_row(const struct kvt_llm_kvcache *kv, int l, int which, int pos,
                             float *buf)
{
	const void *row = kvt_llm_kv_row(kv, l, which, pos);
	if (kv->dtype == KVT_LLM_F32)
		return row;
	const uint16_t *h = row;
	const float *table = kvt_llm_f16_table();
	for (int i = 0; i < kv->kv_dim; i++)
		buf[i] = table[h[i]];
	return buf;
}

/* Attention of all heads at pos into s->xb, reading K and V from the cache. */
static void attention(const struct kvt_llm_config *c, struct kvt_llm_state *s,
                      const struct kvt_llm_kvcache *kv, int l, int pos)
{
	int hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
	float scale = 1.0f / sqrtf((float)hd);
	float *row = s->kvrow;
	for (int t = 0; t <= pos; t++) {
		const float *k = load_row(kv, l, 0, t, row);
		for (int h = 0; h < c->n_heads; h++)
			s->att[(size_t)h * c->seq_len + t] =
			    dot(s->q + h * hd, k + (h / group) * hd, hd) * scale;
	}
	for (int h = 0; h < c->n_heads; h++)
		softmax(s->att + (size_t)h * c->seq_len, pos + 1);
	memset(s->xb, 0, (size_t)c->dim * sizeof(float));
	for (int t = 0; t <= pos; t++) {
		const float *v = load_row(kv, l, 1, t, row);
		for (int h = 0; h < c->n_heads; h++) {
			float a = s->att[(size_t)h * c->seq_len + t];
			const float *vh = v + (h / group) * hd;
			float *o = s->xb + h * hd;
			for (int i = 0; i < hd; i++)
				o[i] += a * vh[i];
		}
	}
}

void kvt_llm_forward(const struct kvt_llm_model *m, struct kvt_llm_state *s,
                     struct kvt_llm_kvcache *kv, int token, int pos, int want_logits)
{
	const struct kvt_llm_config *c = &m->cfg;
	int d = c->dim, h = c->hidden_dim, kvd = c->kv_dim;
	memcpy(s->x, m->tok_emb + (size_t)token * d, (size_t)d * sizeof(float));
	for (int l = 0; l < c->n_layers; l++) {
		size_t ld = (size_t)l * d;
		rmsnorm(s->xb, s->x, m->rms_att + ld, d);
		matmul(s->q, s->xb, m->wq + ld * d, d, d);
		matmul(s->k, s->xb, m->wk + ld * kvd, d, kvd);
		matmul(s->v, s->xb, m->wv + ld * kvd, d, kvd);
		rope(s->q, d, c->head_dim, pos);
		rope(s->k, kvd, c->head_dim, pos);
		kvt_llm_kv_store(kv, l, pos, s->k, s->v);
		attention(c, s, kv, l, pos);
		matmul(s->xb2, s->xb, m->wo + ld * d, d, d);
		for (int i = 0; i < d; i++)
			s->x[i] += s->xb2[i];
		rmsnorm(s->xb, s->x, m->rms_ffn + ld, d);
		matmul(s->hb, s->xb, m->w1 + ld * h, d, h);
		matmul(s->hb2, s->xb, m->w3 + ld * h, d, h);
		for (int i = 0; i < h; i++) {
			float g = s->hb[i];
			s->hb[i] = g / (1.0f + expf(-g)) * s->hb2[i];
		}
		matmul(s->xb2, s->hb, m->w2 + ld * h, h, d);
		for (int i = 0; i < d; i++)
			s->x[i] += s->xb2[i];
	}
	if (!want_logits)
		return;
	rmsnorm(s->x, s->x, m->rms_final, d);
	matmul(s->logits, s->x, m->wcls, d, c->vocab_size);
}
