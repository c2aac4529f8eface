/*
 * conn.c -- client connections: accept, the hello (credentials, tenant, fds), and the request
 * dispatch. Every field from a client is validated before use (proto.c); a malformed frame,
 * fds sent by the client, or a request before the hello closes the connection; a well-formed
 * request that fails gets an error reply. Replies never block: a client that does not read
 * its replies is disconnected.
 */
#include "daemon.h"
#include "core/keys.h"
#include "core/log.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

static int conn_slot(struct kvd *d)
{
	for (uint32_t i = 0; i < d->cap_conns; i++)
		if (d->conns[i].fd < 0)
			return (int)i;
	uint32_t max = (uint32_t)kvt_opt_u64(&d->opts, KVT_OPT_CLIENT_MAX);
	if (d->cap_conns >= max)
		return -EMFILE;
	uint32_t cap = d->cap_conns ? d->cap_conns * 2 : 16;
	if (cap > max)
		cap = max;
	struct kvd_conn *c = realloc(d->conns, sizeof(*c) * cap);
	if (!c)
		return -ENOMEM;
	for (uint32_t i = d->cap_conns; i < cap; i++)
		c[i] = (struct kvd_conn){
		    .fd = -1, .pidfd = -1, .tenant = KVD_NIL, .lease_head = KVD_NIL};
	int slot = (int)d->cap_conns;
	d->conns = c;
	d->cap_conns = cap;
	return slot;
}

/* The peer's supplementary groups, for client.allow (none kept when it has more than fit). */
static void peer_groups(struct kvd_conn *c)
{
	gid_t g[KVD_PEER_GROUPS];
	socklen_t len = sizeof(g);
	c->n_groups = 0;
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, g, &len)) {
		if (errno == ERANGE)
			kvt_log_rl(KVT_LOG_WARN,
			           "pid %d: %u groups, more than %d: client.allow sees its primary "
			           "gid alone",
			           (int)c->pid, (unsigned)(len / sizeof(gid_t)), KVD_PEER_GROUPS);
		return;
	}
	c->n_groups = (uint32_t)(len / sizeof(gid_t));
	for (uint32_t i = 0; i < c->n_groups; i++)
		c->groups[i] = g[i];
}

/* A session lives as long as the process that connected (RELIABILITY S2): a child that
 * inherited the socket by fork, or a process handed it, does not keep its leases alive, and a
 * process given the pid later has nothing to inherit. SO_PEERPIDFD (Linux 6.5) names that
 * process without a race; where the kernel has none, the connection is not bound and ends when
 * its socket closes, as before. */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
static void bind_to_process(struct kvd *d, struct kvd_conn *c, uint32_t slot)
{
	int pfd = -1;
	socklen_t len = sizeof(pfd);
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERPIDFD, &pfd, &len) || pfd < 0)
		return;
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = KVD_EV_PEER_GONE | slot};
	if (fcntl(pfd, F_SETFD, FD_CLOEXEC) || epoll_ctl(d->ep, EPOLL_CTL_ADD, pfd, &ev)) {
		close(pfd);
		return;
	}
	c->pidfd = pfd;
}

void kvd_conn_peer_gone(struct kvd *d, uint32_t i)
{
	if (i >= d->cap_conns || d->conns[i].pidfd < 0)
		return;
	struct kvd_conn *c = &d->conns[i];
	struct pollfd p = {.fd = c->pidfd, .events = POLLIN};
	if (poll(&p, 1, 0) != 1) /* an event for the slot's last connection, closed since */
		return;
	struct pollfd s = {.fd = c->fd, .events = POLLRDHUP};
	if (poll(&s, 1, 0) == 1 && s.revents & (POLLRDHUP | POLLHUP))
		; /* its socket is closing too: the usual end of a client */
	else
		kvt_log(
		    KVT_LOG_INFO,
		    "client pid %d has exited while another process still holds its connection: "
		    "its session ends (%u leases released)",
		    (int)c->pid, c->n_leases);
	kvd_conn_close(d, i);
}

