/*
 * client.c -- libkvtier: the engine's side of kvtierd (include/kvtier.h is the manual).
 *
 * State: one connection (fd), the tenant's pool mapped read-only (records + generation table),
 * and this client's private staging area mapped read-write. Two locks: `io` serialises a
 * request with its reply on the socket (and guards the connection state); `stage` gives the
 * staging area to one put (or one reserve..commit) at a time. Lock order: stage, then io.
 *
 * Reads never go through the daemon's copy: kvt_acquire returns offsets into the pool mapping,
 * and kvt_release checks each lease's generation in shared memory after the caller copied (a
 * seqlock read), then tells the daemon without waiting for a reply. kvt_get is acquire, copy,
 * release, check.
 *
 * Reconnection: a broken socket turns the current call into -ENOTCONN and drops the
 * connection; the next call reconnects (bounded exponential backoff, 1 ms .. 1 s) and
 * re-registers the namespaces this client had. An old connection's mappings stay while a lease
 * or a reservation taken on them is out (struct retired), so neither ever points at unmapped
 * memory; such leases release as -ESTALE.
 *
 * Timeout: every wait on the socket (connect, send, each reply) is bounded by the client's
 * timeout (SO_SNDTIMEO, SO_RCVTIMEO). A wait past it drops the connection, as a broken socket
 * does, and the call says -ETIMEDOUT: a daemon that stops answering (stopped, wedged, swapped
 * out) costs its engines one timeout, not every thread for ever. The late reply cannot be taken
 * for another request's, since the connection it would come on is gone.
 */
#include "kvtier.h"
#include "ipc/client/simple.h"
#include "core/keys.h"
#include "core/util.h"
#include "ipc/proto.h"
#include "ipc/shmidx.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct ns_slot {
	kvt_id_t ns;
	uint64_t chunk_bytes;
	int refused; /* the daemon's answer when a reconnect registered it again, else 0 */
	kvt_model_t m;
	char name[KVT_MODEL_STR_MAX + 1], rev[KVT_MODEL_STR_MAX + 1];
};

struct kvt_client {
	pthread_mutex_t io, stage;
	char path[KVT_SOCK_PATH_MAX];
	int fd;         /* -1 while disconnected; guarded by io */
	uint32_t epoch; /* bumps on every (re)connect */
	uint32_t seq;
	uint32_t daemon_minor; /* the protocol minor the daemon's hello said */
	uint32_t timeout_ms;   /* 0: wait for ever; guarded by io */
	uint8_t *pool;
	uint64_t pool_bytes, gen_bytes, map_bytes;
	_Atomic uint64_t *gens;
	const struct kvt_shmidx_hdr *lookup; /* the tenant's shared lookup table, or NULL */
	uint8_t *staging;
	uint64_t staging_bytes;
	uint64_t retry_at_ns, backoff_ns;
	struct ns_slot *nss; /* guarded by io */
	uint32_t n_nss, cap_nss;
	uint32_t leases;     /* out on this epoch's mappings; guarded by io */
	struct retired *old; /* guarded by io */
	uint32_t n_old, cap_old;
	/* an open reservation (kvt_put_reserve..commit), guarded by stage */
	uint32_t res_n, res_epoch;
	kvt_id_t res_ns;
	bool res_open; /* the same, for drop_conn_locked: guarded by io */
	/* guarded by io; aligned for the message structs written and read in place */
	_Alignas(8) uint8_t tx[KVT_MSG_MAX];
	_Alignas(8) uint8_t rx[KVT_MSG_MAX];
};

/*
 * The mappings of a connection that is gone stay while a lease or a reservation taken on them
 * is out, so that copying out of a lease (then release, then check) or filling a reserved buffer
 * never touches unmapped memory; the last release (commit, abort) unmaps them. Before, every old
 * connection's mappings stayed until kvt_close, up to 32 connections, and past those they were
 * unmapped at once: a client attached through many daemon restarts held an old host pool per
 * restart, and a lease read after the 33rd faulted.
 */
struct retired {
	uint32_t epoch, leases;
	bool reserved;
	void *pool, *staging;
	size_t pool_len, staging_len;
};

static void unmap_retired(struct retired *r)
{
	munmap(r->pool, r->pool_len);
	munmap(r->staging, r->staging_len);
}

/* Takes one lease (or the reservation) of epoch off its retired mappings, unmapping them once
 * nothing is out. Caller holds io. @return : whether epoch was one of this client's. */
static bool retired_put(struct kvt_client *c, uint32_t epoch, bool reservation)
{
	for (uint32_t i = 0; i < c->n_old; i++) {
		struct retired *r = &c->old[i];
		if (r->epoch != epoch)
			continue;
		if (reservation)
			r->reserved = false;
		else if (r->leases)
			r->leases--;
		if (!r->leases && !r->reserved) {
			unmap_retired(r);
			*r = c->old[--c->n_old];
		}
		return true;
	}
	return false;
}

