/* simple.h -- libkvtier's one internal call, for the kvtier CLI, the benchmarks and the tests,
 * which link the static library (it is not exported from libkvtier.so): a request of type with
 * the text in as its body, the reply's text (with an error status too) into out.
 * @return : 0 or the reply's -errno. */
#ifndef KVT_IPC_CLIENT_SIMPLE_H
#define KVT_IPC_CLIENT_SIMPLE_H
#include "kvtier.h"

#include <stddef.h>
#include <stdint.h>

int kvt__client_simple(kvt_client_t *c, uint16_t type, const char *in, char *out, size_t out_len);
#endif