void kvd_conn_accept(struct kvd *d)
{
	for (;;) {
		int fd = accept4(d->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR)
				kvt_log_rl(KVT_LOG_WARN, "accept: %s", strerror(errno));
			return;
		}
		if (d->draining) {
			close(fd);
			continue;
		}
		struct ucred cr;
		socklen_t crl = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl)) {
			kvt_log_rl(KVT_LOG_WARN, "refusing a client: %s", strerror(errno));
			close(fd);
			continue;
		}
		int slot = conn_slot(d);
		if (slot < 0) {
			kvt_log_rl(KVT_LOG_WARN, "refusing pid %d (uid %u): %s", (int)cr.pid,
			           (unsigned)cr.uid,
			           slot == -EMFILE ? "client.max reached" : strerror(-slot));
			kvd_refuse(d, fd); /* its hello is answered -EUSERS */
			continue;
		}
		uint32_t same = 0;
		for (uint32_t k = 0; k < d->cap_conns; k++)
			same += d->conns[k].fd >= 0 && d->conns[k].uid == cr.uid;
		if (same >= kvt_opt_u64(&d->opts, KVT_OPT_CLIENT_MAX_PER_UID)) {
			kvt_log_rl(KVT_LOG_WARN,
			           "refusing pid %d (uid %u): client.max_per_uid reached",
			           (int)cr.pid, (unsigned)cr.uid);
			kvd_refuse(d, fd);
			continue;
		}
		struct kvd_conn *c = &d->conns[slot];
		*c = (struct kvd_conn){.fd = fd,
		                       .uid = cr.uid,
		                       .gid = cr.gid,
		                       .pid = cr.pid,
		                       .pidfd = -1,
		                       .tenant = KVD_NIL,
		                       .lease_head = KVD_NIL,
		                       .accepted_ns = kvt_now_ns()};
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
		                         .data.u64 = (uint64_t)slot + 16};
		if (epoll_ctl(d->ep, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			c->fd = -1;
			continue;
		}
		peer_groups(c);
		bind_to_process(d, c, (uint32_t)slot);
		d->n_conns++;
	}
}

/* A parked request of this type has ended: when it was an operator's command (on_admin), the
 * tiers it wanted are not wanted any more. Not before it ends: were they not wanted while it
 * runs again, a write stream could pull one more write meanwhile. */
static void unwant(struct kvd *d, uint16_t type)
{
	if (type == KVT_MSG_ACQUIRE || type == KVT_MSG_PUT)
		return;
	for (uint32_t k = 0; k < d->n_lower; k++)
		atomic_store_explicit(&d->lower[k].wanted_until_ns, 0, memory_order_relaxed);
}

void kvd_conn_close(struct kvd *d, uint32_t i)
{
	struct kvd_conn *c = &d->conns[i];
	if (c->fd < 0)
		return;
	kvd_release_all(d, i);
	kvd_conn_unhold(d, c);
	free(c->held);
	if (c->staging)
		munmap(c->staging, c->staging_bytes);
	if (c->parked_len)
		unwant(d, ((const struct kvt_msg_hdr *)c->parked)->type);
	free(c->parked);
	kvd_record_conn_gone(d, i);
	epoll_ctl(d->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->pidfd >= 0) {
		epoll_ctl(d->ep, EPOLL_CTL_DEL, c->pidfd, NULL);
		close(c->pidfd);
	}
	*c = (struct kvd_conn){.fd = -1, .pidfd = -1, .tenant = KVD_NIL, .lease_head = KVD_NIL};
	d->n_conns--;
}

void kvd_conns_enforce_allow(struct kvd *d)
{
	for (uint32_t i = 0; i < d->cap_conns; i++) {
		struct kvd_conn *c = &d->conns[i];
		if (c->fd < 0 || kvd_client_allowed(d, c))
			continue;
		kvt_log(KVT_LOG_WARN,
		        "closing a client (pid %d, uid %u): no longer in client.allow", (int)c->pid,
		        (unsigned)c->uid);
		d->st.clients_refused++;
		kvd_conn_close(d, i); /* its leases end with it, as at a crash */
	}
}

/* Closes the connections that have not said hello within client.hello_ms: one that connects
 * and stays silent would hold a client slot (client.max, client.max_per_uid) for ever. */
