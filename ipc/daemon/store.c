/*
 * store.c -- the host tier's chunk operations: tenants and their pools, namespaces, put with
 * eviction, lookup, delete.
 *
 * A put copies each chunk from the client's staging area into a fresh record in the tenant's
 * pool, hashing each block right after copying it (while it is in cache), writes the header,
 * and only then inserts the entry into the index: a chunk is visible only when complete
 * (invariant 4). The checksum is of the pool copy, so a client that scribbles on its staging
 * area during the copy can only store garbage under its own key, never a wrong checksum.
 * Capacity is host.bytes across tenants (granule-rounded record bytes); eviction asks the
 * policy for victims and skips leased entries, so a full pool of leased chunks fails fast.
 */
#include "daemon.h"
#include "core/chunk.h"
#include "core/keys.h"
#include "core/log.h"
#include "ipc/shmidx.h"
#include "policy/admit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define COPY_BLOCK (256u << 10)

uint64_t kvd_rec_bytes(uint64_t payload)
{
	return (KVT_CHUNK_HDR_BYTES + payload + KVT_GRANULE - 1) & ~(uint64_t)(KVT_GRANULE - 1);
}

int kvd_tenant_get(struct kvd *d, uint32_t uid, uint32_t *out)
{
	int known = kvd_tenant_of_uid(d, uid);
	if (known >= 0) {
		*out = (uint32_t)known;
		return 0;
	}
	struct kvd_tenant *t = realloc(d->tenants, sizeof(*t) * (d->n_tenants + 1));
	if (!t)
		return -ENOMEM;
	d->tenants = t;
	t = &d->tenants[d->n_tenants];
	memset(t, 0, sizeof(*t));
	char name[64];
	snprintf(name, sizeof(name), "kvtier-pool-%u", uid);
	uint64_t slots = kvt_opt_u64(&d->opts, KVT_OPT_INDEX_SHM_SLOTS);
	while (slots & (slots - 1))
		slots &= slots - 1; /* a power of two */
	int rc = kvt_pool_open(&t->pool, d->host_cap, slots ? kvt_shmidx_bytes(slots) : 0, name);
	if (rc) {
		kvt_log(KVT_LOG_ERROR, "tenant %u: cannot create its pool: %s", uid, strerror(-rc));
		return rc;
	}
	t->key = uid;
	*out = d->n_tenants++;
	kvd_tiers_register_pools(d);
	if (d->quota && (rc = kvd_quota_apply(d, *out, uid)))
		return rc;
	if (slots)
		kvd_shmidx_init(d, *out, slots);
	kvt_log(KVT_LOG_INFO, "tenant %u: pool of %llu bytes", uid,
	        (unsigned long long)d->host_cap);
	return 0;
}

int kvd_tenant_of_uid(const struct kvd *d, uint32_t uid)
{
	for (uint32_t i = 0; i < d->n_tenants; i++)
		if (d->tenants[i].key == uid)
			return (int)i;
	return -ENOENT;
}

int kvd_ns_register(struct kvd *d, uint32_t tenant, const kvt_model_t *m, kvt_id_t *ns,
                    uint64_t *chunk_bytes)
{
	int rc = kvt_namespace_id(m, ns);
	if (rc)
		return rc;
	*chunk_bytes = kvt_chunk_bytes(m);
	/* a chunk that does not fit in host, or in a client's staging area (every put goes
	 * through it), could never be stored: refused here, not at every put */
	if (*chunk_bytes + KVT_CHUNK_HDR_BYTES > d->host_cap ||
	    *chunk_bytes > kvt_opt_u64(&d->opts, KVT_OPT_CLIENT_STAGING_BYTES))
		return -EFBIG;
	if (kvd_ns_find(d, tenant, *ns))
		return 0;
	/* the table is the daemon's and never shrinks: one tenant takes at most a sixteenth of it,
	 * so that a loop registering models cannot lock the others out until a restart */
	uint32_t mine = 0;
	for (uint32_t i = 0; i < d->n_nss; i++)
		mine += d->nss[i].tenant == tenant;
	if (d->n_nss >= KVD_MAX_NS || mine >= KVD_MAX_NS / 16)
		return KVT_E_NSFULL;
	if (d->n_nss == d->cap_nss) {
		uint32_t cap = d->cap_nss ? d->cap_nss * 2 : 16;
		struct kvd_ns *v = realloc(d->nss, sizeof(*v) * cap);
		if (!v)
			return -ENOMEM;
		d->nss = v;
		d->cap_nss = cap;
	}
	d->nss[d->n_nss++] = (struct kvd_ns){.ns = *ns,
	                                     .tenant = tenant,
	                                     .tokens = m->tokens_per_chunk,
	                                     .chunk_bytes = *chunk_bytes};
	kvd_policy_auto(d);
	kvd_tiers_policy_auto(d);
	kvd_minisim_chunk(d, *chunk_bytes);
	return 0;
}