static void drop_conn_locked(struct kvt_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	bool reserved = c->res_open && c->res_epoch == c->epoch;
	struct retired r = {c->epoch,   c->leases,    reserved,        c->pool,
	                    c->staging, c->map_bytes, c->staging_bytes};
	if (c->pool && (r.leases || reserved)) {
		if (c->n_old == c->cap_old) {
			uint32_t cap = c->cap_old ? 2 * c->cap_old : 4;
			struct retired *o = realloc(c->old, cap * sizeof(*o));
			if (o) {
				c->old = o;
				c->cap_old = cap;
			}
		}
		if (c->n_old < c->cap_old) /* else kept mapped for good: a leak, not a fault */
			c->old[c->n_old++] = r;
	} else if (c->pool) {
		unmap_retired(&r);
	}
	c->leases = 0;
	c->pool = c->staging = NULL;
	c->gens = NULL;
	c->lookup = NULL;
}

/* Sends the request in c->tx. Caller holds io.
 * @return : its sequence number, or -ENOTCONN / -ETIMEDOUT (the connection dropped). */
static int64_t send_locked(struct kvt_client *c, uint16_t type, size_t body_len)
{
	struct kvt_msg_hdr *h = (struct kvt_msg_hdr *)c->tx;
	*h = (struct kvt_msg_hdr){
	    .type = type, .len = (uint32_t)(sizeof(*h) + body_len), .seq = ++c->seq};
	int rc = kvt_proto_send(c->fd, c->tx, h->len, NULL, 0);
	if (rc) {
		drop_conn_locked(c);
		return rc == -EAGAIN ? -ETIMEDOUT : -ENOTCONN;
	}
	return h->seq;
}

/* Waits for the reply to request seq (replies come in request order) into c->rx. Caller
 * holds io. @return : the reply's status, or -ENOTCONN / -ETIMEDOUT (the connection dropped). */
static int recv_locked(struct kvt_client *c, uint32_t seq, size_t *reply_len, int *fds, int *nfds)
{
	int rc;
	for (;;) {
		ssize_t n = kvt_proto_recv(c->fd, c->rx, sizeof(c->rx), fds, nfds);
		if (n <= 0) {
			rc = n == 0 ? -ENOTCONN : (int)n;
			goto broken;
		}
		const struct kvt_msg_hdr *r = (const struct kvt_msg_hdr *)c->rx;
		if ((size_t)n < sizeof(*r) || r->len != (size_t)n) {
			rc = -EPROTO;
			goto broken;
		}
		if (r->seq != seq)
			continue; /* a reply nobody waits for any more */
		if (reply_len)
			*reply_len = (size_t)n - sizeof(*r);
		return r->status;
	}
broken:
	if (nfds) {
		for (int i = 0; i < *nfds && i < 2; i++)
			close(fds[i]);
		*nfds = 0;
	}
	drop_conn_locked(c);
	return rc == -EAGAIN ? -ETIMEDOUT : -ENOTCONN;
}

/* One request, one reply. Caller holds io and has a connection. @return : status or -errno. */
static int rpc_locked(struct kvt_client *c, uint16_t type, size_t body_len, size_t *reply_len,
                      int *fds, int *nfds)
{
	int64_t seq = send_locked(c, type, body_len);
	if (seq < 0)
		return (int)seq;
	return recv_locked(c, (uint32_t)seq, reply_len, fds, nfds);
}

static int send_namespace_locked(struct kvt_client *c, const kvt_model_t *m, kvt_id_t *ns,
                                 uint64_t *chunk_bytes)
{
	struct kvt_msg_namespace *w =
	    (struct kvt_msg_namespace *)(c->tx + sizeof(struct kvt_msg_hdr));
	size_t nl = strlen(m->name), rl = m->revision ? strlen(m->revision) : 0;
	*w = (struct kvt_msg_namespace){.dtype = m->dtype,
	                                .n_layers = m->n_layers,
	                                .n_kv_heads = m->n_kv_heads,
	                                .head_dim = m->head_dim,
	                                .tokens_per_chunk = m->tokens_per_chunk,
	                                .tp_rank = m->tp_rank,
	                                .tp_size = m->tp_size,
	                                .kv_group = m->kv_group,
	                                .layout = m->layout,
	                                .name_len = (uint16_t)nl,
	                                .revision_len = (uint16_t)rl};
	memcpy(w + 1, m->name, nl);
	if (rl)
		memcpy((char *)(w + 1) + nl, m->revision, rl);
	size_t rlen = 0;
	int rc = rpc_locked(c, KVT_MSG_NAMESPACE, sizeof(*w) + nl + rl, &rlen, NULL, NULL);
	if (rc < 0)
		return rc;
	if (rlen < sizeof(struct kvt_msg_namespace_reply))
		return -EPROTO;
	const struct kvt_msg_namespace_reply *r =
	    (const void *)(c->rx + sizeof(struct kvt_msg_hdr));
	*ns = r->ns;
	*chunk_bytes = r->chunk_bytes;
	return 0;
}

/* Bounds every blocking send and receive on fd (and connect: a daemon that does not accept
 * fills its backlog) by ms; 0 waits for ever. @return : 0 or -errno. */
static int set_socket_timeout(int fd, uint32_t ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		return -errno;
	return 0;
}

