/*
 * inspect.c -- what the daemon holds, for an operator (kvtier inspect), and dropping it
 * (kvtier flush).
 *
 *   inspect              every namespace: tenant, chunk size, chunks and where they are
 *   inspect NS           a namespace's chunks, shallowest first (at most INSPECT_LIST)
 *   inspect NS KEY       one chunk: tenant, depth, parent, size, sequence, each tier's copy,
 *                        leases and tier jobs on it
 *   flush all | NS | tenant UID   drops those chunks from every tier, as kvt_delete does
 *   check                the daemon's books against its index (check.c)
 *
 * Ids are 32 hex digits, high half first (docs/keys.md). A caller that is not root or kvtierd's
 * uid sees its own tenant's chunks only (invariant 6) and may not flush. Both walk the whole
 * index on the loop: about a millisecond per 100,000 chunks, an operator's command, not an
 * engine's.
 */
#include "daemon.h"
#include "core/log.h"
#include "tiers/tier.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INSPECT_LIST 64

static void hex(kvt_id_t id, char out[33])
{
	snprintf(out, 33, "%016" PRIx64 "%016" PRIx64, id.w[1], id.w[0]);
}

/* 32 hex digits into an id. @return : 0, -EINVAL. */
static int parse_id(const char *s, kvt_id_t *id)
{
	if (!s || strlen(s) != 32 || strspn(s, "0123456789abcdefABCDEF") != 32)
		return -EINVAL;
	char hi[17], lo[17];
	memcpy(hi, s, 16);
	memcpy(lo, s + 16, 16);
	hi[16] = lo[16] = 0;
	id->w[1] = strtoull(hi, NULL, 16);
	id->w[0] = strtoull(lo, NULL, 16);
	return 0;
}

static bool visible(const struct kvd_entry *e, uint32_t tenant)
{
	return e->state == KVD_PUBLISHED && (tenant == KVD_NIL || e->tenant == tenant);
}

static void where(const struct kvd *d, const struct kvd_entry *e, char *out, size_t len)
{
	size_t n = (size_t)snprintf(out, len, "%s", e->where & KVD_AT_HOST ? "host" : "");
	for (uint32_t k = 0; k < d->n_lower && n < len; k++)
		if (e->where & (2u << k))
			n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "," : "",
			                      d->lower[k].ops->name);
	if (!n)
		snprintf(out, len, "-");
}

static void list_namespaces(struct kvd *d, uint32_t tenant, struct kvd_out *o)
{
	uint64_t(*cnt)[2 + KVD_MAX_LOWER] = calloc(d->n_nss ? d->n_nss : 1, sizeof(*cnt));
	if (!cnt) {
		kvd_out(o, "out of memory\n");
		return;
	}
	for (uint32_t id = 0; id < d->idx.cap; id++) {
		const struct kvd_entry *e = &d->idx.e[id];
		if (!visible(e, tenant))
			continue;
		for (uint32_t k = 0; k < d->n_nss; k++) {
			const struct kvd_ns *ns = &d->nss[k];
			if (ns->tenant != e->tenant || memcmp(&ns->ns, &e->ns, sizeof(e->ns)))
				continue;
			cnt[k][0]++;
			cnt[k][1] += (e->where & KVD_AT_HOST) != 0;
			for (uint32_t l = 0; l < d->n_lower; l++)
				cnt[k][2 + l] += (e->where & (2u << l)) != 0;
			break;
		}
	}
	kvd_out(o, "%-32s %10s %7s %11s %9s %9s", "namespace", "tenant", "tokens", "chunk bytes",
	        "chunks", "host");
	for (uint32_t l = 0; l < d->n_lower; l++)
		kvd_out(o, " %9s", d->lower[l].ops->name);
	kvd_out(o, "\n");
	for (uint32_t k = 0; k < d->n_nss; k++) {
		const struct kvd_ns *ns = &d->nss[k];
		if (tenant != KVD_NIL && ns->tenant != tenant)
			continue;
		char h[33];
		hex(ns->ns, h);
		kvd_out(o, "%-32s %10u %7u %11" PRIu64 " %9" PRIu64 " %9" PRIu64, h,
		        d->tenants[ns->tenant].key, ns->tokens, ns->chunk_bytes, cnt[k][0],
		        cnt[k][1]);
		for (uint32_t l = 0; l < d->n_lower; l++)
			kvd_out(o, " %9" PRIu64, cnt[k][2 + l]);
		kvd_out(o, "\n");
	}
	free(cnt);
}

