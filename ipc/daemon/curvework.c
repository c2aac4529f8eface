/*
 * curvework.c -- the host policy's own curve (d->minisim), replayed on a thread of its own.
 *
 * Why a thread. The five miniature simulations of `kvtier mrc host`'s second line (policy/
 * minisim.h) cost five times the host policy's work per acquired key when the tier holds no more
 * than mrc.minisim_entries chunks (every key is sampled then). They ran inside each acquire, then
 * in the loop's idle turns, 32 keys a turn; with one engine waiting on each reply a request
 * that came in during a turn waited for it: conv's request p50 was 1.40x LRU's, against 1.14x
 * with the simulations off (`kvtier bench trace`, median of five runs, docs/policies.md). The
 * replay now runs on a worker thread at nice 10, and the loop thread only appends keys to a
 * queue: 1.08x in the same runs. The p99 is not better on a 2-vCPU machine, where the worker
 * and the engine want the second CPU at once (1.34-1.60x against 1.31x).
 *
 * The queue. An acquire appends its keys (8 bytes each; the mini-caches sample them) and where
 * its request ends to `in` under q_lock. The worker moves the oldest requests, up to
 * KVD_CURVE_BATCH keys, to its own `work` buffer and replays them with sim_lock held. It is
 * woken once KVD_CURVE_WAKE keys wait, or KVD_CURVE_NAP ms after the first of fewer: a wake-up
 * per acquire (a futex call and an IPI to the other CPU each) made conv's requests 1.05-1.12x
 * LRU's at p50 and the run 1.13-1.21x, against 0.92-1.01x and 1.07-1.15x now (three sets of five
 * rounds; p99 1.59-1.66x against 1.39-1.61x, and duel's p99 1.72x against 1.87-2.10x).
 * `kvtier mrc host` reads the curve after kvd_minisim_drain(): with sim_lock held (so after the
 * worker's batch) the loop replays what is still in `in`, so the curve is the one an inline
 * replay of every acquire in order gives (test_policyctl_curve_replays_later). The stats and
 * the Prometheus page read it as it stands, holding sim_lock: a scrape never replays on the
 * loop thread, and may be a few requests behind. Past mrc.minisim_queue waiting keys an
 * acquire drains, so the queue stays bounded when the worker gets no CPU; 0 drains in every
 * acquire, as before the queue. A worker that cannot be started leaves every acquire draining
 * its own keys.
 *
 * Locks: sim_lock before q_lock. The loop thread is the only one that feeds, drains, and
 * creates or destroys d->minisim (kvd_minisim_hold()); the worker touches d->minisim only with
 * sim_lock held, and only while keys wait, which only the loop adds. So once a drain returns,
 * the curve can be read without a lock until the next acquire.
 */
#include "daemon.h"
#include "core/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define KVD_CURVE_BATCH 1024 /* keys the worker replays per hold of sim_lock */
#define KVD_CURVE_WAKE  256  /* keys waiting that wake a napping worker */
#define KVD_CURVE_NAP   20   /* ms a napping worker leaves fewer keys waiting */

/* a with room for want elements of size bytes (*cap of them, doubled and at least least), or
 * NULL (no memory; a is left as it was). */
static void *room(void *a, size_t *cap, size_t want, size_t least, size_t size)
{
	if (a && want <= *cap)
		return a;
	size_t c = KVT_MAX(KVT_MAX(*cap * 2, want), least);
	void *b = realloc(a, c * size);
	*cap = b ? c : *cap;
	return b;
}

/* Room for `keys` keys and `reqs` requests in q in all. @return : false (no memory) */
static bool keyq_reserve(struct kvd_keyq *q, size_t keys, size_t reqs)
{
	uint64_t *k = room(q->keys, &q->cap_keys, keys, 1024, sizeof(*k));
	q->keys = k ? k : q->keys;
	uint32_t *e = k ? room(q->ends, &q->cap_reqs, reqs, 64, sizeof(*e)) : NULL;
	q->ends = e ? e : q->ends;
	return k && e;
}

/* Replays q's requests, oldest first, into m (sim_lock held), and empties q. @return : keys */
static size_t keyq_replay(struct kvt_minisim *m, struct kvd_keyq *q)
{
	size_t n = m ? q->n : 0;
	for (size_t r = 0, at = 0; m && r < q->reqs; at = q->ends[r++])
		kvt_minisim_request(m, q->keys + at, q->ends[r] - at);
	q->n = q->reqs = 0;
	return n;
}

/* Moves the oldest waiting requests, KVD_CURVE_BATCH keys at most (one request at least), from
 * w->in to w->work (q_lock held). A request there is no memory for is dropped. */
static void take_batch(struct kvd_curvework *w)
{
	struct kvd_keyq *in = &w->in, *q = &w->work;
	size_t r = 1;
	while (r < in->reqs && in->ends[r] <= KVD_CURVE_BATCH)
		r++;
	size_t keys = in->ends[r - 1];
	q->n = q->reqs = 0;
	if (keyq_reserve(q, keys, r)) {
		memcpy(q->keys, in->keys, keys * sizeof(*q->keys));
		memcpy(q->ends, in->ends, r * sizeof(*q->ends));
		q->n = keys, q->reqs = r;
	}
	memmove(in->keys, in->keys + keys, (in->n - keys) * sizeof(*in->keys));
	for (size_t i = r; i < in->reqs; i++)
		in->ends[i - r] = in->ends[i] - (uint32_t)keys;
	in->n -= keys;
	in->reqs -= r;
}

