/*
 * nvme_int.h -- internals of the nvme tier, shared by its files and its tests.
 *
 * Layering (top to bottom):
 *   nvme.c     the tier ops table: write/read/remove/iterate/stats/enable over the log
 *   log.c      on-disk layout: superblocks, regions, records, recovery scan, the ring's head
 *   reclaim.c  taking the oldest region back: drops, or copies forward what nvme.quota keeps
 *   quota.c    nvme.quota: per-tenant bytes, who is kept at reclaim, trimming a tenant's oldest
 *   engine.c   one synchronous request = many in-flight I/Os: splitting, batching, short-I/O
 *              resubmission, -EAGAIN retries, error classification, alignment checks
 *   io_*.c     backends behind struct kvt__nvme_io_ops: io_uring, pread/pwrite thread pool,
 *              and a fault injector that wraps either (tests, RELIABILITY.md F6/F8/D6)
 *
 * Concurrency: one thread drives a tier at a time (tier.h); the counters in struct kvt_nvme's
 * stats are written with relaxed atomics so that stats() may read them from any thread.
 */
#ifndef KVT_TIERS_NVME_INT_H
#define KVT_TIERS_NVME_INT_H
#include "tiers/tier.h"
#include "tiers/nvme/geometry.h"
#include "core/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

struct kvt_quota;

#define KVT_NVME_FORMAT        1u
#define KVT_NVME_PIN_SLOTS     16384u /* io_uring's most registered buffers per ring */
#define KVT_NVME_MAX_AREAS     64u    /* areas declared with kvt__nvme_pins_add */
#define KVT_NVME_AGAIN_RETRIES 16u    /* -EAGAIN on one I/O: resubmits before giving up */
#define KVT_NVME_SHORT_RETRIES 64u    /* zero-progress short I/Os before -EIO */
#define KVT_NVME_DISABLE_AFTER 16u    /* consecutive failed requests that disable the tier */
#define KVT_NVME_FENCE_TRIES   3u     /* attempts at a block that hides a record (log.c fence) */

/* ---- I/O backends ---------------------------------------------------------------------- */

enum kvt__nvme_op { KVT_NVME_READ, KVT_NVME_WRITE };

/* One I/O as a backend sees it. buf_index >= 0: inside registered buffer buf_index. */
struct kvt__nvme_io {
	uint64_t off;
	void *buf;
	uint32_t len;
	uint8_t op;
	int16_t buf_index;
	uint32_t cookie;
};

struct kvt__nvme_cqe {
	uint32_t cookie;
	int32_t res; /* bytes done, or -errno */
};

struct kvt__nvme_io_cfg {
	int fd;
	unsigned depth;                       /* most I/Os in flight */
	const struct kvt__nvme_io_ops *inner; /* for wrapping backends (fault) */
	void *arg;                            /* backend-specific (fault: struct kvt__nvme_fault) */
};

#define KVT_NVME_IO_OPS_VERSION 2
/* A backend. Driven by one thread at a time, like the tier, but for buffer_set, which the
 * pinning thread calls meanwhile (io_uring serialises it with submissions; pin.c). */
struct kvt__nvme_io_ops {
	uint32_t version;
	const char *name;
	int (*open)(const struct kvt__nvme_io_cfg *cfg, void **ctx);
	void (*close)(void *ctx);
	/* Optional (both or neither): a table of n empty buffer slots for fixed I/O, and setting
	 * one slot to iov (pins its pages). @return : 0, -ENOMEM/-EPERM (memlock), -errno. */
	int (*buffer_table)(void *ctx, unsigned n);
	int (*buffer_set)(void *ctx, unsigned slot, const struct iovec *iov);
	/* Queues one I/O (not yet submitted). @return : 0 or -EBUSY (queue full). */
	int (*queue)(void *ctx, const struct kvt__nvme_io *io);
	/* Submits everything queued. @return : 0, -EAGAIN/-EBUSY (backpressure: reap, retry). */
	int (*submit)(void *ctx);
	/* Waits for at least min completions (0: poll). @return : number written to out, or -errno.
	 */
	int (*reap)(void *ctx, struct kvt__nvme_cqe *out, unsigned max, unsigned min);
	/* Optional (added after reap; NULL: the engine waits in reap): waits at most wait_ns for
	 * one completion, then takes what else is ready. @return : the number written to out (0:
	 * none came in time), or -errno. */
	int (*reap_timed)(void *ctx, struct kvt__nvme_cqe *out, unsigned max, uint64_t wait_ns);
};

