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
#define KVD_STATS_TENANTS 64 /* tenants itemised by kvtier stats, per tier */
#define KVT_DAEMON_H
#include "core/keys.h"
#include "core/options.h"
#include "ipc/proto.h"
#include "policy/policy.h"
#include "policy/minisim.h"
#include "policy/quota.h"
#include "tiers/host/pool.h"
#include "tiers/tier.h"

_Static_assert(KVT_GRANULE == KVT_POOL_GRANULE, "the wire names pool granules");

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define KVD_NIL UINT32_MAX

enum kvd_state { KVD_FREE = 0, KVD_PUBLISHED = 1, KVD_DEAD = 2 /* deleted, waiting for leases */ };

#define KVD_MAX_LOWER 2     /* persistent tiers below host */
#define KVD_MAX_NS    65536 /* namespaces registered, all tenants (KVT_E_NSFULL past it) */
#define KVD_PUT_GUARD 1024  /* ancestors of a put kept from its evictions (store.c) */
enum { KVD_AT_HOST = 1 };   /* where: bit 0 host, bit 1 + k lower tier k */

/* One chunk. 104 bytes: with the bucket array and the policy's arrays, < 128 bytes a chunk. */
struct kvd_entry {
	kvt_id_t key, ns, parent;
	uint64_t off;                /* record offset in the tenant's pool, when at host */
	uint64_t loc[KVD_MAX_LOWER]; /* location in each lower tier, when there */
	uint64_t seq;                /* record sequence number: names this version of the entry */
	uint32_t payload_bytes;
	uint32_t tenant; /* index into kvd.tenants */
	uint32_t hnext;  /* hash chain */
	uint32_t depth;
	uint16_t pins; /* live leases (host copy) */
	uint16_t jobs; /* tier jobs reading or writing the host copy */
	uint8_t state, codec, where;
	bool has_parent : 1;
	bool put_guarded : 1; /* pinned by the put running now, as its own prefix (store.c) */
	bool done_below : 1;  /* kvt_done reached a lower tier's copy, and no host hit since */
};
_Static_assert(sizeof(struct kvd_entry) == 104, "entry stays small");

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
	uint64_t idx_live, idx_tomb; /* its shared lookup table (shmidx.c) */
	bool idx_full;
	uint64_t hits, misses,
	    evictions; /* host tier: acquired chunks, acquires cut short, evicted */
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

#define KVD_PEER_GROUPS 32
/* A connection's request being recorded (record.c): its chunks' ids so far. */
struct kvd_rec_req {
	uint64_t *ids;
	uint32_t n, cap;
	uint64_t ms;    /* when it began (wall clock) */
	bool all_found; /* every key it acquired was found: the client may ask on */
	bool put;       /* the engine has put its chunks */
	/* > 0: ids from here on are an acquire that found nothing after one that found all, the
	 * request's next batch or a request of its own; the put that follows says which */
	uint32_t maybe_at;
	uint64_t maybe_ms; /* when that acquire came */
};

struct kvd_conn {
	int fd;          /* -1 when the slot is free */
	uint8_t *parked; /* a request waiting for tier jobs (its copy), or NULL */
	uint32_t parked_len;
	uint32_t
	    *held; /* a parked acquire's chunks at host, kept there (pinned) until it resumes */
	uint32_t n_held;
	uint64_t park_deadline_ns;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	int pidfd; /* the process that connected (SO_PEERPIDFD), -1 when the kernel gave none */
	uint32_t n_groups;                /* the peer's supplementary groups (SO_PEERGROUPS), */
	uint32_t groups[KVD_PEER_GROUPS]; /* for client.allow's @GID; 0 when it has more */
	uint32_t tenant;                  /* KVD_NIL before hello */
	uint8_t *staging;                 /* read-only view of the client's staging memfd */
	uint64_t staging_bytes;
	uint32_t lease_head;
	uint32_t n_leases;
	uint64_t req_ns;      /* when the request being served was read (kept while it is parked) */
	uint64_t accepted_ns; /* when it connected: client.hello_ms counts from here */
	struct kvd_rec_req *rec; /* while trace.file records: its request (record.c), or NULL */
	/* its last PUT stored fewer chunks than it carried: the messages of the same kvt_put
	 * already on their way (KVT_PUT_F_CONTINUES) store nothing */
	bool put_cut;
	/* a parked PUT's leading chunks that its tries so far have shown to the policy (read or
	 * stored) and counted for admission: a retry shows and counts each chunk once */
	uint16_t put_shown, put_counted;
};

/* keep.c: chunks kvt_keep holds at host, out of the policy until their keep ends */
struct kvd_keep_ent {
	uint64_t until; /* kvt_now_ns() when the keep ends */
	uint32_t id;
};
struct kvd_keeps {
	uint64_t *until;           /* per index slot, 0: not kept; NULL before the first keep */
	uint64_t *pending;         /* bit per slot: kept once its promotion lands at host */
	uint32_t cap;              /* slots in until and pending */
	struct kvd_keep_ent *heap; /* by until; an entry that until[] disagrees with is stale */
	size_t n, hcap;
	uint32_t chunks; /* kept now, and their host bytes */
	uint64_t bytes;
	uint32_t
	    pending_chunks; /* on their way up from a lower tier, and the host bytes they take */
	uint64_t pending_bytes;
};

