/*
 * replay.c -- the simulator's replay loop. Each tier owns a policy instance made through the
 * registry's ops table (the daemon's code, not a copy), an optional admission filter, and a
 * residency byte per block. A request's blocks are accessed in order: a hit in tier 0 is a hit;
 * a hit lower down is a hit that also promotes the block into tier 0 (the copy stays: tiers are
 * inclusive); a miss inserts into tier 0. Lower tiers are filled as the daemon fills them: a
 * block entering tier 0 is written to each lower tier that admits it, and a tier-0 hit writes it
 * again to those that lack it (an earlier eviction, or second_touch waiting for the second
 * access); tier 0's eviction then only drops its copy. With fill_on_evict a tier is instead
 * filled by the evictions of the tier above. Eviction asks the policy for one victim at a time;
 * a log (region_blocks: kvtierd's nvme, laid out by layout.c) instead drops its oldest region
 * whole when the head needs it, but for what clock or its quotas keep (nvmelog.c, as nvme.quota);
 * another tier with quotas asks kvt_quota_pick_victims (policy/quota.h, as kvtierd does), which
 * takes the policy's victims in order but skips what the quota protects, and a block it finds no
 * victim for is turned away (rejected, quota_rejected). Each block's tenant is its inserter's.
 * An access the trace's bypass flags name (bypass.c) is served where it is held and then
 * dropped from every tier, or, missed, stored nowhere. In engine mode (kvt_trace.engine) a
 * miss is a put, and where the top tier's policy would first evict a block of the request the
 * put ends: the rest of the request is neither stored nor read, as in kvtierd. For one tier
 * that is the daemon exactly (`kvtier bench trace`). With tiers below it, engine mode runs them
 * as kvtierd does: a put guards only the blocks whose one copy is at the top (guarded()), a
 * promotion lands as the daemon's own insert and is then read (promote()), and a put that finds
 * a block only below leaves it there; the daemon's demotions and promotions run on its workers,
 * so it agrees within ~0.002 when its puts wait for their demotions (`kvtier bench trace
 * --rocksdb`, host.dirty_pct=1), and holds more while they queue. With t->streams engines, requests
 * are made as kvtierd sees several engines make them: a read, then a put, other engines'
 * messages between (turn()).
 */
#include "sim.h"
#include "sim_int.h"

#include "policy/admit.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "core/util.h"
#include "tiers/nvme/geometry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct run;
/* What a log tier's records are to nvmelog.c: still held, dropped (evicted), told done. */
struct log_ctx {
	struct run *u;
	size_t ti;
};

struct tier {
	const struct kvt_policy_ops *ops;
	struct kvt_policy *p;
	struct kvt_admit *adm;
	uint8_t *res;
	size_t used, cap;
	struct kvt_sim_tier_result *r;
	bool fill_on_evict;
	struct kvt_quota *quota; /* NULL without quotas */
	uint32_t *owner;         /* with quotas: each resident block's tenant */
	struct kvt__sim_log log; /* a log (region_blocks: kvtierd's nvme) when log.per */
	struct log_ctx ctx;
};

struct run {
	struct tier t[KVT_SIM_MAX_TIERS];
	size_t n;
	uint32_t prev_blk; /* previous block of the current request, or KVT_POLICY_NONE */
	uint32_t depth;
	uint32_t tenant;
	/* engine mode (kvt_trace.engine): the current request's blocks before the one accessed
	 * now, whether a put is storing a block, and whether the put has ended */
	const uint32_t *own;
	uint64_t n_own;
	bool engine, putting, cut;
	bool in_put;         /* engine mode: the access is the put's (the request has missed) */
	uint32_t stream;     /* the engine's stream for on_stream: 1 + its lane (0: kvtierd's) */
	uint32_t *depth_of;  /* engine mode: the depth each block was stored at */
	const uint64_t *key; /* kvt_trace.key */
	/* the trace's tenants (t= labels, any u32: a recording's are kvtierd's tenant keys) as
	 * dense indices, which policies, quota tables and the log's cursors are given, as kvtierd
	 * gives its tenants' indices: labels[k] is index k's label, dense[q] request q's index */
	uint32_t *labels, *dense;
	size_t n_labels;
};

