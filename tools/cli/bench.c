/* bench.c -- kvtier bench: the host-tier benchmark lives in kvtier-bench-host; others likewise. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cli_bench(const char *sock, int argc, char **argv)
{
	const char *name = argc > 1 && argv[1][0] != '-' ? argv[1] : "host";
	char prog[64];
	snprintf(prog, sizeof(prog), "bench-%s", name);
	int skip = argc > 1 && argv[1][0] != '-' ? 1 : 0;
	return cli_exec_sibling(prog, argc - skip, argv + skip);
}
