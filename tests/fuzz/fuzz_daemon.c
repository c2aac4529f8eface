/*
 * fuzz_daemon.c -- kvtierd's dispatcher and its tiers, in this process: the same start, loop
 * and stop as the daemon's (ipc/daemon/life.c), real sockets, real shared memory, a real nvme
 * file (and RocksDB), driven by up to three clients that speak the protocol well, badly, or not
 * at all, with restarts that recover the nvme tier from a file the input damaged (and the
 * rocksdb tier from a damaged or missing manifest).
 *
 * An input is two layout bytes (tiers, host's policy and size, admission, placement, quota, the
 * shared lookup table), then a program of operations, one byte each (b % 32 picks one, more
 * often the first ones, b / 32 % 3 the client), their arguments in the bytes after them:
 *
 *   put, acquire, namespace, lookup, release, mutated (a put, acquire, lookup, delete, keep,
 *   prefetch, done or release mutated 1-4 times), an operator command (policy, config,
 *   inspect, tier enable: a seed, maybe mutated), connect, delete, keep, prefetch, done,
 *   stats or ping, a raw frame (any type, body from the input), close the client (with its
 *   leases) or wait, restart kvtierd (the nvme file or rocksdb's manifest damaged first, or
 *   not)
 *
 * A client connects (hello) and registers a namespace when it is first used.
 * Every frame is followed by a ping; the replies before the ping's are read and checked. What
 * must hold (a failure aborts, so libFuzzer keeps the input):
 *   - a reply comes within the waits the options allow, never a silence past them;
 *   - a frame the harness built right is answered, never closed (unless an operator command
 *     before it touched client.*);
 *   - every reply's length is its header's and an acquire's is its leases';
 *   - every chunk an acquire leases is, byte for byte, one that some put (as the harness parsed
 *     the frame it sent, with kvt_proto_check_put) stored under that key, and its generation is
 *     the pool's; after a restart too, whatever the damage to the nvme file or the manifest;
 *   - while a held lease's generation is still the pool's, its bytes are those granted;
 *   - every stats reply renders as /metrics renders it;
 *   - at the end, with every client gone: no lease left, `kvtier check` finds the books whole,
 *     and once stopped, this process has the fds and mappings it had before the start.
 *
 * Built as a libFuzzer target (`make fuzz`) and, by default, as a ctest program that replays
 * tests/fuzz/corpus-daemon and a fixed-seed stream of random programs (KVT_FUZZ_SEED=N: another).
 */
#include "core/log.h"
#include "core/util.h"
#include "ipc/daemon/daemon.h"
#include "ipc/proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <xxhash.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_CLIENTS 3
#define N_NS      4
#define N_HANDLES 512
#define MAX_OPS   96
#define PING_SEQ  0xf22u

struct client {
	int fd;
	uint8_t *map; /* the pool, read-only: records, generations, lookup table */
	size_t map_bytes;
	uint64_t pool_bytes, gen_bytes;
	uint8_t *staging; /* read-write, ours to write between requests */
	uint64_t staging_bytes;
	kvt_id_t ns[N_NS];
	uint64_t cb[N_NS];
	int n_ns;
	struct kvt_msg_lease held[N_HANDLES]; /* leases not released, as granted */
	uint64_t held_hash[N_HANDLES];        /* their payloads' hashes when granted */
	int n_handles;
};

/* What a key may hold: the hashes of every payload a put stored under it. */
struct allowed {
	kvt_id_t ns, key;
	uint64_t h[8];
	int n;
	bool used;
};

static struct {
	struct kvd *d;
	char dir[64], sock[96], data[96];
	const char *sets[24];
	int n_sets;
	struct client c[N_CLIENTS];
	struct allowed allow[4096];
	bool allow_full;   /* a put the table could not record: no content check after it */
	bool clients_open; /* an operator command named client.*: a connection may be closed */
	_Alignas(8) uint8_t last[64]; /* the start of the last reply before the ping's */
	unsigned last_k0;             /* the first key of the last put */
	const uint8_t *in;
	size_t n, at;
	int base_fds, base_maps;
	long long frames, replies, errors, closed, leased, restarts, stats;
	long long repairs;   /* rocksdb databases repaired (or rebuilt) from their tables */
	long long mended;    /* rocksdb walks sent from damaged metadata to the records */
	long long evacuated; /* damaged rocksdb tables dropped after their records were copied */
	long long passed;    /* damaged rocksdb blocks a walk or a copy passed over */
	long long unchecked; /* rocksdb tables whose footer says no checksums, left out */
} F;

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "fuzz_daemon: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	abort();
}

static unsigned next(void)
{
	return F.at < F.n ? F.in[F.at++] : 0;
}

static void quiet_log(enum kvt_log_level lvl, const char *msg)
{
	F.repairs += strstr(msg, "from its tables (") != NULL;
	F.mended += strstr(msg, "metadata is damaged: dropping it") != NULL;
	F.evacuated += strstr(msg, "is damaged: dropped after the") != NULL;
	F.unchecked += strstr(msg, "carry no checksums") != NULL;
	F.passed += strstr(msg, "passed over a block it cannot read") != NULL;
	if (getenv("KVT_FUZZ_VERBOSE"))
		fprintf(stderr, "kvtierd %d: %s\n", (int)lvl, msg);
}

static int count_dir(const char *path)
{
	DIR *dp = opendir(path);
	int n = 0;
	for (struct dirent *e; dp && (e = readdir(dp));)
		n += e->d_name[0] != '.';
	if (dp)
		closedir(dp);
	return n - 1; /* opendir's own fd */
}

/* Shared mappings (pools, staging areas, lookup tables, io_uring's rings): what a start maps
 * and a stop must unmap. Private ones come and go with threads and malloc's arenas. */
static int count_shared_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	int n = 0;
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		char *perm = strchr(line, ' ');
		n += perm && strlen(perm) > 4 && perm[4] == 's';
	}
	if (f)
		fclose(f);
	return n;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(p);
}

static void remove_dir(void)
{
	if (nftw(F.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS))
		fprintf(stderr, "fuzz_daemon: could not remove %s\n", F.dir);
}

/* ---- the daemon ---- */

