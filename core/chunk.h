/*
 * chunk.h -- the record header that precedes every chunk's payload on every tier.
 *
 * 128 bytes, little-endian, the same on every tier, so that moving a chunk between tiers is a
 * copy or an I/O. The header checksum (XXH3-64 of bytes [0, 120)) lets a recovery scan reject a
 * torn header before it trusts any length in it; the payload checksum (XXH3-64) lets every reader
 * verify the bytes it serves.
 *
 *   off size field
 *     0    4 magic "KVTC" (0x4354564b)
 *     4    2 format version (1)
 *     6    1 codec id       7 1 codec level
 *     8    4 flags (KVT_CHUNK_F_*)
 *    12    4 token count
 *    16   16 namespace      32 16 key      48 16 parent key (zero with no parent)
 *    64    8 raw bytes      72  8 payload bytes
 *    80    8 sequence number (recovery ordering)
 *    88    8 payload checksum (XXH3-64, seed 0)
 *    96    4 tenant id     100 20 reserved (zero)
 *   120    8 header checksum (XXH3-64 of bytes 0..119)
 */
#ifndef KVT_CORE_CHUNK_H
#define KVT_CORE_CHUNK_H
#include "kvtier.h"
#include <stdbool.h>

#define KVT_CHUNK_MAGIC     0x4354564bu
#define KVT_CHUNK_VERSION   1
#define KVT_CHUNK_HDR_BYTES 128u

enum { KVT_CHUNK_F_HAS_PARENT = 1u << 0 };

/* The decoded header (host order); the wire form is only ever touched by the functions below. */
struct kvt_chunk_hdr {
	uint16_t version;
	uint8_t codec, level;
	uint32_t flags;
	uint32_t n_tokens;
	uint32_t tenant;
	kvt_id_t ns, key, parent;
	uint64_t raw_bytes, payload_bytes;
	uint64_t seq;
	uint64_t payload_sum;
};

/* Encodes h into 128 bytes at dst, computing the header checksum. */
void kvt_chunk_hdr_encode(void *dst, const struct kvt_chunk_hdr *h);
/*
 * Decodes and verifies 128 bytes at src.
 * @return : 0, -EBADMSG (bad magic or header checksum), -EPROTONOSUPPORT (other version).
 */
int kvt_chunk_hdr_decode(const void *src, struct kvt_chunk_hdr *h);
/* @return : the payload checksum of len bytes at p. */
uint64_t kvt_chunk_sum(const void *p, size_t len);
/* @return : 0 when payload matches h (size and checksum), else -EBADMSG. */
int kvt_chunk_verify(const struct kvt_chunk_hdr *h, const void *payload, size_t len);

/* The payload checksum in pieces (a copy block by block, a read as its I/Os land): begin, add
 * the bytes in order, end gives what kvt_chunk_sum() gives for all of them at once. */
struct kvt_chunk_sum_state {
	_Alignas(64) unsigned char opaque[640];
};
void kvt_chunk_sum_begin(struct kvt_chunk_sum_state *s);
void kvt_chunk_sum_add(struct kvt_chunk_sum_state *s, const void *p, size_t len);
uint64_t kvt_chunk_sum_end(struct kvt_chunk_sum_state *s);
#endif