struct kvd_stats {
	uint64_t hits, misses, puts, put_bytes, evictions, lookups;
	uint64_t leases_granted, leases_revoked, protocol_errors, corruptions;
	uint64_t clients_refused; /* not in client.allow, or past client.max(_per_uid) */
	uint64_t enospc, deletes, eagain;
	uint64_t done_hints;     /* kvt_done keys that named a chunk the index has (any tier) */
	uint64_t keeps;          /* kvt_keep keys kept */
	uint64_t keep_refused;   /* kvt_keep calls cut short by host.keep_pct */
	uint64_t told_evictions; /* of evictions at host: chunks the engine was done with */
	uint64_t demoted, promoted, promote_failed, demote_failed, lower_dropped, recovered;
	uint64_t lower_moved;    /* records a lower tier copied forward (nvme.quota, clock) */
	uint64_t promote_resent; /* promotions sent again to where their record moved */
	uint64_t not_admitted;
	uint64_t puts_cut;    /* puts that ended at their own prefix: host full of it, or the host
	                       * policy's first victim (store.c) */
	uint64_t put_present; /* chunks a PUT carried that were held: read at host, or left below */
	uint64_t puts_parked; /* PUT messages that waited for room (demotions), each once */
	/* operator's commands that waited for a lower tier busy with I/O, each once; and those
	 * answered -EBUSY past tiers.command_wait_ms */
	uint64_t commands_parked, commands_busy;
	/* victims a policy proposed that were leased, in a tier's job or not at host: skipped,
	 * never evicted. 0 unless a policy breaks the seam's promise (a debug build panics
	 * instead). */
	uint64_t victims_refused;
	uint64_t cascaded, cascade_failed; /* records a lower tier evicted into the next */
};

/* Request latency per kind (latency.c): buckets bounded by kvd_lat_bound_us, one above. */
#define KVD_LAT_BUCKETS 22
enum kvd_op { KVD_OP_LOOKUP, KVD_OP_ACQUIRE, KVD_OP_PUT, KVD_OP_DELETE, KVD_OP_OTHER, KVD_OP__N };
struct kvd_latency {
	uint64_t count, sum_ns, max_ns;
	uint64_t bucket[KVD_LAT_BUCKETS + 1];
};
extern const uint64_t kvd_lat_bound_us[KVD_LAT_BUCKETS];

/* A persistent tier below host, driven by the tier worker thread (tierwork.c). */
struct kvd_lower {
	const struct kvt_tier_ops *ops;
	struct kvt_tier *t;
	pthread_mutex_t lock;     /* one caller at a time (tier.h) */
	bool second_touch;        /* admission: demote on the second access only */
	bool cascades;            /* hands what it evicts to the next tier (tiers.placement) */
	bool pol_auto;            /* TIER.policy = auto: kvd_tiers_policy_auto picks */
	char pol_auto_name[64];   /* ... and what it runs, for stats (no lock) */
	_Atomic uint64_t busy_ns; /* the worker's time inside this tier's I/O (stats: busy_us) */
	/* the loop wants lock (kvd_lower_take found it busy): until then the tier's write stream
	 * stops pulling and no worker starts I/O on the tier; 0: not wanted */
	_Atomic uint64_t wanted_until_ns;
	uint32_t pools_told; /* loop thread: tenants whose pools the tier was told of */
	bool auto_owed;      /* loop thread: TIER.policy = auto found the lock busy; looks again */
	struct kvt_mrc *mrc; /* owned, loop thread: its reads' miss-ratio curve, or NULL */
	struct kvt_minisim *minisim; /* owned, loop thread: its policy's own curve, or NULL */
	uint64_t reads_again_ns;     /* loop thread: it answered a read -EAGAIN (disabled, closed);
	                              * no promotion from it before this time or its enable */
	/* loop thread: its tenants' accounts as last read (stats), shown again while the worker
	 * holds lock for a slow device's I/O */
	struct kvt_tier_tenant ten[KVD_STATS_TENANTS];
	size_t n_ten;
};

struct kvd_job; /* tierjob.h */

/* One metrics scrape (metrics.c). */
#define KVD_HTTP_MAX 8
struct kvd_http {
	int fd; /* -1: free */
	uint64_t since_ns;
	size_t in_len, out_len, out_pos;
	char *out; /* the answer, once the request is in */
	char in[2048];
};
/* epoll tags of the metrics server (life.c's loop dispatches them) */
enum { KVD_EV_METRICS = 5, KVD_EV_HTTP0 = 8 };
/* | a connection's slot: the process that connected has exited (its pidfd is readable) */
#define KVD_EV_PEER_GONE (1ull << 32)
_Static_assert(KVD_EV_HTTP0 + KVD_HTTP_MAX <= 16, "below life.c's EV_CONN0");
/* | k: refusing[k] is readable (refuse.c) */
#define KVD_EV_REFUSING (1ull << 33)

/* A connection that is refused once it says hello (refuse.c); since_ns 0: a free entry. */
#define KVD_REFUSING_MAX 16
struct kvd_refusing {
	int fd;
	uint64_t since_ns;
};