static int by_depth(const void *a, const void *b, void *arg)
{
	const struct kvd_entry *e = arg;
	uint32_t x = e[*(const uint32_t *)a].depth, y = e[*(const uint32_t *)b].depth;
	return (x > y) - (x < y);
}

static int list_chunks(struct kvd *d, uint32_t tenant, kvt_id_t ns, struct kvd_out *o)
{
	uint32_t ids[INSPECT_LIST], n = 0;
	uint64_t total = 0, deepest = 0;
	for (uint32_t id = 0; id < d->idx.cap; id++) {
		const struct kvd_entry *e = &d->idx.e[id];
		if (!visible(e, tenant) || memcmp(&e->ns, &ns, sizeof(ns)))
			continue;
		total++;
		if (n < INSPECT_LIST) {
			ids[n++] = id;
		} else { /* keep the shallowest: replace the deepest kept */
			uint32_t j = 0;
			for (uint32_t i = 1; i < n; i++)
				j = d->idx.e[ids[i]].depth > d->idx.e[ids[j]].depth ? i : j;
			if (e->depth < d->idx.e[ids[j]].depth)
				ids[j] = id;
		}
		deepest = e->depth > deepest ? e->depth : deepest;
	}
	if (!total) {
		kvd_out(o, "no chunk of that namespace%s\n",
		        tenant == KVD_NIL ? "" : " in your tenant");
		return -ENOENT;
	}
	qsort_r(ids, n, sizeof(ids[0]), by_depth, d->idx.e);
	kvd_out(o, "%-32s %6s %10s %6s %s\n", "key", "depth", "bytes", "leases", "in");
	for (uint32_t i = 0; i < n; i++) {
		const struct kvd_entry *e = &d->idx.e[ids[i]];
		char h[33], w[64];
		hex(e->key, h);
		where(d, e, w, sizeof(w));
		kvd_out(o, "%-32s %6u %10u %6u %s\n", h, e->depth, e->payload_bytes, e->pins, w);
	}
	kvd_out(o, "%" PRIu64 " chunks, depth 0..%" PRIu64 "%s\n", total, deepest,
	        total > n ? " (the shallowest shown)" : "");
	return 0;
}

static int show_chunk(struct kvd *d, uint32_t tenant, kvt_id_t ns, kvt_id_t key, struct kvd_out *o)
{
	for (uint32_t id = 0; id < d->idx.cap; id++) {
		const struct kvd_entry *e = &d->idx.e[id];
		if (!visible(e, tenant) || memcmp(&e->ns, &ns, sizeof(ns)) ||
		    memcmp(&e->key, &key, sizeof(key)))
			continue;
		char h[33], w[64];
		hex(e->key, h);
		where(d, e, w, sizeof(w));
		kvd_out(o, "key        %s\n", h);
		hex(e->ns, h);
		kvd_out(o, "namespace  %s\ntenant     %u\n", h, d->tenants[e->tenant].key);
		hex(e->parent, h);
		kvd_out(o, "depth      %u (parent %s)\n", e->depth, e->has_parent ? h : "none");
		kvd_out(o, "payload    %u bytes, codec %u, sequence %" PRIu64 "\n",
		        e->payload_bytes, e->codec, e->seq);
		kvd_out(o, "in         %s\n", w);
		if (e->where & KVD_AT_HOST)
			kvd_out(o, "host       offset %" PRIu64 ", %u leases, %u tier jobs\n",
			        e->off, e->pins, e->jobs);
		if (kvd_kept(d, id) || kvd_keep_pending(d, id)) {
			uint64_t now = kvt_now_ns(), end = d->keeps.until[id];
			kvd_out(o, "kept       %.1f s more (kvt_keep)%s\n",
			        end > now ? (double)(end - now) / 1e9 : 0.0,
			        kvd_kept(d, id) ? "" : ", once it reaches host");
		}
		for (uint32_t k = 0; k < d->n_lower; k++)
			if (e->where & (2u << k))
				kvd_out(o, "%-10s location %" PRIu64 "\n", d->lower[k].ops->name,
				        e->loc[k]);
		return 0;
	}
	kvd_out(o, "no such chunk%s\n", tenant == KVD_NIL ? "" : " in your tenant");
	return -ENOENT;
}

