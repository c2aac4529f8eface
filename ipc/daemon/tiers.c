/*
 * tiers.c -- the persistent tiers below host (tiers.order, e.g. host,nvme,rocksdb): recovery at
 * start, demotion, promotion, removal, and the worker threads that do their I/O (their run-time
 * control and stats: tierctl.c).
 *
 * Placement is inclusive and written in the background: a chunk published at host is queued for
 * demotion into the first lower tier (admission permitting: nvme.admit=second_touch waits for
 * the chunk's second access), and with tiers.placement = cascade (the default) a tier that hands
 * over what it evicts (nvme: tier.h, KVT_TIER_HANDS_OVER) fills the next one from its evictions
 * (on_evicted) -- DESIGN.md's "eviction from a tier demotes the chunk to the next tier"; with
 * write-through every lower tier gets every chunk at put. While a demotion job reads the host
 * copy, the entry is not evictable (entry.jobs); once a lower tier holds it, host eviction just
 * drops the host copy.
 * So a put never waits for I/O unless the chunks still waiting to be demoted fill their share of
 * host (host.dirty_pct, store.c: the rest stays evictable, so a promotion finds room); then it is
 * parked for demote.wait_ms and fails with -EAGAIN (conn.c).
 *
 * A hit on a chunk that is only in a lower tier parks the acquire, reserves host space and
 * queues a promotion: the worker reads the record straight into the pool (the tier verifies the
 * header, identity and checksum), and the completion publishes the host copy and resumes the
 * acquire. A failed or corrupt read is a miss, never a wrong byte.
 *
 * Threads: the event loop owns the index and queues jobs; each lower tier has a worker thread
 * that runs its jobs in order (promotions before demotions and hand-overs, so a get does not wait
 * behind a write backlog: a write stream stops for a waiting promotion, and a reclaim's
 * hand-overs are queued as jobs of the next tier's worker, on_evicted) and hands finished jobs
 * back through its list and the eventfd. So an nvme promotion never waits behind a RocksDB write,
 * and the tiers' I/O overlaps (write-through demotes ~2x faster, docs/bench.md). A tier's own
 * drops (FIFO reclaim, detected corruption) arrive from inside its worker through env->dropped
 * and travel back the same way, as do its moves (env->moved: nvme.quota copies guaranteed records
 * forward at reclaim). A promotion that read a moved record's old place is sent again to the new
 * one. Each tier has a mutex, since the loop may also call it (pool registration, enable) and,
 * for a hand-over past HANDOVER_HARD_BYTES, the worker of the tier above.
 */
#include "daemon.h"
#include "core/chunk.h"
#include "core/log.h"
#include "core/util.h"
#include "policy/mrc.h"
#include "tiers/tier.h"
#ifdef KVT_HAVE_TIER_NVME
#include "tiers/nvme/nvme.h"
#endif

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

enum job_kind {
	JOB_DEMOTE,
	JOB_PROMOTE,
	JOB_REMOVE,
	JOB_DROPPED,
	JOB_MOVED,
	JOB_CASCADED,
	JOB_DONE /* kvt_done: the tier's policy offers the record first */
};

struct kvd_job {
	struct kvd_job *next;
	uint8_t kind, tier, tries;
	uint32_t entry;
	uint64_t again_since; /* a demotion: when the tier first pushed it back (-EAGAIN), or 0 */
	uint64_t from_loc;    /* a queued hand-over: where the tier above still keeps it */
	uint8_t from_tier;
	bool from_kept; /* ... until handover_free tells it (kvt_tier_nvme_handover_landed) */
	uint64_t seq;   /* the entry version this job belongs to */
	struct kvt_tier_id id;
	uint64_t loc;
	uint64_t moved_to; /* JOB_MOVED: the record at loc is now here */
	uint8_t *buf;      /* the host record (demote: source; promote: destination) */
	uint64_t off;
	size_t rec_len, buf_len;
	ssize_t result;
	struct kvt_tier_wreq wr; /* a demotion in a write stream */
};

/* Hand-overs (on_evicted) waiting as copies for the next tier's worker: past the first,
 * demotions into the tier above wait for them; past the second, a hand-over is not copied but
 * written at once, inside the reclaim that made it. */
#define HANDOVER_SOFT_BYTES ((uint64_t)64 << 20)
#define HANDOVER_HARD_BYTES ((uint64_t)192 << 20)

/* How long a demotion the tier pushes back (-EAGAIN: a RocksDB write stall) is tried again
 * before it counts as failed. The chunk stays at host meanwhile, its bytes in host.dirty_pct's
 * share, so a long stall slows puts (demote.wait_ms, then -EAGAIN) instead of dropping chunks.
 * The worker waits 1 ms after a pushed-back batch, twice as long each time in a row, to 8 ms
 * (a promotion queued behind it waits that long at most). */
#define DEMOTE_STALL_NS   ((uint64_t)10 * 1000 * 1000 * 1000)
#define STALL_WAIT_MAX_US 8000

/* The worker thread of one lower tier: its jobs, and the finished ones for the loop. */
struct kvd_worker {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct kvd_job *promote_head, **promote_tail;
	struct kvd_job *handover_head, **handover_tail; /* JOB_CASCADED with their copies */
	struct kvd_job *other_head, **other_tail;
	struct kvd_job *done;
	bool stop;
	bool started;
	uint8_t tier;                    /* d->lower[tier] */
	_Atomic uint64_t handover_bytes; /* copies handed to this tier, not yet written */
	struct kvd *d;
};

/* Tier k's worker, or NULL (tiers being opened or closed). */
static struct kvd_worker *worker_of(const struct kvd *d, uint8_t k)
{
	return d->workers && d->workers[k].started ? &d->workers[k] : NULL;
}

static void push(struct kvd_job **head, struct kvd_job ***tail, struct kvd_job *j)
{
	j->next = NULL;
	**tail = j;
	*tail = &j->next;
	(void)head;
}

static struct kvd_job *pop(struct kvd_job **head, struct kvd_job ***tail)
{
	struct kvd_job *j = *head;
	if (j) {
		*head = j->next;
		if (!*head)
			*tail = head;
	}
	return j;
}

static void finish(struct kvd_worker *w, struct kvd_job *j)
{
	pthread_mutex_lock(&w->lock);
	j->next = w->done;
	w->done = j;
	pthread_mutex_unlock(&w->lock);
	uint64_t one = 1;
	if (write(w->d->evfd, &one, sizeof(one)) < 0)
		kvt_log_rl(KVT_LOG_WARN, "eventfd: %s", strerror(errno));
}

/* env->dropped: called by a tier from inside the worker (or during open, from the loop). */
struct dropped_ctx {
	struct kvd *d;
	uint8_t tier;
};
static struct dropped_ctx dropped_ctx[KVD_MAX_LOWER];

static void tell_loop(struct dropped_ctx *cx, uint8_t kind, const struct kvt_tier_id *id,
                      uint64_t loc, uint64_t moved_to)
{
	struct kvd_job *j = calloc(1, sizeof(*j));
	if (!j)
		return; /* the index keeps a stale location: a later read misses and drops it */
	j->kind = kind;
	j->tier = cx->tier;
	j->id = *id;
	j->loc = loc;
	j->moved_to = moved_to;
	struct kvd_worker *w = worker_of(cx->d, cx->tier);
	if (w)
		finish(w, j);
	else
		free(j);
}

