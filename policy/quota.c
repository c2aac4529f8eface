/*
 * quota.c -- per-tenant quotas (see quota.h). Usage and limits live in arrays indexed by tenant
 * that grow on demand. Victims come from the policy's pick_victims with a
 * filter that sees what this call has let through (pending bytes per tenant), so a batch of
 * victims can never take a tenant below its guarantee together. One walk serves the whole batch:
 * a walk passes every protected entry colder than the first evictable one, and a walk per
 * victim paid that k times. The policy may show the filter candidates it does not return (a
 * sampling policy), so what comes back is checked again in order; if that leaves too little,
 * the old way (one victim a walk, each walk told what is already chosen) finishes the batch.
 * A policy with pick_victims_tenants (lru, fifo, arc, lfu, prefix, gdsf) is also told which tenants
 * may lose nothing at all, and sets their entries aside: the walk no longer passes them every time.
 */
#include "quota.h"
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct kvt_quota {
	uint64_t *used, *guaranteed, *max, *pending;
	size_t n;
	uint32_t *keys; /* tenant keys by dense index (kvt_quota_key_ix), n_keys long */
	uint32_t n_keys;
};

int kvt_quota_create(struct kvt_quota **out)
{
	struct kvt_quota *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	*out = q;
	return 0;
}

void kvt_quota_destroy(struct kvt_quota *q)
{
	if (!q)
		return;
	free(q->used);
	free(q->guaranteed);
	free(q->max);
	free(q->pending);
	free(q->keys);
	free(q);
}

static int ensure(struct kvt_quota *q, uint32_t t)
{
	if (t < q->n)
		return 0;
	size_t nc = q->n ? q->n : 16;
	while (nc <= t)
		nc *= 2;
	if (kvt__pol_grow((void **)&q->used, 8, q->n, nc) ||
	    kvt__pol_grow((void **)&q->guaranteed, 8, q->n, nc) ||
	    kvt__pol_grow((void **)&q->max, 8, q->n, nc) ||
	    kvt__pol_grow((void **)&q->pending, 8, q->n, nc))
		return -ENOMEM;
	for (size_t i = q->n; i < nc; i++)
		q->max[i] = KVT_QUOTA_UNLIMITED;
	q->n = nc;
	return 0;
}

int kvt_quota_set(struct kvt_quota *q, uint32_t tenant, uint64_t guaranteed_bytes,
                  uint64_t max_bytes)
{
	if (guaranteed_bytes > max_bytes)
		return -EINVAL;
	if (ensure(q, tenant))
		return -ENOMEM;
	q->guaranteed[tenant] = guaranteed_bytes;
	q->max[tenant] = max_bytes;
	return 0;
}

int kvt_quota_charge(struct kvt_quota *q, uint32_t tenant, int64_t delta_bytes)
{
	if (ensure(q, tenant))
		return -ENOMEM;
	if (delta_bytes < 0 && (uint64_t)-delta_bytes > q->used[tenant])
		q->used[tenant] = 0;
	else
		q->used[tenant] += (uint64_t)delta_bytes;
	return 0;
}

void kvt_quota_limits(const struct kvt_quota *q, uint32_t tenant, uint64_t *guaranteed,
                      uint64_t *max)
{
	*guaranteed = tenant < q->n ? q->guaranteed[tenant] : 0;
	*max = tenant < q->n ? q->max[tenant] : KVT_QUOTA_UNLIMITED;
}

uint64_t kvt_quota_used(const struct kvt_quota *q, uint32_t tenant)
{
	return tenant < q->n ? q->used[tenant] : 0;
}

uint16_t kvt_quota_key_ix(struct kvt_quota *q, uint32_t key)
{
	for (uint32_t i = 0; i < q->n_keys; i++)
		if (q->keys[i] == key)
			return (uint16_t)i;
	uint32_t *k =
	    q->n_keys < UINT16_MAX ? realloc(q->keys, (q->n_keys + 1) * sizeof(*k)) : NULL;
	if (!k)
		return 0;
	q->keys = k;
	k[q->n_keys] = key;
	return (uint16_t)q->n_keys++;
}

