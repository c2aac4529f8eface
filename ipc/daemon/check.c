/*
 * check.c -- kvtier check: the daemon's books against its index.
 *
 * Runs on the loop between requests, so nothing moves while it reads: an operator's command,
 * and the tests' oracle after kills, crashes and churn (RELIABILITY F3, L2, L3). O(chunks +
 * pool extents), with a bit per pool granule for the walk; it changes nothing but what a
 * policy's own walk for victims changes (sieve's hand, clock's bits), as a policy switch's walk
 * does.
 *
 * Exact at every moment between requests:
 *   index   the hash chains hold exactly the published entries, each the first found by its
 *           key; the free list holds the rest; a dead entry (deleted, waiting for its readers)
 *           still has a reader (a pin or a tier job).
 *   leases  every live lease is on its connection's list and on the age list (oldest first);
 *           each pins an entry of its tenant that has a host copy (a pinned chunk is never
 *           evicted); every entry's pins are its leases plus the parked acquires holding it.
 *   pools   each tenant's extent books are sound; its allocated extents are its chunk count and
 *           its allocated granules its used bytes; the tenants' bytes sum to host's, within
 *           capacity, and are what the quotas charge; every host copy is an allocated extent of
 *           its record's size, no two copies overlap.
 *   policy  holds exactly the published host copies that are not kept, each once.
 *   keeps   the kept and pending counts and bytes are those of the entries marked.
 * Exact once no tier job is in flight, an upper bound before (a promotion allocates its record
 * before its entry points at it):
 *   host    the host copies' records are the tenants' used bytes and chunks; none is dirty.
 */
#include "daemon.h"
#include "core/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK_SHOWN 16 /* mismatches itemised; the rest counted */

struct audit {
	struct kvd *d;
	struct kvd_out *o;
	uint32_t bad;
	uint32_t *pins; /* per entry: the pins found for it */
	uint8_t *seen;  /* per entry: listed by the policy */
};

__attribute__((format(printf, 2, 3))) static void bad(struct audit *a, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (a->bad++ < CHECK_SHOWN) {
		kvd_out(a->o, "MISMATCH %s\n", line);
		kvt_log(KVT_LOG_ERROR, "kvtier check: %s", line);
	}
}

static bool at_host(const struct kvd_entry *e)
{
	return e->state != KVD_FREE && (e->where & KVD_AT_HOST);
}

static void check_index(struct audit *a)
{
	const struct kvd_index *x = &a->d->idx;
	uint32_t published = 0, dead = 0, chained = 0;
	for (uint32_t i = 0; i < x->cap; i++) {
		const struct kvd_entry *e = &x->e[i];
		published += e->state == KVD_PUBLISHED;
		dead += e->state == KVD_DEAD;
		if (e->state == KVD_DEAD && !e->pins && !e->jobs)
			bad(a, "index: entry %u is dead with no reader left, yet not freed", i);
	}
	if (published + dead != x->used)
		bad(a, "index: %u entries in use, but %u published and %u dead", x->used, published,
		    dead);
	if (kvd_index_audit(x, &chained))
		bad(a, "index: a hash chain or the free list is damaged");
	else if (chained != published)
		bad(a, "index: %u entries chained, %u published", chained, published);
	kvd_out(a->o, "index: %u chunks, %u deleted ones waiting for their readers\n", published,
	        dead);
}

