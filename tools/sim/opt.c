/*
 * opt.c -- Belady's MIN, the bound every policy is compared with. With the next use of every
 * access known, a miss in a full cache evicts the resident block whose next use is farthest,
 * or bypasses the new block when its own next use is farther still (this is the optimum for
 * the block hit ratio, admission included). The fast version keeps a max-heap of (next use,
 * block) with lazy deletion: a hit pushes a fresh entry and the stale one is skipped when it
 * surfaces. The naive version scans the resident set, to check the fast one.
 */
#include "sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NEVER UINT64_MAX

/* next[i] = index of the next access of blk[i], NEVER if none. */
static uint64_t *next_uses(const struct kvt_trace *t)
{
	uint64_t *next = malloc((t->n_acc + 1) * sizeof(*next));
	uint64_t *last = malloc((t->n_blocks + 1) * sizeof(*last));
	if (!next || !last) {
		free(next);
		free(last);
		return NULL;
	}
	for (size_t b = 0; b < t->n_blocks; b++)
		last[b] = NEVER;
	for (size_t i = t->n_acc; i-- > 0;) {
		next[i] = last[t->blk[i]];
		last[t->blk[i]] = i;
	}
	free(last);
	return next;
}

struct ent {
	uint64_t next;
	uint32_t blk;
};

static void heap_push(struct ent *h, size_t *n, struct ent e)
{
	size_t i = (*n)++;
	while (i > 0 && h[(i - 1) / 2].next < e.next) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = e;
}

static void heap_pop(struct ent *h, size_t *n)
{
	struct ent e = h[--(*n)];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && h[c + 1].next > h[c].next)
			c++;
		if (h[c].next <= e.next)
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = e;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Counts hits and prefix hits from a per-access hit flag, after the warm-up. */
static void tally(const struct kvt_trace *t, const uint8_t *hit, struct kvt_sim_result *r)
{
	r->accesses = t->n_acc - t->req_off[t->warmup_req];
	for (size_t q = t->warmup_req; q < t->n_req; q++) {
		bool lead = true;
		for (uint64_t i = t->req_off[q]; i < t->req_off[q + 1]; i++) {
			r->hits += hit[i];
			lead = lead && hit[i];
			r->prefix_hits += lead;
		}
	}
}

int kvt_sim_opt(const struct kvt_trace *t, size_t capacity, struct kvt_sim_result *r)
{
	if (t->warmup_req && t->warmup_req >= t->n_req)
		return -EINVAL;
	int rc = -ENOMEM;
	double t0 = now_s();
	memset(r, 0, sizeof(*r));
	uint64_t *next = next_uses(t);
	uint64_t *cur = malloc((t->n_blocks + 1) * sizeof(*cur)); /* resident: its next use */
	uint8_t *hit = calloc(t->n_acc + 1, 1);
	struct ent *h = malloc((t->n_acc + 1) * sizeof(*h));
	if (!next || !cur || !hit || !h)
		goto out;
	for (size_t b = 0; b < t->n_blocks; b++)
		cur[b] = 0; /* 0 = not resident; stored values are next + 1 */
	size_t n = 0, used = 0;
	for (size_t i = 0; i < t->n_acc; i++) {
		uint32_t b = t->blk[i];
		uint64_t nx = next[i] == NEVER ? NEVER : next[i] + 1;
		if (cur[b]) {
			hit[i] = 1;
		} else if (capacity == 0) {
			continue;
		} else if (used == capacity) {
			while (n && cur[h[0].blk] != h[0].next)
				heap_pop(h, &n); /* stale */
			if (h[0].next <= nx)
				continue; /* bypass: the newcomer is the farthest */
			cur[h[0].blk] = 0;
			heap_pop(h, &n);
		} else {
			used++;
		}
		cur[b] = nx;
		heap_push(h, &n, (struct ent){nx, b});
	}
	tally(t, hit, r);
	r->elapsed_s = now_s() - t0;
	rc = 0;
out:
	free(h);
	free(hit);
	free(cur);
	free(next);
	return rc;
}

int kvt_sim_opt_naive(const struct kvt_trace *t, size_t capacity, struct kvt_sim_result *r)
{
	if (t->warmup_req && t->warmup_req >= t->n_req)
		return -EINVAL;
	int rc = -ENOMEM;
	memset(r, 0, sizeof(*r));
	uint64_t *next = next_uses(t);
	uint32_t *res = malloc((capacity + 1) * sizeof(*res));
	uint64_t *res_next = malloc((capacity + 1) * sizeof(*res_next));
	uint8_t *hit = calloc(t->n_acc + 1, 1);
	if (!next || !res || !res_next || !hit)
		goto out;
	size_t used = 0;
	for (size_t i = 0; i < t->n_acc; i++) {
		uint32_t b = t->blk[i];
		size_t k, far = 0;
		for (k = 0; k < used && res[k] != b; k++)
			if (res_next[k] > res_next[far])
				far = k;
		if (k < used) {
			hit[i] = 1;
			res_next[k] = next[i];
			continue;
		}
		if (used < capacity) {
			res[used] = b;
			res_next[used++] = next[i];
		} else if (capacity && res_next[far] > next[i]) {
			res[far] = b;
			res_next[far] = next[i];
		}
	}
	tally(t, hit, r);
	rc = 0;
out:
	free(hit);
	free(res_next);
	free(res);
	free(next);
	return rc;
}