static inline uint64_t key_hash(const struct run *u, uint32_t blk)
{
	return kvt_policy_key_hash(u->key ? u->key[blk] : blk);
}

static void make_meta(const struct run *u, const struct tier *t, uint32_t blk, uint32_t tenant,
                      struct kvt_policy_meta *m)
{
	m->key_hash = key_hash(u, blk);
	m->bytes = 1;
	m->parent = KVT_POLICY_NONE;
	m->depth = 0;
	/* below the top tier, kvtierd's records carry no prefix tree (tiers/rocksdb) */
	if (t == &u->t[0]) {
		m->parent = u->prev_blk != KVT_POLICY_NONE && t->res[u->prev_blk] ? u->prev_blk
		                                                                  : KVT_POLICY_NONE;
		m->depth = u->depth;
	}
	m->tenant = tenant;
	m->flags = 0;
}

static void insert(struct run *u, size_t ti, uint32_t blk, uint32_t tenant);

/* Drops v from tier ti; filled on eviction, the tier below gets it, unless the engine said it
 * is done with v (kvtierd's nvme log drops such a record without handing it over). */
static void evict(struct run *u, size_t ti, uint32_t v)
{
	struct tier *t = &u->t[ti];
	bool told = t->ops->is_done && t->ops->is_done(t->p, v);
	t->ops->on_remove(t->p, v);
	t->res[v] = 0;
	t->used--;
	t->r->evictions++;
	uint32_t owner = t->quota ? t->owner[v] : u->tenant;
	if (t->quota)
		kvt_quota_charge(t->quota, owner, -1);
	if (ti + 1 < u->n && u->t[ti + 1].fill_on_evict && !u->t[ti + 1].res[v] && !told) {
		size_t before = u->t[ti + 1].r->inserts;
		insert(u, ti + 1, v, owner);
		t->r->demoted_blocks += u->t[ti + 1].r->inserts - before;
	}
}

/* The policy's first victim in a full tier t (a policy that proposes none is a bug). */
static uint32_t first_victim(const struct tier *t)
{
	uint32_t v;
	if (t->ops->pick_victims(t->p, &v, 1, NULL, NULL) != 1 || !t->res[v]) {
		fprintf(stderr, "sim: policy %s proposed no valid victim\n", t->ops->name);
		abort();
	}
	return v;
}

static void evict_one(struct run *u, size_t ti)
{
	evict(u, ti, first_victim(&u->t[ti]));
}

static uint32_t owner_of(void *arg, uint32_t id)
{
	return ((const struct tier *)arg)->owner[id];
}

static uint64_t one_block(void *arg, uint32_t id)
{
	(void)arg, (void)id;
	return 1;
}

/* Makes room for one block of tenant in a tier with quotas. @return : false when the quota
 * allows no victim. */
static bool quota_room(struct run *u, size_t ti, uint32_t tenant)
{
	struct tier *t = &u->t[ti];
	if (t->used < t->cap && kvt_quota_fits(t->quota, tenant, 1))
		return true;
	struct kvt_quota_view view = {.tenant_of = owner_of, .bytes_of = one_block, .arg = t};
	uint32_t v;
	if (kvt_quota_pick_victims(t->quota, t->ops, t->p, tenant, 1, &view, &v, 1) != 1 ||
	    !t->res[v])
		return false;
	evict(u, ti, v);
	return t->used < t->cap;
}

/* Whether a tier below the top one holds blk. */
static bool held_below(const struct run *u, uint32_t blk)
{
	for (size_t k = 1; k < u->n; k++)
		if (u->t[k].res[blk])
			return true;
	return false;
}

/* Whether v is one of the blocks a put guards in kvtierd (ipc/daemon/store.c, put_guard): the
 * request's blocks before this one, walked back while tier t holds them and no tier below does
 * (at most KVD_PUT_GUARD ancestors and a batch). A block a lower tier holds too may give up its
 * top copy: the prefix stays whole across the tiers, and the put goes on. */
