/*
 * pin.c -- memory pinned for fixed I/O, a region at a time, by a thread of its own.
 *
 * Fixed I/O (READ_FIXED / WRITE_FIXED) spares the kernel pinning a buffer's pages at every I/O,
 * but a registered buffer holds all its pages in memory until the ring closes, and pinning them
 * for that long is slow: 0.7-1 ms per MiB on the test VM (FOLL_LONGTERM moves pages out of
 * movable memory). The daemon's buffers are its tenants' pools, host.bytes of mostly untouched
 * memfd each; registered whole, every tenant's first hello pinned host.bytes (1/8 of RAM by
 * default) and held the daemon's loop ~11 s per 3 GiB.
 *
 * So memory is declared (areas) and pinned a region at a time (KVT_NVME_PIN_REGION for pools):
 * the first piece of I/O that finds its region unpinned queues it for the pinning thread and goes
 * plain; once the thread has pinned it (an update of one slot of the ring's sparse buffer table),
 * every piece in it is fixed. A piece never crosses a region's end, so nothing stays plain once
 * its regions are pinned, and what is pinned is what the tier's I/O has used. The tier's own
 * thread never waits for a pin. A region that cannot be pinned (memlock, all slots in use, a
 * full queue is only a retry) is plain I/O and is not tried again; the first failure logs one
 * warning. Pinned regions stay pinned until the ring closes: their pages must not be replaced
 * meanwhile (a pool's seals forbid punching holes in it).
 *
 * Threads: the tier's driving thread reads slots (acquire) and queues regions; the loop thread
 * declares areas under the tier's lock; the pinning thread owns the free slots and publishes a
 * slot (release) only after the kernel has it. io_uring serialises buffer updates with
 * submissions inside the kernel.
 */
#include "nvme_int.h"
#include "core/log.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>

void kvt__nvme_pins_init(struct kvt__nvme_pins *p, struct kvt__nvme_engine *e)
{
	memset(p, 0, sizeof(*p));
	p->e = e;
	int rc =
	    e->ops->buffer_table ? e->ops->buffer_table(e->ctx, KVT_NVME_PIN_SLOTS) : -EOPNOTSUPP;
	if (rc) {
		if (rc != -EOPNOTSUPP) /* pio has none, and says so elsewhere */
			kvt_log(KVT_LOG_INFO, "nvme: no sparse buffer table (%s): no fixed I/O",
			        strerror(-rc));
		return;
	}
	p->free_slots = malloc(KVT_NVME_PIN_SLOTS * sizeof(*p->free_slots));
	if (!p->free_slots)
		return;
	for (unsigned i = 0; i < KVT_NVME_PIN_SLOTS; i++)
		p->free_slots[i] = (uint16_t)(KVT_NVME_PIN_SLOTS - 1 - i); /* 0 on top */
	p->n_free_slots = KVT_NVME_PIN_SLOTS;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	pthread_cond_init(&p->idle, NULL);
	p->table = true;
}

void kvt__nvme_pins_close(struct kvt__nvme_pins *p)
{
	if (!p->table)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (p->started)
		pthread_join(p->thread, NULL);
	for (unsigned i = 0; i < p->n_areas; i++)
		free(p->areas[i].slot);
	free(p->free_slots);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	pthread_cond_destroy(&p->idle);
	memset(p, 0, sizeof(*p));
}

/* Pins region r of area a into a free slot, or marks it failed. */
static void pin_one(struct kvt__nvme_pins *p, struct kvt__nvme_area *a, uint32_t r)
{
	struct iovec iov = {.iov_base = a->base + (size_t)r * a->region,
	                    .iov_len = KVT_MIN(a->region, a->len - (size_t)r * a->region)};
	int rc = p->n_free_slots
	             ? p->e->ops->buffer_set(p->e->ctx, p->free_slots[p->n_free_slots - 1], &iov)
	             : -ENOSPC;
	if (!rc) {
		atomic_fetch_add_explicit(&p->pinned_bytes, iov.iov_len, memory_order_relaxed);
		atomic_fetch_add_explicit(&p->pins, 1, memory_order_relaxed);
		atomic_store_explicit(&a->slot[r], p->free_slots[--p->n_free_slots],
		                      memory_order_release);
		return;
	}
	atomic_store_explicit(&a->slot[r], KVT_NVME_PIN_FAILED, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->failures, 1, memory_order_relaxed);
	if (!p->warned) {
		struct rlimit rl = {0};
		getrlimit(RLIMIT_MEMLOCK, &rl);
		p->warned = true;
		kvt_log(KVT_LOG_WARN,
		        "nvme: cannot pin %zu bytes for fixed I/O (%s; RLIMIT_MEMLOCK %llu): plain "
		        "I/O from them. Raise the limit (LimitMEMLOCK=, ulimit -l) or grant "
		        "CAP_IPC_LOCK",
		        iov.iov_len, strerror(-rc), (unsigned long long)rl.rlim_cur);
	}
}

