/*
 * engine.c -- batches of jobs as many in-flight I/Os.
 *
 * A batch is an array of jobs; a job is one aligned range of the file to read or write (a
 * record, its first block, a terminator). The engine cuts ready jobs into pieces of at most
 * b->piece bytes, keeps up to depth pieces in flight across all the jobs of the batch, submits
 * what it queued in one call, and refills as completions arrive, so a batch of Q records keeps Q
 * I/Os in flight and a single 32 MiB record keeps depth I/Os in flight. Jobs that depend on
 * others start not ready; the batch's done() callback, called once per finished job, may make
 * them ready (the write path issues a record's first block only after the rest of it is on
 * disk: see nvme.c). A batch with a more() callback grows while it runs: whenever slots are free
 * and nothing is left to issue, more() may append jobs, so a stream of records that arrive one
 * by one keeps the device as busy as a batch that was whole from the start. A batch with a poll()
 * callback is asked at every turn, and at least every KVT_NVME_POLL_NS while it waits, whether
 * jobs arrived that cannot wait: these are urgent, and take the next free slots ahead of every
 * piece not yet issued (a promotion's read riding a write stream waits for one write piece to
 * complete, not for the stream). Every I/O gets a slot
 * (cookie = slot index): depth slots, a free stack and a redo stack are allocated at open, so the
 * data path allocates nothing.
 *
 * What a completion can say, and what the engine does:
 *   full length         the piece is done
 *   short (0 < n < len) resubmit the rest from n rounded down to the alignment (the kernel only
 *                       ever sees aligned offsets, lengths and buffers); a piece that makes no
 *                       progress KVT_NVME_SHORT_RETRIES times fails its job with -EIO
 *   -EAGAIN, -EINTR     resubmit, at most KVT_NVME_AGAIN_RETRIES times, then -EAGAIN
 *   -ENOSPC, -EIO, ...  the job fails with its first error; its pieces already in flight are
 *                       still waited for (their buffers are the caller's) but no more are issued
 *                       (with b->stop_on_error, no more pieces of any job are issued)
 * A job that can never run (not ready when nothing else is in flight) finishes with -ECANCELED.
 * -EAGAIN/-EBUSY from submit (io_uring_enter) is backpressure: reap one completion (or, with
 * none in flight, sleep 50 us) and submit again. The engine never returns while an I/O that it
 * queued is still owned by the kernel.
 */
#include "nvme_int.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

int kvt__nvme_engine_open(struct kvt__nvme_engine *e, const struct kvt__nvme_io_ops *ops,
                          const struct kvt__nvme_io_cfg *cfg, unsigned align)
{
	memset(e, 0, sizeof(*e));
	e->ops = ops;
	e->depth = cfg->depth;
	e->align = align;
	e->min_piece = 128u << 10;
	e->slots = calloc(e->depth, sizeof(*e->slots));
	e->cqes = calloc(e->depth, sizeof(*e->cqes));
	e->free_stack = calloc(e->depth, sizeof(*e->free_stack));
	e->redo_stack = calloc(e->depth, sizeof(*e->redo_stack));
	if (!e->slots || !e->cqes || !e->free_stack || !e->redo_stack)
		goto err;
	int rc = ops->open(cfg, &e->ctx);
	if (rc) {
		free(e->slots), free(e->cqes), free(e->free_stack), free(e->redo_stack);
		memset(e, 0, sizeof(*e));
		return rc;
	}
	kvt__nvme_pins_init(&e->pins, e);
	return 0;
err:
	free(e->slots), free(e->cqes), free(e->free_stack), free(e->redo_stack);
	memset(e, 0, sizeof(*e));
	return -ENOMEM;
}

void kvt__nvme_engine_close(struct kvt__nvme_engine *e)
{
	kvt__nvme_pins_close(&e->pins); /* before the ring it pins through */
	if (e->ops && e->ctx)
		e->ops->close(e->ctx);
	e->ctx = NULL;
	free(e->slots), free(e->cqes), free(e->free_stack), free(e->redo_stack);
	e->slots = NULL, e->cqes = NULL, e->free_stack = NULL, e->redo_stack = NULL;
}

/* The state of one run: free and redo stacks, counts. */
struct run {
	struct kvt__nvme_batch *b;
	unsigned n_free, n_redo;
	unsigned inflight; /* slots owned by the kernel (queued or submitted) */
	unsigned queued;   /* queued but not yet submitted */
	unsigned first;    /* no job below this has pieces left to issue */
	unsigned left;     /* jobs not finished */
	bool urgent;       /* an urgent job may have pieces left to issue, none below ufirst */
	unsigned ufirst;
	unsigned keep; /* slots other jobs leave free for urgent ones (refill) */
};

