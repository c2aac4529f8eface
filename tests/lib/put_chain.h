/*
 * put_chain.h -- a client fixture for the daemon tests (header-only, so kvt_testlib stays free
 * of the client library): put a chain of chunks one at a time, as an engine's prefill does.
 */
#ifndef KVT_TESTS_PUT_CHAIN_H
#define KVT_TESTS_PUT_CHAIN_H
#include "testlib.h"
#include "kvtier.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* Puts keys[0..n) as chains of `every` cb-byte chunks (keys[i]'s parent is keys[i - 1] unless
 * i is a multiple of every); chunk i holds kvt_test_fill(seed0 + i). A put that meets -EAGAIN
 * (host full of chunks still waiting for demotion) backs off and retries. Short chains load a
 * host whose lower tier fails: a put never evicts its own prefix, so one chain longer than host
 * would end where host is full of it. */
static inline void kvt_test_put_chains(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n,
                                       size_t cb, uint64_t seed0, size_t every)
{
	uint8_t *buf = malloc(cb);
	for (size_t i = 0; i < n; i++) {
		kvt_test_fill(buf, cb, seed0 + i);
		const void *ch[1] = {buf};
		const kvt_id_t *parent = i % every ? &keys[i - 1] : NULL;
		int rc;
		for (int tries = 0;
		     (rc = kvt_put(c, ns, parent, &keys[i], 1, ch, cb)) == -EAGAIN && tries < 200;
		     tries++)
			usleep(5000);
		assert_int_equal(rc, 1);
	}
	free(buf);
}

/* Puts keys[0..n) as one chain, one chunk at a time, as an engine's prefill does. */
static inline void kvt_test_put_chain(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n,
                                      size_t cb, uint64_t seed0)
{
	kvt_test_put_chains(c, ns, keys, n, cb, seed0, n ? n : 1);
}
#endif
