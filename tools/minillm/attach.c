/*
 * attach.c -- the engine's side of kvtier, through the public API of include/kvtier.h only.
 *
 * Fetch: compute the chained keys of the prompt's full chunks, acquire (zero-copy leases) the
 * leading chunks that end before the last prompt token -- that token is always recomputed for
 * its logits -- scatter each lease's payload into the paged cache, then release and check: a
 * lease revoked while we copied (status -ESTALE) invalidates its chunk and every later one, and
 * the engine recomputes from there. A payload that is not raw or not exactly one chunk is
 * treated the same way. Store: gather the chunks this engine computed into the canonical layout
 * and put them, each chunk's parent being the key before it. Done: name the chunks of a
 * conversation the engine has ended (kvt_done), so that kvtierd lets them go first.
 *
 * Memory: keys, leases and a staging buffer for one full context are allocated at open, so a
 * request allocates nothing.
 */
#include "minillm.h"
#include "kvtier.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kvt_llm_attach {
	kvt_client_t *client;
	kvt_id_t ns;
	int chunk_tokens, max_chunks;
	size_t chunk_bytes;
	kvt_id_t *keys;
	kvt_lease_t *leases;
	uint32_t *tok32;
	uint8_t *stage;
	const void **ptrs;
};

int kvt_llm_attach_chunk_tokens(const struct kvt_llm_attach *a)
{
	return a->chunk_tokens;
}

void kvt_llm_attach_close(struct kvt_llm_attach *a)
{
	if (!a)
		return;
	kvt_close(a->client);
	free(a->keys);
	free(a->leases);
	free(a->tok32);
	free(a->stage);
	free(a->ptrs);
	free(a);
}

int kvt_llm_attach_open(const char *socket, const char *model_name,
                        const struct kvt_llm_config *cfg, int dtype, int tokens_per_chunk,
                        struct kvt_llm_attach **out, char *err, size_t err_len)
{
	if (tokens_per_chunk <= 0 || tokens_per_chunk > cfg->seq_len) {
		snprintf(err, err_len, "--tokens-per-chunk must be in 1..%d", cfg->seq_len);
		return -EINVAL;
	}
	struct kvt_llm_attach *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	int rc = kvt_connect(socket, &a->client);
	if (rc) {
		snprintf(err, err_len, "cannot attach to kvtierd at %s: %s",
		         socket ? socket : "the default socket", kvt_strerror(rc));
		goto err;
	}
	kvt_model_t m = {.name = model_name,
	                 .dtype = (uint32_t)dtype,
	                 .n_layers = (uint32_t)cfg->n_layers,
	                 .n_kv_heads = (uint32_t)cfg->n_kv_heads,
	                 .head_dim = (uint32_t)cfg->head_dim,
	                 .tokens_per_chunk = (uint32_t)tokens_per_chunk};
	rc = kvt_namespace(a->client, &m, &a->ns);
	if (rc) {
		snprintf(err, err_len, "kvtierd refused the namespace of %s: %s", model_name,
		         kvt_strerror(rc));
		goto err;
	}
	a->chunk_tokens = tokens_per_chunk;
	a->max_chunks = cfg->seq_len / tokens_per_chunk;
	a->chunk_bytes = kvt_chunk_bytes(&m);
	rc = -ENOMEM;
	a->keys = calloc((size_t)a->max_chunks + 1, sizeof(*a->keys));
	a->leases = calloc((size_t)a->max_chunks + 1, sizeof(*a->leases));
	a->tok32 = calloc((size_t)cfg->seq_len, sizeof(*a->tok32));
	a->stage = malloc(((size_t)a->max_chunks + 1) * a->chunk_bytes);
	a->ptrs = calloc((size_t)a->max_chunks + 1, sizeof(*a->ptrs));
	if (!a->keys || !a->leases || !a->tok32 || !a->stage || !a->ptrs) {
		snprintf(err, err_len, "out of memory");
		goto err;
	}
	*out = a;
	return 0;
err:
	kvt_llm_attach_close(a);
	return rc;
}

static size_t chunk_keys(struct kvt_llm_attach *a, const int *ids, int n)
{
	for (int i = 0; i < n; i++)
		a->tok32[i] = (uint32_t)ids[i];
	return kvt_chunk_keys(a->ns, a->tok32, (size_t)n, (uint32_t)a->chunk_tokens, a->keys,
	                      (size_t)a->max_chunks);
}

int kvt_llm_attach_fetch(struct kvt_llm_attach *a, struct kvt_llm_kvcache *kv, const int *ids,
                         int n)
{
	int usable = n > 0 ? (n - 1) / a->chunk_tokens : 0;
	if (usable <= 0)
		return 0;
	if ((size_t)usable > chunk_keys(a, ids, n))
		return -EINVAL;
	int got = kvt_acquire(a->client, a->ns, a->keys, (size_t)usable, a->leases);
	if (got <= 0)
		return got;
	int ok = got;
	for (int i = 0; i < got && i < ok; i++) {
		const kvt_lease_t *l = &a->leases[i];
		if (l->codec != KVT_CODEC_RAW || l->len != a->chunk_bytes ||
		    kvt_llm_kv_scatter(kv, i * a->chunk_tokens, a->chunk_tokens, l->data,
		                       (size_t)l->len))
			ok = i;
	}
	int rc = kvt_release(a->client, a->leases, (size_t)got);
	if (rc < 0)
		return rc; /* statuses unknown: trust nothing */
	for (int i = 0; i < ok; i++)
		if (a->leases[i].status != 0)
			ok = i;
	return ok * a->chunk_tokens;
}

int kvt_llm_attach_store(struct kvt_llm_attach *a, const struct kvt_llm_kvcache *kv, const int *ids,
                         int n, int first_chunk)
{
	int nk = (int)chunk_keys(a, ids, n);
	if (first_chunk < 0 || first_chunk >= nk)
		return 0;
	int count = nk - first_chunk;
	for (int i = 0; i < count; i++) {
		uint8_t *dst = a->stage + (size_t)i * a->chunk_bytes;
		int rc = kvt_llm_kv_gather(kv, (first_chunk + i) * a->chunk_tokens, a->chunk_tokens,
		                           dst, a->chunk_bytes);
		if (rc)
			return rc;
		a->ptrs[i] = dst;
	}
	const kvt_id_t *parent = first_chunk ? &a->keys[first_chunk - 1] : NULL;
	return kvt_put(a->client, a->ns, parent, a->keys + first_chunk, (size_t)count, a->ptrs,
	               a->chunk_bytes);
}

int kvt_llm_attach_done(struct kvt_llm_attach *a, const int *ids, int n, int first_chunk)
{
	int nk = (int)chunk_keys(a, ids, n);
	if (first_chunk < 0 || first_chunk >= nk)
		return 0;
	int rc = kvt_done(a->client, a->ns, a->keys + first_chunk, (size_t)(nk - first_chunk));
	return rc < 0 ? rc : nk - first_chunk;
}

int kvt_llm_attach_keep(struct kvt_llm_attach *a, const int *ids, int n, uint32_t ttl_ms)
{
	int nk = (int)chunk_keys(a, ids, n);
	return nk ? kvt_keep(a->client, a->ns, a->keys, (size_t)nk, ttl_ms) : 0;
}