static void *pinner(void *arg)
{
	struct kvt__nvme_pins *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->n && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop)
			break;
		struct kvt__nvme_area *a = &p->areas[p->queue[p->head].area];
		uint32_t r = p->queue[p->head].region;
		p->head = (p->head + 1) % KVT_NVME_PIN_QUEUE, p->n--, p->busy++;
		pthread_mutex_unlock(&p->mu);
		pin_one(p, a, r);
		pthread_mutex_lock(&p->mu);
		if (!--p->busy && !p->n)
			pthread_cond_broadcast(&p->idle);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int kvt__nvme_pins_add(struct kvt__nvme_pins *p, void *base, size_t len, size_t region)
{
	if (!p->table)
		return -EOPNOTSUPP;
	unsigned n_areas = atomic_load_explicit(&p->n_areas, memory_order_relaxed);
	if (n_areas == KVT_NVME_MAX_AREAS)
		return -E2BIG;
	if (!len)
		return -EINVAL;
	region = region ? KVT_MIN(region, len) : len;
	size_t n = (len + region - 1) / region;
	if (n > UINT32_MAX)
		return -E2BIG;
	_Atomic int32_t *slot = malloc(n * sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	for (size_t r = 0; r < n; r++)
		atomic_init(&slot[r], KVT_NVME_UNPINNED);
	pthread_mutex_lock(&p->mu);
	if (!p->started) {
		if (pthread_create(&p->thread, NULL, pinner, p)) {
			pthread_mutex_unlock(&p->mu);
			free(slot);
			return -EAGAIN;
		}
		p->started = true;
	}
	p->areas[n_areas] =
	    (struct kvt__nvme_area){.base = base, .len = len, .region = region, .slot = slot};
	atomic_store_explicit(&p->n_areas, n_areas + 1, memory_order_release);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/* Queues region r of area i for the pinning thread (it is ours: we set it to PINNING). */
static void queue_pin(struct kvt__nvme_pins *p, unsigned i, uint32_t r)
{
	pthread_mutex_lock(&p->mu);
	if (p->n == KVT_NVME_PIN_QUEUE) {
		/* full: a later piece asks again */
		atomic_store_explicit(&p->areas[i].slot[r], KVT_NVME_UNPINNED,
		                      memory_order_relaxed);
	} else {
		unsigned at = (p->head + p->n++) % KVT_NVME_PIN_QUEUE;
		p->queue[at].area = (uint16_t)i, p->queue[at].region = r;
		pthread_cond_signal(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
}

int16_t kvt__nvme_pins_slot(struct kvt__nvme_pins *p, const void *buf, size_t *len, unsigned align)
{
	uintptr_t b = (uintptr_t)buf;
	unsigned n_areas = atomic_load_explicit(&p->n_areas, memory_order_acquire);
	for (unsigned i = 0; i < n_areas; i++) {
		struct kvt__nvme_area *a = &p->areas[i];
		uintptr_t base = (uintptr_t)a->base;
		if (b < base || b >= base + a->len)
			continue;
		size_t r = (b - base) / a->region;
		size_t end = KVT_MIN((r + 1) * a->region, a->len) - (b - base);
		if (*len > end) {
			if (end % align)
				return -1; /* cannot cut here: one plain piece */
			*len = end;
		}
		int32_t s = atomic_load_explicit(&a->slot[r], memory_order_acquire);
		if (s == KVT_NVME_UNPINNED) { /* only this (driving) thread leaves UNPINNED */
			atomic_store_explicit(&a->slot[r], KVT_NVME_PINNING, memory_order_relaxed);
			queue_pin(p, i, (uint32_t)r);
		}
		return (int16_t)(s >= 0 ? s : -1);
	}
	return -1;
}

void kvt__nvme_pins_wait(struct kvt__nvme_pins *p)
{
	if (!p->table)
		return;
	pthread_mutex_lock(&p->mu);
	while (p->n || p->busy)
		pthread_cond_wait(&p->idle, &p->mu);
	pthread_mutex_unlock(&p->mu);
}