/* Acquired key hashes waiting to be replayed, and where each request ends (curvework.c). */
struct kvd_keyq {
	uint64_t *keys;
	uint32_t *ends;
	size_t n, reqs, cap_keys, cap_reqs;
};

/* trace.file's recording (record.c); loop thread only. */
struct kvd_record {
	int fd;              /* the file, or -1: not recording */
	char *buf;           /* lines not yet written (64 KiB) */
	size_t len;          /* ... bytes of them */
	uint64_t file_bytes; /* the file's size, as this daemon has written it */
	uint64_t requests;   /* request lines written since trace.file was last set to a file */
	int stopped;         /* why the recording ended by itself: -EFBIG (trace.max_bytes), a
	                      * write's -errno; 0: it did not */
};

/* The worker that replays host's own curve (curvework.c); sim_lock before q_lock. */
struct kvd_curvework {
	pthread_mutex_t q_lock;   /* in, stop */
	pthread_mutex_t sim_lock; /* d->minisim while it may replay, work, by_worker, by_loop */
	pthread_cond_t wake;
	struct kvd_keyq in, work; /* what acquires add; what the worker replays */
	pthread_t thread;
	bool started, failed, stop;
	uint64_t by_worker, by_loop; /* keys replayed on the worker, on the loop thread */
};

struct kvd {
	struct kvt_options opts;
	char sock_path[KVT_SOCK_PATH_MAX];
	char data_dir[256];
	/* what a start read options from, read again at SIGHUP (kvd_config_reload) */
	const char *config_file;     /* --config, or NULL */
	const char *const *arg_sets; /* the --set arguments, in order */
	int n_arg_sets;
	int ep, lfd, sigfd, timerfd;
	int owner_fd; /* the data directory's lock (owner.c) */
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
	bool pol_auto;     /* host.policy = auto: kvd_policy_auto picks pol_ops */
	size_t pol_chunks; /* the capacity in chunks pol was built for (kvd_host_chunks) */
	struct kvt_minisim *minisim; /* the host policy's own curve, or NULL (kvd_minisim_reset) */
	struct kvd_curvework cw;     /* what replays it (curvework.c) */
	struct kvd_record rec;       /* trace.file (record.c) */
	uint64_t mini_chunk;     /* the smallest namespace's chunk bytes the curves are sized by */
	struct kvt_mrc *mrc;     /* host tier's miss-ratio curve (sampled) */
	struct kvt_admit *admit; /* host.admit's filter, or NULL (admit everything) */
	size_t admit_hint;       /* the host chunk count admit was sized for */
	uint64_t admit_records;  /* records since start: when to check admit_hint */
	struct kvt_quota *quota; /* per-tenant host bytes, or NULL without tenant.quota */

	struct kvd_lower lower[KVD_MAX_LOWER];
	uint32_t n_lower;
	struct kvd_worker *workers; /* tierwork.c: one per lower tier */
	int evfd;                   /* the workers' completions wake the loop */
	uint32_t demotes_inflight, promotes_inflight;
	uint64_t dirty_bytes; /* host records of chunks with a demotion pending (host.dirty_pct) */
	uint32_t lower_held;  /* loop thread: bit k, it holds lower[k].lock (kvd_lower_take) */
	int lower_busy;       /* the lower tier kvd_lower_take last found busy, or -1 */
	bool lower_wait;      /* kvd_lower_take waits for the lock (a start) */
	uint64_t reload_owed_ns; /* a SIGHUP's reload waits for the lower tiers since (0: none) */
	bool resuming;           /* dispatching a parked request */
	bool resume_final;       /* ... for the last time: no more waiting */
	uint64_t park_next_ns;   /* the earliest parked request's deadline (0: none); the loop
	                          * wakes for it (run) */

	/* the entries a put has pinned while it makes room (store.c, put_guard) */
	uint32_t put_guard[KVD_PUT_GUARD + KVT_BATCH_MAX], n_put_guard;

	uint64_t host_cap, host_used; /* granule-rounded, across tenants */
	uint64_t gen_counter, seq_counter;
	struct kvd_stats st;
	struct kvd_keeps keeps;
	struct kvd_latency lat[KVD_OP__N];
	int metrics_fd; /* metrics.listen, or -1 */
	uint16_t metrics_port;
	struct kvd_http http[KVD_HTTP_MAX];
	struct kvd_refusing refusing[KVD_REFUSING_MAX];
	uint8_t rx[KVT_MSG_MAX];
	uint8_t tx[KVT_MSG_MAX];
};

/* index.c */
int kvd_index_init(struct kvd_index *x, uint32_t cap);
void kvd_index_fini(struct kvd_index *x);
uint32_t kvd_index_find(const struct kvd_index *x, uint32_t tenant, kvt_id_t ns, kvt_id_t key);
/* A chunk's id, the one trace.file records: kvt__chunk_id of its tenant's key (a uid, or a
 * tenant.map name's), not of the tenant's index, which is the order tenants came in this run:
 * so a recording appended across restarts names each chunk (and each tenant, t=KEY) alike. */
static inline uint64_t kvd_chunk_id(const struct kvd *d, uint32_t tenant, kvt_id_t ns, kvt_id_t key)
{
	return kvt__chunk_id(d->tenants[tenant].key, ns, key);
}
/* The key hash every policy, admission sketch and curve is shown for a chunk: that of its id,
 * so `kvtier sim` replays a recording with the same hashes. */
