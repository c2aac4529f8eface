/*
 * config.c -- `kvtier config get [NAME] | set NAME VALUE`: the running daemon's options.
 *
 * get prints the effective values ("name = value", a valid config file); set changes an option
 * marked runtime in core/options_list.h and nothing else -- the others are read once at start and
 * are refused with -EPERM. A value is first checked by the one options table (type, bounds) on a
 * copy, then applied by the part that owns it: a policy switch or its parameters go through the
 * same path as `kvtier policy set` (no chunk dropped), an admission filter is rebuilt, a tier's
 * quota is set by the tier (its accounts carry over), the log
 * level takes effect at once, and timeouts are read where they are used. A refused set changes
 * nothing. "TIER.policy.PARAM VALUE" sets one parameter, "TIER.policy_params 'k=v ...'" several,
 * on the running policy. TIER.policy_params always reads the parameters set since that policy
 * started (config, `policy set`, `config set`), a later value replacing an earlier one
 * (kvd_params_record); `policy set TIER NAME defaults [k=v ...]` builds the policy anew with
 * every parameter at its default first (kvt_policy_set), which is how a parameter is unset.
 * Runs on the loop thread, like every admin message.
 *
 * SIGHUP and `kvtier config reload` reload: the options are read as a start reads them
 * (defaults, --config FILE, KVTIER_* variables, the --set arguments), and each one that differs
 * from the running value is set as `config set` would set it, in the table's order (a policy
 * before its parameters); one read at start only is logged as waiting for a restart. So after a
 * reload every run-time option is what a restart would give it, a value set by `config set`
 * since included: a policy parameter the file no longer sets goes back to its default (the
 * policy is built anew, "defaults", its chunks carried over; reload_words). A reload is all or
 * nothing: every changed value is checked first (check(), the checks apply() makes, changing
 * nothing), and a file with one value refused -- or one a restart would stop at -- changes nothing
 * (before, the others were applied one by one). An option of a lower tier that does not run is
 * taken as a start takes it: recorded, not applied.
 */
#include "daemon.h"
#include "core/log.h"
#include "tiers/tier.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* @return : 0 when v is one of the words in the NULL-terminated list; else -EINVAL, err says. */
static int one_of(const char *opt, const char *v, const char *const *words, char *err,
                  size_t err_len)
{
	for (size_t i = 0; words[i]; i++)
		if (!strcmp(v, words[i]))
			return 0;
	int n = snprintf(err, err_len, "%s: '%s' is not", opt, v);
	for (size_t i = 0; words[i] && n > 0 && (size_t)n < err_len; i++)
		n += snprintf(err + n, err_len - (size_t)n, "%s %s", i ? "," : "", words[i]);
	return -EINVAL;
}

/* log.level: @return : the level, or -EINVAL with err naming the words it takes. */
static int log_level_of(const char *opt, const char *v, char *err, size_t err_len)
{
	static const char *const levels[] = {"error", "warn", "info", "debug", NULL};
	int lvl = kvt_log_level_parse(v);
	return lvl < 0 ? one_of(opt, v, levels, err, err_len) : lvl;
}

int kvd_config_check_admit(const char *opt, const char *v, char *err, size_t err_len)
{
	static const char *const host[] = {"none", "tinylfu", "second_touch", NULL};
	static const char *const lower[] = {"all", "second_touch", NULL};
	return one_of(opt, v, strncmp(opt, "host.", 5) ? lower : host, err, err_len);
}

int kvd_params_record(const char *params, const char *running, const char *name, const char *words,
                      char *rec, char *err, size_t err_len)
{
	const char *rest = kvt_policy_after_defaults(words); /* a fresh start */
	snprintf(rec, KVT_OPT_STR_MAX, "%s", strcmp(running, name) || rest ? "" : params);
	int rc = kvt_params_merge(rec, KVT_OPT_STR_MAX, rest ? rest : words);
	if (rc == -EINVAL)
		snprintf(err, err_len, "policy parameters are name=value words: '%s'", words);
	else if (rc)
		snprintf(err, err_len, "policy parameters: %d bytes or more with '%s' (%s)",
		         KVT_OPT_STR_MAX, words, strerror(-rc));
	return rc;
}