static bool guarded(const struct run *u, const struct tier *t, uint32_t v)
{
	for (uint64_t k = u->n_own, n = 0;
	     k-- > 0 && n < 1024 + 256 && t->res[u->own[k]] && !held_below(u, u->own[k]); n++)
		if (u->own[k] == v)
			return true;
	return false;
}

/* Engine mode, room for a put in the top tier, as kvtierd makes it (ipc/daemon/store.c,
 * put_evict_one): the policy's first choice is evicted, unless it is a block the put guards
 * (what the request has read or stored) -- then the put ends. Without quotas the daemon asks
 * once, and so does this. @return : false when the put ends. */
static bool put_room(struct run *u, struct tier *t)
{
	while (t->used >= t->cap) {
		uint32_t v = first_victim(t);
		if (guarded(u, t, v))
			return false;
		if (t->quota)
			return true; /* quota_room below picks as the daemon's quotas do */
		evict(u, 0, v);
	}
	return true;
}

static bool log_held(void *arg, uint32_t blk)
{
	const struct log_ctx *c = arg;
	return c->u->t[c->ti].res[blk];
}

static void log_drop(void *arg, uint32_t blk)
{
	const struct log_ctx *c = arg;
	evict(c->u, c->ti, blk);
}

static bool log_told(void *arg, uint32_t blk)
{
	const struct log_ctx *c = arg;
	const struct tier *t = &c->u->t[c->ti];
	return t->ops->is_done && t->ops->is_done(t->p, blk);
}

/* A log with quotas refuses a record larger than its tenant's maximum (-EDQUOT): here, a
 * maximum of no block. The rest is the log's (nvmelog.c: guarantees kept, maxima trimmed). */
static bool log_fits(const struct tier *t, uint32_t tenant)
{
	uint64_t g, m;
	kvt_quota_limits(t->quota, tenant, &g, &m);
	return m >= 1;
}

static void insert(struct run *u, size_t ti, uint32_t blk, uint32_t tenant)
{
	struct tier *t = &u->t[ti];
	struct kvt_policy_meta m;
	if (!t->cap)
		return;
	make_meta(u, t, blk, tenant, &m);
	if (t->ops->admit && !t->ops->admit(t->p, &m)) {
		t->r->rejected++;
		return;
	}
	if (t->adm) {
		uint64_t vh, *vp = NULL;
		uint32_t v;
		if (t->used >= t->cap && t->ops->pick_victims(t->p, &v, 1, NULL, NULL) == 1) {
			vh = key_hash(u, v);
			vp = &vh;
		}
		if (!kvt_admit_check(t->adm, m.key_hash, vp)) {
			t->r->rejected++;
			return;
		}
	}
	if (ti == 0 && u->putting && !put_room(u, t)) {
		u->cut = true; /* the rest of the request is not cached */
		return;
	}
	if (t->quota && (t->log.per ? !log_fits(t, tenant) : !quota_room(u, ti, tenant))) {
		t->r->rejected++;
		t->r->quota_rejected++;
		return;
	}
	if (t->log.per)
		kvt__sim_log_room(&t->log);
	while (t->used >= t->cap)
		evict_one(u, ti);
	t->ops->on_insert(t->p, blk, &m);
	if (ti == 0 && u->depth_of)
		u->depth_of[blk] = m.depth;
	t->res[blk] = 1;
	t->used++;
	t->r->inserts++;
	if (t->quota) {
		t->owner[blk] = tenant;
		kvt_quota_charge(t->quota, tenant, 1);
	}
	if (t->log.per) /* and a tenant past its maximum loses its oldest */
		kvt__sim_log_append(&t->log, blk);
}

/* Writes blk through to every lower tier that lacks it (and admits it); not at all when a tier
 * filled from evictions holds it (cascade: kvtierd does not write a chunk again that a lower
 * tier keeps). */