size_t kvt_quota_keys(const struct kvt_quota *q)
{
	return q->n_keys;
}

uint32_t kvt_quota_key(const struct kvt_quota *q, uint16_t ix)
{
	return ix < q->n_keys ? q->keys[ix] : 0;
}

bool kvt_quota_fits(const struct kvt_quota *q, uint32_t tenant, uint64_t bytes)
{
	if (tenant >= q->n)
		return true;
	return q->used[tenant] + bytes <= q->max[tenant];
}

struct filter {
	struct kvt_quota *q;
	const struct kvt_quota_view *v;
	uint32_t requester;
	bool own_only;
	bool count; /* the one-walk pass: what passes becomes pending at once */
	const uint32_t *chosen;
	size_t n_chosen;
};

static bool quota_ok(void *arg, uint32_t id)
{
	struct filter *f = arg;
	for (size_t i = 0; i < f->n_chosen; i++)
		if (f->chosen[i] == id)
			return false;
	if (f->v->evictable && !f->v->evictable(f->v->arg, id))
		return false;
	uint32_t t = f->v->tenant_of(f->v->arg, id);
	if (f->own_only)
		return t == f->requester;
	if (t >= f->q->n)
		return true;
	uint64_t b = f->v->bytes_of(f->v->arg, id), left = f->q->used[t] - f->q->pending[t];
	if (left < b || left - b < f->q->guaranteed[t])
		return false;
	if (f->count)
		f->q->pending[t] += b;
	return true;
}

static uint32_t filter_tenant_of(void *arg, uint32_t id)
{
	struct filter *f = arg;
	return f->v->tenant_of(f->v->arg, id);
}

/* Whether any entry of tenant t may still go in this walk: with the bytes this walk has let
 * through pending, t is above its guarantee (an entry's bytes are at least 1). */
static bool tenant_open(void *arg, uint32_t t)
{
	struct filter *f = arg;
	if (f->own_only)
		return t == f->requester;
	return t >= f->q->n || f->q->used[t] - f->q->pending[t] > f->q->guaranteed[t];
}

/* Takes v into the batch: its bytes become pending for its tenant. @return : its bytes. */
static uint64_t take(struct filter *f, uint32_t *out, uint32_t v)
{
	uint32_t t = f->v->tenant_of(f->v->arg, v);
	uint64_t b = f->v->bytes_of(f->v->arg, v);
	if (t < f->q->n)
		f->q->pending[t] += b;
	out[f->n_chosen++] = v;
	return b;
}

size_t kvt_quota_pick_victims(struct kvt_quota *q, const struct kvt_policy_ops *ops,
                              struct kvt_policy *p, uint32_t requester, uint64_t need_bytes,
                              const struct kvt_quota_view *view, uint32_t *out, size_t max)
{
	struct filter f = {.q = q, .v = view, .requester = requester, .chosen = out};
	uint64_t freed = 0;
	if (ensure(q, requester) || !max)
		return 0;
	f.own_only = !kvt_quota_fits(q, requester, need_bytes);
	memset(q->pending, 0, q->n * sizeof(*q->pending));
	f.count = true;
	size_t n = ops->pick_victims_tenants
	               ? ops->pick_victims_tenants(p, out, max, quota_ok, filter_tenant_of,
	                                           tenant_open, &f)
	               : ops->pick_victims(p, out, max, quota_ok, &f);
	/* again, in order, with only what came back pending */
	f.count = false;
	memset(q->pending, 0, q->n * sizeof(*q->pending));
	for (size_t i = 0; i < n && freed < need_bytes; i++)
		if (quota_ok(&f, out[i]))
			freed += take(&f, out, out[i]);
	while (freed < need_bytes && f.n_chosen < max) {
		uint32_t v;
		if (ops->pick_victims(p, &v, 1, quota_ok, &f) != 1)
			break;
		freed += take(&f, out, v);
	}
	return f.n_chosen;
}