static void on_dropped(void *arg, const struct kvt_tier_id *id, uint64_t loc)
{
	tell_loop(arg, JOB_DROPPED, id, loc, 0);
}

static void on_moved(void *arg, const struct kvt_tier_id *id, uint64_t from, uint64_t to)
{
	tell_loop(arg, JOB_MOVED, id, from, to);
}

/* Writes a handed-over record into tier l, on the worker. @return : as the tier's write. */
static int write_handover(struct kvd_lower *l, const void *rec, size_t rec_len, uint64_t *loc)
{
	uint64_t t0 = kvt_now_ns();
	pthread_mutex_lock(&l->lock);
	int rc;
	for (int tries = 0;; tries++) { /* a RocksDB write stall: a moment, then give up */
		rc = l->ops->write(l->t, rec, rec_len,
		                   KVT_ALIGN_UP(rec_len, (size_t)KVT_TIER_ALIGN), loc);
		if (rc != -EAGAIN || tries == 3)
			break;
		usleep(1000);
	}
	pthread_mutex_unlock(&l->lock);
	atomic_fetch_add_explicit(&l->busy_ns, kvt_now_ns() - t0, memory_order_relaxed);
	return rc;
}

/* Frees a hand-over's copy; the tier it came from may now write over the record's old place
 * (the copy landed below, or was given up). */
static void handover_free(struct kvd_worker *w, struct kvd_job *j)
{
	if (!j->buf)
		return;
	free(j->buf);
	j->buf = NULL;
	atomic_fetch_sub_explicit(&w->handover_bytes, j->buf_len, memory_order_relaxed);
#ifdef KVT_HAVE_TIER_NVME
	struct kvd_lower *from = &w->d->lower[j->from_tier];
	if (j->from_kept && from->ops == &kvt_tier_nvme)
		kvt_tier_nvme_handover_landed(from->t, j->from_loc);
#endif
	j->from_kept = false;
}

/*
 * env->evicted (tiers.placement = cascade): tier k is about to drop a record for room, and it
 * goes into tier k + 1. When tier k evicts ahead (later: it keeps the record's place until told),
 * as a copy, written later as its own job (JOB_CASCADED with buf), so that a promotion waits for
 * one record's write, not for every record a step hands over: the loop first holds the entry for
 * it (entry.jobs: the chunk stays, and a get waits for the write instead of missing), then
 * queues it, and handover_free tells tier k when it landed. At a reclaim (no later), or with
 * HANDOVER_HARD_BYTES of copies waiting, it is written at once from the bytes tier k read back,
 * holding tier k's lock, so that no crash finds it in neither tier: the one place where the
 * worker holds two tiers' locks, always the upper one first, and the loop never holds one while
 * taking another, so they cannot deadlock. Either way the loop hears of the new copy before it
 * hears of the drop (JOB_DROPPED), so the chunk never looks lost in between.
 */
static int on_evicted(void *arg, const struct kvt_tier_id *id, uint64_t loc, const void *rec,
                      size_t rec_len, bool read, bool later)
{
	struct dropped_ctx *cx = arg;
	struct kvd *d = cx->d;
	uint8_t next = (uint8_t)(cx->tier + 1);
	if (next >= d->n_lower) /* auto left the next tier out: tell the tier to stop reading */
		return -ENOENT;
	/* w: this tier's worker, whose list orders the loop's news (this, then the drop); to:
	 * the next tier's, which writes the copy and counts it */
	struct kvd_worker *w = worker_of(d, cx->tier), *to = worker_of(d, next);
	if (!rec || !w || !to)
		return 0;
	struct kvd_lower *l = &d->lower[next];
	struct kvd_job *j = calloc(1, sizeof(*j));
	struct kvt_chunk_hdr h;
	if (!j)
		return 0; /* dropped, as without cascade */
	j->kind = JOB_CASCADED;
	j->tier = next;
	j->entry = KVD_NIL;
	j->id = *id;
	j->rec_len = rec_len;
	j->seq = kvt_chunk_hdr_decode(rec, &h) ? 0 : h.seq; /* the tier verified it */
	/* TIER.admit = second_touch below a cascading tier: only records read while they were
	 * in it (set by the loop: config set; read here as it is now) */
	if (!read && __atomic_load_n(&l->second_touch, __ATOMIC_RELAXED)) {
		j->result = 1; /* not admitted */
		finish(w, j);
		return 0;
	}
	size_t len = KVT_ALIGN_UP(rec_len, (size_t)KVT_TIER_ALIGN);
	if (later &&
	    atomic_load_explicit(&to->handover_bytes, memory_order_relaxed) + len <=
	        HANDOVER_HARD_BYTES &&
	    (j->buf = aligned_alloc(KVT_TIER_ALIGN, len))) {
		memcpy(j->buf, rec, rec_len);
		j->buf_len = len;
		j->from_tier = cx->tier, j->from_loc = loc, j->from_kept = true;
		atomic_fetch_add_explicit(&to->handover_bytes, len, memory_order_relaxed);
		finish(w, j);
		return 1; /* the tier keeps the record's place until handover_free */
	}
	j->result = write_handover(l, rec, rec_len, &j->loc);
	finish(w, j);
	return 0;
}

/* A hand-over's copy, queued by the loop: written into its tier, freed, and back to the loop. */
static void run_handover(struct kvd_worker *w, struct kvd_job *j)
{
	j->result = write_handover(&w->d->lower[j->tier], j->buf, j->rec_len, &j->loc);
	handover_free(w, j);
	finish(w, j);
}

static void run_job(struct kvd *d, struct kvd_job *j)
{
	struct kvd_lower *l = &d->lower[j->tier];
	pthread_mutex_lock(&l->lock);
	switch (j->kind) {
	case JOB_DEMOTE: {
		uint64_t loc = 0;
		j->result = l->ops->write(l->t, j->buf, j->rec_len, j->buf_len, &loc);
		j->loc = loc;
		break;
	}
	case JOB_PROMOTE:
		j->result = l->ops->read(l->t, &j->id, j->loc, j->buf, j->buf_len);
		if (j->result >= 0 && (size_t)j->result != j->rec_len)
			j->result = -EBADMSG;
		break;
	case JOB_REMOVE:
		j->result = l->ops->remove(l->t, &j->id, j->loc);
		break;
	case JOB_DONE:
		l->ops->hint_done(l->t, &j->id, j->loc);
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&l->lock);
}

#define BATCH_MAX 32
/* After a tier answers a read -EAGAIN (disabled, its database closed: the record is kept), how
 * long promotions skip it (its enable ends the wait): without it a parked get would ask again at
 * once, and again, until its deadline. */
#define READS_AGAIN_NS (1000ull * 1000 * 1000)

/* Runs jobs of one kind for one tier through the tier's batched op: the whole batch stays in
 * flight at the tier's queue depth (tier.h). */
