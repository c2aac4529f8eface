/*
 * io_uring.c -- the io_uring backend of the nvme tier.
 *
 * One ring per tier, sized to the queue depth, with the tier's file registered (fixed file) and
 * an empty (sparse) buffer table whose slots pin.c fills a region at a time, where RLIMIT_MEMLOCK
 * allows (READ_FIXED/WRITE_FIXED). queue() only fills SQEs; submit() is one io_uring_enter for
 * the whole batch; reap() waits for at least min CQEs and drains what else is ready (reap_timed()
 * for one CQE at most so long). -EAGAIN/-EBUSY
 * from io_uring_enter is passed up as backpressure (the engine reaps and retries), never as an I/O
 * error.
 */
#include "nvme_int.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>

struct uring_ctx {
	struct io_uring ring;
	unsigned queued, depth;
	bool fixed_file;
	int fd;
};

bool kvt__nvme_uring_available(void)
{
	struct io_uring ring;
	if (io_uring_queue_init(2, &ring, 0))
		return false;
	io_uring_queue_exit(&ring);
	return true;
}

static int uring_open(const struct kvt__nvme_io_cfg *cfg, void **out)
{
	struct uring_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->depth = cfg->depth;
	c->fd = cfg->fd;
	struct io_uring_params p = {.flags = IORING_SETUP_COOP_TASKRUN};
	int rc = io_uring_queue_init_params(cfg->depth, &c->ring, &p);
	if (rc == -EINVAL) {
		struct io_uring_params p0 = {0};
		rc = io_uring_queue_init_params(cfg->depth, &c->ring, &p0);
	}
	if (rc)
		goto err_free;
	c->fixed_file = io_uring_register_files(&c->ring, &cfg->fd, 1) == 0;
	*out = c;
	return 0;
err_free:
	free(c);
	return rc;
}

static void uring_close(void *ctx)
{
	struct uring_ctx *c = ctx;
	if (!c)
		return;
	io_uring_queue_exit(&c->ring);
	free(c);
}

static int uring_buffer_table(void *ctx, unsigned n)
{
	struct uring_ctx *c = ctx;
	return io_uring_register_buffers_sparse(&c->ring, n);
}

static int uring_buffer_set(void *ctx, unsigned slot, const struct iovec *iov)
{
	struct uring_ctx *c = ctx;
	struct iovec none = {0};
	int rc = io_uring_register_buffers_update_tag(&c->ring, slot, iov ? iov : &none, NULL, 1);
	return rc == 1 ? 0 : rc < 0 ? rc : -EIO;
}

static int uring_queue(void *ctx, const struct kvt__nvme_io *io)
{
	struct uring_ctx *c = ctx;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
	if (!sqe)
		return -EBUSY;
	int fd = c->fixed_file ? 0 : c->fd;
	if (io->buf_index >= 0) {
		if (io->op == KVT_NVME_READ)
			io_uring_prep_read_fixed(sqe, fd, io->buf, io->len, io->off, io->buf_index);
		else
			io_uring_prep_write_fixed(sqe, fd, io->buf, io->len, io->off,
			                          io->buf_index);
	} else if (io->op == KVT_NVME_READ) {
		io_uring_prep_read(sqe, fd, io->buf, io->len, io->off);
	} else {
		io_uring_prep_write(sqe, fd, io->buf, io->len, io->off);
	}
	if (c->fixed_file)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, io->cookie);
	c->queued++;
	return 0;
}

static int uring_submit(void *ctx)
{
	struct uring_ctx *c = ctx;
	while (c->queued) {
		int rc = io_uring_submit(&c->ring);
		if (rc < 0)
			return rc == -EINTR ? -EAGAIN : rc;
		if (rc == 0)
			return -EAGAIN;
		c->queued -= (unsigned)rc < c->queued ? (unsigned)rc : c->queued;
	}
	return 0;
}

static int uring_reap(void *ctx, struct kvt__nvme_cqe *out, unsigned max, unsigned min)
{
	struct uring_ctx *c = ctx;
	struct io_uring_cqe *cqe;
	unsigned n = 0;
	while (n < max) {
		int rc =
		    n < min ? io_uring_wait_cqe(&c->ring, &cqe) : io_uring_peek_cqe(&c->ring, &cqe);
		if (rc == -EINTR)
			continue;
		if (rc == -EAGAIN)
			break;
		if (rc < 0)
			return n ? (int)n : rc;
		out[n].cookie = (uint32_t)io_uring_cqe_get_data64(cqe);
		out[n].res = cqe->res;
		n++;
		io_uring_cqe_seen(&c->ring, cqe);
	}
	return (int)n;
}

/* As reap(min 1), but waits at most wait_ns (a kernel without IORING_FEAT_EXT_ARG would need a
 * timeout SQE, which the ring has no room for: there it waits as reap does). */
static int uring_reap_timed(void *ctx, struct kvt__nvme_cqe *out, unsigned max, uint64_t wait_ns)
{
	struct uring_ctx *c = ctx;
	struct io_uring_cqe *cqe;
	if (!(c->ring.features & IORING_FEAT_EXT_ARG))
		return uring_reap(ctx, out, max, 1);
	struct __kernel_timespec ts = {.tv_sec = (long long)(wait_ns / 1000000000u),
	                               .tv_nsec = (long long)(wait_ns % 1000000000u)};
	int rc;
	do
		rc = io_uring_wait_cqe_timeout(&c->ring, &cqe, &ts);
	while (rc == -EINTR);
	if (rc == -ETIME || rc == -EAGAIN)
		return 0;
	if (rc < 0)
		return rc;
	return uring_reap(ctx, out, max, 0);
}

const struct kvt__nvme_io_ops kvt__nvme_io_uring = {
    .version = KVT_NVME_IO_OPS_VERSION,
    .name = "uring",
    .open = uring_open,
    .close = uring_close,
    .buffer_table = uring_buffer_table,
    .buffer_set = uring_buffer_set,
    .queue = uring_queue,
    .submit = uring_submit,
    .reap = uring_reap,
    .reap_timed = uring_reap_timed,
};