static void daemon_start(void)
{
	F.d = calloc(1, sizeof(*F.d));
	struct kvd *d = F.d;
	char err[512];
	if (kvd_options_read(&d->opts, NULL, F.sets, F.n_sets, err, sizeof(err)))
		fail("options: %s", err);
	snprintf(d->sock_path, sizeof(d->sock_path), "%s", F.sock);
	snprintf(d->data_dir, sizeof(d->data_dir), "%s", F.data);
	kvt_opts_resolve(&d->opts, d->data_dir);
	d->arg_sets = F.sets;
	d->n_arg_sets = F.n_sets;
	kvt_log_set(quiet_log, KVT_LOG_DEBUG);
	kvd_curvework_init(d);
	int rc = kvd_daemon_check(d);
	if (!rc)
		rc = kvd_daemon_setup(d);
	if (rc)
		fail("start: %s", strerror(-rc));
}

/* kvtierd's own stop (connections, tiers, pools, fds, threads), then its state freed. */
static void daemon_stop(void)
{
	kvd_daemon_stop(F.d);
	free(F.d);
	F.d = NULL;
}

/* Whether a tier job is in flight or a request parked (a put waiting for room, an acquire for
 * promotions). */
static bool busy(void)
{
	struct kvd *d = F.d;
	if (d->demotes_inflight || d->promotes_inflight)
		return true;
	for (uint32_t i = 0; i < d->cap_conns; i++)
		if (d->conns[i].fd >= 0 && d->conns[i].parked_len)
			return true;
	return false;
}

/* Loop turns until nothing is ready and no tier job or parked request is left, or until
 * deadline (then whatever is left is the caller's to judge). */
static void pump_until(uint64_t deadline_ns)
{
	for (;;) {
		int n = kvd_loop_once(F.d, 0);
		if (n < 0)
			fail("loop: %s", strerror(-n));
		if (n > 0)
			continue;
		if (!busy() || kvt_now_ns() >= deadline_ns)
			return;
		kvd_loop_once(F.d, 1);
	}
}

/* How long a reply may take: the longest wait the options allow, and 3 s. */
static uint64_t reply_deadline(void)
{
	uint64_t w = kvt_opt_u64(&F.d->opts, KVT_OPT_PROMOTE_WAIT_MS);
	uint64_t dw = kvt_opt_u64(&F.d->opts, KVT_OPT_DEMOTE_WAIT_MS);
	return kvt_now_ns() + (KVT_MAX(w, dw) + 3000) * 1000000ull;
}

/* ---- what a key may hold ---- */

static struct allowed *allowed_of(kvt_id_t ns, kvt_id_t key, bool add)
{
	uint64_t h = XXH3_64bits(&key, sizeof(key)) ^ ns.w[0];
	for (size_t k = 0; k < 4096; k++) {
		struct allowed *a = &F.allow[(h + k) % 4096];
		if (!a->used) {
			if (!add)
				return NULL;
			*a = (struct allowed){.ns = ns, .key = key, .used = true};
			return a;
		}
		if (!memcmp(&a->ns, &ns, sizeof(ns)) && !memcmp(&a->key, &key, sizeof(key)))
			return a;
	}
	return NULL;
}

/* A put frame as sent: each item whose payload lies in the staging area may now be stored. */
static void note_put(struct client *c, const uint8_t *frame, size_t len)
{
	const struct kvt_msg_hdr *h = (const void *)frame;
	uint32_t n;
	if (len < sizeof(*h) || h->type != KVT_MSG_PUT ||
	    kvt_proto_check_put(h + 1, len - sizeof(*h), &n))
		return;
	const struct kvt_msg_put *p = (const void *)(h + 1);
	const struct kvt_msg_put_item *it = (const void *)(p + 1);
	for (uint32_t i = 0; i < n; i++) {
		if (!c->staging || p->chunk_bytes > c->staging_bytes ||
		    it[i].staging_off > c->staging_bytes - p->chunk_bytes)
			continue;
		struct allowed *a = allowed_of(p->ns, it[i].key, true);
		if (!a || a->n == 8) {
			F.allow_full = true;
			continue;
		}
		uint64_t x = XXH3_64bits(c->staging + it[i].staging_off, p->chunk_bytes);
		bool seen = false;
		for (int k = 0; k < a->n; k++)
			seen |= a->h[k] == x;
		if (!seen)
			a->h[a->n++] = x;
	}
}

/* An acquire's reply: each lease's bytes are some put's under that key, its generation live. */
static void check_leases(struct client *c, const uint8_t *req, const uint8_t *rx, size_t len)
{
	const struct kvt_msg_hdr *h = (const void *)rx, *q = (const void *)req;
	if (h->status <= 0)
		return;
	if (len != sizeof(*h) + (size_t)h->status * sizeof(struct kvt_msg_lease))
		fail("an acquire reply of %zu bytes for %d leases", len, h->status);
	uint32_t n;
	if (kvt_proto_check_keys(q + 1, q->len - sizeof(*q), &n) || (uint32_t)h->status > n)
		fail("%d leases for a request of %u keys", h->status, n);
	const struct kvt_msg_keys *k = (const void *)(q + 1);
	const kvt_id_t *keys = (const kvt_id_t *)(k + 1);
	const struct kvt_msg_lease *l = (const void *)(h + 1);
	for (int i = 0; i < h->status; i++) {
		F.leased++;
		if (l[i].payload_off > c->pool_bytes ||
		    l[i].payload_bytes > c->pool_bytes - l[i].payload_off ||
		    l[i].gen_index >= c->gen_bytes / 8)
			fail("lease %d outside the pool (offset %llu, %llu bytes)", i,
			     (unsigned long long)l[i].payload_off,
			     (unsigned long long)l[i].payload_bytes);
		uint64_t gen = ((const uint64_t *)(c->map + c->pool_bytes))[l[i].gen_index];
		if (gen != l[i].gen)
			fail("lease %d: generation %llu is not the pool's (%llu)", i,
			     (unsigned long long)l[i].gen, (unsigned long long)gen);
		uint64_t x = XXH3_64bits(c->map + l[i].payload_off, l[i].payload_bytes);
		if (c->n_handles < N_HANDLES) {
			c->held_hash[c->n_handles] = x;
			c->held[c->n_handles++] = l[i];
		}
		if (F.allow_full)
			continue;
		const struct allowed *a = allowed_of(k->ns, keys[i], false);
		bool ok = false;
		for (int j = 0; a && j < a->n; j++)
			ok |= a->h[j] == x;
		if (!ok)
			fail("key %llu:%llu served bytes no put stored under it (%d payloads were)",
			     (unsigned long long)keys[i].w[0], (unsigned long long)keys[i].w[1],
			     a ? a->n : 0);
	}
}

