/*
 * tierwork.c -- the worker thread of each lower tier (the design: tiers.c). It runs the loop's
 * jobs in order: promotions first, then hand-overs' copies (the tier above waits to reuse their
 * places), then demotions and removals; batched through the tier's batched ops, or as a write
 * stream that promotions ride (read beside its writes) or, where the tier cannot, that stops for
 * a waiting promotion. It also brings the tier's own news to the loop (a
 * drop, a move, an eviction handed over to the next tier: on_evicted), evicts ahead in a
 * cascading nvme tier, and, at a graceful stop, writes what the stop owes the next start
 * (stop_again). Finished jobs go back through w->done and the eventfd (tierdone.c).
 */
#include "tierjob.h"
#include "core/chunk.h"
#include "core/log.h"
#include "core/util.h"
#ifdef KVT_HAVE_TIER_NVME
#include "tiers/nvme/nvme.h"
#endif

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Hand-overs (on_evicted) waiting as copies for the next tier's worker: past the first,
 * demotions into the tier above wait for them; past the second, a hand-over is not copied but
 * written at once, inside the reclaim that made it. */
#define HANDOVER_SOFT_BYTES ((uint64_t)64 << 20)
#define HANDOVER_HARD_BYTES ((uint64_t)192 << 20)

/* After a batch the tier pushed back (DEMOTE_STALL_NS), the worker waits 1 ms, twice as long
 * each time in a row, to this (a promotion queued behind it waits that long at most). */
#define STALL_WAIT_MAX_US 8000

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

/* Tier l's lock, for a worker. While the loop wants it (kvd_lower_take found it busy) the worker
 * wakes the loop, so that the parked command takes it, and waits for that up to WANTED_WAIT_NS
 * before it goes on with its I/O (the command's client may have gone). */
#define WANTED_WAIT_NS (50 * 1000000ull)
static void lock_tier(struct kvd *d, struct kvd_lower *l)
{
	bool told = false;
	uint64_t until, now, end = kvt_now_ns() + WANTED_WAIT_NS;
	while ((until = atomic_load_explicit(&l->wanted_until_ns, memory_order_relaxed)) &&
	       (now = kvt_now_ns()) < until && now < end) {
		uint64_t one = 1;
		if (!told && write(d->evfd, &one, sizeof(one)) < 0)
			kvt_log_rl(KVT_LOG_WARN, "eventfd: %s", strerror(errno));
		told = true;
		usleep(100);
	}
	pthread_mutex_lock(&l->lock);
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
static int write_handover(struct kvd *d, struct kvd_lower *l, const void *rec, size_t rec_len,
                          uint64_t *loc)
{
	uint64_t t0 = kvt_now_ns();
	lock_tier(d, l);
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
void kvd_handover_free(struct kvd_worker *w, struct kvd_job *j)
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
 * queues it, and kvd_handover_free tells tier k when it landed. At a reclaim (no later), or with
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
		return 1; /* the tier keeps the record's place until kvd_handover_free */
	}
	j->result = write_handover(cx->d, l, rec, rec_len, &j->loc);
	finish(w, j);
	return 0;
}

void kvd_work_env(struct kvd *d, uint8_t k, bool cascade, struct kvt_tier_env *env)
{
	dropped_ctx[k] = (struct dropped_ctx){d, k};
	env->dropped = on_dropped;
	env->moved = on_moved;
	env->evicted = cascade ? on_evicted : NULL;
	env->arg = &dropped_ctx[k];
}

/* A hand-over's copy, queued by the loop: written into its tier, freed, and back to the loop. */
static void run_handover(struct kvd_worker *w, struct kvd_job *j)
{
	j->result = write_handover(w->d, &w->d->lower[j->tier], j->buf, j->rec_len, &j->loc);
	kvd_handover_free(w, j);
	finish(w, j);
}

static void run_job(struct kvd *d, struct kvd_job *j)
{
	struct kvd_lower *l = &d->lower[j->tier];
	lock_tier(d, l);
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
	case JOB_AGAIN:
		l->ops->hint_again(l->t, &j->id, j->loc);
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&l->lock);
}

#define BATCH_MAX 32

/* Runs jobs of one kind for one tier through the tier's batched op: the whole batch stays in
 * flight at the tier's queue depth (tier.h). */
