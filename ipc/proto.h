/*
 * proto.h -- the wire protocol between libkvtier and kvtierd (a format: fixed width,
 * little-endian, offsets not pointers, sizes asserted).
 *
 * Transport: a pathname SOCK_SEQPACKET Unix socket; one message per packet, at most
 * KVT_MSG_MAX bytes. Every message starts with struct kvt_msg_hdr. Requests carry a sequence
 * number that the reply repeats; RELEASE has no reply. The daemon sends fds only in the HELLO
 * reply (SCM_RIGHTS, after SO_PEERCRED), and never accepts fds from a client.
 *
 * Compatibility: the hello carries (major, minor). A daemon accepts clients of its major; newer
 * minors only append fields at the end of bodies, and a receiver accepts a body at least as long
 * as it needs (extra bytes are ignored). Batches name chunks in the client's staging area by
 * offset, never by pointer.
 *
 * Shared memory (per tenant, one sealed memfd mapped read-only by clients):
 *   [0, pool_bytes)                 records: 128-byte header + payload, 4096-aligned starts
 *   [pool_bytes, +gen_bytes)        u64 generation per 4096-byte granule of the pool
 *   [lookup_off, +lookup_bytes)     the tenant's lookup table (ipc/shmidx.h), if any
 * A lease names the granule of its record's start and the generation it saw; the daemon bumps
 * that generation before it reuses the record's bytes, so "generation unchanged after the copy"
 * means "the bytes were valid throughout" (a seqlock read).
 */
#ifndef KVT_IPC_PROTO_H
#define KVT_IPC_PROTO_H
#include "kvtier.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the kvtier wire format is little-endian; add byte swapping for this host"
#endif

#define KVT_PROTO_MAJOR 1
/* minors: 1 the shared lookup table; 2 DONE; 3 KEEP; 4 ACQUIRE's arg; 5 UNSENT, reply flags */
#define KVT_PROTO_MINOR 5
#define KVT_MSG_MAX     65536u
#define KVT_BATCH_MAX   256u  /* keys per request */
#define KVT_GRANULE     4096u /* pool allocation granule and generation granularity */

enum kvt_msg_type {
	KVT_MSG_HELLO = 1,
	KVT_MSG_NAMESPACE = 2,
	KVT_MSG_PUT = 3,
	KVT_MSG_LOOKUP = 4,
	KVT_MSG_ACQUIRE = 5,
	KVT_MSG_RELEASE = 6, /* no reply */
	KVT_MSG_DELETE = 7,
	KVT_MSG_STATS = 8,
	KVT_MSG_PING = 9,
	KVT_MSG_TIER_ENABLE = 10, /* body: the tier's name */
	KVT_MSG_POLICY = 11,      /* body: "get TIER", "set TIER NAME [k=v...]", "mrc TIER" */
	KVT_MSG_PREFETCH = 12,    /* keys (as LOOKUP); no reply: promote them into host */
	KVT_MSG_CONFIG = 13,      /* body: "get [NAME]", "set NAME VALUE" */
	KVT_MSG_INSPECT = 14, /* body: "inspect [NS [KEY]]", "flush all|NS|tenant UID", "check" */
	KVT_MSG_DONE = 15, /* keys (as LOOKUP); no reply: the engine is done with them (kvt_done) */
	KVT_MSG_KEEP = 16, /* keys, arg = ttl_ms; reply: how many are now kept at host (kvt_keep) */
	/* keys (as LOOKUP); no reply: the rest of a kvt_put that a short reply with
	 * KVT_REPLY_F_RECORDING cut, computed by the engine and never sent (recorded, nothing else)
	 */
	KVT_MSG_UNSENT = 17,
	KVT_MSG__MAX
};

/* The protocol minor that brought message type t: a daemon that says an older one in its hello
 * does not know it. */
static inline uint32_t kvt_proto_minor_of(uint16_t t)
{
	return t == KVT_MSG_UNSENT ? 5 : t == KVT_MSG_KEEP ? 3 : t == KVT_MSG_DONE ? 2 : 0;
}

struct kvt_msg_hdr {
	uint16_t type;
	uint16_t flags;
	uint32_t len;   /* whole message, header included */
	uint32_t seq;   /* chosen by the client, echoed in the reply */
	int32_t status; /* replies: a count >= 0 or -errno; requests: 0 */
};
_Static_assert(sizeof(struct kvt_msg_hdr) == 16, "wire size");
/* Reply flags (minor 5; an older peer sends 0 and ignores them). RECORDING, on a PUT's reply:
 * the daemon records its engines' requests (trace.file), so a put its reply cuts short tells it
 * the keys it will not send (UNSENT), and the recording holds the whole request. */
enum { KVT_REPLY_F_RECORDING = 1 };

struct kvt_msg_hello {
	uint32_t major, minor;
	uint32_t pid;
	uint32_t reserved;
};
_Static_assert(sizeof(struct kvt_msg_hello) == 16, "wire size");

