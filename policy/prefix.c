/*
 * prefix.c -- prefix-aware eviction. A chunk is useful only while all its ancestors are
 * resident, so only leaves (entries with no resident child) are ever proposed: an ancestor
 * outranks every descendant it carries, whatever their recency. Leaves sit in a min-heap keyed
 * by their last access tick, so the least recently used leaf goes first; when a leaf goes, its
 * parent may become a leaf and enters the heap with its own (older) tick, so a cold branch is
 * trimmed from its tip toward the root. Each entry records its parent and a sibling list of its
 * children, so removing an inner entry (a delete, not an eviction) orphans its children cleanly.
 * An inner entry's weight is thus unbounded while any cached descendant depends on it.
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct kvt_policy {
	struct kvt__heap leaves;
	uint32_t *parent, *child, *sib_prev, *sib_next, *nchild;
	uint64_t *tick;
	uint8_t *live;
	size_t cap;
	uint64_t now;
};

static int ensure(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	size_t nc = kvt__pol_cap_for(p->cap, id);
	if (kvt__pol_grow((void **)&p->parent, 4, p->cap, nc) ||
	    kvt__pol_grow((void **)&p->child, 4, p->cap, nc) ||
	    kvt__pol_grow((void **)&p->sib_prev, 4, p->cap, nc) ||
	    kvt__pol_grow((void **)&p->sib_next, 4, p->cap, nc) ||
	    kvt__pol_grow((void **)&p->nchild, 4, p->cap, nc) ||
	    kvt__pol_grow((void **)&p->tick, 8, p->cap, nc) ||
	    kvt__pol_grow((void **)&p->live, 1, p->cap, nc))
		return -ENOMEM;
	p->cap = nc;
	return 0;
}

static void prefix_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	kvt__heap_free(&p->leaves);
	free(p->parent);
	free(p->child);
	free(p->sib_prev);
	free(p->sib_next);
	free(p->nchild);
	free(p->tick);
	free(p->live);
	free(p);
}

static int prefix_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	kvt__heap_init(&p->leaves);
	if (hint && ensure(p, (uint32_t)(hint - 1))) {
		prefix_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
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
		kvt__heap_set(&p->leaves, pa, (double)p->tick[pa]);
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
	kvt__heap_del(&p->leaves, id);
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
			kvt__heap_del(&p->leaves, pa);
	}
	kvt__heap_set(&p->leaves, id, (double)p->tick[id]);
}

static void prefix_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->live[id])
		return;
	p->tick[id] = ++p->now;
	if (kvt__heap_has(&p->leaves, id))
		kvt__heap_set(&p->leaves, id, (double)p->tick[id]);
}

static size_t prefix_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                             kvt_policy_evictable_fn ok, void *arg)
{
	return kvt__heap_walk(&p->leaves, out, max, ok, arg);
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
};