/* Invariant 2, as a client sees it: while a lease's generation is the pool's, its payload is
 * the one granted (a chunk leased is never freed, moved or overwritten; one revoked or flushed
 * has a new generation, and its reader knows the copy is stale). Read as a client reads: the
 * bytes, then the generation. */
static void check_held(void)
{
	for (int i = 0; i < N_CLIENTS; i++) {
		const struct client *c = &F.c[i];
		for (int j = 0; c->map && j < c->n_handles; j++) {
			const struct kvt_msg_lease *l = &c->held[j];
			uint64_t x = XXH3_64bits(c->map + l->payload_off, l->payload_bytes);
			uint64_t gen = ((const uint64_t *)(c->map + c->pool_bytes))[l->gen_index];
			if (gen == l->gen && x != c->held_hash[j])
				fail("a leased chunk changed under its lease (offset %llu, "
				     "generation "
				     "%llu still the pool's)",
				     (unsigned long long)l->payload_off, (unsigned long long)gen);
		}
	}
}

/* A stats reply renders as /metrics renders it (the daemon's state, whatever it is, is the
 * stats object's shape), and every sample line is a name and a number. */
static void check_stats(const char *json, size_t len)
{
	static char prom[512 << 10];
	int n = kvd_prom_render(json, len, prom, sizeof(prom) - 1);
	if (n < 0)
		fail("stats (%zu bytes) do not render as metrics: %s", len, strerror(-n));
	prom[n] = 0;
	F.stats++;
	for (char *save = NULL, *l = strtok_r(prom, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		if (*l == '#')
			continue;
		char *v = strrchr(l, ' '), *end = NULL;
		if (v)
			strtod(v + 1, &end);
		if (strncmp(l, "kvtier_", 7) || !v || !end || *end || end == v + 1)
			fail("a metrics line is not a kvtier_ sample: '%.120s'", l);
	}
}

/* An operator command that names client.* (client.max, client.max_per_uid, client.allow) may
 * refuse or close connections from then on. */
static void note_admin(const uint8_t *frame, size_t len)
{
	const struct kvt_msg_hdr *h = (const void *)frame;
	if (len <= sizeof(*h) || (h->type != KVT_MSG_CONFIG && h->type != KVT_MSG_POLICY &&
	                          h->type != KVT_MSG_INSPECT && h->type != KVT_MSG_TIER_ENABLE))
		return;
	F.clients_open |= memmem(h + 1, len - sizeof(*h), "client", 6) != NULL;
}

/* ---- clients ---- */

/* Closes the connection (its leases die with it); its namespaces are kept, to be used again. */
static void client_drop(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->map)
		munmap(c->map, c->map_bytes);
	if (c->staging)
		munmap(c->staging, c->staging_bytes);
	c->fd = -1;
	c->map = c->staging = NULL;
	c->n_handles = 0; /* gone with the connection */
}

/*
 * Sends frame (len bytes, as it is) and a ping, then runs the loop and reads every reply until
 * the ping's. well: the harness built the frame right, so the connection must stay open.
 * @return : the frame's reply status (0 when it had none), or 1 when the connection closed.
 */
static int exchange(struct client *c, const uint8_t *frame, size_t len, bool well)
{
	static _Alignas(8) uint8_t rx[KVT_MSG_MAX];
	struct kvt_msg_hdr ping = {.type = KVT_MSG_PING, .len = sizeof(ping), .seq = PING_SEQ};
	/* the frame's header as sent, when it has one (a raw or mutated frame may be shorter) */
	const struct kvt_msg_hdr *q = len >= sizeof(*q) ? (const void *)frame : NULL;
	int type = q ? q->type : -1;
	note_put(c, frame, len);
	note_admin(frame, len);
	F.frames++;
	bool gone = kvt_proto_send(c->fd, frame, len, NULL, 0) ||
	            kvt_proto_send(c->fd, &ping, sizeof(ping), NULL, 0);
	int status = 0;
	memset(F.last, 0, sizeof(F.last));
	uint64_t deadline = reply_deadline();
	while (!gone) {
		pump_until(deadline);
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		if (poll(&p, 1, 0) == 0) {
			if (kvt_now_ns() >= deadline)
				fail("no reply past the waits the options allow (type %d, %zu "
				     "bytes)",
				     type, len);
			kvd_loop_once(F.d, 1);
			continue;
		}
		int fds[4], nfds = 4;
		ssize_t n = kvt_proto_recv(c->fd, rx, sizeof(rx), fds, &nfds);
		for (int k = 0; n > 0 && k < nfds && k < 4; k++)
			close(fds[k]); /* none should come: only a hello's reply carries fds */
		if (n > 0 && nfds)
			fail("a reply of type %d carried %d fds", ((struct kvt_msg_hdr *)rx)->type,
			     nfds);
		if (n <= 0) {
			if (n != 0 && n != -ECONNRESET)
				fail("recv: %s", strerror((int)-n));
			gone = true;
			break;
		}
		const struct kvt_msg_hdr *h = (const void *)rx;
		if ((size_t)n < sizeof(*h) || h->len != (uint32_t)n)
			fail("a reply of %zd bytes says %u", n, n >= 8 ? h->len : 0);
		if (h->seq == PING_SEQ && h->type == KVT_MSG_PING)
			break;
		F.replies++;
		F.errors += h->status < 0;
		memcpy(F.last, rx, KVT_MIN((size_t)n, sizeof(F.last)));
		status = h->status;
		if (h->type == KVT_MSG_STATS && h->status >= 0)
			check_stats((const char *)(h + 1), (size_t)n - sizeof(*h));
		if (h->type == KVT_MSG_ACQUIRE && type == KVT_MSG_ACQUIRE && q->len == len)
			check_leases(c, frame, rx, (size_t)n);
	}
	if (gone) {
		if (well && !F.clients_open)
			fail("a well-formed frame (type %d, %zu bytes) closed its connection", type,
			     len);
		F.closed++;
		client_drop(c);
		return 1;
	}
	return status;
}

