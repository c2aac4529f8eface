/*
 * sim.h -- kvtier sim: replays a block-access trace through the same policy code as kvtierd.
 *
 * kvt_sim_main() is the command-line entry that `kvtier sim ...` calls (argv[0] = "sim"); the
 * functions below are the library under it, used by the tests. Not thread-safe; one caller.
 */
#ifndef KVT_SIM_H
#define KVT_SIM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "policy/policy.h"

/* A trace in memory: requests, each a run of dense block ids (0..n_blocks-1). */
struct kvt_trace {
	size_t n_req, n_acc, n_blocks;
	uint64_t *req_off; /* n_req + 1 offsets into blk */
	uint32_t *blk;     /* n_acc dense block ids, in request order */
	/* n_blocks: each dense id's id as the native format named it, the key the policies hash
	 * (kvt_policy_key_hash), as kvtierd hashes the chunk ids it records; NULL (Mooncake and
	 * generated traces): the dense id is the key */
	uint64_t *key;
	uint64_t *ts_ms;  /* n_req arrival times */
	uint32_t *tenant; /* n_req tenants (0 when the format has none) */
	size_t
	    warmup_req; /* requests replayed before scoring starts (--warmup; 0 by the loaders) */
	/* the blocks an engine says it is done with before request i ("done" lines, or
	 * kvt_trace_ends) are hint_blk[hint_off[i] .. hint_off[i + 1]); NULL: no hints */
	uint64_t *hint_off;
	uint32_t *hint_blk;
	/* n_acc flags, 1: the access's block is not kept (kvt_trace_bypass); NULL: none */
	uint8_t *bypass;
	/* Replay as an engine drives kvtierd (`kvtier sim --engine`): a request reads its leading
	 * hits, then puts the rest from its first miss, and the put ends -- the rest of the
	 * request is neither stored nor read -- where the top tier's policy would first evict a
	 * block this request has read or stored. false: a plain cache, every block accessed. */
	bool engine;
	/* Engines at once (`kvtier sim --streams K`): each of K engines makes one request at a
	 * time, as two messages -- the read of its leading hits, then the put from its first miss
	 * on -- and the engines take turns, one message each, so other engines' messages come
	 * between a request's read and its put (its prefill), as in kvtierd. A block the put finds
	 * held (another engine stored it meanwhile) is a block hit, not a prefix hit. Each engine
	 * takes the trace's next request when its own is done. 0 or 1: the trace's order. OPT is
	 * the bound for the trace's order. */
	size_t streams;
};

/*
 * Loads a trace: Mooncake JSONL (a line starting with '{', fields timestamp and hash_ids) or the
 * native text format (one request a line: "<timestamp_ms> [t=<tenant>] <id> <id> ...", ids are
 * any u64, '#' starts a comment; a line "done <id> <id> ..." is an engine's kvt_done, told
 * before the next request: t->hint_off / hint_blk). Ids are remapped to dense ids in order of
 * first appearance.
 * @return : 0, -errno on I/O, -EINVAL on a malformed line (a sign, a stray character),
 * -ERANGE on a number past 2^64 - 1, -ENODATA when the file holds no request; the line is
 * named on stderr. t is owned by the caller (kvt_trace_free).
 */
int kvt_trace_load(const char *path, struct kvt_trace *t);
/* Builds a trace from memory (tests): n_req requests, lens[i] blocks each, ids dense < n_blocks. */
int kvt_trace_from(struct kvt_trace *t, size_t n_req, const uint32_t *lens, const uint32_t *ids);
void kvt_trace_free(struct kvt_trace *t);
/*
 * Plays an engine that calls kvt_done when a conversation ends (ends.c): for a fraction of the
 * conversations' last turns (drawn with seed), the blocks that conversation was the first to
 * access are hinted `delay` requests after it. Replaces t's hints. @return : 0, -EINVAL
 * (fraction outside [0, 1]), -ENOMEM.
 */
