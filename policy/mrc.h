/*
 * mrc.h -- miss-ratio curves per tier from SHARDS-sampled reuse distances (Waldspurger et al.,
 * FAST'15): feed every access's key hash; a fixed fraction of keys (hash below a threshold) is
 * tracked, their LRU stack distances are measured exactly and scaled by 1/rate. The result is
 * the hit ratio an LRU-ordered tier would have at any size -- the number to size a tier by.
 *
 * The rate given is where sampling starts: past max_keys tracked keys (KVT_MRC_MAX_KEYS unless
 * set) the rate drops so that no more are tracked (fixed-size SHARDS), and the unsampled
 * accesses are counted as well (SHARDS-adj), which removes most of the error a few hot keys
 * cause. Cost: O(log m) per sampled access (m tracked keys) and a hash compare for the others;
 * memory at most about 256 bytes per tracked key (kvt_mrc_bytes). Not thread-safe.
 */
#ifndef KVT_MRC_H
#define KVT_MRC_H
#include <stddef.h>
#include <stdint.h>

struct kvt_mrc;

#define KVT_MRC_MAX_KEYS 32768

/* sample_rate in (0, 1], e.g. 0.1: the rate to start at. @return : 0, -EINVAL, -ENOMEM. */
int kvt_mrc_create(double sample_rate, struct kvt_mrc **out);
/* The most keys tracked at once (at least 64); the rate drops to keep to it. */
void kvt_mrc_max_keys(struct kvt_mrc *m, size_t n);
/* The sampling rate now. */
double kvt_mrc_rate(const struct kvt_mrc *m);
/* The bytes the curve holds. */
size_t kvt_mrc_bytes(const struct kvt_mrc *m);
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