static const char FLUSH_USAGE[] = "usage: kvtier flush all | NAMESPACE | tenant UID\n";

static int flush(struct kvd *d, char *save, struct kvd_out *o)
{
	const char *what = strtok_r(NULL, " ", &save);
	kvt_id_t ns = {{0, 0}};
	uint32_t tenant = KVD_NIL;
	bool all = what && !strcmp(what, "all");
	if (what && !strcmp(what, "tenant")) {
		const char *u = strtok_r(NULL, " ", &save);
		char *end;
		unsigned long uid = u ? strtoul(u, &end, 10) : 0;
		if (!u || *end || uid > UINT32_MAX) {
			kvd_out(o, "%s", FLUSH_USAGE);
			return -EINVAL;
		}
		for (uint32_t t = 0; t < d->n_tenants; t++)
			if (d->tenants[t].key == uid)
				tenant = t;
		if (tenant == KVD_NIL) {
			kvd_out(o, "no tenant %lu\n", uid);
			return -ENOENT;
		}
	}
	/* a word too many is refused: "flush all extra" flushed everything */
	if ((!all && tenant == KVD_NIL && parse_id(what, &ns)) || strtok_r(NULL, " ", &save)) {
		kvd_out(o, "%s", FLUSH_USAGE);
		return -EINVAL;
	}
	uint64_t n = 0, leased = 0;
	for (uint32_t id = 0; id < d->idx.cap; id++) {
		struct kvd_entry *e = &d->idx.e[id];
		if (!visible(e, tenant) ||
		    (!all && tenant == KVD_NIL && memcmp(&e->ns, &ns, sizeof(ns))))
			continue;
		leased += e->pins > 0;
		kvd_entry_drop(d, id);
		d->st.deletes++;
		n++;
	}
	kvd_out(o, "flushed %" PRIu64 " chunks (%" PRIu64 " leased: freed as they are released)\n",
	        n, leased);
	return 0;
}

int kvd_inspect_command(struct kvd *d, uint32_t tenant, char *cmd, char *out, size_t out_len)
{
	struct kvd_out o = {out, out_len, 0};
	char *save = NULL, *verb = strtok_r(cmd, " ", &save);
	if (verb && !strcmp(verb, "flush"))
		return flush(d, save, &o);
	if (verb && !strcmp(verb, "check")) { /* counts only: no tenant's keys are shown */
		if (!strtok_r(NULL, " ", &save))
			return kvd_check(d, out, out_len);
		kvd_out(&o, "usage: kvtier check\n");
		return -EINVAL;
	}
	if (verb && strcmp(verb, "inspect")) {
		kvd_out(&o, "unknown command '%s'\n", verb);
		return -EINVAL;
	}
	const char *a = strtok_r(NULL, " ", &save), *b = strtok_r(NULL, " ", &save);
	kvt_id_t ns, key;
	if (!a) {
		list_namespaces(d, tenant, &o);
		return 0;
	}
	if (parse_id(a, &ns) || (b && parse_id(b, &key)) || strtok_r(NULL, " ", &save)) {
		kvd_out(&o, "usage: kvtier inspect [NAMESPACE [KEY]] (ids: 32 hex digits)\n");
		return -EINVAL;
	}
	return b ? show_chunk(d, tenant, ns, key, &o) : list_chunks(d, tenant, ns, &o);
}
