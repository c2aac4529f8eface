/*
 * nvme.c -- the nvme tier's ops table (tiers/tier.h) over the log (log.c) and the I/O engine.
 *
 * Open: the file (default DATA_DIR/nvme.dat) or block device is opened O_DIRECT; the alignment
 * comes from statx(STATX_DIOALIGN) (4096 when the kernel does not say, and more than 4096 is
 * refused because the daemon's buffers are padded to 4096). A regular file is sized with
 * fallocate to nvme.bytes. The backend is io_uring when the kernel allows it, else a pread/pwrite
 * thread pool; KVTIER_NVME_BACKEND=uring|pio forces one.
 *
 * Health: -EIO drops the record it hit (env->dropped) and counts; KVT_NVME_DISABLE_AFTER
 * consecutive failed requests disable the whole tier (every call then fails fast with -EIO,
 * stats show disabled) until enable() re-reads the superblock successfully. -ENOSPC from the
 * device marks the tier full: writes fail fast with -ENOSPC, reads keep working, and one write
 * per full_retry_ms is let through as a probe (a success clears full).
 *
 * Every call blocks the calling thread until its I/O is complete (a 32 MiB record is one
 * request of queue-depth I/Os); one thread drives the tier at a time, stats() from any thread.
 */
#include "nvme.h"
#include "nvme_int.h"
#include "core/log.h"
#include "core/tenants.h"
#include "tiers/tier_quota.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Writes are cut into pieces of at least this: a stream's run starts with whatever record is
 * queued, often one, and later records join at the same cut, so the cut is set for throughput
 * (bytes in flight), not for the latency of the first record. */
#define WRITE_PIECE_MIN (1u << 20)

/* the jobs of one record in a write batch (see write_run); a job's tag is its record's index
 * times J_PER_REC plus its kind, or READ_TAG plus the index of a read riding the run */
enum { J_BODY, J_TERM, J_HEAD, J_PER_REC };
#define READ_TAG (1u << 31)

static struct kvt_nvme *NV(struct kvt_tier *t)
{
	return (struct kvt_nvme *)t;
}

void kvt__nvme_health(struct kvt_nvme *t, int rc)
{
	if (!rc) {
		t->consecutive_err = 0;
		return;
	}
	if (rc == -EAGAIN || rc == -ENOSPC || rc == -EINVAL)
		return;
	if (++t->consecutive_err >= KVT_NVME_DISABLE_AFTER && !KVT_NVME_GET(t, st.disabled)) {
		KVT_NVME_SET(t, st.disabled, true);
		kvt_log(KVT_LOG_ERROR,
		        "nvme: %u consecutive I/O failures on %s: tier disabled until "
		        "'kvtier tier enable nvme'",
		        t->consecutive_err, t->path);
	}
}

static int size_file(struct kvt_nvme *t, uint64_t want)
{
	struct stat st;
	if (fstat(t->fd, &st))
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		uint64_t dev = 0;
		if (ioctl(t->fd, BLKGETSIZE64, &dev))
			return -errno;
		t->is_blk = true;
		t->file_bytes = want && want < dev ? want : dev;
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((uint64_t)st.st_size > want && ftruncate(t->fd, (off_t)want))
		return -errno;
	int rc = fallocate(t->fd, 0, 0, (off_t)want);
	if (rc && (errno == EOPNOTSUPP || errno == ENOSYS))
		rc = ftruncate(t->fd, (off_t)want);
	if (rc)
		return -errno;
	t->file_bytes = want;
	return 0;
}

