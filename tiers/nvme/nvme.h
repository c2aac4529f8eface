/*
 * nvme.h -- what the daemon may call on the nvme tier beyond tiers/tier.h.
 *
 * How to drive the tier (kvt_tier_nvme, found as kvt_tier_find("nvme")):
 * - One thread at a time calls open/write/read/remove/iterate/enable/close (a tier worker);
 *   stats() may be called from any thread at any time.
 * - write() and read() block until their I/O is done (one record is one request of up to
 *   nvme.queue_depth I/Os in flight); write_batch() and read_batch() (tier.h) keep a whole
 *   batch in flight at that depth and are what a demotion/promotion worker should call; remove()
 * blocks for one 4 KiB write (a tombstone); open() blocks for the recovery: after a clean close
 * it reads the index that close saved (index.c), else it walks the log (header reads, depth
 * regions at a time); then the daemon should call iterate() once to rebuild its index from the
 * recovered records.
 * - Buffers: 4096-aligned, padded to 4096 (tier.h). Registering the memory they come from
 *   (the host pool) once after open makes the I/O use io_uring fixed buffers.
 * - Errors: -EFBIG (record larger than a region: keep it in the upper tier), -ENOSPC (device
 *   full: stats.full; retry later), -EAGAIN (backpressure), -EIO (device error; the record was
 *   dropped on a read; stats.disabled after repeated errors: call enable() to re-probe).
 * - The tier evicts on its own (FIFO by region) and reports each drop through env->dropped,
 *   from inside write(): the callback must not call back into the tier.
 */
#ifndef KVT_TIERS_NVME_H
#define KVT_TIERS_NVME_H
#include "tiers/tier.h"

/* The ops table (also reachable as kvt_tier_find("nvme")). */
extern const struct kvt_tier_ops kvt_tier_nvme;

/*
 * kvt_tier_nvme_register() declares [base, base+len) (e.g. a tenant's host pool) for fixed-buffer
 * I/O. It pins nothing: a thread of the tier pins each KVT_NVME_PIN_REGION of it (from base)
 * once an I/O has needed it (that I/O is plain), and pieces of I/O never cross a region's end
 * (pin.c). Pinned pages count against RLIMIT_MEMLOCK unless the daemon has CAP_IPC_LOCK; a region
 * that cannot be pinned stays plain I/O (the first failure logs one warning). At most 64 areas,
 * 16,384 regions pinned at once. A pinned region stays pinned until the tier closes, so its pages
 * must not be replaced meanwhile (the daemon's pools never are: their seals forbid punching).
 * @return : 0, -EOPNOTSUPP (pio backend, or a kernel without sparse buffer tables), -E2BIG.
 */
#define KVT_NVME_PIN_REGION (32u << 20)
int kvt_tier_nvme_register(struct kvt_tier *t, void *base, size_t len);

/*
 * Evicting ahead (env->evicted set: the daemon cascades): kvt_tier_nvme_ahead_due() says whether
 * the region the head takes back next holds records while the head region is half written (1),
 * or three quarters (2: soon a write will reclaim it whole);
 * kvt_tier_nvme_evict_ahead() then hands over (env->evicted) and drops (env->dropped) up to
 * max_bytes of them, oldest first, so that the write that reaches the region does not read it
 * back whole while promotions wait. Called as write() is (the tier's thread, one at a time).
 * @return : 0 (not due), 1 or 2; the bytes handed over and dropped (0: nothing due).
 */
int kvt_tier_nvme_ahead_due(struct kvt_tier *t);
size_t kvt_tier_nvme_evict_ahead(struct kvt_tier *t, size_t max_bytes);
/*
 * A record evict_ahead handed over, which the caller queued (env->evicted answered 1), landed in
 * the next tier or was given up: loc is the loc evicted() was given. Until every such record
 * of a region has landed, the head does not take the region back (a write asks again later,
 * -EAGAIN), so that a crash finds each record in one tier or the other. Any thread.
 */
void kvt_tier_nvme_handover_landed(struct kvt_tier *t, uint64_t loc);

/* @return : the I/O backend in use: "uring" or "pio" (stats). */
const char *kvt_tier_nvme_backend(struct kvt_tier *t);
#endif