/* Connects and says hello (a minor version from the input); maps the pool and the staging area.
 * @return : whether the client is connected (a refusal is taken only once an operator
 * command named client.*). */
static bool client_connect(struct client *c)
{
	if (c->fd >= 0)
		return true;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", F.sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		fail("connect %s: %s", F.sock, strerror(errno));
	pump_until(0); /* accepted */
	_Alignas(8) uint8_t buf[64];
	struct kvt_msg_hdr *h = (void *)buf;
	struct kvt_msg_hello *hi = (void *)(h + 1);
	unsigned b = next();
	*h = (struct kvt_msg_hdr){.type = KVT_MSG_HELLO, .len = sizeof(*h) + sizeof(*hi), .seq = 1};
	*hi = (struct kvt_msg_hello){.major = KVT_PROTO_MAJOR, .minor = b % 5, .pid = 1};
	int rc = kvt_proto_send(fd, buf, h->len, NULL, 0);
	if (rc && F.clients_open) {
		close(fd);
		return false;
	}
	if (rc)
		fail("hello: %s", strerror(-rc));
	static _Alignas(8) uint8_t rx[512];
	int fds[2] = {-1, -1}, nfds = 2;
	ssize_t n = -EAGAIN;
	for (uint64_t end = kvt_now_ns() + 3000000000ull; n == -EAGAIN && kvt_now_ns() < end;) {
		pump_until(0);
		n = kvt_proto_recv(fd, rx, sizeof(rx), fds, &nfds);
	}
	const struct kvt_msg_hdr *r0 = (const void *)rx;
	const struct kvt_msg_hello_reply *r = (const void *)(r0 + 1);
	bool ok = n >= (ssize_t)(sizeof(*h) + KVT_HELLO_REPLY_V0_BYTES) &&
	          r0->type == KVT_MSG_HELLO && !r0->status && nfds == 2;
	if (!ok && F.clients_open) {
		for (int k = 0; n > 0 && k < nfds && k < 2; k++)
			close(fds[k]);
		close(fd);
		pump_until(0);
		return false;
	}
	if (!ok)
		fail("hello refused: %zd, status %d, %d fds", n, r0->status, nfds);
	c->fd = fd;
	c->pool_bytes = r->pool_bytes;
	c->gen_bytes = r->gen_bytes;
	c->staging_bytes = r->staging_bytes;
	c->map_bytes = r->pool_bytes + r->gen_bytes;
	if (hi->minor >= 1 && r->lookup_bytes)
		c->map_bytes = r->lookup_off + r->lookup_bytes;
	c->map = mmap(NULL, c->map_bytes, PROT_READ, MAP_SHARED, fds[0], 0);
	c->staging = mmap(NULL, c->staging_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
	close(fds[0]);
	close(fds[1]);
	if (c->map == MAP_FAILED || c->staging == MAP_FAILED)
		fail("mmap: %s", strerror(errno));
	return true;
}

/* ---- frames ---- */

/* The payload a key is put with (first 16 bytes the key; salt != 0: another one). */
static void fill(uint8_t *p, uint64_t bytes, kvt_id_t key, uint64_t salt)
{
	uint64_t x = key.w[0] * 0x9e3779b97f4a7c15ull ^ key.w[1] ^ salt;
	for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	memcpy(p, &key, KVT_MIN(bytes, sizeof(key)));
}

/* Key k of a chain (32 keys: a tier of 1 MiB holds about 64 chunks of the usual model). */
static kvt_id_t key_of(unsigned k)
{
	return (kvt_id_t){{k % 32, 1000}};
}

/* A namespace's model from two bytes: three times in four the one every client uses (3
 * layers, 2 heads, head_dim 32, 16 tokens, f16: chunks of 12 KiB), else 1-3 layers, 1-2 heads,
 * head_dim 8-64 (chunks of 1-48 KiB), sometimes one too big for host or staging, or f32. */
static size_t frame_namespace(uint8_t *buf)
{
	unsigned a = next(), b = next();
	if (b < 192) /* mostly the model every client has: they share its chunks */
		a = 17, b = 0;
	struct kvt_msg_hdr *h = (void *)buf;
	struct kvt_msg_namespace *w = (void *)(h + 1);
	*w = (struct kvt_msg_namespace){.dtype = b % 16 == 15 ? 0 : KVT_DTYPE_F16,
	                                .n_layers = 1 + a % 3,
	                                .n_kv_heads = 1 + a / 3 % 2,
	                                .head_dim = 8u << (a / 6 % 4),
	                                .tokens_per_chunk = b % 16 == 14 ? 65536 : 16,
	                                .tp_size = 1,
	                                .name_len = 2};
	memcpy(w + 1, (char[]){'m', (char)('0' + b % 4)}, 2);
	*h = (struct kvt_msg_hdr){
	    .type = KVT_MSG_NAMESPACE, .len = (uint32_t)(sizeof(*h) + sizeof(*w) + 2), .seq = 2};
	return h->len;
}

/* A put of n chunks of namespace i, keys k0.. (a prefix chain: each the parent of the next),
 * written to staging first (the key's payload, or another one, or left as it was). */
static size_t frame_put(struct client *c, uint8_t *buf)
{
	unsigned a = next(), b = next(), k0 = next();
	F.last_k0 = k0;
	int i = c->n_ns ? (int)(a % (unsigned)c->n_ns) : 0;
	uint64_t cb = c->n_ns ? c->cb[i] : 4096;
	uint32_t n = 1 + b % 8;
	struct kvt_msg_hdr *h = (void *)buf;
	struct kvt_msg_put *p = (void *)(h + 1);
	struct kvt_msg_put_item *it = (void *)(p + 1);
	*p = (struct kvt_msg_put){
	    .ns = c->n_ns ? c->ns[i] : (kvt_id_t){{1, 2}}, .n = n, .chunk_bytes = cb};
	if (k0 % 8 && k0 % 32) { /* most chains go on from the key before */
		p->parent = key_of(k0 - 1);
		p->flags = KVT_PUT_F_PARENT | (b & 0x80 ? KVT_PUT_F_CONTINUES : 0);
	}
	for (uint32_t j = 0; j < n; j++) {
		uint64_t off = a & 0x40 ? (uint64_t)next() * 512 : j * cb; /* odd offsets too */
		it[j] = (struct kvt_msg_put_item){.key = key_of(k0 + j), .staging_off = off};
		if (c->staging && off <= c->staging_bytes && cb <= c->staging_bytes - off &&
		    !(a & 0x20))
			fill(c->staging + off, cb, it[j].key, a & 0x10 ? b : 0);
	}
	*h = (struct kvt_msg_hdr){.type = KVT_MSG_PUT,
	                          .len = (uint32_t)(sizeof(*h) + sizeof(*p) + n * sizeof(*it)),
	                          .seq = 3};
	return h->len;
}

/* A keys message (lookup, acquire, delete, keep, prefetch, done) of 1-16 keys from k0. */
static size_t frame_keys(struct client *c, uint8_t *buf, uint16_t type)
{
	unsigned a = next(), b = next(), k0 = next();
	if (a & 0x20) /* the chain put last, by any client */
		k0 = F.last_k0 + k0 % 4;
	int i = c->n_ns ? (int)(a % (unsigned)c->n_ns) : 0;
	uint32_t n = 1 + b % 16;
	struct kvt_msg_hdr *h = (void *)buf;
	struct kvt_msg_keys *k = (void *)(h + 1);
	*k = (struct kvt_msg_keys){.ns = c->n_ns ? c->ns[i] : (kvt_id_t){{1, 2}}, .n = n};
	if (type == KVT_MSG_KEEP)
		k->arg = (b >> 4) * 250; /* 0: unkeep */
	else if (type == KVT_MSG_ACQUIRE && b & 0x80)
		k->arg = 20 + (b >> 4) * 10; /* the client's own timeout */
	kvt_id_t *key = (void *)(k + 1);
	for (uint32_t j = 0; j < n; j++)
		key[j] = key_of(k0 + (a & 0x10 ? j * 7 : j));
	*h = (struct kvt_msg_hdr){
	    .type = type, .len = (uint32_t)(sizeof(*h) + sizeof(*k) + n * sizeof(*key)), .seq = 4};
	return h->len;
}

/* A release of some held handles (the first ones, the last ones, or forged ones). */
static size_t frame_release(struct client *c, uint8_t *buf)
{
	unsigned a = next();
	struct kvt_msg_hdr *h = (void *)buf;
	struct kvt_msg_release *r = (void *)(h + 1);
	uint64_t *hd = (void *)(r + 1);
	uint32_t n = 0;
	if (a % 4 == 3) { /* forged, or another connection's */
		for (; n < 1 + a / 4 % 8; n++)
			hd[n] = (uint64_t)next() << 32 | next();
	} else { /* all held, or some: the newest, or the oldest */
		uint32_t want = a % 4 == 0 ? (uint32_t)c->n_handles : 1 + a / 4 % 16;
		for (; n < want && c->n_handles; n++) {
			int j = a % 4 == 2 ? c->n_handles - 1 : 0;
			hd[n] = c->held[j].handle;
			c->n_handles--; /* the newest takes the place of the one released */
			c->held[j] = c->held[c->n_handles];
			c->held_hash[j] = c->held_hash[c->n_handles];
		}
	}
	*r = (struct kvt_msg_release){.n = n};
	*h = (struct kvt_msg_hdr){
	    .type = KVT_MSG_RELEASE, .len = (uint32_t)(sizeof(*h) + sizeof(*r) + n * 8), .seq = 5};
	return h->len;
}

/* The operators' commands: policy, config, inspect and tier enable, as kvtier sends them. */
static const struct {
	uint16_t type;
	const char *cmd;
} admin_seeds[] = {
    {KVT_MSG_POLICY, "get host"},
    {KVT_MSG_POLICY, "get nvme"},
    {KVT_MSG_POLICY, "get rocksdb"},
    {KVT_MSG_POLICY, "mrc host"},
    {KVT_MSG_POLICY, "mrc nvme"},
    {KVT_MSG_POLICY, "set host s3fifo small_ratio=0.2"},
    {KVT_MSG_POLICY, "set host conv defaults horizon=2"},
    {KVT_MSG_POLICY, "set host wtinylfu window_ratio=0.05"},
    {KVT_MSG_POLICY, "set host lru"},
    {KVT_MSG_POLICY, "set host prefix"},
    {KVT_MSG_POLICY, "set host duel"},
    {KVT_MSG_POLICY, "set nvme clock"},
    {KVT_MSG_POLICY, "set rocksdb arc"},
    {KVT_MSG_POLICY, "set rocksdb auto"},
    {KVT_MSG_CONFIG, "get"},
    {KVT_MSG_CONFIG, "get host.policy"},
    {KVT_MSG_CONFIG, "set host.policy lfu"},
    {KVT_MSG_CONFIG, "set host.policy auto"},
    {KVT_MSG_CONFIG, "set host.admit tinylfu"},
    {KVT_MSG_CONFIG, "set host.admit second_touch"},
    {KVT_MSG_CONFIG, "set tenant.quota 0=64KiB/512KiB"},
    {KVT_MSG_CONFIG, "set tenant.quota none"},
    {KVT_MSG_CONFIG, "set lease.timeout_ms 30"},
    {KVT_MSG_CONFIG, "set host.dirty_pct 5"},
    {KVT_MSG_CONFIG, "set host.keep_pct 50"},
    {KVT_MSG_CONFIG, "set host.keep_max_ms 100"},
    {KVT_MSG_CONFIG, "set nvme.admit second_touch"},
    {KVT_MSG_CONFIG, "set nvme.policy lru"},
    {KVT_MSG_CONFIG, "set nvme.quota 0=0/1MiB"},
    {KVT_MSG_CONFIG, "set rocksdb.policy lfu"},
    {KVT_MSG_CONFIG, "set log.level debug"},
    {KVT_MSG_CONFIG, "set trace.file FUZZDIR"}, /* F.dir/trace: any other path is made so */
    {KVT_MSG_CONFIG, "set trace.file none"},
    {KVT_MSG_CONFIG, "set trace.file /dev/full"},
    {KVT_MSG_CONFIG, "set trace.max_bytes 4096"},
    {KVT_MSG_CONFIG, "reload"},
    {KVT_MSG_INSPECT, "inspect"},
    {KVT_MSG_INSPECT, "inspect m0"},
    {KVT_MSG_INSPECT, "check"},
    {KVT_MSG_INSPECT, "flush all"},
    {KVT_MSG_INSPECT, "flush tenant 0"},
    {KVT_MSG_INSPECT, "flush m1"},
    {KVT_MSG_TIER_ENABLE, "nvme"},
    {KVT_MSG_TIER_ENABLE, "rocksdb"},
};

static size_t frame_admin(uint8_t *buf, bool *mutated)
{
	unsigned a = next();
	size_t n_seeds = sizeof(admin_seeds) / sizeof(admin_seeds[0]);
	struct kvt_msg_hdr *h = (void *)buf;
	char *t = (char *)(h + 1);
	size_t len = (size_t)snprintf(t, 256, "%s", admin_seeds[a % n_seeds].cmd);
	*mutated = a >= 128;
	for (unsigned m = a >= 128 ? 1 + next() % 4 : 0; m > 0; m--) {
		unsigned at = next(), v = next();
		if (v < 32) /* cut */
			len = at % (len + 1);
		else if (len < 255) /* a byte set, or put in */
			t[at % (len + 1) == len ? len++ : at % len] = (char)v;
	}
	t[len] = 0;
	/* kvtierd appends to the file trace.file names, as root here: not to one a mutation made
	 * up, only to the fuzz directory's, or none, or /dev/full */
	if (strstr(t, "trace.file") && strcmp(t, "set trace.file none") &&
	    strcmp(t, "set trace.file /dev/full"))
		len = (size_t)snprintf(t, 256, "set trace.file %s/trace", F.dir);
	*h = (struct kvt_msg_hdr){
	    .type = admin_seeds[a % n_seeds].type, .len = (uint32_t)(sizeof(*h) + len), .seq = 6};
	return h->len;
}

/* A request (put, acquire, lookup, delete, keep, prefetch, done, release, unsent) mutated 1-4
 * times as test_robust's mutation fuzzer does: bits flipped, bytes and 32-bit fields set to
 * edge values, cut short, grown; its header's length then told the truth, or not. */
static size_t frame_mutated(struct client *c, uint8_t *buf)
{
	static const uint16_t types[] = {KVT_MSG_PUT,    KVT_MSG_ACQUIRE, KVT_MSG_LOOKUP,
	                                 KVT_MSG_DELETE, KVT_MSG_KEEP,    KVT_MSG_PREFETCH,
	                                 KVT_MSG_DONE,   KVT_MSG_RELEASE, KVT_MSG_UNSENT};
	unsigned a = next();
	uint16_t type = types[a % 9];
	size_t len = type == KVT_MSG_PUT       ? frame_put(c, buf)
	             : type == KVT_MSG_RELEASE ? frame_release(c, buf)
	                                       : frame_keys(c, buf, type);
	static const uint32_t edge[] = {0,           1,  0x7fffffffu, 0x80000000u,
	                                0xffffffffu, 16, 4096,        1u << 20};
	for (unsigned m = 1 + a / 8 % 4; m > 0; m--) {
		unsigned op = next(), at = next() % (unsigned)len, v = next();
		switch (op % 5) {
		case 0:
			buf[at] ^= (uint8_t)(1u << v % 8);
			break;
		case 1:
			buf[at] = (uint8_t)v;
			break;
		case 2:
			if (at + 4 <= len)
				memcpy(buf + (at & ~3u), &edge[v % 8], 4);
			break;
		case 3:
			len = 1 + at; /* cut short */
			break;
		default:
			for (unsigned e = 0; e < v % 64 && len < 4096; e++)
				buf[len++] = (uint8_t)next(); /* grown */
		}
	}
	if (len >= sizeof(struct kvt_msg_hdr) && a & 0x80)
		((struct kvt_msg_hdr *)buf)->len = (uint32_t)len;
	return len;
}

/* Any type (the known ones, 0, 17-19, 0xffff), a body of the input's bytes. */
static size_t frame_raw(uint8_t *buf)
{
	unsigned a = next(), n = next() * 4;
	struct kvt_msg_hdr *h = (void *)buf;
	for (unsigned i = 0; i < n; i++)
		buf[sizeof(*h) + i] = (uint8_t)next();
	*h = (struct kvt_msg_hdr){.type = (uint16_t)(a % 21 == 20 ? 0xffff : a % 21),
	                          .flags = (uint16_t)(a & 0x80 ? next() : 0),
	                          .len = (uint32_t)(sizeof(*h) + n),
	                          .seq = 7};
	if (a & 0x40)
		h->len ^= 1u << next() % 32; /* a length that lies */
	return sizeof(*h) + n;
}

/* ---- restarts ---- */

/* Damage to one file while the daemon is down: bytes set, a run zeroed, the file cut. */
static void damage_file(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	fstat(fd, &st);
	for (unsigned k = 1 + next() % 4; k > 0 && st.st_size > 0; k--) {
		unsigned a = next(), b = next(), c = next();
		off_t at =
		    (off_t)(((uint64_t)b << 8 | c) * (a & 0x80 ? 1 : 64) % (uint64_t)st.st_size);
		uint8_t v[512];
		size_t n = a % 4 == 0 ? 512 : 1;
		memset(v, a % 4 == 0 ? 0 : next(), n);
		if (a % 16 == 15 && ftruncate(fd, at) == 0) /* cut short: the daemon must cope */
			st.st_size = at;
		else if (pwrite(fd, v, n, at) < 0)
			fail("pwrite %s: %s", path, strerror(errno));
	}
	fsync(fd);
	close(fd);
}

/* One of rocksdb's tables (picked by pick), damaged as damage_file does, or in one of its
 * records' entries or its metadata. */
static void damage_table(unsigned pick)
{
	char dir[176], names[64][64], path[256];
	int n = 0;
	snprintf(dir, sizeof(dir), "%s/rocksdb", F.data);
	DIR *dp = opendir(dir);
	for (struct dirent *e; dp && n < 64 && (e = readdir(dp));) {
		size_t l = strlen(e->d_name);
		if (l > 4 && l < 64 && !strcmp(e->d_name + l - 4, ".sst"))
			memcpy(names[n++], e->d_name, l + 1);
	}
	if (dp)
		closedir(dp);
	if (!n)
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, names[pick / 2 % (unsigned)n]);
	if (!(pick & 1)) {
		damage_file(path);
		return;
	}
	int fd = open(path, O_RDWR | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) || !st.st_size) {
		if (fd >= 0)
			close(fd);
		return;
	}
	uint8_t *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	size_t size = (size_t)st.st_size;
	if (m != MAP_FAILED) {
		/* a bit of the first record's metadata key (0xff x 36, 0, ...), whose block then
		 * fails its checksum */
		uint8_t lo[37] = {0};
		memset(lo, 0xff, 36);
		uint8_t *at = memmem(m, size, lo, sizeof(lo));
		if (at && at + sizeof(lo) + 8 < m + size)
			at[sizeof(lo) + 8] ^= 1;
	}
	/* and with pick's next bit, the value length of a record's entry (at a restart: shared 0,
	 * then the 36-byte key and its 8-byte sequence, 44, and the length, 2 or 3 bytes for a
	 * value of 128 bytes or more; tables are not compressed) set past its block: a walk that
	 * parses the block unverified trips an assertion in Debian's RocksDB */
	for (size_t i = pick / 4 % 4096; m != MAP_FAILED && pick & 2 && i + 5 < size; i++) {
		if (m[i] != 0 || m[i + 1] != 44 || m[i + 2] < 0x80)
			continue;
		size_t last = m[i + 3] < 0x80 ? i + 3 : m[i + 4] < 0x80 ? i + 4 : 0;
		if (!last)
			continue;
		memset(m + i + 2, 0xff, last - i - 2);
		m[last] = 0x7f;
		break;
	}
	/* and with the bit after it, the footer's checksum type (its first byte) set to none:
	 * RocksDB then reads zeroed blocks unchecked, and its RepairDB dies on them */
	if (m != MAP_FAILED && pick & 8 && size >= 53)
		m[size - 53] = 0;
	if (m != MAP_FAILED)
		munmap(m, size);
	close(fd);
}