const struct kvd_ns *kvd_ns_find(const struct kvd *d, uint32_t tenant, kvt_id_t ns)
{
	for (uint32_t i = 0; i < d->n_nss; i++)
		if (d->nss[i].tenant == tenant && kvt_id_eq(d->nss[i].ns, ns))
			return &d->nss[i];
	return NULL;
}

void kvd_host_release(struct kvd *d, uint32_t t, uint64_t off, uint64_t rb)
{
	struct kvd_tenant *tn = &d->tenants[t];
	kvt_pool_free(&tn->pool, off, ++d->gen_counter); /* revokes any stale reader */
	tn->used_bytes -= rb;
	tn->chunks--;
	d->host_used -= rb;
	if (d->quota)
		kvt_quota_charge(d->quota, t, -(int64_t)rb);
}

/* Frees the host copy's record. */
static void host_free(struct kvd *d, struct kvd_entry *e)
{
	kvd_host_release(d, e->tenant, e->off, kvd_rec_bytes(e->payload_bytes));
	e->where &= (uint8_t)~KVD_AT_HOST;
}

/* Frees what is left of a dead entry once nobody reads its host copy any more. */
static void maybe_free(struct kvd *d, uint32_t id)
{
	struct kvd_entry *e = &d->idx.e[id];
	if (e->state != KVD_DEAD || e->pins || e->jobs)
		return;
	if (e->where & KVD_AT_HOST)
		host_free(d, e);
	kvd_index_release(&d->idx, id);
}

void kvd_entry_drop_host(struct kvd *d, uint32_t id)
{
	struct kvd_entry *e = &d->idx.e[id];
	if (!(e->where & KVD_AT_HOST) || e->pins || e->jobs)
		return;
	kvd_keep_forget(d, id);
	d->pol_ops->on_remove(d->pol, id);
	host_free(d, e);
}

/* Drops the entry: out of the index and the policy; freed now or when its last reader ends.
 * Copies in lower tiers are removed there. */
void kvd_entry_drop(struct kvd *d, uint32_t id)
{
	struct kvd_entry *e = &d->idx.e[id];
	if (e->state != KVD_PUBLISHED)
		return;
	kvd_index_unlink(&d->idx, id);
	kvd_keep_forget(d, id);
	e->state = KVD_DEAD;
	kvd_shmidx_remove(d, e->tenant, e->key);
	if (e->where & KVD_AT_HOST)
		d->pol_ops->on_remove(d->pol, id);
	if (e->where & ~KVD_AT_HOST)
		kvd_tiers_remove(d, e);
	e->where &= KVD_AT_HOST;
	maybe_free(d, id);
}

void kvd_entry_unpin(struct kvd *d, uint32_t id)
{
	struct kvd_entry *e = &d->idx.e[id];
	if (KVT_NEVER(!e->pins))
		return;
	e->pins--;
	maybe_free(d, id);
}

void kvd_entry_unjob(struct kvd *d, uint32_t id)
{
	struct kvd_entry *e = &d->idx.e[id];
	if (KVT_NEVER(!e->jobs))
		return;
	e->jobs--;
	maybe_free(d, id);
}

struct victim_filter {
	struct kvd *d;
	uint32_t tenant;  /* KVD_NIL: any */
	bool guarded_ok;  /* the running put's own prefix counts too (put_evict_one) */
	bool demoting_ok; /* ... and a host copy whose demotion is running (put_evict_one) */
};

