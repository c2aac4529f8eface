/*
 * io_fault.c -- a fault-injecting backend that wraps a real one (RELIABILITY.md F6, F8, D6).
 *
 * The real I/O always happens; what the injector changes is what the tier is told: a completion
 * may turn into -EIO, -EAGAIN, -ENOSPC (writes) or a short transfer of an odd length (so the
 * engine must realign before it resubmits), and a submit may answer -EAGAIN/-EBUSY without
 * submitting anything (backpressure from io_uring_enter). Every injection is counted in the
 * caller's struct kvt__nvme_fault, so tests can require the tier's counters to equal them.
 * It also counts every I/O that reaches it misaligned (it sits just above the kernel).
 * A slow device (RELIABILITY L7): with read_delay_us, a reap that returns reads takes that much
 * longer, so the tier's thread waits as it would on a device in gray failure. With
 * write_delay_us a write completes that long after it was queued: its completion is held back
 * until then, so the writes in flight together complete together and a read issued beside them
 * completes as it lands, as on a device whose writes are slow (host copies stay dirty that
 * long: kvtierd's demotions). A reap waits for the earliest held write, or a real completion.
 * A torn write (RELIABILITY D4): with tear_at, the tear_at-th write lands as a random subset of
 * its 4 KiB blocks and the process exits at once, as when the power goes out mid-write (only
 * in a forked child of a test).
 * The knobs are read on every call: a test may arm, disarm or change rates at any time; with
 * arm_file, a test in another process arms it by creating that file and disarms it by removing
 * it (the daemon's KVTIER_NVME_FAULT_FILE).
 */
#include "nvme_int.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t fault_rand(struct kvt__nvme_fault *f)
{
	/* xorshift64*: deterministic per seed */
	f->rng ^= f->rng >> 12, f->rng ^= f->rng << 25, f->rng ^= f->rng >> 27;
	return (uint32_t)((f->rng * 2685821657736338717ull) >> 32);
}

static bool roll(struct kvt__nvme_fault *f, uint32_t ppm)
{
	return ppm && fault_rand(f) % 1000000u < ppm;
}

static int fault_open(const struct kvt__nvme_io_cfg *cfg, void **out)
{
	struct kvt__nvme_fault *f = cfg->arg;
	if (!f || !cfg->inner)
		return -EINVAL;
	f->inner = cfg->inner;
	f->depth = cfg->depth;
	f->fd = cfg->fd;
	f->rng = f->seed ? f->seed : 0x9e3779b97f4a7c15ull;
	f->op_of = calloc(cfg->depth, 1);
	f->len_of = calloc(cfg->depth, sizeof(*f->len_of));
	f->queued_ns = calloc(cfg->depth, sizeof(*f->queued_ns));
	f->held = calloc(cfg->depth, sizeof(*f->held));
	f->n_held = 0;
	int rc = f->op_of && f->len_of && f->queued_ns && f->held
	             ? f->inner->open(cfg, &f->inner_ctx)
	             : -ENOMEM;
	if (rc) {
		free(f->op_of), free(f->len_of), free(f->queued_ns), free(f->held);
		f->op_of = NULL, f->len_of = NULL, f->queued_ns = NULL, f->held = NULL;
		return rc;
	}
	*out = f;
	return 0;
}

static void fault_close(void *ctx)
{
	struct kvt__nvme_fault *f = ctx;
	if (!f)
		return;
	f->inner->close(f->inner_ctx);
	free(f->op_of), free(f->len_of), free(f->queued_ns), free(f->held);
	f->op_of = NULL, f->len_of = NULL, f->queued_ns = NULL, f->held = NULL;
}

static int fault_buffer_table(void *ctx, unsigned n)
{
	struct kvt__nvme_fault *f = ctx;
	return f->inner->buffer_table ? f->inner->buffer_table(f->inner_ctx, n) : -EOPNOTSUPP;
}

static int fault_buffer_set(void *ctx, unsigned slot, const struct iovec *iov)
{
	struct kvt__nvme_fault *f = ctx;
	return f->inner->buffer_set ? f->inner->buffer_set(f->inner_ctx, slot, iov) : -EOPNOTSUPP;
}

/* The power goes out while io is being written: some of its 4 KiB blocks land, in no order. */
static _Noreturn void tear(struct kvt__nvme_fault *f, const struct kvt__nvme_io *io)
{
	for (uint32_t b = 0; b < io->len / 4096u; b++)
		if (fault_rand(f) & 1 &&
		    pwrite(f->fd, (const uint8_t *)io->buf + (size_t)b * 4096u, 4096,
		           (off_t)(io->off + (uint64_t)b * 4096u)) != 4096)
			break;
	_exit(KVT_NVME_TORN_EXIT);
}

static int fault_queue(void *ctx, const struct kvt__nvme_io *io)
{
	struct kvt__nvme_fault *f = ctx;
	unsigned a = f->align ? f->align : 4096;
	if (f->arm_file)
		f->armed = !access(f->arm_file, F_OK);
	if (io->off % a || io->len % a || (uintptr_t)io->buf % 4096)
		f->misaligned++;
	if (io->cookie < f->depth) {
		f->op_of[io->cookie] = io->op;
		f->len_of[io->cookie] = io->len;
		f->queued_ns[io->cookie] = now_ns();
	}
	if (f->armed && io->op == KVT_NVME_WRITE && f->tear_at &&
	    (!f->tear_len || io->len == f->tear_len) &&
	    (!f->tear_period ||
	     (io->off >= f->tear_base && (io->off - f->tear_base) % f->tear_period == 0)) &&
	    ++f->writes_queued == f->tear_at)
		tear(f, io);
	return f->inner->queue(f->inner_ctx, io);
}