/* The policy of tier (host or a lower tier's index) gets params, or switches to name. */
static int policy_of(struct kvd *d, const char *tier, const char *name, const char *params,
                     char *err, size_t err_len)
{
	char p[KVT_OPT_STR_MAX];
	snprintf(p, sizeof(p), "%s", params);
	if (!name && !p[strspn(p, " ")])
		return 0; /* a blank list sets no parameter (it ended host.policy = auto) */
	if (!strcmp(tier, "host"))
		return kvd_policy_set(d, name ? name : d->pol_ops->name, p, err, err_len);
	int k = kvd_tiers_find(d, tier, err, err_len);
	if (k < 0)
		return k;
	return kvd_tiers_policy_set(d, (uint32_t)k, name, p, err, err_len);
}

/* Applies option id, already checked into *want, to the running daemon; words is what a set of
 * TIER.policy_params or TIER.policy.PARAM gives the running policy. */
static int apply(struct kvd *d, int id, const struct kvt_options *want, const char *words,
                 char *err, size_t err_len)
{
	const char *name = kvt_opt_def(id)->name, *v = want->str[id];
	int rc = 0;
	switch (id) {
	case KVT_OPT_NVME_POLICY:
		if ((rc = policy_of(d, "nvme", v, "", err, err_len)))
			return rc;
		d->opts.set[id] = true;
		return 0;
	case KVT_OPT_HOST_POLICY:
	case KVT_OPT_ROCKSDB_POLICY:
	case KVT_OPT_HOST_POLICY_PARAMS:
	case KVT_OPT_ROCKSDB_POLICY_PARAMS: {
		/* the policy's owner records the name and the parameters set (kvd_params_record) */
		bool host = id == KVT_OPT_HOST_POLICY || id == KVT_OPT_HOST_POLICY_PARAMS;
		bool params =
		    id == KVT_OPT_HOST_POLICY_PARAMS || id == KVT_OPT_ROCKSDB_POLICY_PARAMS;
		if ((rc = policy_of(d, host ? "host" : "rocksdb", params ? NULL : v,
		                    params ? words : "", err, err_len)))
			return rc;
		d->opts.set[id] = true;
		return 0;
	}
	case KVT_OPT_HOST_ADMIT:
		if ((rc = kvd_config_check_admit(name, v, err, err_len)) ||
		    (rc = kvd_admit_set(d, v, err, err_len)))
			return rc;
		break;
	case KVT_OPT_NVME_ADMIT:
	case KVT_OPT_ROCKSDB_ADMIT: {
		if ((rc = kvd_config_check_admit(name, v, err, err_len)))
			return rc;
		int k = kvd_tiers_find(d, id == KVT_OPT_NVME_ADMIT ? "nvme" : "rocksdb", NULL, 0);
		if (k >= 0)
			__atomic_store_n(&d->lower[k].second_touch, !strcmp(v, "second_touch"),
			                 __ATOMIC_RELAXED); /* the worker reads it (cascade) */
		break;
	}
	case KVT_OPT_TENANT_QUOTA:
		if ((rc = kvd_quota_reset(d, v, err, err_len)))
			return rc;
		break;
	case KVT_OPT_CLIENT_ALLOW:
		if ((rc = kvd_client_allow_check(v, err, err_len)))
			return rc;
		break;
	case KVT_OPT_NVME_QUOTA:
	case KVT_OPT_ROCKSDB_QUOTA:
		if ((rc = kvd_tiers_quota_set(d, id == KVT_OPT_NVME_QUOTA ? "nvme" : "rocksdb", v,
		                              err, err_len)))
			return rc;
		break;
	case KVT_OPT_LOG_LEVEL: {
		int lvl = log_level_of(name, v, err, err_len);
		if (lvl < 0)
			return lvl;
		kvt_log_set_level((enum kvt_log_level)lvl);
		break;
	}
	case KVT_OPT_TRACE_FILE:
		if ((rc = kvd_record_open(d, v, err, err_len)))
			return rc;
		break;
	default:
		break; /* read where it is used */
	}
	if (rc)
		return rc;
	d->opts.num[id] = want->num[id];
	memcpy(d->opts.str[id], want->str[id], KVT_OPT_STR_MAX);
	d->opts.set[id] = true;
	if (id == KVT_OPT_CLIENT_ALLOW)
		kvd_conns_enforce_allow(d);
	return 0;
}