extern const struct kvt__nvme_io_ops kvt__nvme_io_uring; /* absent without liburing */
extern const struct kvt__nvme_io_ops kvt__nvme_io_pio;
extern const struct kvt__nvme_io_ops kvt__nvme_io_fault;
bool kvt__nvme_uring_available(void);

/* The fault injector's knobs and its own count of what it injected (tests compare). */
struct kvt__nvme_fault {
	uint32_t ppm_eio, ppm_again, ppm_nospc, ppm_short, ppm_busy; /* per million I/Os */
	uint32_t read_delay_us; /* a slow device: a reap that returns reads takes this long */
	/* ... and a write completes this long after it was queued, writes in flight together
	 * (the device's latency, not the thread's: its completion is held back until then, while
	 * reads in flight beside it complete as they land) */
	uint32_t write_delay_us;
	/* power lost in the middle of a write: the tear_at-th write queued while armed lands as a
	 * random subset of its 4 KiB blocks (each with probability 1/2), then the process exits
	 * with KVT_NVME_TORN_EXIT at once (what is in flight lands or not); 0: off. With
	 * tear_len, only writes of that many bytes count; with tear_period, only writes that
	 * start a tear_period-long stretch from tear_base (a region's header) */
	uint64_t tear_at;
	uint32_t tear_len;
	uint64_t tear_base, tear_period;
	uint64_t seed;
	bool armed;           /* inject only while set */
	const char *arm_file; /* when set: armed while this file exists (looked at per I/O) */
	/* results (written by the driving thread) */
	uint64_t ios, eio_r, eio_w, again, nospc, short_r, short_w, busy, misaligned;
	uint64_t writes_queued; /* while armed */
	unsigned align;
	int fd;
	/* private */
	void *inner_ctx;
	const struct kvt__nvme_io_ops *inner;
	uint64_t rng;
	uint8_t *op_of; /* cookie -> op, sized depth */
	uint32_t *len_of;
	uint64_t *queued_ns;        /* cookie -> when it was queued (write_delay_us) */
	struct kvt__nvme_cqe *held; /* write completions not yet due (write_delay_us), depth */
	unsigned n_held, depth;
};

#define KVT_NVME_TORN_EXIT 75 /* the exit status of a process the injector tore a write in */

/* ---- the engine ----------------------------------------------------------------------- */

struct kvt__nvme_seg {
	uint64_t off;
	void *buf;
	size_t len;
};

struct kvt__nvme_slot {
	struct kvt__nvme_io io;
	size_t piece_at;    /* where the piece starts in its job (io advances on short I/O) */
	uint32_t piece_len; /* its length as issued */
	uint32_t tries, zero_progress;
	uint64_t queued_ns; /* when handed to the backend (io_max_us) */
	unsigned job;       /* index in the running batch */
	bool busy;          /* owned by the kernel, or waiting on the redo stack */
};

/*
 * One aligned range of the file to read or write; the engine cuts it into pieces. The caller
 * fills off/buf/len/op/ready (len 0: an empty job, done at once) and may use tag; the engine
 * owns the rest while the batch runs and leaves done, err set.
 */
struct kvt__nvme_job {
	uint64_t off;
	void *buf;
	size_t len;
	uint8_t op;
	bool ready; /* may be issued (a done() callback may set it on a waiting job) */
	bool done;  /* every piece is over (or the job never ran: err -ECANCELED) */
	int err;    /* the job's first error, 0 when all of it was transferred */
	size_t issued;
	uint32_t inflight;
	uint32_t tag;
	bool urgent; /* issued ahead of every job that is not (a read riding a write stream) */
};

struct kvt__nvme_batch;
/* Called once per finished job, on the driving thread, from inside kvt__nvme_run(). */
typedef void (*kvt__nvme_done_fn)(void *arg, struct kvt__nvme_batch *b, unsigned job);

/* Optional: called once per piece all of whose bytes arrived (at, len: its range in the job),
 * in completion order, while the rest of the batch is in flight. */
typedef void (*kvt__nvme_landed_fn)(void *arg, struct kvt__nvme_batch *b, unsigned job, size_t at,
                                    size_t len);

/* Optional: called when slots are free and no job has a piece left to issue; may append jobs at
 * jobs[n..] and raise n (the caller owns the array's room). @return : whether it appended. */