int kvt_trace_ends(struct kvt_trace *t, double fraction, uint64_t seed, size_t delay);
/*
 * Reads a predictor's admission decisions for t's accesses (bypass.c): path holds one byte per
 * access, in trace order, 1 for "do not keep the block" and 0 for "replay as usual".
 * @return : 0, -errno when path cannot be opened or read, -EINVAL on a size other than
 * t->n_acc or a byte other than 0 and 1 (named on stderr), -ENOMEM.
 */
int kvt_trace_bypass(struct kvt_trace *t, const char *path);
/* Writes t in the native text format: each block by its own id (t->key), or its dense id.
 * @return : 0, -EIO. */
int kvt_trace_write(const struct kvt_trace *t, FILE *f);

/*
 * Synthetic traces of other workload shapes, to check that a policy is not fitted to one trace
 * (synth.c has what each one is): "zipf", "scan", "docqa", "agent", "chat", "tenants". The same
 * kind and seed give the same trace. @return : 0, -ENOENT unknown kind, -ENOMEM.
 */
int kvt_sim_synth(const char *kind, uint64_t seed, struct kvt_trace *t);
/* @return : the i-th synthetic kind, NULL past the end. */
const char *kvt_sim_synth_kind(size_t i);

struct kvt_sim_tier {
	const char *name;          /* "host", "nvme", ... (borrowed) */
	const char *policy;        /* policy name (borrowed) */
	const char *admission;     /* NULL, "none", "tinylfu", "second_touch" (borrowed) */
	const char *const *params; /* NULL-terminated "k=v" list for set_param (borrowed) */
	size_t capacity_blocks;
	/* A lower tier is written when a block enters tier 0 and again when tier 0 hits a block it
	 * lacks (write-through: the daemon's placement), or, with fill_on_evict, when the tier
	 * above evicts the block. */
	bool fill_on_evict;
	/* A log reclaimed a region at a time, as kvtierd's nvme tier (tiers/nvme/log.c):
	 * region_blocks records per region, capacity_blocks / region_blocks regions; the oldest
	 * region's records are evicted together when the head needs it (with policy clock, those
	 * read since written are copied forward, and a region more than half of which would be
	 * kept is passed over), and with fifo earlier (from half way through the head) when the
	 * tier below fills on evict and there are four regions or more (nvmelog.c). 0: a record
	 * at a time, as the policy picks. Quotas are nvme.quota's: a record whose tenant would
	 * go below its guarantee is copied forward, a tenant past its maximum loses its oldest
	 * records after each write, and with a maximum below the log's size reclaim keeps records
	 * while the live ones leave two regions free. */
	size_t region_blocks;
	/* With region_blocks, the log's sizes in bytes (layout.c): a record's padded bytes and a
	 * region's, for the comparisons kvtierd's log makes in bytes (what a reclaim keeps against
	 * half a region; the room a maximum leaves). 0: counted in records. */
	uint64_t log_rec_bytes, log_region_bytes;
	/* Per-tenant guaranteed / maximum blocks in this tier (policy/quota.h, as tenant.quota and
	 * rocksdb.quota in kvtierd), n_quotas of them; tenants are the trace's labels (t=N, any
	 * u32: a recording's are kvtierd's tenant keys, a uid or a tenant.map name's key), and a
	 * quota of a tenant the trace does not have limits nothing. */
	const struct kvt_sim_quota *quotas;
	size_t n_quotas;
};

struct kvt_sim_quota {
	uint32_t tenant;
	size_t guaranteed_blocks, max_blocks; /* max: SIZE_MAX for none */
};

struct kvt_sim_tier_result {
	uint64_t hits, inserts, rejected, evictions, promoted_blocks, demoted_blocks;
	uint64_t prefix_hits;    /* hits of this tier inside their request's leading run of hits */
	uint64_t quota_rejected; /* of rejected: no victim the quota allowed */
};

