/*
 * pol_int.h -- helpers private to policy/: per-id arrays ("columns") that grow together on
 * demand, intrusive doubly linked lists threaded through those arrays, a dense resident set
 * for sampling policies, an indexed 4-ary min-heap, an open-addressing map of 64-bit hashes
 * (mrc.c) and a FIFO of ghost fingerprints (ARC, S3-FIFO).
 *
 * Memory: every structure owns its arrays (malloc/realloc); growth happens on the first touch
 * of a larger id, so a warm policy does not allocate. Not thread-safe, like the policies.
 */
#ifndef KVT_POL_INT_H
#define KVT_POL_INT_H
#include "policy.h"
#include "core/util.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KVT__NIL UINT32_MAX

/* Grows *arr (elem bytes each) from old_n to new_n elements, zero-filling. @return : 0, -ENOMEM. */
int kvt__pol_grow(void **arr, size_t elem, size_t old_n, size_t new_n);
/* A parked id's tenant + 1 (uint16_t per id, *n of them) for a policy whose per-id arrays hold
 * cap ids: grows to cap. @return : 0, -EINVAL (tenant t cannot be parked: only passed), -ENOMEM. */
static inline int kvt__park_tenant_fit(uint16_t **tenant1, size_t *n, size_t cap, uint32_t t)
{
	if (t >= UINT16_MAX)
		return -EINVAL;
	if (*n < cap) {
		if (kvt__pol_grow((void **)tenant1, sizeof(**tenant1), *n, cap))
			return -ENOMEM;
		*n = cap;
	}
	return 0;
}
/*
 * A binary min-heap of sz-byte elements in a growable array (*arr, *cap of them, *n in use),
 * ordered by less(ctx, a, b): the small heaps a walk keeps beside a policy's own (heap.c's aux,
 * gdsf's). Inline, so that each user's element size and comparison are compiled in.
 */
typedef bool (*kvt__bheap_less_fn)(const void *ctx, const void *a, const void *b);
/* Adds *x. @return : 0, -ENOMEM. */
static inline int kvt__bheap_push(void **arr, size_t *cap, size_t *n, size_t sz, const void *x,
                                  kvt__bheap_less_fn less, const void *ctx)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		if (kvt__pol_grow(arr, sz, *cap, nc))
			return -ENOMEM;
		*cap = nc;
	}
	char *a = *arr;
	size_t i = (*n)++;
	while (i > 0 && less(ctx, x, a + (i - 1) / 2 * sz)) {
		memcpy(a + i * sz, a + (i - 1) / 2 * sz, sz);
		i = (i - 1) / 2;
	}
	memcpy(a + i * sz, x, sz);
	return 0;
}
/* Takes the least element into *out (*n > 0). */
static inline void kvt__bheap_pop(void *arr, size_t *n, size_t sz, void *out,
                                  kvt__bheap_less_fn less, const void *ctx)
{
	char *a = arr;
	size_t i = 0, last = --(*n); /* the last element, placed where the sift ends */
	memcpy(out, a, sz);
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && less(ctx, a + (c + 1) * sz, a + c * sz))
			c++;
		if (!less(ctx, a + c * sz, a + last * sz))
			break;
		memcpy(a + i * sz, a + c * sz, sz);
		i = c;
	}
	if (*n)
		memcpy(a + i * sz, a + last * sz, sz);
}
/* The next power-of-two capacity holding id (at least 1024). */
size_t kvt__pol_cap_for(size_t cur, uint32_t id);

/*
 * Columns: a policy's per-id arrays, all sized cap. A policy lists them once, as
 *   #define COLS(p) {KVT__COL((p)->prev), KVT__COL((p)->next), ...}
 * and grows or frees them together. Growth zero-fills the new part.
 */
struct kvt__col {
	void **arr;
	size_t elem;
};
#define KVT__COL(a)                                                                                \
	{                                                                                          \
		(void **)&(a), sizeof(*(a))                                                        \
	}