static int fault_submit(void *ctx)
{
	struct kvt__nvme_fault *f = ctx;
	if (f->armed && roll(f, f->ppm_busy)) {
		f->busy++;
		return fault_rand(f) & 1 ? -EAGAIN : -EBUSY;
	}
	return f->inner->submit(f->inner_ctx);
}

static void inject(struct kvt__nvme_fault *f, struct kvt__nvme_cqe *c)
{
	bool wr = c->cookie < f->depth && f->op_of[c->cookie] == KVT_NVME_WRITE;
	f->ios++;
	if (!f->armed || c->res <= 0)
		return;
	uint32_t r = fault_rand(f) % 1000000u;
	uint32_t edge = f->ppm_eio;
	if (r < edge) {
		c->res = -EIO;
		*(wr ? &f->eio_w : &f->eio_r) += 1;
		return;
	}
	if (r < (edge += f->ppm_again)) {
		c->res = -EAGAIN;
		f->again++;
		return;
	}
	if (wr && r < (edge += f->ppm_nospc)) {
		c->res = -ENOSPC;
		f->nospc++;
		return;
	}
	if (r < edge + f->ppm_short && c->res > 1) {
		/* an odd length on purpose: the engine must round down to the alignment */
		c->res = (int32_t)(1 + fault_rand(f) % (uint32_t)(c->res - 1));
		*(wr ? &f->short_w : &f->short_r) += 1;
	}
}

/* When the write of cookie completes on the slow device. */
static uint64_t write_due(const struct kvt__nvme_fault *f, uint32_t cookie)
{
	return f->queued_ns[cookie] + (uint64_t)f->write_delay_us * 1000u;
}

static bool slow_write(const struct kvt__nvme_fault *f, uint32_t cookie)
{
	return f->armed && f->write_delay_us && cookie < f->depth &&
	       f->op_of[cookie] == KVT_NVME_WRITE;
}

/* Takes the got completions the inner backend wrote at out[n..]: writes not yet due are held,
 * the rest kept (injected); then held writes now due join, up to max. @return : n after. */
static unsigned collect(struct kvt__nvme_fault *f, struct kvt__nvme_cqe *out, unsigned n,
                        unsigned got, unsigned max)
{
	uint64_t now = now_ns();
	bool reads = false;
	for (unsigned i = n, end = n + got; i < end; i++) {
		struct kvt__nvme_cqe c = out[i];
		if (slow_write(f, c.cookie) && write_due(f, c.cookie) > now &&
		    !KVT_NEVER(f->n_held == f->depth)) {
			f->held[f->n_held++] = c;
			continue;
		}
		reads |= c.cookie < f->depth && f->op_of[c.cookie] == KVT_NVME_READ;
		inject(f, &c);
		out[n++] = c;
	}
	for (unsigned i = 0; i < f->n_held && n < max;) {
		if (slow_write(f, f->held[i].cookie) && write_due(f, f->held[i].cookie) > now) {
			i++;
			continue;
		}
		struct kvt__nvme_cqe c = f->held[i];
		f->held[i] = f->held[--f->n_held];
		inject(f, &c);
		out[n++] = c;
	}
	if (f->armed && f->read_delay_us && reads) /* the tier's thread waits, as on the device */
		usleep(f->read_delay_us);
	return n;
}

/* The earliest time a held write is due (UINT64_MAX: none held). */
static uint64_t next_due(const struct kvt__nvme_fault *f)
{
	uint64_t due = UINT64_MAX;
	for (unsigned i = 0; i < f->n_held; i++)
		if (write_due(f, f->held[i].cookie) < due)
			due = write_due(f, f->held[i].cookie);
	return due;
}

/* At least min completions, or as many as came by deadline (UINT64_MAX: none). */
static int fault_wait(struct kvt__nvme_fault *f, struct kvt__nvme_cqe *out, unsigned max,
                      unsigned min, uint64_t deadline)
{
	unsigned n = 0;
	for (bool block = false;; block = true) {
		uint64_t now = now_ns(), until = KVT_MIN(deadline, next_due(f));
		int got;
		if (!block)
			got = f->inner->reap(f->inner_ctx, out + n, max - n, 0);
		else if (until == UINT64_MAX)
			got = f->inner->reap(f->inner_ctx, out + n, max - n, 1);
		else if (until <= now)
			got = 0;
		else if (f->inner->reap_timed)
			got = f->inner->reap_timed(f->inner_ctx, out + n, max - n, until - now);
		else /* a backend that cannot wait so long: the held write's time first */
			got = 0, usleep((useconds_t)((until - now) / 1000u + 1));
		if (got < 0)
			return n ? (int)n : got;
		n = collect(f, out, n, (unsigned)got, max);
		if (n >= min || n >= max || now_ns() >= deadline)
			return (int)n;
	}
}

static int fault_reap(void *ctx, struct kvt__nvme_cqe *out, unsigned max, unsigned min)
{
	return fault_wait(ctx, out, max, min, UINT64_MAX);
}

static int fault_reap_timed(void *ctx, struct kvt__nvme_cqe *out, unsigned max, uint64_t wait_ns)
{
	return fault_wait(ctx, out, max, 1, now_ns() + wait_ns);
}

const struct kvt__nvme_io_ops kvt__nvme_io_fault = {
    .version = KVT_NVME_IO_OPS_VERSION,
    .name = "fault",
    .open = fault_open,
    .close = fault_close,
    .buffer_table = fault_buffer_table,
    .buffer_set = fault_buffer_set,
    .queue = fault_queue,
    .submit = fault_submit,
    .reap = fault_reap,
    .reap_timed = fault_reap_timed,
};