/* While the daemon is down: the nvme log damaged (its records, its superblock), the index
 * saved at the clean stop damaged, or that index removed, so that the start walks the log as
 * after a crash; and (the same draw's next bits) one of rocksdb's tables damaged (its records,
 * their metadata, which the start's walk meets after an open from the saved index, or the
 * table's own blocks), and rocksdb's manifest damaged or removed, or its CURRENT removed, so
 * that the start repairs the database from its tables. */
static void damage_files(void)
{
	char log[160], index[176], cur[176], man[240], name[64] = {0};
	snprintf(log, sizeof(log), "%s/nvme.dat", F.data);
	snprintf(index, sizeof(index), "%s.index", log);
	unsigned how = next();
	if (how % 4 == 0 || how % 4 == 3)
		damage_file(log);
	if (how % 4 == 1)
		damage_file(index);
	if (how % 4 >= 2)
		unlink(index);
	if (how & 16)
		damage_table(next());
	snprintf(cur, sizeof(cur), "%s/rocksdb/CURRENT", F.data);
	FILE *f = how / 4 % 4 ? fopen(cur, "r") : NULL;
	if (!f)
		return;
	bool named = fgets(name, sizeof(name), f) != NULL;
	fclose(f);
	name[strcspn(name, "\n")] = 0;
	snprintf(man, sizeof(man), "%s/rocksdb/%s", F.data, name);
	if (named && how / 4 % 4 == 1)
		damage_file(man);
	if (named && how / 4 % 4 == 2)
		unlink(man);
	if (how / 4 % 4 == 3)
		unlink(cur);
}

