/* bench_util.h -- what the benchmarks share: a kvtierd of their own, timing, keys, buffers. */
#ifndef KVT_BENCH_UTIL_H
#define KVT_BENCH_UTIL_H
#include "kvtier.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KVT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KVT_MAX(a, b) ((a) > (b) ? (a) : (b))

extern char sock[108];  /* the daemon's socket */
extern char tmpdir[64]; /* its data directory */
extern pid_t daemon_pid;

double now_s(void);
_Noreturn void die(const char *what, int rc);
/* The path of the program name next to this binary (kvtierd, kvtier). */
void bin_path(const char *name, char *out, size_t len);
/* Creates tmpdir (under /var/tmp) unless it exists; start_daemon_with() calls it. */
void make_tmpdir(void);
/* Starts kvtierd (next to this binary) with host.bytes and extra "name=value" sets, then
 * $BENCH_SET's one if set; its log goes to the file $BENCH_LOG names (appended), else nowhere. */
void start_daemon_with(const char *host_bytes, const char *const *sets);
void stop_daemon(void);
/* A model whose chunk is exactly bytes (f16, 16 tokens; 64 KiB per layer when large). */
kvt_model_t model_of(size_t bytes, uint32_t salt);
void make_keys(kvt_id_t ns, kvt_id_t *keys, size_t n, uint32_t salt);
void *prefaulted(size_t bytes);
/* The number after "key": in the daemon's stats (-1: absent, or no reply). */
long long stat_of(kvt_client_t *c, const char *key);
/* The same, inside tier's object of the stats' tiers array (NULL: anywhere). */
long long tier_stat_of(kvt_client_t *c, const char *tier, const char *key);
/* The stats JSON, one round trip (static: valid until the next call; NULL on an error), and
 * the number after "key": in it, as tier_stat_of() reads it, for several keys of one reading. */
const char *stats_fetch(kvt_client_t *c);
long long stat_in(const char *json, const char *tier, const char *key);
/* A round trip (a ping): when it returns, the daemon has handled every message c sent before,
 * those with no reply (kvt_release, kvt_prefetch) included. @return : 0 or -errno. */
int settle(kvt_client_t *c);
/* Sorts v[0..n) in ascending order. */
void sort_doubles(double *v, size_t n);
/* Sorts v[0..n) (seconds) and gives its median and 99th percentile in milliseconds (0 when
 * empty). */
void pctl_ms(double *v, size_t n, double *p50, double *p99);
#endif
