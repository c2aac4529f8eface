/*
 * mrc.h -- miss-ratio curves per tier from SHARDS-sampled reuse distances (Waldspurger et al.,
 * FAST'15): feed every access's key hash; a fixed fraction of keys (hash below a threshold) is
 * tracked, their LRU stack distances are measured exactly and scaled by 1/rate. The result is
 * the hit ratio an LRU-ordered tier would have at any size -- the number to size a tier by.
 *
 * Cost: O(log m) per sampled access (m = sampled keys alive in the window) and nothing but a
 * hash compare for the others; memory about 40 bytes per sampled key. Not thread-safe.
 */
#ifndef KVT_MRC_H
#define KVT_MRC_H
#include <stddef.h>
#include <stdint.h>

struct kvt_mrc;

/* sample_rate in (0, 1], e.g. 0.01. @return : 0, -EINVAL, -ENOMEM. */
int kvt_mrc_create(double sample_rate, struct kvt_mrc **out);
void kvt_mrc_destroy(struct kvt_mrc *m);
/* Records one access (hit or miss) of the key. */
void kvt_mrc_access(struct kvt_mrc *m, uint64_t key_hash);
/* Records a reference that makes the key resident but is neither a hit nor a miss (a lower
 * tier's write: the curve is of its reads, and a write moves the key to the top). */
void kvt_mrc_touch(struct kvt_mrc *m, uint64_t key_hash);
/* @return : the estimated hit ratio of an LRU tier holding size_entries entries. */
double kvt_mrc_hit_ratio(const struct kvt_mrc *m, uint64_t size_entries);
/* Writes the hit ratio at 1/2x, 1x, 2x, 4x and 8x of size_entries (what `kvtier mrc` shows). */
void kvt_mrc_curve(const struct kvt_mrc *m, uint64_t size_entries, double out[5]);
/* Sampled accesses so far (the estimate's support). */
uint64_t kvt_mrc_samples(const struct kvt_mrc *m);
#endif
