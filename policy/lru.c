/*
 * lru.c -- plain LRU: a doubly linked list through per-id arrays, most recent at the head.
 * O(1) insert, access and remove; victims are walked from the tail, skipping what the caller
 * says it cannot evict.
 */
#include "policy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX

struct kvt_policy {
	uint32_t *prev, *next; /* indexed by id */
	uint8_t *live;
	size_t cap;
	uint32_t head, tail;
};

static int grow(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	size_t cap = p->cap ? p->cap : 1024;
	while (cap <= id)
		cap *= 2;
	uint32_t *prev = realloc(p->prev, cap * sizeof(*prev));
	if (!prev)
		return -ENOMEM;
	p->prev = prev;
	uint32_t *next = realloc(p->next, cap * sizeof(*next));
	if (!next)
		return -ENOMEM;
	p->next = next;
	uint8_t *live = realloc(p->live, cap);
	if (!live)
		return -ENOMEM;
	memset(live + p->cap, 0, cap - p->cap);
	p->live = live;
	p->cap = cap;
	return 0;
}

static int lru_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->head = p->tail = NIL;
	if (hint && grow(p, (uint32_t)(hint - 1))) {
		free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

static void lru_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	free(p->prev);
	free(p->next);
	free(p->live);
	free(p);
}

static void unlink_id(struct kvt_policy *p, uint32_t id)
{
	uint32_t pr = p->prev[id], nx = p->next[id];
	if (pr != NIL)
		p->next[pr] = nx;
	else
		p->head = nx;
	if (nx != NIL)
		p->prev[nx] = pr;
	else
		p->tail = pr;
}

static void push_head(struct kvt_policy *p, uint32_t id)
{
	p->prev[id] = NIL;
	p->next[id] = p->head;
	if (p->head != NIL)
		p->prev[p->head] = id;
	p->head = id;
	if (p->tail == NIL)
		p->tail = id;
}

static void lru_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	(void)m;
	if (grow(p, id))
		return; /* untracked: never proposed as a victim, which is safe */
	if (p->live[id])
		unlink_id(p, id);
	p->live[id] = 1;
	push_head(p, id);
}

static void lru_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->live[id] || p->head == id)
		return;
	unlink_id(p, id);
	push_head(p, id);
}

static void lru_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->live[id])
		return;
	unlink_id(p, id);
	p->live[id] = 0;
}

static size_t lru_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                          kvt_policy_evictable_fn ok, void *arg)
{
	size_t n = 0;
	for (uint32_t id = p->tail; id != NIL && n < max; id = p->prev[id])
		if (!ok || ok(arg, id))
			out[n++] = id;
	return n;
}

const struct kvt_policy_ops kvt_policy_lru = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "lru",
    .create = lru_create,
    .destroy = lru_destroy,
    .on_insert = lru_insert,
    .on_access = lru_access,
    .on_remove = lru_remove,
    .pick_victims = lru_victims,
};
