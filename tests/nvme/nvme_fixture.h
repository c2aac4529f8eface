/* nvme_fixture.h -- helpers for the nvme tier's tests: records from a seed, a tier in a tmp dir. */
#ifndef KVT_TESTS_NVME_FIXTURE_H
#define KVT_TESTS_NVME_FIXTURE_H
#include "testlib.h"
#include "core/chunk.h"
#include "core/options.h"
#include "tiers/nvme/nvme.h"
#include "tiers/nvme/nvme_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The backend under test: argv[1] ("uring" or "pio"); uring skips (77) where it is missing. */
static const char *g_backend = "uring";

static inline void nvt_pick_backend(int argc, char **argv)
{
	if (argc > 1)
		g_backend = argv[1];
	if (!strcmp(g_backend, "uring") && !kvt__nvme_uring_available()) {
		fprintf(stderr, "SKIP: io_uring unavailable\n");
		exit(KVT_TEST_SKIP);
	}
}

struct nvt {
	char dir[256];
	struct kvt_options opts;
	struct kvt_tier_env env;
	struct kvt__nvme_hooks hooks;
	struct kvt_tier *t;
	/* locs the tier dropped on its own (env->dropped), in order */
	uint64_t *dropped;
	size_t n_dropped, cap_dropped;
	/* records the tier copied forward (env->moved): from, to pairs in order */
	uint64_t (*moves)[2];
	size_t n_moves, cap_moves;
};

static inline void nvt_on_drop(void *arg, const struct kvt_tier_id *id, uint64_t loc)
{
	struct nvt *n = arg;
	if (n->n_dropped == n->cap_dropped) {
		n->cap_dropped = n->cap_dropped ? 2 * n->cap_dropped : 256;
		n->dropped = realloc(n->dropped, n->cap_dropped * sizeof(uint64_t));
		assert_non_null(n->dropped);
	}
	n->dropped[n->n_dropped++] = loc;
}

static inline void nvt_on_move(void *arg, const struct kvt_tier_id *id, uint64_t from, uint64_t to)
{
	struct nvt *n = arg;
	(void)id;
	if (n->n_moves == n->cap_moves) {
		n->cap_moves = n->cap_moves ? 2 * n->cap_moves : 256;
		n->moves = realloc(n->moves, n->cap_moves * sizeof(*n->moves));
		assert_non_null(n->moves);
	}
	n->moves[n->n_moves][0] = from;
	n->moves[n->n_moves++][1] = to;
}

/* Where the record written at loc is now, following its moves in order. */
static inline uint64_t nvt_follow(const struct nvt *n, uint64_t loc)
{
	for (size_t k = 0; k < n->n_moves; k++)
		if (n->moves[k][0] == loc)
			loc = n->moves[k][1];
	return loc;
}

static inline bool nvt_was_dropped(const struct nvt *n, uint64_t loc)
{
	for (size_t i = 0; i < n->n_dropped; i++)
		if (n->dropped[i] == loc)
			return true;
	return false;
}

static inline void nvt_init(struct nvt *n, const char *bytes, const char *qd)
{
	memset(n, 0, sizeof(*n));
	kvt_test_tmpdir(n->dir, sizeof(n->dir));
	kvt_opts_defaults(&n->opts);
	assert_int_equal(kvt_opts_set(&n->opts, "nvme.bytes", bytes), 0);
	assert_int_equal(kvt_opts_set(&n->opts, "nvme.queue_depth", qd), 0);
	n->env = (struct kvt_tier_env){.opts = &n->opts,
	                               .data_dir = n->dir,
	                               .dropped = nvt_on_drop,
	                               .arg = n,
	                               .moved = nvt_on_move};
	n->hooks.backend = g_backend;
}

static inline int nvt_open(struct nvt *n)
{
	return kvt__nvme_open_hooked(&n->env, &n->hooks, &n->t);
}

static inline void nvt_close(struct nvt *n)
{
	kvt_tier_nvme.close(n->t);
	n->t = NULL;
}

static inline void nvt_fini(struct nvt *n)
{
	if (n->t)
		nvt_close(n);
	kvt_test_rmtree(n->dir);
	free(n->dropped);
	free(n->moves);
}

static inline const char *nvt_path(const struct nvt *n, char *buf, size_t len)
{
	snprintf(buf, len, "%s/nvme.dat", n->dir);
	return buf;
}

