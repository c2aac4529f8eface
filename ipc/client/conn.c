/*
 * conn.c -- libkvtier's connection to kvtierd (the design: client.c): kvt_connect and the hello
 * (the pool and staging mappings, the shared lookup table), one request and its reply under the
 * client's timeout (kvt_set_timeout), reconnection with backoff that registers this client's
 * namespaces again (kvt_namespace keeps them), the mappings of connections that are gone while
 * leases on them are out, and kvt_close.
 */
#include "client_int.h"
#include "core/util.h"
#include "ipc/shmidx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void unmap_retired(struct retired *r)
{
	munmap(r->pool, r->pool_len);
	munmap(r->staging, r->staging_len);
}

/* Takes one lease (or the reservation) of epoch off its retired mappings, unmapping them once
 * nothing is out. Caller holds io. @return : whether epoch was one of this client's. */
bool kvt__cl_retired_put(struct kvt_client *c, uint32_t epoch, bool reservation)
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

void kvt__cl_drop_locked(struct kvt_client *c)
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
int64_t kvt__cl_send_locked(struct kvt_client *c, uint16_t type, size_t body_len)
{
	struct kvt_msg_hdr *h = (struct kvt_msg_hdr *)c->tx;
	*h = (struct kvt_msg_hdr){
	    .type = type, .len = (uint32_t)(sizeof(*h) + body_len), .seq = ++c->seq};
	int rc = kvt_proto_send(c->fd, c->tx, h->len, NULL, 0);
	if (rc) {
		kvt__cl_drop_locked(c);
		return rc == -EAGAIN ? -ETIMEDOUT : -ENOTCONN;
	}
	return h->seq;
}

/* Waits for the reply to request seq (replies come in request order) into c->rx. Caller
 * holds io. @return : the reply's status, or -ENOTCONN / -ETIMEDOUT (the connection dropped). */
int kvt__cl_recv_locked(struct kvt_client *c, uint32_t seq, size_t *reply_len, int *fds, int *nfds)
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
	kvt__cl_drop_locked(c);
	return rc == -EAGAIN ? -ETIMEDOUT : -ENOTCONN;
}

/* One request, one reply. Caller holds io and has a connection. @return : status or -errno. */
int kvt__cl_rpc_locked(struct kvt_client *c, uint16_t type, size_t body_len, size_t *reply_len,
                       int *fds, int *nfds)
{
	int64_t seq = kvt__cl_send_locked(c, type, body_len);
	if (seq < 0)
		return (int)seq;
	return kvt__cl_recv_locked(c, (uint32_t)seq, reply_len, fds, nfds);
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
	int rc = kvt__cl_rpc_locked(c, KVT_MSG_NAMESPACE, sizeof(*w) + nl + rl, &rlen, NULL, NULL);
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
	rc = kvt__cl_rpc_locked(c, KVT_MSG_HELLO, sizeof(*hi), &rlen, fds, &nfds);
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
		kvt__cl_drop_locked(c);
	return rc == KVT_E_VERSION ? rc : (rc < 0 ? rc : -EPROTO);
}

/* Makes sure there is a connection; reconnects with bounded backoff. Caller holds io. */
int kvt__cl_ensure_locked(struct kvt_client *c)
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
	int rc = kvt__cl_ensure_locked(c);
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

uint64_t kvt__cl_chunk_bytes(kvt_client_t *c, kvt_id_t ns)
{
	pthread_mutex_lock(&c->io);
	const struct ns_slot *s = ns_find_locked(c, ns);
	uint64_t cb = s ? s->chunk_bytes : 0;
	pthread_mutex_unlock(&c->io);
	return cb;
}

/* Connects if needed; then what the daemon said when the connection registered ns (0: taken,
 * or a refusal such as -EFBIG). Caller holds io. */
int kvt__cl_ready_locked(kvt_client_t *c, kvt_id_t ns)
{
	int rc = kvt__cl_ensure_locked(c);
	const struct ns_slot *s = rc ? NULL : ns_find_locked(c, ns);
	return s ? s->refused : rc;
}