/* The lower tier an option belongs to, or NULL. */
static const char *tier_of(int id)
{
	switch (id) {
	case KVT_OPT_NVME_POLICY:
	case KVT_OPT_NVME_ADMIT:
	case KVT_OPT_NVME_QUOTA:
		return "nvme";
	case KVT_OPT_ROCKSDB_POLICY:
	case KVT_OPT_ROCKSDB_POLICY_PARAMS:
	case KVT_OPT_ROCKSDB_ADMIT:
	case KVT_OPT_ROCKSDB_QUOTA:
		return "rocksdb";
	default:
		return NULL;
	}
}

/* Whether apply() would take option id of *want, changing nothing. A lower tier's options are
 * its check op's (the one a start runs); a tier that does not run takes any. */
static int check(struct kvd *d, int id, const struct kvt_options *want, char *err, size_t err_len)
{
	const char *name = kvt_opt_def(id)->name, *v = want->str[id];
	const char *tier = tier_of(id);
	if (tier) {
		int k = kvd_tiers_find(d, tier, NULL, 0);
		if (k >= 0 && d->lower[k].ops->check)
			return d->lower[k].ops->check(want, err, err_len);
		return 0;
	}
	switch (id) {
	case KVT_OPT_HOST_POLICY:
		return strcmp(v, "auto") ? kvt_policy_check(v, "", err, err_len) : 0;
	case KVT_OPT_HOST_POLICY_PARAMS: {
		const char *pol = want->str[KVT_OPT_HOST_POLICY];
		if (!v[strspn(v, " ")])
			return 0; /* sets nothing (policy_of) */
		return kvt_policy_check(strcmp(pol, "auto") ? pol : d->pol_ops->name, v, err,
		                        err_len);
	}
	case KVT_OPT_HOST_ADMIT:
		return kvd_config_check_admit(name, v, err, err_len);
	case KVT_OPT_TENANT_QUOTA:
		return kvd_quota_check(v, err, err_len);
	case KVT_OPT_CLIENT_ALLOW:
		return kvd_client_allow_check(v, err, err_len);
	case KVT_OPT_LOG_LEVEL: {
		int lvl = log_level_of(name, v, err, err_len);
		return lvl < 0 ? lvl : 0;
	}
	case KVT_OPT_TRACE_FILE:
		return kvd_record_check(v, err, err_len);
	default:
		return 0; /* the options table checked it */
	}
}

static int get(struct kvd *d, const char *name, char *out, size_t out_len)
{
	if (!name) {
		FILE *f = fmemopen(out, out_len, "w");
		if (!f)
			return -errno;
		kvt_opts_print(&d->opts, f);
		bool whole = !ferror(f) && ftell(f) < (long)out_len;
		fclose(f);
		out[out_len - 1] = 0;
		return whole ? 0 : -EMSGSIZE;
	}
	int id = kvt_opt_find(name);
	if (id < 0) {
		snprintf(out, out_len, "no option named '%s' (kvtierd --help lists them)", name);
		return -ENOENT;
	}
	const struct kvt_opt_def *def = kvt_opt_def(id);
	if (def->type == KVT_OPT_STR)
		snprintf(out, out_len, "%s = %s", name, d->opts.str[id]);
	else if (def->type == KVT_OPT_BOOL) /* as the whole listing prints it */
		snprintf(out, out_len, "%s = %s", name, d->opts.num[id] ? "true" : "false");
	else
		snprintf(out, out_len, "%s = %llu", name, (unsigned long long)d->opts.num[id]);
	return 0;
}

