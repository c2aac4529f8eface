/*
 * tiers.c -- the persistent tiers below host (tiers.order, e.g. host,nvme,rocksdb): their open
 * with the recovery of their chunks, their close, and the jobs the loop queues for them
 * (demotion, promotion, removal, kvt_done's hint). The worker threads that run the jobs:
 * tierwork.c; what the loop does with finished ones: tierdone.c; what they share: tierjob.h;
 * the tiers' run-time control and stats: tierctl.c.
 *
 * Placement is inclusive and written in the background: a chunk published at host is queued for
 * demotion into the first lower tier (admission permitting: nvme.admit=second_touch waits for
 * the chunk's second access), and with tiers.placement = cascade (the default) a tier that hands
 * over what it evicts (nvme: tier.h, KVT_TIER_HANDS_OVER) fills the next one from its evictions
 * (on_evicted) -- DESIGN.md's "eviction from a tier demotes the chunk to the next tier"; with
 * write-through every lower tier gets every chunk at put. While a demotion job reads the host
 * copy, the entry is not evictable (entry.jobs); once a lower tier holds it, host eviction just
 * drops the host copy.
 * So a put never waits for I/O unless the chunks still waiting to be demoted fill their share of
 * host (host.dirty_pct, store.c: the rest stays evictable, so a promotion finds room); then it is
 * parked for demote.wait_ms and fails with -EAGAIN (conn.c).
 *
 * A hit on a chunk that is only in a lower tier parks the acquire, reserves host space and
 * queues a promotion: the worker reads the record straight into the pool (the tier verifies the
 * header, identity and checksum), and the completion publishes the host copy and resumes the
 * acquire. A failed or corrupt read is a miss, never a wrong byte.
 *
 * Threads: the event loop owns the index and queues jobs; each lower tier has a worker thread
 * that runs its jobs in order (promotions before demotions and hand-overs, so a get does not wait
 * behind a write backlog: a promotion rides a write stream where the tier reads beside its
 * writes (nvme: tier.h's pull_read), else the stream stops for it, and a reclaim's hand-overs
 * are queued as jobs of the next tier's worker, on_evicted) and hands finished jobs
 * back through its list and the eventfd. So an nvme promotion never waits behind a RocksDB write,
 * and the tiers' I/O overlaps (write-through demotes ~2x faster, docs/bench.md). A tier's own
 * drops (FIFO reclaim, detected corruption) arrive from inside its worker through env->dropped
 * and travel back the same way, as do its moves (env->moved: nvme.quota copies guaranteed records
 * forward at reclaim). A promotion that read a moved record's old place is sent again to the new
 * one. Each tier has a mutex, since the loop may also call it (pool registration, enable, its
 * quota and policy) and, for a hand-over past HANDOVER_HARD_BYTES, the worker of the tier above.
 * The loop never waits for it (kvd_lower_take): a worker holds it through a device's I/O, and on
 * a slow device every engine's request would wait too. Found busy, the tier is "wanted": its
 * write stream stops pulling, and a worker about to lock it wakes the loop and waits for it
 * (50 ms at most); the operator's command that wanted it is parked (conn.c) and runs again then,
 * a SIGHUP's reload and TIER.policy = auto look again, and a new tenant's pool is told later.
 * The loop gives the locks back at the end of the event (kvd_lower_give_all, life.c).
 */
#include "tierjob.h"
#include "core/chunk.h"
#include "core/log.h"
#include "core/util.h"
#include "policy/mrc.h"
#ifdef KVT_HAVE_TIER_NVME
#include "tiers/nvme/nvme.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Recovery: one record found in lower tier k. */
struct recover_ctx {
	struct kvd *d;
	uint8_t tier;
};

