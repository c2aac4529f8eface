/*
 * test_stress.c -- consistency under concurrent load (RELIABILITY L1, scaled to CI): several
 * client processes put, get, acquire-and-hold, prefetch, say they are done (kvt_done), keep
 * chunks for a moment (kvt_keep) and delete at random over a shared key space, through a small
 * host tier that evicts and demotes to nvme all the time, while one more process scribbles over
 * its own staging area as it puts (B6/S6). The oracle is the key itself: a chunk's bytes are a pure
 * function of its key, so every byte a reader is handed can be checked. Pass: 0 wrong bytes, 0
 * corruptions counted, every lease released at the end, the daemon alive. The consistency run keeps
 * the daemon's default host policy (auto, so conv at these chunk sizes); the kill run uses lru, as
 * the other tests do. The switch run does the same work through host, nvme and rocksdb while the
 * test switches every tier's policy and host's admission at run time, with two tenants under quotas
 * when it runs as root. The threaded run shares each client among 8 threads, and each thread
 * also replaces keys only it writes, so it can tell a stale version from the right one. The
 * memory run (F9) repeats the load and holds the daemon's anonymous RSS
 * under 256 MiB, and flat once warm.
 */
#include "testlib.h"
#include "ipc/client/simple.h"
#include "kvtier.h"
#include "ipc/proto.h"
#include "core/util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PREFIXES 48
#define DEPTH    8
#define WORKERS  4
#define OPS      1500 /* per worker; KVT_STRESS_OPS=N for longer runs (consistency, memory) */

static kvt_model_t model(int big)
{
	kvt_model_t m = {.name = "stress",
	                 .dtype = KVT_DTYPE_F16,
	                 .n_layers = big ? 4 : 1,
	                 .n_kv_heads = 8,
	                 .head_dim = 128,
	                 .tokens_per_chunk = 16};
	return m; /* 64 KiB or 256 KiB chunks */
}

static void prefix_keys(kvt_id_t ns, int p, kvt_id_t keys[DEPTH])
{
	uint32_t toks[DEPTH * 16];
	for (int i = 0; i < DEPTH * 16; i++)
		toks[i] = (uint32_t)(p * 7919 + i);
	kvt_chunk_keys(ns, toks, DEPTH * 16, 16, keys, DEPTH);
}

static uint64_t seed_of(kvt_id_t k)
{
	return k.w[0] ^ (k.w[1] << 1);
}

/* One client's view of the load: its namespaces, buffers and random state (rand_r, so each
 * thread of a process has its own). */
struct load {
	kvt_client_t *c;
	kvt_id_t ns[2];
	size_t cb[2];
	unsigned seed;
	uint8_t *want, *bufs[DEPTH];
};

static int load_open(struct load *L, kvt_client_t *c, unsigned seed)
{
	memset(L, 0, sizeof(*L));
	L->c = c;
	L->seed = seed;
	for (int b = 0; b < 2; b++) {
		kvt_model_t m = model(b);
		if (kvt_namespace(c, &m, &L->ns[b]))
			return -1;
		L->cb[b] = kvt_chunk_bytes(&m);
	}
	L->want = malloc(L->cb[1]);
	for (int i = 0; i < DEPTH; i++)
		L->bufs[i] = malloc(L->cb[1]);
	return 0;
}

static void load_close(struct load *L)
{
	for (int i = 0; i < DEPTH; i++)
		free(L->bufs[i]);
	free(L->want);
}

static int rnd(struct load *L, int n)
{
	return rand_r(&L->seed) % n;
}

/* One random operation on the shared key space.
 * @return : how many wrong bytes it saw (0), or 100+ on an API failure. */
static int load_op(struct load *L)
{
	kvt_client_t *c = L->c;
	int b = rnd(L, 2), p = rnd(L, PREFIXES), r = rnd(L, 100);
	size_t cb = L->cb[b];
	kvt_id_t ns = L->ns[b], keys[DEPTH];
	prefix_keys(ns, p, keys);
	size_t n = 1 + (size_t)rnd(L, DEPTH);
	int wrong = 0;
	if (r < 30) { /* put a prefix */
		const void *ch[DEPTH];
		for (size_t i = 0; i < n; i++) {
			kvt_test_fill(L->bufs[i], cb, seed_of(keys[i]));
			ch[i] = L->bufs[i];
		}
		int rc = kvt_put(c, ns, NULL, keys, n, ch, cb);
		if (rc < 0 && rc != -EAGAIN && rc != -ENOSPC)
			return 102;
	} else if (r < 70) { /* get and check every byte */
		void *dst[DEPTH];
		for (size_t i = 0; i < n; i++)
			dst[i] = L->bufs[i];
		int got = kvt_get(c, ns, keys, n, dst, cb);
		if (got < 0)
			return 103;
		for (int i = 0; i < got; i++) {
			kvt_test_fill(L->want, cb, seed_of(keys[i]));
			wrong += memcmp(L->want, L->bufs[i], cb) != 0;
		}
	} else if (r < 90) { /* acquire, hold a moment, copy, release, check */
		kvt_lease_t l[DEPTH];
		int got = kvt_acquire(c, ns, keys, n, l);
		if (got < 0)
			return 104;
		usleep((useconds_t)rnd(L, 2000));
		for (int i = 0; i < got; i++)
			memcpy(L->bufs[i], l[i].data, cb);
		if (kvt_release(c, l, (size_t)got) < 0)
			return 105;
		for (int i = 0; i < got; i++) {
			if (l[i].status)
				continue; /* revoked: the copy is discarded, as the rule says */
			kvt_test_fill(L->want, cb, seed_of(keys[i]));
			wrong += memcmp(L->want, L->bufs[i], cb) != 0;
		}
	} else if (r < 93) {
		if (kvt_prefetch(c, ns, keys, n))
			return 106;
	} else if (r < 95) { /* done with it: offered first, never wrong bytes */
		if (kvt_done(c, ns, keys, n))
			return 108;
	} else if (r < 96) { /* kept a moment: out of the policy, back when it ends */
		int rc = kvt_keep(c, ns, keys, n, (uint32_t)rnd(L, 50));
		if (rc < 0 && rc != -ENOSPC)
			return 109;
	} else {
		if (kvt_delete(c, ns, keys + rnd(L, DEPTH), 1) < 0)
			return 107;
	}
	return wrong;
}

