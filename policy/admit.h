/*
 * admit.h -- admission filters, consulted on put and on demotion, beside any policy.
 *
 * "tinylfu": a count-min sketch (4 rows of saturating 4-bit-range counters) behind a doorkeeper
 * Bloom filter; a newcomer is admitted when its estimated frequency beats the victim's it would
 * replace (always when there is free space). Counters halve and the doorkeeper clears every
 * 10 x capacity records, so the estimate follows the recent past.
 * "second_touch": admits a key only from its second recorded access within that window (the
 * nvme tier's wear guard). "none": admits everything.
 *
 * Use: kvt_admit_record() on every access of the tier (hit or miss), then kvt_admit_check() on a
 * miss. Memory: about capacity_hint x 5 bytes. Not thread-safe: one owner, like the policy.
 */
#ifndef KVT_ADMIT_H
#define KVT_ADMIT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvt_admit;

/* @return : 0, -ENOENT for an unknown name, -ENOMEM. *out is owned by the caller. */
int kvt_admit_create(const char *name, size_t capacity_hint, struct kvt_admit **out);
void kvt_admit_destroy(struct kvt_admit *a);
/* Turns the doorkeeper on (the default) or off. Off, every record counts in the sketch and a
 * key's estimate is its count there (Caffeine's sketch); on, a key's first record in a period
 * only sets its doorkeeper bit (the TinyLFU paper). */
void kvt_admit_doorkeeper(struct kvt_admit *a, bool on);
/* Sizes the filter for capacity_hint keys when it was made for fewer (never shrinks), keeping
 * what it counted: every key's estimate is the same after as before. @return : 0 or -ENOMEM
 * (the filter unchanged). */
int kvt_admit_grow(struct kvt_admit *a, size_t capacity_hint);
/* Bytes the filter holds (sketch and doorkeeper). */
size_t kvt_admit_bytes(const struct kvt_admit *a);
/* The filter's name ("tinylfu", ...). */
const char *kvt_admit_name(const struct kvt_admit *a);
void kvt_admit_record(struct kvt_admit *a, uint64_t key_hash);
/* victim_hash: the key it would replace, NULL when the tier has room. @return : admit or not. */
bool kvt_admit_check(struct kvt_admit *a, uint64_t cand_hash, const uint64_t *victim_hash);
/* The estimated recent frequency of a key (tests, policies). */
unsigned kvt_admit_estimate(const struct kvt_admit *a, uint64_t key_hash);
#endif