static int recover_one(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	struct recover_ctx *rc = arg;
	struct kvd *d = rc->d;
	uint32_t t;
	if (kvd_tenant_get(d, h->tenant, &t))
		return 0;
	uint32_t id = kvd_index_find(&d->idx, t, h->ns, h->key);
	if (id == KVD_NIL) {
		id = kvd_index_alloc(&d->idx,
		                     (uint32_t)kvt_opt_u64(&d->opts, KVT_OPT_INDEX_MAX_CHUNKS));
		if (id == KVD_NIL)
			return 1; /* index full: stop */
		struct kvd_entry *e = &d->idx.e[id];
		e->key = h->key, e->ns = h->ns, e->parent = h->parent;
		e->has_parent = (h->flags & KVT_CHUNK_F_HAS_PARENT) != 0;
		e->payload_bytes = (uint32_t)h->payload_bytes, e->tenant = t;
		e->seq = h->seq, e->codec = h->codec, e->state = KVD_PUBLISHED;
		kvd_index_insert(&d->idx, id);
		kvd_shmidx_insert(d, t, h->key);
	}
	struct kvd_entry *e = &d->idx.e[id];
	if (e->payload_bytes != h->payload_bytes)
		return 0; /* two versions disagree: keep the first seen (fastest tier) */
	e->where |= (uint8_t)(2u << rc->tier);
	e->loc[rc->tier] = loc;
	if (h->seq > d->seq_counter)
		d->seq_counter = h->seq;
	d->st.recovered++;
	return 0;
}

/*
 * tiers.order = auto: host, then every persistent tier this build has, fastest first (DESIGN.md:
 * the embedded default keeps chunks in nvme and rocksdb under the data directory). A tier
 * named by the operator that cannot open stops the start; one that auto chose is left out with
 * a warning, so that `kvtierd` with no configuration starts on any machine.
 */
static const char *const auto_order[] = {"nvme", "rocksdb"};

/* tiers.order into order, auto spelled out. */
static void tiers_order(const struct kvt_options *o, char *order, size_t len)
{
	snprintf(order, len, "%s", kvt_opt_str(o, KVT_OPT_TIERS_ORDER));
	if (strcmp(order, "auto"))
		return;
	size_t n = (size_t)snprintf(order, len, "host");
	for (size_t i = 0; i < sizeof(auto_order) / sizeof(auto_order[0]); i++)
		if (kvt_tier_find(auto_order[i]) && n < len)
			n += (size_t)snprintf(order + n, len - n, ",%s", auto_order[i]);
}

int kvd_tiers_check(const struct kvt_options *o)
{
	char order[KVT_OPT_STR_MAX], *save = NULL;
	tiers_order(o, order, sizeof(order));
	const char *placement = kvt_opt_str(o, KVT_OPT_TIERS_PLACEMENT);
	if (strcmp(placement, "cascade") && strcmp(placement, "write-through")) {
		kvt_log(KVT_LOG_ERROR, "tiers.placement: '%s' is not cascade or write-through",
		        placement);
		return -EINVAL;
	}
	bool seen_host = false;
	int n_lower = 0;
	const struct kvt_tier_ops *seen[KVD_MAX_LOWER];
	for (char *name = strtok_r(order, ", ", &save); name; name = strtok_r(NULL, ", ", &save)) {
		if (!seen_host && !n_lower && strcmp(name, "host")) {
			/* "nvme,host" ran as host,nvme: the order said is not the one run */
			kvt_log(KVT_LOG_ERROR,
			        "tiers.order must start with host, the fastest tier (it starts "
			        "with %s)",
			        name);
			return -EINVAL;
		}
		const struct kvt_tier_ops *ops = kvt_tier_find(name);
		bool twice = !strcmp(name, "host") && seen_host;
		for (int k = 0; ops && k < n_lower && k < KVD_MAX_LOWER; k++)
			twice |= seen[k] == ops;
		if (twice) { /* the second open read "in use by another process" */
			kvt_log(KVT_LOG_ERROR, "tiers.order: %s is named twice", name);
			return -EINVAL;
		}
		if (!strcmp(name, "host")) {
			seen_host = true;
			continue;
		}
		if (!ops) {
			kvt_log(KVT_LOG_ERROR, "tiers.order: no tier named '%s' in this build",
			        name);
			return -EINVAL;
		}
		if (n_lower < KVD_MAX_LOWER)
			seen[n_lower] = ops;
		if (n_lower++ == KVD_MAX_LOWER) {
			kvt_log(KVT_LOG_ERROR, "tiers.order: at most %d tiers below host",
			        KVD_MAX_LOWER);
			return -EINVAL;
		}
		char opt[64], err[400];
		snprintf(opt, sizeof(opt), "%s.admit", name);
		int admit = kvt_opt_find(opt);
		if (admit >= 0 && kvd_config_check_admit(opt, o->str[admit], err, sizeof(err))) {
			kvt_log(KVT_LOG_ERROR, "%s", err);
			return -EINVAL;
		}
		if (ops->check && ops->check(o, err, sizeof(err))) {
			kvt_log(KVT_LOG_ERROR, "%s", err); /* a typo is not a missing device */
			return -EINVAL;
		}
	}
	if (!seen_host) {
		kvt_log(KVT_LOG_ERROR, "tiers.order must start with host");
		return -EINVAL;
	}
	return 0;
}