typedef bool (*kvt__nvme_more_fn)(void *arg, struct kvt__nvme_batch *b);

/* The longest the engine waits for a completion before it asks b->poll again (a read that
 * arrives while every I/O in flight is a slow write starts within this). */
#define KVT_NVME_POLL_NS (1000000ull)

struct kvt__nvme_batch {
	struct kvt__nvme_job *jobs; /* borrowed */
	unsigned n;
	size_t piece;       /* largest I/O (raised to the engine's minimum, aligned) */
	bool stop_on_error; /* one failed piece stops every job (a single request) */
	kvt__nvme_done_fn done;
	kvt__nvme_more_fn more; /* NULL: the batch is what jobs[0..n) holds at the start */
	/* Optional: called at every turn of the run, and at least every KVT_NVME_POLL_NS while
	 * it waits (with a backend that has reap_timed); may append jobs as more() does, urgent
	 * ones to be issued first. @return : whether it appended. */
	kvt__nvme_more_fn poll;
	kvt__nvme_landed_fn landed;
	void *arg;
	int err; /* out: the first error of any job */
};

/* Counters past struct kvt_tier_stats (tests compare them with the injector's). */
struct kvt__nvme_xstats {
	uint64_t short_reads, short_writes, again_retries, submit_busy, efbig, rejected_full;
	uint64_t misaligned, fixed_ios, plain_ios, dropped_io, resurrected_skip;
	uint64_t pins, pin_failures; /* regions pinned; pins refused (memlock): pin.c's, copied */
	uint64_t landed_sums;        /* reads verified by the checksum that followed their pieces */
	uint64_t stream_reads;       /* reads that rode a write stream (pull_read), not behind it */
	uint64_t moved, moved_bytes; /* records copied forward at reclaim (nvme.quota guarantees) */
	uint64_t quota_trims;        /* records dropped because their tenant passed its maximum */
	uint64_t guarantee_dropped;  /* guaranteed records dropped anyway (no room to keep them) */
	uint64_t reinserted;         /* of moved: kept for a hit (nvme.policy = clock) */
	uint64_t passed;             /* regions passed over at reclaim (mostly kept, no I/O) */
	uint64_t keeps_walked;       /* records looked at to decide whether to pass over */
	uint64_t handed_over, handed_bytes; /* evicted records given to env->evicted */
	uint64_t evicted_ahead;             /* of handed_over: ahead of the head (reclaim.c) */
	uint64_t handover_waits; /* writes told -EAGAIN: the next region's hand-overs not landed */
	uint64_t fenced;         /* failed writes whose header may have landed, hidden after */
	uint64_t unfenced;       /* records a fence could not hide (may come back at recovery) */
	uint64_t buried;         /* tombstones written for graves (bury_due) */
	uint64_t index_saves;    /* indexes written at a clean close (index.c) */
	uint64_t index_loads;    /* opens that read the index instead of walking the log */
	uint64_t index_refused;  /* index files found and not trusted (the open walked) */
	uint64_t sum_written;    /* region summaries written (summary.c) */
	uint64_t sum_loaded;     /* regions an open read from their summary instead of walking */
	uint64_t sum_refused;    /* summaries whose trailer held and whose body did not (walked) */
	uint64_t livemaps;       /* live maps rewritten after tombstones in summarised regions */
	/* the engine's books (RELIABILITY L6): every I/O it hands the backend is reaped once, as a
	 * completion (done, short, or failed); reaped comes before queued so that a snapshot
	 * (kvt__nvme_xstats, which reads in field order) never shows more reaped than queued */
	uint64_t ios_reaped;
	uint64_t ios_queued;
	uint64_t io_max_us; /* the slowest I/O, queued to reaped */
	uint64_t
	    io_books_wrong; /* completions at which queued - reaped was not what is in flight */
};

/* ---- pinning (pin.c) ------------------------------------------------------------------ */

#define KVT_NVME_PIN_QUEUE 64u /* regions waiting for the pinning thread */

/* Memory declared for fixed I/O; region r is [base + r * region, + region), cut at len. */
struct kvt__nvme_area {
	uint8_t *base;
	size_t len, region;
	_Atomic int32_t *slot; /* per region: its buffer slot (>= 0), or one of the below */
};
#define KVT_NVME_UNPINNED   (-1)
#define KVT_NVME_PIN_FAILED (-2) /* not tried again */
#define KVT_NVME_PINNING    (-3) /* queued for the pinning thread */