int kvd_config_command(struct kvd *d, char *cmd, char *out, size_t out_len)
{
	char *save = NULL;
	char *verb = strtok_r(cmd, " ", &save), *name = strtok_r(NULL, " ", &save);
	char *value = save && *save ? save : NULL; /* the rest: a value may hold spaces */
	if (verb && !strcmp(verb, "get") && !value)
		return get(d, name, out, out_len);
	if (verb && !strcmp(verb, "reload") && !name) {
		struct kvd_out o = {out, out_len, 0};
		int rc = kvd_lower_take_all(d); /* a file is taken whole: first every tier's lock */
		return rc ? rc : kvd_config_reload(d, &o);
	}
	if (!verb || strcmp(verb, "set") || !name || !value) {
		snprintf(out, out_len,
		         "usage: kvtier config get [NAME] | kvtier config set NAME "
		         "VALUE | kvtier config reload");
		return -EINVAL;
	}
	int id = kvt_opt_find(name);
	const char *dot = strstr(name, ".policy.");
	if (id < 0 && dot && dot != name) { /* TIER.policy.PARAM: one word of TIER.policy_params */
		char opt[64];
		snprintf(opt, sizeof(opt), "%.*s.policy_params", (int)(dot - name), name);
		id = kvt_opt_find(opt);
	}
	if (id < 0) {
		snprintf(out, out_len, "no option named '%s' (kvtierd --help lists them)", name);
		return -ENOENT;
	}
	if (!kvt_opt_def(id)->runtime) {
		snprintf(out, out_len, "%s is read at start only: set it in the config and restart",
		         name);
		return -EPERM;
	}
	struct kvt_options *want = malloc(sizeof(*want));
	if (!want)
		return -ENOMEM;
	*want = d->opts;
	char words[KVT_OPT_STR_MAX];
	snprintf(words, sizeof(words), "%s%s%s", dot ? dot + 8 : "", dot ? "=" : "", value);
	int rc = kvt_opts_set(want, name, value);
	if (rc) {
		char why[96];
		snprintf(out, out_len, "%s: '%s' is not a valid value (%s)", name, value,
		         kvt_opts_reason(name, rc, why, sizeof(why)));
	} else
		rc = apply(d, id, want, words, out, out_len);
	free(want);
	if (rc)
		return rc;
	kvt_log(KVT_LOG_INFO, "config: %s = %s", name, value);
	return get(d, kvt_opt_def(id)->name, out, out_len);
}

int kvd_options_read(struct kvt_options *o, const char *file, const char *const *sets, int n,
                     char *err, size_t err_len)
{
	kvt_opts_defaults(o);
	if ((file && kvt_opts_load_file(o, file, err, err_len)) ||
	    kvt_opts_load_env(o, err, err_len))
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if (!strchr(sets[i], '=')) {
			snprintf(err, err_len, "--set %s: want NAME=VALUE", sets[i]);
			return -EINVAL;
		}
		int rc = kvt_opts_set_pair(o, sets[i]);
		if (rc) {
			char why[96];
			snprintf(err, err_len, "--set %s: %s", sets[i],
			         kvt_opts_reason(sets[i], rc, why, sizeof(why)));
			return -EINVAL;
		}
	}
	return 0;
}

static bool same_value(const struct kvt_options *a, const struct kvt_options *b, int id)
{
	return kvt_opt_def(id)->type == KVT_OPT_STR ? !strcmp(a->str[id], b->str[id])
	                                            : a->num[id] == b->num[id];
}

