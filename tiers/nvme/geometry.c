/*
 * geometry.c -- the nvme log's layout as numbers (geometry.h). The tier opens (nvme.c) and
 * places records (summary.c, kvt__nvme_region_fits) with these functions, and kvtier sim sizes
 * its model of the log with them, so the two cannot drift apart.
 */
#include "geometry.h"

#include <errno.h>

/* 64 MiB from 1 GiB up; below, the largest power of two from 1 MiB that leaves 8 regions. */
static uint64_t pick_region_bytes(uint64_t space)
{
	if (space >= (1ull << 30))
		return 64ull << 20;
	uint64_t r = 1ull << 20;
	while (r * 2 <= space / 8)
		r *= 2;
	return r;
}

int kvt_nvme_geometry(uint64_t file_bytes, uint64_t region_bytes, struct kvt_nvme_geometry *g)
{
	if (file_bytes < KVT_NVME_DATA_OFF + 2 * (1ull << 20))
		return -ENOSPC;
	uint64_t space = file_bytes - KVT_NVME_DATA_OFF;
	g->region_bytes = region_bytes ? region_bytes : pick_region_bytes(space);
	if (g->region_bytes < 2 * KVT_NVME_BLOCK || g->region_bytes % KVT_NVME_BLOCK)
		return -EINVAL;
	g->n_regions = space / g->region_bytes;
	g->max_rec = g->region_bytes - KVT_NVME_BLOCK;
	if (g->n_regions < 2 || g->max_rec > UINT32_MAX)
		return -EINVAL;
	return 0;
}

uint32_t kvt_nvme_sum_entry_blocks(uint32_t n)
{
	return (n + KVT_NVME_SUM_PER_BLK - 1) / KVT_NVME_SUM_PER_BLK;
}

uint32_t kvt_nvme_sum_map_blocks(uint64_t region_bytes)
{
	uint64_t bits = region_bytes / KVT_NVME_BLOCK;
	return (uint32_t)((bits + KVT_NVME_SUM_MAP_BITS - 1) / KVT_NVME_SUM_MAP_BITS);
}

uint64_t kvt_nvme_sum_bytes(uint64_t region_bytes, uint32_t n)
{
	return ((uint64_t)kvt_nvme_sum_entry_blocks(n) + kvt_nvme_sum_map_blocks(region_bytes) +
	        1) *
	       KVT_NVME_BLOCK;
}

bool kvt_nvme_fits(uint64_t region_bytes, uint64_t wp, uint32_t n_placed, uint64_t need)
{
	if (wp + need > region_bytes)
		return false;
	if (wp <= KVT_NVME_BLOCK)
		return true;
	return wp + need + kvt_nvme_sum_bytes(region_bytes, n_placed + 1) <= region_bytes;
}

uint64_t kvt_nvme_region_records(uint64_t region_bytes, uint64_t rec_len)
{
	uint64_t need = (rec_len + KVT_NVME_BLOCK - 1) / KVT_NVME_BLOCK * KVT_NVME_BLOCK;
	uint64_t wp = KVT_NVME_BLOCK, n = 0;
	if (!need)
		return 0;
	while (n < UINT32_MAX && kvt_nvme_fits(region_bytes, wp, (uint32_t)n, need)) {
		wp += need;
		n++;
	}
	return n;
}
