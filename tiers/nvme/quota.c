/*
 * quota.c -- nvme.quota: per-tenant guaranteed and maximum bytes on the nvme log.
 *
 * The log is reclaimed a region at a time, oldest first, so a quota cannot pick victims the way
 * host's and rocksdb's do (policy/quota.h). It works at the two places the log decides:
 *
 *   guarantee  at reclaim, a record whose tenant would go below its guarantee without it is
 *              copied forward (reclaim.c) instead of dropped. A tenant flooding the tier pushes
 *              out its own records and everyone's unprotected ones, never a guaranteed share.
 *   maximum    after a write lands, while its tenant holds more than its maximum, its oldest
 *              records are dropped (no I/O: their space comes back when the log reaches them).
 *              That space goes to the others: with a maximum below the tier, reclaim keeps
 *              any record while the live bytes leave two regions free (reclaim.c), so a
 *              capped tenant's flood advances the log over its own records, not theirs.
 *              A record larger than the maximum is refused with -EDQUOT. Trimmed records get
 *              tombstones once the write's I/O is over (graves, nvme_int.h): a restart must
 *              not find them, since a delete sent since cannot reach them. Before that a
 *              crash brings them back, and the walk at open trims again.
 *
 * The accounts are the padded bytes of live records, rebuilt by the recovery walk. Guarantees
 * may add up to half the tier: above that a region would hold more guaranteed bytes than free
 * ones, and copying them forward would be most of what the log writes.
 *
 * nvme.quota may change at run time (kvt__nvme_quota_set, `kvtier config set nvme.quota`): the
 * accounts are made again from the live records, the cursors start over, and a tenant now past
 * its maximum is trimmed as its next write lands, as after any write; `none` turns it off.
 *
 * Finding a tenant's oldest record walks the ring from a cursor per tenant that only moves
 * forward (records are appended at the head, and a copy forward lands there too); when the
 * region under the cursor is reused, the walk starts again at the oldest region.
 */
#include "nvme_int.h"
#include "core/log.h"
#include "core/tenants.h"
#include "policy/quota.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct quota_sum {
	struct kvt_quota *q; /* NULL: only checks and sums */
	uint64_t guaranteed, least_max;
};

static int quota_item(void *arg, uint32_t key, uint64_t g, uint64_t m)
{
	struct quota_sum *s = arg;
	s->guaranteed += g;
	s->least_max = KVT_MIN(s->least_max, m);
	return s->q ? kvt_quota_set(s->q, kvt_quota_key_ix(s->q, key), g, m) : 0;
}

/* Checks list for tier t and sums it; no account changes. @return : 0 or -EINVAL, err says. */
static int check(struct kvt_nvme *t, const char *list, struct quota_sum *s, char *err,
                 size_t err_len)
{
	if (!t->env.moved) {
		snprintf(err, err_len, "this tier's user cannot follow a copied record");
		return -EINVAL;
	}
	*s = (struct quota_sum){NULL, 0, UINT64_MAX};
	int rc = kvt_quota_list_each(list, quota_item, s, err, err_len);
	uint64_t cap = KVT_NVME_GET(t, st.capacity_bytes);
	if (!rc && s->guaranteed > cap / 2) {
		snprintf(err, err_len,
		         "guarantees add up to %llu bytes, more than half the tier (%llu): the log "
		         "needs the other half to copy them forward into",
		         (unsigned long long)s->guaranteed, (unsigned long long)(cap / 2));
		rc = -EINVAL;
	}
	return rc;
}

/* Takes list (checked) as the tier's quota: new accounts, limits and reclaim settings. */
static int install(struct kvt_nvme *t, const char *list, struct quota_sum *s)
{
	struct kvt_quota *q;
	int rc = kvt_quota_create(&q);
	if (rc)
		return rc;
	s->q = q;
	if ((rc = kvt_quota_list_each(list, quota_item, s, NULL, 0))) {
		kvt_quota_destroy(q);
		return rc;
	}
	kvt__nvme_quota_close(t);
	t->quota = q;
	t->guaranteed = s->guaranteed;
	/* a maximum below the tier frees room for the others: reclaim keeps records while the live
	 * bytes leave two regions for the log to write into (reclaim.c) */
	uint64_t cap = KVT_NVME_GET(t, st.capacity_bytes);
	if (s->least_max < cap && cap > 2 * t->region_bytes)
		t->keep_live = cap - 2 * t->region_bytes;
	return 0;
}

int kvt__nvme_quota_open(struct kvt_nvme *t)
{
	const char *list = kvt_opt_str(t->env.opts, KVT_OPT_NVME_QUOTA);
	char err[KVT_OPT_STR_MAX + 160];
	struct quota_sum s;
	if (!*list || !strcmp(list, "none"))
		return 0;
	int rc = check(t, list, &s, err, sizeof(err));
	if (rc == -EINVAL)
		kvt_log(KVT_LOG_ERROR, "nvme.quota: %s", err);
	return rc ? rc : install(t, list, &s);
}

