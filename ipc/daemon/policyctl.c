/*
 * policyctl.c -- run-time policy control of the tiers (kvtier policy get|set, kvtier mrc).
 *
 * A switch builds the new policy from the resident entries, coldest first (kvt_policy_switch),
 * and only then replaces the old one, so no cached chunk is dropped and a failed switch changes
 * nothing. Parameters go through the policy's set_param. The host's miss-ratio curve is fed
 * every acquired key through a SHARDS sampler, so it costs a hash compare per access for the
 * unsampled majority. A tier below host (the rocksdb tier) holds its own policy: get and set go
 * to it through tier.h under its lock (the same kvt_policy_set), and its curve, kept here, is
 * fed the host misses that reach it (reads) and its demotions (writes, which only make a key
 * resident). A tier without a policy (nvme: a log reclaimed in write order) says so.
 */
#include "daemon.h"
#include "core/log.h"
#include "policy/mrc.h"
#include "tiers/tier.h"

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

double kvd_mrc_rate(const struct kvd *d)
{
	return (double)kvt_opt_u64(&d->opts, KVT_OPT_MRC_SAMPLE_PPM) / 1e6;
}

int kvd_policy_set(struct kvd *d, const char *name, char *params, char *err, size_t err_len)
{
	const struct kvt_policy_ops *was = d->pol_ops;
	size_t n = host_resident(d);
	int rc = kvt_policy_set(&d->pol_ops, &d->pol, n, name, params, d->idx.cap, meta_of, d, err,
	                        err_len);
	if (rc || d->pol_ops == was)
		return rc;
	snprintf(d->opts.str[KVT_OPT_HOST_POLICY], KVT_OPT_STR_MAX, "%s", name);
	kvt_log(KVT_LOG_INFO, "host tier: policy is now %s (%zu chunks carried over)", name, n);
	return 0;
}

static int print_mrc(char *out, size_t out_len, const char *tier, const struct kvt_mrc *m,
                     uint64_t size)
{
	double c[5];
	kvt_mrc_curve(m, size, c);
	snprintf(out, out_len,
	         "%s: %llu chunks at capacity (%llu sampled accesses)\n"
	         "size     0.5x    1x      2x      4x      8x\n"
	         "hit      %.4f  %.4f  %.4f  %.4f  %.4f\n",
	         tier, (unsigned long long)size, (unsigned long long)kvt_mrc_samples(m), c[0], c[1],
	         c[2], c[3], c[4]);
	return 0;
}

/* The curve of lower tier k, sized by its capacity over its mean record. */
static int lower_mrc(struct kvd *d, uint32_t k, char *out, size_t out_len)
{
	struct kvd_lower *l = &d->lower[k];
	struct kvt_tier_stats st;
	l->ops->stats(l->t, &st);
	if (!l->mrc || !st.chunks || !st.used_bytes || !kvt_mrc_samples(l->mrc)) {
		snprintf(out, out_len, "%s: no reads sampled yet", l->ops->name);
		return -EAGAIN;
	}
	return print_mrc(out, out_len, l->ops->name, l->mrc,
	                 st.capacity_bytes / (st.used_bytes / st.chunks));
}

/* get | set | mrc on a tier below host. */
static int lower_command(struct kvd *d, const char *verb, const char *tier, char *save, char *out,
                         size_t out_len)
{
	int k = kvd_tiers_find(d, tier);
	if (k < 0) {
		snprintf(out, out_len, "no tier named '%s' in tiers.order (%s)", tier,
		         kvt_opt_str(&d->opts, KVT_OPT_TIERS_ORDER));
		return -ENOENT;
	}
	if (!strcmp(verb, "get"))
		return kvd_tiers_policy_get(d, (uint32_t)k, out, out_len);
	if (!strcmp(verb, "mrc"))
		return lower_mrc(d, (uint32_t)k, out, out_len);
	char *name = strtok_r(NULL, " ", &save);
	if (!name) {
		snprintf(out, out_len, "usage: set TIER NAME [k=v ...]");
		return -EINVAL;
	}
	int rc = kvd_tiers_policy_set(d, (uint32_t)k, name, save ? save : (char *)"", out, out_len);
	return rc ? rc : kvd_tiers_policy_get(d, (uint32_t)k, out, out_len);
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
	if (strcmp(verb, "get") && strcmp(verb, "set") && strcmp(verb, "mrc")) {
		snprintf(out, out_len, "unknown verb '%s'", verb);
		return -EINVAL;
	}
	if (strcmp(tier, "host"))
		return lower_command(d, verb, tier, save, out, out_len);
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
	size_t n = host_resident(d);
	uint64_t avg = n ? d->host_used / n : 0;
	if (!d->mrc || !avg || !kvt_mrc_samples(d->mrc)) {
		snprintf(out, out_len, "no accesses sampled yet");
		return -EAGAIN;
	}
	return print_mrc(out, out_len, "host", d->mrc, d->host_cap / avg);
}