static int open_file(struct kvt_nvme *t)
{
	t->fd = open(t->path, O_RDWR | O_CREAT | O_CLOEXEC | O_DIRECT, 0600);
	t->direct = t->fd >= 0;
	if (t->fd < 0 && errno == EINVAL) {
		kvt_log(KVT_LOG_WARN, "nvme: %s does not support O_DIRECT: using the page cache",
		        t->path);
		t->fd = open(t->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	}
	if (t->fd < 0)
		return -errno;
	/* One owner: a second kvtierd (or tier) on the same file or device would write into the
	 * first one's regions and save an index over its log. The lock is taken through an fd of
	 * its own, closed at close: io_uring's registered file outlives the ring's exit for a
	 * while, and a lock on it would too. A crashed owner's lock goes with its process. */
	t->lock_fd = open(t->path, O_RDONLY | O_CLOEXEC);
	if (t->lock_fd < 0 || flock(t->lock_fd, LOCK_EX | LOCK_NB)) {
		int rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		kvt_log(KVT_LOG_ERROR,
		        "nvme: %s is in use by another process (another kvtierd?)%s%s", t->path,
		        rc == -EBUSY ? "" : ": ", rc == -EBUSY ? "" : strerror(-rc));
		return rc;
	}
	t->align = KVT_NVME_BLOCK;
#ifdef STATX_DIOALIGN
	struct statx sx;
	if (t->direct && !statx(t->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) &&
	    (sx.stx_mask & STATX_DIOALIGN) && sx.stx_dio_offset_align) {
		if (sx.stx_dio_offset_align > KVT_NVME_BLOCK ||
		    sx.stx_dio_mem_align > KVT_TIER_ALIGN) {
			kvt_log(KVT_LOG_ERROR,
			        "nvme: %s needs %u-byte alignment; at most %u supported", t->path,
			        sx.stx_dio_offset_align, KVT_NVME_BLOCK);
			return -EINVAL;
		}
	}
#endif
	return 0;
}

static const struct kvt__nvme_io_ops *pick_backend(struct kvt_nvme *t, const char **forced)
{
	const char *want = t->hooks.backend ? t->hooks.backend : getenv("KVTIER_NVME_BACKEND");
	*forced = want && *want ? want : NULL;
	if (*forced && !strcmp(*forced, "pio"))
		return &kvt__nvme_io_pio;
#ifdef KVT_HAVE_URING
	if (*forced && strcmp(*forced, "uring"))
		return NULL;
	return &kvt__nvme_io_uring;
#else
	return *forced ? NULL : &kvt__nvme_io_pio;
#endif
}

static int open_engine(struct kvt_nvme *t)
{
	const char *forced;
	const struct kvt__nvme_io_ops *ops = pick_backend(t, &forced);
	if (!ops)
		return -ENOSYS;
	uint64_t qd = kvt_opt_u64(t->env.opts, KVT_OPT_NVME_QUEUE_DEPTH);
	struct kvt__nvme_io_cfg cfg = {.fd = t->fd, .depth = (unsigned)(qd ? qd : 32)};
	for (;;) {
		const struct kvt__nvme_io_ops *top = ops;
		if (t->hooks.fault) {
			cfg.inner = ops, cfg.arg = t->hooks.fault;
			t->hooks.fault->align = t->align;
			top = &kvt__nvme_io_fault;
		}
		int rc = kvt__nvme_engine_open(&t->eng, top, &cfg, t->align);
		if (!rc) {
			t->backend_name = ops->name;
			return 0;
		}
		if (forced || ops == &kvt__nvme_io_pio)
			return rc;
		kvt_log(KVT_LOG_WARN, "nvme: io_uring unavailable (%s): using pread/pwrite",
		        strerror(-rc));
		ops = &kvt__nvme_io_pio;
	}
}

static void nvme_close(struct kvt_tier *tier)
{
	struct kvt_nvme *t = NV(tier);
	if (!t)
		return;
	if (t->opened && !KVT_NVME_GET(t, st.disabled)) {
		kvt__nvme_bury_due(t);
		kvt__nvme_sum_write_due(t, UINT32_MAX);
		kvt__nvme_index_save(t, t->sb_gen + 1); /* for the superblock written next */
		kvt__nvme_log_sb_write(t, true);
	} else if (t->opened) {
		/* the device fails: no grave or superblock can be written, and a walk would bring
		 * back what was removed since; the index, for the superblock on the device, does
		 * not (index.c) */
		kvt__nvme_index_save(t, t->sb_gen);
	}
	kvt__nvme_engine_close(&t->eng);
	kvt__nvme_log_close(t);
	pthread_mutex_destroy(&t->bury_lock);
	kvt__nvme_quota_close(t);
	free(t->bjobs), free(t->bstate), free(t->bsum);
	free(t->sread);
	if (t->fd >= 0)
		close(t->fd);
	if (t->lock_fd >= 0)
		close(t->lock_fd);
	free(t);
}

/* KVTIER_NVME_FAULT_PPM=N (tests only, like KVTIER_NVME_BACKEND): a daemon's tier injects
 * EIO, EAGAIN, short transfers and busy submits at N per million I/Os each (io_fault.c), so a
 * test can run a whole kvtierd on a failing device; KVTIER_NVME_NOSPC_PPM=N fails N per million
 * writes with ENOSPC (a full device); KVTIER_NVME_READ_DELAY_MS=N makes every
 * batch of reads take N ms longer (a slow device), KVTIER_NVME_WRITE_DELAY_MS=N every write
 * complete N ms after it was queued; armed once the tier is open (a failed open
 * stops the daemon's start, which is not what such a test is after), and with
 * KVTIER_NVME_FAULT_FILE=PATH only while PATH exists, so a test can make the device fail and
 * recover under a running daemon. Nothing else sets it. */
static unsigned long env_ul(const char *name, unsigned long max)
{
	const char *v = getenv(name);
	char *end = NULL;
	unsigned long n = v && *v ? strtoul(v, &end, 10) : 0;
	if (v && *v && (*end || n > max || v[0] == '-')) { /* a test that set it hears so */
		kvt_log(KVT_LOG_WARN, "nvme: %s=%s is not a count from 0 to %lu: ignored", name, v,
		        max);
		return 0;
	}
	return n;
}

static void env_faults(struct kvt_nvme *t)
{
	unsigned long ppm = env_ul("KVTIER_NVME_FAULT_PPM", 1000000);
	unsigned long nospc = env_ul("KVTIER_NVME_NOSPC_PPM", 1000000);      /* F6: full device */
	unsigned long delay_ms = env_ul("KVTIER_NVME_READ_DELAY_MS", 10000); /* L7: slow device */
	unsigned long wdelay_ms = env_ul("KVTIER_NVME_WRITE_DELAY_MS", 10000);
	if (t->hooks.fault || (!ppm && !nospc && !delay_ms && !wdelay_ms))
		return;
	t->env_fault = (struct kvt__nvme_fault){.ppm_eio = (uint32_t)ppm,
	                                        .ppm_again = (uint32_t)ppm,
	                                        .ppm_nospc = (uint32_t)nospc,
	                                        .ppm_short = (uint32_t)ppm,
	                                        .ppm_busy = (uint32_t)ppm,
	                                        .read_delay_us = (uint32_t)delay_ms * 1000,
	                                        .write_delay_us = (uint32_t)wdelay_ms * 1000,
	                                        .seed = kvt_now_ns() | 1};
	t->hooks.fault = &t->env_fault;
	kvt_log(KVT_LOG_WARN,
	        "nvme: KVTIER_NVME_FAULT_PPM=%lu, KVTIER_NVME_NOSPC_PPM=%lu, "
	        "KVTIER_NVME_READ_DELAY_MS=%lu, KVTIER_NVME_WRITE_DELAY_MS=%lu: injecting I/O "
	        "faults (tests only)",
	        ppm, nospc, delay_ms, wdelay_ms);
}

int kvt__nvme_open_hooked(const struct kvt_tier_env *env, const struct kvt__nvme_hooks *hooks,
                          struct kvt_tier **out)
{
	struct kvt_nvme *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->bury_lock, NULL);
	t->fd = t->lock_fd = -1;
	t->env = *env;
	if (hooks)
		t->hooks = *hooks;
	if (!t->hooks.full_retry_set)
		t->hooks.full_retry_ms = 1000;
	env_faults(t);
	const char *p = kvt_opt_str(env->opts, KVT_OPT_NVME_PATH);
	int rc = -ENAMETOOLONG;
	int n = *p ? snprintf(t->path, sizeof(t->path), "%s", p)
	           : snprintf(t->path, sizeof(t->path), "%s/nvme.dat",
	                      env->data_dir ? env->data_dir : ".");
	if (n < 0 || (size_t)n >= sizeof(t->path))
		goto err;
	uint64_t want = kvt_opt_u64(env->opts, KVT_OPT_NVME_BYTES);
	if (!want)
		want = 64ull << 20;
	if ((rc = open_file(t)))
		goto err;
	kvt__nvme_index_path(t);
	if ((rc = size_file(t, want & ~(uint64_t)(KVT_NVME_BLOCK - 1))))
		goto err;
	struct kvt_nvme_geometry g;
	if (kvt_nvme_geometry(t->file_bytes, t->hooks.region_bytes, &g)) {
		rc = -ENOSPC; /* too small, or a test's region_bytes that leaves under two */
		goto err;
	}
	t->data_off = KVT_NVME_DATA_OFF;
	t->region_bytes = g.region_bytes;
	t->n_regions = g.n_regions;
	t->max_rec = g.max_rec;
	KVT_NVME_SET(t, st.capacity_bytes, t->n_regions * t->max_rec);
	if ((rc = open_engine(t)))
		goto err;
	rc = -ENOMEM;
	t->bjobs =
	    calloc(KVT_NVME_BATCH_MAX * J_PER_REC + KVT_NVME_STREAM_READS, sizeof(*t->bjobs));
	t->bstate = calloc(KVT_NVME_BATCH_MAX, sizeof(*t->bstate));
	t->bsum = aligned_alloc(_Alignof(struct kvt_chunk_sum_state),
	                        KVT_NVME_BATCH_MAX * sizeof(*t->bsum));
	t->sread = aligned_alloc(_Alignof(struct kvt__nvme_sread),
	                         KVT_NVME_STREAM_READS * sizeof(*t->sread));
	if (!t->bjobs || !t->bstate || !t->bsum || !t->sread)
		goto err;
	char perr[160];
	if ((rc = kvt__nvme_policy_set(t, kvt_opt_str(env->opts, KVT_OPT_NVME_POLICY), NULL, perr,
	                               sizeof(perr)))) {
		kvt_log(KVT_LOG_ERROR, "nvme.policy: %s", perr);
		rc = -EINVAL;
		goto err;
	}
	if ((rc = kvt__nvme_quota_open(t)) || (rc = kvt__nvme_log_open(t)))
		goto err;
	t->env_fault.armed = t->hooks.fault == &t->env_fault; /* from now on, not at the open */
	if (t->env_fault.armed)
		t->env_fault.arm_file = getenv("KVTIER_NVME_FAULT_FILE");
	t->opened = true;
	*out = (struct kvt_tier *)t;
	return 0;
err:
	nvme_close((struct kvt_tier *)t);
	return rc;
}

