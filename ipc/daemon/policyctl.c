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
 * resident). A tier without a policy (nvme: a log reclaimed in write order) says so. The host's
 * admission filter (host.admit, `set host NAME admit=...`) lives here too: it records every
 * acquired and put key, store.c consults it on a put of a new chunk.
 */
#include "daemon.h"
#include "core/log.h"
#include "policy/admit.h"
#include "policy/mrc.h"
#include "tiers/tier.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kvd_host_meta(void *arg, uint32_t id, struct kvt_policy_meta *m)
{
	struct kvd *d = arg;
	const struct kvd_entry *e = &d->idx.e[id];
	uint32_t pid =
	    e->has_parent ? kvd_index_find(&d->idx, e->tenant, e->ns, e->parent) : KVD_NIL;
	if (pid != KVD_NIL && !(d->idx.e[pid].where & KVD_AT_HOST))
		pid = KVD_NIL;
	*m = (struct kvt_policy_meta){.key_hash = kvd_key_hash(d, e->tenant, e->ns, e->key),
	                              .bytes = kvd_rec_bytes(e->payload_bytes),
	                              .parent = pid == KVD_NIL ? KVT_POLICY_NONE : pid,
	                              .depth = e->depth,
	                              .tenant = e->tenant};
}

size_t kvd_host_resident(const struct kvd *d)
{
	size_t n = 0;
	for (uint32_t i = 0; i < d->idx.cap; i++)
		n += d->idx.e[i].state == KVD_PUBLISHED && (d->idx.e[i].where & KVD_AT_HOST) &&
		     !kvd_kept(d, i);
	return n;
}

static size_t host_chunks(const struct kvd *d)
{
	size_t n = 0;
	for (uint32_t t = 0; t < d->n_tenants; t++)
		n += d->tenants[t].chunks;
	return n;
}

int kvd_admit_set(struct kvd *d, const char *name, char *err, size_t err_len)
{
	if (d->admit ? !strcmp(kvt_admit_name(d->admit), name) : !strcmp(name, "none"))
		return 0; /* the running filter keeps what it counted */
	struct kvt_admit *a = NULL;
	size_t hint = host_chunks(d) > 4096 ? host_chunks(d) : 4096;
	int rc = strcmp(name, "none") ? kvt_admit_create(name, hint, &a) : 0;
	if (rc) {
		snprintf(err, err_len, "admit=%s: %s", name,
		         rc == -ENOENT ? "not none, tinylfu or second_touch" : strerror(-rc));
		return rc;
	}
	kvt_admit_destroy(d->admit);
	d->admit = a;
	d->admit_hint = hint;
	if (name != d->opts.str[KVT_OPT_HOST_ADMIT]) /* at start it is the option itself */
		snprintf(d->opts.str[KVT_OPT_HOST_ADMIT], KVT_OPT_STR_MAX, "%s", name);
	return 0;
}

void kvd_admit_record(struct kvd *d, uint64_t key_hash)
{
	if (!d->admit)
		return;
	kvt_admit_record(d->admit, key_hash);
	/* Sized for the chunks host holds: grown, keeping its counts, as that doubles. */
	if (!(++d->admit_records & 4095) && host_chunks(d) > 2 * d->admit_hint &&
	    !kvt_admit_grow(d->admit, host_chunks(d)))
		d->admit_hint = host_chunks(d);
}

/* Takes an "admit=NAME" word out of params (the host's admission, not a policy parameter).
 * @return : NAME, or NULL when there is none. */
static const char *take_admit(char *params, char *name, size_t name_len)
{
	char *w = strstr(params, "admit=");
	if (!w || (w != params && w[-1] != ' '))
		return NULL;
	size_t n = strcspn(w + 6, " ");
	snprintf(name, name_len, "%.*s", (int)n, w + 6);
	memmove(w, w + 6 + n, strlen(w + 6 + n) + 1);
	return name;
}

struct kvt_mrc *kvd_mrc_new(const struct kvd *d)
{
	struct kvt_mrc *m = NULL;
	if (kvt_mrc_create((double)kvt_opt_u64(&d->opts, KVT_OPT_MRC_SAMPLE_PPM) / 1e6, &m))
		return NULL;
	kvt_mrc_max_keys(m, kvt_opt_u64(&d->opts, KVT_OPT_MRC_MAX_KEYS));
	return m;
}