/* kvtierd stopped and started again; its clients come back and register their namespaces
 * again (a start has none), as engines do. */
static void restart(void)
{
	for (int i = 0; i < N_CLIENTS; i++) {
		client_drop(&F.c[i]);
		F.c[i].n_ns = 0;
	}
	pump_until(reply_deadline());
	daemon_stop();
	if (next() % 2)
		damage_files();
	daemon_start();
	F.restarts++;
}

/* ---- one input ---- */

static void layout(void)
{
	static char host[32], order[40], policy[40], slots[40], admit[32], place[48], quota[48];
	static const char *orders[] = {"host", "host,nvme", "host,nvme", "host,nvme,rocksdb"};
	static const char *policies[] = {"lru",    "conv", "s3fifo", "arc",
	                                 "prefix", "auto", "sieve",  "wtinylfu"};
	unsigned a = next(), b = next();
	F.n_sets = 0;
	F.sets[F.n_sets++] = "metrics.listen=off";
	F.sets[F.n_sets++] = "client.staging_bytes=512KiB";
	F.sets[F.n_sets++] = "nvme.bytes=4MiB";
	F.sets[F.n_sets++] = "rocksdb.bytes=4MiB";
	F.sets[F.n_sets++] = "demote.wait_ms=40";
	F.sets[F.n_sets++] = "promote.wait_ms=40";
	F.sets[F.n_sets++] = "log.level=debug";
	snprintf(host, sizeof(host), "host.bytes=%uKiB", 1024u << (b % 2));
	snprintf(order, sizeof(order), "tiers.order=%s", orders[a % 4]);
	snprintf(policy, sizeof(policy), "host.policy=%s", policies[a / 4 % 8]);
	snprintf(slots, sizeof(slots), "index.shm_slots=%s", b & 2 ? "0" : "1024");
	snprintf(admit, sizeof(admit), "host.admit=%s", b & 4 ? "tinylfu" : "none");
	snprintf(place, sizeof(place), "tiers.placement=%s", b & 8 ? "write-through" : "cascade");
	snprintf(quota, sizeof(quota), "tenant.quota=%s", b & 16 ? "0=0/256KiB" : "");
	/* leases revoked within the input: their chunks may then go, and a reader must see it */
	const char *lease = b & 32 ? "lease.timeout_ms=50" : "lease.timeout_ms=30000";
	const char *more[] = {host, order, policy, slots, admit, place, quota, lease};
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
		F.sets[F.n_sets++] = more[i];
}