static void run_batch(struct kvd *d, struct kvd_job **jobs, size_t n)
{
	struct kvd_lower *l = &d->lower[jobs[0]->tier];
	pthread_mutex_lock(&l->lock);
	if (jobs[0]->kind == JOB_DEMOTE) {
		struct kvt_tier_wreq r[BATCH_MAX];
		for (size_t i = 0; i < n; i++)
			r[i] = (struct kvt_tier_wreq){.buf = jobs[i]->buf,
			                              .rec_len = jobs[i]->rec_len,
			                              .buf_len = jobs[i]->buf_len};
		l->ops->write_batch(l->t, r, n);
		for (size_t i = 0; i < n; i++)
			jobs[i]->result = r[i].res, jobs[i]->loc = r[i].loc;
	} else {
		struct kvt_tier_rreq r[BATCH_MAX];
		for (size_t i = 0; i < n; i++)
			r[i] = (struct kvt_tier_rreq){.id = jobs[i]->id,
			                              .loc = jobs[i]->loc,
			                              .buf = jobs[i]->buf,
			                              .buf_len = jobs[i]->buf_len};
		l->ops->read_batch(l->t, r, n);
		for (size_t i = 0; i < n; i++) {
			jobs[i]->result = r[i].res;
			if (r[i].res >= 0 && (size_t)r[i].res != jobs[i]->rec_len)
				jobs[i]->result = -EBADMSG;
		}
	}
	pthread_mutex_unlock(&l->lock);
}

/* Whether hand-overs' copies are past HANDOVER_SOFT_BYTES: demotions wait for them. */
static bool handover_due(struct kvd_worker *w)
{
	return atomic_load_explicit(&w->handover_bytes, memory_order_relaxed) >=
	       HANDOVER_SOFT_BYTES;
}

/* Whether w's tier hands over to a next tier whose worker has HANDOVER_SOFT_BYTES waiting:
 * then demotions into w's tier (which make more) and evicting ahead wait for it. */
static bool below_due(struct kvd_worker *w)
{
	struct kvd_worker *to = w->d->lower[w->tier].cascades ? worker_of(w->d, w->tier + 1) : NULL;
	return to && handover_due(to);
}

/* Whether tier l (nvme, cascading) would hand over ahead of its head: 1 between other jobs
 * (evict_ahead_step), 2 before it writes on (a write stream stops for it). Caller holds
 * l->lock. */
static int ahead_due(struct kvd_lower *l)
{
#ifdef KVT_HAVE_TIER_NVME
	return l->cascades && l->ops == &kvt_tier_nvme ? kvt_tier_nvme_ahead_due(l->t) : 0;
#else
	(void)l;
	return 0;
#endif
}

/* One step of evicting ahead (tiers/nvme/nvme.h) in a cascading tier that is due, unless
 * hand-overs wait already: AHEAD_STEP_BYTES read back and handed over, as a job of its own
 * between others, so a promotion waits for a step rather than for a write's reclaim of a whole
 * region. Caller holds w->lock, released during the step. @return : whether it did one. */
#define AHEAD_STEP_BYTES ((size_t)2 << 20)
static bool evict_ahead_step(struct kvd_worker *w)
{
	struct kvd_lower *l = &w->d->lower[w->tier];
	if (!l->cascades || below_due(w))
		return false;
	bool did = false;
	pthread_mutex_unlock(&w->lock);
	uint64_t t0 = kvt_now_ns();
	pthread_mutex_lock(&l->lock);
#ifdef KVT_HAVE_TIER_NVME
	did = l->ops == &kvt_tier_nvme && kvt_tier_nvme_evict_ahead(l->t, AHEAD_STEP_BYTES);
#endif
	pthread_mutex_unlock(&l->lock);
	if (did)
		atomic_fetch_add_explicit(&l->busy_ns, kvt_now_ns() - t0, memory_order_relaxed);
	pthread_mutex_lock(&w->lock);
	return did;
}

/* A write stream (tier.h): the demotions take() gave, then those queued behind them while the
 * earlier ones are in flight, until a promotion waits, the loop waits for the tier's lock
 * (kvd_lower_lock) or none is left; each is finished as soon as the tier says it is done. */
struct stream {
	struct kvd_worker *w;
	struct kvd_lower *l;
	struct kvd_job **jobs;
	size_t n, next;
	uint8_t tier;
	bool again;
};

static struct kvt_tier_wreq *stream_pull(void *arg)
{
	struct stream *s = arg;
	struct kvd_worker *w = s->w;
	struct kvd_job *j = NULL;
	if (s->next < s->n) {
		j = s->jobs[s->next++];
	} else if (!atomic_load_explicit(&s->l->waiters, memory_order_relaxed)) {
		pthread_mutex_lock(&w->lock);
		if (!w->promote_head && w->other_head && w->other_head->kind == JOB_DEMOTE &&
		    !below_due(w) && ahead_due(s->l) < 2)
			j = pop(&w->other_head, &w->other_tail);
		pthread_mutex_unlock(&w->lock);
	}
	if (!j)
		return NULL;
	j->wr = (struct kvt_tier_wreq){.buf = j->buf, .rec_len = j->rec_len, .buf_len = j->buf_len};
	return &j->wr;
}

static void stream_done(void *arg, struct kvt_tier_wreq *q)
{
	struct stream *s = arg;
	struct kvd_job *j = (struct kvd_job *)(void *)((char *)q - offsetof(struct kvd_job, wr));
	j->result = q->res;
	j->loc = q->loc;
	s->again |= q->res == -EAGAIN;
	finish(s->w, j);
}

/* Runs demotions as a write stream. @return : whether the tier pushed back (-EAGAIN). */
static bool run_stream(struct kvd_worker *w, struct kvd_job **jobs, size_t n)
{
	struct kvd_lower *l = &w->d->lower[jobs[0]->tier];
	struct stream s = {.w = w, .l = l, .jobs = jobs, .n = n, .tier = jobs[0]->tier};
	const struct kvt_tier_wsource src = {stream_pull, stream_done, &s};
	pthread_mutex_lock(&l->lock);
	l->ops->write_stream(l->t, &src);
	pthread_mutex_unlock(&l->lock);
	return s.again;
}

/* Takes the next job and, when the tier can batch it, the queued jobs just behind it of the
 * same kind and tier. Order: promotions; then demotions and removals, unless hand-overs hold
 * HANDOVER_SOFT_BYTES (the demotions make more of them) or nothing else waits. Caller holds
 * w->lock. @return : how many (0: stop). */
static size_t take(struct kvd_worker *w, struct kvd_job **jobs)
{
	/* stopping: finish queued demotions, removals and hand-overs (what a graceful stop owes
	 * the next start), drop promotions (nobody waits for them any more) */
	struct kvd_job **head = &w->promote_head, ***tail = &w->promote_tail;
	if (w->stop || !*head)
		head = &w->other_head, tail = &w->other_tail;
	if (head != &w->promote_head && w->handover_head) /* the tier above waits to reuse */
		head = &w->handover_head, tail = &w->handover_tail; /* their places (evict ahead) */
	struct kvd_job *j = pop(head, tail);
	if (!j)
		return 0;
	jobs[0] = j;
	const struct kvt_tier_ops *ops = w->d->lower[j->tier].ops;
	/* a write stream pulls the demotions behind the first itself, one by one, and stops
	 * for a promotion; taken here, a batch would all be written first */
	bool batchable = (j->kind == JOB_DEMOTE && ops->write_batch && !ops->write_stream) ||
	                 (j->kind == JOB_PROMOTE && ops->read_batch);
	size_t n = 1;
	while (batchable && n < BATCH_MAX && *head && (*head)->kind == j->kind &&
	       (*head)->tier == j->tier)
		jobs[n++] = pop(head, tail);
	return n;
}

/* Whether w's next job is a demotion that waits for the tier below to take its hand-overs
 * (below_due). Caller holds w->lock. */
static bool held_back(struct kvd_worker *w)
{
	return !w->stop && !w->promote_head && !w->handover_head && w->other_head &&
	       w->other_head->kind == JOB_DEMOTE && below_due(w);
}

