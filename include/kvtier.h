/*
 * kvtier.h -- the one public header of libkvtier, the client library of kvtierd.
 *
 * An inference engine attaches to the per-host daemon kvtierd, registers its model as a
 * namespace, and then puts and gets chunks of KV cache: the cache of tokens_per_chunk
 * consecutive tokens, all layers, K and V, in the canonical payload layout
 * [layer][K,V][token][kv_head][head_dim] in the model's KV dtype (K after RoPE).
 *
 * Keys are chained (equal keys mean equal prefixes) and can be computed offline; see
 * docs/keys.md. Data moves through shared memory: gets copy (or lease zero-copy) straight out of
 * the daemon's read-only pool mapping; puts go through a private staging area.
 *
 * Errors are negative errno values (kvt_strerror() names them). A miss is a result, not an
 * error. Unless stated otherwise every call is safe from several threads of one process;
 * kvt_close() must not race other calls on the same client. Calls that talk to the daemon block
 * for one round trip at most (kvt_release and kvt_lookup's fast path need none).
 *
 * A client belongs to the process that connected: when that process exits, kvtierd ends its
 * session (its leases are released) even if a child inherited the socket by fork, and the
 * child's calls on it fail with -ENOTCONN. A forked child that needs the daemon calls
 * kvt_connect() itself.
 */
#ifndef KVTIER_H
#define KVTIER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KVT_BUILDING) && defined(__GNUC__)
#define KVT_API __attribute__((visibility("default")))
#else
#define KVT_API
#endif

#define KVT_VERSION_MAJOR 0
#define KVT_VERSION_MINOR 1
#define KVT_VERSION_PATCH 0
#define KVT_VERSION       ((KVT_VERSION_MAJOR << 16) | (KVT_VERSION_MINOR << 8) | KVT_VERSION_PATCH)

/* @return : the version of the linked library, encoded like KVT_VERSION. */
KVT_API unsigned kvt_version(void);

typedef struct kvt_client kvt_client_t;

/* A 128-bit namespace or chunk key. w[0] is the low half of XXH3-128's result, w[1] the high. */
typedef struct kvt_id {
	uint64_t w[2];
} kvt_id_t;

enum { KVT_DTYPE_F32 = 0, KVT_DTYPE_F16 = 1, KVT_DTYPE_BF16 = 2, KVT_DTYPE_FP8_E4M3 = 3 };
enum { KVT_CODEC_RAW = 0 };

/* kvtier-only error codes, below -4096 so that they never collide with errno. */
#define KVT_ERRORS(X)                                                                              \
	X(KVT_E_VERSION, -4097, "protocol version not supported by the daemon")                    \
	X(KVT_E_NSFULL, -4098, "too many namespaces registered")

enum {
#define KVT_ERR_ENUM(name, value, text) name = value,
	KVT_ERRORS(KVT_ERR_ENUM)
#undef KVT_ERR_ENUM
};

/* A model description; the namespace is a hash of it (docs/keys.md). */
typedef struct kvt_model {
	const char *name;     /* required, at most 255 bytes */
	const char *revision; /* may be NULL (same as ""), at most 255 bytes */
	uint32_t dtype, n_layers, n_kv_heads, head_dim, tokens_per_chunk, tp_rank, tp_size;
	uint32_t kv_group;    /* 0 unless the model has several KV groups */
	uint32_t layout;      /* 0 = the canonical payload layout */
	uint32_t reserved[6]; /* must be zero */
} kvt_model_t;

/* A zero-copy view of one chunk, valid from kvt_acquire until kvt_release. */
typedef struct kvt_lease {
	const void *data; /* the chunk's payload (not its header), read-only */
	uint64_t len;     /* payload bytes at data */
	uint64_t handle;  /* opaque */
	uint32_t codec;   /* KVT_CODEC_* of the stored payload */
	int32_t status;   /* set by kvt_release: 0 = valid throughout, -ESTALE = revoked */
	uint32_t reserved[4];
} kvt_lease_t;

/*
 * Connects to kvtierd. socket_path NULL means $KVTIER_SOCKET, else the default path
 * (/run/kvtier/kvtier.sock, $XDG_RUNTIME_DIR/kvtier/kvtier.sock, /tmp/kvtier-$UID/kvtier.sock,
 * the first whose socket exists). The client's timeout starts as $KVTIER_TIMEOUT_MS, else
 * KVT_TIMEOUT_DEFAULT_MS (see kvt_set_timeout).
 * @return : 0 and *out set, or -errno (-ENOENT/-ECONNREFUSED no daemon, KVT_E_VERSION,
 *           -EACCES the daemon's client.allow names neither this uid nor one of its groups,
 *           -EUSERS the daemon's client.max or client.max_per_uid is reached, -ETIMEDOUT the
 *           daemon did not answer in time, -EINVAL $KVTIER_TIMEOUT_MS is not a number of
 *           milliseconds up to KVT_TIMEOUT_MAX_MS).
 * Ownership: *out is owned by the caller until kvt_close().
 */