static int nvme_open(const struct kvt_tier_env *env, struct kvt_tier **out)
{
	return kvt__nvme_open_hooked(env, NULL, out);
}

/* @return : 0 when the tier may write now, else -ENOSPC (full, not yet time to probe). */
static int full_gate(struct kvt_nvme *t)
{
	if (!KVT_NVME_GET(t, st.full))
		return 0;
	if (kvt_now_ns() - t->full_since_ns >= (uint64_t)t->hooks.full_retry_ms * 1000000ull)
		return 0;
	KVT_NVME_ADD(t, xs.rejected_full, 1);
	return -ENOSPC;
}

/* Validates one record for writing. @return : 0 and *h, or the record's error. */
static int write_check(struct kvt_nvme *t, const struct kvt_tier_wreq *q, struct kvt_chunk_hdr *h)
{
	if (KVT_NVME_GET(t, st.disabled))
		return -EIO;
	size_t need = KVT_ALIGN_UP(q->rec_len, (size_t)KVT_NVME_BLOCK);
	if (q->rec_len < KVT_CHUNK_HDR_BYTES || q->buf_len < need ||
	    (uintptr_t)q->buf % KVT_TIER_ALIGN)
		return -EINVAL;
	if (q->rec_len > t->max_rec) {
		KVT_NVME_ADD(t, xs.efbig, 1);
		KVT_NVME_ADD(t, st.err_other, 1);
		return -EFBIG;
	}
	if (kvt_chunk_hdr_decode(q->buf, h) || h->payload_bytes != q->rec_len - KVT_CHUNK_HDR_BYTES)
		return -EINVAL;
	int rc = kvt__nvme_quota_admits(t, h, (uint32_t)q->rec_len);
	if (rc) {
		KVT_NVME_ADD(t, st.err_other, 1);
		return rc;
	}
	return full_gate(t);
}

static void write_failed(struct kvt_nvme *t, int rc)
{
	kvt__nvme_health(t, rc);
	if (rc == -ENOSPC) {
		if (!KVT_NVME_GET(t, st.full))
			kvt_log_rl(KVT_LOG_WARN, "nvme: %s: device full, tier marked full",
			           t->path);
		KVT_NVME_SET(t, st.full, true);
		t->full_since_ns = kvt_now_ns();
	}
}

/*
 * Batched writes. Record i of a run is three jobs: its body (all but the first block), the zero
 * terminator block after it (none at the end of a region), and its first block, the one that
 * holds the chunk header. The first block is issued last: after the body and the terminator are
 * on disk, and after the terminator of record i-1, which it overwrites. So whenever a crash
 * comes, the recovery walk (log.c) finds whole records up to a zero block and never walks into
 * what a region's earlier use left behind, while every record's body is in flight at once.
 * A record that fails breaks its region's chain there: the records after it in the same region
 * are not kept (-EAGAIN when they had no error of their own), and the region's write pointer
 * goes back to the failed record, so the log has no hole. When the failed record's header block
 * was issued it may have landed whole (a device can fail a write it made), and the records after
 * it in the region may have landed too: once the run's I/O is over, the zero block is written
 * over that header (a fence, log.c), so recovery's walk stops there and none of them comes back.
 * The write pointer goes back to the failed record once the fence has landed; while it has not,
 * the rest of the region stays unused, so that no later record's body lies under that header.
 */
static void head_maybe_ready(struct kvt_nvme *t, unsigned i)
{
	const struct kvt__nvme_bstate *s = &t->bstate[i];
	if (s->err || s->parts != 3)
		return;
	if (!s->first && !(t->bstate[i - 1].parts & 2))
		return;
	t->bjobs[s->job + J_HEAD].ready = true;
}

/* One engine run of writes: where its records come from, and how far it has got. */
struct wrun {
	struct kvt_nvme *t;
	const struct kvt_tier_wsource *src;
	struct kvt_tier_wreq *carry; /* pulled, left for the next run (a second region change) */
	unsigned m;                  /* records placed in this run */
	unsigned nj;                 /* jobs placed in this run (its records' and reads') */
	unsigned nr;                 /* reads that joined this run (stream_read_join) */
	uint64_t bytes, cap;         /* their bytes; the run stops taking records at cap */
	bool moved;                  /* the run has changed region once */
	bool running;                /* the engine runs: records join without region changes */
	bool closed;                 /* the run takes no more records */
	bool took;                   /* the run took a record (placed or refused) */
	unsigned fin;                /* records before this one are reported */
	bool broken;                 /* a record failed: its region's chain is cut there */
	size_t ok;                   /* records written, over all runs */
	struct {
		uint64_t off, region;
	} fence[2]; /* failed records whose header block was issued: one per region of the run */
	unsigned n_fence;
};

static void finish_ready(struct wrun *w, const struct kvt__nvme_batch *b);
static void stream_read_done(struct wrun *w, struct kvt__nvme_batch *b, unsigned j, unsigned k);
static bool stream_read_join(void *arg, struct kvt__nvme_batch *b);
static void stream_read_landed(void *arg, struct kvt__nvme_batch *b, unsigned j, size_t at,
                               size_t len);