static void check_lease_lists(struct audit *a)
{
	struct kvd *d = a->d;
	uint32_t conns = 0;
	for (uint32_t c = 0; c < d->cap_conns; c++) {
		const struct kvd_conn *cn = &d->conns[c];
		if (cn->fd < 0)
			continue;
		conns++;
		uint32_t n = 0;
		for (uint32_t i = cn->lease_head; i != KVD_NIL; i = d->leases[i].cnext) {
			if (i >= d->cap_leases || d->leases[i].conn != c || ++n > d->n_leases) {
				bad(a, "leases: connection %u's list is damaged", c);
				break;
			}
		}
		if (n != cn->n_leases)
			bad(a, "leases: connection %u counts %u, its list has %u", c, cn->n_leases,
			    n);
		for (uint32_t k = 0; k < cn->n_held; k++)
			if (cn->held[k] < d->idx.cap)
				a->pins[cn->held[k]]++;
	}
	if (conns != d->n_conns)
		bad(a, "clients: %u counted, %u connections open", d->n_conns, conns);
	uint32_t aged = 0;
	uint64_t t = 0;
	for (uint32_t i = d->age_head; i != KVD_NIL; i = d->leases[i].anext) {
		if (i >= d->cap_leases || d->leases[i].conn == KVD_NIL || d->leases[i].t_ns < t ||
		    ++aged > d->n_leases) {
			bad(a, "leases: the age list is damaged or out of order");
			break;
		}
		t = d->leases[i].t_ns;
	}
	if (aged != d->n_leases)
		bad(a, "leases: %u counted, %u on the age list", d->n_leases, aged);
}

static void check_leases(struct audit *a)
{
	struct kvd *d = a->d;
	uint32_t live = 0, pinned = 0;
	for (uint32_t i = 0; i < d->cap_leases; i++) {
		const struct kvd_lease *l = &d->leases[i];
		if (l->conn == KVD_NIL)
			continue;
		live++;
		if (l->conn >= d->cap_conns || d->conns[l->conn].fd < 0) {
			bad(a, "leases: lease %u belongs to closed connection slot %u", i, l->conn);
			continue;
		}
		const struct kvd_entry *e = l->entry < d->idx.cap ? &d->idx.e[l->entry] : NULL;
		if (!e || e->state == KVD_FREE) {
			bad(a, "leases: lease %u names free entry %u", i, l->entry);
			continue;
		}
		if (!(e->where & KVD_AT_HOST))
			bad(a,
			    "leases: lease %u pins entry %u, which has no host copy (evicted while "
			    "pinned)",
			    i, l->entry);
		if (e->tenant != d->conns[l->conn].tenant)
			bad(a, "leases: lease %u pins another tenant's entry %u", i, l->entry);
		a->pins[l->entry]++;
	}
	if (live != d->n_leases)
		bad(a, "leases: %u counted, %u live", d->n_leases, live);
	check_lease_lists(a);
	for (uint32_t i = 0; i < d->idx.cap; i++) {
		const struct kvd_entry *e = &d->idx.e[i];
		if (e->state == KVD_FREE)
			continue;
		pinned += e->pins > 0;
		if (e->pins != a->pins[i])
			bad(a, "leases: entry %u has %u pins, %u leases and holds name it", i,
			    e->pins, a->pins[i]);
		if (e->pins && !(e->where & KVD_AT_HOST))
			bad(a, "leases: entry %u is pinned without a host copy", i);
	}
	kvd_out(a->o, "leases: %u on %u chunks, from %u clients\n", d->n_leases, pinned,
	        d->n_conns);
}

/* Host copies against the pools: each an allocated extent of its size, no two at one place
 * (extents partition the pool, so two copies overlap only when they share a head). */
