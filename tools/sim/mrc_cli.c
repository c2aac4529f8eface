/*
 * mrc_cli.c -- `kvtier sim --mrc`: the miss-ratio curve a tier would report (policy/mrc.h,
 * SHARDS-sampled LRU stack distances, the code `kvtier mrc` runs) beside the exact answer, an
 * LRU replay of the same trace at each size. One curve per --capacity: 1/2x, 1x, 2x, 4x, 8x.
 * `--minisim N` does the same for policy/minisim.h's curve of each --policy (miniature
 * simulations, N entries at 1x) beside an exact replay of that policy.
 */
#include "sim.h"
#include "sim_int.h"

#include "policy/minisim.h"
#include "policy/mrc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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

int kvt__sim_minisim(const struct kvt_trace *t, const size_t *caps, size_t n_caps,
                     char *const *pols, size_t n_pols, size_t entries, bool json)
{
	int rc = 0;
	uint64_t *keys = malloc((t->n_acc + 1) * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	for (size_t i = 0; i < t->n_acc; i++)
		keys[i] = 0x9e3779b97f4a7c15ULL * ((uint64_t)t->blk[i] + 1);
	if (!json)
		printf("%-10s %-10s %10s %10s %10s %10s\n", "policy", "capacity", "size", "minisim",
		       "exact", "error");
	for (size_t p = 0; p < n_pols && !rc; p++)
		for (size_t c = 0; c < n_caps && !rc; c++) {
			const struct kvt_policy_ops *ops = kvt_policy_find(pols[p]);
			struct kvt_minisim *m = NULL;
			if (!ops || (rc = kvt_minisim_create(ops, NULL, caps[c], entries, &m))) {
				rc = rc ? rc : -ENOENT;
				break;
			}
			for (size_t r = 0; r < t->n_req; r++)
				kvt_minisim_request(m, keys + t->req_off[r],
				                    t->req_off[r + 1] - t->req_off[r]);
			double est[5];
			kvt_minisim_curve(m, est);
			for (size_t k = 0; k < 5 && !rc; k++) {
				size_t size = (size_t)(mult[k] * (double)caps[c]);
				struct kvt_sim_tier tier = {
				    .name = "tier", .policy = pols[p], .capacity_blocks = size};
				struct kvt_sim_result r;
				if ((rc = kvt_sim_run(t, &tier, 1, &r)))
					break;
				double exact = r.accesses ? (double)r.hits / (double)r.accesses : 0;
				if (json)
					printf(
					    "{\"minisim\":true,\"policy\":\"%s\",\"capacity_"
					    "blocks\":%zu,"
					    "\"size_blocks\":%zu,\"multiple\":%.1f,"
					    "\"minisim_hit_ratio\":%.6f,\"hit_ratio\":%.6f,"
					    "\"sample_rate\":%g,\"samples\":%llu,\"bytes\":%zu}\n",
					    pols[p], caps[c], size, mult[k], est[k], exact,
					    kvt_minisim_rate(m),
					    (unsigned long long)kvt_minisim_samples(m),
					    kvt_minisim_bytes(m));
				else
					printf("%-10s %-10zu %10zu %10.4f %10.4f %+10.4f\n",
					       pols[p], caps[c], size, est[k], exact,
					       est[k] - exact);
			}
			if (!json && !rc)
				printf("(%s at %zu: rate %.4g, %llu sampled accesses, %zu bytes)\n",
				       pols[p], caps[c], kvt_minisim_rate(m),
				       (unsigned long long)kvt_minisim_samples(m),
				       kvt_minisim_bytes(m));
			kvt_minisim_destroy(m);
		}
	free(keys);
	return rc;
}