static int hello_locked(struct kvt_client *c)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path, c->path, strlen(c->path) + 1);
	int rc = set_socket_timeout(fd, c->timeout_ms);
	if (rc || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		rc = rc ? rc : errno == EAGAIN ? -ETIMEDOUT : -errno;
		close(fd);
		return rc;
	}
	c->fd = fd;
	struct kvt_msg_hello *hi = (struct kvt_msg_hello *)(c->tx + sizeof(struct kvt_msg_hdr));
	*hi = (struct kvt_msg_hello){
	    .major = KVT_PROTO_MAJOR, .minor = KVT_PROTO_MINOR, .pid = (uint32_t)getpid()};
	int fds[2] = {-1, -1}, nfds = 2;
	size_t rlen = 0;
	rc = rpc_locked(c, KVT_MSG_HELLO, sizeof(*hi), &rlen, fds, &nfds);
	if (rc < 0)
		goto err;
	struct kvt_msg_hello_reply r0 = {0}, *r = &r0;
	if (rlen < KVT_HELLO_REPLY_V0_BYTES || nfds != 2) {
		rc = -EPROTO;
		goto err;
	}
	memcpy(r, c->rx + sizeof(struct kvt_msg_hdr), KVT_MIN(rlen, sizeof(r0)));
	if (r->major != KVT_PROTO_MAJOR) {
		rc = -EPROTO;
		goto err;
	}
	c->daemon_minor = rlen >= sizeof(r0) ? r->minor : 0;
	uint64_t map_bytes = r->pool_bytes + r->gen_bytes;
	if (r->lookup_bytes && r->lookup_off == map_bytes)
		map_bytes += r->lookup_bytes;
	void *pool = mmap(NULL, map_bytes, PROT_READ, MAP_SHARED, fds[0], 0);
	if (pool == MAP_FAILED) {
		rc = -errno;
		goto err;
	}
	void *stg = mmap(NULL, r->staging_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
	if (stg == MAP_FAILED) {
		rc = -errno;
		munmap(pool, map_bytes);
		goto err;
	}
	close(fds[0]);
	close(fds[1]);
	c->pool = pool;
	c->pool_bytes = r->pool_bytes;
	c->gen_bytes = r->gen_bytes;
	c->gens = (_Atomic uint64_t *)(c->pool + c->pool_bytes);
	c->map_bytes = map_bytes;
	c->lookup = NULL;
	if (map_bytes > r->pool_bytes + r->gen_bytes) {
		const struct kvt_shmidx_hdr *t = (const void *)(c->pool + r->lookup_off);
		if (t->magic == KVT_SHMIDX_MAGIC && t->slots && !(t->slots & (t->slots - 1)) &&
		    kvt_shmidx_bytes(t->slots) <= r->lookup_bytes)
			c->lookup = t;
	}
	c->staging = stg;
	c->staging_bytes = r->staging_bytes;
	/* unique in the process, so that a lease given to another client's release is not taken
	 * for one of its own (it was reported valid and released nothing) */
	static _Atomic uint32_t epochs;
	c->epoch = atomic_fetch_add(&epochs, 1) + 1;
	for (uint32_t i = 0; i < c->n_nss; i++) {
		kvt_id_t ns;
		uint64_t cb;
		rc = send_namespace_locked(c, &c->nss[i].m, &ns, &cb);
		if (rc < 0 && c->fd < 0)
			goto err_conn;
		/* a daemon restarted with a smaller host or staging area may refuse one model: its
		 * puts say why, and the others go on (the whole reconnect failed, for good) */
		c->nss[i].refused = rc < 0 ? rc : 0;
	}
	return 0;
err:
	for (int i = 0; i < nfds && i < 2; i++)
		close(fds[i]);
err_conn:
	if (c->fd >= 0)
		drop_conn_locked(c);
	return rc == KVT_E_VERSION ? rc : (rc < 0 ? rc : -EPROTO);
}

/* Makes sure there is a connection; reconnects with bounded backoff. Caller holds io. */
static int ensure_locked(struct kvt_client *c)
{
	if (c->fd >= 0)
		return 0;
	uint64_t now = kvt_now_ns();
	if (now < c->retry_at_ns)
		return -ENOTCONN;
	int rc = hello_locked(c);
	if (rc) {
		c->backoff_ns =
		    c->backoff_ns ? KVT_MIN(c->backoff_ns * 2, 1000000000ull) : 1000000ull;
		c->retry_at_ns = now + c->backoff_ns;
		/* why, where the daemon said or the wait ran out; else "not connected" */
		bool told =
		    rc == KVT_E_VERSION || rc == -EACCES || rc == -EUSERS || rc == -ETIMEDOUT;
		return told ? rc : -ENOTCONN;
	}
	c->backoff_ns = 0;
	c->retry_at_ns = 0;
	return 0;
}

/* $KVTIER_TIMEOUT_MS, else KVT_TIMEOUT_DEFAULT_MS. @return : 0, or -EINVAL when it is set and
 * not a whole number of milliseconds up to a day (a typo must not mean "wait for ever"). */
static int timeout_from_env(uint32_t *ms)
{
	*ms = KVT_TIMEOUT_DEFAULT_MS;
	const char *v = getenv("KVTIER_TIMEOUT_MS");
	if (!v)
		return 0;
	while (*v == ' ' || *v == '\t')
		v++;
	char *end;
	errno = 0;
	unsigned long long t = strtoull(v, &end, 10);
	while (*end == ' ' || *end == '\t')
		end++;
	if (errno || end == v || *end || *v == '-' || t > KVT_TIMEOUT_MAX_MS)
		return -EINVAL;
	*ms = (uint32_t)t;
	return 0;
}