struct kvt__nvme_engine;
struct kvt__nvme_pins {
	struct kvt__nvme_engine *e; /* its backend pins through the ring */
	struct kvt__nvme_area areas[KVT_NVME_MAX_AREAS];
	_Atomic unsigned n_areas;
	bool table; /* the backend took an empty buffer table */
	/* the pinning thread's, and the queue it takes regions from (under mu) */
	pthread_t thread;
	bool started, stop, warned;
	pthread_mutex_t mu;
	pthread_cond_t cv, idle;
	struct {
		uint16_t area;
		uint32_t region;
	} queue[KVT_NVME_PIN_QUEUE];
	unsigned head, n, busy;
	uint16_t *free_slots;
	unsigned n_free_slots;
	_Atomic uint64_t pinned_bytes, pins, failures;
};

/* Asks the backend for an empty buffer table of KVT_NVME_PIN_SLOTS; without one (pio, an old
 * kernel) every I/O is plain. Starts no thread yet. */
void kvt__nvme_pins_init(struct kvt__nvme_pins *p, struct kvt__nvme_engine *e);
/* Stops the pinning thread; the pins go with the ring, which the caller closes next. */
void kvt__nvme_pins_close(struct kvt__nvme_pins *p);
/* Declares [base, base+len) for fixed I/O, pinned region bytes at a time (0: as one region).
 * Pins nothing now. @return : 0, -EOPNOTSUPP (no table), -E2BIG, -ENOMEM, -EINVAL. */
int kvt__nvme_pins_add(struct kvt__nvme_pins *p, void *base, size_t len, size_t region);
/* For a piece at buf (the driving thread): its buffer slot, or -1 (plain I/O), cutting *len at
 * its region's end. An unpinned region is queued for the pinning thread. */
int16_t kvt__nvme_pins_slot(struct kvt__nvme_pins *p, const void *buf, size_t *len, unsigned align);
/* Waits until no region is queued or being pinned (tests). */
void kvt__nvme_pins_wait(struct kvt__nvme_pins *p);

struct kvt__nvme_engine {
	const struct kvt__nvme_io_ops *ops;
	void *ctx;
	unsigned depth, align;
	size_t min_piece;
	struct kvt__nvme_slot *slots; /* depth of them */
	struct kvt__nvme_cqe *cqes;
	unsigned *free_stack, *redo_stack; /* depth each: slot indices */
	struct kvt__nvme_pins pins;        /* memory I/O comes from, pinned as it is needed */
};

#define KVT_NVME_RW_MAX    256u /* segments of one kvt__nvme_rw() */
#define KVT_NVME_BATCH_MAX 128u /* records per engine run of a write/read batch */

struct kvt_nvme;
/*
 * Runs every job of b with up to depth pieces in flight across the jobs: resubmits short I/Os
 * and -EAGAIN, calls b->done for each finished job, and waits for every I/O it issued. Blocks.
 * @return : b->err, the first error of any job (each job's own is in jobs[i].err).
 */
int kvt__nvme_run(struct kvt_nvme *t, struct kvt__nvme_batch *b);
/*
 * Performs segs (each aligned) as one request: splits them into up to depth in-flight I/Os,
 * resubmits short I/Os and -EAGAIN, and waits for every I/O it issued. Blocks.
 * @return : 0, or the request's first error (-EIO, -ENOSPC, -EAGAIN, -EINVAL for misalignment).
 */
int kvt__nvme_rw(struct kvt_nvme *t, int op, const struct kvt__nvme_seg *segs, unsigned n);
int kvt__nvme_engine_open(struct kvt__nvme_engine *e, const struct kvt__nvme_io_ops *ops,
                          const struct kvt__nvme_io_cfg *cfg, unsigned align);
void kvt__nvme_engine_close(struct kvt__nvme_engine *e);

/* ---- the log ---------------------------------------------------------------------------- */

struct kvt__nvme_rec {
	struct kvt_chunk_hdr h;
	uint32_t off_blocks; /* from the region start, in align units */
	uint32_t rec_len;
	uint16_t tix; /* the tenant's index in t->quota (0 without nvme.quota) */
	bool alive;
	bool hit;    /* read since it was written (nvme.policy = clock) */
	bool done;   /* the engine is done with it (kvt_done): reclaim drops it, unread */
	bool buried; /* its tombstone landed: not on disk any more (summary.c's live map) */
};