static struct kvd_entry *job_entry(struct kvd *d, const struct kvd_job *j);
static struct kvd_entry *handover_entry(struct kvd *d, const struct kvd_job *j, uint32_t *id);

static void remove_now(struct kvd_lower *l, struct kvd_job *j)
{
	pthread_mutex_lock(&l->lock);
	l->ops->remove(l->t, &j->id, j->loc);
	pthread_mutex_unlock(&l->lock);
	j->result = -ECANCELED; /* nothing left for the loop, were it to see it */
}

/* Whether j (done, the loop stopped) wrote a copy that nobody owns: its chunk was deleted (or
 * replaced) meanwhile. The loop would take it back out (complete_demote, complete_cascaded);
 * stopped, it cannot, and the next start would find the copy. The loop runs no more while the
 * workers stop (kvd_tiers_close), so the index may be read here. */
static bool owes_removal(struct kvd *d, const struct kvd_job *j)
{
	uint32_t id;
	const struct kvd_entry *e;
	if (j->kind == JOB_DEMOTE && j->result == 0)
		return !(e = job_entry(d, j)) || e->state != KVD_PUBLISHED;
	if (j->kind == JOB_CASCADED && !j->buf && j->result == 0)
		return !handover_entry(d, j, &id);
	return false;
}

/*
 * Stopping, the loop no longer reads w->done, so the worker does there what the loop would: the
 * hand-overs it made as copies (evicting ahead, before the stop) are written into the tier below
 * now, since their records' places in this tier wait for them; and a demotion this tier pushed
 * back (-EAGAIN: a place still waiting, a RocksDB write stall) goes round again, for
 * DEMOTE_STALL_NS as complete_demote allows. Without this a demotion the stop owed could fail
 * on a place that only the stop itself would have freed. A copy whose chunk was deleted
 * meanwhile is not written, or is taken back out (owes_removal), so that the next start does
 * not find it. @return : whether one went round.
 */
static bool stop_again(struct kvd_worker *w)
{
	pthread_mutex_lock(&w->lock);
	struct kvd_job *j = w->done, *keep = NULL, *next;
	w->done = NULL;
	pthread_mutex_unlock(&w->lock);
	bool again = false;
	uint64_t now = kvt_now_ns();
	for (; j; j = next) {
		next = j->next;
		uint32_t id;
		if (j->kind == JOB_CASCADED && j->buf) {
			/* a deleted chunk's copy is not written: its old place is let go */
			j->result =
			    handover_entry(w->d, j, &id)
			        ? write_handover(&w->d->lower[j->tier], j->buf, j->rec_len, &j->loc)
			        : -ECANCELED;
			handover_free(&w->d->workers[j->tier], j);
		} else if (owes_removal(w->d, j)) {
			remove_now(&w->d->lower[j->tier], j);
		} else if (j->kind == JOB_DEMOTE && j->result == -EAGAIN &&
		           (!j->again_since || now - j->again_since < DEMOTE_STALL_NS)) {
			if (!j->again_since)
				j->again_since = now;
			pthread_mutex_lock(&w->lock);
			push(&w->other_head, &w->other_tail, j);
			pthread_mutex_unlock(&w->lock);
			again = true;
			continue;
		}
		j->next = keep;
		keep = j;
	}
	pthread_mutex_lock(&w->lock);
	while ((j = keep)) {
		keep = j->next;
		j->next = w->done;
		w->done = j;
	}
	pthread_mutex_unlock(&w->lock);
	return again;
}

