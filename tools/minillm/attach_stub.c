/*
 * attach_stub.c -- kvtier attach for a build without the client library (kvtier_static): every
 * call answers -ENOTSUP, and the engine runs without reuse.
 */
#include "minillm.h"

#include <errno.h>
#include <stdio.h>

int kvt_llm_attach_supported(void)
{
	return 0;
}

int kvt_llm_attach_open(const char *socket, const char *model_name,
                        const struct kvt_llm_config *cfg, int dtype, int tokens_per_chunk,
                        struct kvt_llm_attach **out, char *err, size_t err_len)
{
	snprintf(err, err_len, "this minillm was built without libkvtier (--kvtier unavailable)");
	return -ENOTSUP;
}

void kvt_llm_attach_close(struct kvt_llm_attach *a)
{
}

int kvt_llm_attach_fetch(struct kvt_llm_attach *a, struct kvt_llm_kvcache *kv, const int *ids,
                         int n)
{
	return -ENOTSUP;
}

int kvt_llm_attach_store(struct kvt_llm_attach *a, const struct kvt_llm_kvcache *kv, const int *ids,
                         int n, int first_chunk)
{
	return -ENOTSUP;
}

int kvt_llm_attach_chunk_tokens(const struct kvt_llm_attach *a)
{
	return 0;
}
