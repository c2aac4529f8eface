/* keys.h -- namespace and chained chunk keys (docs/keys.md is the specification). */
#ifndef KVT_CORE_KEYS_H
#define KVT_CORE_KEYS_H
#include "kvtier.h"
#include <stdbool.h>

/* Largest name or revision accepted in a model description. */
#define KVT_MODEL_STR_MAX 255u

/* @return : 0 if m is a valid, supported model description, else -EINVAL. */
int kvt__model_validate(const kvt_model_t *m);
/* @return : bytes of one element of the dtype, 0 if unknown. */
size_t kvt__dtype_bytes(uint32_t dtype);

/* A chunk's 64-bit id: XXH3-64 of (tenant, namespace, key) as five u64 (tenant first, 128-bit
 * values low half first). kvtierd's recording (trace.file) names chunks by it, and every policy
 * is shown kvt_policy_key_hash of it. */
uint64_t kvt__chunk_id(uint32_t tenant, kvt_id_t ns, kvt_id_t key);

static inline bool kvt_id_eq(kvt_id_t a, kvt_id_t b)
{
	return a.w[0] == b.w[0] && a.w[1] == b.w[1];
}
static inline bool kvt_id_is_zero(kvt_id_t a)
{
	return (a.w[0] | a.w[1]) == 0;
}
#endif
