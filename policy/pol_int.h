/*
 * pol_int.h -- helpers private to policy/: per-id arrays that grow on demand, intrusive doubly
 * linked lists threaded through those arrays, an indexed binary min-heap, and a small
 * open-addressing set of 64-bit key hashes for ghost entries.
 *
 * Memory: every structure owns its arrays (malloc/realloc); growth happens on the first touch
 * of a larger id, so a warm policy does not allocate. Not thread-safe, like the policies.
 */
#ifndef KVT_POL_INT_H
#define KVT_POL_INT_H
#include "policy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVT__NIL UINT32_MAX

/* Grows *arr (elem bytes each) from old_n to new_n elements, zero-filling. @return : 0, -ENOMEM. */
int kvt__pol_grow(void **arr, size_t elem, size_t old_n, size_t new_n);
/* The next power-of-two capacity holding id (at least 1024). */
size_t kvt__pol_cap_for(size_t cur, uint32_t id);

/* A list threaded through caller-owned prev/next arrays (shared by several lists). */
struct kvt__list {
	uint32_t head, tail; /* head = most recent */
	size_t n;
};
void kvt__list_init(struct kvt__list *l);
void kvt__list_push_head(struct kvt__list *l, uint32_t *prev, uint32_t *next, uint32_t id);
void kvt__list_unlink(struct kvt__list *l, uint32_t *prev, uint32_t *next, uint32_t id);

/* Indexed min-heap of ids by a double key; ties broken by insertion sequence. Entries carry
 * their key so that sifting touches the heap array only. */
struct kvt__hent {
	double key;
	uint64_t seq; /* tie break: older first */
	uint32_t id;
};
struct kvt__heap {
	struct kvt__hent *e; /* heap array, n used */
	uint32_t *pos;       /* pos[id] + 1, 0 = absent; sized pos_cap */
	uint32_t *aux;       /* scratch for non-destructive walks */
	size_t n, cap, pos_cap, aux_cap;
	uint64_t clock;
};
void kvt__heap_init(struct kvt__heap *h);
void kvt__heap_free(struct kvt__heap *h);
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

/* Sorts ids[0..n) by key[id] ascending, ties by id (export_order of sampled policies). */
void kvt__sort_ids_by(uint32_t *ids, size_t n, const uint64_t *key);

/* Parses a double parameter in [lo, hi]. @return : 0 or -EINVAL. */
int kvt__param_double(const char *value, double lo, double hi, double *out);

/* A FIFO of ghost hashes with O(1) membership and removal (ARC's B1/B2, S3-FIFO's G). */
struct kvt__ghost {
	struct kvt__hset set; /* hash -> low 32 bits of its sequence number */
	uint64_t *ring;       /* ring[seq % cap] = hash */
	uint64_t head, tail;  /* sequence numbers */
	size_t cap, n;        /* n live (head..tail also holds stale slots) */
};
int kvt__ghost_init(struct kvt__ghost *g, size_t expect);
void kvt__ghost_free(struct kvt__ghost *g);
bool kvt__ghost_has(const struct kvt__ghost *g, uint64_t h);
/* Adds h as the newest ghost. @return : 0 or -ENOMEM. */
int kvt__ghost_add(struct kvt__ghost *g, uint64_t h);
void kvt__ghost_del(struct kvt__ghost *g, uint64_t h);
/* Drops the oldest ghosts until at most limit remain. */
void kvt__ghost_trim(struct kvt__ghost *g, size_t limit);
#endif