static void count_error(struct kvt_nvme *t, int res)
{
	switch (res) {
	case -ENOSPC:
		KVT_NVME_ADD(t, st.err_nospc, 1);
		break;
	case -EINVAL:
	case -EBADF:
	case -EFAULT:
	case -EOPNOTSUPP:
		KVT_NVME_ADD(t, st.err_other, 1);
		break;
	default:
		KVT_NVME_ADD(t, st.err_io, 1);
		break;
	}
}

static void job_fail(struct run *r, struct kvt__nvme_job *j, int err)
{
	if (!j->err)
		j->err = err;
	if (!r->b->err)
		r->b->err = err;
}

static bool job_issuable(const struct run *r, const struct kvt__nvme_job *j)
{
	return j->ready && !j->done && !j->err && j->issued < j->len &&
	       !(r->b->stop_on_error && r->b->err);
}

static void job_finish(struct run *r, unsigned i)
{
	struct kvt__nvme_batch *b = r->b;
	b->jobs[i].done = true;
	r->left--;
	if (b->done) {
		b->done(b->arg, b, i);
		r->first = 0; /* the callback may have readied any job */
	}
}

/* A piece of job i is over (done, failed, or given up): finish the job when it was the last. */
static void piece_over(struct run *r, unsigned i)
{
	struct kvt__nvme_job *j = &r->b->jobs[i];
	j->inflight--;
	if (!j->inflight && (j->err || j->issued == j->len || (r->b->stop_on_error && r->b->err)))
		job_finish(r, i);
}

static void slot_release(struct kvt__nvme_engine *e, struct run *r, unsigned s)
{
	e->slots[s].busy = false;
	e->free_stack[r->n_free++] = s;
}

/* One completion reaped: counted (released, so that a reader that sees it sees its queueing),
 * timed, and the books held to what is in flight. Single writer: the driving thread. */
static void books_reaped(struct kvt_nvme *t, const struct run *r, const struct kvt__nvme_slot *s)
{
	__atomic_fetch_add(&t->xs.ios_reaped, 1, __ATOMIC_RELEASE);
	uint64_t us = (kvt_now_ns() - s->queued_ns) / 1000;
	if (us > t->xs.io_max_us)
		KVT_NVME_SET(t, xs.io_max_us, us);
	if (t->xs.ios_queued - t->xs.ios_reaped != r->inflight)
		KVT_NVME_ADD(t, xs.io_books_wrong, 1);
}

/* Handles one completion: the slot is freed or pushed on the redo stack. */
static void complete(struct kvt_nvme *t, struct run *r, const struct kvt__nvme_cqe *c)
{
	struct kvt__nvme_engine *e = &t->eng;
	if (KVT_NEVER(c->cookie >= e->depth || !e->slots[c->cookie].busy))
		return;
	struct kvt__nvme_slot *s = &e->slots[c->cookie];
	struct kvt__nvme_job *j = &r->b->jobs[s->job];
	bool again = false;
	r->inflight--;
	books_reaped(t, r, s);
	if (c->res == (int32_t)s->io.len) {
		/* done */
	} else if (c->res > 0) {
		KVT_NVME_ADD(t, xs.short_reads, s->io.op == KVT_NVME_READ);
		KVT_NVME_ADD(t, xs.short_writes, s->io.op == KVT_NVME_WRITE);
		uint32_t adv = (uint32_t)c->res & ~(e->align - 1);
		if (!adv && ++s->zero_progress > KVT_NVME_SHORT_RETRIES) {
			KVT_NVME_ADD(t, st.err_io, 1);
			job_fail(r, j, -EIO);
		}
		s->io.off += adv, s->io.buf = (uint8_t *)s->io.buf + adv, s->io.len -= adv;
		again = true;
	} else if (c->res == 0) {
		/* end of file: the file shrank under us */
		KVT_NVME_ADD(t, st.err_io, 1);
		job_fail(r, j, -EIO);
	} else if (c->res == -EAGAIN || c->res == -EINTR) {
		if (c->res == -EAGAIN)
			KVT_NVME_ADD(t, st.err_again, 1);
		if (++s->tries > KVT_NVME_AGAIN_RETRIES)
			job_fail(r, j, -EAGAIN);
		else
			KVT_NVME_ADD(t, xs.again_retries, 1);
		again = true;
	} else {
		count_error(t, c->res);
		job_fail(r, j, c->res);
	}
	if (again && !j->err && !(r->b->stop_on_error && r->b->err)) {
		e->redo_stack[r->n_redo++] = c->cookie; /* still busy, io intact */
		return;
	}
	unsigned ji = s->job;
	if (c->res == (int32_t)s->io.len && !j->err && r->b->landed)
		r->b->landed(r->b->arg, r->b, ji, s->piece_at, s->piece_len);
	slot_release(e, r, c->cookie);
	piece_over(r, ji);
}