/* Operations per worker: OPS, or $KVT_STRESS_OPS (1 to 10^9) for a run longer than CI's. */
static long ops_per_worker(void)
{
	return (long)kvt_test_env_in("KVT_STRESS_OPS", OPS, 1, 1000000000u);
}

/* @return : how many wrong bytes the worker saw (0), or 100+ on an API failure. */
static int worker(const char *sock, unsigned seed)
{
	kvt_client_t *c;
	if (kvt_connect(sock, &c))
		return 100;
	struct load L;
	if (load_open(&L, c, seed))
		return 101;
	int wrong = 0;
	for (long op = 0, ops = ops_per_worker(); op < ops; op++) {
		int rc = load_op(&L);
		if (rc >= 100) {
			wrong = rc;
			break;
		}
		wrong = wrong + rc > 99 ? 99 : wrong + rc;
	}
	load_close(&L);
	kvt_close(c);
	return wrong;
}

/* Puts under its own model while another thread of it keeps scribbling over the staging area
 * the daemon copies from: whatever it stores is under its own keys; others must not notice. */
static int scribbler(const char *sock)
{
	kvt_client_t *c;
	if (kvt_connect(sock, &c))
		return 100;
	kvt_model_t m = model(0);
	m.name = "scribbler";
	kvt_id_t ns, keys[DEPTH];
	if (kvt_namespace(c, &m, &ns))
		return 101;
	size_t cb = kvt_chunk_bytes(&m);
	for (long op = 0, ops = ops_per_worker() / 4; op < ops; op++) {
		void *bufs[DEPTH];
		int k = kvt_put_reserve(c, ns, DEPTH, bufs);
		if (k <= 0)
			return 102;
		prefix_keys(ns, (int)(op % PREFIXES), keys);
		for (int i = 0; i < k; i++)
			kvt_test_fill(bufs[i], cb, (uint64_t)op * 31 + (uint64_t)i);
		int rc = kvt_put_commit(c, ns, NULL, keys, (size_t)k);
		for (int i = 0; i < k; i++) /* scribble after the commit, too */
			memset(bufs[i], 0xee, cb);
		if (rc < 0 && rc != -EAGAIN && rc != -ENOSPC)
			return 103;
	}
	kvt_close(c);
	return 0;
}

static void test_stress_consistency(void **state)
{
	/* the daemon's default policy, auto: conv, since every chunk here is 64 KiB or more */
	const char *sets[] = {"host.bytes=6MiB",   "tiers.order=host,nvme", "nvme.bytes=48MiB",
	                      "demote.wait_ms=20", "host.policy=auto",      NULL};
	struct kvt_test_daemon d;
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	long rss0 = kvt_test_rss_anon_kib(d.pid);
	uint64_t t0 = kvt_now_ns();
	pid_t pids[WORKERS + 1];
	for (int w = 0; w <= WORKERS; w++) {
		pids[w] = fork();
		if (!pids[w])
			_exit(w == WORKERS ? scribbler(d.sock)
			                   : worker(d.sock, 1000u + (unsigned)w));
	}
	for (int w = 0; w <= WORKERS; w++) {
		int st;
		assert_int_equal(waitpid(pids[w], &st, 0), pids[w]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0); /* 0 wrong bytes, no API failure */
	}
	assert_int_equal(kill(d.pid, 0), 0);
	print_message("%d workers x %ld operations in %.1f s (%lld evictions, %lld demoted); the "
	              "daemon's anonymous RSS %ld KiB before, %ld KiB after\n",
	              WORKERS, ops_per_worker(), (double)(kvt_now_ns() - t0) / 1e9,
	              kvt_test_stat(&d, "evictions"), kvt_test_stat(&d, "demoted"), rss0,
	              kvt_test_rss_anon_kib(d.pid));
	assert_int_equal(kvt_test_stat(&d, "corruptions"), 0);
	assert_int_equal(kvt_test_stat_wait(&d, "leases", 0, 0), 0);
	assert_true(kvt_test_stat(&d, "evictions") > 0);
	assert_true(kvt_test_stat(&d, "demoted") > 0);
	/* every keep (at most 49 ms, some of chunks only in nvme) has ended, its bytes returned */
	assert_true(kvt_test_stat(&d, "keeps") > 0);
	assert_int_equal(kvt_test_stat_wait(&d, "kept_chunks", 0, 0), 0);
	assert_int_equal(kvt_test_stat(&d, "kept_bytes"), 0);
	assert_int_equal(kvt_test_stat(&d, "keep_pending"), 0);
	char out[256];
	assert_int_equal(kvt_test_cli(&d, "policy get host", out, sizeof(out)), 0);
	assert_string_equal(out,
	                    "host conv (auto) walk=1 leaf_first=1 horizon=1 orphan=0.5 strict=1\n");
	kvt_test_check_books(&d, 1);
	kvt_test_daemon_destroy(&d);
}

/*
 * The threaded run (L1's "8 threads a client"): THREADS threads share one client. Besides the
 * shared load, each thread owns PRIVATE keys no one else touches and replaces them over and
 * over: delete, then put the next version, whose bytes differ. Since only the owner writes a
 * private key, the oracle is exact under any concurrency: a hit must carry the version last
 * put; an older version is a deleted chunk come back (a stale read), anything else a wrong byte.
 * Threads of other processes read those keys too: the owner publishes, in memory every process
 * shares, how many versions it has deleted (after kvt_delete returns) and the last version it
 * began to put (before kvt_put), so a reader from another client knows which versions a hit
 * may carry: from the first not yet deleted when its read began to the last begun when it ended.
 */
static void reads_back(const char *sock);