#define KVT__NCOLS(c) (sizeof(c) / sizeof((c)[0]))
/* Grows every column to kvt__pol_cap_for(*cap, id) elements. @return : 0, -ENOMEM (*cap kept). */
int kvt__cols_grow(const struct kvt__col *c, size_t n, size_t *cap, uint32_t id);
void kvt__cols_free(const struct kvt__col *c, size_t n);
/* Bytes of the columns at capacity cap. */
size_t kvt__cols_bytes(const struct kvt__col *c, size_t n, size_t cap);

/* A list threaded through a caller-owned link array (shared by several lists); prev and next
 * of an id sit together, so a list operation touches one line per id. */
struct kvt__link {
	uint32_t prev, next;
};
struct kvt__list {
	uint32_t head, tail; /* head = most recent */
	size_t n;
};

static inline void kvt__list_init(struct kvt__list *l)
{
	l->head = l->tail = KVT__NIL;
	l->n = 0;
}

static inline void kvt__list_push_head(struct kvt__list *l, struct kvt__link *lk, uint32_t id)
{
	lk[id].prev = KVT__NIL;
	lk[id].next = l->head;
	if (l->head != KVT__NIL)
		lk[l->head].prev = id;
	l->head = id;
	if (l->tail == KVT__NIL)
		l->tail = id;
	l->n++;
}

static inline void kvt__list_push_tail(struct kvt__list *l, struct kvt__link *lk, uint32_t id)
{
	lk[id].next = KVT__NIL;
	lk[id].prev = l->tail;
	if (l->tail != KVT__NIL)
		lk[l->tail].next = id;
	l->tail = id;
	if (l->head == KVT__NIL)
		l->head = id;
	l->n++;
}

/* Links id right behind (tailward of) at, which is on l. */
static inline void kvt__list_insert_after(struct kvt__list *l, struct kvt__link *lk, uint32_t at,
                                          uint32_t id)
{
	uint32_t nx = lk[at].next;
	lk[id].prev = at;
	lk[id].next = nx;
	lk[at].next = id;
	if (nx != KVT__NIL)
		lk[nx].prev = id;
	else
		l->tail = id;
	l->n++;
}

static inline void kvt__list_unlink(struct kvt__list *l, struct kvt__link *lk, uint32_t id)
{
	uint32_t pr = lk[id].prev, nx = lk[id].next;
	if (pr != KVT__NIL)
		lk[pr].next = nx;
	else
		l->head = nx;
	if (nx != KVT__NIL)
		lk[nx].prev = pr;
	else
		l->tail = pr;
	l->n--;
}

/* Appends to out[n..max) the ids of l from its tail (oldest) that ok() accepts (NULL: all).
 * @return : the new n. */
static inline size_t kvt__list_walk(const struct kvt__list *l, const struct kvt__link *lk,
                                    uint32_t *out, size_t n, size_t max, kvt_policy_evictable_fn ok,
                                    void *arg)
{
	for (uint32_t id = l->tail; id != KVT__NIL && n < max; id = lk[id].prev)
		if (!ok || ok(arg, id))
			out[n++] = id;
	return n;
}

/* kvt__list_walk for pick_victims_tenants over a list that is never parked (entries told
 * done): an entry goes only when its tenant is open, then as ok() says (ok may count what it
 * accepts, so open is asked first). */
struct kvt__open_filter {
	kvt_policy_evictable_fn ok;
	uint32_t (*tenant_of)(void *, uint32_t);
	bool (*open)(void *, uint32_t);
	void *arg;
};

static inline bool kvt__open_ok(void *a, uint32_t id)
{
	const struct kvt__open_filter *f = a;
	return f->open(f->arg, f->tenant_of(f->arg, id)) && (!f->ok || f->ok(f->arg, id));
}

