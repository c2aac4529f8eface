/*
 * tier_quota.h -- a tier's per-tenant accounts (TIER.quota, policy/quota.h) as tenant_usage
 * reports them (tiers/tier.h); shared by the tiers that keep a quota.
 */
#ifndef KVT_TIERS_TIER_QUOTA_H
#define KVT_TIERS_TIER_QUOTA_H
#include "tiers/tier.h"
#include "policy/quota.h"

static inline size_t kvt_tier_quota_usage(const struct kvt_quota *q, struct kvt_tier_tenant *out,
                                          size_t max)
{
	size_t n = q ? kvt_quota_keys(q) : 0;
	for (size_t i = 0; i < n && i < max; i++) {
		struct kvt_tier_tenant *o = &out[i];
		o->tenant = kvt_quota_key(q, (uint16_t)i);
		o->used_bytes = kvt_quota_used(q, (uint32_t)i);
		kvt_quota_limits(q, (uint32_t)i, &o->guaranteed_bytes, &o->max_bytes);
	}
	return n < max ? n : max;
}
#endif
