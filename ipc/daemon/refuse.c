/*
 * refuse.c -- connections the daemon will not serve (client.max or client.max_per_uid is
 * reached) are told why: each waits, outside the client table, for its hello, which is answered
 * -EUSERS before the socket closes. Before, it was closed at accept, and the engine read
 * -ENOTCONN with nothing to say why (the reason was only in the daemon's log).
 *
 * Such a connection holds no client slot, no staging area and no tenant: only its fd, for at
 * most client.hello_ms, and at most KVD_REFUSING_MAX at a time. Past those it is closed at once,
 * as before, so a flood of connections costs the daemon nothing more than it did.
 */
#include "daemon.h"
#include "core/log.h"
#include "core/util.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static void refusing_close(struct kvd *d, struct kvd_refusing *r)
{
	epoll_ctl(d->ep, EPOLL_CTL_DEL, r->fd, NULL);
	close(r->fd);
	*r = (struct kvd_refusing){0};
}

void kvd_refuse(struct kvd *d, int fd)
{
	d->st.clients_refused++;
	for (uint32_t k = 0; k < KVD_REFUSING_MAX; k++) {
		struct kvd_refusing *r = &d->refusing[k];
		if (r->since_ns)
			continue;
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
		                         .data.u64 = KVD_EV_REFUSING | k};
		if (epoll_ctl(d->ep, EPOLL_CTL_ADD, fd, &ev))
			break;
		*r = (struct kvd_refusing){.fd = fd, .since_ns = kvt_now_ns()};
		return;
	}
	close(fd); /* as many wait already: this one reads a closed socket (-ENOTCONN) */
}

void kvd_refusing_readable(struct kvd *d, uint32_t k)
{
	if (k >= KVD_REFUSING_MAX || !d->refusing[k].since_ns)
		return;
	struct kvd_refusing *r = &d->refusing[k];
	_Alignas(8) uint8_t in[sizeof(struct kvt_msg_hdr) + sizeof(struct kvt_msg_hello)];
	ssize_t n = recv(r->fd, in, sizeof(in), MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	const struct kvt_msg_hdr *h = (const void *)in;
	if (n >= (ssize_t)sizeof(*h) && h->type == KVT_MSG_HELLO) {
		struct kvt_msg_hdr out = {
		    .type = KVT_MSG_HELLO, .len = sizeof(out), .seq = h->seq, .status = -EUSERS};
		kvt_proto_send(r->fd, &out, sizeof(out), NULL, 0); /* non-blocking: best effort */
	}
	refusing_close(d, r);
}

void kvd_refusing_expire(struct kvd *d, uint64_t now_ns, bool all)
{
	uint64_t limit = kvt_opt_u64(&d->opts, KVT_OPT_CLIENT_HELLO_MS) * 1000000ull;
	for (uint32_t k = 0; k < KVD_REFUSING_MAX; k++) {
		struct kvd_refusing *r = &d->refusing[k];
		if (r->since_ns && (all || now_ns - r->since_ns > limit))
			refusing_close(d, r);
	}
}
