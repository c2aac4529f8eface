/*
 * tenant.c -- who a peer is (tenant.map), whether it may attach (client.allow), and what it may
 * hold in the host tier (tenant.quota).
 *
 * client.allow names the uids and @gids that may attach: a peer is named by its uid, its primary
 * gid (SO_PEERCRED) or one of its supplementary groups (SO_PEERGROUPS, as a file's group mode
 * would see it); "all" (the default) leaves that to the socket's file mode. Root and the
 * daemon's own uid always may, so an operator cannot lock the CLI out. tenant.map's @gid is the
 * primary gid alone: a tenant must not depend on which of its groups is listed first.
 *
 * A tenant is named by a 32-bit key: the peer's uid by default, or, when tenant.map names the
 * uid (or one of `@gid`) a tenant NAME, 0x80000000 | a hash of NAME, so that several uids share
 * one tenant and the key is stable across restarts (it is stored in every record header).
 * Quotas go through the policy layer's kvt_quota: guaranteed and maximum host bytes per tenant;
 * a tenant at its maximum evicts its own chunks, and nobody is pushed below its guarantee.
 * tenant.quota may change at run time (kvd_quota_reset): every tenant's limits are set again
 * from the new list, its bytes carry over, and a tenant now past its maximum gives back the
 * excess as it puts (its own chunks go first), not at once.
 */
#include "daemon.h"
#include "core/log.h"
#include "core/tenants.h"
#include "core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Finds "WHO=NAME" in a comma list where WHO is a number or @number. */
static int map_find(const char *list, char kind, uint32_t id, uint32_t *key)
{
	const char *p = list;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		if (!eq || eq > end)
			break;
		bool is_gid = *p == '@';
		char *num_end;
		unsigned long v = strtoul(p + is_gid, &num_end, 10);
		if (num_end == eq && (kind == '@') == is_gid && v == id) {
			*key = kvt_tenant_key_of_name(eq + 1, (size_t)(end - eq - 1));
			return 0;
		}
		p = end;
	}
	return -ENOENT;
}

int kvd_tenant_map_check(const char *list, char *err, size_t err_len)
{
	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (!*p)
			break;
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		char *num_end;
		const char *num = p + (*p == '@');
		if (!eq || eq > end || eq + 1 == end || *num < '0' || *num > '9' ||
		    (strtoul(num, &num_end, 10), num_end != eq)) {
			snprintf(err, err_len, "tenant.map: '%.*s' is not UID=NAME or @GID=NAME",
			         (int)(end - p), p);
			return -EINVAL;
		}
		p = end;
	}
	return 0;
}

static bool in_groups(const struct kvd_conn *c, unsigned long gid)
{
	if (gid == c->gid)
		return true;
	for (uint32_t i = 0; i < c->n_groups; i++)
		if (gid == c->groups[i])
			return true;
	return false;
}

/* Walks client.allow ("UID" or "@GID" items, comma- or space-separated).
 * @return : 1 when c's peer is named (c NULL: checking, the whole list is read), 0 when not,
 *           -EINVAL (err says) at a malformed item. */
static int allow_walk(const char *list, const struct kvd_conn *c, char *err, size_t err_len)
{
	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (!*p)
			break;
		size_t n = strcspn(p, " ,");
		bool is_gid = *p == '@';
		const char *num = p + is_gid;
		char *end = NULL;
		errno = 0;
		unsigned long v = *num >= '0' && *num <= '9' ? strtoul(num, &end, 10) : 0;
		if (end != p + n || errno || v > UINT32_MAX) {
			snprintf(err, err_len, "client.allow: '%.*s' is not UID or @GID", (int)n,
			         p);
			return -EINVAL;
		}
		if (c && (is_gid ? in_groups(c, v) : v == c->uid))
			return 1;
		p += n;
	}
	return 0;
}

int kvd_client_allow_check(const char *list, char *err, size_t err_len)
{
	return strcmp(list, "all") ? allow_walk(list, NULL, err, err_len) : 0;
}

