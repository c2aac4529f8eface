/*
 * tier.h -- the tier seam: a persistent or remote tier behind a versioned ops table.
 *
 * A tier stores records: the 128-byte chunk header (core/chunk.h) followed by the payload, the
 * same bytes on every tier. The daemon names a record by its identity (tenant, namespace, key,
 * taken from the header) plus an opaque 64-bit location the tier returned from write(); a tier
 * that is addressed by key (rocksdb) may ignore the location.
 *
 * Buffers handed to write() and read() start at a 4096-byte aligned address and their length is
 * a multiple of 4096 (KVT_TIER_ALIGN), so a tier that uses O_DIRECT needs no bounce buffer;
 * rec_len is the record's real length (header + payload), buf_len the padded buffer.
 *
 * Every read verifies the header checksum, the identity and the payload checksum before it
 * returns 0; a mismatch is -EBADMSG and the tier counts a corruption and drops the record.
 * A tier that must make room (its own capacity) evicts through the policy seam and tells the
 * daemon through env->dropped for every record it drops, so the daemon's index stays exact.
 *
 * Concurrency: one tier instance is driven by one thread at a time (the daemon's tier worker),
 * except stats(), which may be called from any thread.
 */
#ifndef KVT_TIERS_TIER_H
#define KVT_TIERS_TIER_H
#include "core/chunk.h"
#include "core/options.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KVT_TIER_OPS_VERSION 1
#define KVT_TIER_ALIGN       4096u

struct kvt_tier;

struct kvt_tier_stats {
	uint64_t capacity_bytes, used_bytes, chunks;
	uint64_t reads, writes, read_bytes, write_bytes;
	uint64_t hits, misses, evictions, corruptions;
	uint64_t err_io, err_again, err_nospc, err_other;
	uint64_t queue_depth; /* I/Os in flight now */
	uint64_t plain_ios; /* I/Os from buffers not registered with the kernel (pinned per I/O) */
	uint64_t pinned_bytes;   /* memory pinned for fixed I/O (nvme: the regions its I/O used) */
	uint64_t pin_failures;   /* regions that could not be pinned (memlock): plain I/O */
	uint64_t told_evictions; /* of evictions: records the engine was done with (kvt_done) */
	uint64_t opened_from_index; /* 1 when the open read the index a clean close saved */
	/* rocksdb: records whose whole value the open, or the start's iterate(), read (a database
	 * without complete metadata: made by an older kvtier, or its metadata damaged); 0 when they
	 * read the saved index or the metadata only */
	uint64_t open_values_read;
	/* nvme: regions the open read from their summaries instead of walking them (an open
	 * without the index: after a crash); 0 elsewhere */
	uint64_t opened_from_summaries;
	/* rocksdb: times RocksDB's repair rebuilt the database from its tables (a damaged or
	 * missing manifest, or a damaged table the tier could not drop: salvage.c); 0 elsewhere */
	uint64_t repairs;
	/* the I/O engine (nvme; 0 elsewhere): I/Os handed to the kernel and completions reaped
	 * (reaped read first, so never more than queued), the slowest I/O since the open, and
	 * completions at which queued - reaped was not what the engine had in flight (0) */
	uint64_t ios_queued, ios_reaped, io_max_us, io_books_wrong;
	/* nvme: reads (promotions) that rode a write stream instead of waiting behind it */
	uint64_t reads_beside_writes;
	bool disabled, full;
};

/* Identity of a record as the daemon knows it. */
struct kvt_tier_id {
	uint32_t tenant;
	kvt_id_t ns, key;
};

struct kvt_tier_env {
	const struct kvt_options *opts; /* borrowed for the life of the tier */
	const char *data_dir;           /* borrowed during open only */
	/* Called for every record the tier drops on its own (eviction, corruption). */
	void (*dropped)(void *arg, const struct kvt_tier_id *id, uint64_t loc);
	void *arg;
	/*
	 * Optional (added after dropped): called for every record the tier rewrote elsewhere on
	 * its own (a log copying a record forward at reclaim, nvme.quota); the record at from is
	 * gone and the same bytes are at to. A tier that needs it refuses the feature without it.
	 */
	void (*moved)(void *arg, const struct kvt_tier_id *id, uint64_t from, uint64_t to);
	/*
	 * Optional (added after moved): called, before dropped(), for every record the tier evicts
	 * to make room, with the record's bytes (header and payload, rec_len of them, read back and
	 * verified as a read is; 4096-aligned and readable to rec_len rounded up to 4096, as
	 * write() wants them; borrowed for the call) -- so that the caller can demote it into the
	 * next tier (tiers.placement = cascade). read: the record was read since it was written
	 * (what second_touch admission asks). Records that are removed, corrupt or unreadable are
	 * not handed over. Only tiers with KVT_TIER_HANDS_OVER call it. Before it reads records
	 * back, the tier asks with rec NULL (id NULL): -ENOENT means nobody takes them (the next
	 * tier is not there), and the tier stops handing over for good; 0 otherwise (and for a
	 * record, whatever became of it). later: the tier can keep the record's old place as it is
	 * (ahead of its head) until the caller says the copy landed; the caller may then answer 1,
	 * "queued", and owes the tier that call (the nvme tier: kvt_tier_nvme_handover_landed).
	 * Without later, the record is gone when the call returns, so the caller writes it first.
	 */
	int (*evicted)(void *arg, const struct kvt_tier_id *id, uint64_t loc, const void *rec,
	               size_t rec_len, bool read, bool later);
};