void kvd_conns_expire_hello(struct kvd *d, uint64_t now_ns)
{
	uint64_t limit = kvt_opt_u64(&d->opts, KVT_OPT_CLIENT_HELLO_MS) * 1000000ull;
	for (uint32_t i = 0; i < d->cap_conns; i++) {
		struct kvd_conn *c = &d->conns[i];
		if (c->fd < 0 || c->tenant != KVD_NIL || now_ns - c->accepted_ns <= limit)
			continue;
		kvt_log_rl(KVT_LOG_WARN,
		           "closing a client (pid %d, uid %u) that said no hello in %llu ms",
		           (int)c->pid, (unsigned)c->uid, (unsigned long long)(limit / 1000000));
		d->st.protocol_errors++;
		kvd_conn_close(d, i);
	}
}

static int reply(struct kvd *d, uint32_t i, const struct kvt_msg_hdr *req, int32_t status,
                 const void *body, size_t body_len, const int *fds, int nfds)
{
	struct kvt_msg_hdr *h = (struct kvt_msg_hdr *)d->tx;
	*h = (struct kvt_msg_hdr){.type = req->type,
	                          .len = (uint32_t)(sizeof(*h) + body_len),
	                          .seq = req->seq,
	                          .status = status};
	if (req->type == KVT_MSG_PUT && d->rec.fd >= 0)
		h->flags = KVT_REPLY_F_RECORDING; /* a put cut short tells what it did not send */
	if (body_len)
		memcpy(h + 1, body, body_len);
	int rc = kvt_proto_send(d->conns[i].fd, d->tx, h->len, fds, nfds);
	kvd_latency_add(d, req->type, kvt_now_ns() - d->conns[i].req_ns);
	if (rc)
		kvt_log_rl(KVT_LOG_WARN, "client pid %d: reply failed (%s), closing",
		           (int)d->conns[i].pid, strerror(-rc));
	return rc;
}