struct kvt__nvme_region {
	uint64_t seq; /* 0: free */
	uint64_t wp;  /* next write offset within the region (bytes) */
	struct kvt__nvme_rec *recs;
	uint32_t n_recs, cap_recs;
	uint64_t live_bytes; /* padded bytes of its live records */
	/* records handed over ahead and queued by the caller, not yet landed below: the region is
	 * not written again before (a crash would lose them); any thread drops it */
	uint32_t handovers_queued;
	/* summary.c: records placed since the region opened (the room its summary needs), where
	 * its summary starts (0: none; nothing is placed past it), and whether one is owed */
	uint32_t n_placed;
	uint64_t sum_start;
	bool sum_due;
};

struct kvt__nvme_hooks {
	const char *backend;           /* "uring", "pio" or NULL (probe / env) */
	struct kvt__nvme_fault *fault; /* wrap the backend with the injector */
	uint32_t full_retry_ms;        /* while full, how often a write probes (default 1000) */
	uint64_t region_bytes;         /* 0: chosen from the capacity */
	bool full_retry_set;
	bool no_index;   /* never save or load the index (index.c): every open walks the log */
	bool no_summary; /* never read region summaries at an open (summary.c): the walk alone */
};

/* Per-record state of a batch being written or read (nvme.c). */
/* Reads that may ride one engine run of a write stream (tier.h's pull_read). */
#define KVT_NVME_STREAM_READS 16u

struct kvt__nvme_bstate {
	uint64_t off; /* file offset of the record */
	uint64_t region;
	struct kvt__nvme_rec *rec; /* reads */
	size_t summed;             /* reads: record bytes checksummed as they landed, in order */
	uint64_t landed;           /* reads: pieces past summed that landed (bit 0: the next) */
	bool summing;              /* reads: the checksum follows the pieces (else: at the end) */
	struct kvt_tier_wreq *q;   /* writes: the caller's request */
	uint32_t req;              /* reads: index in the caller's array */
	uint32_t job;              /* writes: the index of its first job in the run */
	uint32_t rec_len;          /* reads */
	uint8_t parts;             /* writes: body and terminator finished (bits 0, 1) */
	bool first;                /* writes: first record of its region in this run */
	int err;
};

/* A read riding a write stream: its running checksum and state as a batch read's, and, since
 * the record it reads may be appended past (the region's array of records may move) or dropped
 * while it is in flight, its own copy of what it reads. */
struct kvt__nvme_sread {
	struct kvt_chunk_sum_state sum;
	struct kvt__nvme_bstate s;
	struct kvt_tier_rreq *q;
	struct kvt_chunk_hdr h;
	uint64_t loc;
	bool owed; /* failed: reported after the run, where dropping it may write a tombstone */
};

struct kvt_nvme {
	struct kvt_tier_env env;
	char path[4096];
	char index_path[4096 + 16]; /* index.c; empty: none */
	int fd, lock_fd;            /* lock_fd: flock held while open (open_file) */
	bool is_blk, direct, recovering;
	bool opened; /* open succeeded: close writes graves, the index and a clean superblock */
	unsigned align;
	uint64_t file_bytes, data_off, region_bytes, n_regions, max_rec;
	uint64_t instance, sb_gen, next_seq;
	uint64_t head;       /* region index being written */
	uint64_t sums_due;   /* regions whose sum_due is set (summary.c) */
	uint64_t sum_cursor; /* where the next look for them starts */
	struct kvt__nvme_region *regions;
	uint8_t *blk; /* KVT_NVME_BLOCK * 2 aligned scratch: zero terminator + header blocks */
	uint8_t *scan_buf;
	struct kvt__nvme_engine eng;
	struct kvt__nvme_fault env_fault; /* KVTIER_NVME_FAULT_PPM's injector (tests of a daemon) */
	/* batch scratch, KVT_NVME_BATCH_MAX records: 3 jobs and one state word each */
	struct kvt__nvme_job *bjobs;
	struct kvt__nvme_bstate *bstate;
	struct kvt_chunk_sum_state *bsum; /* reads: one running checksum per record of a batch */
	struct kvt__nvme_sread *sread;    /* reads riding a write stream, KVT_NVME_STREAM_READS */
	struct kvt__nvme_hooks hooks;
	const char *backend_name;
	bool reinsert_hits; /* nvme.policy = clock (reclaim.c) */
	/* nvme.quota (quota.c): NULL without */
	struct kvt_quota *quota;
	/* with a maximum below the tier: reclaim keeps a record while the live bytes stay at most
	 * this (what trims freed goes to the others); 0: off */
	uint64_t keep_live;
	uint64_t guaranteed;             /* the guarantees' sum */
	struct kvt__nvme_cursor *cursor; /* per tenant index: where its oldest record may be */
	uint32_t n_cursor;
	/* graves waiting for their tombstones (log.c): locs, filled from any thread */
	pthread_mutex_t bury_lock;
	uint64_t *bury;
	uint32_t n_bury, cap_bury;
	/* health */
	unsigned consecutive_err;
	uint64_t full_since_ns;
	/* counters: relaxed atomics (stats() may run on any thread) */
	struct kvt_tier_stats st;
	struct kvt__nvme_xstats xs;
};

