/* stats.c -- kvtier stats: the daemon's JSON as is (--json), or a short table. */
#include "cli.h"
#include "core/util.h"
#include "ipc/proto.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long long cli_json_num(const char *json, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(json, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

int cli_json_str(const char *obj, const char *key, char *out, size_t len)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	const char *p = strstr(obj, pat);
	if (!p)
		return -ENOENT;
	p += strlen(pat);
	snprintf(out, len, "%.*s", (int)strcspn(p, "\""), p);
	return 0;
}

bool cli_json_tier(const char *json, const char **t, const char **end)
{
	static const char tier[] = "{\"name\":\"";
	const char *stop = strstr(json, "\"demoted\":");
	const char *from = *t ? *t + 1 : strstr(json, "\"tiers\":[");
	const char *next = from ? strstr(from, tier) : NULL;
	if (!next || (stop && next > stop))
		return false;
	const char *after = strstr(next + 1, tier);
	*t = next;
	*end = after && (!stop || after < stop) ? after : stop ? stop : next + strlen(next);
	return true;
}

/* bytes for a reader (--json has them exact): "-" for -1 (absent, or no maximum). */
static const char *size_of(long long bytes, char buf[24])
{
	return bytes < 0 ? "-" : kvt_fmt_bytes((uint64_t)bytes, buf, 24);
}

/* A tenant object's max_bytes: -1 for null (no maximum). */
static long long max_of(const char *t)
{
	const char *p = strstr(t, "\"max_bytes\":");
	return p && strncmp(p + 12, "null", 4) ? strtoll(p + 12, NULL, 10) : -1;
}

/* The tenants' accounts of each lower tier that keeps them (TIER.quota). */
static void lower_tenants(const char *tiers, const char *tiers_end)
{
	for (const char *t = tiers; t && (t = strstr(t, "{\"name\":\"")) && t < tiers_end; t++) {
		const char *next = strstr(t + 1, "{\"name\":\""),
		           *ts = strstr(t, "\"tenant_usage\":[");
		if (!ts || (next && ts > next) || ts > tiers_end)
			continue;
		char name[32] = "";
		sscanf(t + 9, "%31[^\"]", name);
		const char *end = strchr(ts, ']');
		printf("%-10s %14s %14s %14s\n", "tenant", name, "guaranteed", "max");
		for (const char *e = ts; (e = strstr(e + 1, "{\"tenant\":")) && e < end;) {
			char used[24], g[24], mx[24];
			printf("%-10lld %14s %14s %14s\n", cli_json_num(e, "tenant"),
			       size_of(cli_json_num(e, "used_bytes"), used),
			       size_of(cli_json_num(e, "guaranteed_bytes"), g),
			       size_of(max_of(e), mx));
		}
	}
}

const char *cli_stats_misshapen(int argc, char **argv)
{
	return argc == 1 || (argc == 2 && !strcmp(argv[1], "--json"))
	           ? NULL
	           : "usage: kvtier stats [--json]";
}