static inline size_t kvt__list_walk_open(const struct kvt__list *l, const struct kvt__link *lk,
                                         uint32_t *out, size_t n, size_t max,
                                         kvt_policy_evictable_fn ok,
                                         uint32_t (*tenant_of)(void *, uint32_t),
                                         bool (*open)(void *, uint32_t), void *arg)
{
	struct kvt__open_filter f = {ok, tenant_of, open, arg};
	return kvt__list_walk(l, lk, out, n, max, kvt__open_ok, &f);
}

/* Whether out[0..n) holds id (proposals already made in this call). */
static inline bool kvt__proposed(const uint32_t *out, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (out[i] == id)
			return true;
	return false;
}

/* A dense array of resident ids for uniform sampling; slot[id] (a caller column) is id's
 * index in it. */
struct kvt__res {
	uint32_t *ids;
	size_t n, cap;
};
/* Bytes allocated. */
size_t kvt__res_bytes(const struct kvt__res *r);
/* Adds id (not yet in). @return : 0 or -ENOMEM. */
int kvt__res_add(struct kvt__res *r, uint32_t *slot, uint32_t id);
/* Removes id (in), moving the last id into its slot. */
void kvt__res_del(struct kvt__res *r, uint32_t *slot, uint32_t id);
/* Writes up to max residents ordered by key[id], ties by id (export_order). @return : count. */
size_t kvt__res_export(const struct kvt__res *r, const uint64_t *key, uint32_t *out, size_t max);

/* xorshift64: fixed-seed sampling, so that runs are reproducible. */
static inline uint64_t kvt__xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Sampled eviction (LHD, hindsight): up to max rounds' winners of `samples` uniform draws
 * from r, the lowest score(id) first, ties to the older last[id]; skips ids already proposed
 * and those ok() rejects. When no draw passes ok(), the best of every resident it takes: none
 * comes back only when ok() takes no resident. */
typedef float (*kvt__score_fn)(const void *p, uint32_t id);
size_t kvt__sample_victims(const struct kvt__res *r, uint64_t *rng, unsigned samples,
                           kvt__score_fn score, const void *p, const uint64_t *last, uint32_t *out,
                           size_t max, kvt_policy_evictable_fn ok, void *arg);

/* Indexed 4-ary min-heap of ids by a non-negative double key; ties broken by keying sequence
 * (older first). Entries carry their key so that sifting touches the heap array only; 16 bytes,
 * four to a cache line, so one level of siblings is one line, compared as one 128-bit number.
 * The sequence is 32 bits and is renumbered (order kept) before it wraps, so ties stay exact. */
struct kvt__hent {
	uint64_t tie; /* seq << 32 | id */
	uint64_t key; /* the bits of the key (positive doubles order like their bits) */
};
struct kvt__heap {
	struct kvt__hent *e; /* heap array, n used; allocated from e - 3 (see heap_grow) */
	uint32_t *pos;       /* pos[id] + 1, 0 = absent; sized pos_cap */
	uint32_t *aux;       /* scratch for non-destructive walks */
	size_t n, cap, pos_cap, aux_cap;
	size_t walk_n; /* aux entries of the running kvt__heap_walk_start walk, 0 = none */
	uint32_t clock;
};
void kvt__heap_init(struct kvt__heap *h);
void kvt__heap_free(struct kvt__heap *h);
size_t kvt__heap_bytes(const struct kvt__heap *h);
/* Inserts or re-keys id. @return : 0 or -ENOMEM. */
int kvt__heap_set(struct kvt__heap *h, uint32_t id, double key);
void kvt__heap_del(struct kvt__heap *h, uint32_t id);
bool kvt__heap_has(const struct kvt__heap *h, uint32_t id);
/* The key of id, which must be in the heap. */
double kvt__heap_key(const struct kvt__heap *h, uint32_t id);
/* The minimum id, or KVT__NIL when empty. */
uint32_t kvt__heap_min(const struct kvt__heap *h);
/* Writes up to max ids in key order that ok() accepts, without changing the heap. */
size_t kvt__heap_walk(struct kvt__heap *h, uint32_t *out, size_t max, kvt_policy_evictable_fn ok,
                      void *arg);