static void *worker_main(void *arg)
{
	struct kvd_worker *w = arg;
	struct kvd_job *jobs[BATCH_MAX];
	useconds_t stall_us = 1000;
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->stop && !w->promote_head && !w->other_head && !w->handover_head)
			pthread_cond_wait(&w->cond, &w->lock);
		if (held_back(w)) { /* looked at again in a millisecond, or at the next job */
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 1000000;
			if (ts.tv_nsec >= 1000000000)
				ts.tv_sec++, ts.tv_nsec -= 1000000000;
			pthread_cond_timedwait(&w->cond, &w->lock, &ts);
			continue;
		}
		if (!w->stop && !w->promote_head && evict_ahead_step(w))
			continue;
		size_t n = take(w, jobs);
		if (!n) { /* stopping, and nothing left but what is done: its copies go down now */
			pthread_mutex_unlock(&w->lock);
			bool again = stop_again(w);
			pthread_mutex_lock(&w->lock);
			if (again)
				continue;
			break;
		}
		pthread_mutex_unlock(&w->lock);
		if (jobs[0]->kind == JOB_CASCADED) { /* counts its own busy time */
			run_handover(w, jobs[0]);
			pthread_mutex_lock(&w->lock);
			continue;
		}
		struct kvd_lower *l = &w->d->lower[jobs[0]->tier];
		uint64_t t0 = kvt_now_ns();
		bool again = false;
		if (jobs[0]->kind == JOB_DEMOTE && l->ops->write_stream) {
			again = run_stream(w, jobs, n); /* finishes its jobs itself */
		} else {
			if (n > 1)
				run_batch(w->d, jobs, n);
			else
				run_job(w->d, jobs[0]);
			for (size_t i = 0; i < n; i++) {
				again |= jobs[i]->result == -EAGAIN;
				finish(w, jobs[i]);
			}
		}
		atomic_fetch_add_explicit(&l->busy_ns, kvt_now_ns() - t0, memory_order_relaxed);
		if (__atomic_load_n(&w->stop,
		                    __ATOMIC_RELAXED)) /* set under w->lock, never unset */
			again = stop_again(w);
		if (again) { /* the tier pushes back (a RocksDB write stall): let it catch up */
			usleep(stall_us);
			stall_us =
			    stall_us * 2 > STALL_WAIT_MAX_US ? STALL_WAIT_MAX_US : stall_us * 2;
		} else {
			stall_us = 1000;
		}
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void submit(struct kvd *d, struct kvd_job *j)
{
	struct kvd_worker *w = worker_of(d, j->tier);
	if (KVT_NEVER(!w)) { /* jobs are made once every worker runs */
		if (j->kind == JOB_CASCADED)
			free(j->buf); /* a hand-over's copy; other jobs' buffers are the pool's */
		free(j);
		return;
	}
	pthread_mutex_lock(&w->lock);
	if (j->kind == JOB_PROMOTE)
		push(&w->promote_head, &w->promote_tail, j);
	else if (j->kind == JOB_CASCADED)
		push(&w->handover_head, &w->handover_tail, j);
	else
		push(&w->other_head, &w->other_tail, j);
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static void close_workers(struct kvd *d);

/* A worker per lower tier, so that a promotion from one never waits behind another's I/O (a
 * RocksDB write behind an nvme read) and the tiers' I/O overlaps. Each is set up before any runs
 * (they look at each other: hand-overs). @return : 0, -ENOMEM, -EAGAIN. */
static int start_workers(struct kvd *d)
{
	struct kvd_worker *ws = calloc(d->n_lower, sizeof(*ws));
	if (!ws)
		return -ENOMEM;
	for (uint8_t k = 0; k < d->n_lower; k++) {
		struct kvd_worker *w = &ws[k];
		pthread_mutex_init(&w->lock, NULL);
		pthread_cond_init(&w->cond, NULL);
		w->promote_tail = &w->promote_head;
		w->handover_tail = &w->handover_head;
		w->other_tail = &w->other_head;
		w->d = d;
		w->tier = k;
		w->started = true;
	}
	d->workers = ws;
	for (uint8_t k = 0; k < d->n_lower; k++) {
		if (!pthread_create(&ws[k].thread, NULL, worker_main, &ws[k]))
			continue;
		for (uint8_t i = k; i < d->n_lower; i++)
			ws[i].started = false; /* no thread: nothing to stop */
		close_workers(d);
		return -EAGAIN;
	}
	return 0;
}

/* Recovery: one record found in lower tier k. */
struct recover_ctx {
	struct kvd *d;
	uint8_t tier;
};

static int recover_one(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	struct recover_ctx *rc = arg;
	struct kvd *d = rc->d;
	uint32_t t;
	if (kvd_tenant_get(d, h->tenant, &t))
		return 0;
	uint32_t id = kvd_index_find(&d->idx, t, h->ns, h->key);
	if (id == KVD_NIL) {
		id = kvd_index_alloc(&d->idx,
		                     (uint32_t)kvt_opt_u64(&d->opts, KVT_OPT_INDEX_MAX_CHUNKS));
		if (id == KVD_NIL)
			return 1; /* index full: stop */
		struct kvd_entry *e = &d->idx.e[id];
		e->key = h->key, e->ns = h->ns, e->parent = h->parent;
		e->has_parent = (h->flags & KVT_CHUNK_F_HAS_PARENT) != 0;
		e->payload_bytes = (uint32_t)h->payload_bytes, e->tenant = t;
		e->seq = h->seq, e->codec = h->codec, e->state = KVD_PUBLISHED;
		kvd_index_insert(&d->idx, id);
		kvd_shmidx_insert(d, t, h->key);
	}
	struct kvd_entry *e = &d->idx.e[id];
	if (e->payload_bytes != h->payload_bytes)
		return 0; /* two versions disagree: keep the first seen (fastest tier) */
	e->where |= (uint8_t)(2u << rc->tier);
	e->loc[rc->tier] = loc;
	if (h->seq > d->seq_counter)
		d->seq_counter = h->seq;
	d->st.recovered++;
	return 0;
}

/*
 * tiers.order = auto: host, then every persistent tier this build has, fastest first (DESIGN.md:
 * the embedded default keeps chunks in nvme and rocksdb under the data directory). A tier
 * named by the operator that cannot open stops the start; one that auto chose is left out with
 * a warning, so that `kvtierd` with no configuration starts on any machine.
 */
static const char *const auto_order[] = {"nvme", "rocksdb"};

/* tiers.order into order, auto spelled out. */
static void tiers_order(const struct kvt_options *o, char *order, size_t len)
{
	snprintf(order, len, "%s", kvt_opt_str(o, KVT_OPT_TIERS_ORDER));
	if (strcmp(order, "auto"))
		return;
	size_t n = (size_t)snprintf(order, len, "host");
	for (size_t i = 0; i < sizeof(auto_order) / sizeof(auto_order[0]); i++)
		if (kvt_tier_find(auto_order[i]) && n < len)
			n += (size_t)snprintf(order + n, len - n, ",%s", auto_order[i]);
}

int kvd_tiers_check(const struct kvt_options *o)
{
	char order[KVT_OPT_STR_MAX], *save = NULL;
	tiers_order(o, order, sizeof(order));
	const char *placement = kvt_opt_str(o, KVT_OPT_TIERS_PLACEMENT);
	if (strcmp(placement, "cascade") && strcmp(placement, "write-through")) {
		kvt_log(KVT_LOG_ERROR, "tiers.placement: '%s' is not cascade or write-through",
		        placement);
		return -EINVAL;
	}
	bool seen_host = false;
	int n_lower = 0;
	const struct kvt_tier_ops *seen[KVD_MAX_LOWER];
	for (char *name = strtok_r(order, ", ", &save); name; name = strtok_r(NULL, ", ", &save)) {
		if (!seen_host && !n_lower && strcmp(name, "host")) {
			/* "nvme,host" ran as host,nvme: the order said is not the one run */
			kvt_log(KVT_LOG_ERROR,
			        "tiers.order must start with host, the fastest tier (it starts "
			        "with %s)",
			        name);
			return -EINVAL;
		}
		const struct kvt_tier_ops *ops = kvt_tier_find(name);
		bool twice = !strcmp(name, "host") && seen_host;
		for (int k = 0; ops && k < n_lower && k < KVD_MAX_LOWER; k++)
			twice |= seen[k] == ops;
		if (twice) { /* the second open read "in use by another process" */
			kvt_log(KVT_LOG_ERROR, "tiers.order: %s is named twice", name);
			return -EINVAL;
		}
		if (!strcmp(name, "host")) {
			seen_host = true;
			continue;
		}
		if (!ops) {
			kvt_log(KVT_LOG_ERROR, "tiers.order: no tier named '%s' in this build",
			        name);
			return -EINVAL;
		}
		if (n_lower < KVD_MAX_LOWER)
			seen[n_lower] = ops;
		if (n_lower++ == KVD_MAX_LOWER) {
			kvt_log(KVT_LOG_ERROR, "tiers.order: at most %d tiers below host",
			        KVD_MAX_LOWER);
			return -EINVAL;
		}
		char opt[64], err[400];
		snprintf(opt, sizeof(opt), "%s.admit", name);
		int admit = kvt_opt_find(opt);
		if (admit >= 0 && kvd_config_check_admit(opt, o->str[admit], err, sizeof(err))) {
			kvt_log(KVT_LOG_ERROR, "%s", err);
			return -EINVAL;
		}
		if (ops->check && ops->check(o, err, sizeof(err))) {
			kvt_log(KVT_LOG_ERROR, "%s", err); /* a typo is not a missing device */
			return -EINVAL;
		}
	}
	if (!seen_host) {
		kvt_log(KVT_LOG_ERROR, "tiers.order must start with host");
		return -EINVAL;
	}
	return 0;
}

int kvd_tiers_open(struct kvd *d)
{
	char order[KVT_OPT_STR_MAX], *save = NULL;
	int rc = kvd_tiers_check(&d->opts);
	if (rc)
		return rc;
	tiers_order(&d->opts, order, sizeof(order));
	bool is_auto = !strcmp(kvt_opt_str(&d->opts, KVT_OPT_TIERS_ORDER), "auto");
	const char *placement = kvt_opt_str(&d->opts, KVT_OPT_TIERS_PLACEMENT);
	d->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->evfd < 0)
		return -errno;
	for (char *name = strtok_r(order, ", ", &save); name; name = strtok_r(NULL, ", ", &save)) {
		if (!strcmp(name, "host"))
			continue;
		const struct kvt_tier_ops *ops = kvt_tier_find(name); /* kvd_tiers_check found it */
		char opt[64];
		snprintf(opt, sizeof(opt), "%s.admit", name);
		int admit = kvt_opt_find(opt);
		uint8_t k = (uint8_t)d->n_lower;
		dropped_ctx[k] = (struct dropped_ctx){d, k};
		/* cascade: a tier that hands over its evictions, with a tier named after it, fills
		 * that one (should auto leave that one out, on_evicted tells the tier to stop) */
		bool cascade = !strcmp(placement, "cascade") &&
		               (ops->flags & KVT_TIER_HANDS_OVER) && save &&
		               save[strspn(save, ", ")];
		struct kvt_tier_env env = {.opts = &d->opts,
		                           .data_dir = d->data_dir,
		                           .dropped = on_dropped,
		                           .arg = &dropped_ctx[k],
		                           .moved = on_moved,
		                           .evicted = cascade ? on_evicted : NULL};
		struct kvd_lower *l = &d->lower[k];
		l->ops = ops;
		pthread_mutex_init(&l->lock, NULL);
		rc = ops->open(&env, &l->t);
		if (rc && is_auto) {
			kvt_log(KVT_LOG_WARN,
			        "tier %s: cannot open: %s; running without it (tiers.order = auto; "
			        "name the tiers to make this an error)",
			        name, strerror(-rc));
			pthread_mutex_destroy(&l->lock);
			memset(l, 0, sizeof(*l));
			continue;
		}
		if (rc) {
			kvt_log(KVT_LOG_ERROR, "tier %s: cannot open: %s", name, strerror(-rc));
			return rc;
		}
		l->mrc = kvd_mrc_new(d); /* NULL: no curve, nothing else lost */
		l->second_touch = admit >= 0 && !strcmp(d->opts.str[admit], "second_touch");
		l->cascades = cascade;
		const char *pol = kvd_tiers_policy_opt(d, k, "");
		l->pol_auto = pol && !strcmp(pol, "auto");
		snprintf(l->pol_auto_name, sizeof(l->pol_auto_name), "arc"); /* the tier's own */
		d->n_lower++;
		struct recover_ctx rcx = {d, k};
		uint64_t before = d->st.recovered;
		rc = ops->iterate(l->t, recover_one, &rcx);
		kvt_log(KVT_LOG_INFO, "tier %s: open, %llu chunks recovered%s", name,
		        (unsigned long long)(d->st.recovered - before),
		        rc < 0 ? " (walk stopped early)" : "");
	}
	if (d->n_lower && d->lower[d->n_lower - 1].cascades) { /* auto left out the tier below */
		d->lower[d->n_lower - 1].cascades = false; /* on_evicted tells it so at its first */
		kvt_log(KVT_LOG_INFO, "tier %s: nothing below it to cascade into",
		        d->lower[d->n_lower - 1].ops->name);
	}
	if (!d->n_lower)
		return 0;
	return start_workers(d);
}

