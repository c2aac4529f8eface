/*
 * gdsf.c -- a cost-aware GreedyDual-Size-Frequency policy for prefix chunks. An entry's key is
 * L + count x cost / size, where cost is the recompute work the chunk saves: prefilling chunk
 * d of a prefix attends over the d chunks before it, so cost = (depth + 1)^cost_exponent
 * (default 1; 0 makes every chunk cost the same, i.e. plain GDSF). L is the key of the last
 * evicted entry (the inflation that ages old entries). Size is in bytes, taken from the meta.
 * An indexed min-heap orders entries.
 */
#include "pol_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct kvt_policy {
	struct kvt__heap h;
	uint32_t *count;
	float *value; /* cost / size */
	size_t cap;
	double L, exponent;
};

static void gdsf_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	kvt__heap_free(&p->h);
	free(p->count);
	free(p->value);
	free(p);
}

static int gdsf_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	kvt__heap_init(&p->h);
	p->exponent = 1.0;
	*out = p;
	return 0;
}

static void gdsf_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	if (id >= p->cap) {
		size_t nc = kvt__pol_cap_for(p->cap, id);
		if (kvt__pol_grow((void **)&p->count, 4, p->cap, nc) ||
		    kvt__pol_grow((void **)&p->value, 4, p->cap, nc))
			return;
		p->cap = nc;
	}
	double d = (double)m->depth + 1.0;
	double cost = p->exponent == 1.0 ? d : pow(d, p->exponent); /* pow(d, 1) == d exactly */
	p->count[id] = 1;
	p->value[id] = (float)(cost / (double)(m->bytes ? m->bytes : 1));
	kvt__heap_set(&p->h, id, p->L + p->value[id]);
}

static void gdsf_access(struct kvt_policy *p, uint32_t id)
{
	if (!kvt__heap_has(&p->h, id))
		return;
	if (p->count[id] < UINT32_MAX)
		p->count[id]++;
	kvt__heap_set(&p->h, id, p->L + (double)p->count[id] * p->value[id]);
}

static void gdsf_remove(struct kvt_policy *p, uint32_t id)
{
	if (!kvt__heap_has(&p->h, id))
		return;
	if (kvt__heap_min(&p->h) == id)
		p->L = kvt__heap_key(&p->h, id);
	kvt__heap_del(&p->h, id);
}

static size_t gdsf_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                           kvt_policy_evictable_fn ok, void *arg)
{
	return kvt__heap_walk(&p->h, out, max, ok, arg);
}

static int gdsf_set_param(struct kvt_policy *p, const char *name, const char *value)
{
	if (strcmp(name, "cost_exponent"))
		return -ENOENT;
	return kvt__param_double(value, 0, 4, &p->exponent);
}

const struct kvt_policy_ops kvt_policy_gdsf = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "gdsf",
    .create = gdsf_create,
    .destroy = gdsf_destroy,
    .on_insert = gdsf_insert,
    .on_access = gdsf_access,
    .on_remove = gdsf_remove,
    .pick_victims = gdsf_victims,
    .set_param = gdsf_set_param,
};
