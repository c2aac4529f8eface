/*
 * mrc.c -- SHARDS (see mrc.h). A sampled key's stack distance is the number of distinct sampled
 * keys touched since its last access: each key marks its last access time in a Fenwick tree,
 * and the distance is the count of marks after it. Times are renumbered (compacted in order)
 * when the tree fills, so it stays about twice the live key count. Distances, scaled by
 * 1/rate, go into a histogram with 8 bins per octave; cold misses count as infinite distance.
 *
 * SHARDS-adj (Waldspurger et al., FAST '15): every counted reference is counted, sampled or
 * not, and the curve divides by rate x that count rather than by the samples; the difference
 * (expected samples less taken ones) goes to the smallest distance. It is mostly one hot key
 * sampled or not -- the error plain SHARDS makes on skewed traces, 0.03-0.12 on the measured
 * ones at 1 % (docs/policies.md).
 */
#include "mrc.h"
#include "pol_int.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NBINS (8 * 48)

struct kvt_mrc {
	double rate;
	uint64_t threshold;    /* sample when mix(hash) < threshold */
	struct kvt__hset keys; /* hash -> last time */
	uint32_t *fen;         /* Fenwick tree over times 1..tcap */
	uint64_t *time_key;    /* time -> hash (for compaction), 0 = free */
	size_t tcap, now;
	double hist[NBINS];
	uint64_t samples, cold;
	uint64_t counted; /* every counted reference, sampled or not (SHARDS-adj) */
};

static unsigned bin_of(double d)
{
	if (d < 1)
		return 0;
	double b = 8.0 * log2(d) + 1;
	return b >= NBINS - 1 ? NBINS - 1 : (unsigned)b;
}

/* Smallest distance that falls into bin b (b >= 1). */
static double bin_lo(unsigned b)
{
	return exp2((double)(b - 1) / 8.0);
}

static void fen_add(struct kvt_mrc *m, size_t i, int v)
{
	for (; i <= m->tcap; i += i & -i)
		m->fen[i] += (uint32_t)v;
}

static uint64_t fen_sum(const struct kvt_mrc *m, size_t i)
{
	uint64_t s = 0;
	for (; i > 0; i -= i & -i)
		s += m->fen[i];
	return s;
}

static int alloc_tree(struct kvt_mrc *m, size_t tcap)
{
	uint32_t *fen = calloc(tcap + 1, sizeof(*fen));
	uint64_t *tk = calloc(tcap + 1, sizeof(*tk));
	if (!fen || !tk) {
		free(fen);
		free(tk);
		return -ENOMEM;
	}
	free(m->fen);
	free(m->time_key);
	m->fen = fen;
	m->time_key = tk;
	m->tcap = tcap;
	return 0;
}

/* Renumbers live marks 1..n in time order, in a tree twice that size. */
static int compact(struct kvt_mrc *m)
{
	size_t live = 0;
	for (size_t t = 1; t <= m->now; t++)
		live += m->time_key[t] != 0;
	uint64_t *old = m->time_key;
	size_t old_now = m->now;
	m->time_key = NULL;
	uint32_t *oldf = m->fen;
	m->fen = NULL;
	size_t cap = 1024;
	while (cap < 2 * live + 2)
		cap *= 2;
	if (alloc_tree(m, cap)) {
		m->time_key = old;
		m->fen = oldf;
		return -ENOMEM;
	}
	free(oldf);
	m->now = 0;
	for (size_t t = 1; t <= old_now; t++)
		if (old[t]) {
			m->now++;
			m->time_key[m->now] = old[t];
			kvt__hset_put(&m->keys, old[t], (uint32_t)m->now);
			fen_add(m, m->now, 1);
		}
	free(old);
	return 0;
}

int kvt_mrc_create(double rate, struct kvt_mrc **out)
{
	if (!(rate > 0 && rate <= 1))
		return -EINVAL;
	struct kvt_mrc *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->rate = rate;
	m->threshold = rate >= 1 ? UINT64_MAX : (uint64_t)(rate * 18446744073709551615.0);
	if (kvt__hset_init(&m->keys, 1024) || alloc_tree(m, 1024)) {
		kvt_mrc_destroy(m);
		return -ENOMEM;
	}
	*out = m;
	return 0;
}

void kvt_mrc_destroy(struct kvt_mrc *m)
{
	if (!m)
		return;
	kvt__hset_free(&m->keys);
	free(m->fen);
	free(m->time_key);
	free(m);
}

/* counted: a hit or a miss of the curve; otherwise the key only moves to the top. */
static void record(struct kvt_mrc *m, uint64_t key_hash, bool counted)
{
	uint64_t h = kvt__mix64(key_hash ^ 0x5851f42d4c957f2dULL);
	m->counted += counted;
	if (h > m->threshold)
		return;
	uint64_t k = key_hash | 1; /* never 0: time_key uses 0 for free */
	if (m->now == m->tcap && compact(m))
		return;
	m->samples += counted;
	uint32_t t = kvt__hset_get(&m->keys, k);
	if (t != KVT__NIL) {
		uint64_t d = fen_sum(m, m->now) - fen_sum(m, t); /* distinct keys since */
		if (counted)
			m->hist[bin_of((double)(d + 1) / m->rate)] += 1;
		fen_add(m, t, -1);
		m->time_key[t] = 0;
	} else {
		m->cold += counted;
	}
	m->now++;
	m->time_key[m->now] = k;
	fen_add(m, m->now, 1);
	kvt__hset_put(&m->keys, k, (uint32_t)m->now);
}

void kvt_mrc_access(struct kvt_mrc *m, uint64_t key_hash)
{
	record(m, key_hash, true);
}

void kvt_mrc_touch(struct kvt_mrc *m, uint64_t key_hash)
{
	record(m, key_hash, false);
}

double kvt_mrc_hit_ratio(const struct kvt_mrc *m, uint64_t size)
{
	if (!m->samples)
		return 0;
	double expected = m->rate * (double)m->counted;
	double hits = expected - (double)m->samples; /* SHARDS-adj, at the smallest distance */
	for (unsigned b = 0; b < NBINS; b++) {
		double lo = b ? bin_lo(b) : 0, hi = bin_lo(b + 1);
		if (hi <= (double)size)
			hits += m->hist[b];
		else if (lo < (double)size) /* interpolate inside the bin */
			hits += m->hist[b] * ((double)size - lo) / (hi - lo);
	}
	double r = hits / expected;
	return r < 0 ? 0 : r > 1 ? 1 : r;
}

void kvt_mrc_curve(const struct kvt_mrc *m, uint64_t size, double out[5])
{
	static const double f[5] = {0.5, 1, 2, 4, 8};
	for (int i = 0; i < 5; i++)
		out[i] = kvt_mrc_hit_ratio(m, (uint64_t)((double)size * f[i]));
}

uint64_t kvt_mrc_samples(const struct kvt_mrc *m)
{
	return m->samples;
}
