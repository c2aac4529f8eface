/*
 * geometry.h -- the nvme log's layout as numbers: how a file is cut into regions, how much of a
 * region a summary takes, and so how many records of a size one region holds. No I/O and no
 * state, so that kvtier sim can model the log's region-at-a-time reclaim with the numbers the
 * tier itself opens with (tools/sim: a tier named nvme), not a copy of them.
 */
#ifndef KVT_TIERS_NVME_GEOMETRY_H
#define KVT_TIERS_NVME_GEOMETRY_H
#include <stdbool.h>
#include <stdint.h>

#define KVT_NVME_BLOCK        4096u        /* superblock, region header, terminator */
#define KVT_NVME_DATA_OFF     (1ull << 20) /* the superblocks' area before the first region */
#define KVT_NVME_SUM_HEAD     32u          /* a summary block: magic, instance, seq, index, count */
#define KVT_NVME_SUM_ENTRY    (8u + 128u)  /* off_blocks, rec_len, the chunk header */
#define KVT_NVME_SUM_PER_BLK  ((KVT_NVME_BLOCK - 8u - KVT_NVME_SUM_HEAD) / KVT_NVME_SUM_ENTRY)
#define KVT_NVME_SUM_MAP_BITS ((uint64_t)(KVT_NVME_BLOCK - 8u - KVT_NVME_SUM_HEAD) * 8u)

struct kvt_nvme_geometry {
	uint64_t region_bytes; /* each region's size */
	uint64_t n_regions;    /* regions in the ring */
	uint64_t max_rec;      /* the largest record: a region less its header block */
};

/*
 * The log's regions in a file of file_bytes (rounded down to whole 4 KiB blocks by the caller),
 * of region_bytes each, or, with 0, the tier's own choice: 64 MiB from 1 GiB of space up, below
 * that the largest power of two from 1 MiB up that leaves at least 8 regions.
 * @return : 0, -ENOSPC (under two 1 MiB regions of space), -EINVAL (a region_bytes that is not
 * whole blocks, leaves under two regions, or a record longer than 4 GiB).
 */
int kvt_nvme_geometry(uint64_t file_bytes, uint64_t region_bytes, struct kvt_nvme_geometry *g);

/* Summary blocks (summary.c): entry blocks for n records, live-map blocks for a region, and the
 * bytes of a region's summary of n records (entries, map and trailer). */
uint32_t kvt_nvme_sum_entry_blocks(uint32_t n);
uint32_t kvt_nvme_sum_map_blocks(uint64_t region_bytes);
uint64_t kvt_nvme_sum_bytes(uint64_t region_bytes, uint32_t n);

/* Whether a record of need padded bytes fits at write pointer wp of a region that has no
 * summary yet and holds n_placed records, leaving room for the summary of them all and it (a
 * region's first record needs no room beyond its own). */
bool kvt_nvme_fits(uint64_t region_bytes, uint64_t wp, uint32_t n_placed, uint64_t need);

/* How many records of rec_len bytes (header and payload; 4 KiB-padded on disk) one region of
 * region_bytes holds, its summary's room kept; 0 when not one. */
uint64_t kvt_nvme_region_records(uint64_t region_bytes, uint64_t rec_len);
#endif
