/*
 * index.c -- the rocksdb tier's in-memory index: record identity -> dense slot number.
 *
 * RocksDB is addressed by key, so the tier needs no location map; it keeps this index only for
 * eviction (slot numbers are the policy's dense ids), usage accounting and TTL. The index is
 * rebuilt at open by scanning the database, or read from the file a clean close saved
 * (saved.c).
 *
 * Layout: slots[] is dense and reuses dead slots through a free stack (so policy arrays stay
 * small); table[] is open addressing with linear probing and backward-shift deletion (no
 * tombstones), kept at most half full. Keys are XXH3 outputs already, so the probe hash is a
 * cheap mix of the identity's words. Memory: ~40 bytes per slot + 8 per record in the table.
 */
#include "rocksdb_int.h"
#include "core/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define INIT_SLOTS 1024u

uint64_t kvt__rdb_id_hash(const struct kvt_tier_id *id)
{
	uint64_t h = id->key.w[0] ^ (id->key.w[1] * 0x9e3779b97f4a7c15ull) ^ id->ns.w[0] ^
	             ((uint64_t)id->tenant * 0xff51afd7ed558ccdull);
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 29);
}

static bool id_eq(const struct kvt_tier_id *a, const struct kvt_tier_id *b)
{
	return a->tenant == b->tenant && !memcmp(&a->ns, &b->ns, sizeof(a->ns)) &&
	       !memcmp(&a->key, &b->key, sizeof(a->key));
}

void kvt__rdb_key_encode(uint8_t out[KVT__RDB_KEY_BYTES], const struct kvt_tier_id *id)
{
	kvt_store_le32(out, id->tenant);
	kvt_store_le64(out + 4, id->ns.w[0]);
	kvt_store_le64(out + 12, id->ns.w[1]);
	kvt_store_le64(out + 20, id->key.w[0]);
	kvt_store_le64(out + 28, id->key.w[1]);
}

int kvt__rdb_key_decode(const void *k, size_t len, struct kvt_tier_id *id)
{
	const uint8_t *p = k;
	if (len != KVT__RDB_KEY_BYTES)
		return -EBADMSG;
	id->tenant = kvt_load_le32(p);
	id->ns.w[0] = kvt_load_le64(p + 4);
	id->ns.w[1] = kvt_load_le64(p + 12);
	id->key.w[0] = kvt_load_le64(p + 20);
	id->key.w[1] = kvt_load_le64(p + 28);
	return 0;
}

int kvt__rdb_index_init(struct kvt__rdb_index *ix)
{
	memset(ix, 0, sizeof(*ix));
	ix->slots = calloc(INIT_SLOTS, sizeof(*ix->slots));
	ix->free = calloc(INIT_SLOTS, sizeof(*ix->free));
	ix->table = malloc(2 * INIT_SLOTS * sizeof(*ix->table));
	if (!ix->slots || !ix->free || !ix->table) {
		kvt__rdb_index_fini(ix);
		return -ENOMEM;
	}
	memset(ix->table, 0xff, 2 * INIT_SLOTS * sizeof(*ix->table));
	ix->cap_slots = INIT_SLOTS;
	ix->mask = 2 * INIT_SLOTS - 1;
	return 0;
}

void kvt__rdb_index_fini(struct kvt__rdb_index *ix)
{
	free(ix->slots);
	free(ix->free);
	free(ix->table);
	memset(ix, 0, sizeof(*ix));
}

uint32_t kvt__rdb_index_find(const struct kvt__rdb_index *ix, const struct kvt_tier_id *id)
{
	for (uint32_t i = (uint32_t)kvt__rdb_id_hash(id) & ix->mask;; i = (i + 1) & ix->mask) {
		uint32_t s = ix->table[i];
		if (s == KVT__RDB_NIL)
			return KVT__RDB_NIL;
		if (id_eq(&ix->slots[s].id, id))
			return s;
	}
}

static void table_put(uint32_t *table, uint32_t mask, const struct kvt__rdb_slot *slots, uint32_t s)
{
	uint32_t i = (uint32_t)kvt__rdb_id_hash(&slots[s].id) & mask;
	while (table[i] != KVT__RDB_NIL)
		i = (i + 1) & mask;
	table[i] = s;
}

/* Doubles slots, the free stack and the table; rehashes live slots. */
static int grow(struct kvt__rdb_index *ix)
{
	uint32_t cap = ix->cap_slots * 2, tab_len = 2 * cap;
	if (cap > (1u << 30))
		return -ENOMEM;
	struct kvt__rdb_slot *slots = realloc(ix->slots, cap * sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	ix->slots = slots;
	memset(slots + ix->cap_slots, 0, (cap - ix->cap_slots) * sizeof(*slots));
	uint32_t *fr = realloc(ix->free, cap * sizeof(*fr));
	if (!fr)
		return -ENOMEM;
	ix->free = fr;
	uint32_t *table = malloc((size_t)tab_len * sizeof(*table));
	if (!table)
		return -ENOMEM;
	memset(table, 0xff, (size_t)tab_len * sizeof(*table));
	for (uint32_t s = 0; s < ix->n_slots; s++)
		if (slots[s].live)
			table_put(table, tab_len - 1, slots, s);
	free(ix->table);
	ix->table = table;
	ix->mask = tab_len - 1;
	ix->cap_slots = cap;
	return 0;
}

int kvt__rdb_index_add(struct kvt__rdb_index *ix, const struct kvt_tier_id *id, uint64_t bytes,
                       uint32_t born_s, uint32_t *slot)
{
	uint32_t s;
	if (ix->n_free) {
		s = ix->free[--ix->n_free];
	} else {
		if (ix->n_slots == ix->cap_slots) {
			int rc = grow(ix);
			if (rc)
				return rc;
		}
		s = ix->n_slots++;
	}
	struct kvt__rdb_slot *sl = &ix->slots[s];
	sl->id = *id;
	sl->bytes = bytes;
	sl->born_s = born_s;
	sl->live = 1;
	sl->mark = 0;
	table_put(ix->table, ix->mask, ix->slots, s);
	ix->n_live++;
	*slot = s;
	return 0;
}

void kvt__rdb_index_del(struct kvt__rdb_index *ix, uint32_t s)
{
	uint32_t i = (uint32_t)kvt__rdb_id_hash(&ix->slots[s].id) & ix->mask;
	while (ix->table[i] != s) {
		if (KVT_NEVER(ix->table[i] == KVT__RDB_NIL))
			return;
		i = (i + 1) & ix->mask;
	}
	/* Backward-shift: pull later members of the run into the hole when their home allows. */
	for (uint32_t j = (i + 1) & ix->mask;; j = (j + 1) & ix->mask) {
		uint32_t t = ix->table[j];
		if (t == KVT__RDB_NIL)
			break;
		uint32_t home = (uint32_t)kvt__rdb_id_hash(&ix->slots[t].id) & ix->mask;
		if (((j - home) & ix->mask) >= ((j - i) & ix->mask)) {
			ix->table[i] = t;
			i = j;
		}
	}
	ix->table[i] = KVT__RDB_NIL;
	ix->slots[s].live = 0;
	ix->free[ix->n_free++] = s;
	ix->n_live--;
}