/* One tenant's share of the overall figures (the first KVT_SIM_TENANT_SLOTS tenants seen). */
struct kvt_sim_tenant_result {
	uint32_t tenant;
	uint64_t accesses, hits, prefix_hits;
};
#define KVT_SIM_TENANT_SLOTS 16

#define KVT_SIM_MAX_TIERS 8
struct kvt_sim_result {
	uint64_t accesses, hits, prefix_hits;
	uint64_t bypassed;   /* accesses t->bypass flagged: missed and not stored, or dropped */
	uint64_t done_hints; /* hints (t->hint_blk) that found their block in tier 0 */
	double elapsed_s;    /* replay time, policy work included, loading excluded */
	struct kvt_sim_tier_result tier[KVT_SIM_MAX_TIERS];
	struct kvt_sim_tenant_result tenants[KVT_SIM_TENANT_SLOTS];
	size_t n_tenants; /* tenants seen, up to KVT_SIM_TENANT_SLOTS; more are not itemised */
	/* each tier's policy parameters as they ran, "k=v k=v" ("" for none), as `kvtier policy
	 * get` prints them */
	char params[KVT_SIM_MAX_TIERS][KVT_POLICY_LINE_MAX];
};

/* Replays t through tiers[0..n) (tier 0 on top, inclusive; lower tiers written through, or
 * filled on eviction (fill_on_evict); promotion to tier 0 on a lower-tier hit). Counts only the
 * requests from t->warmup_req on; the ones before it warm the tiers up. A tier with quotas
 * evicts through kvt_quota_pick_victims and turns a block away when the quota allows no victim.
 * An access t->bypass flags is served where it is held, then dropped from every tier (a miss is
 * stored nowhere); r->bypassed counts them.
 * @return : 0, -ENOENT unknown policy, -EINVAL bad parameter, warmup_req >= n_req, or a quota
 * with guaranteed > max. */
int kvt_sim_run(const struct kvt_trace *t, const struct kvt_sim_tier *tiers, size_t n,
                struct kvt_sim_result *r);
/* Lays t out as kvtierd's nvme log of bytes (0: capacity_blocks records of a block and its
 * 128-byte header, 4 KiB-padded, as `kvtier bench trace --nvme` sizes nvme.bytes): its
 * capacity_blocks become the log's whole regions, and with fifo or clock region_blocks is set. Call
 * it once t's policy and quotas are set. @return : 0, -ENOSPC (no log kvtierd would open: under 3
 * MiB, or a region too small for one record; t is left as it was). */
int kvt_sim_nvme_log(struct kvt_sim_tier *t, uint64_t block_bytes, uint64_t bytes);
/* The bytes kvtierd's tier named name takes for a chunk of block_bytes: host's record (the
 * chunk and its 128-byte header) in whole 4 KiB granules, the nvme log's in 4 KiB blocks,
 * rocksdb's the header and the chunk; any other name block_bytes. */
uint64_t kvt_sim_rec_bytes(const char *name, uint64_t block_bytes);
/* The blocks a tier of bytes named name holds: bytes / kvt_sim_rec_bytes (for nvme its quotas;
 * the tier itself is kvt_sim_nvme_log's). */
size_t kvt_sim_tier_blocks(const char *name, uint64_t block_bytes, uint64_t bytes);
/* Belady's MIN (with bypass) at capacity blocks: O(n log n). Fills hits and prefix_hits, from
 * t->warmup_req on (-EINVAL when that is not a request of t). */
int kvt_sim_opt(const struct kvt_trace *t, size_t capacity, struct kvt_sim_result *r);
/* The same bound by a direct O(n * capacity) scan; for tests on small traces. */
int kvt_sim_opt_naive(const struct kvt_trace *t, size_t capacity, struct kvt_sim_result *r);

/* The `kvtier sim` command. @return : a process exit status. */
int kvt_sim_main(int argc, char **argv);
#endif