/* A whole file read into memory (the caller frees it), and written back whole. */
static inline void *nvt_slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	void *p = malloc((size_t)st.st_size);
	assert_non_null(p);
	assert_int_equal(pread(fd, p, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return p;
}

static inline void nvt_spill(const char *path, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, len), (ssize_t)len);
	close(fd);
}

/* One byte of the file at path changed in place (damage while the tier is closed). */
static inline void nvt_flip_byte(const char *path, off_t off, uint8_t mask)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint8_t c;
	assert_int_equal(pread(fd, &c, 1, off), 1);
	c ^= mask;
	assert_int_equal(pwrite(fd, &c, 1, off), 1);
	close(fd);
}

/* Bytes as a bug would write them (tests of saved state whose checksums still hold): a 4-byte
 * field of the body, or any byte, set to 0, 1, one off, all ones, or random. */
static inline void nvt_mutate(uint8_t *body, size_t len, uint64_t *x)
{
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	size_t at = (size_t)(*x >> 20) % len;
	uint32_t kind = (uint32_t)(*x >> 8) % 6;
	if (kind == 5) {
		body[at] = (uint8_t)(*x >> 40);
		return;
	}
	at &= ~(size_t)3;
	if (at + 4 > len)
		return;
	uint32_t v = kvt_load_le32(body + at);
	uint32_t vals[5] = {0, 1, v + 1, v - 1, 0xffffffffu};
	kvt_store_le32(body + at, vals[kind]);
}

/* The identity of record seed: tenant 7's, or the tenant in bits 48..63 of the seed when set. */
static inline struct kvt_tier_id nvt_id(uint64_t seed)
{
	struct kvt_tier_id id = {.tenant = seed >> 48 ? (uint32_t)(seed >> 48) : 7};
	id.ns.w[0] = 0x6e73, id.ns.w[1] = 1;
	id.key.w[0] = seed, id.key.w[1] = ~seed;
	return id;
}

/* Payload length of record seed in [lo, hi): deterministic. */
static inline size_t nvt_len(uint64_t seed, size_t lo, size_t hi)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull;
	return lo + (size_t)((x >> 17) % (hi - lo));
}

/* Allocates a padded, aligned buffer holding record seed (header + payload_len bytes). */
static inline uint8_t *nvt_record(uint64_t seed, size_t payload_len, size_t *buf_len)
{
	size_t rec = KVT_CHUNK_HDR_BYTES + payload_len;
	*buf_len = KVT_ALIGN_UP(rec, (size_t)KVT_TIER_ALIGN);
	uint8_t *b = aligned_alloc(KVT_TIER_ALIGN, *buf_len);
	assert_non_null(b);
	memset(b, 0xee, *buf_len);
	kvt_test_fill(b + KVT_CHUNK_HDR_BYTES, payload_len, seed);
	struct kvt_tier_id id = nvt_id(seed);
	struct kvt_chunk_hdr h = {.tenant = id.tenant,
	                          .ns = id.ns,
	                          .key = id.key,
	                          .seq = seed,
	                          .raw_bytes = payload_len,
	                          .payload_bytes = payload_len,
	                          .n_tokens = 16};
	h.payload_sum = kvt_chunk_sum(b + KVT_CHUNK_HDR_BYTES, payload_len);
	kvt_chunk_hdr_encode(b, &h);
	return b;
}

/* Writes record seed. @return : the tier's result; *loc on success. */
static inline int nvt_put(struct nvt *n, uint64_t seed, size_t payload_len, uint64_t *loc)
{
	size_t bl;
	uint8_t *b = nvt_record(seed, payload_len, &bl);
	int rc = kvt_tier_nvme.write(n->t, b, KVT_CHUNK_HDR_BYTES + payload_len, bl, loc);
	free(b);
	return rc;
}

/*
 * Reads record seed at loc and compares every byte with what was written.
 * @return : the tier's error (negative), 0 when the bytes are identical; fails the test on
 * a wrong byte (a successful read that differs).
 */
static inline int nvt_check(struct nvt *n, uint64_t seed, size_t payload_len, uint64_t loc)
{
	size_t bl;
	uint8_t *want = nvt_record(seed, payload_len, &bl);
	uint8_t *got = aligned_alloc(KVT_TIER_ALIGN, bl);
	assert_non_null(got);
	struct kvt_tier_id id = nvt_id(seed);
	ssize_t rc = kvt_tier_nvme.read(n->t, &id, loc, got, bl);
	if (rc >= 0) {
		assert_int_equal(rc, KVT_CHUNK_HDR_BYTES + payload_len);
		assert_memory_equal(got, want, (size_t)rc); /* never a wrong byte */
		rc = 0;
	}
	free(got);
	free(want);
	return (int)rc;
}