/* The same walk one id at a time, to merge with other orders: kvt__heap_walk_start, then
 * kvt__heap_walk_next until KVT__NIL (peek: the next id without taking it). Its state is in h
 * (aux, walk_n), so one walk of h at a time, and h must not change while it runs; _stop ends it
 * early. Out of memory ends it early too (fewer ids: what a victim walk may do). */
void kvt__heap_walk_start(struct kvt__heap *h);
uint32_t kvt__heap_walk_next(struct kvt__heap *h);
static inline uint32_t kvt__heap_walk_peek(const struct kvt__heap *h)
{
	return h->walk_n ? (uint32_t)h->e[h->aux[0]].tie : KVT__NIL;
}
static inline void kvt__heap_walk_stop(struct kvt__heap *h)
{
	h->walk_n = 0;
}

/* Open-addressing set of 64-bit hashes mapping to a u32 value (ghost lists). 0 is reserved. */
struct kvt__hslot {
	uint64_t key; /* 0 empty, 1 deleted */
	uint32_t val;
};
struct kvt__hset {
	struct kvt__hslot *slots; /* key and value together: one cache miss per probe */
	size_t cap, n, tomb;
};
int kvt__hset_init(struct kvt__hset *s, size_t expect);
void kvt__hset_free(struct kvt__hset *s);
/* @return : the value stored for k, or KVT__NIL. */
uint32_t kvt__hset_get(const struct kvt__hset *s, uint64_t k);
/* @return : 1 when k was new, 0 when its value was replaced, -ENOMEM. */
int kvt__hset_put(struct kvt__hset *s, uint64_t k, uint32_t v);
void kvt__hset_del(struct kvt__hset *s, uint64_t k);
/* Deletes k only while it maps to v. @return : whether it did. */
bool kvt__hset_del_if(struct kvt__hset *s, uint64_t k, uint32_t v);