int kvt__nvme_quota_set(struct kvt_nvme *t, const char *list, char *err, size_t err_len)
{
	struct quota_sum s;
	if (!*list || !strcmp(list, "none")) {
		kvt__nvme_quota_close(t);
		return 0;
	}
	int rc = check(t, list, &s, err, err_len);
	if (rc || (rc = install(t, list, &s))) {
		if (rc == -ENOMEM)
			snprintf(err, err_len, "%s", strerror(ENOMEM));
		return rc;
	}
	/* the accounts of the records the log holds now */
	for (uint64_t r = 0; r < t->n_regions; r++)
		for (uint32_t i = 0; t->regions[r].seq && i < t->regions[r].n_recs; i++)
			if (t->regions[r].recs[i].alive)
				kvt__nvme_quota_account(t, &t->regions[r].recs[i], 1);
	return 0;
}

void kvt__nvme_quota_close(struct kvt_nvme *t)
{
	kvt_quota_destroy(t->quota);
	free(t->cursor);
	t->quota = NULL, t->cursor = NULL, t->n_cursor = 0, t->keep_live = 0, t->guaranteed = 0;
}

void kvt__nvme_quota_account(struct kvt_nvme *t, struct kvt__nvme_rec *rec, int sign)
{
	if (!t->quota)
		return;
	if (sign > 0)
		rec->tix = kvt_quota_key_ix(t->quota, rec->h.tenant);
	kvt_quota_charge(t->quota, rec->tix, sign * (int64_t)kvt__nvme_padded(rec->rec_len));
}

int kvt__nvme_quota_admits(struct kvt_nvme *t, const struct kvt_chunk_hdr *h, uint32_t rec_len)
{
	if (!t->quota)
		return 0;
	uint64_t g, m;
	kvt_quota_limits(t->quota, kvt_quota_key_ix(t->quota, h->tenant), &g, &m);
	return kvt__nvme_padded(rec_len) > m ? -EDQUOT : 0;
}

bool kvt__nvme_quota_keeps(struct kvt_nvme *t, const struct kvt__nvme_rec *rec)
{
	if (!t->quota)
		return false;
	uint64_t g, m;
	kvt_quota_limits(t->quota, rec->tix, &g, &m);
	return kvt_quota_used(t->quota, rec->tix) < g + kvt__nvme_padded(rec->rec_len);
}

/* The oldest live record of tenant index tix, from its cursor on. */
static struct kvt__nvme_rec *oldest(struct kvt_nvme *t, uint16_t tix, uint64_t *region)
{
	if (tix >= t->n_cursor) {
		struct kvt__nvme_cursor *c = realloc(t->cursor, (tix + 1u) * sizeof(*c));
		if (!c)
			return NULL;
		memset(c + t->n_cursor, 0, (tix + 1u - t->n_cursor) * sizeof(*c));
		t->cursor = c, t->n_cursor = tix + 1u;
	}
	struct kvt__nvme_cursor *c = &t->cursor[tix];
	uint64_t r = c->region;
	uint32_t i = c->idx;
	if (!c->seq || t->regions[r].seq != c->seq)
		r = (t->head + 1) % t->n_regions, i = 0;
	for (uint64_t step = 0; step < t->n_regions; step++, r = (r + 1) % t->n_regions, i = 0) {
		struct kvt__nvme_region *R = &t->regions[r];
		for (; R->seq && i < R->n_recs; i++) {
			if (R->recs[i].alive && R->recs[i].tix == tix) {
				*c =
				    (struct kvt__nvme_cursor){.region = r, .seq = R->seq, .idx = i};
				*region = r;
				return &R->recs[i];
			}
		}
		if (r == t->head)
			break;
	}
	return NULL;
}

void kvt__nvme_quota_trim(struct kvt_nvme *t, uint32_t tenant_key)
{
	if (!t->quota)
		return;
	uint16_t tix = kvt_quota_key_ix(t->quota, tenant_key);
	uint64_t g, m, r;
	kvt_quota_limits(t->quota, tix, &g, &m);
	struct kvt__nvme_rec *rec;
	while (kvt_quota_used(t->quota, tix) > m && (rec = oldest(t, tix, &r))) {
		kvt__nvme_log_kill(t, r, rec, KVT_NVME_GRAVE_LATER); /* after the write (nvme.c) */
		KVT_NVME_ADD(t, st.evictions, 1);
		KVT_NVME_ADD(t, xs.quota_trims, 1);
	}
}

void kvt__nvme_quota_trim_all(struct kvt_nvme *t)
{
	for (size_t i = 0; t->quota && i < kvt_quota_keys(t->quota); i++)
		kvt__nvme_quota_trim(t, kvt_quota_key(t->quota, (uint16_t)i));
}