static void write_through(struct run *u, uint32_t blk)
{
	for (size_t i = 1; i < u->n; i++)
		if (u->t[i].fill_on_evict && u->t[i].res[blk] && i > 1)
			return;
	for (size_t i = 1; i < u->n; i++) {
		if (u->t[i].fill_on_evict || u->t[i].res[blk])
			continue;
		size_t before = u->t[i].r->inserts;
		insert(u, i, blk, u->tenant);
		u->t[0].r->demoted_blocks += u->t[i].r->inserts - before;
	}
}

/* Every tier's admission filter counts an access of blk. */
static void admit_record(struct run *u, uint32_t blk)
{
	for (size_t i = 0; i < u->n; i++)
		if (u->t[i].adm)
			kvt_admit_record(u->t[i].adm, key_hash(u, blk));
}

/* A bypassed access (t->bypass): served where it is held, then dropped from every tier; a miss
 * is stored nowhere. No eviction is counted and nothing cascades: the block is not kept. */
static int bypass_blk(struct run *u, uint32_t blk)
{
	int at = -1;
	admit_record(u, blk);
	for (size_t i = 0; i < u->n; i++) {
		struct tier *t = &u->t[i];
		if (!t->res[blk])
			continue;
		if (at < 0) {
			at = (int)i;
			t->r->hits++;
			t->ops->on_access(t->p, blk);
		}
		t->ops->on_remove(t->p, blk);
		t->res[blk] = 0;
		t->used--;
		if (t->quota)
			kvt_quota_charge(t->quota, t->owner[blk], -1);
	}
	return at;
}

/* Tier t reads blk: its policy sees the access, and a log marks the record read (clock keeps a
 * record read since it was written). */
static void tier_read(struct tier *t, uint32_t blk)
{
	t->ops->on_access(t->p, blk);
	if (t->log.per)
		kvt__sim_log_read(&t->log, blk, true);
}

/* A hit after kvt_done's hint reached the tiers below: each that marked blk done takes it back
 * as a read (kvtierd's hint_again: the nvme log hands it over again instead of dropping it). */
static void told_again(struct run *u, uint32_t blk)
{
	for (size_t k = 1; k < u->n; k++) {
		struct tier *t = &u->t[k];
		if (t->res[blk] && t->ops->is_done && t->ops->is_done(t->p, blk))
			tier_read(t, blk);
	}
}

/* Tells the top tier's policy which stream the calls that follow come from. */
static void top_stream(struct run *u, uint32_t s)
{
	if (u->t[0].ops->on_stream)
		u->t[0].ops->on_stream(u->t[0].p, s);
}

/* blk, read in a lower tier, comes up into the top one. In engine mode as in kvtierd: the copy
 * lands as the daemon's own insert (stream 0, the depth it was stored at), then the acquire that
 * waited for it reads it (ipc/daemon/tierdone.c, lease.c). */
static void promote(struct run *u, uint32_t blk)
{
	if (!u->engine) {
		insert(u, 0, blk, u->tenant);
		return;
	}
	uint32_t depth = u->depth;
	u->depth = u->depth_of[blk];
	top_stream(u, 0);
	insert(u, 0, blk, u->tenant);
	top_stream(u, u->stream);
	u->depth = depth;
	if (u->t[0].res[blk])
		u->t[0].ops->on_access(u->t[0].p, blk);
}

/* @return : the tier that served blk, or -1 on a miss in every tier. In engine mode a put (after
 * the request's first miss) that finds blk in a lower tier only leaves it there: kvtierd's put
 * counts a chunk it indexes as held, and neither reads nor stores it (store.c, put_one). */
static int access_blk(struct run *u, uint32_t blk)
{
	admit_record(u, blk);
	for (size_t i = 0; i < u->n; i++) {
		struct tier *t = &u->t[i];
		if (!t->res[blk])
			continue;
		t->r->hits++;
		if (i > 0 && u->in_put) { /* kvtierd's put finds it indexed: held, not read */
			told_again(u, blk);
			return (int)i;
		}
		tier_read(t, blk);
		told_again(u, blk); /* the tier read (i) has taken its mark back already */
		if (i > 0 && !u->t[0].res[blk]) {
			size_t before = u->t[0].r->inserts;
			promote(u, blk);
			t->r->promoted_blocks += u->t[0].r->inserts - before;
		} else if (i == 0) {
			write_through(u, blk);
		}
		return (int)i;
	}
	u->putting = u->engine;
	insert(u, 0, blk, u->tenant);
	u->putting = false;
	if (u->t[0].res[blk])
		write_through(u, blk);
	return -1;
}