/* A new host curve starts from what host holds, coldest first (as a switch rebuilds a policy),
 * so it does not read cold until the stream has refilled it. */
static void minisim_warm(struct kvd *d)
{
	size_t n = kvd_host_resident(d);
	uint32_t *ids = n ? malloc(n * sizeof(*ids)) : NULL;
	if (!ids)
		return;
	size_t got = kvt_policy_order(d->pol_ops, d->pol, ids, n);
	for (size_t i = 0; i < got; i++) {
		const struct kvd_entry *e = &d->idx.e[ids[i]];
		kvt_minisim_touch(d->minisim, kvd_key_hash(d, e->tenant, e->ns, e->key));
	}
	free(ids);
}

struct held {
	uint64_t seq, key_hash;
};

static int by_seq(const void *a, const void *b)
{
	const struct held *x = a, *y = b;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* A new curve of lower tier k starts from what the tier holds, oldest write first (the tier's
 * own policy lives in the tier; the index knows which chunks have a copy there and their
 * order of writing). Without it the curve read every chunk's next read as a cold miss. */
static void minisim_warm_lower(struct kvd *d, uint32_t k)
{
	size_t n = 0, cap = 1024;
	struct held *h = malloc(cap * sizeof(*h));
	for (uint32_t i = 0; h && i < d->idx.cap; i++) {
		const struct kvd_entry *e = &d->idx.e[i];
		if (e->state != KVD_PUBLISHED || !(e->where & (2u << k)))
			continue;
		if (n == cap) {
			struct held *g = realloc(h, 2 * cap * sizeof(*h));
			if (!g)
				break;
			h = g, cap *= 2;
		}
		h[n++] = (struct held){e->seq, kvd_key_hash(d, e->tenant, e->ns, e->key)};
	}
	if (!h)
		return;
	qsort(h, n, sizeof(*h), by_seq);
	for (size_t i = 0; i < n; i++)
		kvt_minisim_touch(d->lower[k].minisim, h[i].key_hash);
	free(h);
}

void kvd_minisim_reset(struct kvd *d, int tier)
{
	const struct kvt_policy_ops *ops = d->pol_ops;
	const char *params = d->opts.str[KVT_OPT_HOST_POLICY_PARAMS], *name = "host";
	uint64_t bytes = d->host_cap, entries = kvt_opt_u64(&d->opts, KVT_OPT_MRC_MINISIM_ENTRIES);
	struct kvt_minisim **slot = &d->minisim;
	if (tier >= 0) {
		struct kvd_lower *l = &d->lower[tier];
		struct kvt_tier_stats st = {0};
		const char *pol = kvd_tiers_policy_opt(d, (uint32_t)tier, ""),
		           *pp = kvd_tiers_policy_opt(d, (uint32_t)tier, "_params");
		name = l->ops->name;
		if (l->pol_auto) /* what auto runs, at its defaults (kvd_tiers_policy_auto) */
			pol = l->pol_auto_name;
		ops =
		    pol ? kvt_policy_find(pol) : NULL; /* nvme's fifo and clock are policies too */
		params = pp ? pp : "";
		l->ops->stats(l->t, &st);
		bytes = st.capacity_bytes;
		slot = &l->minisim;
	}
	/* what waits was for the old curve; the new one starts from what host holds */
	if (tier < 0)
		kvd_minisim_hold(d, true);
	kvt_minisim_destroy(*slot);
	*slot = NULL;
	uint64_t cap = d->mini_chunk ? bytes / kvd_rec_bytes(d->mini_chunk) : 0;
	/* an LRU tier's curve is SHARDS's, closer and cheaper */
	if (entries && cap && ops && ops != &kvt_policy_lru) {
		int rc = kvt_minisim_create(ops, params, cap, entries, slot);
		if (rc)
			kvt_log(KVT_LOG_WARN, "%s tier: no %s curve by miniature simulation: %s",
			        name, ops->name, strerror(-rc));
		else if (tier < 0)
			minisim_warm(d);
		else
			minisim_warm_lower(d, (uint32_t)tier);
	}
	if (tier < 0)
		kvd_minisim_release(d);
}

void kvd_minisim_chunk(struct kvd *d, uint64_t chunk_bytes)
{
	if (d->mini_chunk && chunk_bytes >= d->mini_chunk)
		return;
	d->mini_chunk = chunk_bytes;
	kvd_minisim_reset(d, -1);
	for (uint32_t k = 0; k < d->n_lower; k++)
		kvd_minisim_reset(d, (int)k);
}

bool kvd_auto_large_chunks(const struct kvd *d)
{
	uint64_t min = UINT64_MAX;
	for (uint32_t i = 0; i < d->n_nss; i++)
		min = d->nss[i].chunk_bytes < min ? d->nss[i].chunk_bytes : min;
	return d->n_nss && min >= KVD_AUTO_CONV_BYTES;
}

/* What host.policy = auto runs: conv once every namespace's chunks are KVD_AUTO_CONV_BYTES or
 * more, lru before that and when any namespace's chunks are smaller. */
static const char *auto_choice(const struct kvd *d)
{
	return kvd_auto_large_chunks(d) ? "conv" : "lru";
}

size_t kvd_host_chunks(const struct kvd *d)
{
	uint64_t min = KVD_AUTO_CONV_BYTES;
	for (uint32_t i = 0; i < d->n_nss; i++)
		min = i == 0 || d->nss[i].chunk_bytes < min ? d->nss[i].chunk_bytes : min;
	uint64_t n = d->host_cap / kvd_rec_bytes(min);
	uint64_t most = kvt_opt_u64(&d->opts, KVT_OPT_INDEX_MAX_CHUNKS);
	n = n < most ? n : most;
	return n ? (size_t)n : 1;
}

/*
 * Rebuilds the running host policy, its parameters kept, for a tier of kvd_host_chunks chunks
 * once a namespace's chunk size changes that count. Ghost lists (arc), sketches (wtinylfu),
 * histories and horizons (conv, hindsight) are sized by the capacity a policy is built for;
 * built for 4,096 chunks in a tier of 1,024, arc kept 0.074 of a replay's prefixes where
 * `kvtier sim` said 0.048 (`kvtier bench trace`).
 */
static void rebuild_for_capacity(struct kvd *d)
{
	size_t chunks = kvd_host_chunks(d);
	if (chunks == d->pol_chunks)
		return;
	char params[KVT_POLICY_LINE_MAX + sizeof(KVT_POLICY_DEFAULTS)] = KVT_POLICY_DEFAULTS,
	                                  err[256];
	size_t len = strlen(params);
	kvt_policy_params_str(d->pol_ops, d->pol, params + len, sizeof(params) - len);
	size_t n = kvd_host_resident(d);
	int rc = kvt_policy_set(&d->pol_ops, &d->pol, n, d->pol_ops->name, params, chunks,
	                        kvd_host_meta, d, err, sizeof(err));
	if (rc) {
		kvt_log(KVT_LOG_WARN, "host policy %s: stays built for %zu chunks: %s",
		        d->pol_ops->name, d->pol_chunks, err);
		return;
	}
	kvt_log(KVT_LOG_INFO, "host policy %s: built for %zu chunks (was %zu), %zu carried over",
	        d->pol_ops->name, chunks, d->pol_chunks, n);
	d->pol_chunks = chunks;
	kvd_minisim_reset(d, -1);
}

void kvd_policy_auto(struct kvd *d)
{
	const char *want = auto_choice(d);
	if (!d->pol_auto || !strcmp(want, d->pol_ops->name)) {
		rebuild_for_capacity(d);
		return;
	}
	char none[1] = "", err[256];
	uint64_t t0 = kvt_now_ns();
	size_t n = kvd_host_resident(d), chunks = kvd_host_chunks(d);
	int rc = kvt_policy_set(&d->pol_ops, &d->pol, n, want, none, chunks, kvd_host_meta, d, err,
	                        sizeof(err));
	if (rc) {
		kvt_log(KVT_LOG_WARN, "host.policy auto: staying on %s: %s", d->pol_ops->name, err);
		return;
	}
	d->pol_chunks = chunks;
	kvd_minisim_reset(d, -1);
	kvt_log(KVT_LOG_INFO,
	        "host tier: policy auto is now %s (%zu chunks carried over in %.1f ms): the "
	        "smallest namespace's chunks are %s %u KiB",
	        want, n, (double)(kvt_now_ns() - t0) / 1e6,
	        strcmp(want, "conv") ? "under" : "at least", KVD_AUTO_CONV_BYTES >> 10);
}

int kvd_policy_set(struct kvd *d, const char *name, char *params, char *err, size_t err_len)
{
	if (!strcmp(name, "auto")) {
		if (params[strspn(params, " ")]) {
			snprintf(err, err_len, "auto takes no parameters: it picks lru or conv");
			return -EINVAL;
		}
		if (d->opts.str[KVT_OPT_HOST_POLICY_PARAMS][0]) { /* auto runs them at defaults */
			char fresh[] = KVT_POLICY_DEFAULTS;
			int rc = kvt_policy_set(&d->pol_ops, &d->pol, kvd_host_resident(d),
			                        d->pol_ops->name, fresh, d->pol_chunks,
			                        kvd_host_meta, d, err, err_len);
			if (rc)
				return rc;
			kvd_minisim_reset(d, -1); /* other parameters: a new curve */
		}
		d->pol_auto = true;
		snprintf(d->opts.str[KVT_OPT_HOST_POLICY], KVT_OPT_STR_MAX, "auto");
		d->opts.str[KVT_OPT_HOST_POLICY_PARAMS][0] = 0;
		kvd_policy_auto(d);
		return 0;
	}
	const struct kvt_policy_ops *was = d->pol_ops;
	char rec[KVT_OPT_STR_MAX];
	int rc = kvd_params_record(d->opts.str[KVT_OPT_HOST_POLICY_PARAMS], was->name, name, params,
	                           rec, err, err_len);
	if (rc)
		return rc;
	uint64_t t0 = kvt_now_ns();
	size_t n = kvd_host_resident(d);
	if ((rc = kvt_policy_set(&d->pol_ops, &d->pol, n, name, params, d->pol_chunks,
	                         kvd_host_meta, d, err, err_len)))
		return rc;
	memcpy(d->opts.str[KVT_OPT_HOST_POLICY_PARAMS], rec, sizeof(rec));
	if (d->pol_ops != was || *rec)
		kvd_minisim_reset(d, -1); /* another policy, or other parameters: a new curve */
	if (d->pol_ops == was && !d->pol_auto)
		return 0;
	d->pol_auto = false; /* an operator's choice, or a parameter, ends auto */
	snprintf(d->opts.str[KVT_OPT_HOST_POLICY], KVT_OPT_STR_MAX, "%s", name);
	kvt_log(KVT_LOG_INFO, "host tier: policy is now %s (%zu chunks carried over in %.1f ms)",
	        name, n, (double)(kvt_now_ns() - t0) / 1e6);
	return 0;
}

/* policy: what the tier runs, since the curve is an LRU tier's (stack distances) */
static int print_mrc(char *out, size_t out_len, const char *tier, const char *policy,
                     const struct kvt_mrc *m, uint64_t size)
{
	double c[5];
	kvt_mrc_curve(m, size, c);
	snprintf(out, out_len,
	         "%s: %llu chunks at capacity (%llu sampled accesses, sampling %.3g %%)\n"
	         "size     0.5x    1x      2x      4x      8x\n"
	         "hit      %.4f  %.4f  %.4f  %.4f  %.4f\n"
	         "(the curve of an LRU tier; this one runs %s: `kvtier sim` replays a trace "
	         "through it)\n",
	         tier, (unsigned long long)size, (unsigned long long)kvt_mrc_samples(m),
	         kvt_mrc_rate(m) * 100, c[0], c[1], c[2], c[3], c[4], policy);
	return 0;
}

/* Appends the policy's own curve (its miniature simulations), if it has sampled anything. */
static void print_own(char *out, size_t out_len, const struct kvt_minisim *m)
{
	if (!m || !kvt_minisim_samples(m))
		return;
	double c[5];
	kvt_minisim_curve(m, c);
	const char *name = kvt_minisim_ops(m)->name;
	size_t used = strlen(out);
	snprintf(out + used, out_len - used,
	         "%-8s %.4f  %.4f  %.4f  %.4f  %.4f\n"
	         "(%s's own curve, by miniature simulation of %llu chunks at 1x: rate %.3g %%, "
	         "%llu sampled accesses, %.1f MiB)\n",
	         name, c[0], c[1], c[2], c[3], c[4], name,
	         (unsigned long long)kvt_minisim_capacity(m), kvt_minisim_rate(m) * 100,
	         (unsigned long long)kvt_minisim_samples(m), kvt_minisim_bytes(m) / 1048576.0);
}

/* The curve of lower tier k, sized by its capacity over its mean record. */
/* Host's (tier < 0) or lower tier tier's curves, and its size in chunks of the mean record
 * it holds: 0 while it holds none. O(tenants): a scrape must not walk the index. */
static uint64_t curves_of(struct kvd *d, int tier, const struct kvt_mrc **m,
                          const struct kvt_minisim **own)
{
	uint64_t chunks = host_chunks(d), used = d->host_used, cap = d->host_cap;
	*m = d->mrc, *own = d->minisim;
	if (tier >= 0) {
		struct kvd_lower *l = &d->lower[tier];
		struct kvt_tier_stats st = {0};
		l->ops->stats(l->t, &st);
		*m = l->mrc, *own = l->minisim;
		chunks = st.chunks, used = st.used_bytes, cap = st.capacity_bytes;
	}
	return chunks && used >= chunks ? cap / (used / chunks) : 0;
}

/* The curve of lower tier k, sized by its capacity over its mean record. */
static int lower_mrc(struct kvd *d, uint32_t k, char *out, size_t out_len)
{
	struct kvd_lower *l = &d->lower[k];
	const struct kvt_mrc *m;
	const struct kvt_minisim *own;
	uint64_t size = curves_of(d, (int)k, &m, &own);
	if (!m || !size || !kvt_mrc_samples(m)) {
		snprintf(out, out_len,
		         "%s: no reads sampled yet (the curve fills as chunks are read "
		         "back from it)",
		         l->ops->name);
		return -EAGAIN;
	}
	const char *pol = kvd_tiers_policy_opt(d, k, "");
	print_mrc(out, out_len, l->ops->name, pol ? pol : "oldest-first reclaim", m, size);
	print_own(out, out_len, own);
	return 0;
}

/* The curves of host (tier < 0) or of lower tier `tier` as stats members. For host first
 * ,"curve_keys_worker":W,"curve_keys_loop":L (keys its curve's worker replayed, and the loop
 * thread in drains); then ,"curve_bytes":B (what the own curve's miniature simulations hold,
 * 0 with none); then, when it has sampled anything,
 * ,"mrc_samples":N,"mrc":[{"size":"0.5x","lru_hit_ratio":H,"policy_hit_ratio":P},..]
 * with P the running policy's own curve (null when it has none: lru, or nothing sampled). */
void kvd_mrc_json(struct kvd *d, int tier, struct kvd_out *o)
{
	static const char *const sizes[5] = {"0.5x", "1x", "2x", "4x", "8x"};
	const struct kvt_mrc *m;
	const struct kvt_minisim *own;
	uint64_t size = curves_of(d, tier, &m, &own);
	double c[5], p[5];
	if (tier < 0)
		kvd_minisim_hold(d, false); /* as it stands: a scrape replays nothing here */
	bool has_own = own && kvt_minisim_samples(own);
	if (has_own)
		kvt_minisim_curve(own, p);
	size_t own_bytes = own ? kvt_minisim_bytes(own) : 0;
	if (tier < 0) { /* the counts under the same hold: one wait for the worker's batch */
		kvd_out(o, ",\"curve_keys_worker\":%llu,\"curve_keys_loop\":%llu",
		        (unsigned long long)d->cw.by_worker, (unsigned long long)d->cw.by_loop);
		kvd_minisim_release(d);
	}
	kvd_out(o, ",\"curve_bytes\":%zu", own_bytes);
	if (!m || !size || !kvt_mrc_samples(m))
		return;
	kvt_mrc_curve(m, size, c);
	kvd_out(o, ",\"mrc_samples\":%llu,\"mrc\":[", (unsigned long long)kvt_mrc_samples(m));
	for (int i = 0; i < 5; i++) {
		kvd_out(o, "%s{\"size\":\"%s\",\"lru_hit_ratio\":%.4f,\"policy_hit_ratio\":",
		        i ? "," : "", sizes[i], c[i]);
		if (has_own)
			kvd_out(o, "%.4f}", p[i]);
		else
			kvd_out(o, "null}");
	}
	kvd_out(o, "]");
}

/* get | set | mrc on a tier below host. */
static int lower_command(struct kvd *d, const char *verb, const char *tier, char *save, char *out,
                         size_t out_len)
{
	int k = kvd_tiers_find(d, tier, out, out_len);
	if (k < 0)
		return k;
	if (!strcmp(verb, "get"))
		return kvd_tiers_policy_get(d, (uint32_t)k, out, out_len);
	if (!strcmp(verb, "mrc"))
		return lower_mrc(d, (uint32_t)k, out, out_len);
	char *name = strtok_r(NULL, " ", &save);
	if (!name) {
		snprintf(out, out_len, "usage: kvtier policy set TIER NAME [defaults] [k=v ...]");
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
		snprintf(out, out_len,
		         "usage: kvtier policy get TIER | kvtier policy set TIER NAME [defaults] "
		         "[k=v ...] | kvtier mrc TIER");
		return -EINVAL;
	}
	if (strcmp(verb, "get") && strcmp(verb, "set") && strcmp(verb, "mrc")) {
		snprintf(out, out_len, "unknown verb '%s'", verb);
		return -EINVAL;
	}
	if (strcmp(verb, "set") && strtok_r(NULL, " ", &save)) { /* "get host nvme" said host's */
		snprintf(out, out_len, "usage: kvtier %s TIER (one tier)",
		         strcmp(verb, "get") ? "mrc" : "policy get");
		return -EINVAL;
	}
	if (strcmp(tier, "host"))
		return lower_command(d, verb, tier, save, out, out_len);
	if (!strcmp(verb, "set")) {
		char *name = strtok_r(NULL, " ", &save), an[32];
		if (!name) {
			snprintf(out, out_len,
			         "usage: kvtier policy set TIER NAME [defaults] [k=v ...]");
			return -EINVAL;
		}
		char *params = save ? save : (char *)"";
		const char *admit = take_admit(params, an, sizeof(an));
		if (admit && kvd_config_check_admit("host.admit", admit, out, out_len))
			return -ENOENT; /* checked first: a refused command changes nothing */
		int rc = kvd_policy_set(d, name, params, out, out_len);
		if (!rc && admit) /* the running filter again: kept as it is */
			rc = kvd_admit_set(d, admit, out, out_len);
		if (rc)
			return rc;
	}
	if (strcmp(verb, "mrc")) {
		char params[KVT_POLICY_PARAMS_MAX];
		kvt_policy_params_str(d->pol_ops, d->pol, params, sizeof(params));
		snprintf(out, out_len, "host %s%s%s", d->pol_ops->name,
		         d->pol_auto ? " (auto)" : "", params);
		if (d->admit)
			snprintf(out + strlen(out), out_len - strlen(out), " admit=%s",
			         kvt_admit_name(d->admit));
		return 0;
	}
	const struct kvt_mrc *m;
	const struct kvt_minisim *own;
	if (d->minisim)
		kvd_minisim_drain(d); /* the curve of every acquire so far */
	uint64_t size = curves_of(d, -1, &m, &own);
	if (!m || !size || !kvt_mrc_samples(m)) {
		snprintf(out, out_len,
		         "host: no accesses sampled yet (the curve fills as chunks are "
		         "read and stored)");
		return -EAGAIN;
	}
	print_mrc(out, out_len, "host", d->pol_ops->name, m, size);
	print_own(out, out_len, own);
	return 0;
}