/*
 * One record of write_batch(). In: buf (header + payload, 4096-aligned, buf_len a multiple of
 * 4096 and >= rec_len rounded up to 4096; borrowed until write_batch returns). Out: res (0 or
 * what write() would return for this record) and loc (valid when res == 0).
 */
struct kvt_tier_wreq {
	const void *buf;
	size_t rec_len, buf_len;
	uint64_t loc; /* out */
	int res;      /* out */
	uint32_t reserved;
};

/*
 * One record of read_batch(). In: id, loc, buf (4096-aligned, borrowed until read_batch
 * returns), buf_len. Out: res, what read() would return for this record (record length or
 * -errno).
 */
struct kvt_tier_rreq {
	struct kvt_tier_id id;
	uint64_t loc;
	void *buf;
	size_t buf_len;
	ssize_t res; /* out */
};

/*
 * Where write_stream() takes its records from. pull(arg) hands over the next record (borrowed
 * until done() is called for it) or NULL when there is none now; done(arg, q) says that q's res
 * and loc are final. Both run on the calling thread, from inside write_stream().
 * Optional (NULL: none), reads that ride the stream: pull_read(arg) hands over a read (as one
 * of read_batch(), borrowed until read_done() is called for it) or NULL; a tier that can asks
 * for them as its writes complete, issues them ahead of the writes it has not issued yet, and
 * calls read_done(arg, q) once q->res is final, while its writes go on. A tier may never ask
 * (the reads then wait for the stream, as without them); one that asks calls read_done for
 * every read it took before write_stream returns.
 */
struct kvt_tier_wsource {
	struct kvt_tier_wreq *(*pull)(void *arg);
	void (*done)(void *arg, struct kvt_tier_wreq *q);
	void *arg;
	struct kvt_tier_rreq *(*pull_read)(void *arg);
	void (*read_done)(void *arg, struct kvt_tier_rreq *q);
};

/* One tenant's account in a tier (tenant_usage); max_bytes UINT64_MAX for none. */
struct kvt_tier_tenant {
	uint32_t tenant; /* the tenant key of its records' headers */
	uint64_t used_bytes, guaranteed_bytes, max_bytes;
};

/* Called by iterate() for each valid record found (recovery); non-zero stops the walk. */
typedef int (*kvt_tier_visit_fn)(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc);

