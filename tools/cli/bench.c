/* bench.c -- kvtier bench: the host-tier benchmark lives in kvtier-bench-host; others likewise. */
#include "cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int cli_bench(const char *sock, int argc, char **argv)
{
	const char *name = argc > 1 && argv[1][0] != '-' ? argv[1] : "host";
	static const char *const known[] = {"host",   "tiers", "nvme",  "rocksdb",
	                                    "policy", "quota", "trace", "gpu"};
	bool ok = false;
	for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
		ok = ok || !strcmp(name, known[k]);
	if (!ok) {
		fprintf(stderr,
		        "kvtier: no benchmark named '%s' (host, tiers, nvme, rocksdb, policy, "
		        "quota, trace, gpu)\n",
		        name);
		return 2;
	}
	char prog[64];
	snprintf(prog, sizeof(prog), "bench-%s", name);
	int skip = argc > 1 && argv[1][0] != '-' ? 1 : 0;
	return cli_exec_sibling(prog, argc - skip, argv + skip);
}