static int check_records(struct audit *a, uint64_t *bytes, uint64_t *count, uint32_t *jobs)
{
	struct kvd *d = a->d;
	uint64_t **heads = calloc((size_t)d->n_tenants + 1, sizeof(*heads)); /* bit per granule */
	int rc = heads ? 0 : -ENOMEM;
	for (uint32_t t = 0; !rc && t < d->n_tenants; t++)
		if (!(heads[t] = calloc(d->tenants[t].pool.ext.n_granules / 64 + 1, 8)))
			rc = -ENOMEM;
	for (uint32_t i = 0; !rc && i < d->idx.cap; i++) {
		const struct kvd_entry *e = &d->idx.e[i];
		*jobs += e->state != KVD_FREE ? e->jobs : 0;
		if (!at_host(e))
			continue;
		uint64_t rb = kvd_rec_bytes(e->payload_bytes);
		if (e->tenant >= d->n_tenants || e->off % KVT_POOL_GRANULE) {
			bad(a, "pools: entry %u has tenant %u and offset %llu", i, e->tenant,
			    (unsigned long long)e->off);
			continue;
		}
		const struct kvt_extent *x = &d->tenants[e->tenant].pool.ext;
		uint32_t g = (uint32_t)(e->off / KVT_POOL_GRANULE);
		uint32_t len = (uint32_t)(rb / KVT_POOL_GRANULE);
		uint64_t *h = heads[e->tenant];
		if (!kvt_extent_is_allocated(x, g, len))
			bad(a,
			    "pools: entry %u's record (tenant %u, granule %u, %u long) is not an "
			    "allocation",
			    i, e->tenant, g, len);
		else if (h[g / 64] >> (g % 64) & 1)
			bad(a, "pools: entry %u's record (tenant %u, granule %u) is another's too",
			    i, e->tenant, g);
		else
			h[g / 64] |= 1ull << (g % 64);
		bytes[e->tenant] += rb;
		count[e->tenant]++;
	}
	for (uint32_t t = 0; heads && t < d->n_tenants; t++)
		free(heads[t]);
	free(heads);
	return rc;
}

static int check_pools(struct audit *a)
{
	struct kvd *d = a->d;
	uint32_t nt = d->n_tenants, jobs = 0;
	uint64_t *bytes = calloc((size_t)nt + 1, sizeof(*bytes));
	uint64_t *count = calloc((size_t)nt + 1, sizeof(*count));
	if (!bytes || !count || check_records(a, bytes, count, &jobs)) {
		free(bytes);
		free(count);
		return -ENOMEM;
	}
	bool quiet = !d->demotes_inflight && !d->promotes_inflight && !jobs;
	uint64_t used = 0, copies = 0;
	for (uint32_t t = 0; t < nt; t++) {
		const struct kvd_tenant *tn = &d->tenants[t];
		uint32_t extents = 0;
		if (kvt_extent_audit(&tn->pool.ext, &extents)) {
			bad(a, "pools: tenant %u's extent books are damaged", tn->key);
		} else {
			uint64_t granules = tn->pool.ext.n_granules - tn->pool.ext.free_granules;
			if (extents != tn->chunks)
				bad(a, "pools: tenant %u counts %llu chunks, its pool %u records",
				    tn->key, (unsigned long long)tn->chunks, extents);
			if (granules * KVT_POOL_GRANULE != tn->used_bytes)
				bad(a, "pools: tenant %u counts %llu bytes, its pool %llu", tn->key,
				    (unsigned long long)tn->used_bytes,
				    (unsigned long long)(granules * KVT_POOL_GRANULE));
		}
		if (d->quota && kvt_quota_used(d->quota, t) != tn->used_bytes)
			bad(a, "quotas: tenant %u charged %llu bytes, uses %llu", tn->key,
			    (unsigned long long)kvt_quota_used(d->quota, t),
			    (unsigned long long)tn->used_bytes);
		/* a promotion's record is the tenant's before its entry points at it */
		if (quiet ? bytes[t] != tn->used_bytes || count[t] != tn->chunks
		          : bytes[t] > tn->used_bytes || count[t] > tn->chunks)
			bad(a,
			    "host: tenant %u's %llu copies hold %llu bytes; it counts %llu in %llu",
			    tn->key, (unsigned long long)count[t], (unsigned long long)bytes[t],
			    (unsigned long long)tn->used_bytes, (unsigned long long)tn->chunks);
		used += tn->used_bytes;
		copies += count[t];
	}
	if (used != d->host_used || d->host_used > d->host_cap)
		bad(a, "host: %llu bytes used of %llu, the tenants hold %llu",
		    (unsigned long long)d->host_used, (unsigned long long)d->host_cap,
		    (unsigned long long)used);
	if (quiet && d->dirty_bytes)
		bad(a, "host: %llu dirty bytes with no demotion in flight",
		    (unsigned long long)d->dirty_bytes);
	kvd_out(a->o, "host: %llu copies, %llu of %llu bytes, %u tenants%s\n",
	        (unsigned long long)copies, (unsigned long long)d->host_used,
	        (unsigned long long)d->host_cap, nt,
	        quiet ? "" : " (tier jobs in flight: bytes checked as at most)");
	free(bytes);
	free(count);
	return 0;
}

