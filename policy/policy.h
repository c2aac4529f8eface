/*
 * policy.h -- the policy seam: eviction and admission behind a versioned ops table.
 *
 * The same code runs in kvtierd and in the offline simulator (kvtier sim). A policy sees chunk
 * metadata only, never tier internals. Entries are named by a dense u32 id chosen by the caller
 * (the daemon's index slot, the simulator's block id); a policy keeps its own per-id state in
 * arrays that it grows on demand, so no per-operation allocation happens once warm.
 *
 * Contract: on_insert(id) once per resident entry, on_access(id) on hits, on_remove(id) when the
 * caller drops the entry (evicted or deleted). pick_victims proposes ids in eviction order
 * without removing them; the caller removes those it really evicts. Ids the caller's evictable()
 * rejects (leased, still being written) are never proposed. Not thread-safe: one owner.
 */
#ifndef KVT_POLICY_H
#define KVT_POLICY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVT_POLICY_OPS_VERSION 1
#define KVT_POLICY_NONE        UINT32_MAX

/* A tunable parameter as the policy runs it (get_param). */
struct kvt_policy_param {
	const char *name;
	double value;
	double lo, hi; /* set_param takes values in [lo, hi] */
};

struct kvt_policy_meta {
	uint64_t key_hash; /* a hash of (tenant, namespace, key): ghost entries, sketches */
	uint64_t bytes;    /* stored size */
	uint32_t parent;   /* id of the parent entry if resident, else KVT_POLICY_NONE */
	uint32_t depth;    /* chunk index in its prefix (0 = first chunk) */
	uint32_t tenant;
	uint32_t flags; /* KVT_POLICY_META_*: how the entry comes in; 0 for a put */
};

/* The entry is replayed into a new policy by kvt_policy_switch(), not put or read by an engine:
 * a policy that follows each engine's request (conv's "the chunk touched just before") must not
 * take it for one. */
#define KVT_POLICY_META_REBUILT 1u

/* SplitMix64's output function: z's bits spread over all 64 (kvt_policy_key_hash, and the
 * simulator's generators, hashes of block ids and draws keyed by an index). */
