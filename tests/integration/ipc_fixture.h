/*
 * ipc_fixture.h -- helpers shared by test_ipc and test_tenants: the test model, a prefix's
 * keys, a child's exit, a 64-chunk prefix put by one process and read back by another, a
 * monotonic clock, and a daemon with a client of it.
 */
#ifndef KVT_TESTS_IPC_FIXTURE_H
#define KVT_TESTS_IPC_FIXTURE_H
#include "testlib.h"
#include "ipc/client/simple.h"
#include "kvtier.h"
#include "ipc/proto.h"
#include "core/util.h"

#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N_CHUNKS 64

static inline kvt_model_t model(uint32_t tokens_per_chunk, uint32_t dtype)
{
	kvt_model_t m = {.name = "test-model",
	                 .revision = "r1",
	                 .dtype = dtype,
	                 .n_layers = 2,
	                 .n_kv_heads = 2,
	                 .head_dim = 32,
	                 .tokens_per_chunk = tokens_per_chunk};
	return m;
}

static inline size_t prefix_keys(kvt_id_t ns, uint32_t tpc, kvt_id_t *keys, size_t n, uint32_t salt)
{
	static uint32_t toks[N_CHUNKS * 64 * 4];
	for (size_t i = 0; i < n * tpc; i++)
		toks[i] = (uint32_t)(i * 7 + salt);
	return kvt_chunk_keys(ns, toks, n * tpc, tpc, keys, n);
}

static inline int child_wait(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Child A: put a 64-chunk prefix. */
static inline int put_prefix(const char *sock, uint32_t salt)
{
	kvt_client_t *c;
	if (kvt_connect(sock, &c))
		return 10;
	kvt_model_t m = model(16, KVT_DTYPE_F16);
	kvt_id_t ns, keys[N_CHUNKS];
	if (kvt_namespace(c, &m, &ns))
		return 11;
	prefix_keys(ns, 16, keys, N_CHUNKS, salt);
	size_t cb = kvt_chunk_bytes(&m);
	void *bufs[N_CHUNKS];
	for (int i = 0; i < N_CHUNKS; i++) {
		bufs[i] = malloc(cb);
		kvt_test_fill(bufs[i], cb, salt * 1000 + (uint64_t)i);
	}
	int rc = kvt_put(c, ns, NULL, keys, N_CHUNKS, (const void *const *)bufs, cb);
	for (int i = 0; i < N_CHUNKS; i++)
		free(bufs[i]);
	kvt_close(c);
	return rc == N_CHUNKS ? 0 : 12;
}

/* Child B: same keys, lookup, get, compare every byte. @return : 0 when all match. */
static inline int get_prefix(const char *sock, uint32_t salt, int expect_hits)
{
	kvt_client_t *c;
	if (kvt_connect(sock, &c))
		return 20;
	kvt_model_t m = model(16, KVT_DTYPE_F16);
	kvt_id_t ns, keys[N_CHUNKS];
	if (kvt_namespace(c, &m, &ns))
		return 21;
	prefix_keys(ns, 16, keys, N_CHUNKS, salt);
	if (kvt_lookup(c, ns, keys, N_CHUNKS) != expect_hits)
		return 22;
	size_t cb = kvt_chunk_bytes(&m);
	void *dst[N_CHUNKS];
	uint8_t *want = malloc(cb);
	for (int i = 0; i < N_CHUNKS; i++)
		dst[i] = malloc(cb);
	int got = kvt_get(c, ns, keys, N_CHUNKS, dst, cb);
	int rc = got == expect_hits ? 0 : 23;
	for (int i = 0; i < got && !rc; i++) {
		kvt_test_fill(want, cb, salt * 1000 + (uint64_t)i);
		if (memcmp(want, dst[i], cb))
			rc = 24;
	}
	for (int i = 0; i < N_CHUNKS; i++)
		free(dst[i]);
	free(want);
	kvt_close(c);
	return rc;
}

static inline uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A daemon started with sets and a client of it with model(16, F16) registered as *ns. */
static inline kvt_client_t *daemon_and_client(struct kvt_test_daemon *d, const char *const *sets,
                                              kvt_model_t *m, kvt_id_t *ns)
{
	kvt_client_t *c;
	assert_int_equal(kvt_test_daemon_start(d, sets), 0);
	assert_int_equal(kvt_connect(d->sock, &c), 0);
	*m = model(16, KVT_DTYPE_F16);
	assert_int_equal(kvt_namespace(c, m, ns), 0);
	return c;
}

/* A test that acts as a second uid (65534) needs root, to setuid: without it the test is
 * reported skipped, saying why, not passed having checked nothing. CI runs as root. */
static inline void skip_unless_root(void)
{
	if (geteuid() == 0)
		return;
	print_message("skipped: acting as a second uid (65534) needs root\n");
	skip();
}

/* One process puts salt's 64-chunk prefix; another (uid 65534 when nobody) reads all of it back,
 * byte for byte. */
static inline void put_then_get_elsewhere(const char *sock, uint32_t salt, bool nobody)
{
	pid_t a = fork();
	if (!a)
		_exit(put_prefix(sock, salt));
	assert_int_equal(child_wait(a), 0);
	pid_t b = nobody ? kvt_test_fork_as_nobody() : fork();
	if (!b)
		_exit(get_prefix(sock, salt, N_CHUNKS));
	assert_int_equal(child_wait(b), 0);
}
#endif
