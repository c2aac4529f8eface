/*
 * kvcache.c -- the engine's paged KV cache and the gather/scatter to kvtier's canonical layout.
 *
 * Layout (vLLM-like): the pool is n_layers * blocks_per_layer physical blocks; a block holds 16
 * tokens of one layer as [K, V][token in block][kv_head][head_dim] in the KV dtype. A per-layer
 * block table maps logical block (pos / 16) to a physical block. kvt_llm_kv_reset() deals the
 * physical blocks out in a seed-shuffled order, so gather/scatter must really follow the table
 * (as it must in a real engine, where blocks come from a shared free list).
 *
 * The canonical chunk layout is [layer][K, V][token][kv_head][head_dim]: within a layer and a
 * token, the kv_dim elements are contiguous on both sides, so a gather or scatter is one memcpy
 * of row_bytes per (layer, K/V, token). Both directions copy bytes, never convert, so a chunk
 * put by one engine and scattered by another is bit-identical to a computed one.
 */
#include "minillm.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

uint16_t kvt_llm_f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, man = x & 0x7fffff;
	if (e == 0xff) /* inf or nan (nan keeps a payload bit) */
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	int32_t he = (int32_t)e - 127 + 15;
	if (he >= 0x1f)
		return (uint16_t)(sign | 0x7c00);
	if (he <= 0) { /* subnormal or zero: shift the mantissa with its hidden bit */
		if (he < -10)
			return (uint16_t)sign;
		man |= 0x800000;
		uint32_t shift = (uint32_t)(14 - he);
		uint32_t h = man >> shift, rem = man & ((1u << shift) - 1),
		         half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = ((uint32_t)he << 10) | (man >> 13), rem = man & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++; /* may carry into the exponent, up to inf: that is correct rounding */
	return (uint16_t)(sign | h);
}

static float f16_table[1 << 16];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static float f16_convert(uint16_t h);

static void f16_table_init(void)
{
	for (uint32_t h = 0; h < (1u << 16); h++)
		f16_table[h] = f16_convert((uint16_t)h);
}

/* Attention converts every cached element it reads: a 256 KiB table, filled once. */
float kvt_llm_f16_to_f32(uint16_t h)
{
	pthread_once(&f16_once, f16_table_init);
	return f16_table[h];
}

const float *kvt_llm_f16_table(void)
{
	pthread_once(&f16_once, f16_table_init);
	return f16_table;
}

static float f16_convert(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, man = h & 0x3ff, x;
	if (e == 0) {
		if (!man) {
			x = sign;
		} else { /* subnormal: normalise */
			float v = ldexpf((float)man, -24);
			return sign ? -v : v;
		}
	} else if (e == 0x1f) {
		x = sign | 0x7f800000 | (man << 13);
	} else {
		x = sign | ((e - 15 + 127) << 23) | (man << 13);
	}
	float f;
	memcpy(&f, &x, 4);
	return f;
}

