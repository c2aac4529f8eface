/*
 * tenants.c -- tenant keys from names, and the quota lists of the options (see tenants.h).
 */
#include "tenants.h"
#include "options.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint32_t kvt_tenant_key_of_name(const char *name, size_t len)
{
	return 0x80000000u | (uint32_t)(XXH3_64bits(name, len) & 0x7fffffffu);
}

int kvt_quota_list_each(const char *list, kvt_quota_item_fn fn, void *arg, char *err,
                        size_t err_len)
{
	char buf[KVT_OPT_STR_MAX], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *it = strtok_r(buf, ", ", &save); it; it = strtok_r(NULL, ", ", &save)) {
		char *eq = strchr(it, '='), *slash = eq ? strchr(eq, '/') : NULL;
		uint64_t g, m;
		if (!eq || !slash || eq == it) {
			if (err)
				snprintf(err, err_len, "'%s' is not WHO=GUARANTEED/MAX", it);
			return -EINVAL;
		}
		*eq = *slash = 0;
		const char *bad = kvt_parse_size(eq + 1, &g)      ? eq + 1
		                  : kvt_parse_size(slash + 1, &m) ? slash + 1
		                                                  : NULL;
		if (bad || g > m) { /* "bad sizes for 0" said neither which nor why */
			if (err && bad)
				snprintf(err, err_len,
				         "bad sizes for %s: '%s' is not a size (512MiB)", it, bad);
			else if (err)
				snprintf(
				    err, err_len,
				    "bad sizes for %s: its guarantee %s is above its maximum %s",
				    it, eq + 1, slash + 1);
			return -EINVAL;
		}
		char *num_end;
		errno = 0;
		unsigned long v = strtoul(it, &num_end, 10);
		if (!*num_end && (errno || v > 0x7fffffffu || *it < '0' || *it > '9')) {
			/* was taken modulo 2^31: 4294967296 capped root */
			if (err)
				snprintf(err, err_len, "uid %s is out of range (0 to 2147483647)",
				         it);
			return -ERANGE;
		}
		uint32_t key = *num_end ? kvt_tenant_key_of_name(it, strlen(it)) : (uint32_t)v;
		int rc = fn(arg, key, g, m);
		if (rc)
			return rc;
	}
	return 0;
}

static int no_item(void *arg, uint32_t key, uint64_t g, uint64_t m)
{
	return 0;
}

int kvt_quota_list_check(const char *list, char *err, size_t err_len)
{
	if (!*list || !strcmp(list, "none"))
		return 0;
	return kvt_quota_list_each(list, no_item, NULL, err, err_len);
}
