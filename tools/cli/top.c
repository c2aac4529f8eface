/*
 * top.c -- kvtier top: the daemon's tiers, live. Every interval it reads the stats object and
 * prints each tier's fill and what moved since the last frame (hit ratio, hits, misses, puts,
 * evictions and bytes per second), then the moves between tiers and the leases. On a terminal
 * each frame replaces the last; otherwise frames follow one another (for logs and tests).
 * `--count N` stops after N frames; the first frame shows rates over its first interval.
 */
#include "cli.h"
#include "ipc/proto.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOP_TIERS 8

enum { F_USED, F_CAP, F_CHUNKS, F_HITS, F_MISSES, F_PUTS, F_EVICT, F_RBYTES, F_WBYTES, F__N };
static const char *const tier_field[F__N] = {"used_bytes", "capacity_bytes", "chunks",
                                             "hits",       "misses",         "puts",
                                             "evictions",  "read_bytes",     "write_bytes"};
enum {
	G_PROMOTED,
	G_DEMOTED,
	G_CASCADED,
	G_EAGAIN,
	G_LEASES,
	G_CLIENTS,
	G_TENANTS,
	G_CORRUPT,
	G__N
};
static const char *const global_field[G__N] = {"promoted", "demoted", "cascaded", "eagain",
                                               "leases",   "clients", "tenants",  "corruptions"};

#define TOP_OPS     3 /* the requests whose latency a frame shows */
#define TOP_BUCKETS 23
static const char *const top_op[TOP_OPS] = {"acquire", "put", "lookup"};

struct snap {
	double t;
	int n;
	char name[TOP_TIERS][32];
	long long f[TOP_TIERS][F__N]; /* -1: the tier has no such counter */
	long long g[G__N];
	long long lat[TOP_OPS][TOP_BUCKETS]; /* the daemon's latency buckets, cumulative */
	long long bound_us[TOP_BUCKETS - 1];
};

/* Reads the comma-separated numbers of the array after key (between p and end) into v. */
static void numbers(const char *p, const char *end, const char *key, long long *v, int n)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":[", key);
	const char *q = strstr(p, pat);
	for (int i = 0; i < n; i++)
		v[i] = 0;
	if (!q || (end && q > end))
		return;
	q += strlen(pat);
	for (int i = 0; i < n && *q && *q != ']'; i++) {
		char *e;
		v[i] = strtoll(q, &e, 10);
		q = *e == ',' ? e + 1 : e;
	}
}

/* The number after "key": between p and end, or -1. */
static long long field(const char *p, const char *end, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *q = strstr(p, pat);
	return q && (!end || q < end) ? strtoll(q + strlen(pat), NULL, 10) : -1;
}

static int take(kvt_client_t *c, struct snap *s)
{
	static char json[KVT_MSG_MAX];
	int rc = kvt__client_simple(c, KVT_MSG_STATS, NULL, json, sizeof(json));
	if (rc < 0)
		return rc;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->t = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
	s->n = 0;
	const char *after = strstr(json, "\"demoted\":");
	for (const char *t = NULL, *end; s->n < TOP_TIERS && cli_json_tier(json, &t, &end);) {
		sscanf(t + 9, "%31[^\"]", s->name[s->n]);
		for (int k = 0; k < F__N; k++)
			s->f[s->n][k] = field(t, end, tier_field[k]);
		s->n++;
	}
	for (int k = 0; k < G__N; k++)
		s->g[k] = field(after ? after : json, NULL, global_field[k]);
	for (int o = 0; o < TOP_OPS; o++) {
		char pat[48];
		snprintf(pat, sizeof(pat), "{\"op\":\"%s\"", top_op[o]);
		const char *p = strstr(json, pat);
		if (p)
			numbers(p, strchr(p, '}'), "buckets", s->lat[o], TOP_BUCKETS);
		else
			memset(s->lat[o], 0, sizeof(s->lat[o]));
	}
	numbers(json, NULL, "latency_bounds_us", s->bound_us, TOP_BUCKETS - 1);
	return 0;
}

static void bytes(char *out, size_t len, double v)
{
	const char *u[] = {"B", "K", "M", "G", "T", "P"};
	int i = 0;
	for (; v >= 1024 && i < 5; i++)
		v /= 1024;
	snprintf(out, len, "%.1f%s", v, u[i]);
}

/* A per-second rate, or "-" when the tier has no such counter. */
static void rate(char *out, size_t len, long long now, long long was, double dt, bool mb)
{
	if (now < 0 || was < 0) {
		snprintf(out, len, "-");
		return;
	}
	double r = (double)(now - was) / dt;
	if (mb)
		snprintf(out, len, "%.1f", r / (1 << 20));
	else
		snprintf(out, len, "%.0f", r);
}

