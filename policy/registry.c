/* registry.c -- the list of policies known by name to the daemon and the simulator. */
#include "policy.h"

#include <string.h>

static const struct kvt_policy_ops *const all[] = {
    &kvt_policy_lru,       &kvt_policy_arc,    &kvt_policy_s3fifo,   &kvt_policy_sieve,
    &kvt_policy_lfu,       &kvt_policy_prefix, &kvt_policy_gdsf,     &kvt_policy_lhd,
    &kvt_policy_hindsight, &kvt_policy_conv,   &kvt_policy_wtinylfu, &kvt_policy_fifo,
    &kvt_policy_clock,     &kvt_policy_duel,
};

const struct kvt_policy_ops *kvt_policy_at(size_t i)
{
	return i < sizeof(all) / sizeof(all[0]) ? all[i] : NULL;
}

const struct kvt_policy_ops *kvt_policy_find(const char *name)
{
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}
