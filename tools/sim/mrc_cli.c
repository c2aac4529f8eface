/*
 * mrc_cli.c -- `kvtier sim --mrc`: the miss-ratio curve a tier would report (policy/mrc.h,
 * SHARDS-sampled LRU stack distances, the code `kvtier mrc` runs) beside the exact answer, an
 * LRU replay of the same trace at each size. One curve per --capacity: 1/2x, 1x, 2x, 4x, 8x.
 */
#include "sim.h"
#include "sim_int.h"

#include "policy/mrc.h"

#include <errno.h>
#include <stdio.h>

static const double mult[5] = {0.5, 1, 2, 4, 8};

int kvt__sim_mrc(const struct kvt_trace *t, const size_t *caps, size_t n_caps, double rate,
                 size_t max_keys, bool json)
{
	struct kvt_mrc *m = NULL;
	int rc = kvt_mrc_create(rate, &m);
	if (rc)
		return rc;
	if (max_keys)
		kvt_mrc_max_keys(m, max_keys);
	for (size_t i = 0; i < t->n_acc; i++)
		kvt_mrc_access(m, 0x9e3779b97f4a7c15ULL * ((uint64_t)t->blk[i] + 1));
	if (!json)
		printf("%-10s %10s %10s %10s %10s\n", "capacity", "size", "mrc", "lru", "error");
	for (size_t c = 0; c < n_caps && !rc; c++) {
		double est[5];
		kvt_mrc_curve(m, caps[c], est);
		for (size_t k = 0; k < 5 && !rc; k++) {
			size_t size = (size_t)(mult[k] * (double)caps[c]);
			struct kvt_sim_tier tier = {
			    .name = "tier", .policy = "lru", .capacity_blocks = size};
			struct kvt_sim_result r;
			if ((rc = kvt_sim_run(t, &tier, 1, &r)))
				break;
			double exact = r.accesses ? (double)r.hits / (double)r.accesses : 0;
			if (json)
				printf("{\"mrc\":true,\"capacity_blocks\":%zu,\"size_blocks\":%zu,"
				       "\"multiple\":%.1f,\"mrc_hit_ratio\":%.6f,"
				       "\"lru_hit_ratio\":%.6f,\"sample_rate\":%g,\"samples\":%llu,"
				       "\"mrc_bytes\":%zu}\n",
				       caps[c], size, mult[k], est[k], exact, kvt_mrc_rate(m),
				       (unsigned long long)kvt_mrc_samples(m), kvt_mrc_bytes(m));
			else
				printf("%-10zu %10zu %10.4f %10.4f %+10.4f\n", caps[c], size,
				       est[k], exact, est[k] - exact);
		}
	}
	if (!json && !rc)
		printf(
		    "(sampling ended at rate %.4g with %llu sampled accesses; the curve holds %zu "
		    "bytes)\n",
		    kvt_mrc_rate(m), (unsigned long long)kvt_mrc_samples(m), kvt_mrc_bytes(m));
	kvt_mrc_destroy(m);
	return rc;
}