/* A reload's line: logged, and told to whoever asked (o, or NULL for a SIGHUP). */
__attribute__((format(printf, 3, 4))) static void say(struct kvd_out *o, enum kvt_log_level lvl,
                                                      const char *fmt, ...)
{
	char line[KVT_OPT_STR_MAX + 768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	kvt_log(lvl, "%s", line);
	if (o)
		kvd_out(o, "%s\n", line);
}

/* What option id of *o reads as in a reload's lines. */
static const char *shown(const struct kvt_options *o, int id, char *buf, size_t len)
{
	if (kvt_opt_def(id)->type == KVT_OPT_STR)
		snprintf(buf, len, "'%s'", o->str[id]);
	else
		snprintf(buf, len, "%llu", (unsigned long long)o->num[id]);
	return buf;
}

/* Whether a reload sets option id from *want: it differs from the running value, and is not an
 * "auto" size resolved again or a blank parameter list. */
static bool changed(const struct kvd *d, const struct kvt_options *want, int id)
{
	const struct kvt_opt_def *def = kvt_opt_def(id);
	if (same_value(want, &d->opts, id))
		return false;
	/* an "auto" size resolved again against today's free space is not a change anyone made:
	 * nvme.bytes keeps its file's size, and rocksdb.bytes moved with other writers */
	if (!def->runtime && !want->set[id] && !d->opts.set[id] && !strcmp(def->def, "auto"))
		return false;
	return true;
}

/* Whether words ("k=v ...") set parameter key (length kl). */
static bool names_key(const char *words, const char *key, size_t kl)
{
	for (const char *w = words; *(w += strspn(w, " ")); w += strcspn(w, " "))
		if (!strncmp(w, key, kl) && w[kl] == '=')
			return true;
	return false;
}

/* The words a reload gives a running policy whose parameters set since it started read running
 * (kvd_params_record), for the file's want: want alone when it names every one of them, else
 * "defaults" first, so that a parameter the file no longer sets goes back to its default, as a
 * restart would have it. */
static void reload_words(const char *running, const char *want, char *out, size_t len)
{
	bool all = true;
	for (const char *w = running; all && *(w += strspn(w, " ")); w += strcspn(w, " "))
		all = names_key(want, w, strcspn(w, "="));
	snprintf(out, len, "%s%s", all ? "" : KVT_POLICY_DEFAULTS " ", want);
}

void kvd_config_reload_owed(struct kvd *d)
{
	if (!d->reload_owed_ns)
		return;
	if (!kvd_lower_take_all(d)) {
		d->reload_owed_ns = 0;
		kvd_config_reload(d, NULL);
		return;
	}
	struct kvd_lower *l = &d->lower[d->lower_busy];
	uint64_t wait_ns = kvt_opt_u64(&d->opts, KVT_OPT_TIERS_COMMAND_WAIT_MS) * 1000000ull;
	if (kvt_now_ns() - d->reload_owed_ns >= wait_ns) {
		d->reload_owed_ns = 0;
		atomic_store_explicit(&l->wanted_until_ns, 0, memory_order_relaxed);
		kvt_log(KVT_LOG_WARN,
		        "config reload (SIGHUP) not run: the %s tier was busy with I/O for "
		        "tiers.command_wait_ms (%llu ms); nothing changed, send SIGHUP again",
		        l->ops->name, (unsigned long long)(wait_ns / 1000000));
		return;
	}
	/* wanted until the next look at the latest (the timer's 100 ms), not only KVD_WANT_NS */
	kvd_lower_want(l, d->reload_owed_ns + wait_ns);
}

int kvd_config_reload(struct kvd *d, struct kvd_out *o)
{
	struct kvt_options *want = malloc(sizeof(*want)), *one = malloc(sizeof(*one));
	char err[512], v[KVT_OPT_STR_MAX + 32];
	const char *from = d->config_file ? d->config_file : "(no --config file)";
	int rc = -ENOMEM, applied = 0, refused = 0, later = 0;
	if (!want || !one) {
		say(o, KVT_LOG_ERROR, "config reload: out of memory; nothing changed");
		goto out;
	}
	if ((rc = kvd_options_read(want, d->config_file, d->arg_sets, d->n_arg_sets, err,
	                           sizeof(err)))) {
		say(o, KVT_LOG_ERROR, "config reload: %s; nothing changed", err);
		goto out;
	}
	kvt_opts_resolve(want, d->data_dir);
	/* first every check, then every change: a file is taken whole or not at all */
	for (int id = 0; id < KVT_OPT__COUNT; id++) {
		const struct kvt_opt_def *def = kvt_opt_def(id);
		if (!changed(d, want, id))
			continue;
		if (!def->runtime) {
			say(o, KVT_LOG_WARN,
			    "config reload: %s = %s is read at start only: restart to apply it",
			    def->name, shown(want, id, v, sizeof(v)));
			later++;
		} else if (check(d, id, want, err, sizeof(err))) {
			say(o, KVT_LOG_WARN, "config reload: %s = %s refused: %s", def->name,
			    shown(want, id, v, sizeof(v)), err);
			refused++;
		}
	}
	/* what a restart would refuse, said now rather than after the operator restarts */
	for (uint32_t k = 0; later && k < d->n_lower; k++)
		if (d->lower[k].ops->check && d->lower[k].ops->check(want, err, sizeof(err))) {
			say(o, KVT_LOG_WARN, "config reload: a restart would stop: %s", err);
			refused++;
		}
	if (refused) {
		say(o, KVT_LOG_WARN, "config reload from %s: %d refused; nothing changed", from,
		    refused);
		rc = -EINVAL;
		goto out;
	}
	for (int id = 0; id < KVT_OPT__COUNT; id++) {
		const struct kvt_opt_def *def = kvt_opt_def(id);
		if (!def->runtime || !changed(d, want, id))
			continue;
		*one = d->opts;
		one->num[id] = want->num[id];
		memcpy(one->str[id], want->str[id], KVT_OPT_STR_MAX);
		const char *tier = tier_of(id);
		if (tier && kvd_tiers_find(d, tier, NULL, 0) < 0) { /* as a start takes it */
			d->opts = *one;
			d->opts.set[id] = true;
			say(o, KVT_LOG_INFO, "config: %s = %s (reload; no %s tier runs)", def->name,
			    shown(want, id, v, sizeof(v)), tier);
			applied++;
			continue;
		}
		bool params =
		    id == KVT_OPT_HOST_POLICY_PARAMS || id == KVT_OPT_ROCKSDB_POLICY_PARAMS;
		char words[KVT_OPT_STR_MAX + sizeof(KVT_POLICY_DEFAULTS)];
		if (params)
			reload_words(d->opts.str[id], want->str[id], words, sizeof(words));
		if ((rc = apply(d, id, one, params ? words : want->str[id], err,
		                sizeof(err)))) { /* checked: rare */
			say(o, KVT_LOG_WARN, "config reload: %s = %s failed: %s", def->name,
			    shown(want, id, v, sizeof(v)), err);
			refused++;
		} else {
			if (params) /* as the file has them, in its order */
				memcpy(d->opts.str[id], want->str[id], KVT_OPT_STR_MAX);
			say(o, KVT_LOG_INFO, "config: %s = %s (reload)", def->name,
			    shown(want, id, v, sizeof(v)));
			applied++;
		}
	}
	say(o, KVT_LOG_INFO, "config reload from %s: %d applied, %d failed, %d wait for a restart",
	    from, applied, refused, later);
	rc = refused ? -EIO : 0;
out:
	free(want);
	free(one);
	return rc;
}
