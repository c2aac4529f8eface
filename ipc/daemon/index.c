/*
 * index.c -- the chunk index: (tenant, namespace, key) -> entry id, chained hashing over a
 * bucket array of u32 heads. Keys are already uniform 128-bit hashes, so the bucket is a few
 * bits of the key mixed with the tenant. Lookups are O(1); the table doubles at load 1.
 */
#include "daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint32_t bucket_of(const struct kvd_index *x, uint32_t tenant, kvt_id_t ns, kvt_id_t key)
{
	uint64_t h = key.w[0] ^ (ns.w[0] * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)tenant << 32);
	h ^= h >> 29;
	return (uint32_t)h & (x->nbucket - 1);
}

int kvd_index_init(struct kvd_index *x, uint32_t cap)
{
	memset(x, 0, sizeof(*x));
	x->cap = cap < 1024 ? 1024 : cap;
	x->e = calloc(x->cap, sizeof(*x->e));
	x->nbucket = 1024;
	while (x->nbucket < x->cap)
		x->nbucket <<= 1;
	x->bucket = malloc(sizeof(uint32_t) * x->nbucket);
	if (!x->e || !x->bucket) {
		kvd_index_fini(x);
		return -ENOMEM;
	}
	memset(x->bucket, 0xff, sizeof(uint32_t) * x->nbucket);
	for (uint32_t i = 0; i < x->cap; i++)
		x->e[i].hnext = i + 1 < x->cap ? i + 1 : KVD_NIL;
	x->free_head = 0;
	return 0;
}

void kvd_index_fini(struct kvd_index *x)
{
	free(x->e);
	free(x->bucket);
	memset(x, 0, sizeof(*x));
}

uint32_t kvd_index_find(const struct kvd_index *x, uint32_t tenant, kvt_id_t ns, kvt_id_t key)
{
	for (uint32_t id = x->bucket[bucket_of(x, tenant, ns, key)]; id != KVD_NIL;
	     id = x->e[id].hnext) {
		const struct kvd_entry *e = &x->e[id];
		if (e->key.w[0] == key.w[0] && e->key.w[1] == key.w[1] && e->tenant == tenant &&
		    e->ns.w[0] == ns.w[0] && e->ns.w[1] == ns.w[1])
			return id;
	}
	return KVD_NIL;
}

static int rehash(struct kvd_index *x, uint32_t nbucket)
{
	uint32_t *b = malloc(sizeof(uint32_t) * nbucket);
	if (!b)
		return -ENOMEM;
	memset(b, 0xff, sizeof(uint32_t) * nbucket);
	uint32_t *old = x->bucket, oldn = x->nbucket;
	x->bucket = b;
	x->nbucket = nbucket;
	for (uint32_t i = 0; i < oldn; i++) {
		for (uint32_t id = old[i], nx; id != KVD_NIL; id = nx) {
			nx = x->e[id].hnext;
			struct kvd_entry *e = &x->e[id];
			uint32_t k = bucket_of(x, e->tenant, e->ns, e->key);
			e->hnext = b[k];
			b[k] = id;
		}
	}
	free(old);
	return 0;
}

uint32_t kvd_index_alloc(struct kvd_index *x, uint32_t max)
{
	if (x->free_head == KVD_NIL) {
		if (x->cap >= max)
			return KVD_NIL;
		uint32_t ncap = x->cap * 2 > max ? max : x->cap * 2;
		struct kvd_entry *e = realloc(x->e, sizeof(*e) * ncap);
		if (!e)
			return KVD_NIL;
		memset(e + x->cap, 0, sizeof(*e) * (ncap - x->cap));
		for (uint32_t i = x->cap; i < ncap; i++)
			e[i].hnext = i + 1 < ncap ? i + 1 : KVD_NIL;
		x->free_head = x->cap;
		x->e = e;
		x->cap = ncap;
	}
	uint32_t id = x->free_head;
	x->free_head = x->e[id].hnext;
	memset(&x->e[id], 0, sizeof(x->e[id]));
	x->e[id].hnext = KVD_NIL;
	x->used++;
	return id;
}

void kvd_index_insert(struct kvd_index *x, uint32_t id)
{
	if (x->used > x->nbucket)
		rehash(x, x->nbucket * 2); /* on failure the chains just get longer */
	struct kvd_entry *e = &x->e[id];
	uint32_t k = bucket_of(x, e->tenant, e->ns, e->key);
	e->hnext = x->bucket[k];
	x->bucket[k] = id;
}

void kvd_index_unlink(struct kvd_index *x, uint32_t id)
{
	struct kvd_entry *e = &x->e[id];
	uint32_t *p = &x->bucket[bucket_of(x, e->tenant, e->ns, e->key)];
	while (*p != KVD_NIL && *p != id)
		p = &x->e[*p].hnext;
	if (*p == id)
		*p = e->hnext;
	e->hnext = KVD_NIL;
}

void kvd_index_release(struct kvd_index *x, uint32_t id)
{
	memset(&x->e[id], 0, sizeof(x->e[id]));
	x->e[id].hnext = x->free_head;
	x->free_head = id;
	x->used--;
}

uint64_t kvd_index_bytes(const struct kvd_index *x)
{
	return (uint64_t)x->cap * sizeof(struct kvd_entry) +
	       (uint64_t)x->nbucket * sizeof(uint32_t);
}

int kvd_index_audit(const struct kvd_index *x, uint32_t *chained)
{
	uint32_t n = 0, free_n = 0;
	for (uint32_t b = 0; b < x->nbucket; b++)
		for (uint32_t id = x->bucket[b]; id != KVD_NIL; id = x->e[id].hnext) {
			const struct kvd_entry *e = &x->e[id];
			if (id >= x->cap || e->state != KVD_PUBLISHED || ++n > x->cap ||
			    bucket_of(x, e->tenant, e->ns, e->key) != b ||
			    kvd_index_find(x, e->tenant, e->ns, e->key) != id)
				return -EUCLEAN; /* a cycle, a stray, or a key found twice */
		}
	for (uint32_t id = x->free_head; id != KVD_NIL; id = x->e[id].hnext)
		if (id >= x->cap || x->e[id].state != KVD_FREE || ++free_n > x->cap)
			return -EUCLEAN;
	if (free_n != x->cap - x->used)
		return -EUCLEAN;
	*chained = n;
	return 0;
}
