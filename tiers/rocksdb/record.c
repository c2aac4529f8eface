/*
 * record.c -- the rocksdb tier's values: a record (its 128-byte header and payload) under its
 * key, and its metadata (the header and the time it was written) under the meta range's key
 * (db.c), put and deleted in one batch; and the checks a value read back must pass.
 */
#include "rocksdb_int.h"

#include <errno.h>
#include <string.h>
#include <time.h>

bool kvt__rdb_same_id(const struct kvt_tier_id *a, const struct kvt_tier_id *b)
{
	return a->tenant == b->tenant && !memcmp(&a->ns, &b->ns, sizeof(a->ns)) &&
	       !memcmp(&a->key, &b->key, sizeof(a->key));
}

/* Decodes the 128-byte header at p into h and checks that it names id. @return : 0 or
 * -EBADMSG. */
static int check_hdr(const struct kvt_tier_id *id, const void *p, struct kvt_chunk_hdr *h)
{
	if (kvt_chunk_hdr_decode(p, h))
		return -EBADMSG;
	struct kvt_tier_id named = {.tenant = h->tenant, .ns = h->ns, .key = h->key};
	return kvt__rdb_same_id(&named, id) ? 0 : -EBADMSG;
}

/* Checks a stored value against the identity it is stored under. */
int kvt__rdb_check_record(const struct kvt_tier_id *id, const void *val, size_t len, bool payload,
                          struct kvt_chunk_hdr *h)
{
	if (len < KVT_CHUNK_HDR_BYTES || check_hdr(id, val, h) ||
	    h->payload_bytes != len - KVT_CHUNK_HDR_BYTES)
		return -EBADMSG;
	if (payload)
		return kvt_chunk_verify(h, (const uint8_t *)val + KVT_CHUNK_HDR_BYTES,
		                        len - KVT_CHUNK_HDR_BYTES);
	return 0;
}

/* Adds the put of the metadata of the record under key k (its header hdr, written now) to b. */
void kvt__rdb_batch_put_meta(rocksdb_writebatch_t *b, const uint8_t *k, const void *hdr,
                             uint64_t age_s)
{
	uint8_t mk[KVT__RDB_META_KEY_BYTES], m[KVT__RDB_META_BYTES];
	kvt__rdb_meta_key(mk, k);
	memcpy(m, hdr, KVT_CHUNK_HDR_BYTES);
	kvt_store_le64(m + KVT_CHUNK_HDR_BYTES, (uint64_t)time(NULL) - age_s);
	rocksdb_writebatch_put(b, (const char *)mk, sizeof(mk), (const char *)m, sizeof(m));
}

/* Adds the puts of record k (value v, len bytes: header and payload) and its metadata to b. */
void kvt__rdb_batch_put(rocksdb_writebatch_t *b, const uint8_t *k, const void *v, size_t len)
{
	rocksdb_writebatch_put(b, (const char *)k, KVT__RDB_KEY_BYTES, v, len);
	kvt__rdb_batch_put_meta(b, k, v, 0);
}

/* Adds the deletes of the record under key k and of its metadata to b. */
void kvt__rdb_batch_delete(rocksdb_writebatch_t *b, const uint8_t *k)
{
	uint8_t mk[KVT__RDB_META_KEY_BYTES];
	kvt__rdb_meta_key(mk, k);
	rocksdb_writebatch_delete(b, (const char *)k, KVT__RDB_KEY_BYTES);
	rocksdb_writebatch_delete(b, (const char *)mk, sizeof(mk));
}

/* The header, length and age a metadata value records, for the record under id. @return : 0,
 * or -EBADMSG (the header fails its checksum, names another record, or the size is wrong). */
int kvt__rdb_meta_decode(const struct kvt_tier_id *id, const char *v, size_t len,
                         struct kvt_chunk_hdr *h, uint64_t *bytes, uint32_t *age_s)
{
	if (len != KVT__RDB_META_BYTES || check_hdr(id, v, h) || h->payload_bytes > 1ull << 40)
		return -EBADMSG;
	*bytes = KVT_CHUNK_HDR_BYTES + h->payload_bytes;
	uint64_t at = kvt_load_le64(v + KVT_CHUNK_HDR_BYTES), now = (uint64_t)time(NULL);
	*age_s = at < now ? (uint32_t)KVT_MIN(now - at, (uint64_t)INT32_MAX) : 0;
	return 0;
}
