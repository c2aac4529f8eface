/*
 * prefix.c -- prefix-aware eviction. A chunk is useful only while all its ancestors are
 * resident, so only leaves (entries with no resident child) are proposed: an ancestor
 * outranks every descendant it carries, whatever their recency. (Only when no leaf may go --
 * all leased, say -- does an entry whose descendants all must stay go: blocked_tips.) Leaves are
 * ordered by their last access tick, so the least recently used leaf goes first; when a leaf goes,
 * its parent may become a leaf with its own (older) tick, so a cold branch is trimmed from its tip
 * toward the root.
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
 *
 * Quotas (pick_victims_tenants). As lru.c sets aside the entries of a tenant that may lose
 * nothing (pol_int.h, "Parking"), this sets aside leaves of such a tenant met at the cold end, off
 * the list or late, into a heap per tenant keyed by tick. lru's invariant (every parked entry older
 * than every listed one) does not hold here: a parent that becomes a leaf joins at the cold end
 * with its old tick, behind newer parked leaves. So nothing relies on it: ticks are unique, and a
 * walk merges the list, late and the parked heaps of the tenants it may take from, oldest first,
 * which is the order without parking. A parked leaf that is touched, gains a child or goes leaves
 * its heap (O(log n)). Once something is parked: 2 bytes an id (its tenant), and per tenant with
 * parked leaves a heap (16 bytes a leaf, 4 bytes an id for its positions).
 *
 * An engine's done hint (on_done, kvt_done) gives the entry a tick older than every read's:
 * ticks of reads count up from TICK_READ, those of hints from 1, in the order told. So a
 * hinted leaf goes first, a hinted inner entry goes first once its children have gone (never
 * before them), and a read cancels the hint by giving a new tick.
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
	uint8_t *live, *leaf; /* leaf: 0 no, IN_LIST, IN_LATE, IN_PARK */
	size_t cap;
	uint64_t now, told; /* the last tick of a read, of a done hint */
	/* set aside by tenant-aware walks (quotas); NULL until the first */
	size_t n_parked;
	struct kvt__heap *ph; /* ph[t]: tenant t's parked leaves by tick */
	size_t n_ph;
	uint16_t *ptenant1; /* per id: its tenant + 1 while parked */
	size_t pcap;
};

enum { IN_LIST = 1, IN_LATE = 2, IN_PARK = 3 };

/* Reads tick from here up, hints from 1 up; both stay exact as the doubles heaps key by. */
#define TICK_READ (1ULL << 52)

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
	for (size_t t = 0; t < p->n_ph; t++)
		kvt__heap_free(&p->ph[t]);
	free(p->ph);
	free(p->ptenant1);
	free(p);
}

static int prefix_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	kvt__list_init(&p->leaves);
	kvt__heap_init(&p->late);
	p->now = TICK_READ;
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
	else if (p->leaf[id] == IN_PARK) {
		kvt__heap_del(&p->ph[p->ptenant1[id] - 1], id);
		p->ptenant1[id] = 0;
		p->n_parked--;
	}
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

static bool prefix_is_done(struct kvt_policy *p, uint32_t id)
{
	return id < p->cap && p->live[id] && p->tick[id] < TICK_READ;
}

static void prefix_done(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !p->live[id] || p->tick[id] < TICK_READ || p->told + 1 >= TICK_READ)
		return;
	bool leaf = p->leaf[id] != 0; /* a parked leaf is unparked: the next walk may park it */
	if (leaf)
		unleaf(p, id);
	p->tick[id] = ++p->told;
	if (leaf)
		make_leaf(p, id);
}

/* Of two leaves (KVT__NIL: none), the older. */
static uint32_t older(const struct kvt_policy *p, uint32_t a, uint32_t b)
{
	if (a == KVT__NIL || (b != KVT__NIL && p->tick[b] < p->tick[a]))
		return b;
	return a;
}

/* Moves leaf id (on the list or late, no walk of late running) to tenant t's parked heap.
 * @return : 0, -EINVAL (t too large), -ENOMEM (id stays). */
