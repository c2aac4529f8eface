/*
 * tierctl.c -- the lower tiers as an operator sees them: enable after a failure, quotas and
 * policies set at run time (`kvtier quota`, `kvtier policy get|set TIER`, TIER.policy = auto),
 * the reads that feed their miss-ratio curves, and their stats. Loop thread only; every call
 * into a tier takes its lock, as the worker threads of tierwork.c do, but without waiting for
 * it (kvd_lower_take): a call that finds the tier busy with I/O returns -EBUSY before it has
 * changed anything, and the operator's command that made it is parked and run again
 * (conn.c). TIER.policy = auto, which no command waits for, looks again later.
 */
#include "daemon.h"
#include "core/log.h"
#include "policy/minisim.h"
#include "policy/mrc.h"
#include "tiers/tier.h"
#ifdef KVT_HAVE_TIER_NVME
#include "tiers/nvme/nvme.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <string.h>

int kvd_tiers_enable(struct kvd *d, const char *name)
{
	for (uint32_t k = 0; k < d->n_lower; k++) {
		struct kvd_lower *l = &d->lower[k];
		if (strcmp(l->ops->name, name))
			continue;
		if (!l->ops->enable)
			return -EOPNOTSUPP;
		int rc = kvd_lower_take(d, k);
		if (!rc)
			rc = l->ops->enable(l->t);
		if (!rc)
			l->reads_again_ns = 0;
		return rc;
	}
	return -ENOENT;
}

int kvd_tiers_find(const struct kvd *d, const char *name, char *err, size_t err_len)
{
	for (uint32_t k = 0; k < d->n_lower; k++)
		if (!strcmp(d->lower[k].ops->name, name))
			return (int)k;
	if (err)
		snprintf(err, err_len, "no tier named '%s' in tiers.order (%s)", name,
		         kvt_opt_str(&d->opts, KVT_OPT_TIERS_ORDER));
	return -ENOENT;
}

static int no_policy(const struct kvd_lower *l, char *out, size_t out_len)
{
	snprintf(out, out_len,
	         "%s: evicts in write order (its log is reclaimed oldest first), not through a "
	         "policy; its admission is %s.admit",
	         l->ops->name, l->ops->name);
	return -EOPNOTSUPP;
}

int kvd_tiers_quota_set(struct kvd *d, const char *tier, const char *list, char *err,
                        size_t err_len)
{
	int k = kvd_tiers_find(d, tier, err, err_len);
	if (k < 0)
		return k;
	struct kvd_lower *l = &d->lower[k];
	if (!l->ops->quota_set) {
		snprintf(err, err_len, "%s: its quota is read at start only", tier);
		return -EOPNOTSUPP;
	}
	char why[KVT_OPT_STR_MAX + 160] = "";
	int rc = kvd_lower_take(d, (uint32_t)k);
	if (rc)
		return rc;
	rc = l->ops->quota_set(l->t, list, why, sizeof(why));
	if (rc)
		snprintf(err, err_len, "%s.quota: %s", tier, why);
	return rc;
}

int kvd_tiers_policy_get(struct kvd *d, uint32_t k, char *out, size_t out_len)
{
	struct kvd_lower *l = &d->lower[k];
	if (!l->ops->policy_get)
		return no_policy(l, out, out_len);
	char name[KVT_POLICY_LINE_MAX];
	int rc = kvd_lower_take(d, k);
	if (rc)
		return rc;
	l->ops->policy_get(l->t, name, sizeof(name));
	char *params = strchr(name, ' '); /* "conv k=v ...": "(auto)" goes after the name */
	if (params)
		*params++ = 0;
	snprintf(out, out_len, "%s %s%s%s%s", l->ops->name, name, l->pol_auto ? " (auto)" : "",
	         params ? " " : "", params ? params : "");
	return 0;
}

/*
 * rocksdb.policy = auto. Below host (cascading, the default placement) conv keeps more than
 * arc on the Mooncake trace and on four of the six generated shapes and is within 0.001 on the
 * other two (docs/policies.md, "Three tiers"); it holds ~420 bytes per record, so it runs where
 * host's auto runs it (chunks of 64 KiB and more: under 1 %), and arc, the best classical
 * policy below host, until then. A switch keeps every record, as `policy set` does.
 */