static int staging_create(struct kvd *d, struct kvd_conn *c)
{
	uint64_t bytes = kvt_opt_u64(&d->opts, KVT_OPT_CLIENT_STAGING_BYTES);
	bytes = (bytes + KVT_GRANULE - 1) & ~(uint64_t)(KVT_GRANULE - 1);
	int fd = memfd_create("kvtier-staging", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	int rc = 0;
	if (ftruncate(fd, (off_t)bytes) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		rc = -errno;
		goto err;
	}
	c->staging = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
	if (c->staging == MAP_FAILED) {
		c->staging = NULL;
		rc = -errno;
		goto err;
	}
	c->staging_bytes = bytes;
	return fd;
err:
	close(fd);
	return rc;
}

static int on_hello(struct kvd *d, uint32_t i, const struct kvt_msg_hdr *h, const void *body,
                    size_t len)
{
	struct kvd_conn *c = &d->conns[i];
	const struct kvt_msg_hello *hi = body;
	if (len < sizeof(*hi) || c->tenant != KVD_NIL)
		return -EPROTO;
	if (hi->major != KVT_PROTO_MAJOR) {
		reply(d, i, h, KVT_E_VERSION, NULL, 0, NULL, 0);
		return -EPROTO;
	}
	if (!kvd_client_allowed(d, c)) {
		kvt_log_rl(KVT_LOG_WARN,
		           "refusing a client (pid %d, uid %u, gid %u): not in client.allow",
		           (int)c->pid, (unsigned)c->uid, (unsigned)c->gid);
		d->st.clients_refused++;
		reply(d, i, h, -EACCES, NULL, 0, NULL, 0);
		return -ECONNRESET; /* closed, not counted as a protocol error */
	}
	uint32_t t;
	int rc = kvd_tenant_get(d, kvd_tenant_key(d, (uint32_t)c->uid, (uint32_t)c->gid), &t);
	if (rc)
		return reply(d, i, h, rc, NULL, 0, NULL, 0) ? rc : 0;
	int fds[2] = {kvt_pool_ro_fd(&d->tenants[t].pool), -1};
	if (fds[0] < 0)
		return reply(d, i, h, fds[0], NULL, 0, NULL, 0) ? fds[0] : 0;
	fds[1] = staging_create(d, c);
	if (fds[1] < 0) {
		rc = fds[1];
		close(fds[0]);
		return reply(d, i, h, rc, NULL, 0, NULL, 0) ? rc : 0;
	}
	c->tenant = t;
	struct kvt_msg_hello_reply r = {.major = KVT_PROTO_MAJOR,
	                                .minor = KVT_PROTO_MINOR,
	                                .pool_bytes = d->tenants[t].pool.bytes,
	                                .gen_bytes = d->tenants[t].pool.gen_bytes,
	                                .staging_bytes = c->staging_bytes,
	                                .tenant = d->tenants[t].key,
	                                .client_id = i};
	if (d->tenants[t].pool.extra_bytes) {
		r.lookup_off = d->tenants[t].pool.bytes + d->tenants[t].pool.gen_bytes;
		r.lookup_bytes = d->tenants[t].pool.extra_bytes;
	}
	/* a minor-0 client asked with a shorter hello: it gets the reply it knows */
	rc = reply(d, i, h, 0, &r, hi->minor >= 1 ? sizeof(r) : KVT_HELLO_REPLY_V0_BYTES, fds, 2);
	close(fds[0]);
	close(fds[1]);
	return rc;
}

static int on_namespace(struct kvd *d, uint32_t i, const struct kvt_msg_hdr *h, const void *body,
                        size_t len)
{
	kvt_model_t m;
	char name[KVT_MODEL_STR_MAX + 1], rev[KVT_MODEL_STR_MAX + 1];
	int rc = kvt_proto_check_namespace(body, len, &m, name, rev);
	if (rc == -EPROTO)
		return rc;
	struct kvt_msg_namespace_reply r = {0};
	if (!rc)
		rc = kvd_ns_register(d, d->conns[i].tenant, &m, &r.ns, &r.chunk_bytes);
	if (rc == -EFBIG)
		kvt_log_rl(KVT_LOG_WARN, /* a client retries at each reconnect */
		           "namespace %s of tenant %u refused: chunks of %llu bytes do not fit in "
		           "host.bytes (%llu) or client.staging_bytes (%llu)",
		           name, d->conns[i].tenant, (unsigned long long)kvt_chunk_bytes(&m),
		           (unsigned long long)d->host_cap,
		           (unsigned long long)kvt_opt_u64(&d->opts, KVT_OPT_CLIENT_STAGING_BYTES));
	else if (rc == KVT_E_NSFULL)
		kvt_log_rl(KVT_LOG_WARN,
		           "namespace %s of tenant %u refused: %s (%d a tenant, %d in all; a "
		           "restart empties the table)",
		           name, d->conns[i].tenant, kvt_strerror(rc), KVD_MAX_NS / 16, KVD_MAX_NS);
	return reply(d, i, h, rc, &r, rc ? 0 : sizeof(r), NULL, 0);
}

static int on_keys(struct kvd *d, uint32_t i, const struct kvt_msg_hdr *h, const void *body,
                   size_t len)
{
	uint32_t n;
	if (kvt_proto_check_keys(body, len, &n))
		return -EPROTO;
	const struct kvt_msg_keys *k = body;
	const kvt_id_t *keys = (const kvt_id_t *)(k + 1);
	uint32_t t = d->conns[i].tenant;
	if (h->type == KVT_MSG_LOOKUP)
		return reply(d, i, h, kvd_lookup(d, t, k->ns, keys, n), NULL, 0, NULL, 0);
	if (h->type == KVT_MSG_DELETE)
		return reply(d, i, h, kvd_delete(d, t, k->ns, keys, n), NULL, 0, NULL, 0);
	if (h->type == KVT_MSG_KEEP)
		return reply(d, i, h, kvd_keep(d, t, k->ns, keys, n, k->arg), NULL, 0, NULL, 0);
	static struct kvt_msg_lease out[KVT_BATCH_MAX];
	bool promote;
	int got = kvd_acquire(d, i, k->ns, keys, n, out, &promote);
	if (promote) {
		uint32_t jobs = kvd_tiers_promote(d, t, k->ns, keys, n, &d->conns[i]);
		/* promote.wait_ms, and at most half the client's timeout (arg, when it says it),
		 * so that a wait the client would give up on costs it a miss, not its connection */
		uint64_t wait = kvt_opt_u64(&d->opts, KVT_OPT_PROMOTE_WAIT_MS);
		if (jobs)
			return kvd_conn_park(d, i, h->len,
			                     k->arg ? KVT_MIN(wait, k->arg / 2) : wait);
		kvd_conn_unhold(d, &d->conns[i]);
		d->resume_final = true; /* nothing could start: serve what is at host */
		got = kvd_acquire(d, i, k->ns, keys, n, out, &promote);
		d->resume_final = d->resuming;
	}
	if (d->rec.fd >= 0)
		kvd_record_acquire(d, i, k->ns, keys, n, got);
	int rc = reply(d, i, h, got, out, (size_t)got * sizeof(out[0]), NULL, 0);
	if (rc) /* the client will never learn these handles */
		kvd_release_all(d, i);
	return rc;
}

static int on_put(struct kvd *d, uint32_t i, const struct kvt_msg_hdr *h, const void *body,
                  size_t len)
{
	uint32_t n;
	if (kvt_proto_check_put(body, len, &n))
		return -EPROTO;
	const struct kvt_msg_put *p = body;
	int rc = kvd_put(d, &d->conns[i], p, (const struct kvt_msg_put_item *)(p + 1), n);
	if (rc == -EINPROGRESS) /* wait for demotions to make room, a bounded time */
		return kvd_conn_park(d, i, h->len, kvt_opt_u64(&d->opts, KVT_OPT_DEMOTE_WAIT_MS));
	if (d->rec.fd >= 0)
		kvd_record_put(d, i, p, (const struct kvt_msg_put_item *)(p + 1), n);
	return reply(d, i, h, rc, NULL, 0, NULL, 0);
}

/* Whether cmd's first word, as the commands read it (blanks before it skipped), is w. */
static bool verb_is(const char *cmd, const char *w)
{
	cmd += strspn(cmd, " ");
	size_t n = strlen(w);
	return !strncmp(cmd, w, n) && (!cmd[n] || cmd[n] == ' ');
}

/* Whether an operator request may change the daemon rather than read it: only root and
 * kvtierd's own uid may, not every tenant's engine. Every verb but the reading ones (get, mrc,
 * inspect, check) counts: a list of the changing ones let " set ..." through (the commands skip
 * the blank), and would let through a verb added later. */
static bool changes_daemon(uint16_t type, const char *cmd)
{
	if (type == KVT_MSG_TIER_ENABLE)
		return true;
	bool blank = !cmd[strspn(cmd, " ")]; /* inspect's namespaces, or a usage line */
	return !(blank || verb_is(cmd, "get") || verb_is(cmd, "mrc") || verb_is(cmd, "inspect") ||
	         verb_is(cmd, "check"));
}

/* Operator requests with a text body: policy get|set|mrc, config get|set, tier enable. */
static int on_admin(struct kvd *d, uint32_t i, const struct kvt_msg_hdr *h, const void *body,
                    size_t blen)
{
	static char cmd[1024], out[8192];
	if (blen >= sizeof(cmd))
		return reply(d, i, h, -EINVAL, NULL, 0, NULL, 0);
	memcpy(cmd, body, blen);
	cmd[blen] = 0;
	out[0] = 0;
	int rc;
	uid_t uid = d->conns[i].uid;
	bool owner = uid == 0 || uid == geteuid(); /* may change the daemon, sees every tenant */
	d->lower_busy = -1;
	if (h->type == KVT_MSG_INSPECT && verb_is(cmd, "check") && !owner) {
		/* it holds the loop for ~0.3 s per 10^6 chunks: not for every client to call */
		snprintf(out, sizeof(out), "kvtier check is for root or uid %u (it pauses kvtierd)",
		         (unsigned)geteuid());
		rc = -EPERM;
	} else if (changes_daemon(h->type, cmd) && !owner) {
		snprintf(out, sizeof(out),
		         "uid %u may read but not change kvtierd (run as root or uid %u)",
		         (unsigned)uid, (unsigned)geteuid());
		kvt_log_rl(KVT_LOG_WARN,
		           "pid %d uid %u: refused '%.64s': not root or kvtierd's uid",
		           (int)d->conns[i].pid, (unsigned)uid, cmd);
		rc = -EPERM;
	} else if (h->type == KVT_MSG_POLICY) {
		rc = kvd_policy_command(d, cmd, out, sizeof(out));
	} else if (h->type == KVT_MSG_CONFIG) {
		rc = kvd_config_command(d, cmd, out, sizeof(out));
	} else if (h->type == KVT_MSG_INSPECT) {
		bool flush = verb_is(cmd, "flush");
		char what[64];
		snprintf(what, sizeof(what), "%.63s", cmd);
		rc = kvd_inspect_command(d, owner ? KVD_NIL : d->conns[i].tenant, cmd, out,
		                         sizeof(out));
		if (flush)
			kvt_log(KVT_LOG_INFO, "%s, requested by pid %d: %.*s", what,
			        (int)d->conns[i].pid, rc ? 64 : (int)strcspn(out, "\n"),
			        rc ? strerror(-rc) : out);
	} else {
		rc = kvd_tiers_enable(d, cmd);
		kvt_log(KVT_LOG_INFO, "tier %.63s: enable requested by pid %d: %s", cmd,
		        (int)d->conns[i].pid, rc ? strerror(-rc) : "enabled");
	}
	if (d->conns[i].fd < 0) /* its own command closed it (client.allow no longer names it) */
		return -ECONNRESET;
	if (rc == -EBUSY && d->lower_busy >= 0) { /* a tier's lock was busy: nothing changed */
		const char *tier = d->lower[d->lower_busy].ops->name;
		uint64_t wait_ms = kvt_opt_u64(&d->opts, KVT_OPT_TIERS_COMMAND_WAIT_MS);
		if (!d->resume_final && wait_ms) { /* run again once the tier's I/O lets it */
			if ((rc = kvd_conn_park(d, i, h->len, wait_ms)))
				return rc;
			d->st.commands_parked += !d->resuming;
			/* wanted until then: its stream stops pulling, its worker waits for it */
			kvd_lower_want(&d->lower[d->lower_busy], d->conns[i].park_deadline_ns);
			return 0;
		}
		d->st.commands_busy++;
		snprintf(
		    out, sizeof(out),
		    "the %s tier was busy with I/O for tiers.command_wait_ms (%llu ms): nothing "
		    "changed; try again",
		    tier, (unsigned long long)wait_ms);
		kvt_log_rl(KVT_LOG_WARN, "pid %d: '%.64s' not run: %s busy with I/O for %llu ms",
		           (int)d->conns[i].pid, cmd, tier, (unsigned long long)wait_ms);
	}
	return reply(d, i, h, rc, out, strlen(out), NULL, 0);
}

static int dispatch(struct kvd *d, uint32_t i, size_t len)
{
	const struct kvt_msg_hdr *h = (const struct kvt_msg_hdr *)d->rx;
	if (len < sizeof(*h) || h->len != len)
		return -EPROTO;
	const void *body = h + 1;
	size_t blen = len - sizeof(*h);
	if (h->type == KVT_MSG_HELLO)
		return on_hello(d, i, h, body, blen);
	if (d->conns[i].tenant == KVD_NIL)
		return -EPROTO; /* nothing before the hello */
	if (h->type == KVT_MSG_RELEASE) {
		uint32_t n;
		if (kvt_proto_check_release(body, blen, &n))
			return -EPROTO;
		kvd_release(d, i, (const uint64_t *)((const struct kvt_msg_release *)body + 1), n);
		return 0;
	}
	if (h->type == KVT_MSG_PREFETCH) { /* a hint: no reply, nothing waits for it */
		uint32_t n;
		if (kvt_proto_check_keys(body, blen, &n))
			return -EPROTO;
		const struct kvt_msg_keys *k = body;
		if (!d->draining)
			kvd_tiers_promote(d, d->conns[i].tenant, k->ns, (const kvt_id_t *)(k + 1),
			                  n, NULL);
		return 0;
	}
	if (h->type == KVT_MSG_DONE) { /* a hint as well */
		uint32_t n;
		if (kvt_proto_check_keys(body, blen, &n))
			return -EPROTO;
		const struct kvt_msg_keys *k = body;
		if (!d->draining) /* the workers are finishing up: nothing new for them */
			kvd_done(d, d->conns[i].tenant, k->ns, (const kvt_id_t *)(k + 1), n);
		if (d->rec.fd >= 0)
			kvd_record_done(d, i, k->ns, (const kvt_id_t *)(k + 1), n);
		return 0;
	}
	if (h->type == KVT_MSG_UNSENT) { /* a hint too: only a recording takes it */
		uint32_t n;
		if (kvt_proto_check_keys(body, blen, &n))
			return -EPROTO;
		const struct kvt_msg_keys *k = body;
		if (d->rec.fd >= 0)
			kvd_record_unsent(d, i, k->ns, (const kvt_id_t *)(k + 1), n);
		return 0;
	}
	if (d->draining && h->type != KVT_MSG_STATS && h->type != KVT_MSG_PING)
		return reply(d, i, h, -ESHUTDOWN, NULL, 0, NULL, 0);
	switch (h->type) {
	case KVT_MSG_NAMESPACE:
		return on_namespace(d, i, h, body, blen);
	case KVT_MSG_PUT:
		return on_put(d, i, h, body, blen);
	case KVT_MSG_LOOKUP:
	case KVT_MSG_ACQUIRE:
	case KVT_MSG_DELETE:
	case KVT_MSG_KEEP:
		return on_keys(d, i, h, body, blen);
	case KVT_MSG_PING:
		return reply(d, i, h, 0, NULL, 0, NULL, 0);
	case KVT_MSG_STATS: {
		static char json[KVT_MSG_MAX - 64];
		int n = kvd_stats_json(d, json, sizeof(json));
		return reply(d, i, h, n < 0 ? n : 0, json, n < 0 ? 0 : (size_t)n, NULL, 0);
	}
	case KVT_MSG_POLICY:
	case KVT_MSG_CONFIG:
	case KVT_MSG_INSPECT:
	case KVT_MSG_TIER_ENABLE:
		return on_admin(d, i, h, body, blen);
	default:
		return reply(d, i, h, -EOPNOTSUPP, NULL, 0, NULL, 0);
	}
}

/* The loop wakes by deadline_ns at the latest (d->park_next_ns: the earliest one parked). */
static void wake_by(struct kvd *d, uint64_t deadline_ns)
{
	if (!d->park_next_ns || deadline_ns < d->park_next_ns)
		d->park_next_ns = deadline_ns;
}

int kvd_conn_park(struct kvd *d, uint32_t i, size_t len, uint64_t wait_ms)
{
	struct kvd_conn *c = &d->conns[i];
	if (!c->parked && !(c->parked = malloc(KVT_MSG_MAX)))
		return -ENOMEM;
	if (c->parked != d->rx)
		memmove(c->parked, d->rx, len);
	c->parked_len = (uint32_t)len;
	if (!d->resuming) /* a retry keeps the first deadline */
		c->park_deadline_ns = kvt_now_ns() + wait_ms * 1000000ull;
	wake_by(d, c->park_deadline_ns);
	epoll_ctl(d->ep, EPOLL_CTL_DEL, c->fd, NULL); /* one request at a time per client */
	return 0;
}

void kvd_conn_unhold(struct kvd *d, struct kvd_conn *c)
{
	while (c->n_held)
		kvd_entry_unpin(d, c->held[--c->n_held]);
}

static void resume(struct kvd *d, uint32_t i, bool final)
{
	struct kvd_conn *c = &d->conns[i];
	kvd_conn_unhold(d, c); /* served (and leased) or held again by the retry */
	size_t len = c->parked_len;
	uint16_t type = ((const struct kvt_msg_hdr *)c->parked)->type;
	c->parked_len = 0;
	memcpy(d->rx, c->parked, len);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = (uint64_t)i + 16};
	epoll_ctl(d->ep, EPOLL_CTL_ADD, c->fd, &ev);
	d->resuming = true;
	d->resume_final = final;
	int rc = dispatch(d, i, len);
	d->resuming = d->resume_final = false;
	if (!c->parked_len) /* answered, or its connection closed: not parked again */
		unwant(d, type);
	if (rc) {
		d->st.protocol_errors++;
		kvd_conn_close(d, i);
	}
}