static void stream_read_end(struct wrun *w, unsigned k);

static void write_done(void *arg, struct kvt__nvme_batch *b, unsigned j)
{
	struct wrun *w = arg;
	struct kvt_nvme *t = w->t;
	if (b->jobs[j].tag & READ_TAG) {
		stream_read_done(w, b, j, b->jobs[j].tag & ~READ_TAG);
		return;
	}
	unsigned i = b->jobs[j].tag / J_PER_REC, kind = b->jobs[j].tag % J_PER_REC;
	struct kvt__nvme_bstate *s = &t->bstate[i];
	if (b->jobs[j].err) {
		if (!s->err)
			s->err = b->jobs[j].err;
	} else if (kind != J_HEAD) {
		s->parts |= (uint8_t)(1u << kind);
		head_maybe_ready(t, i);
		if (kind == J_TERM && i + 1 < w->m && !t->bstate[i + 1].first)
			head_maybe_ready(t, i + 1);
	}
	finish_ready(w, b);
}

static uint64_t region_of(const struct kvt_nvme *t, uint64_t off)
{
	return (off - t->data_off) / t->region_bytes;
}

/* Places q as the run's next record (three jobs). @return : true when placed; false when q
 * was refused (its res is set) or carried to the next run (a second region change). */
static bool place(struct wrun *w, struct kvt_tier_wreq *q)
{
	struct kvt_nvme *t = w->t;
	struct kvt_chunk_hdr h;
	q->loc = 0;
	if ((q->res = write_check(t, q, &h)))
		return false;
	uint64_t need = KVT_ALIGN_UP((uint64_t)q->rec_len, (uint64_t)KVT_NVME_BLOCK);
	const struct kvt__nvme_region *H = &t->regions[t->head];
	bool change = H->seq && !kvt__nvme_region_fits(t, H, need);
	/* a second region change goes to the next run (no reclaim of our own records); so does
	 * any region change or opening once the run is in flight, since opening a region writes
	 * the superblock through the engine */
	if ((change && w->moved) || (w->running && (change || !H->seq))) {
		w->carry = q;
		w->closed = true;
		return false;
	}
	w->moved |= change;
	/* the run's records so far are in bstate[0]'s region, or right after it */
	uint64_t avoid = w->m ? t->bstate[0].region : UINT64_MAX;
	int64_t off = kvt__nvme_log_place(t, (uint32_t)q->rec_len, avoid);
	if (off == -EAGAIN && !w->m) { /* the next region's hand-overs have not landed below */
		q->res = -EAGAIN;      /* the caller tries again later */
		w->closed = true;
		return false;
	}
	if (off == -EAGAIN) { /* the head came round to this run's region: next run */
		w->carry = q;
		w->closed = true;
		return false;
	}
	if (off < 0) {
		q->res = (int)off;
		write_failed(t, q->res);
		w->closed = true;
		return false;
	}
	unsigned m = w->m;
	uint64_t r = region_of(t, (uint64_t)off);
	uint64_t rstart = t->data_off + r * t->region_bytes;
	struct kvt__nvme_bstate *s = &t->bstate[m];
	*s = (struct kvt__nvme_bstate){.off = (uint64_t)off, .region = r, .q = q, .job = w->nj};
	s->first = !m || t->bstate[m - 1].region != r;
	t->regions[r].wp = (uint64_t)off - rstart + need; /* provisional: undone on failure */
	bool term = (uint64_t)off + need < rstart + kvt__nvme_region_end(t, &t->regions[r]);
	struct kvt__nvme_job *j = &t->bjobs[w->nj];
	j[J_BODY] = (struct kvt__nvme_job){.off = (uint64_t)off + KVT_NVME_BLOCK,
	                                   .buf = (uint8_t *)q->buf + KVT_NVME_BLOCK,
	                                   .len = need - KVT_NVME_BLOCK,
	                                   .op = KVT_NVME_WRITE,
	                                   .ready = true,
	                                   .tag = m * J_PER_REC + J_BODY};
	j[J_TERM] = (struct kvt__nvme_job){.off = (uint64_t)off + need,
	                                   .buf = t->blk + KVT_NVME_BLOCK,
	                                   .len = term ? KVT_NVME_BLOCK : 0,
	                                   .op = KVT_NVME_WRITE,
	                                   .ready = true,
	                                   .tag = m * J_PER_REC + J_TERM};
	j[J_HEAD] = (struct kvt__nvme_job){.off = (uint64_t)off,
	                                   .buf = (void *)q->buf,
	                                   .len = KVT_NVME_BLOCK,
	                                   .op = KVT_NVME_WRITE,
	                                   .tag = m * J_PER_REC + J_HEAD};
	w->nj += J_PER_REC;
	w->bytes += need;
	w->cap = KVT_MAX(w->cap, 4 * need);
	w->m++;
	return true;
}

/* Takes records into the run while it has room: the carried one first, then the source's.
 * @return : whether it placed any. */
static bool fill(struct wrun *w)
{
	bool any = false;
	while (!w->closed && w->m < KVT_NVME_BATCH_MAX && w->bytes < w->cap) {
		struct kvt_tier_wreq *q = w->carry;
		w->carry = NULL;
		if (!q && !(q = w->src->pull(w->src->arg)))
			break;
		w->took = true;
		if (place(w, q))
			any = true;
		else if (q != w->carry)
			w->src->done(w->src->arg, q); /* refused */
	}
	return any;
}

/* The engine has room and nothing to issue: more records, unless a job of the run failed
 * (the records after it in its region would be dropped anyway). */
static bool write_more(void *arg, struct kvt__nvme_batch *b)
{
	struct wrun *w = arg;
	if (b->err || !fill(w))
		return false;
	b->n = w->nj;
	return true;
}

/* Hides the run's failed records whose header may have landed (see above): the zero block over
 * each header; the region's write pointer goes back there once it has landed. */
static void fence_failed(struct wrun *w)
{
	struct kvt_nvme *t = w->t;
	for (unsigned i = 0; i < w->n_fence; i++) {
		uint64_t off = w->fence[i].off, r = w->fence[i].region;
		KVT_NVME_ADD(t, xs.fenced, 1);
		if (!kvt__nvme_log_fence(t, off, t->blk + KVT_NVME_BLOCK,
		                         "the zero block over a failed write"))
			t->regions[r].wp = off - kvt__nvme_region_start(t, r);
	}
	w->n_fence = 0;
}

/* One run: records from the source (at most one region change), written, kept when they
 * landed, each reported to the source. @return : whether the run took any record. */
