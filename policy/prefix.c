/*
 * prefix.c -- prefix-aware eviction. A chunk is useful only while all its ancestors are
 * resident, so only leaves (entries with no resident child) are ever proposed: an ancestor
 * outranks every descendant it carries, whatever their recency. Leaves are ordered by their
 * last access tick, so the least recently used leaf goes first; when a leaf goes, its parent
 * may become a leaf with its own (older) tick, so a cold branch is trimmed from its tip toward
 * the root.
 *
 * Order without a heap: a touched entry gets the newest tick, so it goes to the head of an LRU
 * list of leaves. A parent that becomes a leaf goes to the list's tail when it is older than
 * every leaf (the usual case: a request touches a prefix root first, so a parent is older than
 * its evicted child, the oldest leaf), to the head when newer than all; only a parent whose
 * tick falls in between waits in a small heap ("late"). Victims merge the two, oldest first
 * (late walked a step at a time, so the caller's filter is asked in victim order): exactly the
 * order of one heap keyed by tick, at O(1) per operation in the usual case. Each entry
 * records its parent and a sibling list of its children, so removing an inner entry (a delete, not
 * an eviction) orphans its children cleanly. An inner entry's weight is thus unbounded while any
 * cached descendant depends on it.
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct kvt_policy {
	struct kvt__list leaves; /* head = newest tick */
	struct kvt__heap late;   /* leaves whose tick fell inside the list's range */
	struct kvt__link *lk;
	uint32_t *parent, *child, *sib_prev, *sib_next, *nchild;
	uint64_t *tick;
	uint8_t *live, *leaf; /* leaf: 0 no, IN_LIST, IN_LATE */
	size_t cap;
	uint64_t now;
};

enum { IN_LIST = 1, IN_LATE = 2 };

#define COLS(p)                                                                                    \
	{                                                                                          \
		KVT__COL((p)->lk), KVT__COL((p)->parent), KVT__COL((p)->child),                    \
		    KVT__COL((p)->sib_prev), KVT__COL((p)->sib_next), KVT__COL((p)->nchild),       \
		    KVT__COL((p)->tick), KVT__COL((p)->live), KVT__COL((p)->leaf)                  \
	}

static int ensure(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	struct kvt__col c[] = COLS(p);
	return kvt__cols_grow(c, KVT__NCOLS(c), &p->cap, id);
}

static void prefix_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	struct kvt__col c[] = COLS(p);
	kvt__cols_free(c, KVT__NCOLS(c));
	kvt__heap_free(&p->late);
	free(p);
}

static int prefix_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	kvt__list_init(&p->leaves);
	kvt__heap_init(&p->late);
	if (hint && ensure(p, (uint32_t)(hint - 1))) {
		prefix_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

/* id (no resident child now) joins the leaves at the place of its tick. */
static void make_leaf(struct kvt_policy *p, uint32_t id)
{
	struct kvt__list *l = &p->leaves;
	uint64_t t = p->tick[id];
	if (l->head == KVT__NIL || t > p->tick[l->head]) {
		kvt__list_push_head(l, p->lk, id);
		p->leaf[id] = IN_LIST;
	} else if (t < p->tick[l->tail]) {
		kvt__list_push_tail(l, p->lk, id);
		p->leaf[id] = IN_LIST;
	} else if (!kvt__heap_set(&p->late, id, (double)t)) {
		p->leaf[id] = IN_LATE;
	}
}

static void unleaf(struct kvt_policy *p, uint32_t id)
{
	if (p->leaf[id] == IN_LIST)
		kvt__list_unlink(&p->leaves, p->lk, id);
	else if (p->leaf[id] == IN_LATE)
		kvt__heap_del(&p->late, id);
	p->leaf[id] = 0;
}

static void detach(struct kvt_policy *p, uint32_t id)
{
	uint32_t pa = p->parent[id];
	if (pa == KVT__NIL)
		return;
	if (p->sib_prev[id] != KVT__NIL)
		p->sib_next[p->sib_prev[id]] = p->sib_next[id];
	else
		p->child[pa] = p->sib_next[id];
	if (p->sib_next[id] != KVT__NIL)
		p->sib_prev[p->sib_next[id]] = p->sib_prev[id];
	p->parent[id] = KVT__NIL;
	if (--p->nchild[pa] == 0)
		make_leaf(p, pa);
}

static void prefix_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->live[id])
		return;
	for (uint32_t c = p->child[id], nx; c != KVT__NIL; c = nx) {
		nx = p->sib_next[c];
		p->parent[c] = KVT__NIL; /* orphaned: a root of its own now */
	}
	p->child[id] = KVT__NIL;
	p->nchild[id] = 0;
	detach(p, id);
	unleaf(p, id);
	p->live[id] = 0;
}