static bool queue_slot(struct kvt_nvme *t, struct run *r, unsigned si)
{
	struct kvt__nvme_engine *e = &t->eng;
	struct kvt__nvme_slot *s = &e->slots[si];
	s->io.cookie = si;
	if (KVT_NEVER(e->ops->queue(e->ctx, &s->io)))
		return false; /* cannot happen: the ring holds depth entries */
	s->busy = true;
	s->queued_ns = kvt_now_ns();
	KVT_NVME_ADD(t, xs.ios_queued, 1);
	r->inflight++, r->queued++;
	KVT_NVME_ADD(t, xs.fixed_ios, s->io.buf_index >= 0);
	KVT_NVME_ADD(t, xs.plain_ios, s->io.buf_index < 0);
	return true;
}

/* Queues pieces of job i while more than keep slots are free. */
static void issue(struct kvt_nvme *t, struct run *r, unsigned i, unsigned keep)
{
	struct kvt__nvme_engine *e = &t->eng;
	struct kvt__nvme_batch *b = r->b;
	struct kvt__nvme_job *j = &b->jobs[i];
	while (r->n_free > keep && job_issuable(r, j)) {
		unsigned si = e->free_stack[--r->n_free];
		struct kvt__nvme_slot *s = &e->slots[si];
		size_t len = KVT_MIN(b->piece, j->len - j->issued);
		s->io.off = j->off + j->issued;
		s->io.buf = (uint8_t *)j->buf + j->issued;
		s->io.buf_index = kvt__nvme_pins_slot(&e->pins, s->io.buf, &len, e->align);
		s->io.len = (uint32_t)len;
		s->io.op = j->op;
		s->job = i, s->tries = 0, s->zero_progress = 0;
		s->piece_at = j->issued, s->piece_len = (uint32_t)len;
		if (!queue_slot(t, r, si)) {
			e->free_stack[r->n_free++] = si;
			job_fail(r, j, -EIO);
			return;
		}
		j->issued += len;
		j->inflight++;
	}
}

/* Queues redo pieces first, then new pieces of urgent jobs, then of the other ready jobs in
 * job order, while slots are free. A batch that polls for urgent jobs keeps one slot for them
 * (of two or more), so that one starts at once even when every other slot waits on a slow
 * write. */
static void refill(struct kvt_nvme *t, struct run *r)
{
	struct kvt__nvme_engine *e = &t->eng;
	struct kvt__nvme_batch *b = r->b;
	while (r->n_redo) {
		unsigned si = e->redo_stack[--r->n_redo];
		struct kvt__nvme_job *j = &b->jobs[e->slots[si].job];
		if (!j->err && !(b->stop_on_error && b->err) && queue_slot(t, r, si))
			continue;
		job_fail(r, j, j->err ? j->err : b->err ? b->err : -EIO);
		unsigned ji = e->slots[si].job;
		slot_release(e, r, si);
		piece_over(r, ji);
	}
	if (r->urgent) { /* cleared once none has a piece left to issue */
		r->urgent = false;
		for (unsigned i = r->ufirst; i < b->n; i++) {
			if (!b->jobs[i].urgent)
				continue;
			issue(t, r, i, 0);
			r->urgent |= job_issuable(r, &b->jobs[i]);
		}
	}
	for (unsigned i = r->first; i < b->n && r->n_free > r->keep; i++) {
		struct kvt__nvme_job *j = &b->jobs[i];
		if (i == r->first && (j->done || j->issued == j->len))
			r->first++;
		issue(t, r, i, j->urgent ? 0 : r->keep);
	}
}

/* Takes completions: at least min, or (with b->poll and a backend that can) whatever comes
 * within KVT_NVME_POLL_NS, so that the run asks b->poll again. */
static void reap(struct kvt_nvme *t, struct run *r, unsigned min)
{
	struct kvt__nvme_engine *e = &t->eng;
	int n = min && r->b->poll && e->ops->reap_timed
	            ? e->ops->reap_timed(e->ctx, e->cqes, e->depth, KVT_NVME_POLL_NS)
	            : e->ops->reap(e->ctx, e->cqes, e->depth, min);
	if (n < 0) {
		/* the ring itself failed: nothing else is safe; the I/Os are still the kernel's */
		KVT_PANIC("nvme: reap failed with I/O in flight");
	}
	for (int i = 0; i < n; i++)
		complete(t, r, &e->cqes[i]);
}