void kvd_tiers_policy_auto(struct kvd *d)
{
	const char *want = kvd_auto_large_chunks(d) ? "conv" : "arc";
	for (uint32_t k = 0; k < d->n_lower; k++) {
		struct kvd_lower *l = &d->lower[k];
		char name[KVT_POLICY_LINE_MAX], err[256], none[1] = "";
		if (!l->pol_auto || !l->ops->policy_get || !l->ops->policy_set)
			continue;
		if ((l->auto_owed = kvd_lower_take(d, k) != 0))
			continue; /* busy with I/O: kvd_tiers_complete looks again */
		l->ops->policy_get(l->t, name, sizeof(name));
		name[strcspn(name, " ")] = 0; /* the name, without its parameters */
		int rc =
		    strcmp(name, want) ? l->ops->policy_set(l->t, want, none, err, sizeof(err)) : 1;
		if (rc == 1) { /* running it already */
			snprintf(l->pol_auto_name, sizeof(l->pol_auto_name), "%.*s",
			         (int)sizeof(l->pol_auto_name) - 1, name);
			continue;
		}
		if (rc) {
			kvt_log(KVT_LOG_WARN, "%s.policy auto: staying on %s: %s", l->ops->name,
			        name, err);
			continue;
		}
		snprintf(l->pol_auto_name, sizeof(l->pol_auto_name), "%s", want);
		kvd_minisim_reset(d, (int)k);
		kvt_log(KVT_LOG_INFO, "%s tier: policy auto is now %s", l->ops->name, want);
	}
}

char *kvd_tiers_policy_opt(struct kvd *d, uint32_t k, const char *suffix)
{
	const struct kvd_lower *l = &d->lower[k];
	char opt[64];
	snprintf(opt, sizeof(opt), "%s.policy%s", l->ops->name, suffix);
	int id = kvt_opt_find(opt);
	return l->ops->policy_get && id >= 0 ? d->opts.str[id] : NULL;
}

int kvd_tiers_policy_set(struct kvd *d, uint32_t k, const char *name, char *params, char *err,
                         size_t err_len)
{
	struct kvd_lower *l = &d->lower[k];
	if (!l->ops->policy_set)
		return no_policy(l, err, err_len);
	int rc = kvd_lower_take(d, k); /* before anything changes */
	if (rc)
		return rc;
	/* the running values, as --print-config and stats show them */
	char *opt = kvd_tiers_policy_opt(d, k, ""),
	     *opt_params = kvd_tiers_policy_opt(d, k, "_params");
	char rec[KVT_OPT_STR_MAX] = "";
	if (!name) /* parameters alone: of what runs, which under auto ends auto, as at host */
		name = l->pol_auto ? l->pol_auto_name : opt ? opt : "";
	if (!strcmp(name, "auto")) {
		if (params[strspn(params, " ")]) {
			snprintf(err, err_len, "auto takes no parameters: it picks arc or conv");
			return -EINVAL;
		}
		if (opt && opt_params && opt_params[0] && strcmp(opt, "auto")) {
			/* auto runs its choice at its defaults */
			char fresh[] = KVT_POLICY_DEFAULTS;
			rc = l->ops->policy_set(l->t, opt, fresh, err, err_len);
			if (rc)
				return rc;
			kvd_minisim_reset(d, (int)k); /* other parameters: a new curve */
		}
		l->pol_auto = true;
		if (opt && opt_params) {
			snprintf(opt, KVT_OPT_STR_MAX, "auto");
			opt_params[0] = 0;
		}
		kvd_tiers_policy_auto(d);
		return 0;
	}
	rc = opt && opt_params ? kvd_params_record(opt_params, opt, name, params, rec, err, err_len)
	                       : 0;
	if (rc)
		return rc;
	rc = l->ops->policy_set(l->t, name, params, err, err_len);
	if (rc)
		return rc;
	if (opt && opt_params)
		memcpy(opt_params, rec, sizeof(rec));
	l->pol_auto = false; /* an operator's choice, or a parameter, ends auto */
	bool same = !opt || !strcmp(opt, name);
	if (!same)
		snprintf(opt, KVT_OPT_STR_MAX, "%s", name);
	if (!same || *rec)
		kvd_minisim_reset(d, (int)k); /* another policy, or other parameters: a new curve */
	if (same)
		return 0; /* parameters only */
	kvt_log(KVT_LOG_INFO, "%s tier: policy is now %s", l->ops->name, name);
	return 0;
}

void kvd_tiers_note_read(struct kvd *d, uint64_t key_hash, uint8_t where)
{
	if (where & KVD_AT_HOST)
		return;
	for (uint32_t k = 0; k < d->n_lower; k++) {
		if (d->lower[k].mrc)
			kvt_mrc_access(d->lower[k].mrc, key_hash);
		if (d->lower[k].minisim)
			kvt_minisim_request(d->lower[k].minisim, &key_hash, 1);
		if (where & (2u << k))
			return;
	}
}

/* Ends a lower tier's stats object with its tenants' accounts (TIER.quota), when it keeps them:
 * read under the tier's lock when it is free, else as last read. The worker holds it through a
 * write's I/O, and on a device taking seconds an I/O, waiting for it held the loop -- every
 * engine's request -- for as long as each `kvtier stats`, `kvtier top` tick or metrics scrape
 * (6 s with writes of 1.5 s, test_tiers_put_waits_for_demoted_victim). */
