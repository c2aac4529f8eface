/*
 * daemon.h -- kvtierd's state, shared by the files of ipc/daemon/ (folder-private).
 *
 * Threading: one event-loop thread owns everything here (epoll over the listening socket, the
 * clients, a signalfd and a timerfd). Requests are short and bounded (at most KVT_BATCH_MAX
 * chunks), so no request needs a lock. Memory: entries and leases live in arrays that grow by
 * doubling and are addressed by u32 index, never by pointer across calls; the policy keeps its
 * per-entry state in arrays indexed by the same entry id.
 */
#ifndef KVT_DAEMON_H
#define KVT_DAEMON_H
#include "core/options.h"
#include "ipc/proto.h"
#include "policy/policy.h"
#include "tiers/host/pool.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define KVD_NIL UINT32_MAX

enum kvd_state { KVD_FREE = 0, KVD_PUBLISHED = 1, KVD_DEAD = 2 /* deleted, waiting for leases */ };

/* One chunk. 96 bytes: with the bucket array and the policy's arrays, ~110 bytes a chunk. */
struct kvd_entry {
	kvt_id_t key, ns, parent;
	uint64_t off; /* record offset in the tenant's pool */
	uint32_t payload_bytes;
	uint32_t tenant; /* index into kvd.tenants */
	uint32_t hnext;  /* hash chain */
	uint32_t pins;   /* live leases */
	uint32_t depth;
	uint8_t state, codec, has_parent, pad;
	uint64_t seq;
	uint64_t reserved;
};
_Static_assert(sizeof(struct kvd_entry) == 96, "entry stays small");

struct kvd_index {
	struct kvd_entry *e;
	uint32_t cap, used, free_head; /* free entries chain through hnext */
	uint32_t *bucket;
	uint32_t nbucket; /* power of two */
};

struct kvd_tenant {
	uint32_t key; /* uid, the tenant's identity */
	struct kvt_pool pool;
	uint64_t used_bytes; /* granule-rounded bytes of its records */
	uint64_t chunks;
};

struct kvd_ns {
	kvt_id_t ns;
	uint32_t tenant;
	uint32_t tokens;
	uint64_t chunk_bytes;
};

struct kvd_lease {
	uint32_t entry;
	uint32_t conn;         /* KVD_NIL when free */
	uint32_t seq;          /* handle = seq << 32 | index */
	uint32_t cnext, cprev; /* the connection's leases */
	uint32_t anext, aprev; /* all leases, oldest first */
	uint64_t t_ns;
};

struct kvd_conn {
	int fd; /* -1 when the slot is free */
	uid_t uid;
	gid_t gid;
	pid_t pid;
	uint32_t tenant;  /* KVD_NIL before hello */
	uint8_t *staging; /* read-only view of the client's staging memfd */
	uint64_t staging_bytes;
	uint32_t lease_head;
	uint32_t n_leases;
};

struct kvd_stats {
	uint64_t hits, misses, puts, put_bytes, evictions, lookups;
	uint64_t leases_granted, leases_revoked, protocol_errors, corruptions;
	uint64_t enospc, deletes;
};

struct kvd {
	struct kvt_options opts;
	char sock_path[KVT_SOCK_PATH_MAX];
	char data_dir[256];
	int ep, lfd, sigfd, timerfd;
	bool draining;
	uint64_t drain_deadline_ns;

	struct kvd_index idx;
	struct kvd_tenant *tenants;
	uint32_t n_tenants;
	struct kvd_ns *nss;
	uint32_t n_nss, cap_nss;

	struct kvd_conn *conns;
	uint32_t cap_conns, n_conns;

	struct kvd_lease *leases;
	uint32_t cap_leases, free_lease, n_leases, age_head, age_tail;

	const struct kvt_policy_ops *pol_ops;
	struct kvt_policy *pol;

	uint64_t host_cap, host_used; /* granule-rounded, across tenants */
	uint64_t gen_counter, seq_counter;
	struct kvd_stats st;
	uint8_t rx[KVT_MSG_MAX];
	uint8_t tx[KVT_MSG_MAX];
};

/* index.c */
int kvd_index_init(struct kvd_index *x, uint32_t cap);
void kvd_index_fini(struct kvd_index *x);
uint32_t kvd_index_find(const struct kvd_index *x, uint32_t tenant, kvt_id_t ns, kvt_id_t key);
/* @return : a fresh entry id (not yet in the hash), or KVD_NIL when the index is full. */
uint32_t kvd_index_alloc(struct kvd_index *x, uint32_t max);
void kvd_index_insert(struct kvd_index *x, uint32_t id);
void kvd_index_unlink(struct kvd_index *x, uint32_t id);
void kvd_index_release(struct kvd_index *x, uint32_t id);
uint64_t kvd_index_bytes(const struct kvd_index *x);

/* store.c: the host tier's chunk operations */
int kvd_tenant_get(struct kvd *d, uint32_t uid, uint32_t *out);
int kvd_ns_register(struct kvd *d, uint32_t tenant, const kvt_model_t *m, kvt_id_t *ns,
                    uint64_t *chunk_bytes);
const struct kvd_ns *kvd_ns_find(const struct kvd *d, uint32_t tenant, kvt_id_t ns);
int kvd_put(struct kvd *d, struct kvd_conn *c, const struct kvt_msg_put *p,
            const struct kvt_msg_put_item *items, uint32_t n);
int kvd_lookup(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys, uint32_t n);
int kvd_delete(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys, uint32_t n);
void kvd_entry_unpin(struct kvd *d, uint32_t id);

/* lease.c */
int kvd_acquire(struct kvd *d, uint32_t conn, kvt_id_t ns, const kvt_id_t *keys, uint32_t n,
                struct kvt_msg_lease *out);
void kvd_release(struct kvd *d, uint32_t conn, const uint64_t *handles, uint32_t n);
void kvd_release_all(struct kvd *d, uint32_t conn);
void kvd_leases_expire(struct kvd *d, uint64_t now_ns);

/* conn.c */
void kvd_conn_accept(struct kvd *d);
void kvd_conn_readable(struct kvd *d, uint32_t conn);
void kvd_conn_close(struct kvd *d, uint32_t conn);

/* stats.c */
int kvd_stats_json(struct kvd *d, char *buf, size_t len);
#endif