static inline struct kvt_tier_stats nvt_stats(struct nvt *n)
{
	struct kvt_tier_stats s;
	kvt_tier_nvme.stats(n->t, &s);
	return s;
}

static inline struct kvt__nvme_xstats nvt_xstats(struct nvt *n)
{
	struct kvt__nvme_xstats x;
	kvt__nvme_xstats(n->t, &x);
	return x;
}
/* iterate() visitor: counts the records and their bytes, and checks every one byte for byte
 * (the record's seed is its key's first word). */
struct nvt_walk {
	size_t n;
	uint64_t bytes;
	struct nvt *nv;
	/* when set: the record of seed k may be found only where acked[k] (k < seeds), i.e. its
	 * write was reported done -- a write reported failed never comes back (DESIGN.md
	 * invariant 4) */
	const bool *acked;
	uint64_t seeds;
};

static inline int nvt_verify_visit(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	struct nvt_walk *w = arg;
	w->n++;
	w->bytes += KVT_ALIGN_UP(KVT_CHUNK_HDR_BYTES + h->payload_bytes, 4096);
	assert_int_equal(nvt_check(w->nv, h->key.w[0], h->payload_bytes, loc), 0);
	if (w->acked && !(h->key.w[0] < w->seeds && w->acked[h->key.w[0]])) {
		print_error("record of seed %llu found, but its write was reported failed\n",
		            (unsigned long long)h->key.w[0]);
		fail();
	}
	return 0;
}

/* What the tier holds: (loc, seed) of every record, in the order iterate gives them. Large:
 * callers keep theirs static. */
#define NVT_SNAP_MAX 4096
struct nvt_snap {
	uint64_t loc[NVT_SNAP_MAX], seed[NVT_SNAP_MAX];
	size_t n;
};

static inline int nvt_snap_visit(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	struct nvt_snap *s = arg;
	assert_true(s->n < NVT_SNAP_MAX);
	s->loc[s->n] = loc, s->seed[s->n++] = h->key.w[0];
	return 0;
}

static inline void nvt_snap_take(struct nvt *n, struct nvt_snap *s)
{
	s->n = 0;
	assert_int_equal(kvt_tier_nvme.iterate(n->t, nvt_snap_visit, s), 0);
}

/* iterate() visitor for a damaged device: each record offered reads back as its own seed's
 * bytes, or is found bad (-EBADMSG, -ENOENT) -- never a wrong byte. Counts them. */
struct nvt_offered {
	size_t n;
	struct nvt *nv;
};

static inline int nvt_visit_right_or_bad(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	struct nvt_offered *w = arg;
	int rc = nvt_check(w->nv, h->key.w[0], h->payload_bytes, loc);
	assert_true(rc == 0 || rc == -EBADMSG || rc == -ENOENT);
	w->n++;
	return 0;
}

/* The fault injector at 1% for every kind of fault it has (armed by the test). */
static inline struct kvt__nvme_fault nvt_fault_1pct(uint64_t seed)
{
	return (struct kvt__nvme_fault){.ppm_eio = 10000,
	                                .ppm_again = 10000,
	                                .ppm_nospc = 10000,
	                                .ppm_short = 10000,
	                                .ppm_busy = 10000,
	                                .seed = seed};
}

/* A tier on the injector f; a full device is re-probed at once, so -ENOSPC stays per I/O. */
static inline void nvt_open_faulty(struct nvt *n, struct kvt__nvme_fault *f)
{
	n->hooks.fault = f;
	n->hooks.full_retry_ms = 0, n->hooks.full_retry_set = true;
	assert_int_equal(nvt_open(n), 0);
}