/* A parked acquire: WAIT while one of its leading chunks is still being promoted (by its own
 * jobs, another client's or a prefetch); RETRY when one is neither at host nor on its way (it
 * waited for host room, or the copy it waited for did not come: its promotion starts now);
 * else SERVE. */
enum { WAIT, RETRY, SERVE };
static int acquire_ready(struct kvd *d, uint32_t i, const struct kvt_msg_hdr *h)
{
	const struct kvt_msg_keys *k = (const struct kvt_msg_keys *)(h + 1);
	const kvt_id_t *keys = (const kvt_id_t *)(k + 1);
	int ready = SERVE;
	for (uint32_t j = 0; j < k->n; j++) {
		uint32_t id = kvd_index_find(&d->idx, d->conns[i].tenant, k->ns, keys[j]);
		if (id == KVD_NIL)
			break;
		const struct kvd_entry *e = &d->idx.e[id];
		if (!(e->where & KVD_AT_HOST) && e->jobs)
			return WAIT;
		if (!(e->where & KVD_AT_HOST))
			ready = RETRY;
	}
	return ready;
}

void kvd_conn_resume_ready(struct kvd *d, uint64_t now_ns)
{
	d->park_next_ns = 0; /* made again from what stays parked (kvd_conn_park, below) */
	for (uint32_t i = 0; i < d->cap_conns; i++) {
		struct kvd_conn *c = &d->conns[i];
		if (c->fd < 0 || !c->parked_len)
			continue;
		/* retried whenever tier jobs finished (the ones it waits for may have been started
		 * by someone else: another client, a prefetch), for the last time once late; a
		 * retry that still has to wait parks again with its first deadline */
		const struct kvt_msg_hdr *h = (const struct kvt_msg_hdr *)c->parked;
		bool late = now_ns >= c->park_deadline_ns;
		bool acquire = h->type == KVT_MSG_ACQUIRE; /* else a put or an operator's command */
		int ready = late ? SERVE : acquire ? acquire_ready(d, i, h) : RETRY;
		if (ready != WAIT) /* the others are retried whenever anything finished */
			resume(d, i, ready == SERVE); /* SERVE: what is at host, no more waiting */
		else
			wake_by(d, c->park_deadline_ns);
	}
}