KVT_API int kvt_connect(const char *socket_path, kvt_client_t **out);

#define KVT_TIMEOUT_DEFAULT_MS 30000u    /* twice the daemon's promote.wait_ms (5 s) and more */
#define KVT_TIMEOUT_MAX_MS     86400000u /* a day */

/*
 * Bounds how long any call waits for the daemon (connecting, sending, each reply) to ms; 0
 * waits for ever. A call that waits longer returns -ETIMEDOUT and drops the connection, as a
 * daemon restart does: leases taken on it release as -ESTALE, and the next call reconnects.
 * What the daemon had been asked may still happen (a timed-out put may be stored). A kvt_get
 * or kvt_acquire of chunks in a lower tier waits for them to come up for the daemon's
 * promote.wait_ms, and at most half of this timeout (the client tells it; a daemon before
 * protocol minor 4 waits promote.wait_ms). Also any call may return -ETIMEDOUT, and -EUSERS or
 * -EACCES when a reconnect is refused. @return : 0, -EINVAL (ms above KVT_TIMEOUT_MAX_MS), or
 * -errno.
 */
KVT_API int kvt_set_timeout(kvt_client_t *c, uint32_t ms);

/* Closes the connection; every lease it held is released. NULL is fine. */
KVT_API void kvt_close(kvt_client_t *c);

/*
 * Validates m and registers it with the daemon; writes the namespace id to *ns_out. The
 * library registers it again at each reconnect; a restarted daemon that refuses it then (a
 * smaller host.bytes) answers that model's puts with its refusal, and the others go on.
 * @return : 0, -EINVAL (bad or unsupported description), -EFBIG (a chunk larger than the
 *           host tier or the daemon's client.staging_bytes), KVT_E_NSFULL (4,096 models a
 *           tenant, 65,536 in all, until the daemon restarts), or -errno.
 */
KVT_API int kvt_namespace(kvt_client_t *c, const kvt_model_t *m, kvt_id_t *ns_out);

/* Computes the namespace id offline (no daemon). @return : 0 or -EINVAL. */
KVT_API int kvt_namespace_id(const kvt_model_t *m, kvt_id_t *ns_out);

/* @return : raw payload bytes of one full chunk of m, or 0 when m is invalid. */
KVT_API size_t kvt_chunk_bytes(const kvt_model_t *m);

/*
 * Computes the chained keys of the full chunks of tokens (docs/keys.md).
 * @return : the number of keys written to keys (at most max_keys), 0 if tokens_per_chunk is 0.
 */
KVT_API size_t kvt_chunk_keys(kvt_id_t ns, const uint32_t *tokens, size_t n_tokens,
                              uint32_t tokens_per_chunk, kvt_id_t *keys, size_t max_keys);

/*
 * Stores n chunks of a prefix. parent is the key before keys[0] (NULL when keys[0] starts the
 * prefix); keys[i]'s parent is keys[i-1]. chunk_len must equal kvt_chunk_bytes of the
 * namespace's model. The library splits batches larger than its staging area.
 * A put never evicts its own prefix: other chunks give up their room, and where the host
 * policy would rather evict the prefix than any of them (its first victim is a chunk this
 * request read or stored), or a prefix is longer than the daemon can hold (host, with no lower
 * tier to take its head), the put ends there: the prefix is stored from its start as far as
 * it goes.
 * @return : how many leading chunks are now stored (present ones count), or -errno when none
 *           could be: -EINVAL, -ENOSPC (every byte of the tier is leased), -ENOTCONN. A chunk
 *           that the daemon's admission filter (host.admit) turns away, or that the host
 *           policy ends the put at, ends the count, so fewer than n, also 0, is a normal
 *           answer: the rest is not cached. (When the daemon records its engines' requests,
 *           trace.file, the keys of the rest are sent to it after such an answer, so the
 *           recording holds the whole request.)
 */
KVT_API int kvt_put(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *parent, const kvt_id_t *keys,
                    size_t n, const void *const *chunks, size_t chunk_len);

