/*
 * sample.c -- choosing the next token: greedy, or temperature sampling with a seeded xorshift*
 * generator (the same sequence on every machine for one --seed), plus top-k and log-softmax for
 * reports. Everything runs in index order, so equal logits give equal choices.
 */
#include "minillm.h"

#include <math.h>

void kvt_llm_rng_seed(struct kvt_llm_rng *r, uint64_t seed)
{
	r->state = seed ? seed : 0x853c49e6748fea9bull; /* xorshift must not start at 0 */
}

static uint32_t rng_u32(struct kvt_llm_rng *r)
{
	r->state ^= r->state >> 12;
	r->state ^= r->state << 25;
	r->state ^= r->state >> 27;
	return (uint32_t)((r->state * 0x2545F4914F6CDD1Dull) >> 32);
}

static float rng_f32(struct kvt_llm_rng *r)
{
	return (float)(rng_u32(r) >> 8) / 16777216.0f; /* [0, 1) */
}

static int argmax(const float *x, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

int kvt_llm_sample(const float *logits, int n, float temperature, struct kvt_llm_rng *r)
{
	if (temperature <= 0)
		return argmax(logits, n);
	float max = logits[argmax(logits, n)];
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += exp((double)(logits[i] - max) / temperature);
	double coin = (double)rng_f32(r) * sum, cdf = 0;
	for (int i = 0; i < n; i++) {
		cdf += exp((double)(logits[i] - max) / temperature);
		if (coin < cdf)
			return i;
	}
	return n - 1; /* rounding */
}

void kvt_llm_topk(const float *logits, int n, int k, int *ids, float *vals)
{
	for (int j = 0; j < k; j++) {
		int best = -1;
		for (int i = 0; i < n; i++) {
			int taken = 0;
			for (int q = 0; q < j; q++)
				taken |= ids[q] == i;
			if (!taken && (best < 0 || logits[i] > logits[best]))
				best = i;
		}
		ids[j] = best;
		vals[j] = best >= 0 ? logits[best] : -INFINITY;
	}
}

void kvt_llm_log_softmax(const float *logits, int n, float *out)
{
	float max = logits[argmax(logits, n)];
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += exp((double)(logits[i] - max));
	float lse = max + (float)log(sum);
	for (int i = 0; i < n; i++)
		out[i] = logits[i] - lse;
}