static bool evictable(void *arg, uint32_t id)
{
	struct victim_filter *f = arg;
	const struct kvd_entry *e = &f->d->idx.e[id];
	return e->state == KVD_PUBLISHED && (e->where & KVD_AT_HOST) &&
	       (e->pins == 0 || (f->guarded_ok && e->put_guarded)) &&
	       (e->jobs == 0 || f->demoting_ok) && /* at host, jobs are demotions */
	       (f->tenant == KVD_NIL || e->tenant == f->tenant);
}

static uint32_t tenant_of(void *arg, uint32_t id)
{
	return ((struct victim_filter *)arg)->d->idx.e[id].tenant;
}

static uint64_t bytes_of(void *arg, uint32_t id)
{
	return kvd_rec_bytes(((struct victim_filter *)arg)->d->idx.e[id].payload_bytes);
}

/*
 * How many victims to ask the policy for: enough to free want_bytes at the mean size of a host
 * record, 1 to 32 (the callers ask again when they fall short). A policy's pick costs grow with
 * the count -- conv scores every class and hindsight samples 64 entries per victim -- and a pick
 * may move the policy's own state (sieve's hand, wtinylfu's window), so asking for 32 when one
 * chunk comes in cost conv 40 times its eviction and changed what sieve and wtinylfu kept
 * (`kvtier bench trace`, docs/bench.md).
 */
static size_t victims_wanted(const struct kvd *d, uint64_t want_bytes)
{
	uint64_t chunks = 0;
	for (uint32_t t = 0; t < d->n_tenants; t++)
		chunks += d->tenants[t].chunks;
	uint64_t mean = chunks ? d->host_used / chunks : 0;
	uint64_t k = mean ? (want_bytes + mean - 1) / mean : 1;
	return k < 1 ? 1 : k > 32 ? 32 : (size_t)k;
}

/* Evicts victim v, which the policy proposed under filter f. @return : the host bytes freed (0:
 * refused, as f no longer passes it). */
static uint64_t evict_one(struct kvd *d, struct victim_filter *f, uint32_t v)
{
	struct kvd_entry *e = &d->idx.e[v];
	if (KVT_NEVER(!evictable(f, v))) { /* a leased chunk is never evicted */
		d->st.victims_refused++;
		kvt_log_rl(KVT_LOG_ERROR,
		           "host policy %s proposed chunk %u (pins %u, jobs %u): not evicted",
		           d->pol_ops->name, v, (unsigned)e->pins, (unsigned)e->jobs);
		return 0;
	}
	uint64_t freed = kvd_rec_bytes(e->payload_bytes);
	d->tenants[e->tenant].evictions++;
	if (d->pol_ops->is_done && d->pol_ops->is_done(d->pol, v))
		d->st.told_evictions++;
	if (e->where & ~KVD_AT_HOST)
		kvd_entry_drop_host(d, v); /* a lower tier still has it */
	else
		kvd_entry_drop(d, v);
	d->st.evictions++;
	return freed;
}

/* Evicts up to a batch of victims for requester (with quotas) or of tenant (KVD_NIL: any).
 * @return : how many were evicted (0: nothing evictable). */
static uint32_t evict_some_for(struct kvd *d, uint32_t tenant, uint32_t requester,
                               uint64_t want_bytes)
{
	uint32_t v[32];
	struct victim_filter f = {d, tenant, false, false};
	size_t n, k = victims_wanted(d, want_bytes);
	kvd_keep_expire(d); /* ended keeps are evictable again (only evictions need to know) */
	if (d->quota && requester != KVD_NIL) {
		struct kvt_quota_view view = {tenant_of, bytes_of, evictable, &f};
		n = kvt_quota_pick_victims(d->quota, d->pol_ops, d->pol, requester, want_bytes,
		                           &view, v, k);
	} else {
		n = d->pol_ops->pick_victims(d->pol, v, k, evictable, &f);
	}
	uint64_t freed = 0;
	uint32_t done = 0;
	for (size_t i = 0; i < n && freed < want_bytes; i++) {
		uint64_t b = evict_one(d, &f, v[i]);
		freed += b;
		done += b > 0;
	}
	return done;
}

static uint32_t evict_some(struct kvd *d, uint32_t tenant, uint64_t want_bytes)
{
	return evict_some_for(d, tenant, KVD_NIL, want_bytes);
}

