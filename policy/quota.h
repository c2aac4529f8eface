/*
 * quota.h -- per-tenant quotas in the policy layer: a guaranteed and a maximum number of bytes
 * per tenant (per tier: one kvt_quota per tier). The policy still ranks entries; the quota
 * decides which of its proposals may go, so that a tenant that floods puts evicts its own
 * entries once it is at its maximum, and never pushes another tenant below its guarantee.
 *
 * Use: kvt_quota_charge(+bytes) when an entry is inserted and (-bytes) when it is removed;
 * before inserting, kvt_quota_pick_victims() chooses what to evict. Tenants are small dense
 * u32s (the daemon's tenant index). A tenant without a quota has guarantee 0 and no maximum.
 * Not thread-safe: one owner, like the policy. The sum of guarantees should not exceed the tier.
 */
#ifndef KVT_QUOTA_H
#define KVT_QUOTA_H
#include "policy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVT_QUOTA_UNLIMITED UINT64_MAX

struct kvt_quota;

/* @return : 0 or -ENOMEM; *out is owned by the caller. */
int kvt_quota_create(struct kvt_quota **out);
void kvt_quota_destroy(struct kvt_quota *q);
/* @return : 0, -EINVAL when guaranteed > max, -ENOMEM. */
int kvt_quota_set(struct kvt_quota *q, uint32_t tenant, uint64_t guaranteed_bytes,
                  uint64_t max_bytes);
/* Adds delta (negative on removal) to the tenant's usage. @return : 0 or -ENOMEM. */
int kvt_quota_charge(struct kvt_quota *q, uint32_t tenant, int64_t delta_bytes);
uint64_t kvt_quota_used(const struct kvt_quota *q, uint32_t tenant);
/* The tenant's guaranteed and maximum bytes (0 and KVT_QUOTA_UNLIMITED without a quota). */
void kvt_quota_limits(const struct kvt_quota *q, uint32_t tenant, uint64_t *guaranteed,
                      uint64_t *max);
/*
 * The dense index of a tenant key (a tier's records carry keys, core/tenants.h), found or added
 * in the quota's own table, for the calls above. On ENOMEM index 0, so that a write never fails
 * for want of an account. Linear: a tier serves a handful of tenants.
 */
uint16_t kvt_quota_key_ix(struct kvt_quota *q, uint32_t key);
/* How many tenant keys kvt_quota_key_ix has indexed, and the key of index ix (ix below that). */
size_t kvt_quota_keys(const struct kvt_quota *q);
uint32_t kvt_quota_key(const struct kvt_quota *q, uint16_t ix);
/* @return : whether tenant may hold bytes more without evicting anything of its own. */
bool kvt_quota_fits(const struct kvt_quota *q, uint32_t tenant, uint64_t bytes);

/* What the caller knows about its entries, for the quota's filter. */
struct kvt_quota_view {
	uint32_t (*tenant_of)(void *arg, uint32_t id);
	uint64_t (*bytes_of)(void *arg, uint32_t id);
	kvt_policy_evictable_fn evictable; /* the caller's own filter (leases), may be NULL */
	void *arg;
};

/*
 * Chooses victims, in the policy's order, that free at least need_bytes for tenant requester:
 * when requester is at its maximum, only its own entries; otherwise any entry whose tenant
 * stays at or above its guarantee once everything chosen so far is gone. Nothing is removed.
 * @return : how many ids were written to out (fewer than needed when the quota allows no more).
 */
size_t kvt_quota_pick_victims(struct kvt_quota *q, const struct kvt_policy_ops *ops,
                              struct kvt_policy *p, uint32_t requester, uint64_t need_bytes,
                              const struct kvt_quota_view *view, uint32_t *out, size_t max);
#endif