static void tenants_json(struct kvd_lower *l, char *buf, size_t len, size_t *pos)
{
	if (l->ops->tenant_usage && !pthread_mutex_trylock(&l->lock)) {
		l->n_ten = l->ops->tenant_usage(l->t, l->ten, KVD_STATS_TENANTS);
		pthread_mutex_unlock(&l->lock);
	}
	const struct kvt_tier_tenant *ten = l->ten;
	size_t n = l->ops->tenant_usage ? l->n_ten : 0;
	for (size_t i = 0; i <= n && *pos < len; i++) {
		char mx[24] = "null";
		int w;
		if (i == n) {
			w = snprintf(buf + *pos, len - *pos, "%s}", n ? "]" : "");
		} else {
			if (ten[i].max_bytes != UINT64_MAX)
				snprintf(mx, sizeof(mx), "%llu",
				         (unsigned long long)ten[i].max_bytes);
			w = snprintf(
			    buf + *pos, len - *pos,
			    "%s{\"tenant\":%u,\"used_bytes\":%llu,\"guaranteed_bytes\":%llu,"
			    "\"max_bytes\":%s}",
			    i ? "," : ",\"tenant_usage\":[", ten[i].tenant,
			    (unsigned long long)ten[i].used_bytes,
			    (unsigned long long)ten[i].guaranteed_bytes, mx);
		}
		*pos += w > 0 ? (size_t)w : 0;
	}
}

void kvd_tiers_stats_json(struct kvd *d, char *buf, size_t len, size_t *pos)
{
	for (uint32_t k = 0; k < d->n_lower; k++) {
		struct kvt_tier_stats s = {0};
		d->lower[k].ops->stats(d->lower[k].t, &s);
		const char *backend = d->lower[k].ops->name;
#ifdef KVT_HAVE_TIER_NVME
		if (d->lower[k].ops == &kvt_tier_nvme)
			backend = kvt_tier_nvme_backend(d->lower[k].t);
#endif
		const char *pol = kvd_tiers_policy_opt(d, k, "");
		if (*pos >= len)
			return;
		int n = snprintf(
		    buf + *pos, len - *pos,
		    ",{\"name\":\"%s\",\"backend\":\"%s\",\"policy\":\"%s\",\"capacity_bytes\":%"
		    "llu,"
		    "\"used_bytes\":%llu,\"chunks\":%llu,"
		    "\"hits\":%llu,\"misses\":%llu,\"evictions\":%llu,\"told_evictions\":%llu,"
		    "\"reads\":%llu,"
		    "\"writes\":%llu,\"read_bytes\":%llu,\"write_bytes\":%llu,"
		    "\"corruptions\":%llu,\"err_io\":%llu,\"err_again\":%llu,\"err_nospc\":%llu,"
		    "\"err_other\":%llu,\"queue_depth\":%llu,\"plain_ios\":%llu,"
		    "\"pinned_bytes\":%llu,\"pin_failures\":%llu,\"busy_us\":%llu,"
		    "\"opened_from_index\":%llu,\"open_values_read\":%llu,"
		    "\"opened_from_summaries\":%llu,\"repairs\":%llu,\"ios_queued\":%llu,"
		    "\"ios_reaped\":%llu,\"io_max_us\":%llu,\"io_books_wrong\":%llu,"
		    "\"reads_beside_writes\":%llu,\"disabled\":%"
		    "s,"
		    "\"full\":%s",
		    d->lower[k].ops->name, backend,
		    !pol                   ? "write-order"
		    : d->lower[k].pol_auto ? d->lower[k].pol_auto_name
		                           : pol,
		    (unsigned long long)s.capacity_bytes, (unsigned long long)s.used_bytes,
		    (unsigned long long)s.chunks, (unsigned long long)s.hits,
		    (unsigned long long)s.misses, (unsigned long long)s.evictions,
		    (unsigned long long)s.told_evictions, (unsigned long long)s.reads,
		    (unsigned long long)s.writes, (unsigned long long)s.read_bytes,
		    (unsigned long long)s.write_bytes, (unsigned long long)s.corruptions,
		    (unsigned long long)s.err_io, (unsigned long long)s.err_again,
		    (unsigned long long)s.err_nospc, (unsigned long long)s.err_other,
		    (unsigned long long)s.queue_depth, (unsigned long long)s.plain_ios,
		    (unsigned long long)s.pinned_bytes, (unsigned long long)s.pin_failures,
		    (unsigned long long)(atomic_load_explicit(&d->lower[k].busy_ns,
		                                              memory_order_relaxed) /
		                         1000),
		    (unsigned long long)s.opened_from_index, (unsigned long long)s.open_values_read,
		    (unsigned long long)s.opened_from_summaries, (unsigned long long)s.repairs,
		    (unsigned long long)s.ios_queued, (unsigned long long)s.ios_reaped,
		    (unsigned long long)s.io_max_us, (unsigned long long)s.io_books_wrong,
		    (unsigned long long)s.reads_beside_writes, s.disabled ? "true" : "false",
		    s.full ? "true" : "false");
		*pos += n > 0 ? (size_t)n : 0;
		struct kvd_out o = {buf, len, *pos};
		kvd_mrc_json(d, (int)k, &o);
		*pos = o.pos;
		tenants_json(&d->lower[k], buf, len, pos);
	}
}