/* Nothing in flight and nothing to issue: finish what can never run, or whose work is over. */
static bool finish_stuck(struct run *r)
{
	struct kvt__nvme_batch *b = r->b;
	bool any = false;
	for (unsigned i = 0; i < b->n; i++) {
		struct kvt__nvme_job *j = &b->jobs[i];
		if (j->done || j->inflight || job_issuable(r, j))
			continue;
		if (!j->err && j->issued < j->len)
			j->err = b->stop_on_error && b->err ? b->err : -ECANCELED;
		job_finish(r, i);
		any = true;
		if (r->first < b->n && job_issuable(r, &b->jobs[r->first]))
			break; /* the callback readied work: run it first */
	}
	return any;
}

static int check_job(struct kvt_nvme *t, const struct kvt__nvme_job *j)
{
	if ((j->off | j->len) % t->eng.align || (uintptr_t)j->buf % KVT_TIER_ALIGN || !j->len) {
		KVT_NVME_ADD(t, xs.misaligned, 1);
		return -EINVAL;
	}
	return 0;
}

/* Takes jobs[from..n) into the run: resets their state, fails the misaligned, finishes the
 * empty. */
static void jobs_start(struct kvt_nvme *t, struct run *r, unsigned from)
{
	struct kvt__nvme_batch *b = r->b;
	unsigned n = b->n;
	r->left += n - from;
	for (unsigned i = from; i < n; i++) {
		struct kvt__nvme_job *j = &b->jobs[i];
		j->issued = 0, j->inflight = 0, j->err = 0, j->done = false;
		if (j->len && (j->err = check_job(t, j)))
			b->err = b->err ? b->err : j->err;
		if (j->urgent && !r->urgent)
			r->urgent = true, r->ufirst = i;
	}
	for (unsigned i = from; i < n; i++) /* empty jobs are done at once */
		if (!b->jobs[i].len && !b->jobs[i].done)
			job_finish(r, i);
}

int kvt__nvme_run(struct kvt_nvme *t, struct kvt__nvme_batch *b)
{
	struct kvt__nvme_engine *e = &t->eng;
	struct run r = {.b = b, .keep = b->poll && e->depth > 1};
	b->err = 0;
	jobs_start(t, &r, 0);
	b->piece = KVT_ALIGN_UP(KVT_MAX(b->piece, e->min_piece), (size_t)e->align);
	b->piece = KVT_MIN(b->piece, (size_t)1 << 30);
	for (unsigned i = 0; i < e->depth; i++)
		e->free_stack[i] = e->depth - 1 - i, e->slots[i].busy = false;
	r.n_free = e->depth;
	for (;;) {
		if (b->poll) {
			unsigned from = b->n;
			if (b->poll(b->arg, b))
				jobs_start(t, &r, from);
		}
		refill(t, &r);
		if (b->more && r.n_free > r.keep) { /* room left: let the batch grow */
			unsigned from = b->n;
			if (b->more(b->arg, b)) {
				jobs_start(t, &r, from);
				refill(t, &r);
			}
		}
		if (!r.left)
			break;
		KVT_NVME_SET(t, st.queue_depth, r.inflight);
		if (r.queued) {
			int rc = e->ops->submit(e->ctx);
			if (rc == 0) {
				r.queued = 0;
			} else if (rc == -EAGAIN || rc == -EBUSY) {
				KVT_NVME_ADD(t, xs.submit_busy, 1);
				if (r.inflight > r.queued) {
					reap(t, &r, 1);
				} else {
					struct timespec ts = {0, 50000};
					nanosleep(&ts, NULL);
				}
				continue;
			} else {
				KVT_PANIC("nvme: submit failed with I/O queued");
			}
		}
		if (r.inflight)
			reap(t, &r, 1);
		else if (!r.n_redo && !finish_stuck(&r) && r.left)
			KVT_PANIC("nvme: batch stuck");
	}
	KVT_NVME_SET(t, st.queue_depth, 0);
	return b->err;
}

int kvt__nvme_rw(struct kvt_nvme *t, int op, const struct kvt__nvme_seg *segs, unsigned n)
{
	struct kvt__nvme_job jobs[KVT_NVME_RW_MAX];
	size_t total = 0;
	if (KVT_NEVER(n > KVT_NVME_RW_MAX))
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		jobs[i] = (struct kvt__nvme_job){.off = segs[i].off,
		                                 .buf = segs[i].buf,
		                                 .len = segs[i].len,
		                                 .op = (uint8_t)op,
		                                 .ready = true};
		int rc = check_job(t, &jobs[i]);
		if (rc)
			return rc; /* nothing misaligned reaches the kernel */
		total += segs[i].len;
	}
	struct kvt__nvme_batch b = {.jobs = jobs, .n = n, .stop_on_error = true};
	b.piece = (total + t->eng.depth - 1) / t->eng.depth;
	return kvt__nvme_run(t, &b);
}
