/*
 * chunk_in.h -- where kvtierd holds a chunk, as `kvtier inspect NS KEY` tells an operator
 * ("host,nvme", "nvme", ...), for tests whose premise is a chunk's place (header-only, so
 * kvt_testlib stays free of the client library's types).
 */
#ifndef KVT_TESTS_CHUNK_IN_H
#define KVT_TESTS_CHUNK_IN_H
#include "testlib.h"
#include "kvtier.h"

#include <stdio.h>
#include <string.h>

/* An id as kvtier prints and reads it: 32 hex digits, high word first. */
static inline void kvt_test_hex(kvt_id_t id, char out[33])
{
	snprintf(out, 33, "%016llx%016llx", (unsigned long long)id.w[1],
	         (unsigned long long)id.w[0]);
}

/* The tiers holding key of ns into in ("-": none). @return : 0, or -1 (no such chunk). */
static inline int kvt_test_chunk_in(const struct kvt_test_daemon *d, kvt_id_t ns, kvt_id_t key,
                                    char *in, size_t len)
{
	char args[80], out[1024], hns[33], hkey[33];
	kvt_test_hex(ns, hns);
	kvt_test_hex(key, hkey);
	snprintf(args, sizeof(args), "inspect %s %s", hns, hkey);
	const char *p;
	if (kvt_test_cli(d, args, out, sizeof(out)) || !(p = strstr(out, "\nin ")))
		return -1;
	p += strspn(p + 3, " ") + 3;
	snprintf(in, len, "%.*s", (int)strcspn(p, "\n"), p);
	return 0;
}
#endif
