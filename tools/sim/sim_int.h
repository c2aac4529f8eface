/* sim_int.h -- internals shared by the files of tools/sim/. */
#ifndef KVT_SIM_INT_H
#define KVT_SIM_INT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvt_trace;

/* Sets each "name=value" of params (NULL-terminated, may be NULL) on policy p of ops; the first
 * refused is said on stderr. @return : 0, -EINVAL (not name=value) or set_param's error. */
struct kvt_policy;
struct kvt_policy_ops;
int kvt__sim_set_params(const struct kvt_policy_ops *ops, struct kvt_policy *p,
                        const char *const *params);

/* Writes an SVG of hit ratio against capacity (log scale): one line per policy, plus OPT.
 * hr[p * stride + c] is policy p at caps[c]. @return : 0 or -errno. */
int kvt__sim_plot(const char *path, char *const *pols, size_t n_pols, const size_t *caps,
                  size_t n_caps, const double *hr, size_t stride, const double *opt);

/* --mrc: for each capacity, the SHARDS curve (policy/mrc.h, starting at sample_rate, tracking
 * at most max_keys keys, 0 for its default) at 1/2x..8x beside an exact LRU replay at each size;
 * a table or JSON lines on stdout. @return : 0 or -errno. */
int kvt__sim_mrc(const struct kvt_trace *t, const size_t *caps, size_t n_caps, double rate,
                 size_t max_keys, bool json);
/* --minisim N: for each policy and capacity, policy/minisim.h's curve (N entries at 1x) beside
 * an exact replay of that policy at each size. @return : 0, -ENOENT (no such policy), -errno. */
int kvt__sim_minisim(const struct kvt_trace *t, const size_t *caps, size_t n_caps,
                     char *const *pols, size_t n_pols, size_t entries, bool json);
/* Builds a trace request by request (generators): new() clears t; req() starts a request, blk()
 * appends a block (any u64, remapped to dense ids as by kvt_trace_load); done(b, rc) frees the
 * builder and, when rc, the trace. @return : rc. */
struct kvt__tb;
struct kvt__tb *kvt__tb_new(struct kvt_trace *t);
int kvt__tb_req(struct kvt__tb *b, uint64_t ts_ms, uint32_t tenant);
int kvt__tb_blk(struct kvt__tb *b, uint64_t key);
int kvt__tb_done(struct kvt__tb *b, int rc);

/* kvtierd's nvme log as the replay models it (nvmelog.c): n regions of per records, written in
 * order. kvt__sim_log_room makes room for one record as the log would (dropping through
 * env->drop the records env->held says the tier still holds), kvt__sim_log_append writes it
 * (and trims its tenant to its maximum). Sizes in the log's bytes where rec_bytes is set (a
 * record's padded bytes, region_bytes a region's), else in records. */
struct kvt_quota;
struct kvt__sim_log_shape {
	uint32_t per, n;
	uint64_t rec_bytes, region_bytes; /* 0: counted in records */
	bool clock;                       /* nvme.policy = clock: reads copied forward */
	bool ahead;                       /* a tier below takes what the log drops */
	size_t least_max_blocks;          /* with quotas: the least maximum (SIZE_MAX: none) */
	bool guaranteed;                  /* with quotas: some tenant has a guarantee */
	size_t n_tenants;                 /* with quotas: tenants are below this */
};
struct kvt__sim_log_env {
	bool (*held)(void *arg, uint32_t blk); /* the tier still holds blk */
	void (*drop)(void *arg, uint32_t blk); /* the log drops blk: the tier evicts it */
	bool (*told)(void *arg, uint32_t blk); /* the engine said it is done with blk */
	void *arg;
	struct kvt_quota *quota; /* NULL: none; the tier's accounts, a block each */
	const uint32_t *owner;   /* with quota: each block's tenant */
	const size_t *used;      /* the tier's live records */
};
struct kvt__sim_log_cursor {
	uint32_t r, s, gen; /* a tenant's oldest record was at slot s of region r in use gen */
};
struct kvt__sim_log {
	uint32_t per, n, head;
	uint32_t *fill;     /* each region's records written in its current use */
	uint32_t *gen;      /* each region's uses (0: never used) */
	uint32_t *ring;     /* the block written at each slot, region by region */
	uint64_t *wrote_at; /* each block's latest slot + 1 (0: never written) */
	uint8_t *hit;       /* clock: each block read since written; NULL with fifo */
	uint64_t need, max_rec, keep_live; /* a record's, a region's usable, the room kept */
	bool ahead, guaranteed;
	struct kvt__sim_log_cursor *cursor; /* with quota: per tenant */
	struct kvt__sim_log_env env;
};
int kvt__sim_log_init(struct kvt__sim_log *l, const struct kvt__sim_log_shape *s, size_t n_blocks,
                      const struct kvt__sim_log_env *env);
void kvt__sim_log_free(struct kvt__sim_log *l);
void kvt__sim_log_room(struct kvt__sim_log *l);
void kvt__sim_log_append(struct kvt__sim_log *l, uint32_t blk);
/* A read of blk in the log (clock keeps it at reclaim), and kvt_done's hint (it does not). */
static inline void kvt__sim_log_read(struct kvt__sim_log *l, uint32_t blk, bool read)
{
	if (l->hit)
		l->hit[blk] = read;
}
#endif