static inline uint64_t kvd_key_hash(const struct kvd *d, uint32_t tenant, kvt_id_t ns, kvt_id_t key)
{
	return kvt_policy_key_hash(kvd_chunk_id(d, tenant, ns, key));
}
/* @return : a fresh entry id (not yet in the hash), or KVD_NIL when the index is full. */
uint32_t kvd_index_alloc(struct kvd_index *x, uint32_t max);
void kvd_index_insert(struct kvd_index *x, uint32_t id);
void kvd_index_unlink(struct kvd_index *x, uint32_t id);
void kvd_index_release(struct kvd_index *x, uint32_t id);
uint64_t kvd_index_bytes(const struct kvd_index *x);
/* Walks every hash chain and the free list: each chained entry published, in its key's bucket
 * and the first found by its key; the free list holds cap - used free entries. *chained: how
 * many are chained. @return : 0, -EUCLEAN. */
int kvd_index_audit(const struct kvd_index *x, uint32_t *chained);

/* store.c: the host tier's chunk operations */
int kvd_tenant_get(struct kvd *d, uint32_t uid, uint32_t *out);
int kvd_ns_register(struct kvd *d, uint32_t tenant, const kvt_model_t *m, kvt_id_t *ns,
                    uint64_t *chunk_bytes);
const struct kvd_ns *kvd_ns_find(const struct kvd *d, uint32_t tenant, kvt_id_t ns);
int kvd_put(struct kvd *d, struct kvd_conn *c, const struct kvt_msg_put *p,
            const struct kvt_msg_put_item *items, uint32_t n);
int kvd_lookup(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys, uint32_t n);
int kvd_delete(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys, uint32_t n);
/* kvt_done: the host policy offers these chunks first (on_done; ignored by a policy without
 * it), and so does each lower tier's that holds one (kvd_tiers_done). @return : how many the
 * index has. */
int kvd_done(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys, uint32_t n);
void kvd_entry_unpin(struct kvd *d, uint32_t id);

void kvd_entry_unjob(struct kvd *d, uint32_t id);
/* keep.c. kvt_keep: keeps the chunks of keys at host (out of the policy) until ttl_ms from now,
 * at most host.keep_max_ms; ttl_ms 0 ends their keeps. A chunk only in a lower tier is promoted
 * and kept when it lands. @return : how many are kept now or on their way up, -ENOSPC when
 * host.keep_pct left room for none, -ENOMEM. */
int kvd_keep(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys, uint32_t n,
             uint32_t ttl_ms);
bool kvd_kept(const struct kvd *d, uint32_t id);
/* A promotion of id landed at host (tierdone.c): @return : whether a keep waited for it, and id
 * is kept now (the policy must not take it); false when none waited or its keep has ended. */
bool kvd_keep_landed(struct kvd *d, uint32_t id);
/* Whether id is on its way up to a keep (a keep named it while it was only in a lower tier). */
bool kvd_keep_pending(const struct kvd *d, uint32_t id);
/* The keeps that have ended go back to the policy, as if just stored. */
void kvd_keep_expire(struct kvd *d);
/* id's keep ends now (back to the policy); nothing when it is not kept. */
void kvd_keep_end(struct kvd *d, uint32_t id);
/* id's host copy is going: it is no longer kept (the policy does not hold it either). */
void kvd_keep_forget(struct kvd *d, uint32_t id);
void kvd_keep_fini(struct kvd *d);
/* policyctl.c: the entries the host policy holds: published at host, and not kept. */
size_t kvd_host_resident(const struct kvd *d);
/* policyctl.c: what the host policy is told about entry id (parent only if at host). */
void kvd_host_meta(void *d, uint32_t id, struct kvt_policy_meta *m);
/* Tells the host policy that the calls which follow come from connection conn (KVD_NIL: the
 * daemon itself -- a promotion landing, a keep ending): conv keeps each engine's request in
 * flight apart (policy.h, on_stream). */
static inline void kvd_policy_stream(struct kvd *d, uint32_t conn)
{
	if (d->pol_ops->on_stream)
		d->pol_ops->on_stream(d->pol, conn == KVD_NIL ? 0 : conn + 1);
}

/* Drops the entry everywhere (host copy freed when its last reader ends). */
void kvd_entry_drop(struct kvd *d, uint32_t id);
/* Drops only the host copy (a lower tier keeps the chunk). */
void kvd_entry_drop_host(struct kvd *d, uint32_t id);
/* Finds room for a record of payload bytes in tenant t's pool, accounted as used; for a put
 * (put), evicting the host policy's choices in its order (put_evict_one in store.c).
 * @return : offset, -ENOSPC, -EFBIG, or -EINPROGRESS (full of chunks waiting for demotion, or
 * a put's victim is one). */
int64_t kvd_make_room(struct kvd *d, uint32_t t, uint64_t payload, bool put);
uint64_t kvd_rec_bytes(uint64_t payload);
int kvd_tenant_of_uid(const struct kvd *d, uint32_t uid);