KVT_API int kvt_set_timeout(kvt_client_t *c, uint32_t ms)
{
	if (!c || ms > KVT_TIMEOUT_MAX_MS)
		return -EINVAL;
	pthread_mutex_lock(&c->io);
	c->timeout_ms = ms;
	int rc = c->fd >= 0 ? set_socket_timeout(c->fd, ms) : 0;
	pthread_mutex_unlock(&c->io);
	return rc;
}

KVT_API int kvt_connect(const char *socket_path, kvt_client_t **out)
{
	if (!out)
		return -EINVAL;
	struct kvt_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = -1;
	int rc;
	if (socket_path) {
		if (strlen(socket_path) >= sizeof(c->path)) {
			rc = -ENAMETOOLONG;
			goto err;
		}
		strcpy(c->path, socket_path);
	} else if ((rc = kvt_sockpath_client(c->path, sizeof(c->path)))) {
		goto err;
	}
	if ((rc = timeout_from_env(&c->timeout_ms)))
		goto err;
	pthread_mutex_init(&c->io, NULL);
	/* error-checking: a put from the thread that holds a reservation is -EDEADLK, not a hang */
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&c->stage, &ma);
	pthread_mutexattr_destroy(&ma);
	rc = hello_locked(c);
	if (rc) {
		pthread_mutex_destroy(&c->io);
		pthread_mutex_destroy(&c->stage);
		goto err; /* no lease or reservation was taken: nothing retired */
	}
	*out = c;
	return 0;
err:
	free(c);
	return rc;
}

KVT_API void kvt_close(kvt_client_t *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd); /* the daemon releases every lease of this connection */
	if (c->pool)
		munmap(c->pool, c->map_bytes);
	if (c->staging)
		munmap(c->staging, c->staging_bytes);
	for (uint32_t i = 0; i < c->n_old; i++)
		unmap_retired(&c->old[i]);
	free(c->old);
	pthread_mutex_destroy(&c->io);
	pthread_mutex_destroy(&c->stage);
	free(c->nss);
	free(c);
}

static const struct ns_slot *ns_find_locked(const struct kvt_client *c, kvt_id_t ns)
{
	for (uint32_t i = 0; i < c->n_nss; i++)
		if (kvt_id_eq(c->nss[i].ns, ns))
			return &c->nss[i];
	return NULL;
}

KVT_API int kvt_namespace(kvt_client_t *c, const kvt_model_t *m, kvt_id_t *ns_out)
{
	kvt_id_t local;
	if (!c || !ns_out || kvt_namespace_id(m, &local))
		return -EINVAL;
	pthread_mutex_lock(&c->io);
	int rc = ensure_locked(c);
	kvt_id_t ns;
	uint64_t cb = 0;
	if (!rc)
		rc = send_namespace_locked(c, m, &ns, &cb);
	if (!rc && (!kvt_id_eq(ns, local) || cb != kvt_chunk_bytes(m)))
		rc = -EPROTO; /* the daemon disagrees with docs/keys.md */
	if (!rc && !ns_find_locked(c, ns)) {
		if (c->n_nss == c->cap_nss) {
			uint32_t cap = c->cap_nss ? c->cap_nss * 2 : 4;
			struct ns_slot *v = realloc(c->nss, sizeof(*v) * cap);
			if (!v) {
				rc = -ENOMEM;
				goto out;
			}
			c->nss = v;
			c->cap_nss = cap;
			for (uint32_t i = 0; i < c->n_nss; i++) { /* re-point the copied strings */
				c->nss[i].m.name = c->nss[i].name;
				c->nss[i].m.revision = c->nss[i].rev;
			}
		}
		struct ns_slot *s = &c->nss[c->n_nss++];
		s->refused = 0;
		s->ns = ns;
		s->chunk_bytes = cb;
		s->m = *m;
		snprintf(s->name, sizeof(s->name), "%s", m->name);
		snprintf(s->rev, sizeof(s->rev), "%s", m->revision ? m->revision : "");
		s->m.name = s->name;
		s->m.revision = s->rev;
	}
	if (!rc) {
		((struct ns_slot *)ns_find_locked(c, ns))->refused = 0; /* registered again */
		*ns_out = ns;
	}
out:
	pthread_mutex_unlock(&c->io);
	return rc;
}

static uint64_t ns_chunk_bytes(kvt_client_t *c, kvt_id_t ns)
{
	pthread_mutex_lock(&c->io);
	const struct ns_slot *s = ns_find_locked(c, ns);
	uint64_t cb = s ? s->chunk_bytes : 0;
	pthread_mutex_unlock(&c->io);
	return cb;
}

/* Connects if needed; then what the daemon said when the connection registered ns (0: taken,
 * or a refusal such as -EFBIG). Caller holds io. */
static int ready_locked(kvt_client_t *c, kvt_id_t ns)
{
	int rc = ensure_locked(c);
	const struct ns_slot *s = rc ? NULL : ns_find_locked(c, ns);
	return s ? s->refused : rc;
}

/* Connects if needed and reports the staging area of the current epoch, reserved (kept mapped
 * through a reconnect) until end_reservation. Caller holds stage. */