static void prefix_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	if (ensure(p, id))
		return;
	if (p->live[id])
		prefix_remove(p, id);
	uint32_t pa = m->parent;
	if (pa == id || pa >= p->cap || !p->live[pa])
		pa = KVT__NIL;
	p->live[id] = 1;
	p->tick[id] = ++p->now;
	p->child[id] = KVT__NIL;
	p->nchild[id] = 0;
	p->parent[id] = pa;
	p->sib_prev[id] = KVT__NIL;
	p->sib_next[id] = KVT__NIL;
	if (pa != KVT__NIL) {
		p->sib_next[id] = p->child[pa];
		if (p->child[pa] != KVT__NIL)
			p->sib_prev[p->child[pa]] = id;
		p->child[pa] = id;
		if (p->nchild[pa]++ == 0)
			unleaf(p, pa);
	}
	kvt__list_push_head(&p->leaves, p->lk, id); /* the newest tick */
	p->leaf[id] = IN_LIST;
}

static void prefix_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->live[id])
		return;
	p->tick[id] = ++p->now;
	if (p->leaf[id]) {
		unleaf(p, id);
		kvt__list_push_head(&p->leaves, p->lk, id);
		p->leaf[id] = IN_LIST;
	}
}

/* Of two leaves (KVT__NIL: none), the older. */
static uint32_t older(const struct kvt_policy *p, uint32_t a, uint32_t b)
{
	if (a == KVT__NIL || (b != KVT__NIL && p->tick[b] < p->tick[a]))
		return b;
	return a;
}

/* The list from its tail merged with late's walk, oldest first; ok() is asked in that order, so
 * a filter that counts what it lets through (quota.c) sees the victims as they come. */
static size_t prefix_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                             kvt_policy_evictable_fn ok, void *arg)
{
	if (!p->late.n)
		return kvt__list_walk(&p->leaves, p->lk, out, 0, max, ok, arg);
	size_t n = 0;
	uint32_t id = p->leaves.tail;
	kvt__heap_walk_start(&p->late);
	while (n < max) {
		uint32_t x = older(p, id, kvt__heap_walk_peek(&p->late));
		if (x == KVT__NIL)
			break;
		if (x == id)
			id = p->lk[id].prev;
		else
			kvt__heap_walk_next(&p->late);
		if (!ok || ok(arg, x))
			out[n++] = x;
	}
	kvt__heap_walk_stop(&p->late);
	return n;
}

static size_t prefix_export(struct kvt_policy *p, uint32_t *out, size_t max)
{
	size_t n = 0, total = 0;
	for (uint32_t id = 0; id < p->cap; id++)
		total += p->live[id];
	uint32_t *tmp = malloc((total + 1) * sizeof(*tmp));
	if (!tmp)
		return 0;
	for (uint32_t id = 0; id < p->cap; id++)
		if (p->live[id])
			tmp[n++] = id;
	kvt__sort_ids_by(tmp, n, p->tick);
	n = n < max ? n : max;
	memcpy(out, tmp, n * sizeof(*out));
	free(tmp);
	return n;
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t prefix_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	return sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap) + kvt__heap_bytes(&p->late);
}

const struct kvt_policy_ops kvt_policy_prefix = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "prefix",
    .create = prefix_create,
    .destroy = prefix_destroy,
    .on_insert = prefix_insert,
    .on_access = prefix_access,
    .on_remove = prefix_remove,
    .pick_victims = prefix_victims,
    .export_order = prefix_export,
    .memory_bytes = prefix_memory,
};
