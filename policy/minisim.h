/*
 * minisim.h -- a tier's hit ratio at 1/2x, 1x, 2x, 4x, 8x its size under *its own* policy, by
 * miniature simulation (Waldspurger et al., USENIX ATC '17): a sampled fraction R of the keys
 * replays through five small instances of the policy, of R x the five sizes each. SHARDS's
 * stack distances (mrc.h) give an LRU tier's curve only; this one follows the policy the tier
 * runs, conv and arc included.
 *
 * Keys are sampled by hash, as SHARDS does. Within a request (a prefix chain, root first) a
 * sampled key's parent is the request's previous sampled key and its depth counts the sampled
 * keys before it, so a prefix-aware policy still sees chains, 1/R times shorter. Sampling by
 * request (its first key) fails where every request starts with the same shared block. The
 * shortfall of sampled accesses against R x all of them counts as hits (as SHARDS-adj).
 * R = sim_entries / capacity (at most 1): the 1x instance holds about sim_entries entries
 * whatever the tier's size. At low R a learning policy sees less than the tier does and its
 * curve reads low (docs/policies.md).
 *
 * Cost: a hash compare per unsampled key; five policy operations per sampled key. Memory: 15.5 x
 * sim_entries entries of the policy plus a hash map and a key per entry. Not thread-safe: one
 * owner, like the policy.
 */
#ifndef KVT_MINISIM_H
#define KVT_MINISIM_H
#include "policy.h"

#include <stddef.h>
#include <stdint.h>

#define KVT_MINISIM_ENTRIES 4096

struct kvt_minisim;

/*
 * Five instances of ops, for a tier of capacity entries; params ("k=v ...", may be NULL) are
 * set on each. @return : 0, -EINVAL (capacity or sim_entries 0, or a bad parameter), -ENOMEM.
 */
int kvt_minisim_create(const struct kvt_policy_ops *ops, const char *params, uint64_t capacity,
                       size_t sim_entries, struct kvt_minisim **out);
void kvt_minisim_destroy(struct kvt_minisim *m);
/* One request: the chain of n key hashes, root first. */
void kvt_minisim_request(struct kvt_minisim *m, const uint64_t *keys, size_t n);
/* A reference that makes key resident without being a hit or a miss (a lower tier's write: its
 * curve is of its reads), as kvt_mrc_touch. */
void kvt_minisim_touch(struct kvt_minisim *m, uint64_t key);
/* The block hit ratio at 1/2x..8x the capacity (0 before any sampled request). */
void kvt_minisim_curve(const struct kvt_minisim *m, double out[5]);
/* The sampling rate, the sampled key accesses so far, and the bytes held. */
double kvt_minisim_rate(const struct kvt_minisim *m);
uint64_t kvt_minisim_samples(const struct kvt_minisim *m);
size_t kvt_minisim_bytes(const struct kvt_minisim *m);
/* The capacity and policy it was made for. */
uint64_t kvt_minisim_capacity(const struct kvt_minisim *m);
const struct kvt_policy_ops *kvt_minisim_ops(const struct kvt_minisim *m);
#endif