static bool write_run(struct wrun *w)
{
	struct kvt_nvme *t = w->t;
	w->m = 0, w->nj = 0, w->nr = 0, w->fin = 0, w->bytes = 0, w->cap = 256u << 20;
	w->moved = false, w->closed = false, w->took = false, w->broken = false;
	fill(w);
	if (!w->m)
		return w->took;
	struct kvt__nvme_batch b = {
	    .jobs = t->bjobs,
	    .n = w->nj,
	    .piece = KVT_MAX((w->bytes + t->eng.depth - 1) / t->eng.depth, (size_t)WRITE_PIECE_MIN),
	    .done = write_done,
	    .more = write_more,
	    .poll = w->src->pull_read ? stream_read_join : NULL,
	    .landed = stream_read_landed,
	    .arg = w};
	w->running = true;
	kvt__nvme_run(t, &b);
	w->running = false;
	if (KVT_NEVER(w->fin < w->m)) /* every job ended inside the run, each reported there */
		finish_ready(w, &b);
	fence_failed(w);
	for (unsigned k = 0; k < w->nr; k++)
		if (t->sread[k].owed)
			stream_read_end(w, k);
	return true;
}

/* Reports records in run order as soon as all three jobs of each are over: the record is
 * appended to the log and its request done, or -- at the first failure in a region -- the
 * chain is cut there and the rest of the region's records in this run fail too. */
static void finish_ready(struct wrun *w, const struct kvt__nvme_batch *b)
{
	struct kvt_nvme *t = w->t;
	for (; w->fin < w->m; w->fin++) {
		unsigned k = w->fin;
		const struct kvt__nvme_job *jb = &b->jobs[t->bstate[k].job];
		if (!jb[J_BODY].done || !jb[J_TERM].done || !jb[J_HEAD].done)
			return;
		struct kvt__nvme_bstate *s = &t->bstate[k];
		struct kvt_tier_wreq *q = s->q;
		struct kvt_chunk_hdr h;
		if (s->first)
			w->broken = false;
		if (!w->broken && !s->err) {
			kvt_chunk_hdr_decode(q->buf, &h);
			s->err = kvt__nvme_log_append(t, &h, s->off, (uint32_t)q->rec_len);
		}
		if (!w->broken && !s->err) {
			q->res = 0;
			q->loc = kvt__nvme_loc(s->off, t->regions[s->region].seq);
			kvt__nvme_health(t, 0);
			KVT_NVME_SET(t, st.full, false);
			KVT_NVME_ADD(t, st.writes, 1);
			KVT_NVME_ADD(t, st.write_bytes, q->rec_len);
			w->ok++;
			kvt__nvme_quota_trim(t, h.tenant);
			w->src->done(w->src->arg, q);
			continue;
		}
		if (!w->broken) {
			w->broken = true;
			/* reuse the failed record's place only when its header block was never
			 * issued (the block still holds the zero terminator before it); a header
			 * that may have landed must never sit over a later record's body. No record
			 * is placed after a failure in this run (write_more), so none lands there.
			 */
			t->regions[s->region].wp =
			    jb[J_HEAD].issued
			        ? t->region_bytes
			        : s->off - (t->data_off + s->region * t->region_bytes);
			if (jb[J_HEAD].issued && !KVT_NEVER(w->n_fence == KVT_ARRAY_SIZE(w->fence)))
				w->fence[w->n_fence].off = s->off,
				w->fence[w->n_fence++].region = s->region;
		}
		q->res = s->err && s->err != -ECANCELED ? s->err : -EAGAIN;
		write_failed(t, q->res);
		w->src->done(w->src->arg, q);
	}
}

static size_t nvme_write_stream(struct kvt_tier *tier, const struct kvt_tier_wsource *src)
{
	struct wrun w = {.t = NV(tier), .src = src};
	while (write_run(&w))
		;
	kvt__nvme_bury_due(w.t);         /* graves of this write's quota trims, and any waiting */
	kvt__nvme_sum_write_due(w.t, 4); /* regions the head left (summary.c) */
	return w.ok;
}

/* write_batch: a stream whose source is the caller's array */
struct wreq_array {
	struct kvt_tier_wreq *reqs;
	size_t n, next;
};

static struct kvt_tier_wreq *array_pull(void *arg)
{
	struct wreq_array *a = arg;
	return a->next < a->n ? &a->reqs[a->next++] : NULL;
}

static void array_done(void *arg, struct kvt_tier_wreq *q)
{
	(void)arg, (void)q;
}

static size_t nvme_write_batch(struct kvt_tier *tier, struct kvt_tier_wreq *reqs, size_t n)
{
	struct wreq_array a = {reqs, n, 0};
	const struct kvt_tier_wsource src = {.pull = array_pull, .done = array_done, .arg = &a};
	return nvme_write_stream(tier, &src);
}

static int nvme_write(struct kvt_tier *tier, const void *buf, size_t rec_len, size_t buf_len,
                      uint64_t *loc)
{
	struct kvt_tier_wreq q = {.buf = buf, .rec_len = rec_len, .buf_len = buf_len};
	nvme_write_batch(tier, &q, 1);
	if (!q.res)
		*loc = q.loc;
	return q.res;
}

static bool same_id(const struct kvt_chunk_hdr *h, const struct kvt_tier_id *id)
{
	return h->tenant == id->tenant && !memcmp(&h->ns, &id->ns, sizeof(h->ns)) &&
	       !memcmp(&h->key, &id->key, sizeof(h->key));
}

/* Checksums a read's pieces in file order as they land, while the rest of the batch is still in
 * flight, so that little is left to verify once its last piece is in. Pieces land in any order:
 * those ahead of the next one wait as bits (at most 64; past that the record is verified at the
 * end, as a whole). */
static void sum_landed(struct kvt__nvme_bstate *s, struct kvt_chunk_sum_state *sum,
                       const uint8_t *buf, size_t piece, size_t at)
{
	if (!s->summing)
		return;
	size_t k = (at - s->summed) / piece;
	if (k >= 64) {
		s->summing = false;
		return;
	}
	s->landed |= 1ull << k;
	for (; s->landed & 1; s->landed >>= 1, s->summed += piece) {
		size_t from = KVT_MAX(s->summed, (size_t)KVT_CHUNK_HDR_BYTES);
		size_t end = KVT_MIN(s->summed + piece, (size_t)s->rec_len);
		if (end > from)
			kvt_chunk_sum_add(sum, buf + from, end - from);
	}
}

static void read_landed(void *arg, struct kvt__nvme_batch *b, unsigned j, size_t at, size_t len)
{
	struct kvt_nvme *t = arg;
	(void)len;
	sum_landed(&t->bstate[j], &t->bsum[j], b->jobs[j].buf, b->piece, at);
}

/* A read that landed whole: its header must be want's and its payload's checksum hold.
 * @return : 0 or -EBADMSG. */
