/* stats.c -- kvtier stats: the daemon's JSON as is (--json), or a short table. */
#include "cli.h"
#include "ipc/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long num(const char *json, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(json, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

int cli_stats(kvt_client_t *c, int argc, char **argv)
{
	static char json[KVT_MSG_MAX];
	int rc = kvt__client_simple(c, KVT_MSG_STATS, NULL, json, sizeof(json));
	if (rc < 0)
		return rc;
	if (argc > 1 && !strcmp(argv[1], "--json")) {
		printf("%s\n", json);
		return 0;
	}
	const char *tiers = strstr(json, "\"tiers\":");
	printf("%-8s %-11s %14s %14s %10s %10s %10s %10s\n", "tier", "policy", "capacity", "used",
	       "chunks", "hits", "misses", "evictions");
	for (const char *t = tiers; t && (t = strstr(t, "{\"name\":\"")); t++) {
		char name[32] = "", pol[32] = "-";
		const char *pp = strstr(t, "\"policy\":\"");
		sscanf(t + 9, "%31[^\"]", name);
		if (pp && pp < strstr(t + 1, "}"))
			sscanf(pp + 10, "%31[^\"]", pol);
		printf("%-8s %-11s %14lld %14lld %10lld %10lld %10lld %10lld\n", name, pol,
		       num(t, "capacity_bytes"), num(t, "used_bytes"), num(t, "chunks"),
		       num(t, "hits"), num(t, "misses"), num(t, "evictions"));
	}
	printf("leases %lld (revoked %lld), clients %lld, tenants %lld, corruptions %lld, "
	       "protocol errors %lld\n",
	       num(json, "leases"), num(json, "leases_revoked"), num(json, "clients"),
	       num(json, "tenants"), num(json, "corruptions"), num(json, "protocol_errors"));
	return 0;
}
