/*
 * engine.c -- one synchronous request as many in-flight I/Os.
 *
 * A request is a few aligned segments (a record, its terminator block). The engine cuts them
 * into pieces of max(min_piece, size/depth) so that a single 32 MiB record keeps depth I/Os in
 * flight, queues as many as the depth allows, submits them in one batch, and refills as
 * completions arrive. Every I/O gets a slot (cookie = slot index): depth slots are allocated at
 * open, so the data path allocates nothing.
 *
 * What a completion can say, and what the engine does:
 *   full length         the piece is done
 *   short (0 < n < len) resubmit the rest from n rounded down to the alignment (the kernel only
 *                       ever sees aligned offsets, lengths and buffers); a piece that makes no
 *                       progress KVT_NVME_SHORT_RETRIES times fails with -EIO
 *   -EAGAIN, -EINTR     resubmit, at most KVT_NVME_AGAIN_RETRIES times, then -EAGAIN
 *   -ENOSPC, -EIO, ...  the request fails with the first error; pieces already in flight are
 *                       still waited for (their buffers are the caller's) but not resubmitted
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
	if (!e->slots || !e->cqes) {
		free(e->slots), free(e->cqes);
		return -ENOMEM;
	}
	int rc = ops->open(cfg, &e->ctx);
	if (rc) {
		free(e->slots), free(e->cqes);
		e->slots = NULL, e->cqes = NULL;
	}
	return rc;
}

void kvt__nvme_engine_close(struct kvt__nvme_engine *e)
{
	if (e->ops && e->ctx)
		e->ops->close(e->ctx);
	e->ctx = NULL;
	free(e->slots), free(e->cqes);
	e->slots = NULL, e->cqes = NULL;
}

int kvt__nvme_engine_register(struct kvt__nvme_engine *e, void *base, size_t len)
{
	if (!e->ops->register_buffers)
		return -EOPNOTSUPP;
	unsigned n = e->n_regbuf;
	for (size_t done = 0; done < len; done += KVT_NVME_MAX_REGBUF) {
		if (n == KVT_NVME_MAX_REGBUFS)
			return -E2BIG;
		e->regbuf[n].iov_base = (uint8_t *)base + done;
		e->regbuf[n].iov_len = KVT_MIN(len - done, (size_t)KVT_NVME_MAX_REGBUF);
		n++;
	}
	int rc = e->ops->register_buffers(e->ctx, e->regbuf, n);
	if (rc) {
		/* the old set was unregistered: register it again, without the new region */
		if (e->n_regbuf && e->ops->register_buffers(e->ctx, e->regbuf, e->n_regbuf))
			e->n_regbuf = 0;
		return rc;
	}
	e->n_regbuf = n;
	return 0;
}

static int16_t regbuf_index(const struct kvt__nvme_engine *e, const void *buf, size_t len)
{
	uintptr_t b = (uintptr_t)buf;
	for (unsigned i = 0; i < e->n_regbuf; i++) {
		uintptr_t base = (uintptr_t)e->regbuf[i].iov_base;
		if (b >= base && b + len <= base + e->regbuf[i].iov_len)
			return (int16_t)i;
	}
	return -1;
}

/* The request being performed: a cursor over its segments and its outcome. */
struct req {
	const struct kvt__nvme_seg *segs;
	unsigned n_segs, seg;
	size_t seg_done, piece;
	int op, err;
	unsigned busy, queued; /* slots in use; queued but not yet submitted */
	unsigned requeue;      /* slots waiting to be queued again */
};

static bool next_piece(struct kvt_nvme *t, struct req *r, struct kvt__nvme_io *io)
{
	while (r->seg < r->n_segs && r->seg_done == r->segs[r->seg].len)
		r->seg++, r->seg_done = 0;
	if (r->seg == r->n_segs)
		return false;
	const struct kvt__nvme_seg *s = &r->segs[r->seg];
	size_t len = KVT_MIN(r->piece, s->len - r->seg_done);
	io->off = s->off + r->seg_done;
	io->buf = (uint8_t *)s->buf + r->seg_done;
	io->len = (uint32_t)len;
	io->op = (uint8_t)r->op;
	io->buf_index = regbuf_index(&t->eng, io->buf, len);
	r->seg_done += len;
	return true;
}

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

static void fail(struct req *r, int err)
{
	if (!r->err)
		r->err = err;
}

