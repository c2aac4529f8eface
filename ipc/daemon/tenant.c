/*
 * tenant.c -- who a peer is (tenant.map) and what it may hold in the host tier (tenant.quota).
 *
 * A tenant is named by a 32-bit key: the peer's uid by default, or, when tenant.map names the
 * uid (or one of `@gid`) a tenant NAME, 0x80000000 | a hash of NAME, so that several uids share
 * one tenant and the key is stable across restarts (it is stored in every record header).
 * Quotas go through the policy layer's kvt_quota: guaranteed and maximum host bytes per tenant;
 * a tenant at its maximum evicts its own chunks, and nobody is pushed below its guarantee.
 */
#include "daemon.h"
#include "core/log.h"
#include "core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static uint32_t name_key(const char *name, size_t len)
{
	return 0x80000000u | (uint32_t)(XXH3_64bits(name, len) & 0x7fffffffu);
}

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
			*key = name_key(eq + 1, (size_t)(end - eq - 1));
			return 0;
		}
		p = end;
	}
	return -ENOENT;
}

uint32_t kvd_tenant_key(const struct kvd *d, uint32_t uid, uint32_t gid)
{
	const char *map = kvt_opt_str(&d->opts, KVT_OPT_TENANT_MAP);
	uint32_t key;
	if (!map_find(map, 'u', uid, &key) || !map_find(map, '@', gid, &key))
		return key;
	return uid & 0x7fffffffu;
}

/* Parses tenant.quota and applies the entry for tenant key (index t), if any. */
int kvd_quota_apply(struct kvd *d, uint32_t t, uint32_t key)
{
	const char *list = kvt_opt_str(&d->opts, KVT_OPT_TENANT_QUOTA);
	if (!*list)
		return 0;
	char buf[KVT_OPT_STR_MAX], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *it = strtok_r(buf, ", ", &save); it; it = strtok_r(NULL, ", ", &save)) {
		char *eq = strchr(it, '='), *slash = eq ? strchr(eq, '/') : NULL;
		if (!eq || !slash) {
			kvt_log(KVT_LOG_ERROR, "tenant.quota: '%s' is not WHO=GUARANTEED/MAX", it);
			return -EINVAL;
		}
		*eq = *slash = 0;
		char *num_end;
		unsigned long v = strtoul(it, &num_end, 10);
		uint32_t who = *num_end ? name_key(it, strlen(it)) : (uint32_t)v;
		uint64_t g, m;
		if (kvt_parse_size(eq + 1, &g) || kvt_parse_size(slash + 1, &m) || g > m) {
			kvt_log(KVT_LOG_ERROR, "tenant.quota: bad sizes for %s", it);
			return -EINVAL;
		}
		if (who == key) {
			kvt_log(KVT_LOG_INFO, "tenant %u: host quota %llu guaranteed, %llu maximum",
			        key, (unsigned long long)g, (unsigned long long)m);
			return kvt_quota_set(d->quota, t, g, m);
		}
	}
	return 0;
}
