/* bench.c -- kvtier bench: the host-tier benchmark lives in kvtier-bench-host; others likewise. */
#include "cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The benchmarks, each with the baseline it runs beside itself. */
static const struct {
	const char *name, *what;
} benches[] = {
    {"host", "kvt_get and kvt_put through kvtierd's host tier, against memcpy"},
    {"tiers", "the nvme and rocksdb tiers through kvtierd, against O_DIRECT pread/pwrite"},
    {"nvme", "the nvme tier against a raw io_uring O_DIRECT loop on the same file system"},
    {"rocksdb", "the rocksdb tier against raw RocksDB put/get with the same options"},
    {"policy", "each policy's operations per second on one core, against LRU's same loop"},
    {"quota", "what a tenant quota costs an eviction, against an eviction without one"},
    {"trace", "a request trace through kvtierd, beside kvtier sim's replay and memcpy"},
    {"gpu", "host<->GPU copies through kvt_gpu, against memcpy (exit 77 without a GPU)"},
};
#define N_BENCHES (sizeof(benches) / sizeof(benches[0]))

static void bench_list(FILE *f)
{
	fprintf(f, "usage: kvtier bench [NAME] [ARGS] (NAME defaults to host; "
	           "kvtier bench NAME --help: its ARGS)\n");
	for (size_t k = 0; k < N_BENCHES; k++)
		fprintf(f, "  %-8s %s\n", benches[k].name, benches[k].what);
}

int cli_bench(const char *sock, int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		bench_list(stdout);
		return 0;
	}
	const char *name = argc > 1 && argv[1][0] != '-' ? argv[1] : "host";
	bool ok = false;
	for (size_t k = 0; k < N_BENCHES; k++)
		ok = ok || !strcmp(name, benches[k].name);
	if (!ok) {
		fprintf(stderr, "kvtier: no benchmark named '%s'\n", name);
		bench_list(stderr);
		return 2;
	}
	char prog[64];
	snprintf(prog, sizeof(prog), "bench-%s", name);
	int skip = argc > 1 && argv[1][0] != '-' ? 1 : 0;
	return cli_exec_sibling(prog, argc - skip, argv + skip);
}