/* HELLO reply body; fds: [0] pool (read-only), [1] staging (read-write). */
struct kvt_msg_hello_reply {
	uint32_t major, minor;
	uint64_t pool_bytes; /* record area of the pool mapping */
	uint64_t gen_bytes;  /* generation table that follows it */
	uint64_t staging_bytes;
	uint32_t tenant;
	uint32_t client_id;
	/* minor 1: the shared lookup table (ipc/shmidx.h) at this offset of the pool mapping */
	uint64_t lookup_off, lookup_bytes;
};
_Static_assert(sizeof(struct kvt_msg_hello_reply) == 56, "wire size");
#define KVT_HELLO_REPLY_V0_BYTES 40

/* NAMESPACE request: the model description; name and revision bytes follow the struct. */
struct kvt_msg_namespace {
	uint32_t dtype, n_layers, n_kv_heads, head_dim, tokens_per_chunk, tp_rank, tp_size;
	uint32_t kv_group, layout;
	uint16_t name_len, revision_len;
};
_Static_assert(sizeof(struct kvt_msg_namespace) == 40, "wire size");

struct kvt_msg_namespace_reply {
	kvt_id_t ns;
	uint64_t chunk_bytes;
};
_Static_assert(sizeof(struct kvt_msg_namespace_reply) == 24, "wire size");

/* LOOKUP, ACQUIRE, DELETE: a namespace and n keys follow. */
struct kvt_msg_keys {
	kvt_id_t ns;
	uint32_t n;
	uint32_t arg; /* KEEP: ttl_ms; ACQUIRE: the client's timeout in ms, 0 none (minor 4: the
	               * daemon waits for promotions at most half of it); 0 in the others */
	              /* kvt_id_t keys[n]; */
};
_Static_assert(sizeof(struct kvt_msg_keys) == 24, "wire size");

/* PUT: chunks already written in the client's staging area at the given offsets. */
struct kvt_msg_put {
	kvt_id_t ns;
	kvt_id_t parent;
	uint32_t n;
	uint32_t flags;       /* KVT_PUT_F_PARENT when parent is meaningful */
	uint64_t chunk_bytes; /* payload bytes of each chunk */
	                      /* struct kvt_msg_put_item items[n]; */
};
_Static_assert(sizeof(struct kvt_msg_put) == 48, "wire size");
/* CONTINUES: the message goes on from the one before it in the same kvt_put (parent is that
 * one's last key): when that parent is absent, the one before was cut short and these chunks
 * could not be reached, so none is stored. A daemon before it ignores the flag. */
enum { KVT_PUT_F_PARENT = 1, KVT_PUT_F_CONTINUES = 2 };

struct kvt_msg_put_item {
	kvt_id_t key;
	uint64_t staging_off;
	uint64_t reserved;
};
_Static_assert(sizeof(struct kvt_msg_put_item) == 32, "wire size");

/* ACQUIRE reply: status = n leased; n of these follow the header. */
struct kvt_msg_lease {
	uint64_t payload_off; /* offset of the payload in the pool mapping */
	uint64_t payload_bytes;
	uint64_t handle;    /* lease id, names this connection's lease */
	uint64_t gen;       /* generation of the record's granule when leased */
	uint32_t gen_index; /* granule index in the generation table */
	uint32_t codec;
};
_Static_assert(sizeof(struct kvt_msg_lease) == 40, "wire size");

/* RELEASE: n handles follow. */
struct kvt_msg_release {
	uint32_t n;
	uint32_t reserved;
	/* uint64_t handles[n]; */
};
_Static_assert(sizeof(struct kvt_msg_release) == 8, "wire size");

/* Sizes a message body must have; @return : -EPROTO when len is short or inconsistent. */
int kvt_proto_check_keys(const void *body, size_t len, uint32_t *n);
int kvt_proto_check_put(const void *body, size_t len, uint32_t *n);
int kvt_proto_check_release(const void *body, size_t len, uint32_t *n);
int kvt_proto_check_namespace(const void *body, size_t len, kvt_model_t *m, char *name,
                              char *revision);

/* Sends one message with optional fds (MSG_NOSIGNAL). @return : 0 or -errno. */
int kvt_proto_send(int fd, const void *msg, size_t len, const int *fds, int nfds);
/*
 * Receives one message into buf. Fds that arrive are stored in fds (up to *nfds on entry, the
 * rest closed) and *nfds is set to how many arrived (so more than were stored means some were
 * closed); pass nfds NULL to close every fd that arrives.
 * @return : message length, 0 on orderly close, -EMSGSIZE (truncated), -errno.
 */
ssize_t kvt_proto_recv(int fd, void *buf, size_t len, int *fds, int *nfds);

/* Socket path resolution shared by the daemon and the client (sockpath.c). */
#define KVT_SOCK_PATH_MAX 108
/* The client's choice: $KVTIER_SOCKET, else the first default whose socket exists. */
int kvt_sockpath_client(char *out, size_t len);
/* The daemon's default: /run/kvtier when it can own it, else XDG, else /tmp/kvtier-$UID. */
int kvt_sockpath_daemon(char *out, size_t len);
#endif