/* The tier counted exactly the write faults that f injected, and nothing is left in flight. */
static inline void nvt_assert_write_faults_counted(struct nvt *n, const struct kvt__nvme_fault *f)
{
	struct kvt_tier_stats s = nvt_stats(n);
	struct kvt__nvme_xstats x = nvt_xstats(n);
	assert_true(f->eio_w && f->again && f->nospc && f->short_w && f->busy);
	assert_int_equal(s.err_io, f->eio_r + f->eio_w);
	assert_int_equal(s.err_again, f->again);
	assert_int_equal(s.err_nospc, f->nospc);
	assert_int_equal(x.short_writes, f->short_w);
	assert_int_equal(x.submit_busy, f->busy);
	assert_int_equal(f->misaligned, 0);
	assert_int_equal(s.queue_depth, 0);
	/* some failed write had issued its header block, and its fence landed (log.c) */
	print_message("fenced %llu, unfenced %llu\n", (unsigned long long)x.fenced,
	              (unsigned long long)x.unfenced);
	assert_true(x.fenced > 0);
	assert_int_equal(x.unfenced, 0);
}
/* kill -9 of a writer (RELIABILITY.md D2, D3). The child opens the tier on n's file, writes
 * records from seed `first` on as fast as it can and sends an ack for each write that returned. */
struct nvt_ack {
	uint64_t seed, loc, len;
};
typedef void (*nvt_writer_fn)(struct nvt *n, int ack_fd, uint64_t first);

static inline void nvt_ack_send(int fd, uint64_t seed, uint64_t loc, uint64_t len)
{
	struct nvt_ack a = {seed, loc, len};
	if (write(fd, &a, sizeof(a)) != sizeof(a))
		_exit(4);
}

/* A writer's loop: records of seeds first.. (1000 to max_len bytes), one put at a time, each
 * acknowledged once it returned, until the process is killed. */
static inline _Noreturn void nvt_write_acked(struct nvt *n, int fd, uint64_t first, size_t max_len)
{
	for (uint64_t seed = first;; seed++) {
		size_t len = nvt_len(seed, 1000, max_len);
		uint64_t loc;
		if (nvt_put(n, seed, len, &loc))
			_exit(3);
		nvt_ack_send(fd, seed, loc, len);
	}
}

/*
 * Three rounds on the same file: start the writer, wait for min_acks + rand() % span more acks,
 * kill it at a random moment within max_sleep_us, reopen, and require every acknowledged record
 * to be found byte-identical, every recovered record to be correct (at most in_flight more per
 * kill than were acknowledged: writes that landed whole before their ack), and usage to equal the
 * recovered records.
 */
static inline void nvt_kill9_rounds(struct nvt *n, nvt_writer_fn writer, size_t min_acks,
                                    size_t span, unsigned max_sleep_us, size_t in_flight)
{
	struct nvt_ack *acks = calloc(100000, sizeof(*acks));
	assert_non_null(acks);
	size_t n_acks = 0;
	srand(kvt_test_seed("kill -9 rounds"));
	for (int round = 0; round < 3; round++) {
		int p[2];
		assert_int_equal(pipe(p), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			if (nvt_open(n))
				_exit(2);
			writer(n, p[1], 1 + (uint64_t)round * 1000000);
			_exit(5);
		}
		close(p[1]);
		size_t want = n_acks + min_acks + (size_t)rand() % span;
		while (n_acks < want) {
			assert_int_equal(read(p[0], &acks[n_acks], sizeof(*acks)), sizeof(*acks));
			n_acks++;
		}
		usleep((useconds_t)((unsigned)rand() % max_sleep_us));
		kill(pid, SIGKILL);
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status));
		while (read(p[0], &acks[n_acks], sizeof(*acks)) == sizeof(*acks))
			n_acks++;
		close(p[0]);
		assert_int_equal(nvt_open(n), 0);
		for (size_t i = 0; i < n_acks; i++)
			assert_int_equal(nvt_check(n, acks[i].seed, acks[i].len, acks[i].loc), 0);
		struct nvt_walk w = {.nv = n};
		assert_int_equal(kvt_tier_nvme.iterate(n->t, nvt_verify_visit, &w), 0);
		struct kvt_tier_stats s = nvt_stats(n);
		assert_true(w.n >= n_acks && w.n <= n_acks + (size_t)(round + 1) * in_flight);
		assert_int_equal(s.chunks, w.n);
		assert_int_equal(s.used_bytes, w.bytes);
		assert_int_equal(s.evictions, 0);
		print_message("round %d: %zu acknowledged, %zu recovered, %llu torn dropped\n",
		              round, n_acks, w.n, (unsigned long long)s.corruptions);
		nvt_close(n);
	}
	free(acks);
}

#endif