/*
 * Room for a put, one victim at a time: the host policy's first choice, the put's own prefix
 * (put_guard below) counted in. When that choice is the put's own prefix, the policy values
 * every other chunk above the chunks this request has just read or stored, and keeping them
 * whole matters more than the rest of the request: the put ends there, as when host.admit turns
 * a chunk away, and the rest is not cached. Evicting other chunks instead (what the guard alone
 * did) cost conv a fifth of its prefix hits at 1,024 chunks of the Mooncake trace; evicting the
 * prefix itself (a plain cache) leaves the request's tail as orphans no lookup reaches (`kvtier
 * sim --engine`, docs/policies.md). A chunk of the prefix that a lower tier holds too is not
 * guarded (put_guard_ancestors): it may go, and the prefix stays whole across the tiers. When
 * the choice is a host copy still being demoted, guarded or not, the put waits for the demotion
 * (parked as on a dirty host, demote.wait_ms at most; past it, the next chunk that can go goes)
 * and then evicts it, as the simulator does with the copy it wrote below at once: passing it
 * over (host.evict_waits = false, and every put before 2026-12-07) evicts a chunk the policy
 * values more -- arc's newest T1 entries are such choices, and the daemon's arc read 0.1074
 * over rocksdb where the simulator's read 0.1164 -- and cutting the put there cut a prefix about
 * to be whole below. Otherwise, unless quotas choose the victims (kvt_quota_pick_victims), that
 * choice is evicted: asked once, a policy that samples (hindsight) proposes the victim the
 * simulator's replay of it does. @return : 1 evicted, 0 none (the caller evicts), -ENOSPC the
 * put ends here, -EINPROGRESS the put waits for the choice's demotion.
 */
static int put_evict_one(struct kvd *d)
{
	uint32_t v;
	struct victim_filter f = {d, KVD_NIL, true,
	                          !d->resume_final && !d->quota &&
	                              kvt_opt_u64(&d->opts, KVT_OPT_HOST_EVICT_WAITS)};
	kvd_keep_expire(d);
	if (d->pol_ops->pick_victims(d->pol, &v, 1, evictable, &f) != 1)
		return 0;
	if (d->idx.e[v].jobs) /* its demotion ends: then it goes, guarded or not */
		return -EINPROGRESS;
	if (d->idx.e[v].put_guarded)
		return -ENOSPC;
	if (d->quota)
		return 0;
	f.guarded_ok = false;
	return evict_one(d, &f, v) > 0;
}

int64_t kvd_make_room(struct kvd *d, uint32_t t, uint64_t payload, bool put)
{
	uint64_t need = kvd_rec_bytes(payload);
	if (need > d->host_cap)
		return -EFBIG;
	/* nothing evictable: -ENOSPC when it is all leased, -EINPROGRESS when chunks wait for
	 * demotion or promotion (the workers will make them evictable soon) */
	int busy = d->demotes_inflight || d->promotes_inflight ? -EINPROGRESS : -ENOSPC;
	while (d->quota && !kvt_quota_fits(d->quota, t, need)) /* at its maximum: its own go */
		if (!evict_some_for(d, t, t, need))
			return busy;
	while (d->host_used + need > d->host_cap) {
		int rc = put ? put_evict_one(d) : 0;
		if (rc < 0)
			return rc; /* the put's prefix ends here (put_chunks) */
		if (!rc && !evict_some_for(d, KVD_NIL, t, d->host_used + need - d->host_cap))
			return busy;
	}
	for (;;) {
		int64_t off = kvt_pool_alloc(&d->tenants[t].pool, need);
		if (off >= 0) {
			struct kvd_tenant *tn = &d->tenants[t];
			tn->used_bytes += need, tn->chunks++, d->host_used += need;
			if (d->quota)
				kvt_quota_charge(d->quota, t, (int64_t)need);
			return off;
		}
		if (!evict_some(d, t, need)) /* fragmentation: free this tenant's space */
			return busy;
	}
}

/*
 * host.dirty_pct: whether a new chunk of rb bytes would take the host copies still waiting for
 * demotion past their share of host. Without it a put burst fills host with such copies, which
 * nothing may evict, and a get that must promote a chunk from below finds no room and misses
 * (`kvtier bench tiers busy`); puts wait for the demotions either way.
 */
