/* tiers_fixture.h -- what test_tiers and test_tiers_devices share: a daemon with tiers below
 * host and a namespace, 128 chunks spilled through a 2 MiB host, and where each one is. */
#ifndef KVT_TESTS_TIERS_FIXTURE_H
#define KVT_TESTS_TIERS_FIXTURE_H
#include "testlib.h"
#include "kvtier.h"
#include "put_chain.h"
#include "chunk_in.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define N        128  /* 128 x 64 KiB = 8 MiB against a 2 MiB host tier */
#define KEYS_MAX 2048 /* the most keys_of makes */

static inline kvt_model_t model(uint32_t layers)
{
	kvt_model_t m = {.name = "tiers",
	                 .dtype = KVT_DTYPE_F16,
	                 .n_layers = layers,
	                 .n_kv_heads = 8,
	                 .head_dim = 128,
	                 .tokens_per_chunk = 16};
	return m; /* 64 KiB per layer */
}

static inline void keys_of(kvt_id_t ns, kvt_id_t *keys, size_t n, uint32_t salt)
{
	static uint32_t toks[KEYS_MAX * 16];
	assert_true(n <= KEYS_MAX);
	for (size_t i = 0; i < n * 16; i++)
		toks[i] = (uint32_t)i * 31 + salt;
	assert_int_equal(kvt_chunk_keys(ns, toks, n * 16, 16, keys, n), n);
}

static inline void wait_stat(struct kvt_test_daemon *d, const char *key, long long want)
{
	long long v = kvt_test_stat_wait(d, key, want, 1);
	if (v < want)
		fail_msg("%s: %lld, want %lld (demoted %lld, demote_failed %lld, eagain %lld, "
		         "evictions %lld, cascaded %lld)",
		         key, v, want, kvt_test_stat(d, "demoted"),
		         kvt_test_stat(d, "demote_failed"), kvt_test_stat(d, "eagain"),
		         kvt_test_stat(d, "evictions"), kvt_test_stat(d, "cascaded"));
}

/* Starts d with sets and registers a namespace of model m (*ns) through a new client.
 * @return : the client. */
static inline kvt_client_t *start_ns(struct kvt_test_daemon *d, const char *const *sets,
                                     const kvt_model_t *m, kvt_id_t *ns)
{
	kvt_client_t *c;
	assert_int_equal(kvt_test_daemon_start(d, sets), 0);
	assert_int_equal(kvt_connect(d->sock, &c), 0);
	assert_int_equal(kvt_namespace(c, m, ns), 0);
	return c;
}

/* A daemon started with sets, a client, the test model's namespace, and N chunks of salt put
 * and acknowledged as demoted: the common start of the tests below. */
struct spilled {
	struct kvt_test_daemon d;
	kvt_client_t *c;
	kvt_id_t ns, keys[N];
	size_t cb;
};

static inline void spill(struct spilled *s, const char *const *sets, uint32_t salt)
{
	kvt_model_t m = model(1);
	s->c = start_ns(&s->d, sets, &m, &s->ns);
	keys_of(s->ns, s->keys, N, salt);
	s->cb = kvt_chunk_bytes(&m);
	kvt_test_put_chain(s->c, s->ns, s->keys, N, s->cb, (uint64_t)salt * 10000);
	wait_stat(&s->d, "demoted", N);
}

static inline void unspill(struct spilled *s)
{
	kvt_close(s->c);
	kvt_test_daemon_destroy(&s->d);
}

/* The first n of sp's keys, going from index first to last (either way), whose chunk is at
 * host (host) or only below it (!host), as kvtier inspect tells: which ones host keeps is the
 * policy's choice and the demotions' timing's, so a test that needs a chunk in one place picks
 * it so. */
static inline void keys_where(struct spilled *sp, bool host, size_t first, size_t last, size_t *out,
                              size_t n)
{
	size_t got = 0, steps = (first <= last ? last - first : first - last) + 1;
	for (size_t j = 0; j < steps && got < n; j++) {
		size_t i = first <= last ? first + j : first - j;
		char in[64];
		assert_int_equal(kvt_test_chunk_in(&sp->d, sp->ns, sp->keys[i], in, sizeof(in)), 0);
		if ((strstr(in, "host") != NULL) == host)
			out[got++] = i;
	}
	if (got < n)
		fail_msg("%zu of %zu chunks %s host", got, n, host ? "at" : "below");
}

/* Gets key (cb bytes): @return 1 when found, its bytes kvt_test_fill(seed)'s, 0 on a miss. */
static inline int get_checked(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *key, size_t cb,
                              uint64_t seed)
{
	uint8_t *got = malloc(cb), *want = malloc(cb);
	void *dst[1] = {got};
	int rc = kvt_get(c, ns, key, 1, dst, cb);
	if (rc < 0)
		fail_msg("get: %s", kvt_strerror(rc));
	if (rc) {
		kvt_test_fill(want, cb, seed);
		assert_memory_equal(got, want, cb); /* never a wrong byte */
	}
	free(got);
	free(want);
	return rc;
}

#endif