#define THREADS   8
#define T_OPS     300 /* per thread; KVT_STRESS_THREAD_OPS=N for longer runs */
#define PRIVATE   4
#define PRIV_KEY  100000 /* private prefixes start here, far from the shared ones */
#define MAX_PROCS 64     /* KVT_STRESS_PROCS=N (2 to 64) processes instead of WORKERS */

static int n_procs = WORKERS; /* and calls a thread: set before the fork */
static long thread_ops = T_OPS;
#define SLOTS (n_procs * THREADS * PRIVATE)

/* What an owner tells every process about one private key (MAP_SHARED, made before the fork). */
struct published {
	uint32_t gone;  /* versions below this one are deleted (stored after kvt_delete returns) */
	uint32_t begun; /* the last version whose kvt_put has begun (stored before it) */
};
static struct published *published;

struct tload {
	struct load L;
	int id;
	uint32_t version[PRIVATE];
	int rc, stale, priv_hits, found_deleted, replaces;
	int foreign_hits, foreign_stale;
};

static uint64_t version_seed(kvt_id_t k, uint32_t v)
{
	return seed_of(k) + (uint64_t)v * 0x9e3779b97f4a7c15ull;
}

/* @return : 0 if a hit's bytes are a version of key k in [lo, hi]; else 1 (stale: an older
 * version) or 2. */
static int check_version(struct tload *t, kvt_id_t k, uint32_t lo, uint32_t hi, const void *got)
{
	size_t cb = t->L.cb[0];
	for (uint32_t v = lo; v <= hi; v++) {
		kvt_test_fill(t->L.want, cb, version_seed(k, v));
		if (!memcmp(t->L.want, got, cb))
			return 0;
	}
	for (uint32_t old = 0; old < lo; old++) {
		kvt_test_fill(t->L.want, cb, version_seed(k, old));
		if (!memcmp(t->L.want, got, cb))
			return 1;
	}
	return 2;
}

/* Reads a private key of a thread in another process. @return : as private_op(). */
static int foreign_read(struct tload *t)
{
	struct load *L = &t->L;
	int slot;
	do
		slot = rnd(L, SLOTS);
	while (slot / (THREADS * PRIVATE) == t->id / THREADS);
	kvt_id_t keys[DEPTH];
	prefix_keys(L->ns[0], PRIV_KEY + slot, keys);
	struct published *pub = &published[slot];
	uint32_t lo = __atomic_load_n(&pub->gone, __ATOMIC_SEQ_CST);
	void *dst = L->bufs[0];
	int got = kvt_get(L->c, L->ns[0], keys, 1, &dst, L->cb[0]);
	if (got < 0)
		return 118;
	uint32_t hi = __atomic_load_n(&pub->begun, __ATOMIC_SEQ_CST);
	if (!got)
		return 0;
	int bad = check_version(t, keys[0], lo, hi, L->bufs[0]);
	t->foreign_hits++;
	t->foreign_stale += bad == 1;
	return bad == 2;
}

/* One operation on one of the thread's own keys. @return : 0, or 100+ on an API failure. */
static int private_op(struct tload *t)
{
	struct load *L = &t->L;
	int s = rnd(L, PRIVATE), r = rnd(L, 100);
	if (r >= 85)
		return foreign_read(t);
	kvt_id_t keys[DEPTH], k;
	struct published *pub = &published[t->id * PRIVATE + s];
	prefix_keys(L->ns[0], PRIV_KEY + t->id * PRIVATE + s, keys);
	k = keys[0];
	uint32_t v = t->version[s];
	int bad = 0, got;
	if (r < 40) { /* replace: delete, then put the next version; at times with the key's
		       * promotion from a lower tier under way */
		if (r < 15 && kvt_prefetch(L->c, L->ns[0], &k, 1))
			return 115;
		if (kvt_delete(L->c, L->ns[0], &k, 1) < 0)
			return 110;
		__atomic_store_n(&pub->gone, v + 1, __ATOMIC_SEQ_CST);
		int found = kvt_lookup(L->c, L->ns[0], &k, 1); /* no one else puts it */
		if (found < 0)
			return 117;
		t->found_deleted += found;
		t->version[s] = ++v;
		t->replaces++;
		kvt_test_fill(L->bufs[0], L->cb[0], version_seed(k, v));
		const void *ch = L->bufs[0];
		__atomic_store_n(&pub->begun, v, __ATOMIC_SEQ_CST);
		int rc = kvt_put(L->c, L->ns[0], NULL, &k, 1, &ch, L->cb[0]);
		if (rc < 0 && rc != -EAGAIN && rc != -ENOSPC)
			return 111;
		return 0;
	}
	if (r < 70) {
		void *dst = L->bufs[0];
		got = kvt_get(L->c, L->ns[0], &k, 1, &dst, L->cb[0]);
		if (got < 0)
			return 112;
		if (got)
			bad = check_version(t, k, v, v, L->bufs[0]);
	} else {
		kvt_lease_t l;
		got = kvt_acquire(L->c, L->ns[0], &k, 1, &l);
		if (got < 0)
			return 113;
		if (got) {
			memcpy(L->bufs[0], l.data, L->cb[0]);
			if (kvt_release(L->c, &l, 1) < 0)
				return 114;
			if (!l.status)
				bad = check_version(t, k, v, v, L->bufs[0]);
		}
	}
	t->priv_hits += got > 0;
	t->stale += bad == 1;
	return bad == 2;
}

static void *thread_main(void *arg)
{
	struct tload *t = arg;
	for (long op = 0; op < thread_ops && t->rc < 100; op++) {
		int rc = rnd(&t->L, 3) ? load_op(&t->L) : private_op(t);
		t->rc = rc >= 100 ? rc : t->rc + rc;
	}
	return NULL;
}

/* @return : as worker(); 98 when a stale version was read, 95 when one was read by another
 * client, 97 when no private key ever hit (its owner's or another's), 96 when a deleted key was
 * still found. */
