/*
 * proto.c -- message validation and the send/receive wrappers of proto.h.
 * Validation is written once here and used by the daemon on every request: lengths are checked
 * against counts before anything is read, counts against KVT_BATCH_MAX.
 */
#include "proto.h"
#include "core/keys.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int kvt_proto_check_keys(const void *body, size_t len, uint32_t *n)
{
	if (len < sizeof(struct kvt_msg_keys))
		return -EPROTO;
	const struct kvt_msg_keys *k = body;
	if (k->n > KVT_BATCH_MAX || len < sizeof(*k) + (size_t)k->n * sizeof(kvt_id_t))
		return -EPROTO;
	*n = k->n;
	return 0;
}

int kvt_proto_check_put(const void *body, size_t len, uint32_t *n)
{
	if (len < sizeof(struct kvt_msg_put))
		return -EPROTO;
	const struct kvt_msg_put *p = body;
	if (p->n > KVT_BATCH_MAX ||
	    len < sizeof(*p) + (size_t)p->n * sizeof(struct kvt_msg_put_item))
		return -EPROTO;
	*n = p->n;
	return 0;
}

int kvt_proto_check_release(const void *body, size_t len, uint32_t *n)
{
	if (len < sizeof(struct kvt_msg_release))
		return -EPROTO;
	const struct kvt_msg_release *r = body;
	if (r->n > (KVT_MSG_MAX / sizeof(uint64_t)) ||
	    len < sizeof(*r) + (size_t)r->n * sizeof(uint64_t))
		return -EPROTO;
	*n = r->n;
	return 0;
}

int kvt_proto_check_namespace(const void *body, size_t len, kvt_model_t *m, char *name,
                              char *revision)
{
	if (len < sizeof(struct kvt_msg_namespace))
		return -EPROTO;
	const struct kvt_msg_namespace *w = body;
	if (w->name_len == 0 || w->name_len > KVT_MODEL_STR_MAX ||
	    w->revision_len > KVT_MODEL_STR_MAX ||
	    len < sizeof(*w) + (size_t)w->name_len + w->revision_len)
		return -EPROTO;
	const char *s = (const char *)(w + 1);
	memcpy(name, s, w->name_len);
	name[w->name_len] = 0;
	memcpy(revision, s + w->name_len, w->revision_len);
	revision[w->revision_len] = 0;
	if (strlen(name) != w->name_len || strlen(revision) != w->revision_len)
		return -EINVAL; /* embedded NUL */
	memset(m, 0, sizeof(*m));
	m->name = name;
	m->revision = revision;
	m->dtype = w->dtype, m->n_layers = w->n_layers, m->n_kv_heads = w->n_kv_heads;
	m->head_dim = w->head_dim, m->tokens_per_chunk = w->tokens_per_chunk;
	m->tp_rank = w->tp_rank, m->tp_size = w->tp_size, m->kv_group = w->kv_group;
	m->layout = w->layout;
	return kvt__model_validate(m);
}

int kvt_proto_send(int fd, const void *msg, size_t len, const int *fds, int nfds)
{
	struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} ctl;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > 0) {
		if (nfds > 4)
			return -EINVAL;
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	for (;;) {
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (n == (ssize_t)len)
			return 0;
		if (n >= 0)
			return -EMSGSIZE;
		if (errno != EINTR)
			return -errno;
	}
}

ssize_t kvt_proto_recv(int fd, void *buf, size_t len, int *fds, int *nfds)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 8)];
	} ctl;
	struct msghdr mh = {.msg_iov = &iov,
	                    .msg_iovlen = 1,
	                    .msg_control = ctl.buf,
	                    .msg_controllen = sizeof(ctl.buf)};
	int max_fds = nfds ? *nfds : 0, arrived = 0;
	ssize_t n;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int got[8];
		memcpy(got, CMSG_DATA(c), cnt * sizeof(int));
		for (size_t i = 0; i < cnt; i++, arrived++) {
			if (arrived < max_fds)
				fds[arrived] = got[i];
			else
				close(got[i]);
		}
	}
	if (nfds)
		*nfds = arrived;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return -EMSGSIZE;
	return n;
}
