/*
 * client_int.h -- what libkvtier's two files share: the client's state, and the connection's
 * calls (conn.c: connect, hello, reconnect, one request and its reply, the namespaces this
 * client registered, the mappings of connections that are gone) that the engine's calls
 * (client.c: put, reserve and commit, lookup, acquire and release, get, hints) are made of.
 * Not exported from libkvtier.so (hidden); prefixed so that libkvtier.a clashes with nothing.
 */
#ifndef KVT_IPC_CLIENT_INT_H
#define KVT_IPC_CLIENT_INT_H
#include "kvtier.h"
#include "core/keys.h"
#include "ipc/proto.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
	bool res_open; /* the same, for kvt__cl_drop_locked: guarded by io */
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

/* Takes one lease (or the reservation) of epoch off its retired mappings, unmapping them once
 * nothing is out. Caller holds io. @return : whether epoch was one of this client's. */
bool kvt__cl_retired_put(struct kvt_client *c, uint32_t epoch, bool reservation);
/* Drops the connection (the daemon releases its leases); its mappings stay, retired, while a
 * lease or the reservation taken on them is out. Caller holds io. */
void kvt__cl_drop_locked(struct kvt_client *c);
/* Sends the request in c->tx. Caller holds io.
 * @return : its sequence number, or -ENOTCONN / -ETIMEDOUT (the connection dropped). */
int64_t kvt__cl_send_locked(struct kvt_client *c, uint16_t type, size_t body_len);
/* Waits for the reply to request seq (replies come in request order) into c->rx. Caller
 * holds io. @return : the reply's status, or -ENOTCONN / -ETIMEDOUT (the connection dropped). */
int kvt__cl_recv_locked(struct kvt_client *c, uint32_t seq, size_t *reply_len, int *fds, int *nfds);
/* One request, one reply. Caller holds io and has a connection. @return : status or -errno. */
int kvt__cl_rpc_locked(struct kvt_client *c, uint16_t type, size_t body_len, size_t *reply_len,
                       int *fds, int *nfds);
/* Makes sure there is a connection; reconnects with bounded backoff. Caller holds io. */
int kvt__cl_ensure_locked(struct kvt_client *c);
/* The chunk size of namespace ns as registered, or 0 (not registered by this client). */
uint64_t kvt__cl_chunk_bytes(kvt_client_t *c, kvt_id_t ns);
/* Connects if needed; then what the daemon said when the connection registered ns (0: taken,
 * or a refusal such as -EFBIG). Caller holds io. */
int kvt__cl_ready_locked(kvt_client_t *c, kvt_id_t ns);
#endif