static int park(struct kvt_policy *p, uint32_t id, uint32_t t)
{
	int rc = kvt__park_tenant_fit(&p->ptenant1, &p->pcap, p->cap, t);
	if (rc)
		return rc; /* -EINVAL: passed, not parked */
	if (t >= p->n_ph) {
		size_t n = t + 1;
		struct kvt__heap *ph = realloc(p->ph, n * sizeof(*ph));
		if (!ph)
			return -ENOMEM;
		for (size_t i = p->n_ph; i < n; i++)
			kvt__heap_init(&ph[i]);
		p->ph = ph, p->n_ph = n;
	}
	/* t is refused for the rest of the walk: its walk of ph[t], if any, is over */
	kvt__heap_walk_stop(&p->ph[t]);
	if (kvt__heap_set(&p->ph[t], id, (double)p->tick[id]))
		return -ENOMEM;
	unleaf(p, id);
	p->leaf[id] = IN_PARK;
	p->ptenant1[id] = (uint16_t)(t + 1);
	p->n_parked++;
	return 0;
}

/* The oldest next leaf of the parked heaps being walked, or KVT__NIL; *tp: its tenant. */
static uint32_t parked_next(const struct kvt_policy *p, uint32_t *tp)
{
	uint32_t best = KVT__NIL;
	for (uint32_t t = 0; t < p->n_ph; t++) {
		uint32_t id = kvt__heap_walk_peek(&p->ph[t]);
		if (id != KVT__NIL && (best == KVT__NIL || p->tick[id] < p->tick[best]))
			best = id, *tp = t;
	}
	return best;
}

/* Takes the next leaf of tenant t's parked heap, unless open() refuses t (which ends t's walk).
 * @return : the new n. */
static size_t take_parked(struct kvt_policy *p, uint32_t t, uint32_t *out, size_t n,
                          kvt_policy_evictable_fn ok, bool (*open)(void *, uint32_t), void *arg)
{
	if (open && !open(arg, t)) {
		kvt__heap_walk_stop(&p->ph[t]);
		return n;
	}
	uint32_t id = kvt__heap_walk_next(&p->ph[t]);
	if (!ok || ok(arg, id))
		out[n++] = id;
	return n;
}

/*
 * The leaves oldest first: the list from its tail, late's walk and the parked heaps' walks
 * (those of tenants open() lets, when given), merged by tick; ok() and open() are asked in that
 * order. With open, while the oldest leaf on the list or late is a refused tenant's, it is
 * parked (only then: late cannot change under its walk).
 */