/* tiers.c: lower tiers, demotion, promotion, recovery (workers: tierwork.c, tierdone.c) */
/* The tier options a start checks before any tier opens, without a device: tiers.placement,
 * tiers.order (each tier in this build, at most KVD_MAX_LOWER below host, host named), and
 * each named tier's admit and its options (kvt_tier_ops.check). @return : 0, -EINVAL (logged). */
int kvd_tiers_check(const struct kvt_options *o);
/* Opens the tiers of tiers.order (kvd_tiers_check first) and recovers their chunks. */
int kvd_tiers_open(struct kvd *d);
void kvd_tiers_close(struct kvd *d);
/* Tells the lower tiers of every tenant's pool not yet told (nvme's fixed buffers); a tier
 * whose lock is busy is told later (kvd_tiers_complete), its I/O plain meanwhile. */
void kvd_tiers_register_pools(struct kvd *d);
/* Queues demotion of a host copy into the lower tiers (admission decides). */
void kvd_tiers_demote(struct kvd *d, uint32_t id, bool put);
/* Queues promotions for the leading keys lacking a host copy (for a parked request or a
 * prefetch). The leading keys at host are pinned meanwhile, so that making room does not evict
 * them; with hold, they stay pinned in hold->held (kvd_conn_unhold lets them go).
 * @return : jobs to wait for, one more when a key waits for host room that jobs in flight will
 * free (0: nothing could be started, nor will be). */
uint32_t kvd_tiers_promote(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys,
                           uint32_t n, struct kvd_conn *hold);
/* Unpins what a parked acquire held (kvd_tiers_promote). */
void kvd_conn_unhold(struct kvd *d, struct kvd_conn *c);
void kvd_tiers_remove(struct kvd *d, const struct kvd_entry *e);
/* Queues kvt_done's hint for entry id on each lower tier that holds it and takes hints. */
void kvd_tiers_done(struct kvd *d, uint32_t id);
/* Entry id was read at host (or put again) after kvd_tiers_done: the lower tiers told take the
 * hint back (JOB_AGAIN), so that nvme's log hands it over again instead of dropping it. */
void kvd_tiers_again(struct kvd *d, uint32_t id);
/* Handles the worker's completions (evfd readable). */
void kvd_tiers_complete(struct kvd *d);
/*
 * Lower tier k's lock, for the loop thread, held until kvd_lower_give_all (the end of the
 * command or event it serves). The loop does not wait for it: a worker holds it through a
 * device's I/O, seconds on a slow device, and every engine's request would wait as long. Found
 * busy, the tier is wanted for KVD_WANT_NS: its write stream stops pulling, and its worker (or
 * the one above, handing over) starts no I/O on it but wakes the loop, whose parked command
 * then takes it. With d->lower_wait (the banner at start: no I/O runs yet, nothing to park)
 * it waits. @return : 0, or -EBUSY (d->lower_busy = k).
 */
#define KVD_WANT_NS (100 * 1000000ull)
int kvd_lower_take(struct kvd *d, uint32_t k);
/* Every lower tier's lock, or none: -EBUSY as kvd_lower_take. */
int kvd_lower_take_all(struct kvd *d);
void kvd_lower_give_all(struct kvd *d);
/* Whether the loop wants l's lock: a write stream stops pulling. */
bool kvd_lower_wanted(struct kvd_lower *l);
/* The loop wants l's lock until at least until_ns (kvt_now_ns). */
void kvd_lower_want(struct kvd_lower *l, uint64_t until_ns);

/* tierctl.c: the lower tiers at run time (enable, quotas, policies), their curves' reads, stats */
int kvd_tiers_enable(struct kvd *d, const char *name);
/* @return : the index of the lower tier named name, or -ENOENT, with err (may be NULL) saying
 * which tiers run. */
int kvd_tiers_find(const struct kvd *d, const char *name, char *err, size_t err_len);
/* Lower tier k's eviction policy (tier.h policy_get / policy_set) under its lock; set with name
 * NULL gives params to the running policy. @return : 0, -EOPNOTSUPP (its eviction is not a policy:
 * err says what it is), or policy_set's error. */
int kvd_tiers_policy_get(struct kvd *d, uint32_t k, char *out, size_t out_len);
/* TIER.quota at run time (tier.h quota_set) on lower tier tier, under its lock; list "none" or ""
 * turns it off. @return : 0, -ENOENT (no such tier running), -EOPNOTSUPP, or quota_set's error;
 * err says why. */
int kvd_tiers_quota_set(struct kvd *d, const char *tier, const char *list, char *err,
                        size_t err_len);
/* The option TIER.policy (suffix "") or TIER.policy_params ("_params") of lower tier k, which
 * holds its running policy (set at open, kept up to date by kvd_tiers_policy_set), or NULL when
 * the tier has no policy. */
char *kvd_tiers_policy_opt(struct kvd *d, uint32_t k, const char *suffix);
int kvd_tiers_policy_set(struct kvd *d, uint32_t k, const char *name, char *params, char *err,
                         size_t err_len);
/* An acquire met key_hash (tenant-mixed) at where (0: not indexed): a host miss is a read of
 * each lower tier down to the first that holds it, for their miss-ratio curves. */
void kvd_tiers_note_read(struct kvd *d, uint64_t key_hash, uint8_t where);
void kvd_tiers_stats_json(struct kvd *d, char *buf, size_t len, size_t *pos);