#define KVT_NVME_ADD(t, f, n) __atomic_fetch_add(&(t)->f, (n), __ATOMIC_RELAXED)
#define KVT_NVME_SET(t, f, v) __atomic_store_n(&(t)->f, (v), __ATOMIC_RELAXED)
#define KVT_NVME_GET(t, f)    __atomic_load_n(&(t)->f, __ATOMIC_RELAXED)

/* A record's length on disk: padded to the 4 KiB block. */
static inline uint64_t kvt__nvme_padded(uint64_t rec_len)
{
	return KVT_ALIGN_UP(rec_len, (uint64_t)KVT_NVME_BLOCK);
}

/* Whether h, read from disk, is the record the log holds as want: identity, version, checksum
 * (a read and a copy forward check the same way). */
static inline bool kvt__nvme_same_record(const struct kvt_chunk_hdr *h,
                                         const struct kvt_chunk_hdr *want)
{
	return h->tenant == want->tenant && !memcmp(&h->ns, &want->ns, sizeof(h->ns)) &&
	       !memcmp(&h->key, &want->key, sizeof(h->key)) && h->seq == want->seq &&
	       h->payload_sum == want->payload_sum;
}

/* loc: bits 0..39 the record's file offset in 4 KiB units, bits 40..63 the region seq. */
static inline uint64_t kvt__nvme_loc(uint64_t file_off, uint64_t region_seq)
{
	return (file_off >> 12) | (region_seq & 0xffffffull) << 40;
}

struct kvt__nvme_cursor {
	uint64_t region, seq; /* seq 0 (or a region reused since): start at the oldest region */
	uint32_t idx;
};

int kvt__nvme_log_open(struct kvt_nvme *t);
/* The index saved at a close (index.c). index_path() picks its file (after open_file); save()
 * writes it for the superblock of generation gen: the clean one written right after, or the one
 * on a device that fails (@return : 0 or -errno, logged; -EBUSY: hand-overs not landed); load()
 * applies it at open when it matches the superblock found (@return : 1 applied, 0 not usable:
 * walk the log, or -ENOMEM). */
void kvt__nvme_index_path(struct kvt_nvme *t);
int kvt__nvme_index_save(struct kvt_nvme *t, uint64_t gen);
int kvt__nvme_index_load(struct kvt_nvme *t);
void kvt__nvme_log_close(struct kvt_nvme *t);
/* Finds the live record at loc. @return : the record and its region index, or NULL. */
struct kvt__nvme_rec *kvt__nvme_log_find(struct kvt_nvme *t, uint64_t loc, uint64_t *region);
/* Makes room for a record of rec_len at the head, never reclaiming region avoid (where records
 * of a write run still in flight go; UINT64_MAX: none). @return : its file offset, -EAGAIN
 * (the head would need region avoid: try again in the next run), or -errno. */
int64_t kvt__nvme_log_place(struct kvt_nvme *t, uint32_t rec_len, uint64_t avoid);
/* Appends the record just written at file_off. @return : 0 or -ENOMEM. */
int kvt__nvme_log_append(struct kvt_nvme *t, const struct kvt_chunk_hdr *h, uint64_t file_off,
                         uint32_t rec_len);
/* What keeps a dropped record from a restart's walk (log_kill): nothing (its region is taken
 * back next, or reopened), a tombstone now (fenced), or one written with the next graves
 * (bury_due). */
