/*
 * switch.c -- kvt_policy_switch(): a run-time policy change that keeps every entry. The old
 * policy's eviction order (export_order, else pick_victims over everything with no filter)
 * is replayed into the new one coldest first. Before an entry goes in, its resident ancestors
 * go in (depth first through meta.parent), so a prefix-aware policy rebuilds its tree; each goes
 * in marked KVT_POLICY_META_REBUILT, since no engine touched it (conv took the last one replayed
 * for the chunk a hit had just followed, and relinked that hit under it). Then
 * the engine's done hints (is_done) are told again, in the same order, to a new policy that
 * takes them (on_done), so first told stays first out. Memory: the order array and a bitmap
 * over ids, both freed before return.
 *
 * kvt_policy_set() is what `kvtier policy set TIER NAME [k=v ...]` does to any tier that keeps
 * its entries in a policy (the daemon's host tier, the rocksdb tier): the same name only sets
 * parameters; another builds the new policy beside the old one, sets its parameters there, and
 * replaces the old one only when everything succeeded. A first word "defaults" builds the same
 * policy anew that way (every parameter back to its default, the entries carried over), so a
 * parameter can be unset: a reload whose file drops one does this. kvt_policy_params_str() writes
 * the parameters as they run for `kvtier policy get`, in the words `policy set` takes back, and a
 * refused value's error names the range the policy gives (get_param).
 */
#include "policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Walks up to the first ancestor already inserted (chain: scratch of n_resident ids), then
 * inserts downward. done[id]: 0 not resident, 1 waiting, 2 inserted. */
static void insert_with_ancestors(const struct kvt_policy_ops *ops, struct kvt_policy *p,
                                  uint32_t id, uint8_t *done, uint32_t max_id, uint32_t *chain,
                                  kvt_policy_meta_fn meta, void *arg)
{
	size_t n = 0;
	struct kvt_policy_meta m;
	while (id <= max_id && done[id] == 1) {
		done[id] = 3; /* on the chain: a cycle in the caller's parents cannot loop */
		chain[n++] = id;
		meta(arg, id, &m);
		id = m.parent;
	}
	while (n--) {
		meta(arg, chain[n], &m);
		m.flags |= KVT_POLICY_META_REBUILT;
		ops->on_insert(p, chain[n], &m);
		done[chain[n]] = 2;
	}
}

size_t kvt_policy_order(const struct kvt_policy_ops *ops, struct kvt_policy *p, uint32_t *out,
                        size_t max)
{
	return ops->export_order ? ops->export_order(p, out, max)
	                         : ops->pick_victims(p, out, max, NULL, NULL);
}

int kvt_policy_switch(const struct kvt_policy_ops *from_ops, struct kvt_policy *from,
                      size_t n_resident, const struct kvt_policy_ops *to_ops, size_t capacity_hint,
                      kvt_policy_meta_fn meta, void *arg, struct kvt_policy **out)
{
	int rc = -ENOMEM;
	struct kvt_policy *p = NULL;
	uint8_t *done = NULL;
	uint32_t *order = malloc((n_resident + 1) * sizeof(*order));
	uint32_t *chain = malloc((n_resident + 1) * sizeof(*chain));
	if (!order || !chain)
		goto err;
	size_t n = kvt_policy_order(from_ops, from, order, n_resident);
	rc = -EINVAL;
	if (n != n_resident)
		goto err;
	uint32_t max_id = 0;
	for (size_t i = 0; i < n; i++)
		max_id = order[i] > max_id ? order[i] : max_id;
	rc = -ENOMEM;
	if (!(done = calloc((size_t)max_id + 1, 1)))
		goto err;
	for (size_t i = 0; i < n; i++)
		done[order[i]] = 1; /* resident, not yet inserted */
	if ((rc = to_ops->create(capacity_hint, &p)))
		goto err;
	for (size_t i = 0; i < n; i++)
		insert_with_ancestors(to_ops, p, order[i], done, max_id, chain, meta, arg);
	if (from_ops->is_done && to_ops->on_done)
		for (size_t i = 0; i < n; i++)
			if (from_ops->is_done(from, order[i]))
				to_ops->on_done(p, order[i]);
	free(chain);
	free(done);
	free(order);
	*out = p;
	return 0;
err:
	free(chain);
	free(done);
	free(order);
	return rc;
}

/* v as a parameter's value is written back: whole numbers whole, others in the fewest digits
 * (7 to 17) that read back as v, or, for a value a float holds, as that float: what `policy
 * get` prints, `policy set` and a config file take back unchanged. */
static void fmt_value(char *out, size_t out_len, double v)
{
	if (v > -1e15 && v < 1e15 && v == (double)(int64_t)v) { /* in range before the cast */
		snprintf(out, out_len, "%.0f", v);
		return;
	}
	bool is_float = v == (double)(float)v;
	for (int digits = 7; digits <= 17; digits++) {
		snprintf(out, out_len, "%.*g", digits, v);
		double back = strtod(out, NULL);
		if (back == v || (is_float && (float)back == (float)v))
			return;
	}
}