/* shmidx.c: the tenant's lookup table in shared memory */
void kvd_shmidx_init(struct kvd *d, uint32_t tenant, uint64_t slots);
void kvd_shmidx_insert(struct kvd *d, uint32_t tenant, kvt_id_t key);
void kvd_shmidx_remove(struct kvd *d, uint32_t tenant, kvt_id_t key);
/* Marks the table incomplete (the daemon is going away). */
void kvd_shmidx_close(struct kvd *d, uint32_t tenant);

/* tenant.c */
uint32_t kvd_tenant_key(const struct kvd *d, uint32_t uid, uint32_t gid);
/* Whether list is a valid client.allow ("UID,@GID,..."). @return : 0, -EINVAL (err says). */
int kvd_client_allow_check(const char *list, char *err, size_t err_len);
/* Whether connection c's peer may attach (client.allow): its uid, or its primary gid or one of
 * its supplementary groups as @GID. */
bool kvd_client_allowed(const struct kvd *d, const struct kvd_conn *c);
/* Whether list is a valid tenant.map ("UID=NAME,@GID=NAME,..."). @return : 0, -EINVAL. */
int kvd_tenant_map_check(const char *list, char *err, size_t err_len);
int kvd_quota_apply(struct kvd *d, uint32_t tenant, uint32_t key);
/* tenant.quota set at run time to list ("" or "none": off): every known tenant's limits from
 * it, none for those it does not name. @return : 0, -EINVAL (err says why; nothing changed),
 * -ENOMEM. */
int kvd_quota_reset(struct kvd *d, const char *list, char *err, size_t err_len);
/* Whether list is a valid tenant.quota ("" and "none" are). @return : 0, -EINVAL (err says). */
int kvd_quota_check(const char *list, char *err, size_t err_len);
/* Frees a host record of tenant t at off and its accounting (store.c). */
void kvd_host_release(struct kvd *d, uint32_t t, uint64_t off, uint64_t rec_bytes);

/* policyctl.c */
/* Replaces the host's admission filter by name's ("none", "tinylfu", "second_touch"), sized
 * for the chunks host holds now. @return : 0, -ENOENT (err says why), -ENOMEM. */
int kvd_admit_set(struct kvd *d, const char *name, char *err, size_t err_len);
/* A host access (acquire, or put of a present chunk) or put of key_hash: the filter counts it. */
void kvd_admit_record(struct kvd *d, uint64_t key_hash);
/* The policy's own curve by miniature simulation (policy/minisim.h) of the host (tier < 0) or
 * of lower tier `tier`, remade for the running policy and parameters and for the tier's bytes
 * over the smallest namespace's records; none while mrc.minisim_entries is 0, no namespace is
 * registered, or the policy is lru (whose curve SHARDS gives already). */
void kvd_minisim_reset(struct kvd *d, int tier);
/* A namespace of chunk_bytes registered: every curve is remade when its chunks are the smallest
 * yet (the tiers hold more of them). */
void kvd_minisim_chunk(struct kvd *d, uint64_t chunk_bytes);
/* record.c: trace.file, each engine request as a trace line for `kvtier sim`. open takes a
 * path ("" or "none": stop), refused (-EINVAL, -errno of open, -EFBIG past trace.max_bytes)
 * leaving the recording as it was; check only looks at the path. acquire (got: what it served),
 * put, unsent and done add connection conn's calls to its request while a recording runs
 * (callers test d->rec.fd >= 0); conn_gone writes conn's request out before the connection goes;
 * tick writes what waits; close writes everything and ends the recording. */
int kvd_record_check(const char *path, char *err, size_t err_len);
int kvd_record_open(struct kvd *d, const char *path, char *err, size_t err_len);
void kvd_record_acquire(struct kvd *d, uint32_t conn, kvt_id_t ns, const kvt_id_t *keys, uint32_t n,
                        int got);
void kvd_record_put(struct kvd *d, uint32_t conn, const struct kvt_msg_put *p,
                    const struct kvt_msg_put_item *items, uint32_t n);
void kvd_record_done(struct kvd *d, uint32_t conn, kvt_id_t ns, const kvt_id_t *keys, uint32_t n);
/* The rest of conn's last put, which a short reply cut (UNSENT): the request goes on with it. */
void kvd_record_unsent(struct kvd *d, uint32_t conn, kvt_id_t ns, const kvt_id_t *keys, uint32_t n);
void kvd_record_conn_gone(struct kvd *d, uint32_t conn);
void kvd_record_tick(struct kvd *d);
void kvd_record_close(struct kvd *d);

/* curvework.c: host's own curve, replayed on a worker thread. Every call from the loop thread.
 * init before any other, fini (joins the worker) after the last. */
void kvd_curvework_init(struct kvd *d);
void kvd_curvework_fini(struct kvd *d);
/* An acquire of n keys, a prefix chain, by their hashes (kvd_key_hash): the miniature
 * simulations replay it on the worker, or at once while more than mrc.minisim_queue keys wait
 * (or there is no worker). */
void kvd_minisim_feed(struct kvd *d, const uint64_t *key_hash, uint32_t n);
/* Replays every waiting key now, after the worker's batch: d->minisim then holds every acquire
 * so far, and the worker leaves it alone until the next feed. */