/* Stops a worker: it finishes its queued demotions, removals and hand-overs first (what a
 * graceful stop owes the next start), writes the hand-overs it made that the loop never queued
 * (stop_again), and drops its promotions. */
static void stop_worker(struct kvd *d, struct kvd_worker *w)
{
	pthread_mutex_lock(&w->lock);
	__atomic_store_n(&w->stop, true, __ATOMIC_RELAXED); /* read unlocked after a job */
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	struct kvd_job *j;
	while ((j = pop(&w->promote_head, &w->promote_tail)))
		free(j);
	while ((j = pop(&w->handover_head, &w->handover_tail))) {
		handover_free(w, j);
		free(j);
	}
	while ((j = pop(&w->other_head, &w->other_tail)))
		free(j);
	while ((j = w->done)) {
		w->done = j->next;
		if (KVT_NEVER(j->kind == JOB_CASCADED && j->buf)) /* stop_again wrote them all */
			handover_free(&d->workers[j->tier], j);
		free(j);
	}
}

/* Stops the workers, upper tiers first (their last hand-overs go to the ones below), and frees
 * them. */
static void close_workers(struct kvd *d)
{
	struct kvd_worker *ws = d->workers;
	if (!ws)
		return;
	for (uint8_t k = 0; k < d->n_lower; k++)
		if (ws[k].started)
			stop_worker(d, &ws[k]);
	d->workers = NULL; /* a tier's last news at close has no worker to go through */
	for (uint8_t k = 0; k < d->n_lower; k++) {
		pthread_mutex_destroy(&ws[k].lock);
		pthread_cond_destroy(&ws[k].cond);
	}
	free(ws);
}

void kvd_tiers_close(struct kvd *d)
{
	close_workers(d);
	for (uint32_t k = 0; k < d->n_lower; k++) {
		d->lower[k].ops->close(d->lower[k].t);
		kvt_mrc_destroy(d->lower[k].mrc);
		d->lower[k].mrc = NULL;
		kvt_minisim_destroy(d->lower[k].minisim);
		d->lower[k].minisim = NULL;
		pthread_mutex_destroy(&d->lower[k].lock);
	}
	d->n_lower = 0;
	if (d->evfd >= 0)
		close(d->evfd);
}

/* The tier's lock, from the loop thread: a write stream in progress stops pulling, so the wait
 * is the I/O already in flight, not the whole backlog of demotions. */
void kvd_lower_lock(struct kvd_lower *l)
{
	atomic_fetch_add_explicit(&l->waiters, 1, memory_order_relaxed);
	pthread_mutex_lock(&l->lock);
	atomic_fetch_sub_explicit(&l->waiters, 1, memory_order_relaxed);
}

/* A tenant's pool is declared, not pinned: the nvme tier pins it region by region as its I/O
 * needs them (nvme.h). Registered whole, every tenant's first hello pinned host.bytes (1/8 of
 * RAM by default) and held the loop ~11 s per 3 GiB while it did. */
void kvd_tiers_register_pool(struct kvd *d, struct kvt_pool *p)
{
#ifdef KVT_HAVE_TIER_NVME
	for (uint32_t k = 0; k < d->n_lower; k++) {
		if (d->lower[k].ops != &kvt_tier_nvme)
			continue;
		kvd_lower_lock(&d->lower[k]);
		int rc = kvt_tier_nvme_register(d->lower[k].t, p->base, p->bytes);
		pthread_mutex_unlock(&d->lower[k].lock);
		if (rc && rc != -EOPNOTSUPP)
			kvt_log(KVT_LOG_WARN, "nvme: a pool is plain I/O: %s", strerror(-rc));
	}
#else
	(void)d, (void)p;
#endif
}

static struct kvd_job *job_for(struct kvd *d, uint32_t id, uint8_t kind, uint8_t tier)
{
	struct kvd_entry *e = &d->idx.e[id];
	struct kvd_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->kind = kind, j->tier = tier, j->entry = id, j->seq = e->seq;
	j->id =
	    (struct kvt_tier_id){.tenant = d->tenants[e->tenant].key, .ns = e->ns, .key = e->key};
	j->rec_len = KVT_CHUNK_HDR_BYTES + e->payload_bytes;
	j->buf_len = kvd_rec_bytes(e->payload_bytes);
	j->loc = e->loc[tier];
	return j;
}

void kvd_tiers_demote(struct kvd *d, uint32_t id, bool put)
{
	struct kvd_entry *e = &d->idx.e[id];
	if (!d->n_lower || !(e->where & KVD_AT_HOST) || e->jobs)
		return; /* jobs: a demotion is already on its way */
	for (uint8_t k = 1; k < d->n_lower; k++)
		if (d->lower[k - 1].cascades && (e->where & (2u << k)))
			return; /* cascading: a tier below holds it; a promotion is not written
			           again */
	for (uint8_t k = 0; k < d->n_lower; k++) {
		if (k && d->lower[k - 1].cascades)
			break; /* the tiers below fill from its evictions */
		if (e->where & (2u << k))
			continue;
		/* second touch: skip the put, demote on the first access after it */
		if (d->lower[k].second_touch && put) {
			d->st.not_admitted++;
			continue;
		}
		struct kvd_job *j = job_for(d, id, JOB_DEMOTE, k);
		if (!j)
			break;
		j->buf = d->tenants[e->tenant].pool.base + e->off;
		if (!e->jobs++) /* the host copy is dirty until its last demotion ends */
			d->dirty_bytes += kvd_rec_bytes(e->payload_bytes);
		d->demotes_inflight++;
		submit(d, j);
	}
}