static void frame(const struct snap *a, const struct snap *b, double every, int no)
{
	double dt = b->t - a->t > 1e-6 ? b->t - a->t : 1e-6;
	printf("kvtierd: %lld clients, %lld tenants, %lld leases, %lld corruptions"
	       "  (every %.1f s, frame %d)\n",
	       b->g[G_CLIENTS], b->g[G_TENANTS], b->g[G_LEASES], b->g[G_CORRUPT], every, no);
	printf("%-8s %15s %10s %6s %9s %9s %9s %9s %10s %10s\n", "tier", "used", "chunks", "hit%",
	       "hits/s", "misses/s", "puts/s", "evicts/s", "read MB/s", "write MB/s");
	for (int i = 0; i < b->n; i++) {
		int j = 0; /* the same tier in the last frame */
		while (j < a->n && strcmp(a->name[j], b->name[i]))
			j++;
		long long zero[F__N] = {0};
		const long long *was = j < a->n ? a->f[j] : zero, *now = b->f[i];
		char used[48], cap[16], r[6][16], hit[16] = "-";
		bytes(used, sizeof(used), (double)now[F_USED]);
		bytes(cap, sizeof(cap), (double)now[F_CAP]);
		snprintf(used + strlen(used), sizeof(used) - strlen(used), "/%s", cap);
		long long dh = now[F_HITS] - was[F_HITS], dm = now[F_MISSES] - was[F_MISSES];
		if (dh + dm > 0)
			snprintf(hit, sizeof(hit), "%.1f", 100.0 * (double)dh / (double)(dh + dm));
		rate(r[0], 16, now[F_HITS], was[F_HITS], dt, false);
		rate(r[1], 16, now[F_MISSES], was[F_MISSES], dt, false);
		rate(r[2], 16, now[F_PUTS], was[F_PUTS], dt, false);
		rate(r[3], 16, now[F_EVICT], was[F_EVICT], dt, false);
		rate(r[4], 16, now[F_RBYTES], was[F_RBYTES], dt, true);
		rate(r[5], 16, now[F_WBYTES], was[F_WBYTES], dt, true);
		printf("%-8s %15s %10lld %6s %9s %9s %9s %9s %10s %10s\n", b->name[i], used,
		       now[F_CHUNKS], hit, r[0], r[1], r[2], r[3], r[4], r[5]);
	}
	char p[16], dm[16], cs[16], ea[16];
	rate(p, sizeof(p), b->g[G_PROMOTED], a->g[G_PROMOTED], dt, false);
	rate(dm, sizeof(dm), b->g[G_DEMOTED], a->g[G_DEMOTED], dt, false);
	rate(cs, sizeof(cs), b->g[G_CASCADED], a->g[G_CASCADED], dt, false);
	rate(ea, sizeof(ea), b->g[G_EAGAIN], a->g[G_EAGAIN], dt, false);
	printf("moves: %s promoted/s, %s demoted/s, %s cascaded/s; %s puts/s waited past "
	       "demote.wait_ms\n",
	       p, dm, cs, ea);
	printf("latency this frame, p50 / p99:");
	for (int o = 0; o < TOP_OPS; o++) {
		long long d[TOP_BUCKETS], n = 0;
		for (int k = 0; k < TOP_BUCKETS; k++)
			n += d[k] = b->lat[o][k] - a->lat[o][k];
		char q[2][24];
		for (int j = 0; j < 2; j++) {
			long long want = j ? (n * 99 + 99) / 100 : (n + 1) / 2, seen = 0;
			int k = 0;
			while (k < TOP_BUCKETS - 1 && (seen += d[k]) < want)
				k++;
			if (!n)
				snprintf(q[j], sizeof(q[j]), "-");
			else if (k == TOP_BUCKETS - 1)
				snprintf(q[j], sizeof(q[j]), ">%lldus", b->bound_us[k - 1]);
			else
				snprintf(q[j], sizeof(q[j]), "<=%lldus", b->bound_us[k]);
		}
		printf("%s %s %s / %s (%lld)", o ? "," : "", top_op[o], q[0], q[1], n);
	}
	printf("\n");
	fflush(stdout);
}

/* top's words into *every (seconds) and *count (frames, -1: until stopped). @return : whether
 * they are well formed. */
static bool top_words(int argc, char **argv, double *every, long *count)
{
	*every = 1.0, *count = -1;
	for (int i = 1; i < argc; i++) {
		char *end = NULL;
		if (!strcmp(argv[i], "--interval") && i + 1 < argc)
			*every = strtod(argv[++i], &end);
		else if (!strcmp(argv[i], "--count") && i + 1 < argc)
			*count = strtol(argv[++i], &end, 10);
		if (!end || *end || !(*every >= 0.1 && *every <= 3600) || *count == 0 ||
		    *count < -1)
			return false;
	}
	return true;
}

const char *cli_top_misshapen(int argc, char **argv)
{
	double every;
	long count;
	return top_words(argc, argv, &every, &count)
	           ? NULL
	           : "usage: kvtier top [--interval SECONDS >= 0.1] [--count N]";
}

int cli_top(kvt_client_t *c, int argc, char **argv)
{
	double every;
	long count;
	if (!top_words(argc, argv, &every, &count)) /* cli_top_misshapen said so */
		return -EINVAL;
	bool tty = isatty(1);
	struct snap s[2];
	int rc = take(c, &s[0]);
	for (int no = 1; !rc && (count < 0 || no <= count); no++) {
		struct timespec d = {(time_t)every, (long)((every - (double)(time_t)every) * 1e9)};
		nanosleep(&d, NULL);
		if ((rc = take(c, &s[no & 1])))
			break;
		if (tty)
			printf("\033[H\033[2J");
		else if (no > 1)
			printf("\n");
		frame(&s[(no - 1) & 1], &s[no & 1], every, no);
	}
	return rc;
}