static int staging_of(kvt_client_t *c, kvt_id_t ns, uint64_t cb, uint8_t **stg, uint64_t *bytes,
                      uint32_t *epoch)
{
	pthread_mutex_lock(&c->io);
	int rc = ready_locked(c, ns);
	*stg = c->staging;
	*bytes = c->staging_bytes;
	*epoch = c->epoch;
	c->res_open = !rc && *bytes / cb; /* what kvt_put_reserve hands out */
	c->res_epoch = *epoch;
	pthread_mutex_unlock(&c->io);
	return rc;
}

/* The reservation is over: its buffers may go with their connection. Caller holds stage. */
static void end_reservation(kvt_client_t *c)
{
	pthread_mutex_lock(&c->io);
	c->res_open = false;
	c->res_n = 0;
	if (c->fd < 0 || c->epoch != c->res_epoch)
		retired_put(c, c->res_epoch, true);
	pthread_mutex_unlock(&c->io);
}

/* Writes a PUT for k chunks at staging offset base into c->tx. Caller holds io. */
static size_t put_msg(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *parent, const kvt_id_t *keys,
                      uint32_t k, uint64_t cb, uint64_t base)
{
	struct kvt_msg_put *p = (struct kvt_msg_put *)(c->tx + sizeof(struct kvt_msg_hdr));
	*p = (struct kvt_msg_put){.ns = ns, .n = k, .chunk_bytes = cb};
	if (parent) {
		p->parent = *parent;
		p->flags = KVT_PUT_F_PARENT;
	}
	struct kvt_msg_put_item *it = (struct kvt_msg_put_item *)(p + 1);
	for (uint32_t i = 0; i < k; i++)
		it[i] = (struct kvt_msg_put_item){.key = keys[i], .staging_off = base + i * cb};
	return sizeof(*p) + k * sizeof(*it);
}

/* Sends PUT for k chunks already in staging at i * chunk_bytes. Caller holds stage. */
static int commit_staged(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *parent, const kvt_id_t *keys,
                         uint32_t k, uint64_t cb, uint32_t epoch)
{
	pthread_mutex_lock(&c->io);
	int rc = c->fd >= 0 && c->epoch == epoch ? 0 : -ENOTCONN;
	if (!rc)
		rc = rpc_locked(c, KVT_MSG_PUT, put_msg(c, ns, parent, keys, k, cb, 0), NULL, NULL,
		                NULL);
	pthread_mutex_unlock(&c->io);
	return rc;
}

/*
 * kvt_put pipelines: the staging area is used as two halves, and while the daemon copies one
 * sub-batch out of one half, this thread copies the next into the other (replies come back in
 * order). Sub-batches are about 4 MiB, so both sides stay busy on large batches. After a short
 * or failed reply nothing more is sent; chunks of sub-batches already sent past the gap may be
 * stored, but they are not counted (only a prefix's leading chunks are useful).
 */
KVT_API int kvt_put(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *parent, const kvt_id_t *keys,
                    size_t n, const void *const *chunks, size_t chunk_len)
{
	if (!c || (!keys && n) || (!chunks && n))
		return -EINVAL;
	uint64_t cb = ns_chunk_bytes(c, ns);
	if (!cb || chunk_len != cb)
		return -EINVAL;
	if (!n)
		return 0;
	if (pthread_mutex_lock(&c->stage))
		return -EDEADLK; /* this thread holds a reservation: commit or abort it first */
	pthread_mutex_lock(&c->io);
	int rc = ready_locked(c, ns);
	size_t per = 0;
	if (!rc) {
		uint64_t half = c->staging_bytes / 2;
		per =
		    half / cb ? half / cb : c->staging_bytes / cb; /* one slot when only one fits */
		per = KVT_MIN(per, KVT_MAX((size_t)1, (size_t)((4u << 20) / cb)));
		per = KVT_MIN(per, (size_t)KVT_BATCH_MAX);
		if (!per)
			rc = -EFBIG; /* one chunk is larger than the staging area */
	}
	int slots = rc ? 0 : (c->staging_bytes / cb >= 2 * per ? 2 : 1);
	struct {
		uint32_t seq, k;
	} fly[2];
	int nfly = 0, head = 0;
	size_t sent = 0, done = 0;
	bool stop = rc != 0;
	while ((!stop && sent < n) || nfly) {
		if (!stop && sent < n && nfly < slots) {
			int slot = (head + nfly) % slots;
			uint32_t k = (uint32_t)KVT_MIN(n - sent, per);
			uint64_t base = (uint64_t)slot * per * cb;
			for (uint32_t i = 0; i < k; i++)
				memcpy(c->staging + base + i * cb, chunks[sent + i], cb);
			size_t len = put_msg(c, ns, sent ? &keys[sent - 1] : parent, keys + sent, k,
			                     cb, base);
			if (sent) /* stored only if the message before it was stored whole */
				((struct kvt_msg_put *)(c->tx + sizeof(struct kvt_msg_hdr)))
				    ->flags |= KVT_PUT_F_CONTINUES;
			int64_t seq = send_locked(c, KVT_MSG_PUT, len);
			if (seq < 0) {
				rc = (int)seq;
				break; /* the connection is gone, and with it every reply */
			}
			fly[slot] = (typeof(fly[0])){(uint32_t)seq, k};
			nfly++;
			sent += k;
			continue;
		}
		int got = recv_locked(c, fly[head].seq, NULL, NULL, NULL);
		if (c->fd < 0) { /* dropped (-ENOTCONN, -ETIMEDOUT), and with it every reply */
			rc = got;
			break;
		}
		if (!stop) {
			if (got < 0)
				rc = got;
			else
				done += (size_t)got;
			stop = got < (int)fly[head].k;
		}
		head = (head + 1) % slots;
		nfly--;
	}
	pthread_mutex_unlock(&c->io);
	pthread_mutex_unlock(&c->stage);
	return done ? (int)done : rc;
}

