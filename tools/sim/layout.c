/*
 * layout.c -- a tier given in bytes holds as many blocks as kvtierd's tier of that name would
 * hold chunks of a block each: host a record of the chunk and its 128-byte header in whole
 * 4 KiB granules (ipc/daemon/store.c, kvd_rec_bytes), rocksdb the header and the chunk
 * (tiers/rocksdb/tier.c counts logical bytes), and nvme its log (tiers/nvme/geometry.h, the
 * numbers the tier opens with): the log's whole regions, fewer records than its bytes would
 * suggest (each region's header, tail and summary), reclaimed a region at a time with fifo or
 * clock, the log's two policies, and quotas as nvme.quota (kvt_sim_tier's region_blocks and
 * log bytes; nvmelog.c). Another policy named for nvme runs a record at a time in the same
 * room. Any other name holds bytes / block_bytes.
 */
#include "sim.h"

#include "core/chunk.h"
#include "tiers/nvme/geometry.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

uint64_t kvt_sim_rec_bytes(const char *name, uint64_t block_bytes)
{
	uint64_t rec = KVT_CHUNK_HDR_BYTES + block_bytes;   /* a record: header + payload */
	if (!strcmp(name, "host") || !strcmp(name, "nvme")) /* in 4 KiB granules, blocks */
		return (rec + KVT_NVME_BLOCK - 1) / KVT_NVME_BLOCK * KVT_NVME_BLOCK;
	return strcmp(name, "rocksdb") ? block_bytes : rec;
}

int kvt_sim_nvme_log(struct kvt_sim_tier *t, uint64_t block_bytes, uint64_t bytes)
{
	uint64_t pad = kvt_sim_rec_bytes("nvme", block_bytes);
	struct kvt_nvme_geometry g;
	if (!bytes)
		bytes = t->capacity_blocks * pad;
	if (kvt_nvme_geometry(bytes / KVT_NVME_BLOCK * KVT_NVME_BLOCK, 0, &g))
		return -ENOSPC;
	uint64_t per = kvt_nvme_region_records(g.region_bytes, pad);
	if (!per || g.n_regions * per > UINT32_MAX)
		return -ENOSPC;
	t->capacity_blocks = (size_t)(g.n_regions * per);
	bool log = !strcmp(t->policy, "fifo") || !strcmp(t->policy, "clock");
	t->region_blocks = log ? (size_t)per : 0;
	t->log_rec_bytes = log ? pad : 0;
	t->log_region_bytes = log ? g.region_bytes : 0;
	return 0;
}

size_t kvt_sim_tier_blocks(const char *name, uint64_t block_bytes, uint64_t bytes)
{
	return (size_t)(bytes / kvt_sim_rec_bytes(name, block_bytes));
}
