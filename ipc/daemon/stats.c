/* stats.c -- the daemon's counters as one JSON object (kvtier stats --json, and the CLI table). */
#include "daemon.h"
#include "policy/admit.h"
#include "policy/quota.h"

#include <stdarg.h>
#include <errno.h>
#include <stdio.h>

void kvd_out(struct kvd_out *o, const char *fmt, ...)
{
	if (o->pos >= o->len)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->buf + o->pos, o->len - o->pos, fmt, ap);
	va_end(ap);
	o->pos += n > 0 ? (size_t)n : 0;
}

/* Each tenant's share of the host tier and its quota (tenant.quota), the first
 * KVD_STATS_TENANTS of them: what an operator needs to set the quotas. */
static void tenant_stats(const struct kvd *d, struct kvd_out *o)
{
	kvd_out(o, "\"tenant_stats\":[");
	for (uint32_t i = 0; i < d->n_tenants && i < KVD_STATS_TENANTS; i++) {
		const struct kvd_tenant *t = &d->tenants[i];
		uint64_t g = 0, m = KVT_QUOTA_UNLIMITED;
		if (d->quota)
			kvt_quota_limits(d->quota, i, &g, &m);
		kvd_out(
		    o,
		    "%s{\"tenant\":%u,\"used_bytes\":%llu,\"chunks\":%llu,\"hits\":%llu,"
		    "\"misses\":%llu,\"evictions\":%llu,\"guaranteed_bytes\":%llu,\"max_bytes\":",
		    i ? "," : "", t->key, (unsigned long long)t->used_bytes,
		    (unsigned long long)t->chunks, (unsigned long long)t->hits,
		    (unsigned long long)t->misses, (unsigned long long)t->evictions,
		    (unsigned long long)g);
		if (m == KVT_QUOTA_UNLIMITED)
			kvd_out(o, "null}");
		else
			kvd_out(o, "%llu}", (unsigned long long)m);
	}
	kvd_out(o, "],");
}