KVT_API int kvt_put_reserve(kvt_client_t *c, kvt_id_t ns, size_t n, void **bufs)
{
	if (!c || !n || !bufs)
		return -EINVAL;
	uint64_t cb = ns_chunk_bytes(c, ns);
	if (!cb)
		return -EINVAL;
	if (pthread_mutex_lock(&c->stage))
		return -EDEADLK; /* this thread holds a reservation already */
	uint8_t *stg;
	uint64_t sbytes;
	uint32_t epoch;
	int rc = staging_of(c, ns, cb, &stg, &sbytes, &epoch);
	size_t k = KVT_MIN(n, KVT_MIN(sbytes / cb, (uint64_t)KVT_BATCH_MAX));
	if (!rc && !k)
		rc = -EFBIG;
	if (rc) {
		end_reservation(c);
		pthread_mutex_unlock(&c->stage);
		return rc;
	}
	for (size_t i = 0; i < k; i++)
		bufs[i] = stg + i * cb;
	c->res_n = (uint32_t)k;
	c->res_ns = ns;
	return (int)k; /* stage stays locked until commit or abort */
}

KVT_API int kvt_put_commit(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *parent,
                           const kvt_id_t *keys, size_t n)
{
	if (!c || !c->res_n)
		return -EINVAL;
	int rc;
	if (!kvt_id_eq(ns, c->res_ns) || n > c->res_n || !keys)
		rc = -EINVAL;
	else
		rc = commit_staged(c, ns, parent, keys, (uint32_t)n, ns_chunk_bytes(c, ns),
		                   c->res_epoch);
	end_reservation(c);
	pthread_mutex_unlock(&c->stage);
	return rc;
}

KVT_API void kvt_put_abort(kvt_client_t *c)
{
	if (!c || !c->res_n)
		return;
	end_reservation(c);
	pthread_mutex_unlock(&c->stage);
}

/* LOOKUP, DELETE or ACQUIRE of up to KVT_BATCH_MAX keys. Caller holds io. */
/* Writes a namespace and k keys into c->tx. Caller holds io. @return : the body's length. */
static size_t keys_msg(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, uint32_t k, uint32_t arg)
{
	struct kvt_msg_keys *m = (struct kvt_msg_keys *)(c->tx + sizeof(struct kvt_msg_hdr));
	*m = (struct kvt_msg_keys){.ns = ns, .n = k, .arg = arg};
	memcpy(m + 1, keys, k * sizeof(kvt_id_t));
	return sizeof(*m) + k * sizeof(kvt_id_t);
}

/* One keys request (arg: KEEP's ttl_ms, else 0), connecting first; -EOPNOTSUPP from a daemon
 * older than the type. Caller holds io. */
static int keys_rpc_locked(kvt_client_t *c, uint16_t type, kvt_id_t ns, const kvt_id_t *keys,
                           uint32_t k, uint32_t arg, size_t *rlen)
{
	int rc = ensure_locked(c);
	if (rc)
		return rc;
	if (c->daemon_minor < kvt_proto_minor_of(type))
		return -EOPNOTSUPP;
	return rpc_locked(c, type, keys_msg(c, ns, keys, k, arg), rlen, NULL, NULL);
}

/* A keys request in batches: the daemon's counts added up (LOOKUP stops at its first miss). */
static int keys_call(kvt_client_t *c, uint16_t type, kvt_id_t ns, const kvt_id_t *keys, size_t n,
                     uint32_t arg)
{
	if (!c || (!keys && n))
		return -EINVAL;
	size_t done = 0, total = 0; /* keys sent, and the daemon's count */
	while (done < n) {
		uint32_t k = (uint32_t)KVT_MIN(n - done, (size_t)KVT_BATCH_MAX);
		pthread_mutex_lock(&c->io);
		int rc = keys_rpc_locked(c, type, ns, keys + done, k, arg, NULL);
		pthread_mutex_unlock(&c->io);
		if (rc < 0)
			return total ? (int)total : rc;
		total += (size_t)rc;
		done += k;
		if (type == KVT_MSG_LOOKUP && (uint32_t)rc < k)
			break; /* leading hits only */
	}
	return (int)total;
}

#define ASK_DAEMON INT_MIN

/* The shared table's answer: how many leading keys are present, ASK_DAEMON, or -errno (no
 * connection, and none could be made). */