static int read_verify(struct kvt_nvme *t, const struct kvt__nvme_bstate *s,
                       struct kvt_chunk_sum_state *sum, const uint8_t *buf,
                       const struct kvt_chunk_hdr *want)
{
	const size_t payload = s->rec_len - KVT_CHUNK_HDR_BYTES;
	struct kvt_chunk_hdr h;
	if (kvt_chunk_hdr_decode(buf, &h) || !kvt__nvme_same_record(&h, want))
		return -EBADMSG;
	if (s->summing && s->summed >= s->rec_len) {
		KVT_NVME_ADD(t, xs.landed_sums, 1);
		return h.payload_bytes != payload || kvt_chunk_sum_end(sum) != h.payload_sum
		           ? -EBADMSG
		           : 0;
	}
	return kvt_chunk_verify(&h, buf + KVT_CHUNK_HDR_BYTES, payload) ? -EBADMSG : 0;
}

/* Verifies a record as soon as its read completes, while the rest of the batch is in flight. */
static void read_done(void *arg, struct kvt__nvme_batch *b, unsigned j)
{
	struct kvt_nvme *t = arg;
	struct kvt__nvme_bstate *s = &t->bstate[j];
	if (!(s->err = b->jobs[j].err))
		s->err = read_verify(t, s, &t->bsum[j], b->jobs[j].buf, &s->rec->h);
}

/* Looks up reqs[i]. @return : 0 with the record and its region, or the request's error. */
static int read_check(struct kvt_nvme *t, const struct kvt_tier_rreq *q, struct kvt__nvme_rec **rec,
                      uint64_t *r)
{
	if (KVT_NVME_GET(t, st.disabled))
		return -EAGAIN; /* kept for enable() (tier.h) */
	*rec = kvt__nvme_log_find(t, q->loc, r);
	if (!*rec || !same_id(&(*rec)->h, &q->id)) {
		KVT_NVME_ADD(t, st.misses, 1);
		return -ENOENT;
	}
	if (q->buf_len < KVT_ALIGN_UP((size_t)(*rec)->rec_len, (size_t)KVT_NVME_BLOCK))
		return -ENOBUFS;
	if ((uintptr_t)q->buf % KVT_TIER_ALIGN)
		return -EINVAL;
	return 0;
}

static void read_finish(struct kvt_nvme *t, struct kvt_tier_rreq *q, struct kvt__nvme_bstate *s)
{
	struct kvt__nvme_rec *rec = s->rec;
	if (s->err == -EBADMSG) {
		if (rec->alive) {
			KVT_NVME_ADD(t, st.corruptions, 1);
			kvt_log_rl(KVT_LOG_WARN, "nvme: %s: corrupt record at %llu dropped",
			           t->path, (unsigned long long)s->off);
			kvt__nvme_log_kill(t, s->region, rec, KVT_NVME_GRAVE_NOW);
		}
		q->res = -EBADMSG;
		return;
	}
	kvt__nvme_health(t, s->err);
	if (s->err) {
		if (s->err != -EAGAIN && rec->alive) {
			/* tombstoned, so that a delete the daemon can no longer send here is not
			 * undone by a restart that finds the record whole */
			KVT_NVME_ADD(t, xs.dropped_io, 1);
			kvt__nvme_log_kill(t, s->region, rec, KVT_NVME_GRAVE_NOW);
		}
		q->res = s->err;
		return;
	}
	rec->hit = true;
	rec->done = false; /* read again: the hint was wrong */
	KVT_NVME_ADD(t, st.hits, 1);
	KVT_NVME_ADD(t, st.reads, 1);
	KVT_NVME_ADD(t, st.read_bytes, rec->rec_len);
	q->res = (ssize_t)rec->rec_len;
}

/*
 * Reads riding a write stream (tier.h's pull_read). The engine asks for them at every turn of a
 * write run and issues them ahead of the writes not yet issued, so a promotion waits for one
 * write piece to complete rather than for the stream. A read beside the run's writes is safe:
 * the run writes only past its regions' write pointers and reclaims nothing once it is in
 * flight (place), so no record a read finds is written over before the run ends. The record
 * may still be appended past (its region's array of records may move) or dropped meanwhile (a
 * quota trim), so each read keeps a copy of what it reads (struct kvt__nvme_sread) and finds
 * the record again when it ends. A read verified whole ends at once; one that failed ends after
 * the run, since dropping its record writes a tombstone through the engine.
 */
static bool stream_read_join(void *arg, struct kvt__nvme_batch *b)
{
	struct wrun *w = arg;
	struct kvt_nvme *t = w->t;
	struct kvt_tier_rreq *q;
	bool any = false;
	while (w->nr < KVT_NVME_STREAM_READS && (q = w->src->pull_read(w->src->arg))) {
		struct kvt__nvme_rec *rec;
		uint64_t r;
		int rc = read_check(t, q, &rec, &r);
		if (rc) {
			q->res = rc;
			w->src->read_done(w->src->arg, q);
			continue;
		}
		unsigned k = w->nr++;
		uint64_t off = kvt__nvme_rec_off(t, r, rec);
		struct kvt__nvme_sread *sr = &t->sread[k];
		sr->q = q, sr->h = rec->h, sr->loc = q->loc, sr->owed = false;
		sr->s = (struct kvt__nvme_bstate){
		    .off = off, .region = r, .rec_len = rec->rec_len, .summing = true};
		kvt_chunk_sum_begin(&sr->sum);
		t->bjobs[w->nj++] = (struct kvt__nvme_job){
		    .off = off,
		    .buf = q->buf,
		    .len = KVT_ALIGN_UP((size_t)rec->rec_len, (size_t)KVT_NVME_BLOCK),
		    .op = KVT_NVME_READ,
		    .ready = true,
		    .urgent = true,
		    .tag = READ_TAG | k};
		KVT_NVME_ADD(t, xs.stream_reads, 1);
		any = true;
	}
	if (any)
		b->n = w->nj;
	return any;
}

static void stream_read_landed(void *arg, struct kvt__nvme_batch *b, unsigned j, size_t at,
                               size_t len)
{
	struct wrun *w = arg;
	(void)len;
	if (b->jobs[j].tag & READ_TAG) {
		struct kvt__nvme_sread *sr = &w->t->sread[b->jobs[j].tag & ~READ_TAG];
		sum_landed(&sr->s, &sr->sum, b->jobs[j].buf, b->piece, at);
	}
}

/* Ends read k of the run: its record found again, the read counted (read_finish), and the
 * source told. */
