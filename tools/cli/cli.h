/* cli.h -- the kvtier CLI's subcommands (folder-private). */
#ifndef KVT_CLI_H
#define KVT_CLI_H
#include "kvtier.h"
#include "ipc/client/simple.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
/* A subcommand's answer when it has already said on stderr what went wrong (a usage line):
 * kvtier exits 1 without an errno line after it. */
#define KVT_CLI_SAID (-100000)

/* The words of `kvtier stats` and `kvtier top` (argv[0] the command), checked before any
 * connection. @return : NULL (well formed) or the usage line. */
const char *cli_stats_misshapen(int argc, char **argv);
const char *cli_top_misshapen(int argc, char **argv);
int cli_stats(kvt_client_t *c, int argc, char **argv);
int cli_top(kvt_client_t *c, int argc, char **argv);
int cli_bench(const char *sock, int argc, char **argv);
/* The number after "key": in a stats object (the first one), or -1 (stats.c). */
long long cli_json_num(const char *json, const char *key);
/* The string after "key": in obj (the first one) into out. @return : 0 or -ENOENT. */
int cli_json_str(const char *obj, const char *key, char *out, size_t len);
/* Each tier object of a stats reply in turn: *t (NULL to begin) moves to the next one's "{",
 * *end to where it ends (the next tier's object, or the tiers array's end). @return : false
 * after the last. */
bool cli_json_tier(const char *json, const char **t, const char **end);
/* kvtier record FILE [SECONDS]: trace.file for a while (record.c) */
const char *cli_record_misshapen(int argc, char **argv);
int cli_record(kvt_client_t *c, int argc, char **argv);
/* kvtier sim --daemon [--show] ARGS: kvtier-sim with the running daemon's layout, then ARGS
 * (simd.c); argv[0] is "sim". */
int cli_sim_daemon(const char *sock, int argc, char **argv);
/* Runs build/bin/kvtier-<name> with argv; @return : its exit status. */
int cli_exec_sibling(const char *name, int argc, char **argv);
#endif