int kvd_tiers_open(struct kvd *d)
{
	char order[KVT_OPT_STR_MAX], *save = NULL;
	int rc = kvd_tiers_check(&d->opts);
	if (rc)
		return rc;
	tiers_order(&d->opts, order, sizeof(order));
	bool is_auto = !strcmp(kvt_opt_str(&d->opts, KVT_OPT_TIERS_ORDER), "auto");
	const char *placement = kvt_opt_str(&d->opts, KVT_OPT_TIERS_PLACEMENT);
	d->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->evfd < 0)
		return -errno;
	for (char *name = strtok_r(order, ", ", &save); name; name = strtok_r(NULL, ", ", &save)) {
		if (!strcmp(name, "host"))
			continue;
		const struct kvt_tier_ops *ops = kvt_tier_find(name); /* kvd_tiers_check found it */
		char opt[64];
		snprintf(opt, sizeof(opt), "%s.admit", name);
		int admit = kvt_opt_find(opt);
		uint8_t k = (uint8_t)d->n_lower;
		/* cascade: a tier that hands over its evictions, with a tier named after it, fills
		 * that one (should auto leave that one out, on_evicted tells the tier to stop) */
		bool cascade = !strcmp(placement, "cascade") &&
		               (ops->flags & KVT_TIER_HANDS_OVER) && save &&
		               save[strspn(save, ", ")];
		struct kvt_tier_env env = {.opts = &d->opts, .data_dir = d->data_dir};
		kvd_work_env(d, k, cascade, &env);
		struct kvd_lower *l = &d->lower[k];
		l->ops = ops;
		pthread_mutex_init(&l->lock, NULL);
		rc = ops->open(&env, &l->t);
		if (rc && is_auto) {
			kvt_log(KVT_LOG_WARN,
			        "tier %s: cannot open: %s; running without it (tiers.order = auto; "
			        "name the tiers to make this an error)",
			        name, strerror(-rc));
			pthread_mutex_destroy(&l->lock);
			memset(l, 0, sizeof(*l));
			continue;
		}
		if (rc) {
			kvt_log(KVT_LOG_ERROR, "tier %s: cannot open: %s", name, strerror(-rc));
			return rc;
		}
		l->mrc = kvd_mrc_new(d); /* NULL: no curve, nothing else lost */
		l->second_touch = admit >= 0 && !strcmp(d->opts.str[admit], "second_touch");
		l->cascades = cascade;
		const char *pol = kvd_tiers_policy_opt(d, k, "");
		l->pol_auto = pol && !strcmp(pol, "auto");
		snprintf(l->pol_auto_name, sizeof(l->pol_auto_name), "arc"); /* the tier's own */
		d->n_lower++;
		struct recover_ctx rcx = {d, k};
		uint64_t before = d->st.recovered;
		rc = ops->iterate(l->t, recover_one, &rcx);
		kvt_log(KVT_LOG_INFO, "tier %s: open, %llu chunks recovered%s", name,
		        (unsigned long long)(d->st.recovered - before),
		        rc < 0 ? " (walk stopped early)" : "");
	}
	if (d->n_lower && d->lower[d->n_lower - 1].cascades) { /* auto left out the tier below */
		d->lower[d->n_lower - 1].cascades = false; /* on_evicted tells it so at its first */
		kvt_log(KVT_LOG_INFO, "tier %s: nothing below it to cascade into",
		        d->lower[d->n_lower - 1].ops->name);
	}
	kvd_lower_give_all(d); /* the recovery told the tiers of the tenants' pools */
	if (!d->n_lower)
		return 0;
	return kvd_workers_start(d);
}

void kvd_tiers_close(struct kvd *d)
{
	kvd_lower_give_all(d);
	kvd_workers_close(d);
	for (uint32_t k = 0; k < d->n_lower; k++) {
		d->lower[k].ops->close(d->lower[k].t);
		kvt_mrc_destroy(d->lower[k].mrc);
		d->lower[k].mrc = NULL;
		kvt_minisim_destroy(d->lower[k].minisim);
		d->lower[k].minisim = NULL;
		pthread_mutex_destroy(&d->lower[k].lock);
	}
	d->n_lower = 0;
	if (d->evfd >= 0)
		close(d->evfd);
}