static void stream_read_end(struct wrun *w, unsigned k)
{
	struct kvt_nvme *t = w->t;
	struct kvt__nvme_sread *sr = &t->sread[k];
	struct kvt__nvme_bstate *s = &sr->s;
	struct kvt_tier_rreq *q = sr->q;
	uint64_t r;
	sr->owed = false;
	if (s->err == -ECANCELED) /* never issued: the record is kept, try again */
		s->err = -EAGAIN;
	s->rec = kvt__nvme_log_find(t, sr->loc, &r);
	if (!s->rec || !kvt__nvme_same_record(&s->rec->h, &sr->h)) {
		KVT_NVME_ADD(t, st.misses, 1); /* dropped while it was read: the daemon was told */
		q->res = -ENOENT;
	} else {
		s->region = r;
		read_finish(t, q, s);
	}
	w->src->read_done(w->src->arg, q);
}

static void stream_read_done(struct wrun *w, struct kvt__nvme_batch *b, unsigned j, unsigned k)
{
	struct kvt__nvme_sread *sr = &w->t->sread[k];
	if (!(sr->s.err = b->jobs[j].err))
		sr->s.err = read_verify(w->t, &sr->s, &sr->sum, b->jobs[j].buf, &sr->h);
	if (sr->s.err)
		sr->owed = true; /* after the run (above) */
	else
		stream_read_end(w, k);
}

static size_t nvme_read_batch(struct kvt_tier *tier, struct kvt_tier_rreq *reqs, size_t n)
{
	struct kvt_nvme *t = NV(tier);
	size_t ok = 0;
	for (size_t i = 0; i < n;) {
		unsigned m = 0;
		size_t total = 0;
		for (; i < n && m < KVT_NVME_BATCH_MAX; i++) {
			struct kvt_tier_rreq *q = &reqs[i];
			struct kvt__nvme_rec *rec;
			uint64_t r;
			int rc = read_check(t, q, &rec, &r);
			if (rc) {
				q->res = rc;
				continue;
			}
			size_t need = KVT_ALIGN_UP((size_t)rec->rec_len, (size_t)KVT_NVME_BLOCK);
			uint64_t off = kvt__nvme_rec_off(t, r, rec);
			t->bstate[m] = (struct kvt__nvme_bstate){.off = off,
			                                         .region = r,
			                                         .rec = rec,
			                                         .req = (uint32_t)i,
			                                         .rec_len = rec->rec_len,
			                                         .summing = true};
			kvt_chunk_sum_begin(&t->bsum[m]);
			t->bjobs[m] = (struct kvt__nvme_job){.off = off,
			                                     .buf = q->buf,
			                                     .len = need,
			                                     .op = KVT_NVME_READ,
			                                     .ready = true};
			total += need;
			m++;
		}
		if (!m)
			continue;
		struct kvt__nvme_batch b = {.jobs = t->bjobs,
		                            .n = m,
		                            .piece = (total + t->eng.depth - 1) / t->eng.depth,
		                            .done = read_done,
		                            .landed = read_landed,
		                            .arg = t};
		kvt__nvme_run(t, &b);
		for (unsigned k = 0; k < m; k++) {
			struct kvt_tier_rreq *q = &reqs[t->bstate[k].req];
			read_finish(t, q, &t->bstate[k]);
			ok += q->res > 0;
		}
	}
	return ok;
}

static ssize_t nvme_read(struct kvt_tier *tier, const struct kvt_tier_id *id, uint64_t loc,
                         void *buf, size_t buf_len)
{
	struct kvt_tier_rreq q = {.id = *id, .loc = loc, .buf = buf, .buf_len = buf_len};
	nvme_read_batch(tier, &q, 1);
	return q.res;
}

static int nvme_remove(struct kvt_tier *tier, const struct kvt_tier_id *id, uint64_t loc)
{
	struct kvt_nvme *t = NV(tier);
	uint64_t r;
	struct kvt__nvme_rec *rec = kvt__nvme_log_find(t, loc, &r);
	if (!rec || !same_id(&rec->h, id))
		return -ENOENT;
	void (*cb)(void *, const struct kvt_tier_id *, uint64_t) = t->env.dropped;
	t->env.dropped = NULL; /* the daemon asked: no callback */
	/* while the tier is disabled its tombstone waits with the graves for enable() */
	kvt__nvme_log_kill(
	    t, r, rec, KVT_NVME_GET(t, st.disabled) ? KVT_NVME_GRAVE_LATER : KVT_NVME_GRAVE_NOW);
	t->env.dropped = cb;
	return 0;
}

/* The engine is done with the record (kvt_done): no second chance (clock), no room keep, and no
 * hand-over to the next tier (cascade) -- reclaim drops it without reading it back. A
 * guarantee (nvme.quota) still keeps it. */
static void nvme_hint_done(struct kvt_tier *tier, const struct kvt_tier_id *id, uint64_t loc)
{
	uint64_t r;
	struct kvt__nvme_rec *rec = kvt__nvme_log_find(NV(tier), loc, &r);
	if (rec && same_id(&rec->h, id)) {
		rec->done = true;
		rec->hit = false;
	}
}

/* The chunk was read again at host after hint_done: as a read of the record clears the mark. */
static void nvme_hint_again(struct kvt_tier *tier, const struct kvt_tier_id *id, uint64_t loc)
{
	uint64_t r;
	struct kvt__nvme_rec *rec = kvt__nvme_log_find(NV(tier), loc, &r);
	if (rec && same_id(&rec->h, id) && rec->done) {
		rec->done = false;
		rec->hit = true;
	}
}

