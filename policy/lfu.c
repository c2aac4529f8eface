/*
 * lfu.c -- LFU with dynamic aging (LFU-DA, Arlitt et al.): an entry's key is L + its hit count,
 * where L is the key of the last entry evicted. Old popular entries stop outranking new ones
 * once L has grown past their count, so the policy forgets a past phase without periodic
 * halving. An indexed min-heap orders entries (O(log n) per operation); ties go to the entry
 * keyed first. Parameter: max_count caps the count (default 255).
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct kvt_policy {
	struct kvt__heap h;
	uint32_t *count;
	size_t cap;
	double L;
	uint32_t max_count;
};

static void lfu_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	kvt__heap_free(&p->h);
	free(p->count);
	free(p);
}

static int lfu_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	kvt__heap_init(&p->h);
	p->max_count = 255;
	*out = p;
	return 0;
}

static void lfu_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	if (id >= p->cap) {
		size_t nc = kvt__pol_cap_for(p->cap, id);
		if (kvt__pol_grow((void **)&p->count, 4, p->cap, nc))
			return;
		p->cap = nc;
	}
	p->count[id] = 1;
	kvt__heap_set(&p->h, id, p->L + 1);
}

static void lfu_access(struct kvt_policy *p, uint32_t id)
{
	if (!kvt__heap_has(&p->h, id))
		return;
	if (p->count[id] < p->max_count)
		p->count[id]++;
	kvt__heap_set(&p->h, id, p->L + p->count[id]);
}

static void lfu_remove(struct kvt_policy *p, uint32_t id)
{
	if (!kvt__heap_has(&p->h, id))
		return;
	if (kvt__heap_min(&p->h) == id)
		p->L = kvt__heap_key(&p->h, id);
	kvt__heap_del(&p->h, id);
}

static size_t lfu_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                          kvt_policy_evictable_fn ok, void *arg)
{
	return kvt__heap_walk(&p->h, out, max, ok, arg);
}

static int lfu_set_param(struct kvt_policy *p, const char *name, const char *value)
{
	double v;
	if (strcmp(name, "max_count"))
		return -ENOENT;
	if (kvt__param_double(value, 1, 1e9, &v))
		return -EINVAL;
	p->max_count = (uint32_t)v;
	return 0;
}

const struct kvt_policy_ops kvt_policy_lfu = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "lfu",
    .create = lfu_create,
    .destroy = lfu_destroy,
    .on_insert = lfu_insert,
    .on_access = lfu_access,
    .on_remove = lfu_remove,
    .pick_victims = lfu_victims,
    .set_param = lfu_set_param,
};
