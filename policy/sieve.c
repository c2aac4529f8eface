/*
 * sieve.c -- SIEVE (Zhang et al., NSDI'24): one FIFO queue, a visited bit per entry and a hand
 * that walks from the oldest entry toward the newest. A hit only sets the bit (no list move, so
 * hits are cheap and lock-friendly); the hand clears set bits as it passes and stops at the
 * first clear one, which is the victim. New entries go to the head; survivors stay in place.
 * pick_victims moves the hand and clears bits (policy state) but removes nothing.
 *
 * An entry the engine is done with (on_done, kvt_done) leaves the queue for a list d proposed
 * before the hand moves, first told first out; a hit or re-insert puts it back at the head,
 * visited.
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>

struct kvt_policy {
	struct kvt__link *lk;
	uint8_t *live, *visited; /* live: 1 on q, 2 on d */
	size_t cap;
	struct kvt__list q, d; /* q: head = newest; d: told done */
	uint32_t hand;         /* next entry to examine, KVT__NIL = start at the tail */
};

#define COLS(p)                                                                                    \
	{                                                                                          \
		KVT__COL((p)->lk), KVT__COL((p)->live), KVT__COL((p)->visited)                     \
	}

static int ensure(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	struct kvt__col c[] = COLS(p);
	return kvt__cols_grow(c, KVT__NCOLS(c), &p->cap, id);
}

static void sieve_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	struct kvt__col c[] = COLS(p);
	kvt__cols_free(c, KVT__NCOLS(c));
	free(p);
}

static int sieve_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	kvt__list_init(&p->q);
	kvt__list_init(&p->d);
	p->hand = KVT__NIL;
	if (hint && ensure(p, (uint32_t)(hint - 1))) {
		sieve_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

/* Takes id off q (stepping the hand past it). */
static void off_q(struct kvt_policy *p, uint32_t id)
{
	if (p->hand == id)
		p->hand = p->lk[id].prev;
	kvt__list_unlink(&p->q, p->lk, id);
}

/* A done entry read again: back to q's head, visited. */
static void undone(struct kvt_policy *p, uint32_t id)
{
	kvt__list_unlink(&p->d, p->lk, id);
	p->live[id] = 1;
	kvt__list_push_head(&p->q, p->lk, id);
}

static void sieve_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	(void)m;
	if (ensure(p, id))
		return;
	if (p->live[id] == 2)
		undone(p, id);
	if (p->live[id]) {
		p->visited[id] = 1;
		return;
	}
	p->live[id] = 1;
	p->visited[id] = 0;
	kvt__list_push_head(&p->q, p->lk, id);
}

static void sieve_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->live[id])
		return;
	if (p->live[id] == 2)
		undone(p, id);
	p->visited[id] = 1;
}

static bool sieve_is_done(struct kvt_policy *p, uint32_t id)
{
	return id < p->cap && p->live[id] == 2;
}

static void sieve_done(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || p->live[id] != 1)
		return;
	off_q(p, id);
	p->live[id] = 2;
	kvt__list_push_head(&p->d, p->lk, id); /* walks start at the tail: first told, first out */
}

static void sieve_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->live[id])
		return;
	if (p->live[id] == 2)
		kvt__list_unlink(&p->d, p->lk, id);
	else
		off_q(p, id);
	p->live[id] = 0;
}

static size_t sieve_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                            kvt_policy_evictable_fn ok, void *arg)
{
	size_t n = kvt__list_walk(&p->d, p->lk, out, 0, max, ok, arg);
	size_t steps = 0, limit = 2 * p->q.n + 2;
	uint32_t h = p->hand;
	bool first = true;
	while (n < max && p->q.n && steps++ < limit) {
		if (h == KVT__NIL)
			h = p->q.tail;
		if (p->visited[h]) {
			p->visited[h] = 0;
		} else if ((!ok || ok(arg, h)) && !kvt__proposed(out, n, h)) {
			out[n++] = h;
			if (first)
				p->hand = h; /* on_remove(h) steps the hand past it */
			first = false;
		}
		h = p->lk[h].prev;
	}
	return n;
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t sieve_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	return sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap);
}

const struct kvt_policy_ops kvt_policy_sieve = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "sieve",
    .create = sieve_create,
    .destroy = sieve_destroy,
    .on_insert = sieve_insert,
    .on_access = sieve_access,
    .on_remove = sieve_remove,
    .on_done = sieve_done,
    .is_done = sieve_is_done,
    .pick_victims = sieve_victims,
    .memory_bytes = sieve_memory,
};
