/*
 * keys.c -- the namespace and chained-key encoding of DESIGN.md, byte for byte.
 *
 * Namespace = XXH3-128(seed 0) of "kvtier-ns-v1" ‖ u32 len ‖ name ‖ u32 len ‖ revision ‖ u32
 * dtype, n_layers, n_kv_heads, head_dim, tokens_per_chunk, tp_rank, tp_size (0 counts as 1),
 * kv_group, layout. key[0] = XXH3-128(ns ‖ tokens of chunk 0), key[i] = XXH3-128(key[i-1] ‖
 * tokens of chunk i); 128-bit values are written low half first, everything little-endian.
 * The streaming XXH3 state hashes without building the whole byte string.
 */
#include "keys.h"
#include "util.h"

#include <errno.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

size_t kvt__dtype_bytes(uint32_t dtype)
{
	switch (dtype) {
	case KVT_DTYPE_F32:
		return 4;
	case KVT_DTYPE_F16:
	case KVT_DTYPE_BF16:
		return 2;
	case KVT_DTYPE_FP8_E4M3:
		return 1;
	default:
		return 0;
	}
}

int kvt__model_validate(const kvt_model_t *m)
{
	if (!m || !m->name || !m->name[0] || strlen(m->name) > KVT_MODEL_STR_MAX)
		return -EINVAL;
	if (m->revision && strlen(m->revision) > KVT_MODEL_STR_MAX)
		return -EINVAL;
	if (!kvt__dtype_bytes(m->dtype) || !m->n_layers || !m->n_kv_heads || !m->head_dim ||
	    !m->tokens_per_chunk)
		return -EINVAL;
	uint32_t tp = m->tp_size ? m->tp_size : 1;
	if (m->tp_rank >= tp || m->layout != 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(m->reserved) / sizeof(m->reserved[0]); i++)
		if (m->reserved[i])
			return -EINVAL;
	/* keep one chunk under 4 GiB so every size fits the wire's u32 fields. The product is
	 * bounded factor by factor: the whole of it can pass 2^64 and wrap to a size that looks
	 * small (four dimensions of 65,536 wrap to 0). Each factor is at most 2^16 and the running
	 * product below 2^32, so no step overflows. */
	const uint64_t dims[] = {m->n_layers, m->n_kv_heads, m->head_dim, m->tokens_per_chunk};
	uint64_t bytes = 2 * kvt__dtype_bytes(m->dtype);
	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
		if (dims[i] > 65536)
			return -EINVAL;
		bytes *= dims[i];
		if (bytes >= (1ull << 32))
			return -EINVAL;
	}
	return 0;
}

size_t kvt_chunk_bytes(const kvt_model_t *m)
{
	if (kvt__model_validate(m))
		return 0;
	return (size_t)2 * m->n_layers * m->n_kv_heads * m->head_dim * m->tokens_per_chunk *
	       kvt__dtype_bytes(m->dtype);
}

static void put_u32(XXH3_state_t *st, uint32_t v)
{
	uint8_t b[4];
	kvt_store_le32(b, v);
	XXH3_128bits_update(st, b, 4);
}

static void put_id(XXH3_state_t *st, kvt_id_t id)
{
	uint8_t b[16];
	kvt_store_le64(b, id.w[0]);
	kvt_store_le64(b + 8, id.w[1]);
	XXH3_128bits_update(st, b, 16);
}

static void put_str(XXH3_state_t *st, const char *s)
{
	uint32_t n = s ? (uint32_t)strlen(s) : 0;
	put_u32(st, n);
	if (n)
		XXH3_128bits_update(st, s, n);
}

static kvt_id_t digest(XXH3_state_t *st)
{
	XXH128_hash_t h = XXH3_128bits_digest(st);
	kvt_id_t id = {{h.low64, h.high64}};
	return id;
}

int kvt_namespace_id(const kvt_model_t *m, kvt_id_t *ns_out)
{
	if (kvt__model_validate(m) || !ns_out)
		return -EINVAL;
	XXH3_state_t st;
	XXH3_128bits_reset(&st);
	XXH3_128bits_update(&st, "kvtier-ns-v1", 12);
	put_str(&st, m->name);
	put_str(&st, m->revision);
	const uint32_t v[] = {m->dtype,
	                      m->n_layers,
	                      m->n_kv_heads,
	                      m->head_dim,
	                      m->tokens_per_chunk,
	                      m->tp_rank,
	                      m->tp_size ? m->tp_size : 1,
	                      m->kv_group,
	                      m->layout};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		put_u32(&st, v[i]);
	*ns_out = digest(&st);
	return 0;
}

size_t kvt_chunk_keys(kvt_id_t ns, const uint32_t *tokens, size_t n_tokens,
                      uint32_t tokens_per_chunk, kvt_id_t *keys, size_t max_keys)
{
	if (!tokens_per_chunk || (!tokens && n_tokens) || (!keys && max_keys))
		return 0;
	size_t n = n_tokens / tokens_per_chunk;
	if (n > max_keys)
		n = max_keys;
	kvt_id_t prev = ns;
	XXH3_state_t st;
	for (size_t i = 0; i < n; i++) {
		XXH3_128bits_reset(&st);
		put_id(&st, prev);
		const uint32_t *t = tokens + i * tokens_per_chunk;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		XXH3_128bits_update(&st, t, (size_t)tokens_per_chunk * 4);
#else
		for (uint32_t j = 0; j < tokens_per_chunk; j++)
			put_u32(&st, t[j]);
#endif
		prev = keys[i] = digest(&st);
	}
	return n;
}

uint64_t kvt__chunk_id(uint32_t tenant, kvt_id_t ns, kvt_id_t key)
{
	uint64_t w[5] = {tenant, ns.w[0], ns.w[1], key.w[0], key.w[1]};
	return XXH3_64bits(w, sizeof(w));
}