int cli_stats(kvt_client_t *c, int argc, char **argv)
{
	static char json[KVT_MSG_MAX];
	bool as_json = argc == 2; /* --json: cli_stats_misshapen took nothing else */
	int rc = kvt__client_simple(c, KVT_MSG_STATS, NULL, json, sizeof(json));
	if (rc < 0)
		return rc;
	if (as_json) {
		printf("%s\n", json);
		return 0;
	}
	const char *tiers = strstr(json, "\"tiers\":");
	/* sizes for a reader (--json has the bytes), the fill and hit ratio worked out */
	printf("%-8s %-11s %10s %10s %5s %10s %10s %10s %6s %10s\n", "tier", "policy", "capacity",
	       "used", "fill", "chunks", "hits", "misses", "hit", "evictions");
	for (const char *t = tiers; t && (t = strstr(t, "{\"name\":\"")); t++) {
		char name[32] = "", pol[32] = "-", cap[24], used[24], fill[8] = "-", hit[8] = "-";
		const char *pp = strstr(t, "\"policy\":\"");
		sscanf(t + 9, "%31[^\"]", name);
		if (pp && pp < strstr(t + 1, "}"))
			sscanf(pp + 10, "%31[^\"]", pol);
		long long cb = cli_json_num(t, "capacity_bytes"), u = cli_json_num(t, "used_bytes");
		long long h = cli_json_num(t, "hits"), m = cli_json_num(t, "misses");
		double pct = cb > 0 && u >= 0 ? 100.0 * (double)u / (double)cb : -1;
		if (pct >= 0)
			snprintf(fill, sizeof(fill), u && pct < 0.5 ? "<1%%" : "%.0f%%", pct);
		if (h >= 0 && m >= 0 && h + m > 0)
			snprintf(hit, sizeof(hit), "%.3f", (double)h / (double)(h + m));
		printf("%-8s %-11s %10s %10s %5s %10lld %10lld %10lld %6s %10lld\n", name, pol,
		       kvt_fmt_bytes(cb < 0 ? 0 : (uint64_t)cb, cap, sizeof(cap)),
		       kvt_fmt_bytes(u < 0 ? 0 : (uint64_t)u, used, sizeof(used)), fill,
		       cli_json_num(t, "chunks"), h, m, hit, cli_json_num(t, "evictions"));
	}
	char b[24];
	if (strstr(json, "\"name\":\"nvme\"") || strstr(json, "\"name\":\"rocksdb\""))
		printf("below host: %s waiting for demotion; demoted %lld, promoted %lld, "
		       "cascaded %lld; failed: demote %lld, promote %lld, cascade %lld\n",
		       size_of(cli_json_num(json, "dirty_bytes"), b), cli_json_num(json, "demoted"),
		       cli_json_num(json, "promoted"), cli_json_num(json, "cascaded"),
		       cli_json_num(json, "demote_failed"), cli_json_num(json, "promote_failed"),
		       cli_json_num(json, "cascade_failed"));
	const char *nv = strstr(json, "{\"name\":\"nvme\"");
	if (nv)
		printf("nvme engine: %lld I/Os queued, %lld reaped, slowest %lld us, %lld not from "
		       "registered buffers, books wrong %lld, %lld reads beside writes\n",
		       cli_json_num(nv, "ios_queued"), cli_json_num(nv, "ios_reaped"),
		       cli_json_num(nv, "io_max_us"), cli_json_num(nv, "plain_ios"),
		       cli_json_num(nv, "io_books_wrong"), cli_json_num(nv, "reads_beside_writes"));
	printf("leases %lld (revoked %lld), clients %lld, tenants %lld, corruptions %lld, "
	       "protocol errors %lld\n",
	       cli_json_num(json, "leases"), cli_json_num(json, "leases_revoked"),
	       cli_json_num(json, "clients"), cli_json_num(json, "tenants"),
	       cli_json_num(json, "corruptions"), cli_json_num(json, "protocol_errors"));
	printf("engine hints: kept %lld chunks (%s), %lld on their way up; keeps %lld, "
	       "refused %lld; done %lld\n",
	       cli_json_num(json, "kept_chunks"), size_of(cli_json_num(json, "kept_bytes"), b),
	       cli_json_num(json, "keep_pending"), cli_json_num(json, "keeps"),
	       cli_json_num(json, "keep_refused"), cli_json_num(json, "done_hints"));
	long long recording = cli_json_num(json, "trace_recording"),
	          why = cli_json_num(json, "trace_stopped");
	if (recording > 0 || why > 0)
		printf("trace.file: %s, %lld requests written, %s%s%s\n",
		       recording > 0 ? "recording" : "stopped",
		       cli_json_num(json, "trace_requests"),
		       size_of(cli_json_num(json, "trace_bytes"), b), why > 0 ? ": " : "",
		       why > 0 ? strerror((int)why) : "");
	/* requests' latency since the start (bucket bounds: an upper estimate) */
	printf("latency p50 / p99 / max (us):");
	const char *ops[] = {"acquire", "put", "lookup", "delete"};
	for (int o = 0; o < 4; o++) {
		char pat[48];
		snprintf(pat, sizeof(pat), "{\"op\":\"%s\"", ops[o]);
		const char *l = strstr(json, pat);
		if (l)
			printf("%s %s %lld / %lld / %lld (%lld)", o ? "," : "", ops[o],
			       cli_json_num(l, "p50_us"), cli_json_num(l, "p99_us"),
			       cli_json_num(l, "max_us"), cli_json_num(l, "count"));
	}
	printf("\n");
	/* the host tier per tenant, when there is more than one or a quota */
	const char *ts = strstr(json, "\"tenant_stats\":["), *end = ts ? strchr(ts, ']') : NULL;
	lower_tenants(tiers, ts ? ts : json + strlen(json));
	bool quota = false;
	for (const char *t = ts; t && (t = strstr(t + 1, "{\"tenant\":")) && t < end;)
		quota = quota || cli_json_num(t, "guaranteed_bytes") > 0 || max_of(t) >= 0;
	if (!ts || (cli_json_num(json, "tenants") < 2 && !quota))
		return 0;
	printf("%-10s %14s %10s %10s %10s %10s %14s %14s\n", "tenant", "host used", "chunks",
	       "hits", "misses", "evictions", "guaranteed", "max");
	for (const char *t = ts; (t = strstr(t + 1, "{\"tenant\":")) && t < end;) {
		char used[24], g[24], mx[24];
		printf("%-10lld %14s %10lld %10lld %10lld %10lld %14s %14s\n",
		       cli_json_num(t, "tenant"), size_of(cli_json_num(t, "used_bytes"), used),
		       cli_json_num(t, "chunks"), cli_json_num(t, "hits"),
		       cli_json_num(t, "misses"), cli_json_num(t, "evictions"),
		       size_of(cli_json_num(t, "guaranteed_bytes"), g), size_of(max_of(t), mx));
	}
	return 0;
}