static size_t walk(struct kvt_policy *p, uint32_t *out, size_t max, kvt_policy_evictable_fn ok,
                   uint32_t (*tenant_of)(void *, uint32_t), bool (*open)(void *, uint32_t),
                   void *arg)
{
	size_t n = 0;
	uint32_t t = 0, pk;
	for (uint32_t u = 0; u < p->n_ph; u++)
		if (p->ph[u].n && (!open || open(arg, u)))
			kvt__heap_walk_start(&p->ph[u]);
	while (open && n < max) {
		uint32_t x = older(p, p->leaves.tail, kvt__heap_min(&p->late));
		if ((pk = parked_next(p, &t)) != KVT__NIL && older(p, pk, x) == pk) {
			n = take_parked(p, t, out, n, ok, open, arg);
			continue;
		}
		if (x == KVT__NIL || open(arg, t = tenant_of(arg, x)) || park(p, x, t))
			break;
	}
	uint32_t id = p->leaves.tail;
	kvt__heap_walk_start(&p->late);
	while (n < max) {
		uint32_t x = older(p, id, kvt__heap_walk_peek(&p->late));
		if ((pk = parked_next(p, &t)) != KVT__NIL && older(p, pk, x) == pk) {
			n = take_parked(p, t, out, n, ok, open, arg);
			continue;
		}
		if (x == KVT__NIL)
			break;
		if (x == id)
			id = p->lk[id].prev;
		else
			kvt__heap_walk_next(&p->late);
		if (open && !open(arg, tenant_of(arg, x)))
			continue;
		if (!ok || ok(arg, x))
			out[n++] = x;
	}
	kvt__heap_walk_stop(&p->late);
	for (uint32_t u = 0; u < p->n_ph; u++)
		kvt__heap_walk_stop(&p->ph[u]);
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

/*
 * When no leaf may go (each is leased, in a tier job, or its tenant's), the entries that may go
 * below which nothing may: the tips of what is left once the blocked leaves are set aside,
 * oldest first. An ancestor still never goes while a descendant that may go stays; one whose
 * every descendant is held where it is does, as the entry conv's strict walk falls back to.
 * Without it a tenant at its maximum whose leaves were all leased could not bring a chunk up
 * from a lower tier while its other chunks sat idle above them, and a get came back short
 * (test_daemon_model, seed 115). O(residents log residents), and only then; ok() and open() are
 * asked of every resident once, oldest first. @return : how many (0 also without memory).
 */
static size_t blocked_tips(struct kvt_policy *p, uint32_t *out, size_t max,
                           kvt_policy_evictable_fn ok, uint32_t (*tenant_of)(void *, uint32_t),
                           bool (*open)(void *, uint32_t), void *arg)
{
	enum { MAY_GO = 1, BELOW = 2 }; /* it may go; something below it may */
	size_t n = 0, k = 0;
	uint8_t *mark = calloc(p->cap ? p->cap : 1, 1);
	uint32_t *ids = malloc((p->cap ? p->cap : 1) * sizeof(*ids));
	if (!mark || !ids || !(n = prefix_export(p, ids, p->cap))) /* the residents, oldest first */
		goto out;
	for (size_t i = 0; i < n; i++) {
		uint32_t id = ids[i];
		if ((!ok || ok(arg, id)) && (!open || open(arg, tenant_of(arg, id))))
			mark[id] |= MAY_GO;
	}
	for (size_t i = 0; i < n; i++)
		if (mark[ids[i]] & MAY_GO) /* stops at a marked one: each is marked once */
			for (uint32_t a = p->parent[ids[i]]; a != KVT__NIL && !(mark[a] & BELOW);
			     a = p->parent[a])
				mark[a] |= BELOW;
	for (size_t i = 0; i < n && k < max; i++)
		if (mark[ids[i]] == MAY_GO)
			out[k++] = ids[i];
out:
	free(mark);
	free(ids);
	return k;
}

static size_t prefix_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                             kvt_policy_evictable_fn ok, void *arg)
{
	size_t n = !p->late.n && !p->n_parked
	               ? kvt__list_walk(&p->leaves, p->lk, out, 0, max, ok, arg)
	               : walk(p, out, max, ok, NULL, NULL, arg);
	return n || !max ? n : blocked_tips(p, out, max, ok, NULL, NULL, arg);
}

/* As prefix_victims with every leaf of a tenant open() refuses rejected; such leaves at the
 * cold end are parked on the way. */
static size_t prefix_victims_tenants(struct kvt_policy *p, uint32_t *out, size_t max,
                                     kvt_policy_evictable_fn ok,
                                     uint32_t (*tenant_of)(void *, uint32_t),
                                     bool (*open)(void *, uint32_t), void *arg)
{
	size_t n = walk(p, out, max, ok, tenant_of, open, arg);
	return n || !max ? n : blocked_tips(p, out, max, ok, tenant_of, open, arg);
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t prefix_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	size_t b = sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap) +
	           kvt__heap_bytes(&p->late) + p->n_ph * sizeof(*p->ph) +
	           p->pcap * sizeof(*p->ptenant1);
	for (size_t t = 0; t < p->n_ph; t++)
		b += kvt__heap_bytes(&p->ph[t]);
	return b;
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
    .pick_victims_tenants = prefix_victims_tenants,
    .on_done = prefix_done,
    .is_done = prefix_is_done,
};
