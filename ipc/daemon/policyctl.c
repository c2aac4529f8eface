/*
 * policyctl.c -- run-time policy control of the host tier (kvtier policy get|set, kvtier mrc).
 *
 * A switch builds the new policy from the resident entries, coldest first (kvt_policy_switch),
 * and only then replaces the old one, so no cached chunk is dropped and a failed switch changes
 * nothing. Parameters go through the policy's set_param. The miss-ratio curve is fed every
 * host-tier access (acquire and lookup keys) through a SHARDS sampler, so it costs a hash
 * compare per access for the unsampled majority.
 */
#include "daemon.h"
#include "core/log.h"
#include "policy/mrc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void meta_of(void *arg, uint32_t id, struct kvt_policy_meta *m)
{
	struct kvd *d = arg;
	const struct kvd_entry *e = &d->idx.e[id];
	uint32_t pid =
	    e->has_parent ? kvd_index_find(&d->idx, e->tenant, e->ns, e->parent) : KVD_NIL;
	if (pid != KVD_NIL && !(d->idx.e[pid].where & KVD_AT_HOST))
		pid = KVD_NIL;
	*m = (struct kvt_policy_meta){.key_hash = e->key.w[0] ^ e->tenant,
	                              .bytes = kvd_rec_bytes(e->payload_bytes),
	                              .parent = pid == KVD_NIL ? KVT_POLICY_NONE : pid,
	                              .depth = e->depth,
	                              .tenant = e->tenant};
}

static size_t host_resident(const struct kvd *d)
{
	size_t n = 0;
	for (uint32_t i = 0; i < d->idx.cap; i++)
		n += d->idx.e[i].state == KVD_PUBLISHED && (d->idx.e[i].where & KVD_AT_HOST);
	return n;
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
			snprintf(err, err_len, "%s: %s=%s: %s", ops->name, w, eq + 1,
			         rc == -ENOENT ? "no such parameter" : strerror(-rc));
			return rc;
		}
	}
	return 0;
}

int kvd_policy_set(struct kvd *d, const char *name, char *params, char *err, size_t err_len)
{
	const struct kvt_policy_ops *ops = kvt_policy_find(name);
	if (!ops) {
		snprintf(err, err_len, "no policy named '%s' (kvtier sim --list-policies)", name);
		return -ENOENT;
	}
	if (ops == d->pol_ops)
		return apply_params(ops, d->pol, params, err, err_len);
	struct kvt_policy *np;
	size_t n = host_resident(d);
	int rc = kvt_policy_switch(d->pol_ops, d->pol, n, ops, d->idx.cap, meta_of, d, &np);
	if (rc) {
		snprintf(err, err_len, "switch to %s failed: %s", name, strerror(-rc));
		return rc;
	}
	rc = apply_params(ops, np, params, err, err_len);
	if (rc) {
		ops->destroy(np);
		return rc;
	}
	d->pol_ops->destroy(d->pol);
	d->pol_ops = ops;
	d->pol = np;
	snprintf(d->opts.str[KVT_OPT_HOST_POLICY], KVT_OPT_STR_MAX, "%s", name);
	kvt_log(KVT_LOG_INFO, "host tier: policy is now %s (%zu chunks carried over)", name, n);
	return 0;
}

/* "get TIER" | "set TIER NAME [k=v ...]" | "mrc TIER"; the reply text goes to out. */
int kvd_policy_command(struct kvd *d, char *cmd, char *out, size_t out_len)
{
	char *save = NULL;
	char *verb = strtok_r(cmd, " ", &save), *tier = strtok_r(NULL, " ", &save);
	if (!verb || !tier) {
		snprintf(out, out_len, "usage: get TIER | set TIER NAME [k=v ...] | mrc TIER");
		return -EINVAL;
	}
	if (strcmp(tier, "host")) {
		snprintf(out, out_len, "tier %s: its eviction is the tier's own (see docs/)", tier);
		return -EOPNOTSUPP;
	}
	if (!strcmp(verb, "get")) {
		snprintf(out, out_len, "host %s", d->pol_ops->name);
		return 0;
	}
	if (!strcmp(verb, "set")) {
		char *name = strtok_r(NULL, " ", &save);
		if (!name) {
			snprintf(out, out_len, "usage: set TIER NAME [k=v ...]");
			return -EINVAL;
		}
		int rc = kvd_policy_set(d, name, save ? save : (char *)"", out, out_len);
		if (!rc)
			snprintf(out, out_len, "host %s", d->pol_ops->name);
		return rc;
	}
	if (!strcmp(verb, "mrc")) {
		size_t n = host_resident(d);
		uint64_t avg = n ? d->host_used / n : 0;
		if (!d->mrc || !avg || !kvt_mrc_samples(d->mrc)) {
			snprintf(out, out_len, "no accesses sampled yet");
			return -EAGAIN;
		}
		uint64_t size = d->host_cap / avg;
		double c[5];
		kvt_mrc_curve(d->mrc, size, c);
		snprintf(out, out_len,
		         "host: %llu chunks at capacity (%llu sampled accesses)\n"
		         "size     0.5x    1x      2x      4x      8x\n"
		         "hit      %.4f  %.4f  %.4f  %.4f  %.4f\n",
		         (unsigned long long)size, (unsigned long long)kvt_mrc_samples(d->mrc),
		         c[0], c[1], c[2], c[3], c[4]);
		return 0;
	}
	snprintf(out, out_len, "unknown verb '%s'", verb);
	return -EINVAL;
}