static bool dirty_full(const struct kvd *d, uint64_t rb)
{
	uint64_t cap = d->host_cap / 100 * kvt_opt_u64(&d->opts, KVT_OPT_HOST_DIRTY_PCT);
	return d->demotes_inflight && d->dirty_bytes && d->dirty_bytes + rb > cap;
}

static uint64_t copy_and_sum(uint8_t *dst, const uint8_t *src, uint64_t len)
{
	struct kvt_chunk_sum_state st;
	kvt_chunk_sum_begin(&st);
	for (uint64_t o = 0; o < len; o += COPY_BLOCK) {
		uint64_t n = len - o < COPY_BLOCK ? len - o : COPY_BLOCK;
		memcpy(dst + o, src + o, n);
		kvt_chunk_sum_add(&st, dst + o, n);
	}
	return kvt_chunk_sum_end(&st);
}

/* host.admit on a put of a new chunk: with room it admits (tinylfu) or asks for a second
 * touch (second_touch); when full, tinylfu weighs it against the policy's next victim. */
static bool admitted(struct kvd *d, uint64_t key_hash, uint64_t need)
{
	if (!d->admit)
		return true;
	uint32_t v;
	struct victim_filter f = {d, KVD_NIL, false, false};
	bool full = d->host_used + need > d->host_cap;
	if (!full || d->pol_ops->pick_victims(d->pol, &v, 1, evictable, &f) != 1)
		return kvt_admit_check(d->admit, key_hash, NULL);
	uint64_t vh = kvd_key_hash(d, d->idx.e[v].tenant, d->idx.e[v].ns, d->idx.e[v].key);
	return kvt_admit_check(d->admit, key_hash, &vh);
}

/* Stores one chunk. *pid is the parent's entry id (KVD_NIL if not indexed) on entry and this
 * chunk's on return, so a batch looks each chunk up once. shown / counted: an earlier try of
 * this parked message showed the chunk to the policy / counted it for admission already. */
static int put_one(struct kvd *d, struct kvd_conn *c, const struct kvd_ns *ns, kvt_id_t key,
                   const kvt_id_t *parent, uint32_t *pid, uint32_t depth, uint64_t soff, bool shown,
                   bool counted)
{
	uint32_t t = c->tenant;
	uint32_t id = kvd_index_find(&d->idx, t, ns->ns, key);
	uint64_t kh = kvd_key_hash(d, t, ns->ns, key);
	if (!counted)
		kvd_admit_record(d, kh);
	if (id != KVD_NIL) { /* held: read at host; only below, it stays there (not promoted) */
		if (!shown) {
			if (d->idx.e[id].where & KVD_AT_HOST)
				d->pol_ops->on_access(d->pol, id);
			kvd_tiers_again(d, id);
			d->st.put_present++;
		}
		*pid = id;
		return 0;
	}
	uint64_t len = ns->chunk_bytes;
	if (soff > c->staging_bytes || len > c->staging_bytes - soff)
		return -EINVAL;
	if (!admitted(d, kh, kvd_rec_bytes(len)))
		return -ECANCELED;
	if (d->idx.used >= kvt_opt_u64(&d->opts, KVT_OPT_INDEX_MAX_CHUNKS))
		evict_some(d, KVD_NIL, 1);
	if (dirty_full(d, kvd_rec_bytes(len)))
		return -EINPROGRESS; /* parked as on a full host (conn.c) */
	int64_t off = kvd_make_room(d, t, len, true);
	if (off < 0)
		return (int)off;
	id = kvd_index_alloc(&d->idx, (uint32_t)kvt_opt_u64(&d->opts, KVT_OPT_INDEX_MAX_CHUNKS));
	if (id == KVD_NIL) {
		kvd_host_release(d, t, (uint64_t)off, kvd_rec_bytes(len));
		return -ENOSPC;
	}
	/* making room may have dropped the parent, and its slot may hold another entry now */
	if (*pid != KVD_NIL &&
	    (d->idx.e[*pid].state != KVD_PUBLISHED || !kvt_id_eq(d->idx.e[*pid].key, *parent)))
		*pid = KVD_NIL;
	struct kvd_tenant *tn = &d->tenants[t];
	uint8_t *rec = tn->pool.base + off;
	struct kvt_chunk_hdr h = {.codec = KVT_CODEC_RAW,
	                          .n_tokens = ns->tokens,
	                          .tenant = tn->key,
	                          .ns = ns->ns,
	                          .key = key,
	                          .raw_bytes = len,
	                          .payload_bytes = len,
	                          .seq = ++d->seq_counter};
	if (parent) {
		h.parent = *parent;
		h.flags |= KVT_CHUNK_F_HAS_PARENT;
	}
	h.payload_sum = copy_and_sum(rec + KVT_CHUNK_HDR_BYTES, c->staging + soff, len);
	kvt_chunk_hdr_encode(rec, &h);

	struct kvd_entry *e = &d->idx.e[id];
	e->key = key, e->ns = ns->ns, e->parent = h.parent, e->has_parent = parent != NULL;
	e->off = (uint64_t)off, e->payload_bytes = (uint32_t)len, e->tenant = t;
	e->depth = depth, e->seq = h.seq, e->codec = KVT_CODEC_RAW;
	e->state = KVD_PUBLISHED;
	e->where = KVD_AT_HOST;
	kvd_index_insert(&d->idx, id);
	kvd_shmidx_insert(d, t, key);
	uint64_t rb = kvd_rec_bytes(len);
	struct kvt_policy_meta m = {.key_hash = kh,
	                            .bytes = rb,
	                            .parent = *pid == KVD_NIL ? KVT_POLICY_NONE : *pid,
	                            .depth = depth,
	                            .tenant = t};
	d->pol_ops->on_insert(d->pol, id, &m);
	d->st.puts++;
	d->st.put_bytes += len;
	kvd_tiers_demote(d, id, true);
	*pid = id;
	return 0;
}