uint32_t kvd_tiers_promote(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys,
                           uint32_t n, struct kvd_conn *hold)
{
	/* the leading keys already at host are held while the others make room, which must not
	 * evict them (a batch larger than host would chase its own tail), and, for a request
	 * that waits, until it resumes (another's put would evict them meanwhile) */
	uint32_t queued = 0, n_held = 0, mine[KVT_BATCH_MAX];
	uint32_t *held = mine;
	if (hold && (hold->held || (hold->held = malloc(KVT_BATCH_MAX * sizeof(uint32_t)))))
		held = hold->held, n_held = hold->n_held;
	uint64_t now = kvt_now_ns();
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = kvd_index_find(&d->idx, tenant, ns, keys[i]);
		if (id == KVD_NIL)
			break;
		struct kvd_entry *e = &d->idx.e[id];
		if (e->where & KVD_AT_HOST) {
			if (n_held < KVT_BATCH_MAX) {
				e->pins++;
				held[n_held++] = id;
			}
			continue;
		}
		if (e->jobs) { /* already being promoted for someone else: wait for it too */
			queued++;
			continue;
		}
		uint8_t k = 0;
		while (k < d->n_lower &&
		       (!(e->where & (2u << k)) || d->lower[k].reads_again_ns > now))
			k++; /* the first tier below that holds it and can read now */
		if (k == d->n_lower)
			break;
		int64_t off = kvd_make_room(d, tenant, e->payload_bytes);
		if (off < 0) { /* host is full of chunks on their way: try again when one lands */
			queued += off == -EINPROGRESS;
			break;
		}
		struct kvd_job *j = job_for(d, id, JOB_PROMOTE, k);
		if (!j) {
			kvd_host_release(d, tenant, (uint64_t)off, kvd_rec_bytes(e->payload_bytes));
			break;
		}
		j->off = (uint64_t)off;
		j->buf = d->tenants[tenant].pool.base + off;
		e->jobs++;
		d->promotes_inflight++;
		submit(d, j);
		queued++;
	}
	if (held == mine)
		while (n_held)
			kvd_entry_unpin(d, held[--n_held]);
	else
		hold->n_held = n_held;
	return queued;
}

/* Queues a job of kind for entry id on each lower tier that holds it (JOB_DONE: and takes
 * hints). */
static void submit_each(struct kvd *d, uint32_t id, uint8_t kind)
{
	uint8_t where = d->idx.e[id].where;
	for (uint8_t k = 0; k < d->n_lower; k++) {
		if (!(where & (2u << k)) || (kind == JOB_DONE && !d->lower[k].ops->hint_done))
			continue;
		struct kvd_job *j = job_for(d, id, kind, k);
		if (j)
			submit(d, j);
	}
}

void kvd_tiers_remove(struct kvd *d, const struct kvd_entry *e)
{
	submit_each(d, (uint32_t)(e - d->idx.e), JOB_REMOVE);
}

void kvd_tiers_done(struct kvd *d, uint32_t id)
{
	submit_each(d, id, JOB_DONE);
}

/* The entry a job was made for, if it is still the same version. */
static struct kvd_entry *job_entry(struct kvd *d, const struct kvd_job *j)
{
	if (j->entry >= d->idx.cap)
		return NULL;
	struct kvd_entry *e = &d->idx.e[j->entry];
	return e->state != KVD_FREE && e->seq == j->seq ? e : NULL;
}

/* Entry e has a copy in tier k now, at loc (a demotion or a hand-over landed). For the tier's
 * curves a write makes the key resident; it is not a read. */
static void copy_landed(struct kvd *d, struct kvd_entry *e, uint8_t k, uint64_t loc)
{
	e->where |= (uint8_t)(2u << k);
	e->loc[k] = loc;
	if (d->lower[k].mrc)
		kvt_mrc_touch(d->lower[k].mrc, e->key.w[0] ^ e->tenant);
	if (d->lower[k].minisim)
		kvt_minisim_touch(d->lower[k].minisim, e->key.w[0] ^ e->tenant);
}

/* A demotion of entry id's host copy ended; with its last, the copy is clean (host.dirty_pct).
 * While a demotion is pending the entry is at host, and its jobs are all demotions. */
static void demote_ended(struct kvd *d, uint32_t id)
{
	struct kvd_entry *e = &d->idx.e[id];
	uint64_t rb = kvd_rec_bytes(e->payload_bytes);
	if (e->jobs == 1 && !KVT_NEVER(d->dirty_bytes < rb))
		d->dirty_bytes -= rb;
	kvd_entry_unjob(d, id);
}

static void complete_demote(struct kvd *d, struct kvd_job *j)
{
	d->demotes_inflight--;
	struct kvd_entry *e = job_entry(d, j);
	uint64_t now = j->result == -EAGAIN ? kvt_now_ns() : 0;
	if (j->result == -EAGAIN && !j->again_since)
		j->again_since = now;
	if (j->result == -EAGAIN && now - j->again_since < DEMOTE_STALL_NS && e &&
	    e->state == KVD_PUBLISHED && (e->where & KVD_AT_HOST)) {
		d->demotes_inflight++; /* backpressure, or a batch cut short: try it again */
		submit(d, j);
		return;
	}
	bool moot = !e || e->state != KVD_PUBLISHED; /* deleted (or replaced) meanwhile */
	if (j->result < 0 && !moot) {
		d->st.demote_failed++;
		if (j->result != -EFBIG && j->result != -EDQUOT) /* by design: no log line each */
			kvt_log_rl(KVT_LOG_WARN, "demotion to %s failed: %s",
			           d->lower[j->tier].ops->name, strerror((int)-j->result));
	} else if (j->result < 0) {
		/* nothing was owed: the chunk is gone (its retries above stopped with it) */
	} else if (!moot) {
		d->st.demoted++;
		copy_landed(d, e, j->tier, j->loc);
	} else { /* deleted meanwhile: take the new copy back out */
		j->kind = JOB_REMOVE;
		j->entry = KVD_NIL;
		submit(d, j);
		if (e)
			demote_ended(d, (uint32_t)(e - d->idx.e));
		return;
	}
	if (e)
		demote_ended(d, j->entry);
	free(j);
}

