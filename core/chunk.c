/* chunk.c -- encode, decode and verify the record header of chunk.h. */
#include "chunk.h"
#include "util.h"

#include <errno.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t's size, for kvt_chunk_sum_state */
#include <xxhash.h>
#if defined(__x86_64__)
/* libxxhash's runtime dispatch picks AVX2/AVX-512 where the CPU has them: the same hash, about
 * 1.6x faster on data that is not in cache (a chunk just read from a tier). */
#include <xxh_x86dispatch.h>
#define KVT_XXH3_64     XXH3_64bits_dispatch
#define KVT_XXH3_UPDATE XXH3_64bits_update_dispatch
#else
#define KVT_XXH3_64     XXH3_64bits
#define KVT_XXH3_UPDATE XXH3_64bits_update
#endif

_Static_assert(sizeof(XXH3_state_t) <= sizeof(struct kvt_chunk_sum_state) &&
                   _Alignof(XXH3_state_t) <= _Alignof(struct kvt_chunk_sum_state),
               "kvt_chunk_sum_state holds an XXH3 state");

_Static_assert(KVT_CHUNK_HDR_BYTES % 64 == 0, "record header is a multiple of 64 bytes");

static void put_id(uint8_t *p, kvt_id_t id)
{
	kvt_store_le64(p, id.w[0]);
	kvt_store_le64(p + 8, id.w[1]);
}

static kvt_id_t get_id(const uint8_t *p)
{
	kvt_id_t id = {{kvt_load_le64(p), kvt_load_le64(p + 8)}};
	return id;
}

void kvt_chunk_hdr_encode(void *dst, const struct kvt_chunk_hdr *h)
{
	uint8_t *p = dst;
	memset(p, 0, KVT_CHUNK_HDR_BYTES);
	kvt_store_le32(p + 0, KVT_CHUNK_MAGIC);
	p[4] = KVT_CHUNK_VERSION & 0xff, p[5] = KVT_CHUNK_VERSION >> 8;
	p[6] = h->codec, p[7] = h->level;
	kvt_store_le32(p + 8, h->flags);
	kvt_store_le32(p + 12, h->n_tokens);
	put_id(p + 16, h->ns);
	put_id(p + 32, h->key);
	put_id(p + 48, h->parent);
	kvt_store_le64(p + 64, h->raw_bytes);
	kvt_store_le64(p + 72, h->payload_bytes);
	kvt_store_le64(p + 80, h->seq);
	kvt_store_le64(p + 88, h->payload_sum);
	kvt_store_le32(p + 96, h->tenant);
	kvt_store_le64(p + 120, XXH3_64bits(p, 120));
}

int kvt_chunk_hdr_decode(const void *src, struct kvt_chunk_hdr *h)
{
	const uint8_t *p = src;
	if (kvt_load_le32(p) != KVT_CHUNK_MAGIC || kvt_load_le64(p + 120) != XXH3_64bits(p, 120))
		return -EBADMSG;
	h->version = (uint16_t)(p[4] | p[5] << 8);
	if (h->version != KVT_CHUNK_VERSION)
		return -EPROTONOSUPPORT;
	h->codec = p[6], h->level = p[7];
	h->flags = kvt_load_le32(p + 8);
	h->n_tokens = kvt_load_le32(p + 12);
	h->ns = get_id(p + 16);
	h->key = get_id(p + 32);
	h->parent = get_id(p + 48);
	h->raw_bytes = kvt_load_le64(p + 64);
	h->payload_bytes = kvt_load_le64(p + 72);
	h->seq = kvt_load_le64(p + 80);
	h->payload_sum = kvt_load_le64(p + 88);
	h->tenant = kvt_load_le32(p + 96);
	return 0;
}

uint64_t kvt_chunk_sum(const void *p, size_t len)
{
	return KVT_XXH3_64(p, len);
}

void kvt_chunk_sum_begin(struct kvt_chunk_sum_state *s)
{
	XXH3_64bits_reset((XXH3_state_t *)(void *)s->opaque);
}

void kvt_chunk_sum_add(struct kvt_chunk_sum_state *s, const void *p, size_t len)
{
	KVT_XXH3_UPDATE((XXH3_state_t *)(void *)s->opaque, p, len);
}

uint64_t kvt_chunk_sum_end(struct kvt_chunk_sum_state *s)
{
	return XXH3_64bits_digest((XXH3_state_t *)(void *)s->opaque);
}

int kvt_chunk_verify(const struct kvt_chunk_hdr *h, const void *payload, size_t len)
{
	if (h->payload_bytes != len || kvt_chunk_sum(payload, len) != h->payload_sum)
		return -EBADMSG;
	return 0;
}