enum kvt__nvme_grave { KVT_NVME_NO_GRAVE, KVT_NVME_GRAVE_NOW, KVT_NVME_GRAVE_LATER };
/* Marks rec dead, tells env->dropped, and leaves the grave asked for over its header. */
void kvt__nvme_log_kill(struct kvt_nvme *t, uint64_t region, struct kvt__nvme_rec *rec,
                        enum kvt__nvme_grave grave);
/* Writes blk (one of the tier's own blocks) at off, up to KVT_NVME_FENCE_TRIES times: what
 * keeps a removed record, or one whose write was reported failed, from being recovered. On
 * failure it counts xs.unfenced and logs what may come back. @return : 0 or -errno. */
int kvt__nvme_log_fence(struct kvt_nvme *t, uint64_t off, void *blk, const char *what);
/* The same for len bytes of the tier's own blocks (a live map: summary.c). */
int kvt__nvme_log_fence_len(struct kvt_nvme *t, uint64_t off, void *buf, size_t len,
                            const char *what);
/* Graves: a record dropped while its region stays on disk (evicted ahead once its copy has
 * landed below, trimmed at a tenant's maximum, dropped ahead as done) would be found again by
 * a restart's walk, where a delete sent since cannot reach it. bury_later (any thread) notes
 * its loc; bury_due (the tier's thread: after writes, evicting ahead, at close) writes their
 * tombstones together, skipping any whose region has been taken back since. */
void kvt__nvme_bury_later(struct kvt_nvme *t, uint64_t loc);
void kvt__nvme_bury_due(struct kvt_nvme *t);
/* Marks rec dead and takes it off the counts, telling no one (a record being moved). */
void kvt__nvme_log_unlink(struct kvt_nvme *t, uint64_t region, struct kvt__nvme_rec *rec);
/* Opens region r for writing: a fresh header, and a zero block after it. @return : 0, -errno. */
int kvt__nvme_region_open(struct kvt_nvme *t, uint64_t r);
uint64_t kvt__nvme_region_start(const struct kvt_nvme *t, uint64_t r);
/* The tier's own checksummed blocks (log.c): magic in the first 8 bytes, XXH3 in the last 8. */
bool kvt__nvme_block_ok(const uint8_t *b, uint64_t magic);
void kvt__nvme_block_seal(uint8_t *b);

/* ---- region summaries (summary.c) ---- */

/* Where records may go in R: before its summary, or the region's end. */
static inline uint64_t kvt__nvme_region_end(const struct kvt_nvme *t,
                                            const struct kvt__nvme_region *R)
{
	return R->sum_start ? R->sum_start : t->region_bytes;
}
/* Whether a record of need padded bytes fits at R's write pointer, leaving room for the summary
 * of every record placed so far and it (a region's first record needs no room beyond its own). */
bool kvt__nvme_region_fits(const struct kvt_nvme *t, const struct kvt__nvme_region *R,
                           uint64_t need);
/* Writes up to max summaries owed (regions the head has left), after the writes that filled
 * them are over. */
void kvt__nvme_sum_write_due(struct kvt_nvme *t, unsigned max);
/* Rewrites the live maps of the summarised regions among regions[0..n) (duplicates allowed),
 * after tombstones landed there: what keeps a recovery from the summary from finding them. */
void kvt__nvme_livemaps_write(struct kvt_nvme *t, const uint64_t *regions, unsigned n);
/* Writes tomb (a tombstone block) over rec in region r, and with it, when r is summarised, the
 * live map without rec, in one round trip; each is tried again on its own when that fails.
 * Sets rec->buried. @return : 0, or -EIO when the tombstone never landed (counted, logged). */
int kvt__nvme_bury_now(struct kvt_nvme *t, uint64_t r, struct kvt__nvme_rec *rec, void *tomb);
/* At an open, after the region headers: reads every region's summary trailer; with load, also
 * the summaries, appending their live records and leaving each such region's write pointer
 * where its summary was taken (the walk goes on from there). @return : 0 or -errno. */
int kvt__nvme_sum_open(struct kvt_nvme *t, bool load);
/* One synchronous I/O of a tier's own (superblock, region header, reclaim). */
int kvt__nvme_rw1(struct kvt_nvme *t, int op, uint64_t off, void *buf, size_t len);

/*
 * Takes the oldest region r back for the head (reclaim.c): every live record in it is dropped
 * (env->dropped) unless nvme.quota keeps it and may_keep is set; kept records are read, checked,
 * written again at the start of the reopened region, and reported (env->moved). On return the
 * region is open, or free when opening it failed. @return : 0, or region_open's error.
 */