static int lookup_shared(kvt_client_t *c, const kvt_id_t *keys, size_t n)
{
	pthread_mutex_lock(&c->io);
	int rc = ensure_locked(c);
	/* a table of a daemon that died answers nothing: one poll() tells (~1 us a batch) */
	struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
	if (!rc && c->lookup && poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR))) {
		drop_conn_locked(c);
		rc = -ENOTCONN;
	}
	const struct kvt_shmidx_hdr *t = rc ? NULL : c->lookup;
	pthread_mutex_unlock(&c->io); /* the mapping stays until kvt_close, even on reconnect */
	if (rc)
		return rc;
	if (!t || !atomic_load_explicit(&t->complete, memory_order_acquire))
		return ASK_DAEMON;
	size_t i = 0;
	for (; i < n; i++) {
		int r = kvt_shmidx_find(t, keys[i]);
		if (r < 0)
			return ASK_DAEMON;
		if (!r)
			break;
	}
	if (!atomic_load_explicit(&t->complete, memory_order_acquire))
		return ASK_DAEMON; /* a rebuild started meanwhile */
	return (int)KVT_MIN(i, (size_t)INT32_MAX);
}

KVT_API int kvt_lookup(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n)
{
	if (!c || (!keys && n))
		return -EINVAL;
	int hit = lookup_shared(c, keys, n);
	return hit != ASK_DAEMON ? hit : keys_call(c, KVT_MSG_LOOKUP, ns, keys, n, 0);
}

KVT_API int kvt_delete(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n)
{
	return keys_call(c, KVT_MSG_DELETE, ns, keys, n, 0);
}

KVT_API int kvt_keep(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n, uint32_t ttl_ms)
{
	return keys_call(c, KVT_MSG_KEEP, ns, keys, n, ttl_ms);
}

/* Lease bookkeeping lives in the public struct's opaque fields. */
#define L_GEN_LO  0
#define L_GEN_HI  1
#define L_GEN_IDX 2
#define L_EPOCH   3

KVT_API int kvt_acquire(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n,
                        kvt_lease_t *out)
{
	if (!c || (!keys && n) || (!out && n))
		return -EINVAL;
	size_t total = 0;
	while (total < n) {
		uint32_t k = (uint32_t)KVT_MIN(n - total, (size_t)KVT_BATCH_MAX);
		pthread_mutex_lock(&c->io);
		size_t rlen = 0;
		/* the daemon waits for promotions at most half our timeout, not past it */
		int rc =
		    keys_rpc_locked(c, KVT_MSG_ACQUIRE, ns, keys + total, k, c->timeout_ms, &rlen);
		if (rc > 0 && (rc > (int)k || rlen < (size_t)rc * sizeof(struct kvt_msg_lease)))
			rc = -EPROTO;
		const struct kvt_msg_lease *l = (const void *)(c->rx + sizeof(struct kvt_msg_hdr));
		for (int i = 0; i < rc; i++) {
			kvt_lease_t *o = &out[total + (size_t)i];
			memset(o, 0, sizeof(*o));
			if (l[i].payload_off > c->pool_bytes ||
			    l[i].payload_bytes > c->pool_bytes - l[i].payload_off ||
			    l[i].gen_index >= c->gen_bytes / 8) {
				rc = -EPROTO;
				break;
			}
			o->data = c->pool + l[i].payload_off;
			o->len = l[i].payload_bytes;
			o->handle = l[i].handle;
			o->codec = l[i].codec;
			o->reserved[L_GEN_LO] = (uint32_t)l[i].gen;
			o->reserved[L_GEN_HI] = (uint32_t)(l[i].gen >> 32);
			o->reserved[L_GEN_IDX] = l[i].gen_index;
			o->reserved[L_EPOCH] = c->epoch;
		}
		if (rc > 0)
			c->leases +=
			    (uint32_t)rc; /* keeps this epoch's mappings past a reconnect */
		pthread_mutex_unlock(&c->io);
		if (rc < 0) {
			if (total)
				kvt_release(c, out, total);
			return rc;
		}
		total += (size_t)rc;
		if ((uint32_t)rc < k)
			break;
	}
	return (int)total;
}

KVT_API int kvt_release(kvt_client_t *c, kvt_lease_t *leases, size_t n)
{
	if (!c || (!leases && n))
		return -EINVAL;
	/* the caller's copies must be complete before the generations are read */
	atomic_thread_fence(memory_order_seq_cst);
	pthread_mutex_lock(&c->io);
	int valid = 0;
	size_t sent = 0;
	struct kvt_msg_release *r = (struct kvt_msg_release *)(c->tx + sizeof(struct kvt_msg_hdr));
	uint64_t *handles = (uint64_t *)(r + 1);
	const size_t max = (KVT_MSG_MAX - sizeof(struct kvt_msg_hdr) - sizeof(*r)) / 8;
	for (size_t i = 0; i < n; i++) {
		kvt_lease_t *l = &leases[i];
		uint64_t gen = (uint64_t)l->reserved[L_GEN_HI] << 32 | l->reserved[L_GEN_LO];
		bool current =
		    c->fd >= 0 && l->reserved[L_EPOCH] == c->epoch &&
		    l->reserved[L_GEN_IDX] < c->gen_bytes / 8; /* a damaged lease: stale */
		if (current && atomic_load_explicit(&c->gens[l->reserved[L_GEN_IDX]],
		                                    memory_order_relaxed) == gen) {
			l->status = 0;
			valid++;
		} else {
			l->status = -ESTALE;
		}
		bool mine = current;
		if (current) {
			handles[sent++] = l->handle;
			c->leases -= c->leases > 0;
		} else if (l->reserved[L_EPOCH]) { /* unmapped with its last */
			mine = retired_put(c, l->reserved[L_EPOCH], false);
		}
		if (mine) /* released: a second release is -ESTALE, and changes nothing */
			l->reserved[L_EPOCH] = 0;
		if (sent == max || (i + 1 == n && sent)) {
			struct kvt_msg_hdr *h = (struct kvt_msg_hdr *)c->tx;
			*r = (struct kvt_msg_release){.n = (uint32_t)sent};
			*h = (struct kvt_msg_hdr){
			    .type = KVT_MSG_RELEASE,
			    .len = (uint32_t)(sizeof(*h) + sizeof(*r) + sent * 8),
			    .seq = ++c->seq};
			if (kvt_proto_send(c->fd, c->tx, h->len, NULL, 0))
				drop_conn_locked(c); /* the daemon releases on disconnect anyway */
			sent = 0;
		}
	}
	pthread_mutex_unlock(&c->io);
	return valid;
}