/* At most 8 requests of one connection per wake-up, then the other ready ones get their turn: a
 * client that floods requests (B5) costs the others a slice, not its whole backlog. With 64 a
 * healthy client's p99 beside a flood of never-reading clients was 0.6-1.3 ms (8-15x idle);
 * with 8, 0.18-0.23 ms (test_robust slow_clients_leave_p99). */
void kvd_conn_readable(struct kvd *d, uint32_t i)
{
	for (int budget = 8; budget > 0 && d->conns[i].fd >= 0 && !d->conns[i].parked_len;
	     budget--) {
		int nfds = 0;
		ssize_t n = kvt_proto_recv(d->conns[i].fd, d->rx, sizeof(d->rx), NULL, &nfds);
		if (n == -EAGAIN)
			return;
		int rc;
		if (n <= 0)
			rc = n == 0 ? -ECONNRESET : (int)n;
		else if (nfds)
			rc = -EPROTO; /* clients never send fds */
		else {
			d->conns[i].req_ns = kvt_now_ns();
			rc = dispatch(d, i, (size_t)n);
		}
		if (rc) {
			if (rc != -ECONNRESET) {
				d->st.protocol_errors++;
				kvt_log_rl(KVT_LOG_WARN, "client pid %d uid %d: %s, closing",
				           (int)d->conns[i].pid, (int)d->conns[i].uid,
				           strerror(-rc));
			}
			kvd_conn_close(d, i);
			return;
		}
	}
}
