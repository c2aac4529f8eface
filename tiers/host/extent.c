/*
 * extent.c -- see extent.h. Invariants (kvt_extent_audit checks them; test_extent, kvtier check):
 *  - every granule belongs to exactly one extent; extents are either free or allocated;
 *  - no two free extents are adjacent (coalescing is eager);
 *  - a free extent of length L at head h sits in bin_of(L), tail[h+L-1] = h+1.
 */
#include "extent.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX

static unsigned bin_of(uint32_t n)
{
	if (n <= KVT_EXTENT_EXACT)
		return n - 1;
	/* 65..127 -> EXACT, 128..255 -> EXACT+1, ... */
	return KVT_EXTENT_EXACT + (unsigned)(31 - __builtin_clz(n)) - 6;
}

static void mask_set(struct kvt_extent *e, unsigned b, int on)
{
	uint64_t bit = 1ull << (b & 63);
	if (on)
		e->bin_mask[b >> 6] |= bit;
	else
		e->bin_mask[b >> 6] &= ~bit;
}

static void push_free(struct kvt_extent *e, uint32_t h, uint32_t n)
{
	unsigned b = bin_of(n);
	e->len[h] = n;
	e->is_free[h] = 1;
	e->tail[h + n - 1] = h + 1;
	e->prev[h] = NIL;
	e->next[h] = e->bin_head[b];
	if (e->bin_head[b] != NIL)
		e->prev[e->bin_head[b]] = h;
	e->bin_head[b] = h;
	mask_set(e, b, 1);
	e->free_granules += n;
}

static void pop_free(struct kvt_extent *e, uint32_t h)
{
	uint32_t n = e->len[h];
	unsigned b = bin_of(n);
	if (e->prev[h] != NIL)
		e->next[e->prev[h]] = e->next[h];
	else
		e->bin_head[b] = e->next[h];
	if (e->next[h] != NIL)
		e->prev[e->next[h]] = e->prev[h];
	if (e->bin_head[b] == NIL)
		mask_set(e, b, 0);
	e->is_free[h] = 0;
	e->tail[h + n - 1] = 0;
	e->free_granules -= n;
}

int kvt_extent_init(struct kvt_extent *e, uint32_t n)
{
	memset(e, 0, sizeof(*e));
	if (!n || n == NIL)
		return -EINVAL;
	e->len = calloc(n, sizeof(uint32_t));
	e->tail = calloc(n, sizeof(uint32_t));
	e->next = calloc(n, sizeof(uint32_t));
	e->prev = calloc(n, sizeof(uint32_t));
	e->is_free = calloc(n, 1);
	if (!e->len || !e->tail || !e->next || !e->prev || !e->is_free) {
		kvt_extent_fini(e);
		return -ENOMEM;
	}
	e->n_granules = n;
	for (unsigned b = 0; b < KVT_EXTENT_BINS; b++)
		e->bin_head[b] = NIL;
	push_free(e, 0, n);
	return 0;
}

void kvt_extent_fini(struct kvt_extent *e)
{
	free(e->len);
	free(e->tail);
	free(e->next);
	free(e->prev);
	free(e->is_free);
	memset(e, 0, sizeof(*e));
}

static int64_t take(struct kvt_extent *e, uint32_t h, uint32_t n)
{
	uint32_t have = e->len[h];
	pop_free(e, h);
	e->len[h] = n;
	if (have > n)
		push_free(e, h + n, have - n);
	return h;
}

int64_t kvt_extent_alloc(struct kvt_extent *e, uint32_t n)
{
	if (!n || n > e->free_granules)
		return -ENOSPC;
	unsigned b = bin_of(n);
	/* the first bin may hold extents shorter than n (log2 bins): first fit within it */
	for (uint32_t h = e->bin_head[b]; h != NIL; h = e->next[h])
		if (e->len[h] >= n)
			return take(e, h, n);
	for (unsigned w = (b + 1) >> 6; w < 2; w++) {
		uint64_t m = e->bin_mask[w];
		if (w == (b + 1) >> 6)
			m &= ~0ull << ((b + 1) & 63);
		if (m)
			return take(e, e->bin_head[w * 64 + (unsigned)__builtin_ctzll(m)], n);
	}
	return -ENOSPC;
}

int64_t kvt_extent_free(struct kvt_extent *e, uint32_t h)
{
	if (h >= e->n_granules || !e->len[h] || e->is_free[h])
		return -EINVAL;
	uint32_t n = e->len[h], freed = n;
	uint32_t nx = h + n;
	if (nx < e->n_granules && e->is_free[nx]) {
		uint32_t m = e->len[nx];
		pop_free(e, nx);
		e->len[nx] = 0;
		n += m;
	}
	if (h > 0 && e->tail[h - 1]) {
		uint32_t ph = e->tail[h - 1] - 1;
		uint32_t m = e->len[ph];
		pop_free(e, ph);
		e->len[h] = 0;
		h = ph;
		n += m;
	}
	push_free(e, h, n);
	return freed;
}

uint32_t kvt_extent_largest(const struct kvt_extent *e)
{
	for (int b = KVT_EXTENT_BINS - 1; b >= 0; b--) {
		if (!(e->bin_mask[b >> 6] >> (b & 63) & 1))
			continue;
		uint32_t best = 0;
		for (uint32_t h = e->bin_head[b]; h != NIL; h = e->next[h])
			if (e->len[h] > best)
				best = e->len[h];
		return best;
	}
	return 0;
}

int kvt_extent_audit(const struct kvt_extent *e, uint32_t *allocated)
{
	uint32_t g = 0, free_total = 0, free_extents = 0, used = 0;
	bool prev_free = false;
	while (g < e->n_granules) {
		uint32_t n = e->len[g];
		if (!n || n > e->n_granules - g)
			return -EUCLEAN;
		if (e->is_free[g]) {
			if (prev_free || e->tail[g + n - 1] != g + 1)
				return -EUCLEAN; /* not coalesced, or its tail lost */
			free_total += n;
			free_extents++;
		} else {
			used++;
		}
		prev_free = e->is_free[g];
		g += n;
	}
	if (free_total != e->free_granules)
		return -EUCLEAN;
	uint32_t listed = 0; /* every free extent on its bin's list, once */
	for (unsigned b = 0; b < KVT_EXTENT_BINS; b++) {
		bool marked = e->bin_mask[b >> 6] >> (b & 63) & 1;
		if (marked != (e->bin_head[b] != NIL))
			return -EUCLEAN;
		for (uint32_t h = e->bin_head[b], prev = NIL; h != NIL; prev = h, h = e->next[h]) {
			if (h >= e->n_granules || !e->is_free[h] || e->prev[h] != prev ||
			    bin_of(e->len[h]) != b || ++listed > free_extents)
				return -EUCLEAN;
		}
	}
	if (listed != free_extents)
		return -EUCLEAN;
	if (allocated)
		*allocated = used;
	return 0;
}

bool kvt_extent_is_allocated(const struct kvt_extent *e, uint32_t head, uint32_t n)
{
	return head < e->n_granules && e->len[head] == n && !e->is_free[head];
}