struct kvt_tier_ops {
	uint32_t version; /* KVT_TIER_OPS_VERSION */
	const char *name; /* "nvme", "rocksdb", ... */
	int (*open)(const struct kvt_tier_env *env, struct kvt_tier **out);
	void (*close)(struct kvt_tier *t);
	/* Stores one record; buf holds the header and payload. @return : 0 and *loc, -ENOSPC
	 * (full), -EAGAIN (backpressure), -EIO, -EFBIG (larger than the tier's largest slot),
	 * -EDQUOT (larger than its tenant's maximum in the tier). */
	int (*write)(struct kvt_tier *t, const void *buf, size_t rec_len, size_t buf_len,
	             uint64_t *loc);
	/* Reads and verifies the record of id at loc into buf. @return : record length, -ENOENT,
	 * -EBADMSG (corrupt: dropped and counted), -EIO (unreadable: dropped too, so it is not
	 * found again once the daemon forgets it), -EAGAIN (cannot read now: the tier is disabled
	 * or its database closed, or the device pushed back; the record is kept, and so is the
	 * daemon's copy, which a delete must still reach), -ENOBUFS (buf_len too small). Dropped
	 * records are reported through env->dropped. */
	ssize_t (*read)(struct kvt_tier *t, const struct kvt_tier_id *id, uint64_t loc, void *buf,
	                size_t buf_len);
	/* Forgets the record. @return : 0 or -ENOENT. */
	int (*remove)(struct kvt_tier *t, const struct kvt_tier_id *id, uint64_t loc);
	/* Walks every valid record (after open, for recovery). */
	int (*iterate)(struct kvt_tier *t, kvt_tier_visit_fn visit, void *arg);
	void (*stats)(struct kvt_tier *t, struct kvt_tier_stats *out);
	/* Re-probes a disabled tier ("kvtier tier enable NAME"). NULL when not applicable. */
	int (*enable)(struct kvt_tier *t);
	/*
	 * Optional batched I/O (added after version 1; NULL: not supported, call write()/read()
	 * once per record). Performs reqs[0..n) with the whole batch kept in flight at the tier's
	 * queue depth, blocks until every request is done, and sets every reqs[i].res (and loc).
	 * Requests are independent: one failing does not fail the call. Records are stored in
	 * array order (on a tier that evicts FIFO, later entries outlive earlier ones).
	 * env->dropped may be called from inside write_batch, as from write().
	 * @return : the number of requests whose res is 0 (write) or > 0 (read); never negative.
	 */
	size_t (*write_batch)(struct kvt_tier *t, struct kvt_tier_wreq *reqs, size_t n);
	size_t (*read_batch)(struct kvt_tier *t, struct kvt_tier_rreq *reqs, size_t n);
	/*
	 * Optional (added after write_batch; NULL: use write_batch): writes records pulled from
	 * src, pulling the next while earlier ones are still in flight, so that records which
	 * arrive one at a time keep the device as busy as a whole batch. A NULL from pull() while
	 * records are in flight only means "none yet": it is asked again as room frees. Returns
	 * when pull() gives NULL with nothing in flight; every pulled record has had its done().
	 * Records are stored in pull order, as write_batch.
	 * @return : the number of records written (res 0).
	 */
	size_t (*write_stream)(struct kvt_tier *t, const struct kvt_tier_wsource *src);
	/*
	 * Optional (added after write_stream; NULL: the tier does not evict through the policy
	 * seam, e.g. a log reclaimed in write order). Called with the tier not in use by its
	 * worker, as enable(). policy_get writes the eviction policy's name, then " k=v" for each
	 * of its tunable parameters (kvt_policy_params_str). policy_set switches to policy name
	 * keeping every record, or only sets parameters ("k=v" words; params is modified) when name
	 * is the current one: kvt_policy_set() on the tier's entries. On failure nothing changed
	 * and err holds one line.
	 * @return (policy_set) : 0, -ENOENT (no such policy or parameter), -EINVAL, -ENOMEM.
	 */
	void (*policy_get)(struct kvt_tier *t, char *name, size_t name_len);
	int (*policy_set)(struct kvt_tier *t, const char *name, char *params, char *err,
	                  size_t err_len);
	/*
	 * Optional (added after policy_get; NULL: no per-tenant accounts). Writes up to max
	 * tenants' accounts in the tier, those a quota (TIER.quota) keeps: none without one. Called
	 * with the tier not in use by its worker, as enable(). @return : how many were written.
	 */
	size_t (*tenant_usage)(struct kvt_tier *t, struct kvt_tier_tenant *out, size_t max);
	/* Added after tenant_usage: KVT_TIER_* capabilities. */
	unsigned flags;
	/*
	 * Optional (added after flags; NULL: TIER.quota is read at open only). Sets TIER.quota at
	 * run time: list as tenant.quota ("WHO=G/M,..."), "none" or "" for off. Each tenant's bytes
	 * carry over; one now past its maximum gives them back as it writes. Called with the tier
	 * not in use by its worker, as enable(). On failure nothing changed and err holds one line.
	 * @return : 0, -EINVAL (a malformed list, or one the tier cannot keep), -ENOMEM.
	 */
	int (*quota_set)(struct kvt_tier *t, const char *list, char *err, size_t err_len);
	/*
	 * Optional (added after quota_set; NULL: the hint is ignored). The engine is done with the
	 * record of id at loc (kvt_done): the tier's policy offers it first, as the host tier's
	 * does (kvt_policy_ops.on_done), or, in a log, it is dropped at reclaim without a copy or
	 * a hand-over (nvme). Called on the tier's worker, under its lock.
	 */
	void (*hint_done)(struct kvt_tier *t, const struct kvt_tier_id *id, uint64_t loc);
	/*
	 * Optional (added after hint_done; NULL: open checks them). Checks the tier's options
	 * (its policy and parameters, quota, format choices) without touching its device, so that
	 * a mistyped one stops the start even where tiers.order = auto runs on without a tier that
	 * cannot open (before, a typo dropped the whole tier with a warning).
	 * @return : 0, or -EINVAL with err holding one line that names the option.
	 */
	int (*check)(const struct kvt_options *o, char *err, size_t err_len);
	/*
	 * Optional (added after check; NULL: ignored). The engine read the chunk of the record of
	 * id at loc again, at host, after hint_done: the hint was wrong, and the tier takes it back
	 * as it takes a read of the record (nvme: the mark goes and the record counts as read; a
	 * policy that marked it done sees an access). Called on the tier's worker, under its lock.
	 */
	void (*hint_again)(struct kvt_tier *t, const struct kvt_tier_id *id, uint64_t loc);
};
/* The tier hands every record it evicts for room to env->evicted (a log at reclaim). */
#define KVT_TIER_HANDS_OVER 1u

/* @return : the tier named name, or NULL (not built in). */
const struct kvt_tier_ops *kvt_tier_find(const char *name);
#endif