static int nvme_iterate(struct kvt_tier *tier, kvt_tier_visit_fn visit, void *arg)
{
	struct kvt_nvme *t = NV(tier);
	/* ring order from the oldest region: head+1, head+2, ..., head */
	for (uint64_t i = 1; i <= t->n_regions; i++) {
		uint64_t r = (t->head + i) % t->n_regions;
		struct kvt__nvme_region *R = &t->regions[r];
		for (uint32_t j = 0; R->seq && j < R->n_recs; j++) {
			if (!R->recs[j].alive)
				continue;
			uint64_t loc = kvt__nvme_loc(kvt__nvme_rec_off(t, r, &R->recs[j]), R->seq);
			int rc = visit(arg, &R->recs[j].h, loc);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static void nvme_stats(struct kvt_tier *tier, struct kvt_tier_stats *o)
{
	struct kvt_nvme *t = NV(tier);
	uint64_t *dst = (uint64_t *)o, *src = (uint64_t *)&t->st;
	size_t n = offsetof(struct kvt_tier_stats, disabled) / sizeof(uint64_t);
	for (size_t i = 0; i < n; i++)
		dst[i] =
		    __atomic_load_n(&src[i], __ATOMIC_ACQUIRE); /* ios_reaped before ios_queued */
	o->plain_ios = __atomic_load_n(&t->xs.plain_ios, __ATOMIC_RELAXED);
	o->pinned_bytes = atomic_load_explicit(&t->eng.pins.pinned_bytes, memory_order_relaxed);
	o->pin_failures = atomic_load_explicit(&t->eng.pins.failures, memory_order_relaxed);
	o->opened_from_index = __atomic_load_n(&t->xs.index_loads, __ATOMIC_RELAXED);
	o->opened_from_summaries = __atomic_load_n(&t->xs.sum_loaded, __ATOMIC_RELAXED);
	o->ios_reaped = __atomic_load_n(&t->xs.ios_reaped, __ATOMIC_ACQUIRE);
	o->ios_queued = __atomic_load_n(&t->xs.ios_queued, __ATOMIC_ACQUIRE);
	o->io_max_us = __atomic_load_n(&t->xs.io_max_us, __ATOMIC_RELAXED);
	o->io_books_wrong = __atomic_load_n(&t->xs.io_books_wrong, __ATOMIC_RELAXED);
	o->reads_beside_writes = __atomic_load_n(&t->xs.stream_reads, __ATOMIC_RELAXED);
	o->disabled = KVT_NVME_GET(t, st.disabled);
	o->full = KVT_NVME_GET(t, st.full);
}

static int nvme_enable(struct kvt_tier *tier)
{
	struct kvt_nvme *t = NV(tier);
	int rc = kvt__nvme_log_probe(t);
	if (rc)
		return rc;
	t->consecutive_err = 0;
	KVT_NVME_SET(t, st.full, false);
	KVT_NVME_SET(t, st.disabled, false);
	kvt__nvme_bury_due(t); /* the removes made while disabled */
	return 0;
}

int kvt_tier_nvme_register(struct kvt_tier *tier, void *base, size_t len)
{
	return kvt__nvme_register_regions(tier, base, len, KVT_NVME_PIN_REGION);
}

int kvt__nvme_register_regions(struct kvt_tier *tier, void *base, size_t len, size_t region)
{
	return kvt__nvme_pins_add(&NV(tier)->eng.pins, base, len, region);
}

void kvt__nvme_xstats(struct kvt_tier *tier, struct kvt__nvme_xstats *out)
{
	struct kvt_nvme *t = NV(tier);
	uint64_t *dst = (uint64_t *)out, *src = (uint64_t *)&t->xs;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] =
		    __atomic_load_n(&src[i], __ATOMIC_ACQUIRE); /* ios_reaped before ios_queued */
	out->pins = atomic_load_explicit(&t->eng.pins.pins, memory_order_relaxed);
	out->pin_failures = atomic_load_explicit(&t->eng.pins.failures, memory_order_relaxed);
}

void kvt__nvme_pin_wait(struct kvt_tier *tier)
{
	kvt__nvme_pins_wait(&NV(tier)->eng.pins);
}

int kvt_tier_nvme_ahead_due(struct kvt_tier *tier)
{
	return kvt__nvme_ahead_due(NV(tier));
}

size_t kvt_tier_nvme_evict_ahead(struct kvt_tier *tier, size_t max_bytes)
{
	return kvt__nvme_evict_ahead(NV(tier), max_bytes);
}

void kvt_tier_nvme_handover_landed(struct kvt_tier *tier, uint64_t loc)
{
	struct kvt_nvme *t = NV(tier);
	uint64_t off = (loc & ((1ull << 40) - 1)) << 12;
	if (KVT_NEVER(off < t->data_off))
		return;
	uint64_t r = (off - t->data_off) / t->region_bytes;
	if (KVT_NEVER(r >= t->n_regions))
		return;
	kvt__nvme_bury_later(t, loc); /* before the region may be taken back */
	uint32_t *q = &t->regions[r].handovers_queued;
	if (!KVT_NEVER(!__atomic_load_n(q, __ATOMIC_RELAXED)))
		__atomic_fetch_sub(q, 1, __ATOMIC_RELEASE);
}

const char *kvt_tier_nvme_backend(struct kvt_tier *tier)
{
	return NV(tier)->backend_name;
}

/* The log's reclaim, fifo or clock (reclaim.c), as a policy: kvtier policy get|set nvme. */
static void nvme_policy_get(struct kvt_tier *tier, char *name, size_t name_len)
{
	snprintf(name, name_len, "%s", NV(tier)->reinsert_hits ? "clock" : "fifo");
}

static int nvme_policy_set(struct kvt_tier *tier, const char *name, char *params, char *err,
                           size_t err_len)
{
	return kvt__nvme_policy_set(NV(tier), name, params, err, err_len);
}

static size_t nvme_tenant_usage(struct kvt_tier *tier, struct kvt_tier_tenant *out, size_t max)
{
	return kvt_tier_quota_usage(NV(tier)->quota, out, max);
}

static int nvme_quota_set(struct kvt_tier *tier, const char *list, char *err, size_t err_len)
{
	return kvt__nvme_quota_set(NV(tier), list, err, err_len);
}

/* The options nvme_open reads and could refuse, checked without a device (the quota's
 * guarantees against the tier's size are checked at open). */
static int nvme_check(const struct kvt_options *o, char *err, size_t err_len)
{
	char why[256];
	if (kvt__nvme_policy_check(kvt_opt_str(o, KVT_OPT_NVME_POLICY), NULL, why, sizeof(why))) {
		snprintf(err, err_len, "nvme.policy: %s", why);
		return -EINVAL;
	}
	const char *q = kvt_opt_str(o, KVT_OPT_NVME_QUOTA);
	if (kvt_quota_list_check(q, why, sizeof(why))) {
		snprintf(err, err_len, "nvme.quota: %s", why);
		return -EINVAL;
	}
	return 0;
}

const struct kvt_tier_ops kvt_tier_nvme = {
    .version = KVT_TIER_OPS_VERSION,
    .name = "nvme",
    .open = nvme_open,
    .close = nvme_close,
    .write = nvme_write,
    .read = nvme_read,
    .remove = nvme_remove,
    .iterate = nvme_iterate,
    .stats = nvme_stats,
    .enable = nvme_enable,
    .write_batch = nvme_write_batch,
    .read_batch = nvme_read_batch,
    .write_stream = nvme_write_stream,
    .policy_get = nvme_policy_get,
    .policy_set = nvme_policy_set,
    .tenant_usage = nvme_tenant_usage,
    .flags = KVT_TIER_HANDS_OVER,
    .quota_set = nvme_quota_set,
    .hint_done = nvme_hint_done,
    .hint_again = nvme_hint_again,
    .check = nvme_check,
};