static void complete_promote(struct kvd *d, struct kvd_job *j)
{
	struct kvd_entry *e = job_entry(d, j);
	d->promotes_inflight--; /* again below when it is sent again */
	if (!e) {
		free(j);
		return;
	}
	uint32_t id = j->entry;
	uint8_t bit = (uint8_t)(2u << j->tier);
	if (j->result == -ENOENT && e->state == KVD_PUBLISHED && !(e->where & KVD_AT_HOST) &&
	    (e->where & bit) && e->loc[j->tier] != j->loc && ++j->tries < 4) {
		j->loc = e->loc[j->tier]; /* the tier moved it meanwhile: read it where it is now */
		d->st.promote_resent++;
		d->promotes_inflight++;
		submit(d, j);
		return;
	}
	if (j->result < 0 || e->state != KVD_PUBLISHED || (e->where & KVD_AT_HOST)) {
		kvd_host_release(d, e->tenant, j->off, kvd_rec_bytes(e->payload_bytes));
		if (j->result < 0) {
			d->st.promote_failed++;
			if (j->result != -EAGAIN) /* the tier dropped it */
				e->where &= (uint8_t)~bit;
			else /* it kept it, and cannot read now: gets are misses for a while */
				d->lower[j->tier].reads_again_ns = kvt_now_ns() + READS_AGAIN_NS;
		}
	} else {
		e->off = j->off;
		e->where |= KVD_AT_HOST;
		uint32_t pid =
		    e->has_parent ? kvd_index_find(&d->idx, e->tenant, e->ns, e->parent) : KVD_NIL;
		struct kvt_policy_meta m = {.key_hash = e->key.w[0] ^ e->tenant,
		                            .bytes = kvd_rec_bytes(e->payload_bytes),
		                            .parent = pid == KVD_NIL ? KVT_POLICY_NONE : pid,
		                            .depth = e->depth,
		                            .tenant = e->tenant};
		if (!kvd_keep_landed(d, id)) { /* a keep waited for it: out of the policy */
			kvd_policy_stream(d, KVD_NIL);
			d->pol_ops->on_insert(d->pol, id, &m);
		}
		d->st.promoted++;
	}
	free(j);
	kvd_entry_unjob(d, id);
	e = &d->idx.e[id];
	if (e->state == KVD_PUBLISHED && !e->where && !e->jobs)
		kvd_entry_drop(d, id); /* no copy left anywhere, none on its way (a hand-over) */
}

/* The entry whose copy in j's tier is the record a tier's notification names (at j->loc), or
 * KVD_NIL: the entry is gone, or holds another record there now. */
static uint32_t notified_entry(struct kvd *d, const struct kvd_job *j)
{
	int t = kvd_tenant_of_uid(d, j->id.tenant);
	uint32_t id = t < 0 ? KVD_NIL : kvd_index_find(&d->idx, (uint32_t)t, j->id.ns, j->id.key);
	if (id == KVD_NIL)
		return KVD_NIL;
	const struct kvd_entry *e = &d->idx.e[id];
	return (e->where & (2u << j->tier)) && e->loc[j->tier] == j->loc ? id : KVD_NIL;
}

static void complete_dropped(struct kvd *d, struct kvd_job *j)
{
	d->st.lower_dropped++;
	uint32_t id = notified_entry(d, j);
	if (id != KVD_NIL) {
		struct kvd_entry *e = &d->idx.e[id];
		e->where &= (uint8_t) ~(2u << j->tier);
		if (!e->where && !e->jobs)
			kvd_entry_drop(d, id);
	}
	free(j);
}

/* The tier rewrote a record elsewhere: the index follows it, unless the entry has gone or holds
 * another record there now, in which case the moved copy is nobody's and is removed. */
static void complete_moved(struct kvd *d, struct kvd_job *j)
{
	d->st.lower_moved++;
	uint32_t id = notified_entry(d, j);
	if (id != KVD_NIL) {
		d->idx.e[id].loc[j->tier] = j->moved_to;
		free(j);
		return;
	}
	j->kind = JOB_REMOVE;
	j->entry = KVD_NIL;
	j->loc = j->moved_to;
	submit(d, j);
}

/* The entry whose version a hand-over's record is (the sequence number of its header), or NULL:
 * gone, or another version now. */
static struct kvd_entry *handover_entry(struct kvd *d, const struct kvd_job *j, uint32_t *id)
{
	int t = kvd_tenant_of_uid(d, j->id.tenant);
	*id = t < 0 ? KVD_NIL : kvd_index_find(&d->idx, (uint32_t)t, j->id.ns, j->id.key);
	struct kvd_entry *e = *id == KVD_NIL ? NULL : &d->idx.e[*id];
	if (!e || e->state != KVD_PUBLISHED || e->seq != j->seq ||
	    (size_t)e->payload_bytes + KVT_CHUNK_HDR_BYTES != j->rec_len)
		return NULL;
	return e;
}

/*
 * A record tier j->tier - 1 evicted (on_evicted). As a copy (j->buf): the entry is held for it
 * (jobs, so it stays while no tier has it, and a get waits for the write), and the write is
 * queued. Written: the entry gets the copy, unless it is gone or another version, and then the
 * copy is nobody's and is removed; a held entry is let go, and dropped when the write failed and
 * no tier has it any more.
 */
static void complete_cascaded(struct kvd *d, struct kvd_job *j)
{
	uint32_t id;
	struct kvd_entry *e = handover_entry(d, j, &id);
	if (j->buf) {
		if (!e || (e->where & (2u << j->tier))) {
			handover_free(&d->workers[j->tier], j);
			free(j);
			return;
		}
		if (!(e->where & KVD_AT_HOST) || !e->jobs) { /* at host, jobs are demotions */
			e->jobs++;
			j->entry = id;
		}
		submit(d, j);
		return;
	}
	uint32_t held = j->entry;
	if (j->result == 1) { /* second_touch turned it away: not read while in the tier above */
		d->st.not_admitted++;
	} else if (j->result < 0) {
		d->st.cascade_failed++;
		if (j->result != -EFBIG && j->result != -EDQUOT)
			kvt_log_rl(KVT_LOG_WARN, "cascade into %s failed: %s",
			           d->lower[j->tier].ops->name, strerror((int)-j->result));
	} else {
		d->st.cascaded++;
		if (e) {
			copy_landed(d, e, j->tier, j->loc);
		} else { /* nobody's: take it back out */
			j->kind = JOB_REMOVE;
			j->entry = KVD_NIL;
			submit(d, j);
			j = NULL;
		}
	}
	free(j);
	if (held == KVD_NIL)
		return;
	kvd_entry_unjob(d, held);
	e = &d->idx.e[held];
	if (e->state == KVD_PUBLISHED && !e->where && !e->jobs)
		kvd_entry_drop(d, held); /* the write failed, and no tier has it */
}

/* Takes w's finished jobs. @return : them, oldest first. */
static struct kvd_job *take_done(struct kvd_worker *w)
{
	pthread_mutex_lock(&w->lock);
	struct kvd_job *list = w->done;
	w->done = NULL;
	pthread_mutex_unlock(&w->lock);
	struct kvd_job *rev = NULL;
	while (list) {
		struct kvd_job *nx = list->next;
		list->next = rev;
		rev = list;
		list = nx;
	}
	return rev;
}

static void complete_list(struct kvd *d, struct kvd_job *rev)
{
	while (rev) {
		struct kvd_job *j = rev;
		rev = rev->next;
		switch (j->kind) {
		case JOB_DEMOTE:
			complete_demote(d, j);
			break;
		case JOB_PROMOTE:
			complete_promote(d, j);
			break;
		case JOB_DROPPED:
			complete_dropped(d, j);
			break;
		case JOB_MOVED:
			complete_moved(d, j);
			break;
		case JOB_CASCADED:
			complete_cascaded(d, j);
			break;
		default:
			free(j);
			break;
		}
	}
}

/* Each worker's news in its order; between workers there is none to keep (a hand-over's write
 * is queued by the loop only after it has heard of the hand-over). */
void kvd_tiers_complete(struct kvd *d)
{
	uint64_t cnt;
	if (read(d->evfd, &cnt, sizeof(cnt)) < 0 || !d->workers)
		return;
	for (uint8_t k = 0; k < d->n_lower; k++)
		complete_list(d, take_done(&d->workers[k]));
	kvd_conn_resume_ready(d, kvt_now_ns());
}
