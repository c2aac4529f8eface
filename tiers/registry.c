/* registry.c -- the persistent tiers built into this binary, found by name. */
#include "tier.h"

#include <string.h>

#ifdef KVT_HAVE_TIER_NVME
extern const struct kvt_tier_ops kvt_tier_nvme;
#endif
#ifdef KVT_HAVE_TIER_ROCKSDB
extern const struct kvt_tier_ops kvt_tier_rocksdb;
#endif

static const struct kvt_tier_ops *const all[] = {
#ifdef KVT_HAVE_TIER_NVME
    &kvt_tier_nvme,
#endif
#ifdef KVT_HAVE_TIER_ROCKSDB
    &kvt_tier_rocksdb,
#endif
    NULL,
};

const struct kvt_tier_ops *kvt_tier_find(const char *name)
{
	for (size_t i = 0; all[i]; i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}