int kvd_stats_json(struct kvd *d, char *buf, size_t len)
{
	struct kvd_out o = {buf, len, 0};
	kvd_keep_expire(d); /* kept_chunks counts the keeps still running */
	uint64_t chunks = d->idx.used;
	/* the policy says what it holds (conv's history is most of its cost); host.admit's sketch
	 */
	uint64_t pol = d->pol_ops->memory_bytes ? d->pol_ops->memory_bytes(d->pol)
	                                        : (uint64_t)d->idx.cap * 9 /* LRU's arrays */;
	pol += d->admit ? kvt_admit_bytes(d->admit) : 0;
	pol += (uint64_t)d->keeps.cap * sizeof(*d->keeps.until) +
	       d->keeps.hcap * sizeof(*d->keeps.heap); /* keep.c, once keeps are used */
	uint64_t meta = kvd_index_bytes(&d->idx) + pol;
	kvd_out(&o, "{\"version\":\"%d.%d.%d\",\"protocol\":%d,", KVT_VERSION_MAJOR,
	        KVT_VERSION_MINOR, KVT_VERSION_PATCH, KVT_PROTO_MAJOR);
	kvd_out(&o,
	        "\"tiers\":[{\"name\":\"host\",\"policy\":\"%s\",\"policy_bytes\":%llu,"
	        "\"capacity_bytes\":%llu,"
	        "\"used_bytes\":%llu,\"dirty_bytes\":%llu,\"chunks\":%llu,\"hits\":%llu,"
	        "\"misses\":%llu,\"evictions\":%llu,\"told_evictions\":%llu,\"puts\":%llu,"
	        "\"put_bytes\":%llu,\"enospc\":%llu",
	        d->pol_ops->name, (unsigned long long)pol, (unsigned long long)d->host_cap,
	        (unsigned long long)d->host_used, (unsigned long long)d->dirty_bytes,
	        (unsigned long long)chunks, (unsigned long long)d->st.hits,
	        (unsigned long long)d->st.misses, (unsigned long long)d->st.evictions,
	        (unsigned long long)d->st.told_evictions, (unsigned long long)d->st.puts,
	        (unsigned long long)d->st.put_bytes, (unsigned long long)d->st.enospc);
	kvd_mrc_json(d, -1, &o);
	kvd_out(&o, "}");
	kvd_tiers_stats_json(d, o.buf, o.len, &o.pos);
	kvd_out(&o, "],");
	kvd_out(&o,
	        "\"demoted\":%llu,\"promoted\":%llu,\"demote_failed\":%llu,"
	        "\"promote_failed\":%llu,\"promote_resent\":%llu,\"lower_dropped\":%llu,"
	        "\"lower_moved\":%llu,\"recovered\":%llu,\"eagain\":%llu,\"not_admitted\":%llu,"
	        "\"cascaded\":%llu,\"cascade_failed\":%llu,\"puts_cut\":%llu,"
	        "\"put_present\":%llu,\"puts_parked\":%llu,\"victims_refused\":%llu,"
	        "\"commands_parked\":%llu,\"commands_busy\":%llu,",
	        (unsigned long long)d->st.demoted, (unsigned long long)d->st.promoted,
	        (unsigned long long)d->st.demote_failed, (unsigned long long)d->st.promote_failed,
	        (unsigned long long)d->st.promote_resent, (unsigned long long)d->st.lower_dropped,
	        (unsigned long long)d->st.lower_moved, (unsigned long long)d->st.recovered,
	        (unsigned long long)d->st.eagain, (unsigned long long)d->st.not_admitted,
	        (unsigned long long)d->st.cascaded, (unsigned long long)d->st.cascade_failed,
	        (unsigned long long)d->st.puts_cut, (unsigned long long)d->st.put_present,
	        (unsigned long long)d->st.puts_parked, (unsigned long long)d->st.victims_refused,
	        (unsigned long long)d->st.commands_parked, (unsigned long long)d->st.commands_busy);
	kvd_out(&o, "\"leases\":%u,\"leases_granted\":%llu,\"leases_revoked\":%llu,\"clients\":%u,",
	        d->n_leases, (unsigned long long)d->st.leases_granted,
	        (unsigned long long)d->st.leases_revoked, d->n_conns);
	kvd_out(&o,
	        "\"tenants\":%u,\"namespaces\":%u,\"lookups\":%llu,\"deletes\":%llu,"
	        "\"done_hints\":%llu,\"keeps\":%llu,\"keep_refused\":%llu,\"kept_chunks\":%u,"
	        "\"kept_bytes\":%llu,\"keep_pending\":%u,",
	        d->n_tenants, d->n_nss, (unsigned long long)d->st.lookups,
	        (unsigned long long)d->st.deletes, (unsigned long long)d->st.done_hints,
	        (unsigned long long)d->st.keeps, (unsigned long long)d->st.keep_refused,
	        d->keeps.chunks, (unsigned long long)d->keeps.bytes, d->keeps.pending_chunks);
	kvd_out(&o,
	        "\"trace_recording\":%d,\"trace_requests\":%llu,\"trace_bytes\":%llu,"
	        "\"trace_stopped\":%d,",
	        d->rec.fd >= 0, (unsigned long long)d->rec.requests,
	        (unsigned long long)(d->rec.file_bytes + d->rec.len), -d->rec.stopped);
	tenant_stats(d, &o);
	kvd_latency_json(d, &o);
	kvd_out(&o,
	        "\"corruptions\":%llu,\"protocol_errors\":%llu,\"clients_refused\":%llu,"
	        "\"index_bytes\":%llu,"
	        "\"index_bytes_per_chunk\":%llu,\"metrics_port\":%u,\"draining\":%s}",
	        (unsigned long long)d->st.corruptions, (unsigned long long)d->st.protocol_errors,
	        (unsigned long long)d->st.clients_refused, (unsigned long long)meta,
	        (unsigned long long)(chunks ? meta / chunks : 0),
	        d->metrics_fd >= 0 ? d->metrics_port : 0u, d->draining ? "true" : "false");
	if (o.pos >= len)
		return -ENOBUFS;
	return (int)o.pos;
}