static int check_policy(struct audit *a)
{
	struct kvd *d = a->d;
	size_t held = kvd_host_resident(d);
	uint32_t *ids = malloc((held + 1) * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	size_t got = kvt_policy_order(d->pol_ops, d->pol, ids, held + 1);
	if (got != held)
		bad(a, "policy: %s holds %zu chunks, host has %zu for it", d->pol_ops->name, got,
		    held);
	for (size_t k = 0; k < got; k++) {
		uint32_t id = ids[k];
		const struct kvd_entry *e = id < d->idx.cap ? &d->idx.e[id] : NULL;
		if (!e || e->state != KVD_PUBLISHED || !(e->where & KVD_AT_HOST) || kvd_kept(d, id))
			bad(a, "policy: %s holds %u, which is not a host copy it should hold",
			    d->pol_ops->name, id);
		else if (a->seen[id]++)
			bad(a, "policy: %s holds %u twice", d->pol_ops->name, id);
	}
	free(ids);
	kvd_out(a->o, "policy: %s holds %zu chunks\n", d->pol_ops->name, got);
	return 0;
}

static void check_keeps(struct audit *a)
{
	struct kvd *d = a->d;
	uint32_t kept = 0, pending = 0;
	uint64_t bytes = 0, pending_bytes = 0;
	for (uint32_t i = 0; i < d->idx.cap; i++) {
		const struct kvd_entry *e = &d->idx.e[i];
		if (kvd_kept(d, i)) {
			kept++;
			bytes += kvd_rec_bytes(e->payload_bytes);
			if (!at_host(e) || e->state != KVD_PUBLISHED)
				bad(a, "keeps: entry %u is kept without a host copy", i);
		} else if (kvd_keep_pending(d, i)) {
			pending++;
			pending_bytes += kvd_rec_bytes(e->payload_bytes);
		}
	}
	if (kept != d->keeps.chunks || bytes != d->keeps.bytes)
		bad(a, "keeps: %u chunks of %llu bytes counted, %u of %llu kept", d->keeps.chunks,
		    (unsigned long long)d->keeps.bytes, kept, (unsigned long long)bytes);
	if (pending != d->keeps.pending_chunks || pending_bytes != d->keeps.pending_bytes)
		bad(a, "keeps: %u pending counted, %u marked", d->keeps.pending_chunks, pending);
	kvd_out(a->o, "keeps: %u chunks, %u on their way up\n", kept, pending);
}

int kvd_check(struct kvd *d, char *out, size_t out_len)
{
	struct kvd_out o = {out, out_len, 0};
	struct audit a = {.d = d, .o = &o};
	a.pins = calloc((size_t)d->idx.cap + 1, sizeof(*a.pins));
	a.seen = calloc((size_t)d->idx.cap + 1, 1);
	int rc = !a.pins || !a.seen ? -ENOMEM : 0;
	if (!rc) {
		check_index(&a);
		check_leases(&a);
		rc = check_pools(&a);
	}
	if (!rc)
		rc = check_policy(&a);
	if (!rc)
		check_keeps(&a);
	free(a.pins);
	free(a.seen);
	if (rc)
		return rc;
	if (a.bad > CHECK_SHOWN)
		kvd_out(&o, "... and %u more\n", a.bad - CHECK_SHOWN);
	if (a.bad)
		kvd_out(&o, "%u mismatches\n", a.bad);
	else
		kvd_out(&o, "ok\n");
	return a.bad ? -EUCLEAN : 0;
}