static int threaded_worker(const char *sock, int proc)
{
	kvt_client_t *c;
	if (kvt_connect(sock, &c))
		return 100;
	struct tload t[THREADS];
	pthread_t tid[THREADS];
	int rc = 0, stale = 0, hits = 0, found_deleted = 0, replaces = 0, fhits = 0, fstale = 0;
	for (int i = 0; i < THREADS; i++) {
		if (load_open(&t[i].L, c, 7000u + (unsigned)(proc * THREADS + i)))
			return 101;
		t[i].id = proc * THREADS + i;
		memset(t[i].version, 0, sizeof(t[i].version));
		t[i].rc = t[i].stale = t[i].priv_hits = t[i].found_deleted = t[i].replaces = 0;
		t[i].foreign_hits = t[i].foreign_stale = 0;
	}
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&tid[i], NULL, thread_main, &t[i]))
			return 116;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(tid[i], NULL);
		rc = t[i].rc > rc ? t[i].rc : rc; /* 100+ (an API failure) wins */
		stale += t[i].stale;
		hits += t[i].priv_hits;
		found_deleted += t[i].found_deleted;
		replaces += t[i].replaces;
		fhits += t[i].foreign_hits;
		fstale += t[i].foreign_stale;
		load_close(&t[i].L);
	}
	kvt_close(c);
	printf("process %d: %d threads, %d replaces and %d hits of private keys, %d hits of other "
	       "processes' keys\n",
	       proc, THREADS, replaces, hits, fhits);
	fflush(stdout); /* the process ends with _exit */
	if (rc)
		return rc > 255 ? 99 : rc;
	if (stale)
		return 98;
	if (fstale)
		return 95;
	if (found_deleted)
		return 96;
	return hits && fhits ? 0 : 97;
}