/*
 * A put never evicts its own prefix. While it makes room for a chunk, the chunk's ancestors
 * whose only copy is at host are pinned (the put's parent chain, KVD_PUT_GUARD of them at most,
 * and what the put has stored so far), so the room comes from other chunks, or the put stops
 * there and says how many leading chunks it stored. An ancestor a lower tier holds too may give
 * up its host copy: the prefix stays whole across the tiers. Before, a prefix longer than host
 * evicted its own head as it was put, under every policy: kvt_put said 600 and a lookup found 0
 * leading chunks (31 of the tail were left, useless without their ancestors). The pins last the
 * call: nothing else runs meanwhile, and a parked put gives them back before it waits.
 */
static void put_guard(struct kvd *d, uint32_t id)
{
	struct kvd_entry *e = &d->idx.e[id];
	if (d->n_put_guard < sizeof(d->put_guard) / sizeof(d->put_guard[0]) &&
	    e->state == KVD_PUBLISHED && e->where == KVD_AT_HOST && e->pins < UINT16_MAX) {
		e->pins++;
		e->put_guarded = true;
		d->put_guard[d->n_put_guard++] = id;
	}
}

/* The walk ends at the first ancestor a lower tier holds too: those above it went down
 * before it, so a tiered daemon walks only what has not been demoted yet. */
static void put_guard_ancestors(struct kvd *d, uint32_t tenant, kvt_id_t ns, uint32_t id)
{
	for (uint32_t k = 0; id != KVD_NIL && k < KVD_PUT_GUARD; k++) {
		const struct kvd_entry *e = &d->idx.e[id];
		if (e->where & ~KVD_AT_HOST)
			break;
		put_guard(d, id);
		id = e->has_parent ? kvd_index_find(&d->idx, tenant, ns, e->parent) : KVD_NIL;
	}
}

static void put_unguard(struct kvd *d)
{
	while (d->n_put_guard) {
		uint32_t id = d->put_guard[--d->n_put_guard];
		d->idx.e[id].put_guarded = false;
		kvd_entry_unpin(d, id);
	}
}

/* The chunks of one PUT message, in prefix order. @return : how many leading chunks are stored
 * (present ones count), or -errno when none is. */
