/* robust_fixture.h -- what test_robust and test_start share: one daemon for the group, a small
 * model, and a healthy client's round trip (the daemon still serves). */
#ifndef KVT_TESTS_ROBUST_FIXTURE_H
#define KVT_TESTS_ROBUST_FIXTURE_H
#include "testlib.h"
#include "kvtier.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The daemon every test of the group talks to (setup, teardown). */
static struct kvt_test_daemon d;

static inline int setup(void **state)
{
	return kvt_test_daemon_start(&d, NULL);
}

static inline int teardown(void **state)
{
	kvt_test_daemon_destroy(&d);
	return 0;
}

/* A namespace of 2 KiB chunks. */
static inline kvt_model_t model(void)
{
	kvt_model_t m = {.name = "robust",
	                 .dtype = KVT_DTYPE_F16,
	                 .n_layers = 1,
	                 .n_kv_heads = 1,
	                 .head_dim = 64,
	                 .tokens_per_chunk = 16};
	return m;
}

/* A healthy client: put and get one chunk. @return : 0 on success. */
static inline int healthy_roundtrip(uint32_t salt)
{
	kvt_client_t *c;
	kvt_model_t m = model();
	kvt_id_t ns, key;
	uint32_t toks[16];
	for (int i = 0; i < 16; i++)
		toks[i] = salt + (uint32_t)i;
	if (kvt_connect(d.sock, &c))
		return -1;
	int rc = kvt_namespace(c, &m, &ns);
	kvt_chunk_keys(ns, toks, 16, 16, &key, 1);
	size_t cb = kvt_chunk_bytes(&m);
	uint8_t *a = malloc(cb), *b = malloc(cb);
	kvt_test_fill(a, cb, salt);
	const void *ch[1] = {a};
	void *dst[1] = {b};
	if (!rc && kvt_put(c, ns, NULL, &key, 1, ch, cb) != 1)
		rc = -2;
	if (!rc && (kvt_get(c, ns, &key, 1, dst, cb) != 1 || memcmp(a, b, cb)))
		rc = -3;
	free(a);
	free(b);
	kvt_close(c);
	return rc;
}

#endif
