/*
 * tenants.h -- how the options name tenants: a tenant key from a name (tenant.map), and the
 * quota lists "WHO=GUARANTEED/MAX,..." (tenant.quota for host, rocksdb.quota for the rocksdb
 * tier), so that the daemon and a tier read the same text the same way.
 */
#ifndef KVT_CORE_TENANTS_H
#define KVT_CORE_TENANTS_H
#include <stddef.h>
#include <stdint.h>

/* The key of the tenant named name (tenant.map): 0x80000000 | a hash of the name, stable across
 * restarts (keys are stored in record headers). A uid's own tenant has key uid & 0x7fffffff. */
uint32_t kvt_tenant_key_of_name(const char *name, size_t len);
/* The key of uid's own tenant (no tenant.map entry): uid & 0x7fffffff. */
static inline uint32_t kvt_tenant_key_of_uid(uint32_t uid)
{
	return uid & 0x7fffffffu;
}

typedef int (*kvt_quota_item_fn)(void *arg, uint32_t key, uint64_t guaranteed_bytes,
                                 uint64_t max_bytes);

/*
 * Walks a quota list: comma- or space-separated "WHO=GUARANTEED/MAX" items, WHO a uid or a
 * tenant name, sizes with units. Calls fn for each item in order with WHO's tenant key.
 * @return : 0; fn's first non-zero result; -EINVAL for a malformed item or guaranteed > max,
 *           -ERANGE for a uid past 2^31 - 1,
 *           with err (may be NULL) naming the item.
 */
int kvt_quota_list_each(const char *list, kvt_quota_item_fn fn, void *arg, char *err,
                        size_t err_len);
/* Whether list reads as a quota list, "" and "none" (off) included. @return : as above. */
int kvt_quota_list_check(const char *list, char *err, size_t err_len);
#endif