/* A namespace registered; its id and chunk size kept for this client's requests. */
static void add_namespace(struct client *c)
{
	static _Alignas(8) uint8_t buf[256];
	size_t len = frame_namespace(buf);
	const struct kvt_msg_hdr *r = (const void *)F.last;
	if (exchange(c, buf, len, true) == 0 && r->type == KVT_MSG_NAMESPACE &&
	    r->len == sizeof(*r) + sizeof(struct kvt_msg_namespace_reply) && c->n_ns < N_NS) {
		const struct kvt_msg_namespace_reply *nr = (const void *)(r + 1);
		c->ns[c->n_ns] = nr->ns;
		c->cb[c->n_ns++] = nr->chunk_bytes;
	}
}

static void run_op(void)
{
	static _Alignas(8) uint8_t buf[8192];
	/* b % 32 through this table: puts and acquires most often, restarts least */
	static const uint8_t ops[32] = {0, 1, 1, 2, 2, 2, 2, 2,  2,  3,  3,  3,  3,  3,  3,  4,
	                                4, 5, 6, 7, 8, 9, 9, 10, 11, 11, 12, 13, 13, 13, 14, 15};
	unsigned b = next();
	struct client *c = &F.c[b / 32 % N_CLIENTS];
	unsigned op = ops[b % 32];
	if (op == 15) {
		restart();
		return;
	}
	if (op == 14) {
		if (b & 0x40 && c->fd >= 0) {
			client_drop(c);
			pump_until(reply_deadline());
		} else {
			uint64_t end = kvt_now_ns() + (next() % 64) * 1000000ull;
			while (kvt_now_ns() < end)
				kvd_loop_once(F.d, 1);
		}
		return;
	}
	if (c->fd < 0 || op == 0) {
		if (!client_connect(c))
			return;
		if (!c->n_ns) /* as an engine does first */
			add_namespace(c);
		if (op == 0)
			return;
	}
	if (op == 1 || c->fd < 0) {
		if (c->fd >= 0)
			add_namespace(c);
		return;
	}
	size_t len;
	bool well = true;
	switch (op) {
	case 2:
		len = frame_put(c, buf);
		break;
	case 3:
	case 4:
	case 5:
	case 6:
	case 7:
	case 8: {
		static const uint16_t t[] = {KVT_MSG_ACQUIRE, KVT_MSG_LOOKUP,   KVT_MSG_DELETE,
		                             KVT_MSG_KEEP,    KVT_MSG_PREFETCH, KVT_MSG_DONE};
		len = frame_keys(c, buf, t[op - 3]);
		break;
	}
	case 9:
		len = frame_release(c, buf);
		break;
	case 10:
		*(struct kvt_msg_hdr *)buf = (struct kvt_msg_hdr){
		    .type = b & 0x20 ? KVT_MSG_STATS : KVT_MSG_PING, .len = 16, .seq = 8};
		len = 16;
		break;
	case 11: {
		bool mutated;
		len = frame_admin(buf, &mutated);
		well = !mutated;
		break;
	}
	case 12:
		len = frame_raw(buf);
		well = false;
		break;
	default:
		len = frame_mutated(c, buf);
		well = false;
	}
	exchange(c, buf, len, well);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!F.dir[0]) {
		signal(SIGPIPE, SIG_IGN);
		snprintf(F.dir, sizeof(F.dir), "/tmp/kvt-fuzzd-%d", (int)getpid());
		mkdir(F.dir, 0750);
		snprintf(F.sock, sizeof(F.sock), "%s/sock", F.dir);
		snprintf(F.data, sizeof(F.data), "%s/data", F.dir);
		atexit(remove_dir); /* kept after a failure, to be looked at */
		/* a warm-up with every tier: what outlives a stop (RocksDB's threads) is made
		 * before anything is counted */
		static const uint8_t all_tiers[] = {3, 0};
		F.in = all_tiers, F.n = sizeof(all_tiers), F.at = 0;
		layout();
		daemon_start();
		daemon_stop();
	}
	nftw(F.data, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	memset(F.allow, 0, sizeof(F.allow));
	for (int i = 0; i < N_CLIENTS; i++)
		F.c[i] = (struct client){.fd = -1};
	F.allow_full = F.clients_open = false;
	F.in = data, F.n = size, F.at = 0;
	int fds = count_dir("/proc/self/fd"), maps = count_shared_maps();
	layout();
	daemon_start();
	for (int ops = 0; F.at < F.n && ops < MAX_OPS; ops++) {
		run_op();
		check_held();
	}
	for (int i = 0; i < N_CLIENTS; i++)
		client_drop(&F.c[i]);
	pump_until(reply_deadline());
	if (busy())
		fail("still busy after every client left: %u demotions, %u promotions in flight",
		     F.d->demotes_inflight, F.d->promotes_inflight);
	if (F.d->n_leases)
		fail("%u leases outlived their clients", F.d->n_leases);
	static char out[8192];
	int rc = kvd_check(F.d, out, sizeof(out));
	if (rc)
		fail("kvtier check: %s (%s)", out, strerror(-rc));
	daemon_stop();
	int fds_after = count_dir("/proc/self/fd"), maps_after = count_shared_maps();
	if (fds_after != fds || maps_after != maps)
		fail("fds %d -> %d, shared mappings %d -> %d across a start and stop", fds,
		     fds_after, maps, maps_after);
	return 0;
}