int kvt__sim_set_params(const struct kvt_policy_ops *ops, struct kvt_policy *p,
                        const char *const *params)
{
	for (size_t i = 0; params && params[i]; i++) {
		char name[64];
		const char *eq = strchr(params[i], '=');
		size_t len = eq ? (size_t)(eq - params[i]) : 0;
		int rc = -EINVAL;
		if (eq && len < sizeof(name)) {
			memcpy(name, params[i], len);
			name[len] = 0;
			rc = ops->set_param ? ops->set_param(p, name, eq + 1) : -ENOENT;
		}
		if (rc) {
			fprintf(stderr,
			        "sim: %s: cannot set %s (docs/policies.md names each policy's "
			        "parameters and their ranges)\n",
			        ops->name, params[i]);
			return rc;
		}
	}
	return 0;
}

static void teardown(struct run *u)
{
	for (size_t i = 0; i < u->n; i++) {
		if (u->t[i].p)
			u->t[i].ops->destroy(u->t[i].p);
		kvt_admit_destroy(u->t[i].adm);
		kvt_quota_destroy(u->t[i].quota);
		free(u->t[i].owner);
		free(u->t[i].res);
		kvt__sim_log_free(&u->t[i].log);
	}
	free(u->depth_of);
	free(u->labels);
	free(u->dense);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* The dense index of tenant label, or -1 when no request of the trace has it. */
static long dense_of(const struct run *u, uint32_t label)
{
	const uint32_t *at = bsearch(&label, u->labels, u->n_labels, sizeof(label), cmp_u32);
	return at ? (long)(at - u->labels) : -1;
}

/* u's labels (sorted, unique) and each request's dense index. */
static int dense_tenants(struct run *u, const struct kvt_trace *tr)
{
	u->labels = malloc((tr->n_req + 1) * sizeof(*u->labels));
	u->dense = malloc((tr->n_req + 1) * sizeof(*u->dense));
	if (!u->labels || !u->dense)
		return -ENOMEM;
	memcpy(u->labels, tr->tenant, tr->n_req * sizeof(*u->labels));
	qsort(u->labels, tr->n_req, sizeof(*u->labels), cmp_u32);
	for (size_t q = 0; q < tr->n_req; q++)
		if (!u->n_labels || u->labels[u->n_labels - 1] != u->labels[q])
			u->labels[u->n_labels++] = u->labels[q];
	for (size_t q = 0; q < tr->n_req; q++)
		u->dense[q] = (uint32_t)dense_of(u, tr->tenant[q]);
	return 0;
}

/* The tier's quotas, each set on its tenant's dense index; a quota of a tenant the trace does
 * not have limits nothing. */
static int setup_quota(struct run *u, struct tier *t, const struct kvt_trace *tr,
                       const struct kvt_sim_tier *ti)
{
	t->owner = calloc(tr->n_blocks + 1, sizeof(*t->owner));
	if (!t->owner || kvt_quota_create(&t->quota))
		return -ENOMEM;
	for (size_t k = 0; k < ti->n_quotas; k++) {
		const struct kvt_sim_quota *q = &ti->quotas[k];
		uint64_t max = q->max_blocks == SIZE_MAX ? KVT_QUOTA_UNLIMITED : q->max_blocks;
		long d = dense_of(u, q->tenant);
		int rc =
		    d < 0 ? 0 : kvt_quota_set(t->quota, (uint32_t)d, q->guaranteed_blocks, max);
		if (rc) {
			fprintf(stderr, "sim: %s: bad quota for tenant %u\n", ti->name, q->tenant);
			return rc;
		}
	}
	return 0;
}

/* A tier with region_blocks: a log of capacity_blocks / region_blocks whole regions (nvmelog.c),
 * fifo or clock as its policy is named, with the tier's quotas as nvme.quota. */
static int setup_log(struct run *u, size_t i, const struct kvt_trace *tr,
                     const struct kvt_sim_tier *tiers, size_t n)
{
	struct tier *t = &u->t[i];
	const struct kvt_sim_tier *ti = &tiers[i];
	size_t per = ti->region_blocks;
	if (!per)
		return 0;
	if (per > UINT32_MAX || t->cap < 2 * per || t->cap / per > UINT32_MAX ||
	    (ti->log_rec_bytes &&
	     ti->log_region_bytes < KVT_NVME_BLOCK + per * ti->log_rec_bytes)) {
		fprintf(stderr,
		        "sim: %s: a log needs two regions of %zu blocks or more (it has %zu), each "
		        "holding them in its bytes\n",
		        ti->name, per, t->cap);
		return -EINVAL;
	}
	t->cap = t->cap / per * per; /* whole regions; the policy was made for the nominal size */
	struct kvt__sim_log_shape shape = {.per = (uint32_t)per,
	                                   .n = (uint32_t)(t->cap / per),
	                                   .rec_bytes = ti->log_rec_bytes,
	                                   .region_bytes = ti->log_region_bytes,
	                                   .clock = !strcmp(t->ops->name, "clock"),
	                                   .ahead = i + 1 < n && tiers[i + 1].fill_on_evict,
	                                   .least_max_blocks = SIZE_MAX,
	                                   .n_tenants = KVT_MAX(u->n_labels, 1)};
	for (size_t k = 0; k < ti->n_quotas; k++) {
		shape.least_max_blocks = KVT_MIN(shape.least_max_blocks, ti->quotas[k].max_blocks);
		shape.guaranteed = shape.guaranteed || ti->quotas[k].guaranteed_blocks;
	}
	t->ctx = (struct log_ctx){u, i};
	struct kvt__sim_log_env env = {.held = log_held,
	                               .drop = log_drop,
	                               .told = log_told,
	                               .arg = &t->ctx,
	                               .quota = t->quota,
	                               .owner = t->owner,
	                               .used = &t->used};
	return kvt__sim_log_init(&t->log, &shape, tr->n_blocks, &env);
}

/* The result slot of tenant, or NULL once every slot is taken by others. */
static struct kvt_sim_tenant_result *tenant_slot(struct kvt_sim_result *r, uint32_t tenant)
{
	for (size_t k = 0; k < r->n_tenants; k++)
		if (r->tenants[k].tenant == tenant)
			return &r->tenants[k];
	if (r->n_tenants == KVT_SIM_TENANT_SLOTS)
		return NULL;
	r->tenants[r->n_tenants].tenant = tenant;
	return &r->tenants[r->n_tenants++];
}

static int setup(struct run *u, const struct kvt_trace *tr, const struct kvt_sim_tier *tiers,
                 size_t n, struct kvt_sim_result *r)
{
	u->n = n;
	u->key = tr->key;
	int rc = dense_tenants(u, tr);
	for (size_t i = 0; i < n && !rc; i++) {
		struct tier *t = &u->t[i];
		t->r = &r->tier[i];
		t->cap = tiers[i].capacity_blocks;
		t->fill_on_evict = tiers[i].fill_on_evict;
		t->ops = kvt_policy_find(tiers[i].policy);
		if (!t->ops) {
			fprintf(stderr, "sim: unknown policy '%s'\n", tiers[i].policy);
			return -ENOENT;
		}
		t->res = calloc(tr->n_blocks + 1, 1);
		if (!t->res)
			return -ENOMEM;
		if ((rc = t->ops->create(t->cap, &t->p))) {
			t->p = NULL;
			return rc;
		}
		if ((rc = kvt__sim_set_params(t->ops, t->p, tiers[i].params)))
			return rc;
		if (tiers[i].admission && strcmp(tiers[i].admission, "none") &&
		    (rc = kvt_admit_create(tiers[i].admission, t->cap, &t->adm))) {
			fprintf(stderr, "sim: unknown admission '%s'\n", tiers[i].admission);
			return rc;
		}
		if (tiers[i].n_quotas && (rc = setup_quota(u, t, tr, &tiers[i])))
			return rc;
		rc = setup_log(u, i, tr, tiers, n);
	}
	return rc;
}

/* The engine's kvt_done hints due before request q reach the policy of every tier that holds
 * the block, as kvtierd's reach host's and each lower tier's (the nvme log has no such op). */
static void tell_done(struct run *u, const struct kvt_trace *tr, size_t q, struct kvt_sim_result *r)
{
	for (uint64_t i = tr->hint_off[q]; i < tr->hint_off[q + 1]; i++) {
		uint32_t blk = tr->hint_blk[i];
		r->done_hints += u->t[0].res[blk];
		for (size_t k = 0; k < u->n; k++) {
			if (u->t[k].res[blk] && u->t[k].ops->on_done)
				u->t[k].ops->on_done(u->t[k].p, blk);
			if (u->t[k].res[blk] && u->t[k].log.per) /* no second chance either */
				kvt__sim_log_read(&u->t[k].log, blk, false);
		}
	}
}

/* A request in flight on one simulated engine (t->streams): its next access, and whether it
 * has reached its first miss (its put). */
struct lane {
	size_t q; /* SIZE_MAX: idle */
	uint64_t i;
	bool put, missed;
	uint64_t put_at; /* engine mode: where the put begins, and the depth kvtierd gives it */
	uint32_t put_depth;
	struct kvt_sim_tenant_result *ten; /* its tenant's figures; NULL: not counted */
};

/* Whether a tier holds blk (the access will be a hit). */
static bool held(const struct run *u, uint32_t blk)
{
	return u->t[0].res[blk] || held_below(u, blk);
}

/* Lane l takes request q: the warm-up ends at warmup_req, and the engine's hints due before
 * q are told. */
static void take_request(struct run *u, const struct kvt_trace *tr, struct lane *l, size_t q,
                         struct kvt_sim_result *r)
{
	*l = (struct lane){.q = q, .i = tr->req_off[q]};
	if (q && q == tr->warmup_req) { /* the warm-up ends: score from here */
		r->hits = r->prefix_hits = r->done_hints = r->bypassed = 0;
		memset(r->tier, 0, sizeof(r->tier));
		memset(r->tenants, 0, sizeof(r->tenants));
		r->n_tenants = 0;
	}
	if (tr->hint_off)
		tell_done(u, tr, q, r);
	/* requests are taken in order, so none taken later precedes the warm-up's reset */
	l->ten = q >= tr->warmup_req ? tenant_slot(r, tr->tenant[q]) : NULL;
}

/* One access, lane l's next: served, counted. @return : false when a put ended the request. */
static bool step(struct run *u, const struct kvt_trace *tr, struct lane *l,
                 struct kvt_sim_result *r)
{
	size_t q = l->q;
	uint64_t i = l->i++;
	bool counted = q >= tr->warmup_req;
	struct kvt_sim_tenant_result *ten = l->ten;
	u->prev_blk = i > tr->req_off[q] ? tr->blk[i - 1] : KVT_POLICY_NONE;
	u->depth = u->engine && l->put ? l->put_depth + (uint32_t)(i - l->put_at)
	                               : (uint32_t)(i - tr->req_off[q]);
	u->tenant = u->dense[q];
	u->own = &tr->blk[tr->req_off[q]];
	u->n_own = i - tr->req_off[q];
	u->cut = false;
	u->in_put = u->engine && l->put;
	bool skip = tr->bypass && tr->bypass[i];
	int at = skip ? bypass_blk(u, tr->blk[i]) : access_blk(u, tr->blk[i]);
	l->missed = l->missed || at < 0;
	if (counted) {
		r->bypassed += skip;
		r->hits += at >= 0;
		r->prefix_hits += !l->missed;
		if (!l->missed)
			r->tier[at].prefix_hits++;
		if (ten) {
			ten->accesses++;
			ten->hits += at >= 0;
			ten->prefix_hits += !l->missed;
		}
	}
	if (!u->cut)
		return true;
	if (ten) /* a put that ended leaves the rest of its request unread and unstored */
		ten->accesses += tr->req_off[q + 1] - l->i;
	return false;
}

/*
 * Lane l's turn. A request is two messages to kvtierd: the read of its leading hits, and the put
 * from its first miss on. With several engines, other engines' messages come between the two
 * (the prefill runs there), so the put may find chunks another engine stored meanwhile: they are
 * block hits, but not prefix hits -- the engine has already decided to compute them. One stream
 * makes the two back to back: the trace's order.
 */
static void turn(struct run *u, const struct kvt_trace *tr, struct lane *l,
                 struct kvt_sim_result *r)
{
	uint64_t end = tr->req_off[l->q + 1];
	while (l->i < end && !l->put) {
		if (!held(u, tr->blk[l->i])) {
			l->put = true;
			l->missed = true; /* the engine computes the rest */
			if (tr->streams > 1)
				return; /* the prefill: other engines go first */
		} else if (!step(u, tr, l, r)) {
			l->i = end;
		}
	}
	if (l->put && u->engine && l->i < end) { /* as kvtierd numbers a put: from its parent */
		uint32_t pa = l->i > tr->req_off[l->q] ? tr->blk[l->i - 1] : KVT_POLICY_NONE;
		l->put_at = l->i;
		l->put_depth = pa == KVT_POLICY_NONE ? 0 /* a parent any tier holds is indexed */
		               : held(u, pa)         ? u->depth_of[pa] + 1
		                                     : 1;
	}
	while (l->i < end)
		if (!step(u, tr, l, r))
			l->i = end;
	l->q = SIZE_MAX;
}

int kvt_sim_run(const struct kvt_trace *tr, const struct kvt_sim_tier *tiers, size_t n,
                struct kvt_sim_result *r)
{
	struct run u;
	struct lane *lanes = NULL;
	memset(&u, 0, sizeof(u));
	memset(r, 0, sizeof(*r));
	if (!n || n > KVT_SIM_MAX_TIERS || (tr->warmup_req && tr->warmup_req >= tr->n_req))
		return -EINVAL;
	int rc = setup(&u, tr, tiers, n, r);
	u.engine = tr->engine;
	if (!rc && u.engine && !(u.depth_of = calloc(tr->n_blocks + 1, sizeof(*u.depth_of))))
		rc = -ENOMEM;
	if (rc)
		goto out;
	size_t nl = tr->streams > 1 ? tr->streams : 1, next = 0, busy;
	lanes = malloc(nl * sizeof(*lanes));
	if (!lanes) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t s = 0; s < nl; s++)
		lanes[s].q = SIZE_MAX;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		busy = 0;
		for (size_t s = 0; s < nl; s++) {
			struct lane *l = &lanes[s];
			if (l->q == SIZE_MAX && next < tr->n_req)
				take_request(&u, tr, l, next++, r);
			if (l->q == SIZE_MAX)
				continue;
			busy++;
			u.stream = (uint32_t)s + 1;          /* 0 is kvtierd's own (promote()) */
			if (nl > 1 || (u.engine && u.n > 1)) /* the engine the calls come from */
				for (size_t t = 0; t < u.n; t++)
					if (u.t[t].ops->on_stream)
						u.t[t].ops->on_stream(u.t[t].p, u.stream);
			turn(&u, tr, l, r);
		}
	} while (busy);
	clock_gettime(CLOCK_MONOTONIC, &b);
	r->accesses = tr->n_acc - tr->req_off[tr->warmup_req];
	r->elapsed_s = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
	for (size_t k = 0; k < n; k++) { /* without the leading space policy get puts before each */
		char line[KVT_POLICY_LINE_MAX];
		kvt_policy_params_str(u.t[k].ops, u.t[k].p, line, sizeof(line));
		snprintf(r->params[k], sizeof(r->params[k]), "%s", line[0] ? line + 1 : line);
	}
out:
	free(lanes);
	teardown(&u);
	return rc;
}
