/*
 * io_pio.c -- the pread/pwrite backend: a small thread pool, for kernels or sandboxes without
 * io_uring (or KVTIER_NVME_BACKEND=pio).
 *
 * queue() appends to a pending ring; submit() moves the pending I/Os to the workers' ring and
 * wakes them; each worker does one pread/pwrite (a short transfer is reported as short, like a
 * CQE, so the engine's resubmission logic is the same for both backends) and posts a completion.
 * All three rings hold at most depth entries, so nothing here allocates after open.
 * Lock: mu guards work/done and the counters; workers block on cv_work, reap on cv_done.
 */
#include "nvme_int.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define PIO_MAX_THREADS 8

struct pio_ctx {
	int fd;
	unsigned depth, n_threads;
	pthread_mutex_t mu;
	pthread_cond_t cv_work, cv_done;
	struct kvt__nvme_io *pending; /* queued, not submitted (driving thread only) */
	unsigned n_pending;
	struct kvt__nvme_io *work; /* ring, mu */
	unsigned work_head, work_n;
	struct kvt__nvme_cqe *done; /* ring, mu */
	unsigned done_head, done_n;
	bool stop;
	pthread_t threads[PIO_MAX_THREADS];
};

static void *pio_worker(void *arg)
{
	struct pio_ctx *c = arg;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->work_n && !c->stop)
			pthread_cond_wait(&c->cv_work, &c->mu);
		if (c->stop)
			break;
		struct kvt__nvme_io io = c->work[c->work_head];
		c->work_head = (c->work_head + 1) % c->depth;
		c->work_n--;
		pthread_mutex_unlock(&c->mu);
		ssize_t n;
		do {
			n = io.op == KVT_NVME_READ ? pread(c->fd, io.buf, io.len, (off_t)io.off)
			                           : pwrite(c->fd, io.buf, io.len, (off_t)io.off);
		} while (n < 0 && errno == EINTR);
		pthread_mutex_lock(&c->mu);
		unsigned slot = (c->done_head + c->done_n) % c->depth;
		c->done[slot].cookie = io.cookie;
		c->done[slot].res = n < 0 ? -errno : (int32_t)n;
		c->done_n++;
		pthread_cond_signal(&c->cv_done);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static void pio_close(void *ctx)
{
	struct pio_ctx *c = ctx;
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_cond_broadcast(&c->cv_work);
	pthread_mutex_unlock(&c->mu);
	for (unsigned i = 0; i < c->n_threads; i++)
		pthread_join(c->threads[i], NULL);
	pthread_cond_destroy(&c->cv_done);
	pthread_cond_destroy(&c->cv_work);
	pthread_mutex_destroy(&c->mu);
	free(c->done);
	free(c->work);
	free(c->pending);
	free(c);
}

static int pio_open(const struct kvt__nvme_io_cfg *cfg, void **out)
{
	struct pio_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = cfg->fd;
	c->depth = cfg->depth;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv_work, NULL);
	pthread_cond_init(&c->cv_done, NULL);
	c->pending = calloc(c->depth, sizeof(*c->pending));
	c->work = calloc(c->depth, sizeof(*c->work));
	c->done = calloc(c->depth, sizeof(*c->done));
	if (!c->pending || !c->work || !c->done) {
		pio_close(c);
		return -ENOMEM;
	}
	unsigned want = c->depth < PIO_MAX_THREADS ? c->depth : PIO_MAX_THREADS;
	for (; c->n_threads < want; c->n_threads++) {
		if (pthread_create(&c->threads[c->n_threads], NULL, pio_worker, c))
			break;
	}
	if (!c->n_threads) {
		pio_close(c);
		return -EAGAIN;
	}
	*out = c;
	return 0;
}

static int pio_queue(void *ctx, const struct kvt__nvme_io *io)
{
	struct pio_ctx *c = ctx;
	if (c->n_pending == c->depth)
		return -EBUSY;
	c->pending[c->n_pending++] = *io;
	return 0;
}

static int pio_submit(void *ctx)
{
	struct pio_ctx *c = ctx;
	pthread_mutex_lock(&c->mu);
	unsigned i = 0;
	for (; i < c->n_pending && c->work_n + c->done_n < c->depth; i++) {
		c->work[(c->work_head + c->work_n) % c->depth] = c->pending[i];
		c->work_n++;
	}
	pthread_cond_broadcast(&c->cv_work);
	pthread_mutex_unlock(&c->mu);
	memmove(c->pending, c->pending + i, (c->n_pending - i) * sizeof(*c->pending));
	c->n_pending -= i;
	return c->n_pending ? -EBUSY : 0;
}

static int pio_reap(void *ctx, struct kvt__nvme_cqe *out, unsigned max, unsigned min)
{
	struct pio_ctx *c = ctx;
	unsigned n = 0;
	pthread_mutex_lock(&c->mu);
	while (c->done_n < min && c->done_n < max)
		pthread_cond_wait(&c->cv_done, &c->mu);
	while (n < max && c->done_n) {
		out[n++] = c->done[c->done_head];
		c->done_head = (c->done_head + 1) % c->depth;
		c->done_n--;
	}
	pthread_mutex_unlock(&c->mu);
	return (int)n;
}

static int pio_reap_timed(void *ctx, struct kvt__nvme_cqe *out, unsigned max, uint64_t wait_ns)
{
	struct pio_ctx *c = ctx;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until); /* the condition variable's clock */
	until.tv_sec += (time_t)(wait_ns / 1000000000u);
	until.tv_nsec += (long)(wait_ns % 1000000000u);
	if (until.tv_nsec >= 1000000000)
		until.tv_sec++, until.tv_nsec -= 1000000000;
	pthread_mutex_lock(&c->mu);
	while (!c->done_n && pthread_cond_timedwait(&c->cv_done, &c->mu, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&c->mu);
	return pio_reap(ctx, out, max, 0);
}

const struct kvt__nvme_io_ops kvt__nvme_io_pio = {
    .version = KVT_NVME_IO_OPS_VERSION,
    .name = "pio",
    .open = pio_open,
    .close = pio_close,
    .buffer_table = NULL,
    .buffer_set = NULL,
    .queue = pio_queue,
    .submit = pio_submit,
    .reap = pio_reap,
    .reap_timed = pio_reap_timed,
};