/* A 64-bit mixer (splitmix64 finaliser). */
static inline uint64_t kvt__mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* The threshold that kvt__mix64 of a hash stays at or below with probability rate (0, 1]:
 * key sampling (SHARDS, miniature simulations, duel's shadows). */
static inline uint64_t kvt__sample_threshold(double rate)
{
	return rate >= 1 ? UINT64_MAX : (uint64_t)(rate * 18446744073709551615.0);
}

/* Sorts ids[0..n) by key[id] ascending, ties by id (export_order of sampled policies). */
void kvt__sort_ids_by(uint32_t *ids, size_t n, const uint64_t *key);

/* Parses a double parameter in [lo, hi]. @return : 0 or -EINVAL. */
int kvt__param_double(const char *value, double lo, double hi, double *out);

/* A numeric parameter of a policy (set_param): its name is the field's name, its value must lie
 * in [lo, hi], and it is stored as the field's C type. */
enum { KVT__P_DOUBLE, KVT__P_FLOAT, KVT__P_UNSIGNED, KVT__P_BOOL };
struct kvt__param {
	const char *name;
	double lo, hi;
	size_t off;
	uint8_t type;
};
#define KVT__PARAM(field, type, lo, hi)                                                            \
	{                                                                                          \
#field, (lo), (hi), offsetof(struct kvt_policy, field), (type)                     \
	}
/* Sets the parameter name of p from tab[0..n). @return : 0, -EINVAL (bad value), -ENOENT. */
int kvt__param_set(void *p, const struct kvt__param *tab, size_t n, const char *name,
                   const char *value);
/* get_param over tab[0..n): parameter i of p. @return : 0, -ENOENT past the last. */
int kvt__param_get(const void *p, const struct kvt__param *tab, size_t n, size_t i,
                   struct kvt_policy_param *out);

/*
 * A FIFO of ghosts with O(1) membership and removal (ARC's B1/B2, S3-FIFO's G). A ghost is a
 * 32-bit fingerprint of its key hash (two keys share one with probability ~n / 2^32: a rare
 * false ghost hit, harmless to a policy). The table maps fingerprint -> low 32 bits of its
 * sequence number in 8-byte slots (linear probing, deletion by backward shift: no tombstones);
 * an entry is live while its sequence is in [head, tail). The ring holds fingerprints by
 * sequence, 0 where that ghost was deleted or re-added later, so trimming the oldest ghosts
 * reads the ring alone; expired entries are dropped when the table is rebuilt (at 3/4 load,
 * live and expired, into at least 2x the live ghosts): small enough to stay in cache.
 */
struct kvt__ghost {
	uint64_t *slots;          /* fp << 32 | seq, 0 = empty */
	uint32_t *ring;           /* ring[seq % rcap] = fp, 0 = stale */
	uint64_t head, tail;      /* sequence numbers */
	size_t cap, occ, rcap, n; /* occ used slots (live or expired), n live ghosts */
};
/* A ghost's fingerprint: never 0. */
static inline uint32_t kvt__ghost_fp(uint64_t h)
{
	uint32_t fp = (uint32_t)(kvt__mix64(h) >> 32);
	return fp ? fp : 1;
}
/* Starts loading the table line where h's probe begins (a lookup to come overlaps others). */
static inline void kvt__ghost_prefetch(const struct kvt__ghost *g, uint64_t h)
{
	__builtin_prefetch(&g->slots[kvt__ghost_fp(h) & (g->cap - 1)]);
}
int kvt__ghost_init(struct kvt__ghost *g, size_t expect);
void kvt__ghost_free(struct kvt__ghost *g);
size_t kvt__ghost_bytes(const struct kvt__ghost *g);
bool kvt__ghost_has(const struct kvt__ghost *g, uint64_t h);
/* Adds h as the newest ghost. @return : 0 or -ENOMEM. */
int kvt__ghost_add(struct kvt__ghost *g, uint64_t h);
void kvt__ghost_del(struct kvt__ghost *g, uint64_t h);
/* Drops the oldest ghosts until at most limit remain. */
void kvt__ghost_trim(struct kvt__ghost *g, size_t limit);

/*
 * Parking: what quotas need of a list policy (lru, fifo, ARC's T1 and T2). A tenant held at its
 * guarantee may lose nothing, and when its entries are the coldest every walk used to pass all
 * of them: O(its entries) per eviction. A tenant-aware walk (kvt__list_walk_tenants) sets such
 * entries aside instead, off the list, into a list per tenant ("parked"), in the order the walk
 * met them, which is their order in the list. An entry is parked only from the tail (only while
 * everything the walk met before it was parked too), and entries on the list only get newer,
 * so every parked entry stays older than every listed one: the list's order is its parked
 * entries, merged by when they were parked, then the list from its tail, and every walk gives
 * that order. A later walk passes a parked tenant's entries only while that tenant may lose
 * some. A parked entry gets a bit set in a per-id byte of the policy's (mark), and the policy
 * takes it off its parked list when it is touched or removed (kvt__park_del, then clears the
 * bit). The arrays (6 bytes an id) exist once something is parked; tenants past 65,534 are
 * never parked, only passed.
 */
struct kvt__park {
	size_t n;          /* parked entries; first, so a policy's hot line holds it */
	uint16_t *tenant1; /* per id: its tenant + 1 while parked, 0 otherwise */
	uint32_t *seq;     /* per id: when it was parked (renumbered before the clock wraps) */
	size_t cap;
	struct kvt__list *lists; /* per tenant, the last parked at the head */
	size_t n_lists;
	uint32_t clock;
};
/* Of n parked lists' cursors c[] (ids, KVT__NIL: list done), the list whose id was parked first
 * by seq[]. @return : its index, or KVT__NIL when every list is done. */
static inline uint32_t kvt__park_first(const uint32_t *seq, const uint32_t *c, size_t n)
{
	uint32_t best = KVT__NIL;
	for (uint32_t t = 0; t < n; t++)
		if (c[t] != KVT__NIL && (best == KVT__NIL || seq[c[t]] < seq[c[best]]))
			best = t;
	return best;
}
/* Takes parked id off its tenant's list (the caller clears its mark). */
void kvt__park_del(struct kvt__park *k, struct kvt__link *lk, uint32_t id);
void kvt__park_free(struct kvt__park *k);
size_t kvt__park_bytes(const struct kvt__park *k);
/* Appends to out[n..max) the parked entries, oldest first across tenants, that ok() accepts;
 * with open, only those of tenants open() answers true for when their turn comes.
 * @return : the new n. */
size_t kvt__park_walk_all(const struct kvt__park *k, const struct kvt__link *lk, uint32_t *out,
                          size_t n, size_t max, kvt_policy_evictable_fn ok,
                          bool (*open)(void *, uint32_t), void *arg);
static inline size_t kvt__park_walk(const struct kvt__park *k, const struct kvt__link *lk,
                                    uint32_t *out, size_t n, size_t max, kvt_policy_evictable_fn ok,
                                    bool (*open)(void *, uint32_t), void *arg)
{
	return __builtin_expect(k->n != 0, 0)
	           ? kvt__park_walk_all(k, lk, out, n, max, ok, open, arg)
	           : n;
}
/* The walk of list l (ids below cap, the policy's column size) that pick_victims_tenants
 * makes: l's parked entries of open tenants, then l from its tail, parking the entries of
 * tenants open() refuses (and setting bit in mark[id]) while only parked entries were met
 * before them. @return : the new n. */
size_t kvt__list_walk_tenants(struct kvt__list *l, struct kvt__park *k, struct kvt__link *lk,
                              uint8_t *mark, uint8_t bit, size_t cap, uint32_t *out, size_t n,
                              size_t max, kvt_policy_evictable_fn ok,
                              uint32_t (*tenant_of)(void *, uint32_t),
                              bool (*open)(void *, uint32_t), void *arg);

/*
 * A miniature cache (minisim.c): one policy instance over dense ids 0..cap-1, a map from key
 * hash to id, each id's key (to unmap it on eviction) and a stack of free ids, replayed one
 * key at a time as the daemon's acquire and put make them: a resident key is an access, a
 * missing one is inserted (after an eviction when full) with *prev, the request's previous key
 * here, as its parent. kvt_minisim runs five of them; duel two, one per expert.
 */
struct kvt__mini {
	struct kvt_policy *p;
	struct kvt__hset map; /* key -> id */
	uint64_t *key_of;     /* id -> key */
	uint32_t *free_ids;   /* ids not in use */
	size_t cap, n_free;
	uint64_t hits, accesses;
};
/* params ("k=v ...", may be NULL) as `kvtier policy set` gives them. @return : 0, -ENOMEM,
 * -EINVAL (a bad parameter); the caller frees with kvt__mini_free either way. */
int kvt__mini_init(struct kvt__mini *s, const struct kvt_policy_ops *ops, const char *params,
                   size_t cap);
void kvt__mini_free(const struct kvt_policy_ops *ops, struct kvt__mini *s);
/* Key key at depth depth of a request; *prev is the id of the request's previous key here
 * (KVT_POLICY_NONE at the root, or when it was evicted) and becomes key's. counted: a hit or a
 * miss of the curve; otherwise (a write) the key only becomes resident. @return : a hit. */
bool kvt__mini_touch(const struct kvt_policy_ops *ops, struct kvt__mini *s, uint64_t key,
                     uint32_t depth, uint32_t *prev, bool counted);
/* The bytes s holds. */
size_t kvt__mini_bytes(const struct kvt_policy_ops *ops, const struct kvt__mini *s);
#endif