#ifndef KVT_LIBFUZZER
#include "fuzz_corpus.h"

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
	return *s;
}

/* fuzz_daemon [PROGRAMS [CORPUS_DIR]]: the corpus, then PROGRAMS random ones (default 200). */
int main(int argc, char **argv)
{
	long programs = argc > 1 ? atol(argv[1]) : 200;
	long replayed = argc > 2 ? fuzz_replay_corpus(argv[2]) : 0;
	const char *seed = getenv("KVT_FUZZ_SEED");
	uint64_t s = seed ? strtoull(seed, NULL, 0) * 0x9e3779b97f4a7c15ull | 1 : 0x51f15e5eedull;
	static uint8_t in[1024];
	for (long p = 0; p < programs; p++) {
		size_t n = 16 + xorshift(&s) % 400;
		for (size_t i = 0; i < n; i++)
			in[i] = (uint8_t)xorshift(&s);
		LLVMFuzzerTestOneInput(in, n);
	}
	printf("%ld corpus inputs and %ld programs: %lld frames, %lld replies (%lld errors), %lld "
	       "connections closed, %lld leases checked, %lld stats rendered, %lld restarts (%lld "
	       "rocksdb repairs, %lld walks past damaged metadata, %lld damaged tables dropped "
	       "after their records were written again, %lld damaged blocks passed over, %lld "
	       "tables whose footer says no checksums left out); no property broken\n",
	       replayed, programs, F.frames, F.replies, F.errors, F.closed, F.leased, F.stats,
	       F.restarts, F.repairs, F.mended, F.evacuated, F.passed, F.unchecked);
	return 0;
}
#endif