void kvt_policy_params_str(const struct kvt_policy_ops *ops, struct kvt_policy *p, char *out,
                           size_t out_len)
{
	size_t n = 0;
	struct kvt_policy_param pa;
	if (out_len)
		out[0] = 0;
	for (size_t i = 0; ops->get_param && !ops->get_param(p, i, &pa) && n < out_len; i++) {
		char v[32];
		fmt_value(v, sizeof(v), pa.value);
		int w = snprintf(out + n, out_len - n, " %s=%s", pa.name, v);
		n += w > 0 ? (size_t)w : 0;
	}
}

/* Why set_param refused value for name: its range when the policy tells it. */
static void why_refused(const struct kvt_policy_ops *ops, struct kvt_policy *p, const char *name,
                        const char *value, int rc, char *err, size_t err_len)
{
	struct kvt_policy_param pa;
	for (size_t i = 0; rc == -EINVAL && ops->get_param && !ops->get_param(p, i, &pa); i++)
		if (!strcmp(pa.name, name)) {
			char lo[32], hi[32];
			fmt_value(lo, sizeof(lo), pa.lo);
			fmt_value(hi, sizeof(hi), pa.hi);
			snprintf(err, err_len, "%s: %s=%s: not a number from %s to %s", ops->name,
			         name, value, lo, hi);
			return;
		}
	snprintf(err, err_len, "%s: %s=%s: %s", ops->name, name, value,
	         rc == -ENOENT ? "no such parameter" : strerror(-rc));
}

/* Applies "k=v" words; @return : 0 or the first error (-ENOENT: unknown parameter). */
static int apply_params(const struct kvt_policy_ops *ops, struct kvt_policy *p, char *words,
                        char *err, size_t err_len)
{
	char *save = NULL;
	for (char *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(w, '=');
		if (!eq) {
			snprintf(err, err_len, "'%s' is not name=value", w);
			return -EINVAL;
		}
		*eq = 0;
		int rc = ops->set_param ? ops->set_param(p, w, eq + 1) : -ENOENT;
		if (rc) {
			why_refused(ops, p, w, eq + 1, rc, err, err_len);
			return rc;
		}
	}
	return 0;
}

const char *kvt_policy_after_defaults(const char *words)
{
	const char *w = words + strspn(words, " ");
	size_t n = sizeof(KVT_POLICY_DEFAULTS) - 1;
	return strncmp(w, KVT_POLICY_DEFAULTS, n) || (w[n] && w[n] != ' ') ? NULL : w + n;
}

/* Takes a first word "defaults" out of words. @return : whether there was one. */
static bool take_defaults(char *words)
{
	const char *rest = kvt_policy_after_defaults(words);
	if (rest)
		memmove(words, rest, strlen(rest) + 1);
	return rest != NULL;
}

int kvt_policy_check(const char *name, const char *params, char *err, size_t err_len)
{
	const struct kvt_policy_ops *to = kvt_policy_find(name);
	if (!to) {
		snprintf(err, err_len, "no policy named '%s' (kvtier sim --list-policies)", name);
		return -ENOENT;
	}
	struct kvt_policy *trial = NULL;
	char *copy = strdup(params ? params : "");
	int rc = copy ? to->create(64, &trial) : -ENOMEM;
	if (!rc) {
		take_defaults(copy);
		rc = apply_params(to, trial, copy, err, err_len);
		to->destroy(trial);
	} else {
		snprintf(err, err_len, "%s: %s", name, strerror(-rc));
	}
	free(copy);
	return rc;
}

int kvt_policy_set(const struct kvt_policy_ops **ops, struct kvt_policy **p, size_t n_resident,
                   const char *name, char *params, size_t capacity_hint, kvt_policy_meta_fn meta,
                   void *arg, char *err, size_t err_len)
{
	const struct kvt_policy_ops *to = kvt_policy_find(name);
	if (!to) {
		snprintf(err, err_len, "no policy named '%s' (kvtier sim --list-policies)", name);
		return -ENOENT;
	}
	bool fresh = take_defaults(params);
	if (to == *ops && !fresh) {
		/* tried first on a policy of its own, so that a refused word changes nothing: one
		 * by one on the running policy, the words before it were left set */
		int rc = kvt_policy_check(name, params, err, err_len);
		return rc ? rc : apply_params(to, *p, params, err, err_len);
	}
	struct kvt_policy *np;
	int rc = kvt_policy_switch(*ops, *p, n_resident, to, capacity_hint, meta, arg, &np);
	if (rc) {
		snprintf(err, err_len, "switch to %s failed: %s", name, strerror(-rc));
		return rc;
	}
	if ((rc = apply_params(to, np, params, err, err_len))) {
		to->destroy(np);
		return rc;
	}
	(*ops)->destroy(*p);
	*ops = to;
	*p = np;
	return 0;
}
