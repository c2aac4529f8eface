/*
 * minisim.c -- miniature simulations (see minisim.h), and the miniature cache each of the five
 * instances is (struct kvt__mini, pol_int.h): a policy over dense ids 0..cap-1, a map from key
 * hash to id, the key of each id (to unmap it on eviction) and a stack of free ids. A request
 * walks its sampled keys as the daemon's acquire and put do: a resident key is an access, a
 * missing one is inserted with the previous sampled key of the request as its parent, after an
 * eviction when the instance is full. The sampling hash is salted differently from the SHARDS
 * curve's.
 */
#include "minisim.h"
#include "pol_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double mult[5] = {0.5, 1, 2, 4, 8};

struct kvt_minisim {
	const struct kvt_policy_ops *ops;
	uint64_t capacity, threshold;
	double rate;
	uint64_t counted; /* every key access, sampled or not (the adjustment) */
	struct kvt__mini s[5];
};

int kvt__mini_init(struct kvt__mini *s, const struct kvt_policy_ops *ops, const char *params,
                   size_t cap)
{
	s->cap = cap;
	s->key_of = calloc(cap, sizeof(*s->key_of));
	s->free_ids = malloc(cap * sizeof(*s->free_ids));
	if (!s->key_of || !s->free_ids || kvt__hset_init(&s->map, cap) || ops->create(cap, &s->p))
		return -ENOMEM;
	for (size_t i = 0; i < cap; i++)
		s->free_ids[i] = (uint32_t)(cap - 1 - i);
	s->n_free = cap;
	/* the parameters as `kvtier policy set` gives them to a running policy of the same name */
	char words[256], err[128];
	const struct kvt_policy_ops *same = ops;
	snprintf(words, sizeof(words), "%s", params ? params : "");
	return kvt_policy_set(&same, &s->p, 0, ops->name, words, cap, NULL, NULL, err, sizeof(err))
	           ? -EINVAL
	           : 0;
}

void kvt__mini_free(const struct kvt_policy_ops *ops, struct kvt__mini *s)
{
	if (s->p)
		ops->destroy(s->p);
	kvt__hset_free(&s->map);
	free(s->key_of);
	free(s->free_ids);
}

void kvt_minisim_destroy(struct kvt_minisim *m)
{
	if (!m)
		return;
	for (int k = 0; k < 5; k++)
		kvt__mini_free(m->ops, &m->s[k]);
	free(m);
}

int kvt_minisim_create(const struct kvt_policy_ops *ops, const char *params, uint64_t capacity,
                       size_t sim_entries, struct kvt_minisim **out)
{
	if (!capacity || !sim_entries)
		return -EINVAL;
	struct kvt_minisim *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->ops = ops;
	m->capacity = capacity;
	m->rate = (double)sim_entries >= (double)capacity ? 1 : (double)sim_entries / capacity;
	m->threshold = kvt__sample_threshold(m->rate);
	for (int k = 0; k < 5; k++) {
		double c = mult[k] * (double)capacity * m->rate + 0.5;
		int rc = kvt__mini_init(&m->s[k], ops, params, c < 1 ? 1 : (size_t)c);
		if (rc) {
			kvt_minisim_destroy(m);
			return rc;
		}
	}
	*out = m;
	return 0;
}

bool kvt__mini_touch(const struct kvt_policy_ops *ops, struct kvt__mini *s, uint64_t key,
                     uint32_t depth, uint32_t *prev, bool counted)
{
	s->accesses += counted;
	uint32_t id = kvt__hset_get(&s->map, key);
	if (id != KVT__NIL) {
		s->hits += counted;
		ops->on_access(s->p, id);
		*prev = id;
		return true;
	}
	if (!s->n_free) {
		uint32_t v;
		if (ops->pick_victims(s->p, &v, 1, NULL, NULL) != 1) {
			*prev = KVT_POLICY_NONE;
			return false;
		}
		ops->on_remove(s->p, v);
		kvt__hset_del(&s->map, s->key_of[v]);
		s->free_ids[s->n_free++] = v;
		if (v == *prev)
			*prev = KVT_POLICY_NONE;
	}
	id = s->free_ids[--s->n_free];
	if (kvt__hset_put(&s->map, key, id) < 0) {
		s->free_ids[s->n_free++] = id;
		*prev = KVT_POLICY_NONE;
		return false;
	}
	s->key_of[id] = key;
	struct kvt_policy_meta meta = {
	    .key_hash = key, .bytes = 1, .parent = *prev, .depth = depth};
	ops->on_insert(s->p, id, &meta);
	*prev = id;
	return false;
}

size_t kvt__mini_bytes(const struct kvt_policy_ops *ops, const struct kvt__mini *s)
{
	return s->cap * (sizeof(*s->key_of) + sizeof(*s->free_ids)) +
	       s->map.cap * sizeof(*s->map.slots) +
	       (ops->memory_bytes ? ops->memory_bytes(s->p) : 0);
}

static bool sampled(const struct kvt_minisim *m, uint64_t key)
{
	return kvt__mix64(key ^ 0x2545f4914f6cdd1dULL) <= m->threshold;
}

void kvt_minisim_request(struct kvt_minisim *m, const uint64_t *keys, size_t n)
{
	uint32_t prev[5] = {KVT_POLICY_NONE, KVT_POLICY_NONE, KVT_POLICY_NONE, KVT_POLICY_NONE,
	                    KVT_POLICY_NONE};
	uint32_t depth = 0;
	m->counted += n;
	for (size_t i = 0; i < n; i++) {
		if (!sampled(m, keys[i]))
			continue;
		for (int k = 0; k < 5; k++)
			kvt__mini_touch(m->ops, &m->s[k], keys[i], depth, &prev[k], true);
		depth++;
	}
}

void kvt_minisim_touch(struct kvt_minisim *m, uint64_t key)
{
	if (!sampled(m, key))
		return;
	for (int k = 0; k < 5; k++) {
		uint32_t prev = KVT_POLICY_NONE;
		kvt__mini_touch(m->ops, &m->s[k], key, 0, &prev, false);
	}
}

void kvt_minisim_curve(const struct kvt_minisim *m, double out[5])
{
	/* as SHARDS-adj: the shortfall of sampled accesses against rate x all of them is mostly a
	 * hot key left out of the sample, a hit at every size */
	double expected = m->rate * (double)m->counted;
	for (int k = 0; k < 5; k++) {
		double r =
		    m->s[k].accesses
		        ? ((double)m->s[k].hits + expected - (double)m->s[k].accesses) / expected
		        : 0;
		out[k] = r < 0 ? 0 : r > 1 ? 1 : r;
	}
}

double kvt_minisim_rate(const struct kvt_minisim *m)
{
	return m->rate;
}

uint64_t kvt_minisim_samples(const struct kvt_minisim *m)
{
	return m->s[0].accesses;
}

size_t kvt_minisim_bytes(const struct kvt_minisim *m)
{
	size_t b = sizeof(*m);
	for (int k = 0; k < 5; k++)
		b += kvt__mini_bytes(m->ops, &m->s[k]);
	return b;
}

uint64_t kvt_minisim_capacity(const struct kvt_minisim *m)
{
	return m->capacity;
}

const struct kvt_policy_ops *kvt_minisim_ops(const struct kvt_minisim *m)
{
	return m->ops;
}