void kvd_minisim_drain(struct kvd *d);
/* Stops the worker between batches until kvd_minisim_release, so d->minisim can be read, or
 * (drop: what waits is dropped) replaced. */
void kvd_minisim_hold(struct kvd *d, bool drop);
void kvd_minisim_release(struct kvd *d);
/* A miss-ratio curve as mrc.sample_ppm and mrc.max_keys say, or NULL (no memory). */
struct kvt_mrc *kvd_mrc_new(const struct kvd *d);
/* Switches the host policy to name with "k=v" params (modified), keeping every chunk; "auto"
 * (no params) lets kvd_policy_auto choose, any other name or a parameter ends auto.
 * @return : 0, -ENOENT, -EINVAL, -ERANGE, -ENOMEM; err says why. */
int kvd_policy_set(struct kvd *d, const char *name, char *params, char *err, size_t err_len);
/* host.policy = auto (pol_auto): conv's ~420 bytes per chunk are under 1 % of a chunk this
 * large, and it beats lru on every measured workload (docs/policies.md); below it lru keeps the
 * 128-byte budget. Called when a namespace registers: switches, keeping every chunk, when the
 * choice changed. */
#define KVD_AUTO_CONV_BYTES (64u << 10)
void kvd_policy_auto(struct kvd *d);
/* The host tier's capacity in chunks, as its policy is told when it is built: host.bytes over
 * the record of the smallest registered namespace's chunk (of a KVD_AUTO_CONV_BYTES chunk
 * before one registers), at most index.max_chunks. */
size_t kvd_host_chunks(const struct kvd *d);
/* Whether every registered namespace's chunks are KVD_AUTO_CONV_BYTES or more (and there is
 * one): when the auto policies run conv. */
bool kvd_auto_large_chunks(const struct kvd *d);
/* TIER.policy = auto on the lower tiers (rocksdb): conv where host's auto would run it, arc
 * (the best classical policy below host) until then; called where kvd_policy_auto is. */
void kvd_tiers_policy_auto(struct kvd *d);
int kvd_policy_command(struct kvd *d, char *cmd, char *out, size_t out_len);
/* config.c: "get [NAME]" | "set NAME VALUE" (runtime options only); the reply text to out. */
int kvd_config_command(struct kvd *d, char *cmd, char *out, size_t out_len);
/* The options a start reads: defaults, then file (NULL: none), KVTIER_* variables, sets.
 * @return : 0, or -EINVAL with err saying where. */
int kvd_options_read(struct kvt_options *o, const char *file, const char *const *sets, int n,
                     char *err, size_t err_len);
/* SIGHUP: kvd_config_reload once every lower tier's lock is free (kvd_lower_take_all). A tier
 * busy with I/O is wanted meanwhile and its worker wakes the loop, which calls this again (the
 * tiers' completions, the timer); past tiers.command_wait_ms it is not run, and says so. */
void kvd_config_reload_owed(struct kvd *d);
/* SIGHUP (o NULL) and `kvtier config reload`: the options a start would read now, applied where
 * they may change at run time, all or none; what it did is logged and written to o.
 * @return : 0, -EINVAL (nothing changed: a value refused, or the file unreadable), -EIO (an
 *           apply failed after every check passed), -ENOMEM. */
struct kvd_out;
int kvd_config_reload(struct kvd *d, struct kvd_out *o);
/* inspect.c: "inspect [NS [KEY]]" (tenant: the caller's, or KVD_NIL for every tenant's) and
 * "flush all|NS|tenant UID" (the caller checked that it may). @return : 0, -EINVAL, -ENOENT. */
int kvd_inspect_command(struct kvd *d, uint32_t tenant, char *cmd, char *out, size_t out_len);
/* @return : 0 when v is a valid value of admission option opt (host.admit, TIER.admit); else
 * -EINVAL with a message in err. */
int kvd_config_check_admit(const char *opt, const char *v, char *err, size_t err_len);
/* What TIER.policy_params reads after `policy set` puts name with "k=v" words on a tier whose
 * policy is running with params: the words merged into params (kvt_params_merge), or the words
 * alone when name switches policy or they begin with "defaults". Written to rec
 * (KVT_OPT_STR_MAX); nothing is applied.
 * @return : 0, -EINVAL (not k=v words), -ERANGE (too long); err says which. */
int kvd_params_record(const char *params, const char *running, const char *name, const char *words,
                      char *rec, char *err, size_t err_len);

/* lease.c */
/* @return : leases granted; *promote set when a leading entry has no host copy yet. */
int kvd_acquire(struct kvd *d, uint32_t conn, kvt_id_t ns, const kvt_id_t *keys, uint32_t n,
                struct kvt_msg_lease *out, bool *promote);
void kvd_release(struct kvd *d, uint32_t conn, const uint64_t *handles, uint32_t n);
void kvd_release_all(struct kvd *d, uint32_t conn);
/* When the oldest lease expires (0: none), so that the loop wakes for it. */
uint64_t kvd_leases_next_ns(const struct kvd *d);
void kvd_leases_expire(struct kvd *d, uint64_t now_ns);