bool kvd_lower_wanted(struct kvd_lower *l)
{
	uint64_t until = atomic_load_explicit(&l->wanted_until_ns, memory_order_relaxed);
	return until && kvt_now_ns() < until;
}

void kvd_lower_want(struct kvd_lower *l, uint64_t until_ns)
{
	if (atomic_load_explicit(&l->wanted_until_ns, memory_order_relaxed) < until_ns)
		atomic_store_explicit(&l->wanted_until_ns, until_ns, memory_order_relaxed);
}

int kvd_lower_take(struct kvd *d, uint32_t k)
{
	struct kvd_lower *l = &d->lower[k];
	if (d->lower_held & (1u << k))
		return 0;
	if (d->lower_wait) {
		pthread_mutex_lock(&l->lock);
	} else if (pthread_mutex_trylock(&l->lock)) {
		kvd_lower_want(l, kvt_now_ns() + KVD_WANT_NS); /* a parked command's is longer */
		d->lower_busy = (int)k;
		return -EBUSY;
	}
	atomic_store_explicit(&l->wanted_until_ns, 0, memory_order_relaxed);
	d->lower_held |= 1u << k;
	return 0;
}

int kvd_lower_take_all(struct kvd *d)
{
	for (uint32_t k = 0; k < d->n_lower; k++) {
		int rc = kvd_lower_take(d, k);
		if (rc) {
			kvd_lower_give_all(d);
			return rc;
		}
	}
	return 0;
}

void kvd_lower_give_all(struct kvd *d)
{
	for (uint32_t k = 0; d->lower_held; k++)
		if (d->lower_held & (1u << k)) {
			d->lower_held &= ~(1u << k);
			pthread_mutex_unlock(&d->lower[k].lock);
		}
}

/* A tenant's pool is declared, not pinned: the nvme tier pins it region by region as its I/O
 * needs them (nvme.h). Registered whole, every tenant's first hello pinned host.bytes (1/8 of
 * RAM by default) and held the loop ~11 s per 3 GiB while it did. Nor does a hello wait for a
 * tier busy with I/O (kvd_lower_take): the pool is told of at the next chance. */
void kvd_tiers_register_pools(struct kvd *d)
{
#ifdef KVT_HAVE_TIER_NVME
	for (uint32_t k = 0; k < d->n_lower; k++) {
		struct kvd_lower *l = &d->lower[k];
		if (l->ops != &kvt_tier_nvme || l->pools_told == d->n_tenants ||
		    kvd_lower_take(d, k))
			continue;
		for (; l->pools_told < d->n_tenants; l->pools_told++) {
			struct kvt_pool *p = &d->tenants[l->pools_told].pool;
			int rc = kvt_tier_nvme_register(l->t, p->base, p->bytes);
			if (rc && rc != -EOPNOTSUPP)
				kvt_log(KVT_LOG_WARN, "nvme: a pool is plain I/O: %s",
				        strerror(-rc));
		}
	}
#else
	(void)d;
#endif
}

static struct kvd_job *job_for(struct kvd *d, uint32_t id, uint8_t kind, uint8_t tier)
{
	struct kvd_entry *e = &d->idx.e[id];
	struct kvd_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->kind = kind, j->tier = tier, j->entry = id, j->seq = e->seq;
	j->id =
	    (struct kvt_tier_id){.tenant = d->tenants[e->tenant].key, .ns = e->ns, .key = e->key};
	j->rec_len = KVT_CHUNK_HDR_BYTES + e->payload_bytes;
	j->buf_len = kvd_rec_bytes(e->payload_bytes);
	j->loc = e->loc[tier];
	return j;
}