int kvt__nvme_reclaim(struct kvt_nvme *t, uint64_t r, bool may_keep);
/* Evicting ahead of the head (reclaim.c; the daemon's kvt_tier_nvme_evict_ahead). */
int kvt__nvme_ahead_due(const struct kvt_nvme *t);
size_t kvt__nvme_evict_ahead(struct kvt_nvme *t, size_t max_bytes);
/* The bytes kvt__nvme_reclaim(t, r, true) would keep, or a little more (no I/O, no change). */
uint64_t kvt__nvme_reclaim_keeps(struct kvt_nvme *t, uint64_t r);
/* Region r is passed over as it is: with clock, its records' hits are spent (their second
 * chance). */
void kvt__nvme_reclaim_pass(struct kvt_nvme *t, uint64_t r);
/*
 * The log's reclaim policy: "fifo" (regions taken whole) or "clock" (a record read since it was
 * written is copied forward). Set from nvme.policy at open, and by the tier's policy_set at run
 * time; there are no parameters. @return : 0, -ENOENT (no such policy; parameters), -EINVAL
 * (clock without env->moved), with one line in err.
 */
/* Whether name is a policy of the log (fifo, clock) and params are none. @return : 0, -ENOENT
 * with err saying why. */
int kvt__nvme_policy_check(const char *name, const char *params, char *err, size_t err_len);
int kvt__nvme_policy_set(struct kvt_nvme *t, const char *name, const char *params, char *err,
                         size_t err_len);

/* ---- nvme.quota (quota.c) ---- */

/* Reads nvme.quota. @return : 0, -EINVAL (malformed; guarantees above half the tier; no
 * env->moved to report copies with), -ENOMEM. */
int kvt__nvme_quota_open(struct kvt_nvme *t);
void kvt__nvme_quota_close(struct kvt_nvme *t);
/* nvme.quota at run time: list (or "none"/"": off) replaces the quota; the accounts are made
 * again from the live records. On failure nothing changed. @return : 0, -EINVAL (err says),
 * -ENOMEM. */
int kvt__nvme_quota_set(struct kvt_nvme *t, const char *list, char *err, size_t err_len);
/* The record of header h enters (+1) or leaves (-1) the tier's accounts. */
void kvt__nvme_quota_account(struct kvt_nvme *t, struct kvt__nvme_rec *rec, int sign);
/* @return : 0, or -EDQUOT when a record of rec_len can never fit its tenant's maximum. */
int kvt__nvme_quota_admits(struct kvt_nvme *t, const struct kvt_chunk_hdr *h, uint32_t rec_len);
/* At reclaim: whether dropping rec would take its tenant below its guarantee. */
bool kvt__nvme_quota_keeps(struct kvt_nvme *t, const struct kvt__nvme_rec *rec);
/* Drops the tenant's oldest records (no I/O) while it holds more than its maximum. */
void kvt__nvme_quota_trim(struct kvt_nvme *t, uint32_t tenant_key);
/* The same for every tenant (after recovery: trimmed records carry no tombstone, and a crash
 * brings them back; a lowered maximum applies at once). */
void kvt__nvme_quota_trim_all(struct kvt_nvme *t);
uint64_t kvt__nvme_rec_off(const struct kvt_nvme *t, uint64_t region,
                           const struct kvt__nvme_rec *r);
/* Reads and checks the superblock (the enable() probe). */
int kvt__nvme_log_probe(struct kvt_nvme *t);
int kvt__nvme_log_sb_write(struct kvt_nvme *t, bool clean);

/* Counts a request's outcome toward disabling the tier (nvme.c: KVT_NVME_DISABLE_AFTER). */
void kvt__nvme_health(struct kvt_nvme *t, int rc);

/* Test hooks. */
int kvt__nvme_open_hooked(const struct kvt_tier_env *env, const struct kvt__nvme_hooks *hooks,
                          struct kvt_tier **out);
void kvt__nvme_xstats(struct kvt_tier *t, struct kvt__nvme_xstats *out);
/* Waits until the tier's pinning thread has nothing queued (tests). */
void kvt__nvme_pin_wait(struct kvt_tier *t);
/* kvt_tier_nvme_register with regions of another size (tests: small enough for the default
 * RLIMIT_MEMLOCK of 8 MiB, so that they run without privilege). */
int kvt__nvme_register_regions(struct kvt_tier *t, void *base, size_t len, size_t region);
#endif