static void run_batch(struct kvd *d, struct kvd_job **jobs, size_t n)
{
	struct kvd_lower *l = &d->lower[jobs[0]->tier];
	lock_tier(d, l);
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
	lock_tier(w->d, l);
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
 * earlier ones are in flight, until a promotion waits, the loop wants the tier's lock
 * (kvd_lower_take) or none is left; each is finished as soon as the tier says it is done.
 * Promotions ride it where the tier takes reads beside its writes (pull_read): a promotion
 * "waits" only while the tier has not taken it, so the writes go on beside the reads, and
 * stop when the tier takes no more reads in this run. */
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
	} else if (!kvd_lower_wanted(s->l)) {
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

/* A promotion for the tier to read beside its writes, or NULL. */
static struct kvt_tier_rreq *stream_pull_read(void *arg)
{
	struct stream *s = arg;
	struct kvd_worker *w = s->w;
	struct kvd_job *j = NULL;
	if (!atomic_load_explicit(&w->promotes, memory_order_relaxed))
		return NULL; /* asked at every completion: no lock for nothing */
	pthread_mutex_lock(&w->lock);
	if (!w->stop && (j = pop(&w->promote_head, &w->promote_tail)))
		atomic_fetch_sub_explicit(&w->promotes, 1, memory_order_relaxed);
	pthread_mutex_unlock(&w->lock);
	if (!j)
		return NULL;
	j->rd = (struct kvt_tier_rreq){
	    .id = j->id, .loc = j->loc, .buf = j->buf, .buf_len = j->buf_len};
	return &j->rd;
}

static void stream_read_done(void *arg, struct kvt_tier_rreq *q)
{
	struct stream *s = arg;
	struct kvd_job *j = (struct kvd_job *)(void *)((char *)q - offsetof(struct kvd_job, rd));
	j->result = q->res;
	if (q->res >= 0 && (size_t)q->res != j->rec_len)
		j->result = -EBADMSG;
	finish(s->w, j);
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
	const struct kvt_tier_wsource src = {.pull = stream_pull,
	                                     .done = stream_done,
	                                     .arg = &s,
	                                     .pull_read = stream_pull_read,
	                                     .read_done = stream_read_done};
	lock_tier(w->d, l);
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
	bool promotes = head == &w->promote_head;
	const struct kvt_tier_ops *ops = w->d->lower[j->tier].ops;
	/* a write stream pulls the demotions behind the first itself, one by one, and takes the
	 * promotions that come meanwhile (or, where the tier cannot, stops for them); taken
	 * here, a batch would all be written first */
	bool batchable = (j->kind == JOB_DEMOTE && ops->write_batch && !ops->write_stream) ||
	                 (j->kind == JOB_PROMOTE && ops->read_batch);
	size_t n = 1;
	while (batchable && n < BATCH_MAX && *head && (*head)->kind == j->kind &&
	       (*head)->tier == j->tier)
		jobs[n++] = pop(head, tail);
	if (promotes)
		atomic_fetch_sub_explicit(&w->promotes, (unsigned)n, memory_order_relaxed);
	return n;
}

/* Whether w's next job is a demotion that waits for the tier below to take its hand-overs
 * (below_due). Caller holds w->lock. */
static bool held_back(struct kvd_worker *w)
{
	return !w->stop && !w->promote_head && !w->handover_head && w->other_head &&
	       w->other_head->kind == JOB_DEMOTE && below_due(w);
}

static void remove_now(struct kvd *d, struct kvd_lower *l, struct kvd_job *j)
{
	lock_tier(d, l);
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
		return !(e = kvd_job_entry(d, j)) || e->state != KVD_PUBLISHED;
	if (j->kind == JOB_CASCADED && !j->buf && j->result == 0)
		return !kvd_handover_entry(d, j, &id);
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
			j->result = kvd_handover_entry(w->d, j, &id)
			                ? write_handover(w->d, &w->d->lower[j->tier], j->buf,
			                                 j->rec_len, &j->loc)
			                : -ECANCELED;
			kvd_handover_free(&w->d->workers[j->tier], j);
		} else if (owes_removal(w->d, j)) {
			remove_now(w->d, &w->d->lower[j->tier], j);
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

void kvd_job_submit(struct kvd *d, struct kvd_job *j)
{
	struct kvd_worker *w = worker_of(d, j->tier);
	if (KVT_NEVER(!w)) { /* jobs are made once every worker runs */
		if (j->kind == JOB_CASCADED)
			free(j->buf); /* a hand-over's copy; other jobs' buffers are the pool's */
		free(j);
		return;
	}
	pthread_mutex_lock(&w->lock);
	if (j->kind == JOB_PROMOTE) {
		push(&w->promote_head, &w->promote_tail, j);
		atomic_fetch_add_explicit(&w->promotes, 1, memory_order_relaxed);
	} else if (j->kind == JOB_CASCADED) {
		push(&w->handover_head, &w->handover_tail, j);
	} else {
		push(&w->other_head, &w->other_tail, j);
	}
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* A worker per lower tier, so that a promotion from one never waits behind another's I/O (a
 * RocksDB write behind an nvme read) and the tiers' I/O overlaps. Each is set up before any runs
 * (they look at each other: hand-overs). @return : 0, -ENOMEM, -EAGAIN. */
int kvd_workers_start(struct kvd *d)
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
		kvd_workers_close(d);
		return -EAGAIN;
	}
	return 0;
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
		kvd_handover_free(w, j);
		free(j);
	}
	while ((j = pop(&w->other_head, &w->other_tail)))
		free(j);
	while ((j = w->done)) {
		w->done = j->next;
		if (KVT_NEVER(j->kind == JOB_CASCADED && j->buf)) /* stop_again wrote them all */
			kvd_handover_free(&d->workers[j->tier], j);
		free(j);
	}
}

/* Stops the workers, upper tiers first (their last hand-overs go to the ones below), and frees
 * them. */
void kvd_workers_close(struct kvd *d)
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