/*
 * Zero-extra-copy put: kvt_put_reserve hands out up to n writable chunk buffers in this
 * client's private staging area (bufs[i], each kvt_chunk_bytes long); the engine fills them
 * (memcpy or DMA) and calls kvt_put_commit with the keys, or kvt_put_abort. Between reserve and
 * commit/abort the staging area belongs to the calling thread (other puts of this client wait;
 * a kvt_put or kvt_put_reserve of that thread is -EDEADLK). The buffers stay writable through a
 * daemon restart until commit (-ENOTCONN then) or abort.
 * @return : reserve: how many buffers were handed out (>= 1), or -errno.
 *           commit: as kvt_put, for the reserved count.
 */
KVT_API int kvt_put_reserve(kvt_client_t *c, kvt_id_t ns, size_t n, void **bufs);
KVT_API int kvt_put_commit(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *parent,
                           const kvt_id_t *keys, size_t n);
KVT_API void kvt_put_abort(kvt_client_t *c);

/* @return : how many leading keys are present, or -errno. */
KVT_API int kvt_lookup(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n);

/*
 * Copies the leading hits into dst[i] (dst_len >= kvt_chunk_bytes, else -EINVAL; exactly
 * kvt_chunk_bytes are written). A chunk revoked while it was copied counts as a miss. Any n: the
 * library works in batches (at most 64 chunks, 64 MiB and a quarter of the host tier) and has
 * the daemon bring the next two up from the lower tiers while it copies one.
 * @return : how many leading chunks were copied, or -errno.
 */
KVT_API int kvt_get(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n, void *const *dst,
                    size_t dst_len);

/*
 * Leases the leading hits zero-copy into out[0..ret). Rule: copy, then release, then check
 * each lease's status; data read through a revoked lease must be discarded.
 * @return : how many leases were taken, or -errno.
 */
KVT_API int kvt_acquire(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n,
                        kvt_lease_t *out);

/*
 * Releases n leases and sets each one's status. Needs no reply from the daemon. A lease taken
 * before a daemon restart stays readable until it is released (its status is then -ESTALE); a
 * lease released a second time, or through another client, is -ESTALE too, and changes nothing.
 * @return : how many leases were valid throughout, or -errno.
 */
KVT_API int kvt_release(kvt_client_t *c, kvt_lease_t *leases, size_t n);

/*
 * A hint: the engine will soon ask for these keys (the next request's prefix, the next batch of
 * this one). Chunks that are only in a lower tier start moving into host now, so the later
 * kvt_get/kvt_acquire finds them there. Needs no reply. @return : 0 or -errno.
 */
KVT_API int kvt_prefetch(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n);

/*
 * A hint: the engine is done with these chunks -- the conversation they hold has ended (its
 * session closed, its agent task finished) and will not be read again. The policies of host
 * and of the rocksdb tier take the hint: most evict these chunks first, conv and lhd learn how
 * often such hints come true (docs/policies.md). The nvme log drops them at
 * reclaim without copying them forward or handing them to rocksdb. Nothing is deleted at once,
 * and a later read of a chunk cancels its hint. Name only the
 * conversation's own chunks, not a system prompt other conversations share (conv keeps a chunk
 * other conversations branch from anyway). Needs no reply. @return : 0, -EOPNOTSUPP from a
 * daemon older than the hint, or -errno.
 */
KVT_API int kvt_done(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n);

/*
 * Keeps these chunks in host memory for the next ttl_ms milliseconds: no eviction takes them
 * meanwhile, whatever the policy (a system prompt, a document many requests will read soon).
 * They still count against the tenant's quota; the keep outlives this client. ttl_ms is capped
 * at host.keep_max_ms; 0 ends an earlier keep. Kept chunks may hold at most host.keep_pct of
 * host: a keep past it keeps the keys before it. A chunk only in a lower tier is brought up
 * (as kvt_prefetch does) and kept from when it lands; it counts against host.keep_pct from the
 * call on. When its keep ends the chunk goes back to the policy as if just stored; kvt_done,
 * kvt_delete and a daemon restart end a keep too.
 * @return : how many of the keys are now kept or on their way up, or -errno: -ENOSPC when none
 *           fit under host.keep_pct, -EOPNOTSUPP from a daemon older than keeps.
 */
KVT_API int kvt_keep(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n, uint32_t ttl_ms);

/* Deletes the chunks (leased ones go when their leases end). @return : how many were present. */
KVT_API int kvt_delete(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n);

/* @return : a static description of a negative errno or a KVT_E_* code. */
KVT_API const char *kvt_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif /* KVTIER_H */