/* Handles one completion; the slot is freed or marked for requeue. */
static void complete(struct kvt_nvme *t, struct req *r, const struct kvt__nvme_cqe *c)
{
	struct kvt__nvme_engine *e = &t->eng;
	if (KVT_NEVER(c->cookie >= e->depth || !e->slots[c->cookie].busy))
		return;
	struct kvt__nvme_slot *s = &e->slots[c->cookie];
	bool again = false;
	if (c->res == (int32_t)s->io.len) {
		/* done */
	} else if (c->res > 0) {
		KVT_NVME_ADD(t, xs.short_reads, r->op == KVT_NVME_READ);
		KVT_NVME_ADD(t, xs.short_writes, r->op == KVT_NVME_WRITE);
		uint32_t adv = (uint32_t)c->res & ~(e->align - 1);
		if (!adv && ++s->zero_progress > KVT_NVME_SHORT_RETRIES) {
			KVT_NVME_ADD(t, st.err_io, 1);
			fail(r, -EIO);
		}
		s->io.off += adv, s->io.buf = (uint8_t *)s->io.buf + adv, s->io.len -= adv;
		again = true;
	} else if (c->res == 0) {
		/* end of file: the file shrank under us */
		KVT_NVME_ADD(t, st.err_io, 1);
		fail(r, -EIO);
	} else if (c->res == -EAGAIN || c->res == -EINTR) {
		if (c->res == -EAGAIN)
			KVT_NVME_ADD(t, st.err_again, 1);
		if (++s->tries > KVT_NVME_AGAIN_RETRIES)
			fail(r, -EAGAIN);
		else
			KVT_NVME_ADD(t, xs.again_retries, 1);
		again = true;
	} else {
		count_error(t, c->res);
		fail(r, c->res);
	}
	if (again && !r->err) {
		r->requeue++;
		s->busy = false; /* picked up again by refill() with its io intact */
		s->tries |= 1u << 31;
		return;
	}
	s->busy = false;
	s->tries = 0, s->zero_progress = 0;
	r->busy--;
}

/* Queues pieces (requeued ones first) while slots are free. */
static void refill(struct kvt_nvme *t, struct req *r)
{
	struct kvt__nvme_engine *e = &t->eng;
	for (unsigned i = 0; i < e->depth; i++) {
		struct kvt__nvme_slot *s = &e->slots[i];
		if (s->busy)
			continue;
		bool redo = s->tries & (1u << 31);
		if (redo) {
			if (r->err) { /* failed meanwhile: drop the rest */
				s->tries = 0, s->zero_progress = 0;
				r->requeue--, r->busy--;
				continue;
			}
		} else {
			if (r->err || r->busy == e->depth || !next_piece(t, r, &s->io))
				continue;
			s->tries = 0, s->zero_progress = 0;
		}
		s->io.cookie = i;
		if (KVT_NEVER(e->ops->queue(e->ctx, &s->io))) {
			/* cannot happen: the ring holds depth entries; undo and give up the piece
			 */
			fail(r, -EIO);
			if (redo)
				s->tries = 0, r->requeue--, r->busy--;
			continue;
		}
		if (redo) {
			s->tries &= ~(1u << 31);
			r->requeue--;
		} else {
			r->busy++;
		}
		s->busy = true;
		r->queued++;
		KVT_NVME_ADD(t, xs.fixed_ios, s->io.buf_index >= 0);
		KVT_NVME_ADD(t, xs.plain_ios, s->io.buf_index < 0);
	}
}

static void reap(struct kvt_nvme *t, struct req *r, unsigned min)
{
	struct kvt__nvme_engine *e = &t->eng;
	int n = e->ops->reap(e->ctx, e->cqes, e->depth, min);
	if (n < 0) {
		/* the ring itself failed: nothing else is safe; the I/Os are still the kernel's */
		KVT_PANIC("nvme: reap failed with I/O in flight");
	}
	for (int i = 0; i < n; i++)
		complete(t, r, &e->cqes[i]);
}

int kvt__nvme_rw(struct kvt_nvme *t, int op, const struct kvt__nvme_seg *segs, unsigned n)
{
	struct kvt__nvme_engine *e = &t->eng;
	size_t total = 0;
	for (unsigned i = 0; i < n; i++) {
		if ((segs[i].off | segs[i].len) % e->align ||
		    (uintptr_t)segs[i].buf % KVT_TIER_ALIGN || !segs[i].len ||
		    segs[i].len > UINT32_MAX) {
			KVT_NVME_ADD(t, xs.misaligned, 1);
			return -EINVAL;
		}
		total += segs[i].len;
	}
	struct req r = {.segs = segs, .n_segs = n, .op = op};
	r.piece = KVT_MAX(e->min_piece,
	                  KVT_ALIGN_UP((total + e->depth - 1) / e->depth, (size_t)e->align));
	for (;;) {
		refill(t, &r);
		KVT_NVME_SET(t, st.queue_depth, r.busy);
		if (r.queued) {
			int rc = e->ops->submit(e->ctx);
			if (rc == 0) {
				r.queued = 0;
			} else if (rc == -EAGAIN || rc == -EBUSY) {
				KVT_NVME_ADD(t, xs.submit_busy, 1);
				unsigned submitted = r.busy - r.requeue - r.queued;
				if (submitted) {
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
		if (!r.busy)
			break;
		if (r.busy > r.requeue)
			reap(t, &r, 1);
	}
	KVT_NVME_SET(t, st.queue_depth, 0);
	return r.err;
}