static int put_chunks(struct kvd *d, struct kvd_conn *c, const struct kvd_ns *ns,
                      const kvt_id_t *parent, uint32_t pid, uint32_t depth,
                      const struct kvt_msg_put_item *items, uint32_t n)
{
	int done = 0;
	for (uint32_t i = 0; i < n; i++) {
		int rc = put_one(d, c, ns, items[i].key, parent, &pid, depth + i,
		                 items[i].staging_off, i < c->put_shown, i < c->put_counted);
		/* it parks: the chunks before it were shown to the policy, it was counted */
		if (rc == -EINPROGRESS) {
			c->put_shown = (uint16_t)KVT_MAX(c->put_shown, i);
			c->put_counted = (uint16_t)KVT_MAX(c->put_counted, i + 1);
		}
		if (rc == -ECANCELED) { /* host.admit turned it away: the stored prefix ends */
			d->st.not_admitted++;
			return done;
		}
		if (rc == -ENOSPC && d->n_put_guard) { /* host is full of this prefix: it ends */
			d->st.puts_cut++;
			return done;
		}
		if (rc) {
			if (rc == -ENOSPC)
				d->st.enospc++;
			if (rc == -EINPROGRESS && d->resume_final) {
				rc = -EAGAIN; /* waited demote.wait_ms: the engine backs off */
				d->st.eagain++;
			}
			return done && rc != -EINPROGRESS ? done : rc;
		}
		put_guard(d, pid); /* the next chunk's parent */
		parent = &items[i].key;
		done++;
	}
	return done;
}

int kvd_put(struct kvd *d, struct kvd_conn *c, const struct kvt_msg_put *p,
            const struct kvt_msg_put_item *items, uint32_t n)
{
	const struct kvd_ns *ns = kvd_ns_find(d, c->tenant, p->ns);
	if (!ns || p->chunk_bytes != ns->chunk_bytes)
		return -EINVAL;
	const kvt_id_t *parent = (p->flags & KVT_PUT_F_PARENT) ? &p->parent : NULL;
	uint32_t depth = 0, pid = KVD_NIL;
	if (parent) {
		pid = kvd_index_find(&d->idx, c->tenant, p->ns, *parent);
		depth = pid == KVD_NIL ? 1 : d->idx.e[pid].depth + 1;
	}
	/* these cannot be reached when the message before was cut (its reply was short: its last
	 * key may be held from an earlier request while a chunk before it was refused) or its last
	 * chunk has gone since */
	if ((p->flags & KVT_PUT_F_CONTINUES) && (c->put_cut || (parent && pid == KVD_NIL))) {
		d->st.puts_cut++;
		c->put_cut = true;
		c->put_shown = c->put_counted = 0; /* a parked message's parent went meanwhile */
		return 0;
	}
	put_guard_ancestors(d, c->tenant, p->ns, pid);
	kvd_policy_stream(d, (uint32_t)(c - d->conns));
	int rc = put_chunks(d, c, ns, parent, pid, depth, items, n);
	put_unguard(d);
	if (rc == -EINPROGRESS) { /* a parked message is tried again, and tells then */
		d->st.puts_parked += !d->resuming;
		return rc;
	}
	c->put_cut = rc < (int)n;
	c->put_shown = c->put_counted = 0;
	return rc;
}

int kvd_lookup(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys, uint32_t n)
{
	d->st.lookups += n;
	uint32_t i = 0;
	while (i < n && kvd_index_find(&d->idx, tenant, ns, keys[i]) != KVD_NIL)
		i++;
	return (int)i;
}

int kvd_done(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys, uint32_t n)
{
	int found = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = kvd_index_find(&d->idx, tenant, ns, keys[i]);
		if (id == KVD_NIL)
			continue;
		kvd_keep_end(d, id); /* the engine's last word: done */
		if ((d->idx.e[id].where & KVD_AT_HOST) && d->pol_ops->on_done)
			d->pol_ops->on_done(d->pol, id);
		kvd_tiers_done(d, id);
		found++;
	}
	d->st.done_hints += (uint64_t)found;
	return found;
}

int kvd_delete(struct kvd *d, uint32_t tenant, kvt_id_t ns, const kvt_id_t *keys, uint32_t n)
{
	int done = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = kvd_index_find(&d->idx, tenant, ns, keys[i]);
		if (id == KVD_NIL)
			continue;
		kvd_entry_drop(d, id);
		d->st.deletes++;
		done++;
	}
	return done;
}
