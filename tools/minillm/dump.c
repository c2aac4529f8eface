/*
 * dump.c -- KV dump files for the codec's quality work: a 64-byte little-endian header (magic
 * "KVTLLMKV", version 1, dtype, n_layers, n_kv_heads, head_dim, n_tokens, an FNV-1a hash of the
 * token ids, payload bytes) and then the prompt's KV in the canonical layout
 * [layer][K,V][token][kv_head][head_dim]. Reading converts f16 <-> f32 as the engine needs, so a
 * codec may hand back a decoded dump in either dtype.
 */
#include "minillm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t kvt_llm_fnv1a(uint64_t h, const void *p, size_t len)
{
	const uint8_t *b = p;
	if (!h)
		h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

uint64_t kvt_llm_tokens_hash(const int *ids, int n)
{
	uint64_t h = 0;
	for (int i = 0; i < n; i++) {
		uint32_t v = (uint32_t)ids[i];
		uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
		                 (uint8_t)(v >> 24)};
		h = kvt_llm_fnv1a(h, le, 4);
	}
	return h;
}

int kvt_llm_dump_write(const char *path, const struct kvt_llm_kvcache *kv,
                       const struct kvt_llm_config *cfg, const int *ids, int n, char *err,
                       size_t err_len)
{
	struct kvt_llm_dump_hdr h = {.magic = "KVTLLMKV",
	                             .version = 1,
	                             .dtype = (uint32_t)kv->dtype,
	                             .n_layers = (uint32_t)cfg->n_layers,
	                             .n_kv_heads = (uint32_t)cfg->n_kv_heads,
	                             .head_dim = (uint32_t)cfg->head_dim,
	                             .n_tokens = (uint32_t)n,
	                             .tokens_hash = kvt_llm_tokens_hash(ids, n),
	                             .payload_bytes = kvt_llm_kv_bytes(kv, n)};
	void *buf = malloc(h.payload_bytes ? h.payload_bytes : 1);
	if (!buf)
		return -ENOMEM;
	int rc = kvt_llm_kv_gather(kv, 0, n, buf, h.payload_bytes);
	FILE *f = rc ? NULL : fopen(path, "wb");
	if (!f) {
		rc = rc ? rc : -errno;
		snprintf(err, err_len, "%s: %s", path, strerror(-rc));
		free(buf);
		return rc;
	}
	if (fwrite(&h, sizeof(h), 1, f) != 1 ||
	    fwrite(buf, 1, h.payload_bytes, f) != h.payload_bytes)
		rc = -EIO;
	if (fclose(f) && !rc)
		rc = -EIO;
	if (rc)
		snprintf(err, err_len, "%s: write error", path);
	free(buf);
	return rc;
}

static int convert(const void *src, uint32_t src_dtype, void *dst, int dtype, size_t n_elems)
{
	if ((int)src_dtype == dtype) {
		memcpy(dst, src, n_elems * (dtype == KVT_LLM_F32 ? 4 : 2));
		return 0;
	}
	for (size_t i = 0; i < n_elems; i++) {
		if (dtype == KVT_LLM_F32)
			((float *)dst)[i] = kvt_llm_f16_to_f32(((const uint16_t *)src)[i]);
		else
			((uint16_t *)dst)[i] = kvt_llm_f32_to_f16(((const float *)src)[i]);
	}
	return 0;
}

int kvt_llm_dump_read(const char *path, const struct kvt_llm_config *cfg, int dtype,
                      struct kvt_llm_dump_hdr *h, void **payload, char *err, size_t err_len)
{
	int rc = -EINVAL;
	void *raw = NULL, *out = NULL;
	FILE *f = fopen(path, "rb");
	if (!f) {
		rc = -errno;
		snprintf(err, err_len, "%s: %s", path, strerror(-rc));
		return rc;
	}
	if (fread(h, sizeof(*h), 1, f) != 1 || memcmp(h->magic, "KVTLLMKV", 8) || h->version != 1) {
		snprintf(err, err_len, "%s: not a minillm KV dump", path);
		goto out;
	}
	if ((h->dtype != KVT_LLM_F32 && h->dtype != KVT_LLM_F16) ||
	    h->n_layers != (uint32_t)cfg->n_layers || h->n_kv_heads != (uint32_t)cfg->n_kv_heads ||
	    h->head_dim != (uint32_t)cfg->head_dim || h->n_tokens > (uint32_t)cfg->seq_len) {
		snprintf(err, err_len, "%s: KV dump of another model shape", path);
		goto out;
	}
	size_t n_elems = 2 * (size_t)h->n_layers * h->n_tokens * h->n_kv_heads * h->head_dim;
	size_t src_bytes = n_elems * (h->dtype == KVT_LLM_F32 ? 4 : 2);
	if (h->payload_bytes != src_bytes) {
		snprintf(err, err_len, "%s: payload size %llu, expected %zu", path,
		         (unsigned long long)h->payload_bytes, src_bytes);
		goto out;
	}
	raw = malloc(src_bytes + 1);
	out = malloc(n_elems * 4 + 1);
	if (!raw || !out) {
		rc = -ENOMEM;
		snprintf(err, err_len, "out of memory");
		goto out;
	}
	if (fread(raw, 1, src_bytes, f) != src_bytes || fgetc(f) != EOF) {
		snprintf(err, err_len, "%s: truncated or oversized KV dump", path);
		goto out;
	}
	convert(raw, h->dtype, out, dtype, n_elems);
	*payload = out;
	out = NULL;
	rc = 0;
out:
	free(raw);
	free(out);
	fclose(f);
	return rc;
}