/* Waits (q_lock held) for KVD_CURVE_WAKE keys, or for KVD_CURVE_NAP ms once fewer wait, or
 * for stop. A feed signals only the first request into an empty queue (which wakes a worker
 * waiting for a key at all) and any that brings KVD_CURVE_WAKE keys (a napping one): one
 * wake-up per batch instead of one per acquire, and a signal no thread waits for costs no
 * system call. */
static void wait_for_keys(struct kvd_curvework *w)
{
	while (!w->stop && w->in.n < KVD_CURVE_WAKE) {
		if (!w->in.reqs) {
			pthread_cond_wait(&w->wake, &w->q_lock);
			continue;
		}
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += KVD_CURVE_NAP * 1000000L;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		if (pthread_cond_timedwait(&w->wake, &w->q_lock, &until) == ETIMEDOUT)
			return;
	}
}

/* The worker: a batch at a time, so that a drain on the loop thread waits for one batch at most
 * (KVD_CURVE_BATCH keys: ~2.5 ms of conv's five mini-caches). It runs at nice 10 rather than at
 * SCHED_IDLE: a drain waits on sim_lock for it, and on a busy machine a SCHED_IDLE thread that
 * holds the lock would hold it for as long as it gets no CPU. */
static void *curve_worker(void *arg)
{
	struct kvd *d = arg;
	struct kvd_curvework *w = &d->cw;
	setpriority(PRIO_PROCESS, (id_t)gettid(), 10);       /* or as the loop, if refused */
	pthread_setname_np(pthread_self(), "kvtierd-curve"); /* top -H, perf */
	pthread_mutex_lock(&w->q_lock);
	for (;;) {
		wait_for_keys(w);
		if (w->stop)
			break;
		pthread_mutex_unlock(&w->q_lock);
		pthread_mutex_lock(&w->sim_lock);
		pthread_mutex_lock(&w->q_lock);
		if (w->in.reqs) /* none after a drain or a hold came first */
			take_batch(w);
		pthread_mutex_unlock(&w->q_lock);
		w->by_worker += keyq_replay(d->minisim, &w->work);
		pthread_mutex_unlock(&w->sim_lock);
		pthread_mutex_lock(&w->q_lock);
	}
	pthread_mutex_unlock(&w->q_lock);
	return NULL;
}

void kvd_curvework_init(struct kvd *d)
{
	struct kvd_curvework *w = &d->cw;
	pthread_mutex_init(&w->q_lock, NULL);
	pthread_mutex_init(&w->sim_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the nap's deadline */
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
}

void kvd_curvework_fini(struct kvd *d)
{
	struct kvd_curvework *w = &d->cw;
	if (w->started) {
		pthread_mutex_lock(&w->q_lock);
		w->stop = true;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->q_lock);
		pthread_join(w->thread, NULL);
		w->started = false;
	}
	free(w->in.keys), free(w->in.ends), free(w->work.keys), free(w->work.ends);
	memset(&w->in, 0, sizeof(w->in));
	memset(&w->work, 0, sizeof(w->work));
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->sim_lock);
	pthread_mutex_destroy(&w->q_lock);
}

void kvd_minisim_drain(struct kvd *d)
{
	struct kvd_curvework *w = &d->cw;
	pthread_mutex_lock(&w->sim_lock);
	pthread_mutex_lock(&w->q_lock);
	w->by_loop += keyq_replay(d->minisim, &w->in);
	pthread_mutex_unlock(&w->q_lock);
	pthread_mutex_unlock(&w->sim_lock);
}

void kvd_minisim_hold(struct kvd *d, bool drop)
{
	struct kvd_curvework *w = &d->cw;
	pthread_mutex_lock(&w->sim_lock);
	if (!drop)
		return;
	pthread_mutex_lock(&w->q_lock);
	w->in.n = w->in.reqs = 0; /* what waits was for the old curve */
	pthread_mutex_unlock(&w->q_lock);
}

void kvd_minisim_release(struct kvd *d)
{
	pthread_mutex_unlock(&d->cw.sim_lock);
}

void kvd_minisim_feed(struct kvd *d, const uint64_t *key_hash, uint32_t n)
{
	struct kvd_curvework *w = &d->cw;
	size_t most = kvt_opt_u64(&d->opts, KVT_OPT_MRC_MINISIM_QUEUE);
	if (most && !w->started && !w->failed) {
		int rc = pthread_create(&w->thread, NULL, curve_worker, d);
		w->started = !rc;
		w->failed = rc != 0;
		if (rc)
			kvt_log(KVT_LOG_WARN,
			        "mrc: no thread for host's own curve (%s): acquires replay it",
			        strerror(rc));
	}
	pthread_mutex_lock(&w->q_lock);
	bool fed = keyq_reserve(&w->in, w->in.n + n, w->in.reqs + 1);
	if (fed) {
		memcpy(w->in.keys + w->in.n, key_hash, n * sizeof(*key_hash));
		w->in.n += n;
		w->in.ends[w->in.reqs++] = (uint32_t)w->in.n;
	}
	bool over = w->in.n > most || !w->started;
	if (fed && !over && (w->in.reqs == 1 || w->in.n >= KVD_CURVE_WAKE))
		pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->q_lock);
	if (fed && over)
		kvd_minisim_drain(d); /* the worker is behind, or there is none */
}
