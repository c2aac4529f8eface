/*
 * extent.h -- a granule extent allocator for the host pool (segregated fits with coalescing).
 *
 * Metadata lives outside the pool (so clients never see it and a pool page is never touched by
 * bookkeeping): a few u32 per granule. Exact bins for small extents and log2 bins above make an
 * allocation O(1) when chunk sizes repeat, which is the common case: a namespace's chunks all
 * have one size. Freed neighbours coalesce at once. Not thread-safe: the daemon's loop owns it.
 */
#ifndef KVT_TIERS_HOST_EXTENT_H
#define KVT_TIERS_HOST_EXTENT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVT_EXTENT_EXACT 64u
#define KVT_EXTENT_BINS  (KVT_EXTENT_EXACT + 33u)

struct kvt_extent {
	uint32_t n_granules;
	uint32_t free_granules;
	uint32_t *len;         /* at an extent's head: its length; else 0 */
	uint32_t *tail;        /* at a free extent's tail: head + 1; else 0 */
	uint32_t *next, *prev; /* free-list links at a free extent's head */
	uint8_t *is_free;      /* at an extent's head */
	uint32_t bin_head[KVT_EXTENT_BINS];
	uint64_t bin_mask[2];
};

int kvt_extent_init(struct kvt_extent *e, uint32_t n_granules);
void kvt_extent_fini(struct kvt_extent *e);
/* @return : the first granule of a fresh extent of n granules, or -ENOSPC. */
int64_t kvt_extent_alloc(struct kvt_extent *e, uint32_t n);
/* Frees the extent that starts at head. @return : its length, or -EINVAL (not an allocation). */
int64_t kvt_extent_free(struct kvt_extent *e, uint32_t head);
/* @return : the largest free extent (granules). O(bins + one list). */
uint32_t kvt_extent_largest(const struct kvt_extent *e);
/* Walks every extent and free list against extent.c's invariants (kvtier check, tests).
 * *allocated (may be NULL) is set to the number of allocated extents. O(granules).
 * @return : 0, or -EUCLEAN when the books disagree. */
int kvt_extent_audit(const struct kvt_extent *e, uint32_t *allocated);
/* Whether an allocated extent of exactly n granules starts at granule head. */
bool kvt_extent_is_allocated(const struct kvt_extent *e, uint32_t head, uint32_t n);
#endif