bool kvd_client_allowed(const struct kvd *d, const struct kvd_conn *c)
{
	const char *list = kvt_opt_str(&d->opts, KVT_OPT_CLIENT_ALLOW);
	char err[KVT_OPT_STR_MAX + 64];
	return !*list || !strcmp(list, "all") || c->uid == 0 || c->uid == geteuid() ||
	       allow_walk(list, c, err, sizeof(err)) == 1;
}

uint32_t kvd_tenant_key(const struct kvd *d, uint32_t uid, uint32_t gid)
{
	const char *map = kvt_opt_str(&d->opts, KVT_OPT_TENANT_MAP);
	uint32_t key;
	if (!map_find(map, 'u', uid, &key) || !map_find(map, '@', gid, &key))
		return key;
	return kvt_tenant_key_of_uid(uid);
}

struct quota_for {
	struct kvd *d;
	uint32_t t, key;
};

static int apply_item(void *arg, uint32_t key, uint64_t g, uint64_t m)
{
	struct quota_for *q = arg;
	if (key != q->key)
		return 0;
	kvt_log(KVT_LOG_INFO, "tenant %u: host quota %llu guaranteed, %llu maximum", key,
	        (unsigned long long)g, (unsigned long long)m);
	int rc = kvt_quota_set(q->d->quota, q->t, g, m);
	return rc ? rc : 1; /* found: stop the walk */
}

/* Applies list's entry for tenant key (index t), if any. */
static int apply_list(struct kvd *d, const char *list, uint32_t t, uint32_t key)
{
	struct quota_for q = {d, t, key};
	char err[KVT_OPT_STR_MAX + 64];
	int rc = kvt_quota_list_each(list, apply_item, &q, err, sizeof(err));
	if (rc == -EINVAL)
		kvt_log(KVT_LOG_ERROR, "tenant.quota: %s", err);
	return rc < 0 ? rc : 0;
}

/* Parses tenant.quota and applies the entry for tenant key (index t), if any. */
int kvd_quota_apply(struct kvd *d, uint32_t t, uint32_t key)
{
	const char *list = kvt_opt_str(&d->opts, KVT_OPT_TENANT_QUOTA);
	return apply_list(d, strcmp(list, "none") ? list : "", t, key);
}

static int check_item(void *arg, uint32_t key, uint64_t g, uint64_t m)
{
	(void)arg, (void)key, (void)g, (void)m;
	return 0;
}

int kvd_quota_check(const char *list, char *err, size_t err_len)
{
	char why[KVT_OPT_STR_MAX + 64];
	if (!strcmp(list, "none") || !kvt_quota_list_each(list, check_item, NULL, why, sizeof(why)))
		return 0;
	snprintf(err, err_len, "tenant.quota: %s", why);
	return -EINVAL;
}

int kvd_quota_reset(struct kvd *d, const char *list, char *err, size_t err_len)
{
	int rc = kvd_quota_check(list, err, err_len);
	if (rc)
		return rc;
	if (!strcmp(list, "none"))
		list = "";
	if (!*list) { /* off: evictions no longer go through a quota */
		kvt_quota_destroy(d->quota);
		d->quota = NULL;
		return 0;
	}
	if (!d->quota) { /* the accounts so far, as the quota would have kept them */
		rc = kvt_quota_create(&d->quota);
		for (uint32_t t = 0; !rc && t < d->n_tenants; t++)
			rc = kvt_quota_charge(d->quota, t, (int64_t)d->tenants[t].used_bytes);
		if (rc) {
			kvt_quota_destroy(d->quota);
			d->quota = NULL;
			snprintf(err, err_len, "tenant.quota: %s", strerror(-rc));
			return rc;
		}
	}
	for (uint32_t t = 0; t < d->n_tenants; t++) {
		rc = kvt_quota_set(d->quota, t, 0, KVT_QUOTA_UNLIMITED);
		if (!rc)
			rc = apply_list(d, list, t, d->tenants[t].key);
		if (rc) { /* memory only: the list was checked; the rest keep no limit */
			snprintf(err, err_len, "tenant.quota: %s", strerror(-rc));
			return rc;
		}
	}
	return 0;
}
