/*
 * client.c -- libkvtier: the engine's side of kvtierd (include/kvtier.h is the manual): its
 * calls, here; the connection they go over: conn.c; what the two share: client_int.h.
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
#include "client_int.h"
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

/* Connects if needed and reports the staging area of the current epoch, reserved (kept mapped
 * through a reconnect) until end_reservation. Caller holds stage. */
static int staging_of(kvt_client_t *c, kvt_id_t ns, uint64_t cb, uint8_t **stg, uint64_t *bytes,
                      uint32_t *epoch)
{
	pthread_mutex_lock(&c->io);
	int rc = kvt__cl_ready_locked(c, ns);
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
		kvt__cl_retired_put(c, c->res_epoch, true);
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
		rc = kvt__cl_rpc_locked(c, KVT_MSG_PUT, put_msg(c, ns, parent, keys, k, cb, 0),
		                        NULL, NULL, NULL);
	pthread_mutex_unlock(&c->io);
	return rc;
}

/* Writes a namespace and k keys into c->tx. Caller holds io. @return : the body's length. */
static size_t keys_msg(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, uint32_t k, uint32_t arg)
{
	struct kvt_msg_keys *m = (struct kvt_msg_keys *)(c->tx + sizeof(struct kvt_msg_hdr));
	*m = (struct kvt_msg_keys){.ns = ns, .n = k, .arg = arg};
	memcpy(m + 1, keys, k * sizeof(kvt_id_t));
	return sizeof(*m) + k * sizeof(kvt_id_t);
}

/* send_hints() on a connection. Caller holds io. @return : 0, -EOPNOTSUPP from a daemon older
 * than the type, or the send's error. */
static int send_hints_locked(kvt_client_t *c, uint16_t type, kvt_id_t ns, const kvt_id_t *keys,
                             size_t n)
{
	if (c->daemon_minor < kvt_proto_minor_of(type))
		return -EOPNOTSUPP;
	for (size_t done = 0; done < n;) {
		uint32_t k = (uint32_t)KVT_MIN(n - done, (size_t)KVT_BATCH_MAX);
		int64_t seq = kvt__cl_send_locked(c, type, keys_msg(c, ns, keys + done, k, 0));
		if (seq < 0)
			return (int)seq;
		done += k;
	}
	return 0;
}

/*
 * kvt_put pipelines: the staging area is used as two halves, and while the daemon copies one
 * sub-batch out of one half, this thread copies the next into the other (replies come back in
 * order). Sub-batches are about 4 MiB, so both sides stay busy on large batches. After a short
 * or failed reply nothing more is sent; chunks of sub-batches already sent past the gap may be
 * stored, but they are not counted (only a prefix's leading chunks are useful). When the short
 * reply says the daemon records its engines' requests (KVT_REPLY_F_RECORDING), the keys never
 * sent follow as a hint (UNSENT), so the recording holds all that the engine computed.
 */
KVT_API int kvt_put(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *parent, const kvt_id_t *keys,
                    size_t n, const void *const *chunks, size_t chunk_len)
{
	if (!c || (!keys && n) || (!chunks && n))
		return -EINVAL;
	uint64_t cb = kvt__cl_chunk_bytes(c, ns);
	if (!cb || chunk_len != cb)
		return -EINVAL;
	if (!n)
		return 0;
	if (pthread_mutex_lock(&c->stage))
		return -EDEADLK; /* this thread holds a reservation: commit or abort it first */
	pthread_mutex_lock(&c->io);
	int rc = kvt__cl_ready_locked(c, ns);
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
	bool stop = rc != 0, recorded = false;
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
			int64_t seq = kvt__cl_send_locked(c, KVT_MSG_PUT, len);
			if (seq < 0) {
				rc = (int)seq;
				break; /* the connection is gone, and with it every reply */
			}
			fly[slot] = (typeof(fly[0])){(uint32_t)seq, k};
			nfly++;
			sent += k;
			continue;
		}
		int got = kvt__cl_recv_locked(c, fly[head].seq, NULL, NULL, NULL);
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
			recorded =
			    stop && got >= 0 &&
			    (((const struct kvt_msg_hdr *)c->rx)->flags & KVT_REPLY_F_RECORDING);
		}
		head = (head + 1) % slots;
		nfly--;
	}
	if (recorded && sent < n && c->fd >= 0) /* a hint: its failure is the next call's */
		(void)send_hints_locked(c, KVT_MSG_UNSENT, ns, keys + sent, n - sent);
	pthread_mutex_unlock(&c->io);
	pthread_mutex_unlock(&c->stage);
	return done ? (int)done : rc;
}

KVT_API int kvt_put_reserve(kvt_client_t *c, kvt_id_t ns, size_t n, void **bufs)
{
	if (!c || !n || !bufs)
		return -EINVAL;
	uint64_t cb = kvt__cl_chunk_bytes(c, ns);
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
		rc = commit_staged(c, ns, parent, keys, (uint32_t)n, kvt__cl_chunk_bytes(c, ns),
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

/* One keys request (arg: KEEP's ttl_ms, else 0), connecting first; -EOPNOTSUPP from a daemon
 * older than the type. Caller holds io. */
static int keys_rpc_locked(kvt_client_t *c, uint16_t type, kvt_id_t ns, const kvt_id_t *keys,
                           uint32_t k, uint32_t arg, size_t *rlen)
{
	int rc = kvt__cl_ensure_locked(c);
	if (rc)
		return rc;
	if (c->daemon_minor < kvt_proto_minor_of(type))
		return -EOPNOTSUPP;
	return kvt__cl_rpc_locked(c, type, keys_msg(c, ns, keys, k, arg), rlen, NULL, NULL);
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
	int rc = kvt__cl_ensure_locked(c);
	/* a table of a daemon that died answers nothing: one poll() tells (~1 us a batch) */
	struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
	if (!rc && c->lookup && poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR))) {
		kvt__cl_drop_locked(c);
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
			mine = kvt__cl_retired_put(c, l->reserved[L_EPOCH], false);
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
				kvt__cl_drop_locked(
				    c); /* the daemon releases on disconnect anyway */
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
	int rc = kvt__cl_ensure_locked(c);
	if (!rc)
		rc = send_hints_locked(c, type, ns, keys, n);
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
	uint64_t cb = kvt__cl_chunk_bytes(c, ns);
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
	int rc = kvt__cl_ensure_locked(c);
	if (!rc && ilen > KVT_MSG_MAX - sizeof(struct kvt_msg_hdr))
		rc = -EINVAL;
	if (!rc) {
		if (ilen)
			memcpy(c->tx + sizeof(struct kvt_msg_hdr), in, ilen);
		rc = kvt__cl_rpc_locked(c, type, ilen, &rlen, NULL, NULL);
	}
	if (out && out_len) { /* the reply's text, also with an error status */
		size_t n = KVT_MIN(rlen, out_len - 1);
		memcpy(out, c->rx + sizeof(struct kvt_msg_hdr), n);
		out[n] = 0;
	}
	pthread_mutex_unlock(&c->io);
	return rc;
}
