/*
 * mrc.c -- SHARDS (see mrc.h). A sampled key's stack distance is the number of distinct sampled
 * keys touched since its last access: each key marks its last access time in a Fenwick tree,
 * and the distance is the count of marks after it. Times are renumbered (compacted in order)
 * when the tree fills, so it stays about twice the live key count. Distances, scaled by
 * 1/rate, go into a histogram with 8 bins per octave; cold misses count as infinite distance.
 *
 * Fixed-size SHARDS (the same paper): at most max_keys keys are tracked. A new key past that
 * evicts the tracked key with the largest sampling hash (a max-heap) and the threshold drops
 * below it: the rate adapts to the key space, exact while it is small, and memory is bounded
 * (at most ~256 bytes per tracked key) however many keys a long-running daemon sees. Counts made
 * at a higher rate are scaled down to the new one (one factor, not every bin).
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

struct heap_ent {
	uint64_t h, key; /* the key's sampling hash, and the key */
};

struct kvt_mrc {
	double rate;           /* sampling rate now: threshold / 2^64 */
	uint64_t threshold;    /* sample when mix(hash) <= threshold */
	size_t max_keys;       /* fixed-size SHARDS: at most this many keys tracked */
	struct kvt__hset keys; /* key -> last time */
	struct heap_ent *heap; /* the tracked keys, largest hash on top */
	size_t n_heap, cap_heap;
	uint32_t *fen;      /* Fenwick tree over times 1..tcap */
	uint64_t *time_key; /* time -> key (for compaction), 0 = free */
	size_t tcap, now;
	/* hist, samples and cold in units of 1 / scale: a lower rate scales them all at once */
	double hist[NBINS], samples, cold, scale;
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
	m->threshold = kvt__sample_threshold(rate);
	m->max_keys = KVT_MRC_MAX_KEYS;
	m->scale = 1;
	if (kvt__hset_init(&m->keys, 1024) || alloc_tree(m, 1024)) {
		kvt_mrc_destroy(m);
		return -ENOMEM;
	}
	*out = m;
	return 0;
}

void kvt_mrc_max_keys(struct kvt_mrc *m, size_t n)
{
	m->max_keys = n < 64 ? 64 : n;
}

void kvt_mrc_destroy(struct kvt_mrc *m)
{
	if (!m)
		return;
	kvt__hset_free(&m->keys);
	free(m->heap);
	free(m->fen);
	free(m->time_key);
	free(m);
}

static int heap_push(struct kvt_mrc *m, uint64_t h, uint64_t key)
{
	if (m->n_heap == m->cap_heap) {
		size_t nc = m->cap_heap ? m->cap_heap * 2 : 1024;
		struct heap_ent *v = realloc(m->heap, nc * sizeof(*v));
		if (!v)
			return -ENOMEM;
		m->heap = v;
		m->cap_heap = nc;
	}
	size_t i = m->n_heap++;
	for (; i && m->heap[(i - 1) / 2].h < h; i = (i - 1) / 2)
		m->heap[i] = m->heap[(i - 1) / 2];
	m->heap[i] = (struct heap_ent){h, key};
	return 0;
}

static struct heap_ent heap_pop(struct kvt_mrc *m)
{
	struct heap_ent top = m->heap[0], last = m->heap[--m->n_heap];
	size_t i = 0, n = m->n_heap;
	for (size_t c; (c = 2 * i + 1) < n; i = c) {
		c += c + 1 < n && m->heap[c + 1].h > m->heap[c].h;
		if (m->heap[c].h <= last.h)
			break;
		m->heap[i] = m->heap[c];
	}
	if (n)
		m->heap[i] = last;
	return top;
}

/* Fixed-size SHARDS: one key too many is tracked. The one with the largest hash goes, and the
 * threshold drops below it, so the sample is what a lower rate would have taken; what was
 * counted scales by the ratio of the rates. just: the key recorded now (counted or not),
 * whose own cold miss is undone if it is the one to go. */
static void shrink(struct kvt_mrc *m, uint64_t just, bool counted)
{
	struct heap_ent top = heap_pop(m);
	uint32_t t = kvt__hset_get(&m->keys, top.key);
	if (t != KVT__NIL) {
		fen_add(m, t, -1);
		m->time_key[t] = 0;
		kvt__hset_del(&m->keys, top.key);
	}
	if (top.key == just && counted) {
		m->samples -= 1 / m->scale;
		m->cold -= 1 / m->scale;
	}
	m->threshold = top.h ? top.h - 1 : 0;
	double rate = (double)m->threshold / 18446744073709551616.0;
	m->scale *= rate / m->rate;
	m->rate = rate;
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
	double one = counted / m->scale;
	uint32_t t = kvt__hset_get(&m->keys, k);
	if (t != KVT__NIL) {
		uint64_t d = fen_sum(m, m->now) - fen_sum(m, t); /* distinct keys since */
		m->hist[bin_of((double)(d + 1) / m->rate)] += one;
		fen_add(m, t, -1);
		m->time_key[t] = 0;
	} else if (heap_push(m, h, k)) {
		return; /* no memory: the key stays untracked */
	} else {
		m->cold += one;
	}
	m->samples += one;
	m->now++;
	m->time_key[m->now] = k;
	fen_add(m, m->now, 1);
	kvt__hset_put(&m->keys, k, (uint32_t)m->now);
	if (m->n_heap > m->max_keys)
		shrink(m, k, counted);
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
	if (!(m->samples > 0))
		return 0;
	double expected = m->rate * (double)m->counted;
	/* SHARDS-adj: the shortfall of samples counts at the smallest distance */
	double hits = expected - m->samples * m->scale;
	for (unsigned b = 0; b < NBINS; b++) {
		double lo = b ? bin_lo(b) : 0, hi = bin_lo(b + 1), n = m->hist[b] * m->scale;
		if (hi <= (double)size)
			hits += n;
		else if (lo < (double)size) /* interpolate inside the bin */
			hits += n * ((double)size - lo) / (hi - lo);
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
	return (uint64_t)(m->samples * m->scale + 0.5);
}

double kvt_mrc_rate(const struct kvt_mrc *m)
{
	return m->rate;
}

size_t kvt_mrc_bytes(const struct kvt_mrc *m)
{
	return sizeof(*m) + m->keys.cap * sizeof(*m->keys.slots) + m->cap_heap * sizeof(*m->heap) +
	       (m->tcap + 1) * (sizeof(*m->fen) + sizeof(*m->time_key));
}