int kvt_llm_kv_create(int dtype, int n_layers, int kv_dim, int seq_len,
                      struct kvt_llm_kvcache **out)
{
	if ((dtype != KVT_LLM_F32 && dtype != KVT_LLM_F16) || n_layers <= 0 || kv_dim <= 0 ||
	    seq_len <= 0)
		return -EINVAL;
	struct kvt_llm_kvcache *kv = calloc(1, sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	kv->dtype = dtype;
	kv->n_layers = n_layers;
	kv->kv_dim = kv_dim;
	kv->seq_len = seq_len;
	kv->blocks_per_layer = (seq_len + KVT_LLM_BLOCK_TOKENS - 1) / KVT_LLM_BLOCK_TOKENS;
	kv->elem_bytes = dtype == KVT_LLM_F32 ? 4 : 2;
	kv->row_bytes = (size_t)kv_dim * kv->elem_bytes;
	kv->block_bytes = 2 * KVT_LLM_BLOCK_TOKENS * kv->row_bytes;
	size_t n_blocks = (size_t)n_layers * (size_t)kv->blocks_per_layer;
	kv->pool = calloc(n_blocks, kv->block_bytes);
	kv->table = calloc(n_blocks, sizeof(*kv->table));
	if (!kv->pool || !kv->table) {
		kvt_llm_kv_destroy(kv);
		return -ENOMEM;
	}
	kvt_llm_kv_reset(kv, 0);
	*out = kv;
	return 0;
}

void kvt_llm_kv_destroy(struct kvt_llm_kvcache *kv)
{
	if (!kv)
		return;
	free(kv->pool);
	free(kv->table);
	free(kv);
}

void kvt_llm_kv_reset(struct kvt_llm_kvcache *kv, uint64_t seed)
{
	int n = kv->n_layers * kv->blocks_per_layer;
	for (int i = 0; i < n; i++)
		kv->table[i] = i;
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
	for (int i = n - 1; i > 0; i--) { /* Fisher-Yates with splitmix64 */
		s += 0x9E3779B97F4A7C15ull;
		uint64_t z = s;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		z ^= z >> 31;
		int j = (int)(z % (uint64_t)(i + 1));
		int32_t t = kv->table[i];
		kv->table[i] = kv->table[j];
		kv->table[j] = t;
	}
}

void *kvt_llm_kv_row(const struct kvt_llm_kvcache *kv, int layer, int which, int pos)
{
	int32_t phys = kv->table[layer * kv->blocks_per_layer + pos / KVT_LLM_BLOCK_TOKENS];
	uint8_t *block = kv->pool + (size_t)phys * kv->block_bytes;
	return block +
	       ((size_t)which * KVT_LLM_BLOCK_TOKENS + (size_t)(pos % KVT_LLM_BLOCK_TOKENS)) *
	           kv->row_bytes;
}

static void store_row(const struct kvt_llm_kvcache *kv, void *dst, const float *src)
{
	if (kv->dtype == KVT_LLM_F32) {
		memcpy(dst, src, kv->row_bytes);
		return;
	}
	uint16_t *h = dst;
	for (int i = 0; i < kv->kv_dim; i++)
		h[i] = kvt_llm_f32_to_f16(src[i]);
}

void kvt_llm_kv_store(struct kvt_llm_kvcache *kv, int layer, int pos, const float *k,
                      const float *v)
{
	store_row(kv, kvt_llm_kv_row(kv, layer, 0, pos), k);
	store_row(kv, kvt_llm_kv_row(kv, layer, 1, pos), v);
}

size_t kvt_llm_kv_bytes(const struct kvt_llm_kvcache *kv, int n_tokens)
{
	return 2 * (size_t)kv->n_layers * (size_t)n_tokens * kv->row_bytes;
}

static int check_range(const struct kvt_llm_kvcache *kv, int pos, int n, size_t len)
{
	if (pos < 0 || n < 0 || pos > kv->seq_len - n || len < kvt_llm_kv_bytes(kv, n))
		return -EINVAL;
	return 0;
}

int kvt_llm_kv_gather(const struct kvt_llm_kvcache *kv, int pos, int n, void *dst, size_t dst_len)
{
	if (check_range(kv, pos, n, dst_len))
		return -EINVAL;
	uint8_t *d = dst;
	for (int l = 0; l < kv->n_layers; l++)
		for (int w = 0; w < 2; w++)
			for (int t = 0; t < n; t++, d += kv->row_bytes)
				memcpy(d, kvt_llm_kv_row(kv, l, w, pos + t), kv->row_bytes);
	return 0;
}

int kvt_llm_kv_scatter(struct kvt_llm_kvcache *kv, int pos, int n, const void *src, size_t src_len)
{
	if (check_range(kv, pos, n, src_len))
		return -EINVAL;
	const uint8_t *s = src;
	for (int l = 0; l < kv->n_layers; l++)
		for (int w = 0; w < 2; w++)
			for (int t = 0; t < n; t++, s += kv->row_bytes)
				memcpy(kvt_llm_kv_row(kv, l, w, pos + t), s, kv->row_bytes);
	return 0;
}