void kvd_tiers_demote(struct kvd *d, uint32_t id, bool put)
{
	struct kvd_entry *e = &d->idx.e[id];
	if (!d->n_lower || !(e->where & KVD_AT_HOST) || e->jobs)
		return; /* jobs: a demotion is already on its way */
	for (uint8_t k = 1; k < d->n_lower; k++)
		if (d->lower[k - 1].cascades && (e->where & (2u << k)))
			return; /* cascading: a tier below holds it; a promotion is not written
			           again */
	for (uint8_t k = 0; k < d->n_lower; k++) {
		if (k && d->lower[k - 1].cascades)
			break; /* the tiers below fill from its evictions */
		if (e->where & (2u << k))
			continue;
		/* second touch: skip the put, demote on the first access after it */
		if (d->lower[k].second_touch && put) {
			d->st.not_admitted++;
			continue;
		}
		struct kvd_job *j = job_for(d, id, JOB_DEMOTE, k);
		if (!j)
			break;
		j->buf = d->tenants[e->tenant].pool.base + e->off;
		if (!e->jobs++) /* the host copy is dirty until its last demotion ends */
			d->dirty_bytes += kvd_rec_bytes(e->payload_bytes);
		d->demotes_inflight++;
		kvd_job_submit(d, j);
	}
}

uint32_t kvd_tiers_promote(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys,
                           uint32_t n, struct kvd_conn *hold)
{
	/* the leading keys already at host are held while the others make room, which must not
	 * evict them (a batch larger than host would chase its own tail), and, for a request
	 * that waits, until it resumes (another's put would evict them meanwhile) */
	uint32_t queued = 0, n_held = 0, mine[KVT_BATCH_MAX];
	uint32_t *held = mine;
	if (hold && (hold->held || (hold->held = malloc(KVT_BATCH_MAX * sizeof(uint32_t)))))
		held = hold->held, n_held = hold->n_held;
	uint64_t now = kvt_now_ns();
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = kvd_index_find(&d->idx, tenant, ns, keys[i]);
		if (id == KVD_NIL)
			break;
		struct kvd_entry *e = &d->idx.e[id];
		if (e->where & KVD_AT_HOST) {
			if (n_held < KVT_BATCH_MAX) {
				e->pins++;
				held[n_held++] = id;
			}
			continue;
		}
		if (e->jobs) { /* already being promoted for someone else: wait for it too */
			queued++;
			continue;
		}
		uint8_t k = 0;
		while (k < d->n_lower &&
		       (!(e->where & (2u << k)) || d->lower[k].reads_again_ns > now))
			k++; /* the first tier below that holds it and can read now */
		if (k == d->n_lower)
			break;
		int64_t off = kvd_make_room(d, tenant, e->payload_bytes, false);
		if (off < 0) { /* host is full of chunks on their way: try again when one lands */
			queued += off == -EINPROGRESS;
			break;
		}
		struct kvd_job *j = job_for(d, id, JOB_PROMOTE, k);
		if (!j) {
			kvd_host_release(d, tenant, (uint64_t)off, kvd_rec_bytes(e->payload_bytes));
			break;
		}
		j->off = (uint64_t)off;
		j->buf = d->tenants[tenant].pool.base + off;
		e->jobs++;
		d->promotes_inflight++;
		kvd_job_submit(d, j);
		queued++;
	}
	if (held == mine)
		while (n_held)
			kvd_entry_unpin(d, held[--n_held]);
	else
		hold->n_held = n_held;
	return queued;
}

/* Queues a job of kind for entry id on each lower tier that holds it (JOB_DONE, JOB_AGAIN:
 * and takes that hint). @return : how many were queued. */
static int submit_each(struct kvd *d, uint32_t id, uint8_t kind)
{
	uint8_t where = d->idx.e[id].where;
	int queued = 0;
	for (uint8_t k = 0; k < d->n_lower; k++) {
		const struct kvt_tier_ops *ops = d->lower[k].ops;
		if (!(where & (2u << k)) || (kind == JOB_DONE && !ops->hint_done) ||
		    (kind == JOB_AGAIN && !ops->hint_again))
			continue;
		struct kvd_job *j = job_for(d, id, kind, k);
		if (j) {
			kvd_job_submit(d, j);
			queued++;
		}
	}
	return queued;
}

void kvd_tiers_remove(struct kvd *d, const struct kvd_entry *e)
{
	submit_each(d, (uint32_t)(e - d->idx.e), JOB_REMOVE);
}

void kvd_tiers_done(struct kvd *d, uint32_t id)
{
	if (submit_each(d, id, JOB_DONE))
		d->idx.e[id].done_below = true;
}

void kvd_tiers_again(struct kvd *d, uint32_t id)
{
	struct kvd_entry *e = &d->idx.e[id];
	if (!e->done_below)
		return;
	e->done_below = false;
	submit_each(d, id, JOB_AGAIN);
}