/* life.c: the start, the loop and the stop (main.c reads the options before them) */
/* The signals the loop takes through its signalfd (SIGTERM, SIGINT: drain; SIGHUP: reload). */
const sigset_t *kvd_loop_signals(sigset_t *ss);
/* Every check a start makes that touches nothing (--print-config runs it too). */
int kvd_daemon_check(struct kvd *d);
/* The data directory, its lock, the tiers, the loop's fds and the listening socket. */
int kvd_daemon_setup(struct kvd *d);
/* One turn of the loop, waiting at most timeout_ms (-1: until an event). @return : events
 * handled, or -errno from epoll_wait. */
int kvd_loop_once(struct kvd *d, int timeout_ms);
/* Turns until a drain (kvd_drain, SIGTERM) ends. */
void kvd_daemon_run(struct kvd *d);
/* Stops taking connections; the run ends once the leases are released or the drain times out. */
void kvd_drain(struct kvd *d);
/* Closes every connection, tier, fd and table the start made: d can be started again. */
void kvd_daemon_stop(struct kvd *d);

/* conn.c */
void kvd_conn_accept(struct kvd *d);
/* The process that made connection i has exited: its session ends, whoever holds the socket. */
void kvd_conn_peer_gone(struct kvd *d, uint32_t i);

/* metrics.c: Prometheus over HTTP. open: 0 also when the default address is taken (logged). */
/* user.c: mkdir -p (0750); become daemon.user when started as root (before setup) */
int kvd_make_dirs(const char *dir);
int kvd_become_user(struct kvd *d);
/* What kvd_become_user checks before it changes anything: daemon.user names a user (and group)
 * of this system and, started as anything but root, the uid and gid kvtierd runs as.
 * @return : 0, -ENOENT, -EPERM (logged). */
int kvd_user_check(const struct kvd *d);
/* owner.c: the data directory's lock, held until kvd_daemon_stop closes the fd it returns
 * (-EBUSY: another kvtierd has it) */
int kvd_own_data_dir(const char *dir);
/* Whether metrics.listen reads as ADDR:PORT or off (whether it binds is kvd_metrics_open's).
 * @return : 0, -EINVAL (logged). */
int kvd_metrics_check(const struct kvt_options *o);
int kvd_metrics_open(struct kvd *d);
void kvd_metrics_close(struct kvd *d);
void kvd_metrics_accept(struct kvd *d);
void kvd_metrics_io(struct kvd *d, int slot);
void kvd_metrics_tick(struct kvd *d, uint64_t now_ns);
/* stats.c: text into a fixed buffer; what does not fit is cut (pos then >= len). */
struct kvd_out {
	char *buf;
	size_t len, pos;
};
__attribute__((format(printf, 2, 3))) void kvd_out(struct kvd_out *o, const char *fmt, ...);
/* policyctl.c: the miss-ratio curves of host (tier < 0) or of lower tier `tier` as members of
 * its stats object (",\"mrc_samples\":N,\"mrc\":[...]"), nothing until a read is sampled. */
void kvd_mrc_json(struct kvd *d, int tier, struct kvd_out *o);

/* latency.c: a request of this message type took ns; the stats object's "latency" and
 * "latency_bounds_us" members (with a trailing comma); the Prometheus histogram (@return :
 * bytes written, len or more when cut). */
void kvd_latency_add(struct kvd *d, uint16_t type, uint64_t ns);
void kvd_latency_json(const struct kvd *d, struct kvd_out *o);
size_t kvd_latency_prom(const struct kvd *d, char *buf, size_t len);
/* prom.c: the stats object (kvd_stats_json) in the Prometheus text format.
 * @return : bytes written, -EINVAL (not the stats object's shape), -ENOBUFS, -ENOMEM. */
int kvd_prom_render(const char *json, size_t json_len, char *out, size_t len);
void kvd_conn_readable(struct kvd *d, uint32_t conn);
void kvd_conn_close(struct kvd *d, uint32_t conn);
void kvd_conns_expire_hello(struct kvd *d, uint64_t now_ns);
/* refuse.c: fd (accepted, non-blocking) is not served (counted in clients_refused): its hello
 * is answered -EUSERS. One that is readable is answered; those that waited client.hello_ms
 * (all: every one, at exit) are closed. */
void kvd_refuse(struct kvd *d, int fd);
void kvd_refusing_readable(struct kvd *d, uint32_t k);
void kvd_refusing_expire(struct kvd *d, uint64_t now_ns, bool all);
/* Closes the connections whose peer client.allow no longer names. */
void kvd_conns_enforce_allow(struct kvd *d);
/* Parks the request in d->rx until the tier jobs it needs finish or the deadline passes. */
int kvd_conn_park(struct kvd *d, uint32_t conn, size_t len, uint64_t wait_ms);
/* Re-dispatches parked requests whose jobs finished or whose deadline passed. */
void kvd_conn_resume_ready(struct kvd *d, uint64_t now_ns);

/* stats.c */
int kvd_stats_json(struct kvd *d, char *buf, size_t len);

/* check.c: kvtier check, the daemon's books against its index (one line per area into out).
 * @return : 0, -EUCLEAN (a mismatch: named in out and logged), -ENOMEM. */
int kvd_check(struct kvd *d, char *out, size_t out_len);
#endif