static void test_stress_threads(void **state)
{
	const char *sets[] = {"host.bytes=6MiB",   "tiers.order=host,nvme,rocksdb",
	                      "nvme.bytes=16MiB",  "rocksdb.bytes=64MiB",
	                      "demote.wait_ms=20", NULL};
	struct kvt_test_daemon d;
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	/* at least 2 processes: a thread reads the private keys of another process */
	n_procs = (int)kvt_test_env_in("KVT_STRESS_PROCS", WORKERS, 2, MAX_PROCS);
	thread_ops = (long)kvt_test_env_in("KVT_STRESS_THREAD_OPS", T_OPS, 1, 100000000u);
	uint64_t t0 = kvt_now_ns();
	published = mmap(NULL, SLOTS * sizeof(*published), PROT_READ | PROT_WRITE,
	                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(published != MAP_FAILED); /* zero: nothing deleted, version 0 begun */
	pid_t pids[MAX_PROCS];
	for (int w = 0; w < n_procs; w++) {
		pids[w] = fork();
		if (!pids[w])
			_exit(threaded_worker(d.sock, w));
	}
	for (int w = 0; w < n_procs; w++) {
		int st;
		assert_int_equal(waitpid(pids[w], &st, 0), pids[w]);
		assert_true(WIFEXITED(st));
		if (WEXITSTATUS(st))
			fail_msg("process %d: %d (wrong bytes; 98 a stale version, 95 one read by "
			         "another client; 97 no private hit; 96 a deleted key found; 66 a "
			         "ThreadSanitizer report; 100+ an API failure)",
			         w, WEXITSTATUS(st));
	}
	assert_int_equal(kill(d.pid, 0), 0);
	assert_int_equal(kvt_test_stat(&d, "corruptions"), 0);
	assert_int_equal(kvt_test_stat_wait(&d, "leases", 0, 0), 0);
	assert_true(kvt_test_stat(&d, "evictions") > 0);
	assert_true(kvt_test_stat(&d, "demoted") > 0);
	print_message("%d processes x %d threads in %.1f s; %lld evictions, %lld demoted\n",
	              n_procs, THREADS, (double)(kvt_now_ns() - t0) / 1e9,
	              kvt_test_stat(&d, "evictions"), kvt_test_stat(&d, "demoted"));
	reads_back(d.sock);
	munmap(published, SLOTS * sizeof(*published));
	kvt_test_check_books(&d, 1);
	kvt_test_daemon_destroy(&d);
}

/* The daemon's anonymous resident memory in KiB (the host pool is shared memory, not in it). */
static long rss_anon_kib(pid_t pid)
{
	long kib = kvt_test_rss_anon_kib(pid);
	assert_true(kib >= 0);
	return kib;
}

/* One round of the consistency load: WORKERS clients, each connecting, working, closing. */
static void load_round(const char *sock, unsigned seed)
{
	pid_t pids[WORKERS];
	for (int w = 0; w < WORKERS; w++)
		if (!(pids[w] = fork()))
			_exit(worker(sock, seed + (unsigned)w));
	for (int w = 0; w < WORKERS; w++) {
		int st;
		assert_int_equal(waitpid(pids[w], &st, 0), pids[w]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

/*
 * Memory under steady load (RELIABILITY F9: rounds in CI, KVT_STRESS_MEMORY_S=1800 for an
 * hour of the two runs by hand; in a memory cgroup where one can be made): the same
 * load over the same keys, round after round. The daemon's anonymous RSS (the host pool is shared
 * memory and not in it) stays under 256 MiB. With host and nvme it must not grow once warm:
 * it is flat to 40 KiB here (3.9 MiB), and 96 KiB of growth over 8 rounds fails the test (a
 * 64-byte leak planted in every reply grew it by about 180 KiB). With RocksDB below (its
 * memtables swing between about 75 and 100 MiB as they fill and flush) only the bound is held.
 */
/* Under ASan (and TSan) the daemon's shadow memory and quarantine are anonymous memory that
 * grows by design: the rounds run (every byte still checked, the daemon's memory errors caught),
 * and the RSS is printed but not held to anything. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_MEANS_SOMETHING false
#else
#define RSS_MEANS_SOMETHING true
#endif

/* A memory cgroup of the daemon's own, under the test's (cgroup v1's memory controller, or v2's
 * memory.max), with a limit: what F9 runs the daemon in. */
struct memcg {
	char dir[600];
	bool v2;
};

static long long read_ll(const char *dir, const char *file, const char *key)
{
	char path[700], buf[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (kvt_test_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	const char *p = key ? strstr(buf, key) : buf;
	return p ? strtoll(p + (key ? strlen(key) : 0), NULL, 10) : -1;
}

static int write_str(const char *dir, const char *file, const char *v)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	int rc = fputs(v, f) < 0 ? -EIO : 0;
	return fclose(f) || rc ? -EIO : 0;
}

/* Moves pid into a new cgroup under the test's own with a memory limit of limit bytes.
 * @return : 0, or -errno when there is no memory cgroup this process may write. */
static int memcg_open(struct memcg *m, pid_t pid, uint64_t limit)
{
	char self[4096], *line, *save = NULL;
	if (kvt_test_read_file("/proc/self/cgroup", self, sizeof(self)) < 0)
		return -ENOENT;
	m->dir[0] = 0;
	for (line = strtok_r(self, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *v1 = strstr(line, ":memory:/");
		if (v1)
			snprintf(m->dir, sizeof(m->dir), "/sys/fs/cgroup/memory%s/kvt-test-%d",
			         v1 + 8, (int)getpid());
		else if (!strncmp(line, "0::/", 4) && !m->dir[0])
			snprintf(m->dir, sizeof(m->dir), "/sys/fs/cgroup%s/kvt-test-%d", line + 3,
			         (int)getpid());
	}
	m->v2 = !strstr(m->dir, "/sys/fs/cgroup/memory");
	if (!m->dir[0] || mkdir(m->dir, 0755))
		return -errno ? -errno : -ENOENT;
	char v[32];
	snprintf(v, sizeof(v), "%llu", (unsigned long long)limit);
	snprintf(self, sizeof(self), "%d", (int)pid);
	int rc = write_str(m->dir, m->v2 ? "memory.max" : "memory.limit_in_bytes", v);
	if (!rc)
		rc = write_str(m->dir, "cgroup.procs", self);
	if (rc)
		rmdir(m->dir);
	return rc;
}

/* Times the daemon met its limit (v1's failcnt, v2's max and oom_kill events). */
static long long memcg_hits(const struct memcg *m)
{
	if (!m->v2)
		return read_ll(m->dir, "memory.failcnt", NULL);
	long long max = read_ll(m->dir, "memory.events", "max "),
	          oom = read_ll(m->dir, "memory.events", "oom_kill ");
	return max < 0 || oom < 0 ? -1 : max + oom;
}

/* Seconds each memory run goes on for past its rounds: 0, or $KVT_STRESS_MEMORY_S (up to a
 * day) for F9's hour by hand. */
static uint64_t memory_seconds(void)
{
	return kvt_test_env_in("KVT_STRESS_MEMORY_S", 0, 0, 86400u);
}

static void memory_rounds(const char *const *sets, int rounds, long max_growth_kib)
{
	struct kvt_test_daemon d;
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	/* F9: in a memory cgroup of host.bytes (the shared pool the daemon writes) + 512 MiB */
	struct memcg cg;
	int cg_rc =
	    RSS_MEANS_SOMETHING ? memcg_open(&cg, d.pid, (16ull << 20) + (512ull << 20)) : -ENOTSUP;
	if (cg_rc && RSS_MEANS_SOMETHING)
		print_message("no memory cgroup to write (%s): the daemon runs without a limit\n",
		              strerror(-cg_rc));
	long warm = 0, peak = 0;
	uint64_t t0 = kvt_now_ns(), until = t0 + memory_seconds() * 1000000000ull;
	for (int r = 0; r < rounds || kvt_now_ns() < until; r++) {
		load_round(d.sock, 5000u + 10u * (unsigned)r);
		long rss = rss_anon_kib(d.pid);
		if (r < rounds || r % 100 == 0)
			print_message("%s, round %d (%.0f s): RssAnon %ld KiB\n", sets[1], r,
			              (double)(kvt_now_ns() - t0) / 1e9, rss);
		assert_true(rss < 256 * 1024 || !RSS_MEANS_SOMETHING);
		if (r == 1)
			warm = rss;
		if (r > 1 && rss > peak)
			peak = rss;
	}
	print_message("%s: RssAnon %ld KiB after round 1, at most %ld KiB after it\n", sets[1],
	              warm, peak);
	if (RSS_MEANS_SOMETHING && max_growth_kib >= 0 && peak - warm > max_growth_kib)
		fail_msg("%s: RssAnon grew by %ld KiB after round 1 (%ld KiB then)", sets[1],
		         peak - warm, warm);
	assert_true(kvt_test_stat(&d, "demoted") > 0);
	assert_int_equal(kvt_test_stat(&d, "corruptions"), 0);
	if (!cg_rc) { /* never at its limit, so never OOM-killed */
		long long charged =
		    read_ll(cg.dir, cg.v2 ? "memory.peak" : "memory.max_usage_in_bytes", NULL);
		print_message(
		    "%s: in a cgroup limited to 528 MiB: peak %lld KiB charged, limit met "
		    "%lld times\n",
		    sets[1], charged / 1024, memcg_hits(&cg));
		assert_int_equal(kill(d.pid, 0), 0);
		assert_int_equal(memcg_hits(&cg), 0);
	}
	kvt_test_check_books(&d, 1);
	kvt_test_daemon_destroy(&d);
	if (!cg_rc)
		assert_int_equal(rmdir(cg.dir), 0); /* the daemon gone, the cgroup is empty */
}

static void test_stress_memory_steady(void **state)
{
	const char *two[] = {"host.bytes=16MiB", "tiers.order=host,nvme", "nvme.bytes=16MiB",
	                     "demote.wait_ms=20", NULL};
	const char *three[] = {"host.bytes=16MiB",  "tiers.order=host,nvme,rocksdb",
	                       "nvme.bytes=16MiB",  "rocksdb.bytes=64MiB",
	                       "demote.wait_ms=20", NULL};
	memory_rounds(two, RSS_MEANS_SOMETHING ? 10 : 3, 96); /* under ASan: the load alone */
	memory_rounds(three, RSS_MEANS_SOMETHING ? 4 : 2, -1);
}

/* One more worker, on its own: every byte it reads is right, and no API call fails. */
static void reads_back(const char *sock)
{
	pid_t check = fork();
	if (!check)
		_exit(worker(sock, 99));
	int st;
	assert_int_equal(waitpid(check, &st, 0), check);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The watchdog's report, in memory it shares with the test. */
struct watch {
	_Atomic int stop;
	_Atomic long calls, late; /* answered; answered after more than 1 s (or not at all) */
	_Atomic long max_us;
};

static long now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000L + t.tv_nsec / 1000;
}

/* One more client that keeps asking (a lookup, a get of the same chunks, a ping) while the
 * others are killed, and times every answer: the daemon must never leave it waiting past 1 s
 * (RELIABILITY F3's watchdog). */
static int watchdog(const char *sock, struct watch *w)
{
	kvt_client_t *c;
	struct load L;
	if (kvt_connect(sock, &c) || load_open(&L, c, 4242))
		return 100;
	kvt_id_t keys[DEPTH];
	prefix_keys(L.ns[0], 0, keys);
	void *dst[DEPTH];
	for (int i = 0; i < DEPTH; i++)
		dst[i] = L.bufs[i];
	while (!atomic_load(&w->stop)) {
		long t0 = now_us();
		int k = (int)(atomic_load(&w->calls) % 3);
		int rc = k == 0   ? kvt_lookup(c, L.ns[0], keys, DEPTH)
		         : k == 1 ? kvt_get(c, L.ns[0], keys, DEPTH, dst, L.cb[0])
		                  : kvt__client_simple(c, KVT_MSG_PING, NULL, NULL, 0);
		long us = now_us() - t0;
		if (rc < 0 || us > 1000000)
			atomic_fetch_add(&w->late, 1);
		if (us > atomic_load(&w->max_us))
			atomic_store(&w->max_us, us);
		atomic_fetch_add(&w->calls, 1);
	}
	load_close(&L);
	kvt_close(c);
	return 0;
}

/* Kills of random_kills: 10^4 as RELIABILITY F3 asks (~45 s here), 1,000 under a sanitizer or
 * valgrind, or $KVT_STRESS_KILLS (5 to 10^7, in rounds of PER_ROUND). */
static int kills_wanted(int per_round)
{
	uint64_t n = kvt_test_env_in("KVT_STRESS_KILLS", kvt_test_slowed() ? 1000 : 10000,
	                             (uint64_t)per_round, 10000000u);
	return (int)(n / (uint64_t)per_round * (uint64_t)per_round);
}

/* Clients killed at random instants in the middle of puts, holds and gets (RELIABILITY F3:
 * 10^4 kills): the daemon answers throughout (a watchdog client times every answer: none past
 * 1 s), every lease they held is released, its books agree with its index (kvtier check, every
 * 50 rounds while the killing goes on), and the chunks the survivors read are still exactly
 * right. A kill lands anywhere from before the client's hello (0 ms) to well into its calls. */
static void test_stress_random_kills(void **state)
{
	enum { PER_ROUND = 5 };
	const int rounds = kills_wanted(PER_ROUND) / PER_ROUND;
	const char *sets[] = {"host.bytes=6MiB", "tiers.order=host,nvme", "nvme.bytes=48MiB",
	                      "host.policy=lru", NULL};
	struct kvt_test_daemon d;
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	struct watch *w =
	    mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(w != MAP_FAILED);
	memset(w, 0, sizeof(*w));
	pid_t dog = fork();
	if (!dog)
		_exit(watchdog(d.sock, w));
	srand(7);
	int finished = 0;
	for (int round = 0; round < rounds; round++) {
		pid_t v[PER_ROUND];
		for (int k = 0; k < PER_ROUND; k++) {
			v[k] = fork();
			if (!v[k])
				_exit(worker(d.sock, 5000u + (unsigned)(round * PER_ROUND + k)));
		}
		for (int k = 0; k < PER_ROUND; k++) { /* each at its own instant, 0-20 ms in */
			usleep((useconds_t)(rand() % (20000 / PER_ROUND)));
			kill(v[k], SIGKILL);
		}
		for (int k = 0; k < PER_ROUND; k++) {
			int st;
			waitpid(v[k], &st, 0);
			/* killed, or finished cleanly: never a wrong byte */
			assert_true(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) == 0));
			finished += WIFEXITED(st);
		}
		assert_int_equal(kill(d.pid, 0), 0);
		if (round % 50 == 49)
			kvt_test_check_books(&d, 0);
	}
	atomic_store(&w->stop, 1);
	int st;
	assert_int_equal(waitpid(dog, &st, 0), dog);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	print_message("%d kills (%d finished first); the watchdog's %ld calls: %ld late, slowest "
	              "%.1f ms\n",
	              rounds * PER_ROUND - finished, finished, atomic_load(&w->calls),
	              atomic_load(&w->late), (double)atomic_load(&w->max_us) / 1000);
	assert_int_equal(atomic_load(&w->late), 0);
	assert_true(atomic_load(&w->calls) > rounds);
	assert_true(finished * 10 < rounds * PER_ROUND); /* under a tenth (with 5 kills too) */
	munmap(w, sizeof(*w));
	assert_int_equal(kvt_test_stat_wait(&d, "leases", 0, 0), 0);
	/* only the stats probe itself, once the daemon has read the killed clients' hang-ups (one
	 * holding no lease may still count for a moment: a CI run read 2) */
	assert_int_equal(kvt_test_stat_wait(&d, "clients", 1, 0), 1);
	kvt_test_check_books(&d, 1);
	reads_back(d.sock);
	kvt_test_daemon_destroy(&d);
}

/* @return : how many chunks of every prefix (both models, tenant of c) lead from the root. */
static int present(kvt_client_t *c)
{
	int n = 0;
	for (int b = 0; b < 2; b++) {
		kvt_model_t m = model(b);
		kvt_id_t ns, keys[DEPTH];
		if (kvt_namespace(c, &m, &ns))
			return -1;
		for (int p = 0; p < PREFIXES; p++) {
			prefix_keys(ns, p, keys);
			n += kvt_lookup(c, ns, keys, DEPTH);
		}
	}
	return n;
}

enum { HOT = 8, HITS = 2000 };

/* p99 of HITS gets of the HOT chunks of 256 KiB, round robin; each must be a hit of its bytes. */
static double hot_p99(kvt_client_t *c, kvt_id_t ns, size_t cb, uint8_t *got, uint8_t *want)
{
	static double ms[HITS];
	for (int i = 0; i < HITS; i++) {
		kvt_id_t key = {{(uint64_t)(i % HOT), 3131}};
		void *dst[1] = {got};
		double t0 = kvt_test_ms_now();
		int rc = kvt_get(c, ns, &key, 1, dst, cb);
		ms[i] = kvt_test_ms_now() - t0;
		kvt_test_fill(want, cb, (uint64_t)(i % HOT));
		if (rc != 1 || memcmp(got, want, cb))
			fail_msg("hot chunk %d: %s", i % HOT, rc == 1 ? "wrong bytes" : "a miss");
	}
	kvt_test_sort_ms(ms, HITS);
	return ms[HITS * 99 / 100];
}

/* RELIABILITY L3, eviction churn: a writer puts chunks of 256 KiB through a 64 MiB host at 2x
 * its size every 5 s (12 times the catalogue's rate) while another client reads 8 hot chunks.
 * The hot reads' p99 (the median of the rounds of 2,000 reads during the churn) may not pass 2x
 * its idle baseline, measured first in the same daemon (plus 1 ms, 3 ms in a sanitizing build,
 * as test_robust's churn allows: a stall on eviction would show far more; under ASan a hit
 * waiting behind one 256 KiB put read 1.58 ms against 0.15 idle on an idle machine, 2026-12-03);
 * the host's usage never passes its capacity;
 * every hot read is a hit of the right bytes (they are read all the while, so LRU keeps them);
 * and `kvtier check` then finds every lease on a chunk with a host copy (no pinned chunk was
 * evicted) and the books whole. */
/* Seconds of churn: 6, or $KVT_STRESS_CHURN_S (1 to 86,400) for a run longer than CI's. */
static int churn_seconds(void)
{
	return (int)kvt_test_env_in("KVT_STRESS_CHURN_S", 6, 1, 86400u);
}

static void test_stress_churn_hit_latency(void **state)
{
	const char *sets[] = {"host.bytes=64MiB", NULL};
	struct kvt_test_daemon d;
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	kvt_model_t m = model(1);
	size_t cb = kvt_chunk_bytes(&m);
	kvt_client_t *c;
	kvt_id_t ns;
	assert_int_equal(kvt_connect(d.sock, &c), 0);
	assert_int_equal(kvt_namespace(c, &m, &ns), 0);
	uint8_t *got = malloc(cb), *want = malloc(cb);
	for (uint64_t k = 0; k < HOT; k++) {
		kvt_id_t key = {{k, 3131}};
		const void *src[1] = {want};
		kvt_test_fill(want, cb, k);
		assert_int_equal(kvt_put(c, ns, NULL, &key, 1, src, cb), 1);
	}
	double idle = hot_p99(c, ns, cb, got, want);
	volatile int *stop =
	    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(stop != MAP_FAILED);
	pid_t w = fork();
	if (!w) { /* the writer: 2 x 64 MiB of new chunks every 5 s, paced */
		kvt_client_t *wc;
		kvt_id_t wns;
		if (kvt_connect(d.sock, &wc) || kvt_namespace(wc, &m, &wns))
			_exit(1);
		uint8_t *buf = malloc(cb);
		const double every_ms = 5000.0 / (2.0 * (64 << 20) / (double)cb);
		double next = kvt_test_ms_now();
		for (uint64_t i = 0; !__atomic_load_n(stop, __ATOMIC_ACQUIRE); i++) {
			kvt_id_t key = {{i, 4141}};
			const void *src[1] = {buf};
			kvt_test_fill(buf, 64, i);
			if (kvt_put(wc, wns, NULL, &key, 1, src, cb) != 1)
				_exit(2);
			next += every_ms;
			double now = kvt_test_ms_now();
			if (next > now)
				usleep((useconds_t)((next - now) * 1000));
		}
		_exit(0);
	}
	int seconds = churn_seconds(), rounds = 0, most = 256 * (seconds / 6 + 1);
	double *p99s = malloc(sizeof(*p99s) * (size_t)most);
	assert_non_null(p99s);
	long long cap = kvt_test_stat(&d, "capacity_bytes"), over = 0;
	for (double end = kvt_test_ms_now() + 1000.0 * seconds;
	     kvt_test_ms_now() < end && rounds < most;) { /* 6 s of churn in CI */
		p99s[rounds++] = hot_p99(c, ns, cb, got, want);
		over += kvt_test_stat(&d, "used_bytes") > cap;
	}
	kvt_test_sort_ms(p99s, (size_t)rounds);
	/* the median, the lower middle of an even count: under TSan only 2 rounds fit in the 6 s,
	 * and rounds / 2 was then the worse of the two */
	double typical = p99s[(rounds - 1) / 2], worst = p99s[rounds - 1];
	__atomic_store_n(stop, 1, __ATOMIC_RELEASE);
	int st;
	assert_int_equal(waitpid(w, &st, 0), w);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	long long ev = kvt_test_stat(&d, "evictions");
	print_message(
	    "host hits of 256 KiB, p99 over %d gets: %.3f ms idle; during %d s of churn "
	    "(%lld chunks evicted) %.3f ms in the median of %d rounds (%.2fx), %.3f ms in "
	    "the worst; usage over capacity %lld times\n",
	    HITS, idle, seconds, ev, typical, rounds, typical / idle, worst, over);
	assert_true(ev > 256); /* the churn went through the whole host at least once */
	assert_int_equal(over, 0);
	assert_true(typical <= 2 * idle + (kvt_test_slowed() ? 3.0 : 1.0));
	assert_int_equal(kvt_test_stat(&d, "victims_refused"), 0); /* no leased chunk proposed */
	kvt_test_check_books(&d, 0);
	munmap((void *)stop, 4096);
	free(p99s);
	free(got);
	free(want);
	kvt_close(c);
	kvt_test_daemon_destroy(&d);
}

/* The workers of the consistency run, through all three tiers, while every tier's policy and
 * host's admission are switched at run time over and over (and, as root, half of the workers
 * are another tenant, so host's victims go through the quotas). Pass: every switch answers 0,
 * the workers see 0 wrong bytes and no API failure, no lease is left, and once the daemon is
 * quiet a round of switches changes no chunk's presence. */
static void test_stress_policy_switches(void **state)
{
	bool root = geteuid() == 0;
	const char *sets[] = {"host.bytes=6MiB",
	                      "tiers.order=host,nvme,rocksdb",
	                      "nvme.bytes=16MiB",
	                      "rocksdb.bytes=64MiB",
	                      "demote.wait_ms=20",
	                      "host.policy=lru",
	                      root ? "tenant.quota=0=2MiB/6MiB,65534=1MiB/4MiB" : NULL,
	                      NULL};
	static const char *const host[] = {"lru",       "arc admit=tinylfu",
	                                   "s3fifo",    "sieve admit=second_touch",
	                                   "lfu",       "prefix",
	                                   "gdsf",      "lhd admit=tinylfu",
	                                   "hindsight", "conv",
	                                   "wtinylfu",  "conv admit=second_touch",
	                                   "auto",      "s3fifo small_ratio=0.2"};
	static const char *const lower[] = {"rocksdb lfu", "nvme clock",  "rocksdb conv",
	                                    "nvme fifo",   "rocksdb arc", "rocksdb s3fifo"};
	struct kvt_test_daemon d;
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	kvt_test_open_to_others(&d); /* the other tenant's workers connect as nobody */
	pid_t pids[WORKERS];
	for (int w = 0; w < WORKERS; w++) {
		pids[w] = fork();
		if (!pids[w]) {
			if (root && w % 2 && (setgid(65534) || setuid(65534)))
				_exit(30);
			_exit(worker(d.sock, 3000u + (unsigned)w));
		}
	}
	kvt_client_t *c;
	assert_int_equal(kvt_connect(d.sock, &c), 0);
	char cmd[96], out[512];
	int switches = 0, left = WORKERS;
	while (left) {
		const char *h = host[switches % (sizeof(host) / sizeof(host[0]))],
		           *l = lower[switches % (sizeof(lower) / sizeof(lower[0]))];
		snprintf(cmd, sizeof(cmd), "set host %s", h);
		if (kvt__client_simple(c, KVT_MSG_POLICY, cmd, out, sizeof(out)))
			fail_msg("policy %s: %s", cmd, out);
		snprintf(cmd, sizeof(cmd), "set %s", l);
		if (kvt__client_simple(c, KVT_MSG_POLICY, cmd, out, sizeof(out)))
			fail_msg("policy %s: %s", cmd, out);
		switches++;
		usleep(20000);
		for (int w = 0; w < WORKERS; w++) {
			int st;
			if (pids[w] > 0 && waitpid(pids[w], &st, WNOHANG) == pids[w]) {
				pids[w] = 0;
				left--;
				assert_true(WIFEXITED(st));
				if (WEXITSTATUS(st))
					fail_msg(
					    "worker %d: %d (wrong bytes, or 100+: an API failure)",
					    w, WEXITSTATUS(st));
			}
		}
	}
	print_message("%d rounds of switches while the workers ran\n", switches);
	assert_true(switches >= 10);
	assert_int_equal(kill(d.pid, 0), 0);
	assert_int_equal(kvt_test_stat(&d, "corruptions"), 0);
	assert_int_equal(kvt_test_stat_wait(&d, "leases", 0, 0), 0);
	assert_true(kvt_test_stat(&d, "evictions") > 0);
	assert_true(kvt_test_stat(&d, "demoted") > 0);

	/* quiet now: a switch of each tier keeps every chunk where it was */
	assert_int_equal(kvt_test_stat_wait(&d, "dirty_bytes", 0, 0), 0);
	/* and no demotion failed: a chunk deleted while its demotion was pushed back (-EAGAIN) is
	 * not one (it used to count, with a warning) */
	assert_int_equal(kvt_test_stat(&d, "demote_failed"), 0);
	int before = present(c);
	assert_true(before > 0);
	for (size_t k = 0; k < sizeof(host) / sizeof(host[0]); k++) {
		snprintf(cmd, sizeof(cmd), "set host %s", host[k]);
		assert_int_equal(kvt__client_simple(c, KVT_MSG_POLICY, cmd, out, sizeof(out)), 0);
		snprintf(cmd, sizeof(cmd), "set %s", lower[k % (sizeof(lower) / sizeof(lower[0]))]);
		assert_int_equal(kvt__client_simple(c, KVT_MSG_POLICY, cmd, out, sizeof(out)), 0);
		assert_int_equal(present(c), before);
	}
	kvt_close(c);
	reads_back(d.sock); /* and what is left reads back right */
	kvt_test_check_books(&d, 1);
	kvt_test_daemon_destroy(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stress_consistency),
	    cmocka_unit_test(test_stress_threads),
	    cmocka_unit_test(test_stress_random_kills),
	    cmocka_unit_test(test_stress_policy_switches),
	    cmocka_unit_test(test_stress_memory_steady),
	    cmocka_unit_test(test_stress_churn_hit_latency),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