static inline uint64_t kvt_splitmix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The key hash (kvt_policy_meta.key_hash) of a chunk known by a 64-bit id: kvtierd's chunk id
 * (a hash of tenant, namespace and key; the id its recording, trace.file, writes) or a trace's
 * block id in kvtier sim. One function for both, so a replay of a recording shows every hashed
 * structure (conv's history, ghosts, sketches, samples) the hashes kvtierd showed it. */
static inline uint64_t kvt_policy_key_hash(uint64_t id)
{
	return kvt_splitmix64(id + 0x9e3779b97f4a7c15ULL);
}

typedef bool (*kvt_policy_evictable_fn)(void *arg, uint32_t id);

struct kvt_policy;

struct kvt_policy_ops {
	uint32_t version; /* KVT_POLICY_OPS_VERSION */
	const char *name; /* lowercase word: "lru", ... */
	int (*create)(size_t capacity_hint, struct kvt_policy **out);
	void (*destroy)(struct kvt_policy *p);
	void (*on_insert)(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m);
	void (*on_access)(struct kvt_policy *p, uint32_t id);
	void (*on_remove)(struct kvt_policy *p, uint32_t id);
	/* Writes up to max victims in eviction order; @return : how many. */
	size_t (*pick_victims)(struct kvt_policy *p, uint32_t *out, size_t max,
	                       kvt_policy_evictable_fn evictable, void *arg);
	/* Admission on put or demotion; NULL means admit everything. */
	bool (*admit)(struct kvt_policy *p, const struct kvt_policy_meta *m);
	/* Sets a parameter ("small_ratio" = "0.1"); NULL or -ENOENT when unknown. */
	int (*set_param)(struct kvt_policy *p, const char *name, const char *value);
	/* Added in version 1, optional: writes up to max resident ids, coldest first, without
	 * changing anything; @return : how many. NULL means pick_victims(all) gives that order. */
	size_t (*export_order)(struct kvt_policy *p, uint32_t *out, size_t max);
	/* Added in version 1, optional: the bytes the policy holds now (per-id arrays at their
	 * allocated size, ghosts, history, tables, sketches). NULL means unknown. */
	size_t (*memory_bytes)(struct kvt_policy *p);
	/* Added in version 1, optional: pick_victims for a caller that also refuses whole tenants
	 * (policy/quota.h: a tenant at its guarantee). tenant_of(arg, id) names an entry's
	 * tenant; open(arg, t) false means no entry of tenant t may go now, and stays false for
	 * the rest of the call. The victims are those pick_victims gives with a filter that also
	 * rejects every entry of a tenant open() refuses; the policy may set such entries aside so
	 * that later calls do not pass them again (lru, fifo, arc, lfu, prefix, gdsf). NULL: the
	 * caller uses pick_victims.
	 */
	size_t (*pick_victims_tenants)(struct kvt_policy *p, uint32_t *out, size_t max,
	                               kvt_policy_evictable_fn evictable,
	                               uint32_t (*tenant_of)(void *arg, uint32_t id),
	                               bool (*open)(void *arg, uint32_t tenant), void *arg);
	/* Added in version 1, optional: a hint that resident entry id will not be read again soon
	 * (the engine ended the conversation it belongs to, kvt_done). The policy offers it before
	 * what it would choose otherwise; an access cancels the hint. NULL: the hint is ignored. */
	void (*on_done)(struct kvt_policy *p, uint32_t id);
	/* Added in version 1, optional (with on_done): whether resident entry id holds a done
	 * hint now. kvt_policy_switch carries such hints to the new policy's on_done. */
	bool (*is_done)(struct kvt_policy *p, uint32_t id);
	/* Added in version 1, optional: tunable parameter i (0, 1, ...) with its value now and the
	 * range set_param takes. @return : 0, -ENOENT past the last. NULL: none. */
	int (*get_param)(struct kvt_policy *p, size_t i, struct kvt_policy_param *out);
	/* Added in version 1, optional: the calls that follow, until the next on_stream, come from
	 * stream s -- one engine's requests, made one at a time (kvtierd: a client connection;
	 * kvtier sim --streams: one simulated engine). A policy that follows requests (conv) keeps
	 * the request in flight per stream, so engines that interleave do not cut each other's
	 * requests short. NULL: ignored; a caller that never calls it is one stream, 0. */
	void (*on_stream)(struct kvt_policy *p, uint32_t s);
};

/* @return : the policy named name, or NULL. */
const struct kvt_policy_ops *kvt_policy_find(const char *name);
/* @return : the i-th registered policy, NULL past the end. */
const struct kvt_policy_ops *kvt_policy_at(size_t i);

/* Fills *out with the metadata of resident entry id (the caller's index). */
typedef void (*kvt_policy_meta_fn)(void *arg, uint32_t id, struct kvt_policy_meta *out);

/* Writes up to max of p's residents, coldest first: export_order, else pick_victims over
 * everything with no filter (which may move a clock hand, as an eviction walk does).
 * @return : how many. */
size_t kvt_policy_order(const struct kvt_policy_ops *ops, struct kvt_policy *p, uint32_t *out,
                        size_t max);

/*
 * Run-time switch without dropping entries: creates a policy of to_ops and inserts into it each
 * of the n_resident entries of from (coldest first, so that recency carries over; a parent
 * always before its children, so prefix-aware policies see the tree). from is left valid (its
 * victim order may have been consulted) and still owned by the caller, who destroys it on
 * success and keeps using it on failure.
 * @return : 0, -ENOMEM, -EINVAL when from reports a different number of entries.
 */
int kvt_policy_switch(const struct kvt_policy_ops *from_ops, struct kvt_policy *from,
                      size_t n_resident, const struct kvt_policy_ops *to_ops, size_t capacity_hint,
                      kvt_policy_meta_fn meta, void *arg, struct kvt_policy **out);

/*
 * Whether policy name exists and takes params ("k=v" words, not modified), tried on a policy of
 * its own. @return : 0, or as kvt_policy_set with err holding one line.
 */
int kvt_policy_check(const char *name, const char *params, char *err, size_t err_len);

/*
 * The run-time change `kvtier policy set` makes: with name the policy *ops already is, sets the
 * parameters ("k=v" words, params is modified) on *p; otherwise builds policy name from *p's
 * n_resident entries (kvt_policy_switch), sets the parameters on it, and only then destroys the
 * old one and replaces *ops and *p. A first word KVT_POLICY_DEFAULTS builds even the same
 * policy anew that way, its parameters at their defaults before the words that follow. On failure
 * nothing is replaced or set (the words are tried first, kvt_policy_check) and err holds one line
 * saying why.
 * @return : 0, -ENOENT (no such policy or parameter), -EINVAL (bad word or value), -ENOMEM.
 */
#define KVT_POLICY_DEFAULTS "defaults"
/* The words after a first word KVT_POLICY_DEFAULTS in words, or NULL when it has none. */
const char *kvt_policy_after_defaults(const char *words);
int kvt_policy_set(const struct kvt_policy_ops **ops, struct kvt_policy **p, size_t n_resident,
                   const char *name, char *params, size_t capacity_hint, kvt_policy_meta_fn meta,
                   void *arg, char *err, size_t err_len);

/* Writes " name=value" for each of p's tunable parameters (get_param), "" when it has none;
 * `kvtier policy get` shows them, and `policy set` takes the same words back. Every policy's
 * fit in KVT_POLICY_PARAMS_MAX bytes, and a policy's name and its words in KVT_POLICY_LINE_MAX. */
#define KVT_POLICY_PARAMS_MAX 256
#define KVT_POLICY_LINE_MAX   (64 + KVT_POLICY_PARAMS_MAX)
void kvt_policy_params_str(const struct kvt_policy_ops *ops, struct kvt_policy *p, char *out,
                           size_t out_len);

extern const struct kvt_policy_ops kvt_policy_lru;
extern const struct kvt_policy_ops kvt_policy_arc;
extern const struct kvt_policy_ops kvt_policy_s3fifo;
extern const struct kvt_policy_ops kvt_policy_sieve;
extern const struct kvt_policy_ops kvt_policy_lfu;
extern const struct kvt_policy_ops kvt_policy_prefix;
extern const struct kvt_policy_ops kvt_policy_gdsf;
extern const struct kvt_policy_ops kvt_policy_lhd;
extern const struct kvt_policy_ops kvt_policy_hindsight;
extern const struct kvt_policy_ops kvt_policy_conv;
extern const struct kvt_policy_ops kvt_policy_wtinylfu;
extern const struct kvt_policy_ops kvt_policy_duel;  /* conv or arc, by shadow caches */
extern const struct kvt_policy_ops kvt_policy_fifo;  /* lru.c: the nvme log's order */
extern const struct kvt_policy_ops kvt_policy_clock; /* lru.c: the same, nvme.policy=clock */
#endif