/* Sends keys as hints of type (no reply), KVT_BATCH_MAX a message; needs a daemon that knows
 * the type (kvt_proto_minor_of: an older one would answer a message it does not know). */
static int send_hints(kvt_client_t *c, uint16_t type, kvt_id_t ns, const kvt_id_t *keys, size_t n)
{
	if (!c || (!keys && n))
		return -EINVAL;
	pthread_mutex_lock(&c->io);
	int rc = ensure_locked(c);
	if (!rc && c->daemon_minor < kvt_proto_minor_of(type))
		rc = -EOPNOTSUPP;
	for (size_t done = 0; !rc && done < n;) {
		uint32_t k = (uint32_t)KVT_MIN(n - done, (size_t)KVT_BATCH_MAX);
		int64_t seq = send_locked(c, type, keys_msg(c, ns, keys + done, k, 0));
		rc = seq < 0 ? (int)seq : 0;
		done += k;
	}
	pthread_mutex_unlock(&c->io);
	return rc;
}

KVT_API int kvt_prefetch(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n)
{
	return send_hints(c, KVT_MSG_PREFETCH, ns, keys, n);
}

KVT_API int kvt_done(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n)
{
	return send_hints(c, KVT_MSG_DONE, ns, keys, n);
}

KVT_API int kvt_get(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n, void *const *dst,
                    size_t dst_len)
{
	if (!c || (!keys && n) || (!dst && n))
		return -EINVAL;
	uint64_t cb = ns_chunk_bytes(c, ns);
	if (!cb || dst_len < cb)
		return -EINVAL;
	kvt_lease_t leases[64];
	size_t total = 0;
	/* batches of at most 64 chunks, 64 MiB and a quarter of the tenant's pool (host): a batch
	 * that a lower tier must promote has to fit in host beside the next two, prefetched
	 * meanwhile (a batch larger than host would come back cut short) */
	pthread_mutex_lock(&c->io); /* a reconnect maps the pool again */
	uint64_t pool = c->pool_bytes;
	pthread_mutex_unlock(&c->io);
	uint64_t most = KVT_MIN((uint64_t)64 << 20, pool ? pool / 4 : ~0ull);
	size_t per = (size_t)KVT_MIN((uint64_t)64, KVT_MAX((uint64_t)1, most / cb));
	while (total < n) {
		size_t k = KVT_MIN(n - total, per);
		int got = kvt_acquire(c, ns, keys + total, k, leases);
		if (got <= 0)
			return total ? (int)total : got;
		/* the next two batches move up while we copy (keys already on their way or at host
		 * cost the daemon a lookup each) */
		if ((size_t)got == k && total + k < n)
			kvt_prefetch(c, ns, keys + total + k, KVT_MIN(n - total - k, 2 * k));
		for (int i = 0; i < got; i++)
			memcpy(dst[total + (size_t)i], leases[i].data, KVT_MIN(leases[i].len, cb));
		kvt_release(c, leases, (size_t)got);
		int ok = 0;
		while (ok < got && leases[ok].status == 0 && leases[ok].len == cb)
			ok++;
		total += (size_t)ok;
		if (ok < (int)k)
			break;
	}
	return (int)total;
}

int kvt__client_simple(kvt_client_t *c, uint16_t type, const char *in, char *out, size_t out_len)
{
	pthread_mutex_lock(&c->io);
	size_t rlen = 0, ilen = in ? strlen(in) : 0;
	int rc = ensure_locked(c);
	if (!rc && ilen > KVT_MSG_MAX - sizeof(struct kvt_msg_hdr))
		rc = -EINVAL;
	if (!rc) {
		if (ilen)
			memcpy(c->tx + sizeof(struct kvt_msg_hdr), in, ilen);
		rc = rpc_locked(c, type, ilen, &rlen, NULL, NULL);
	}
	if (out && out_len) { /* the reply's text, also with an error status */
		size_t n = KVT_MIN(rlen, out_len - 1);
		memcpy(out, c->rx + sizeof(struct kvt_msg_hdr), n);
		out[n] = 0;
	}
	pthread_mutex_unlock(&c->io);
	return rc;
}
