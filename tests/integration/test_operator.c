/*
 * test_operator.c -- the operator's views of kvtierd and its one destructive command.
 * `kvtier inspect` lists namespaces, a namespace's chunks and one chunk with where it lives;
 * `kvtier flush` drops a namespace's or a tenant's chunks from every tier (a leased one stays
 * readable until released); another uid sees only its own tenant and may not flush
 * (test_ipc_admin_needs_owner, beside the other things another uid may not do).
 * `kvtier top` shows the hit rate of a busy engine. The Prometheus endpoint (metrics.listen), over
 * real TCP: the scrape is in the text format (a # TYPE line once per family, before its samples;
 * counters end in _total; every value a number), carries the same numbers as `kvtier stats --json`,
 * and bad or slow HTTP clients get an error status or a closed socket while the daemon keeps
 * serving and leaks no descriptor. An address that cannot be bound stops the start when the
 * operator chose it. A command line of the wrong shape gets its usage, with or without a daemon,
 * and the benchmarks refuse words they cannot run.
 */
#include "testlib.h"
#include "ipc/client/simple.h"
#include "kvtier.h"
#include "put_chain.h"
#include "chunk_in.h"
#include "ipc/proto.h"
#include "core/util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct timeval tv = {5, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Sends req, reads the answer to EOF into out. @return : bytes read, -1 on a timeout. */
static long http(int port, const char *req, size_t req_len, char *out, size_t len)
{
	int fd = dial(port);
	size_t off = 0;
	while (off < req_len) {
		ssize_t w = send(fd, req + off, req_len - off, MSG_NOSIGNAL);
		if (w <= 0)
			break; /* the daemon may close early on an oversized request */
		off += (size_t)w;
	}
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, out + n, len - 1 - n);
		if (r < 0) {
			close(fd);
			return -1;
		}
		if (r == 0 || (n += (size_t)r) == len - 1)
			break;
	}
	out[n] = 0;
	close(fd);
	return (long)n;
}

static const char *body_of(const char *resp)
{
	const char *b = strstr(resp, "\r\n\r\n");
	assert_non_null(b);
	return b + 4;
}

static long long sample(const char *body, const char *series)
{
	char pat[256];
	snprintf(pat, sizeof(pat), "\n%s ", series);
	const char *p = strstr(body, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* The text format's rules that a scraper enforces. @return : the number of samples. */
static int check_format(const char *body)
{
	char families[256][96];
	int nf = 0, samples = 0;
	char fam[96] = "", type[16] = "";
	unsigned long long cum = 0; /* a histogram's buckets so far (they never decrease) */
	for (const char *l = body; *l; l = strchr(l, '\n') + 1) {
		const char *e = strchr(l, '\n');
		assert_non_null(e); /* every line ends */
		char line[512];
		snprintf(line, sizeof(line), "%.*s", (int)(e - l), l);
		if (!strncmp(line, "# TYPE ", 7)) {
			assert_int_equal(sscanf(line + 7, "%95s %15s", fam, type), 2);
			assert_true(!strcmp(type, "counter") || !strcmp(type, "gauge") ||
			            !strcmp(type, "histogram"));
			for (int i = 0; i < nf; i++)
				assert_string_not_equal(families[i], fam); /* once per family */
			assert_true(nf < 256);
			snprintf(families[nf++], sizeof(families[0]), "%s", fam);
			continue;
		}
		assert_true(line[0] != '#');
		size_t nl = strcspn(line, "{ ");
		assert_true(nl > 7 && !strncmp(line, "kvtier_", 7));
		char name[96], want[112];
		snprintf(name, sizeof(name), "%.*s", (int)nl, line);
		const char *v = strrchr(line, ' ');
		assert_non_null(v);
		char *end;
		double val = strtod(v + 1, &end);
		assert_true(end != v + 1 && *end == 0);
		if (line[nl] == '{')
			assert_non_null(strstr(line, "\"} ")); /* labels close before the value */
		samples++;
		if (strcmp(type, "histogram")) { /* under its family's TYPE line */
			snprintf(want, sizeof(want), "%s%s", fam,
			         strcmp(type, "counter") ? "" : "_total");
			assert_string_equal(name, want);
			continue;
		}
		snprintf(want, sizeof(want), "%s_bucket", fam);
		if (!strcmp(name, want)) {
			assert_non_null(strstr(line, ",le=\""));
			assert_true(val >= (double)cum);
			cum = strstr(line, "le=\"+Inf\"") ? 0 : (unsigned long long)val;
			continue;
		}
		char sum[112], count[112];
		snprintf(sum, sizeof(sum), "%s_sum", fam);
		snprintf(count, sizeof(count), "%s_count", fam);
		assert_true(!strcmp(name, sum) || !strcmp(name, count));
	}
	return samples;
}

static const kvt_model_t model = {.name = "metrics",
                                  .dtype = KVT_DTYPE_F16,
                                  .n_layers = 1,
                                  .n_kv_heads = 8,
                                  .head_dim = 128,
                                  .tokens_per_chunk = 16};

/* A sample's value as a double, or -1 when the series is absent. */
static double sample_f(const char *body, const char *series)
{
	char pat[256];
	snprintf(pat, sizeof(pat), "\n%s ", series);
	const char *p = strstr(body, pat);
	return p ? strtod(p + strlen(pat), NULL) : -1;
}

/* The hit ratios of `kvtier mrc TIER`'s row `row` ("hit", or a policy's name) into h[5]. */
static void mrc_row(const struct kvt_test_daemon *d, const char *tier, const char *row, double h[5])
{
	char cmd[64], out[2048], pat[32];
	snprintf(cmd, sizeof(cmd), "mrc %s", tier);
	assert_int_equal(kvt_test_cli(d, cmd, out, sizeof(out)), 0);
	snprintf(pat, sizeof(pat), "\n%s ", row);
	const char *r = strstr(out, pat);
	if (!r ||
	    sscanf(r + strlen(pat), "%lf %lf %lf %lf %lf", &h[0], &h[1], &h[2], &h[3], &h[4]) != 5)
		fail_msg("no row '%s' in: %s", row, out);
}

/* A namespace of the given model name with n chunks put and demoted; keys out. */
static kvt_id_t put_ns(kvt_client_t *c, const char *name, size_t n, kvt_id_t *keys)
{
	kvt_model_t m = model;
	m.name = name;
	kvt_id_t ns;
	assert_int_equal(kvt_namespace(c, &m, &ns), 0);
	uint32_t toks[16 * 16];
	for (size_t i = 0; i < n * 16; i++)
		toks[i] = (uint32_t)i * 11 + (uint32_t)strlen(name);
	assert_int_equal(kvt_chunk_keys(ns, toks, n * 16, 16, keys, n), n);
	kvt_test_put_chain(c, ns, keys, n, kvt_chunk_bytes(&m), 100);
	return ns;
}

static void test_operator_scrape_matches_stats(void **state)
{
	struct kvt_test_daemon d;
	const char *sets[] = {"tiers.order=host,nvme", "nvme.bytes=64MiB", "nvme.quota=4242=0/8MiB",
	                      NULL};
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	int port = (int)kvt_test_stat(&d, "metrics_port");
	assert_true(port > 0);
	/* nothing read yet: kvtier mrc says so in one line, and exits 1 */
	char none[512];
	assert_int_equal(kvt_test_cli(&d, "mrc host", none, sizeof(none)), 1);
	assert_string_equal(none, "host: no accesses sampled yet (the curve fills as chunks are "
	                          "read and stored)\n");
	assert_int_equal(kvt_test_cli(&d, "mrc nvme", none, sizeof(none)), 1);
	assert_non_null(strstr(none, "nvme: no reads sampled yet"));
	const char *nl = strchr(none, '\n');
	assert_true(nl && !nl[1]); /* one line: no errno line after the daemon's words */
	assert_int_equal(kvt_test_cli(&d, "bench policy 20000 64 lru", none, sizeof(none)), 0);
	assert_non_null(strstr(none, "\nlru "));
	kvt_client_t *c;
	assert_int_equal(kvt_connect(d.sock, &c), 0);
	kvt_id_t keys[8], ns = put_ns(c, model.name, 8, keys);
	assert_int_equal(kvt_lookup(c, ns, keys, 8), 8);
	kvt_lease_t l[8];
	assert_int_equal(kvt_acquire(c, ns, keys, 8, l), 8);
	assert_int_equal(kvt_release(c, l, 8), 8); /* all 8 were valid */
	assert_true(kvt_test_stat_wait(&d, "demoted", 8, 1) >= 8);
	assert_int_equal(kvt_keep(c, ns, keys, 3, 600000), 3);
	char text[4096];
	assert_int_equal(kvt_test_cli(&d, "stats", text, sizeof(text)), 0);
	assert_non_null(strstr(text, "engine hints: kept 3 chunks ("));
	assert_non_null(strstr(text, "KiB), 0 on their way up; keeps 3, refused 0; done 0\n"));
	/* the tiers' table: sizes for a reader, the hit ratio worked out from the counts */
	const char *host = strstr(text, "\nhost "), *nvme = strstr(text, "\nnvme ");
	assert_true(host && nvme);
	char cap[32], cap_col[40]; /* 64 MiB less the log's own space */
	long long nvme_cap = kvt_test_tier_stat(&d, "nvme", "capacity_bytes");
	assert_true(nvme_cap > 0);
	snprintf(cap_col, sizeof(cap_col), " %10s ",
	         kvt_fmt_bytes((uint64_t)nvme_cap, cap, sizeof(cap)));
	if (!strstr(nvme, cap_col) || strstr(nvme, cap_col) > strchr(nvme + 1, '\n'))
		fail_msg("kvtier stats: no '%s' in its nvme row:\n%s", cap_col, text);
	long long hits = kvt_test_tier_stat(&d, "host", "hits"),
	          misses = kvt_test_tier_stat(&d, "host", "misses");
	char row[64];
	assert_true(hits > 0 && misses >= 0);
	snprintf(row, sizeof(row), " %10lld %10lld %6.3f ", hits, misses,
	         (double)hits / (double)(hits + misses));
	if (!strstr(host, row) || strstr(host, row) > strchr(host + 1, '\n'))
		fail_msg("kvtier stats: no '%s' in its host row:\n%s", row, text);

	static char resp[1 << 18];
	const char get[] = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
	assert_true(http(port, get, strlen(get), resp, sizeof(resp)) > 0);
	assert_non_null(strstr(resp, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(resp, "Content-Type: text/plain; version=0.0.4"));
	const char *body = body_of(resp);
	char cl[64];
	snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", strlen(body));
	assert_non_null(strstr(resp, cl));
	int n = check_format(body);
	assert_true(n > 60);

	/* the same numbers as stats (the counters that a stats request does not itself move) */
	assert_int_equal(sample(body, "kvtier_tier_chunks{tier=\"host\"}"), 8);
	assert_int_equal(sample(body, "kvtier_tier_hits_total{tier=\"host\"}"),
	                 kvt_test_stat(&d, "hits"));
	assert_true(sample(body, "kvtier_tier_hits_total{tier=\"host\"}") >= 8);
	assert_int_equal(sample(body, "kvtier_leases_granted_total"), 8);
	assert_int_equal(sample(body, "kvtier_kept_chunks"), 3);     /* a gauge: no _total */
	assert_int_equal(sample(body, "kvtier_keep_pending"), 0);    /* a gauge too */
	assert_int_equal(sample(body, "kvtier_trace_recording"), 0); /* trace.file: gauges */
	assert_int_equal(sample(body, "kvtier_trace_stopped"), 0);
	assert_non_null(strstr(body, "# TYPE kvtier_trace_requests gauge\n"));
	assert_int_equal(sample(body, "kvtier_keeps_total"), 3);
	assert_int_equal(sample(body, "kvtier_demoted_total"), kvt_test_stat(&d, "demoted"));
	assert_int_equal(sample(body, "kvtier_tier_writes_total{tier=\"nvme\"}"),
	                 kvt_test_stat(&d, "writes"));
	assert_int_equal(sample(body, "kvtier_tier_capacity_bytes{tier=\"host\"}"), 64ll << 20);
	assert_int_equal(sample(body, "kvtier_metrics_port"), port);
	assert_int_equal(
	    sample(body, "kvtier_tier_tenant_max_bytes{tier=\"nvme\",tenant=\"4242\"}"), 8ll << 20);
	assert_non_null(strstr(body, "\nkvtier_tier_info{tier=\"host\",policy=\"lru\"} 1\n"));
	assert_non_null(strstr(body, "\nkvtier_build_info{version=\""));
	/* the requests' latency: 8 puts and one acquire, each under 10 s */
	assert_int_equal(sample(body, "kvtier_request_seconds_count{op=\"put\"}"), 8);
	assert_int_equal(sample(body, "kvtier_request_seconds_count{op=\"acquire\"}"), 1);
	assert_int_equal(sample(body, "kvtier_request_seconds_bucket{op=\"put\",le=\"10\"}"), 8);
	assert_int_equal(sample(body, "kvtier_request_seconds_bucket{op=\"put\",le=\"+Inf\"}"), 8);
	assert_int_equal(sample(body, "kvtier_request_seconds_bucket{op=\"delete\",le=\"+Inf\"}"),
	                 0);
	/* the miss-ratio curve a tier is sized by: kvtier mrc's numbers, one gauge per size;
	 * lru has no curve of its own beside SHARDS's */
	static const char *const sizes[5] = {"0.5x", "1x", "2x", "4x", "8x"};
	double h[5];
	mrc_row(&d, "host", "hit", h);
	for (int i = 0; i < 5; i++) {
		char series[128];
		snprintf(series, sizeof(series),
		         "kvtier_tier_mrc_lru_hit_ratio{tier=\"host\",size=\"%s\"}", sizes[i]);
		assert_true(fabs(sample_f(body, series) - h[i]) < 1e-4);
	}
	assert_true(sample(body, "kvtier_tier_mrc_samples{tier=\"host\"}") >= 8);
	assert_null(strstr(body, "kvtier_tier_mrc_policy_hit_ratio{"));
	/* a query string is the same page; a switch of policy shows in the info sample alone */
	const char getq[] = "GET /metrics?x=1 HTTP/1.0\r\n\r\n";
	assert_true(http(port, getq, strlen(getq), resp, sizeof(resp)) > 0);
	assert_non_null(strstr(resp, "HTTP/1.1 200 OK\r\n"));
	char out[4096];
	assert_int_equal(kvt_test_cli(&d, "policy set host s3fifo", out, sizeof(out)), 0);
	assert_true(http(port, get, strlen(get), resp, sizeof(resp)) > 0);
	body = body_of(resp);
	assert_non_null(strstr(body, "\nkvtier_tier_info{tier=\"host\",policy=\"s3fifo\"} 1\n"));
	assert_int_equal(sample(body, "kvtier_tier_chunks{tier=\"host\"}"), 8);
	/* s3fifo's own curve, once an access reached its miniature simulations (`mrc host` waits
	 * for them; a scrape shows the curve as it stands, so it comes second) */
	assert_int_equal(kvt_acquire(c, ns, keys, 8, l), 8);
	assert_int_equal(kvt_release(c, l, 8), 8);
	mrc_row(&d, "host", "s3fifo", h);
	assert_true(http(port, get, strlen(get), resp, sizeof(resp)) > 0);
	body = body_of(resp);
	check_format(body);
	for (int i = 0; i < 5; i++) {
		char series[128];
		snprintf(series, sizeof(series),
		         "kvtier_tier_mrc_policy_hit_ratio{tier=\"host\",size=\"%s\"}", sizes[i]);
		assert_true(fabs(sample_f(body, series) - h[i]) < 1e-4);
	}
	static char js[1 << 16];
	assert_true(kvt_test_stats_json(&d, js, sizeof(js)) > 0);
	assert_non_null(strstr(js, "\"mrc\":[{\"size\":\"0.5x\",\"lru_hit_ratio\":"));
	kvt_close(c);
	kvt_test_daemon_destroy(&d);
}

/* The daemon's TCP sockets: its descriptors that /proc/net/tcp lists (the Unix sockets of the
 * engines and the CLI come and go on their own; these are the metrics server's alone). */
static int tcp_sockets(pid_t pid)
{
	char path[64], link[64];
	unsigned long inodes[256];
	int n = 0, found = 0;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *dir = opendir(path);
	assert_non_null(dir);
	for (struct dirent *e; (e = readdir(dir)) && n < 256;) {
		char fd[400];
		snprintf(fd, sizeof(fd), "%s/%s", path, e->d_name);
		ssize_t len = readlink(fd, link, sizeof(link) - 1);
		if (len > 0) {
			link[len] = 0;
			if (sscanf(link, "socket:[%lu]", &inodes[n]) == 1)
				n++;
		}
	}
	closedir(dir);
	FILE *f = fopen("/proc/net/tcp", "r");
	assert_non_null(f);
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		unsigned long ino;
		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %lu", &ino) != 1)
			continue; /* the header */
		for (int i = 0; i < n; i++)
			found += ino && inodes[i] == ino;
	}
	fclose(f);
	return found;
}

static void expect_status(int port, const char *req, size_t len, const char *status)
{
	char resp[4096];
	assert_true(http(port, req, len, resp, sizeof(resp)) > 0);
	if (strncmp(resp, status, strlen(status)))
		fail_msg("'%.40s' answered '%.60s', want '%s'", req, resp, status);
}

#define TIER_USAGE                                                                                 \
	"usage: kvtier tier enable NAME (a lower tier disabled after device errors: nvme or "      \
	"rocksdb)\n"

/* Command lines the CLI and the benchmarks refuse: each gets its usage or its reason, with the
 * exit status the tools document, and nothing runs. */
static void test_operator_command_lines_refused(void **state)
{
	struct kvt_test_daemon d;
	const char *sets[] = {"tiers.order=host,nvme", "nvme.bytes=64MiB", NULL};
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	char none[2048];
	/* a wrong command line: its usage, one line, exit 1; the same from the daemon's side.
	 * The third word: the CLI tells it alone, before any connection (its shape is wrong). */
	static const char *const wrong[][3] = {
	    {"stats --bogus", "usage: kvtier stats [--json]\n", "alone"},
	    {"stats --json extra", "usage: kvtier stats [--json]\n", "alone"},
	    {"top --bogus", "usage: kvtier top [--interval SECONDS >= 0.1] [--count N]\n", "alone"},
	    {"top --interval 0.01", "usage: kvtier top [--interval SECONDS >= 0.1] [--count N]\n",
	     "alone"},
	    {"top --count x", "usage: kvtier top [--interval SECONDS >= 0.1] [--count N]\n",
	     "alone"},
	    /* NaN passed both comparisons and went to nanosleep */
	    {"top --interval nan", "usage: kvtier top [--interval SECONDS >= 0.1] [--count N]\n",
	     "alone"},
	    {"mrc", "usage: kvtier mrc TIER (host, nvme or rocksdb)\n", "alone"},
	    {"mrc host nvme", "usage: kvtier mrc TIER (host, nvme or rocksdb)\n", "alone"},
	    {"config set host.policy",
	     "usage: kvtier config get [NAME] | kvtier config set NAME VALUE | kvtier config "
	     "reload\n",
	     ""},
	    {"config",
	     "usage: kvtier config get [NAME] | kvtier config set NAME VALUE | kvtier "
	     "config reload\n",
	     "alone"},
	    {"policy set host", "usage: kvtier policy set TIER NAME [defaults] [k=v ...]\n", ""},
	    {"flush", "usage: kvtier flush all | NAMESPACE | tenant UID\n", "alone"},
	    /* a word too many was dropped: "flush all extra" flushed everything */
	    {"flush all extra", "usage: kvtier flush all | NAMESPACE | tenant UID\n", "alone"},
	    {"flush tenant", "usage: kvtier flush all | NAMESPACE | tenant UID\n", "alone"},
	    {"check extra", "usage: kvtier check\n", "alone"},
	    {"record", "usage: kvtier record FILE [SECONDS] (until Ctrl-C without SECONDS)\n",
	     "alone"},
	    {"record x.trace 0",
	     "usage: kvtier record FILE [SECONDS] (until Ctrl-C without "
	     "SECONDS)\n",
	     "alone"},
	    {"record x.trace nan",
	     "usage: kvtier record FILE [SECONDS] (until Ctrl-C without "
	     "SECONDS)\n",
	     "alone"},
	    {"record x.trace 1 extra",
	     "usage: kvtier record FILE [SECONDS] (until Ctrl-C "
	     "without SECONDS)\n",
	     "alone"},
	    {"policy get host nvme",
	     "usage: kvtier policy get TIER | kvtier policy set TIER NAME [defaults] [k=v ...]\n",
	     "alone"},
	    {"tier", TIER_USAGE, "alone"},
	    {"tier enable", TIER_USAGE, "alone"},
	    {"tier enable nvme rocksdb", TIER_USAGE, "alone"},
	    {"tier enable nosuch",
	     "kvtier: no tier named 'nosuch' here (kvtier stats lists them)\n", ""},
	    {"tier enable host",
	     "kvtier: host is never disabled (a lower tier is, after device errors: nvme or "
	     "rocksdb)\n",
	     ""}};
	/* with no daemon at the socket, a line of the wrong shape still gets its usage, not
	 * "cannot reach kvtierd" */
	struct kvt_test_daemon gone = d;
	snprintf(gone.sock, sizeof(gone.sock), "%s/no-daemon.sock", d.dir);
	for (size_t k = 0; k < sizeof(wrong) / sizeof(wrong[0]); k++) {
		assert_int_equal(kvt_test_cli(&d, wrong[k][0], none, sizeof(none)), 1);
		if (strcmp(none, wrong[k][1]))
			fail_msg("kvtier %s: '%s', want '%s'", wrong[k][0], none, wrong[k][1]);
		if (!*wrong[k][2])
			continue;
		assert_int_equal(kvt_test_cli(&gone, wrong[k][0], none, sizeof(none)), 1);
		if (strcmp(none, wrong[k][1]))
			fail_msg("kvtier %s, no daemon: '%s', want '%s'", wrong[k][0], none,
			         wrong[k][1]);
	}
	const char *unknown = "kvtier: unknown command 'nosuch'\nusage: kvtier ";
	assert_int_equal(kvt_test_cli(&gone, "nosuch", none, sizeof(none)), 1);
	assert_true(!strncmp(none, unknown, strlen(unknown)));
	assert_int_equal(kvt_test_cli(&gone, "tier enable nvme", none, sizeof(none)), 1);
	assert_non_null(strstr(none, "cannot reach kvtierd at"));
	/* --version: the CLI's own, and the daemon's when one answers (none is said, exit 0) */
	char ver[512], want[160];
	snprintf(want, sizeof(want), "kvtier %d.%d.%d (libkvtier %d.%d.%d, protocol %d)\n",
	         KVT_VERSION_MAJOR, KVT_VERSION_MINOR, KVT_VERSION_PATCH, KVT_VERSION_MAJOR,
	         KVT_VERSION_MINOR, KVT_VERSION_PATCH, KVT_PROTO_MAJOR);
	assert_int_equal(kvt_test_cli(&gone, "--version", none, sizeof(none)), 0);
	if (strncmp(none, want, strlen(want)) || !strstr(none, "kvtierd: none answers at "))
		fail_msg("kvtier --version, no daemon: '%s'", none);
	snprintf(ver, sizeof(ver), "kvtierd %d.%d.%d (protocol %d) at %s\n", KVT_VERSION_MAJOR,
	         KVT_VERSION_MINOR, KVT_VERSION_PATCH, KVT_PROTO_MAJOR, d.sock);
	assert_int_equal(kvt_test_cli(&d, "--version", none, sizeof(none)), 0);
	if (strncmp(none, want, strlen(want)) || strcmp(none + strlen(want), ver))
		fail_msg("kvtier --version: '%s', want '%s%s'", none, want, ver);
	assert_int_equal(kvt_test_cli(&d, "--version ping", none, sizeof(none)), 2);
	char bin[512], run[600];
	kvt_test_bin("kvtierd", bin, sizeof(bin));
	snprintf(run, sizeof(run), "%s --version", bin);
	FILE *p = popen(run, "r");
	assert_non_null(p);
	size_t got = fread(none, 1, sizeof(none) - 1, p);
	none[got] = 0;
	assert_int_equal(pclose(p), 0);
	snprintf(ver, sizeof(ver), "kvtierd %d.%d.%d (protocol %d)\n", KVT_VERSION_MAJOR,
	         KVT_VERSION_MINOR, KVT_VERSION_PATCH, KVT_PROTO_MAJOR);
	assert_string_equal(none, ver);
	/* and the benchmarks: a name or a word they do not know is refused before anything runs */
	assert_int_equal(kvt_test_cli(&d, "bench nosuch", none, sizeof(none)), 2);
	assert_non_null(strstr(none, "no benchmark named 'nosuch'\nusage: kvtier bench [NAME]"));
	/* the list, each with its baseline; each name in it is one cli_bench runs */
	static const char *const names[] = {"host",   "tiers", "nvme",  "rocksdb",
	                                    "policy", "quota", "trace", "gpu"};
	assert_int_equal(kvt_test_cli(&d, "bench --help", none, sizeof(none)), 0);
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		char line[32];
		snprintf(line, sizeof(line), "\n  %-8s ", names[k]);
		if (!strstr(none, line) || !strstr(strstr(none, line), "against"))
			fail_msg("kvtier bench --help has no line for %s:\n%s", names[k], none);
		/* and each one's --help, which that line points to, is its usage, not a refusal
		 * (six of the eight printed it on stderr and exited 2) */
		char cmd[32], own[2][32];
		snprintf(cmd, sizeof(cmd), "bench %s --help", names[k]);
		snprintf(own[0], sizeof(own[0]), "kvtier bench %s", names[k]);
		snprintf(own[1], sizeof(own[1]), "kvtier-bench-%s", names[k]);
		char help[4096];
		int rc = kvt_test_cli(&d, cmd, help, sizeof(help));
		if (rc || (!strstr(help, own[0]) && !strstr(help, own[1])))
			fail_msg("kvtier %s: exit %d, '%s'", cmd, rc, help);
	}
	assert_int_equal(kvt_test_cli(&d, "bench policy 1000 0", none, sizeof(none)), 2);
	assert_non_null(strstr(none, "usage: kvtier bench policy [OPS"));
	assert_int_equal(kvt_test_cli(&d, "bench policy 1000 64 lru --bogus", none, sizeof(none)),
	                 2);
	assert_non_null(strstr(none, "'--bogus' is not a policy, mrc, switch or minisim"));
	/* a list the nvme bench cannot run is refused (it ran with -1 MB/s raw columns at sizes
	 * O_DIRECT refuses, and with nothing at all for a word it skipped) */
	static const char *const nvme_bad[] = {"bench nvme --sizes 1000", "bench nvme --size x",
	                                       "bench nvme --qd 0", "bench nvme --mib-per-case x",
	                                       "bench nvme --backend spdk"};
	for (size_t k = 0; k < sizeof(nvme_bad) / sizeof(nvme_bad[0]); k++) {
		assert_int_equal(kvt_test_cli(&d, nvme_bad[k], none, sizeof(none)), 2);
		if (!strstr(none, "usage: kvtier bench nvme"))
			fail_msg("kvtier %s said '%s'", nvme_bad[k], none);
	}
	/* a size the tiers bench does not measure ran nothing, and one past 4 GiB was refused
	 * only after its daemon had started; a tolerance of "x" checked with 0; and the gpu
	 * bench's words are checked before it looks for a GPU (none here: exit 77) */
	static const char *const words_bad[][2] = {
	    {"bench tiers nvme 1000", "usage: kvtier bench tiers [nvme|rocksdb [256|2048|32768]]"},
	    {"bench tiers cascade 99999999999", "usage: kvtier bench tiers"},
	    {"bench trace --check x", "bench: --check 'x' is not a tolerance from 0 to 1"},
	    {"bench trace --check 0,", "bench: --check '0,' is not a tolerance from 0 to 1"},
	    {"bench trace --check 0,2", "bench: --check '0,2' is not a tolerance from 0 to 1"},
	    /* its usage was "see the top of tools/bench/bench_trace.c" */
	    {"bench trace --bogus 1", "bench: --bogus: unknown option\nusage: kvtier bench trace"},
	    {"bench trace --trace", "bench: --trace: needs a value\nusage: kvtier bench trace"},
	    /* the gpu bench ran 0 runs (rows of 0 GB/s), 0 seconds, and dropped a last word */
	    {"bench gpu --runs 0", "usage: kvtier bench gpu"},
	    {"bench gpu --seconds x", "usage: kvtier bench gpu"},
	    {"bench gpu --batch 64 --runs", "usage: kvtier bench gpu"}};
	for (size_t k = 0; k < sizeof(words_bad) / sizeof(words_bad[0]); k++) {
		assert_int_equal(kvt_test_cli(&d, words_bad[k][0], none, sizeof(none)), 2);
		if (strncmp(none, words_bad[k][1], strlen(words_bad[k][1])))
			fail_msg("kvtier %s said '%s'", words_bad[k][0], none);
	}
	/* and the rocksdb bench's counts and options (0 MiB ran a phase of one record, 0 reps
	 * one, and a host option was taken and not used) */
	static const char *const rdb_bad[][2] = {
	    {"bench rocksdb --mib 0", "bench: --mib 0: not a count of MiB from 1"},
	    {"bench rocksdb --reps 17", "bench: --reps 17: not a count from 1 to 16"},
	    {"bench rocksdb --set host.bytes=1MiB",
	     "bench: --set host.bytes=1MiB: not a rocksdb.* option"}};
	for (size_t k = 0; k < sizeof(rdb_bad) / sizeof(rdb_bad[0]); k++) {
		assert_int_equal(kvt_test_cli(&d, rdb_bad[k][0], none, sizeof(none)), 2);
		if (strncmp(none, rdb_bad[k][1], strlen(rdb_bad[k][1])))
			fail_msg("kvtier %s said '%s'", rdb_bad[k][0], none);
	}
	kvt_test_daemon_destroy(&d);
}

static void test_operator_bad_clients(void **state)
{
	struct kvt_test_daemon d;
	assert_int_equal(kvt_test_daemon_start(&d, NULL), 0);
	int port = (int)kvt_test_stat(&d, "metrics_port");
	assert_true(port > 0);
	assert_int_equal(tcp_sockets(d.pid), 1); /* the listener */

	expect_status(port, "POST /metrics HTTP/1.1\r\n\r\n", 26, "HTTP/1.1 405");
	expect_status(port, "GET /elsewhere HTTP/1.1\r\n\r\n", 27, "HTTP/1.1 404");
	expect_status(port, "GET /metricsx HTTP/1.1\r\n\r\n", 26, "HTTP/1.1 404");
	expect_status(port, "hello\r\n\r\n", 9, "HTTP/1.1 400");
	expect_status(port, "GET /metrics SMTP/2\r\n\r\n", 23, "HTTP/1.1 400");
	static const char nul[] = "GET /metrics\0 HTTP/1.1\r\n\r\n";
	expect_status(port, nul, sizeof(nul) - 1, "HTTP/1.1 400");
	static char big[8192];
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
	expect_status(port, big, sizeof(big), "HTTP/1.1 431");

	/* silent peers: more than the server's slots; each waits out its two seconds or gives
	 * way to a newer one, and a scrape in the middle of them is answered */
	int idle[20];
	for (int i = 0; i < 20; i++)
		idle[i] = dial(port);
	int half = dial(port);
	assert_int_equal(send(half, "GET /met", 8, MSG_NOSIGNAL), 8);
	char resp[1 << 16];
	const char get[] = "GET /metrics HTTP/1.1\r\n\r\n";
	assert_true(http(port, get, strlen(get), resp, sizeof(resp)) > 0);
	assert_non_null(strstr(resp, "HTTP/1.1 200 OK\r\n"));
	/* the half request is closed by the timeout (or given way): EOF, not an answer */
	char buf[64];
	assert_int_equal(read(half, buf, sizeof(buf)), 0);
	close(half);
	for (int i = 0; i < 20; i++)
		close(idle[i]);
	/* a peer that leaves mid-answer: the daemon goes on */
	int gone = dial(port);
	assert_int_equal(send(gone, get, strlen(get), MSG_NOSIGNAL), (ssize_t)strlen(get));
	close(gone);
	assert_true(http(port, get, strlen(get), resp, sizeof(resp)) > 0);
	assert_non_null(strstr(resp, "HTTP/1.1 200 OK\r\n"));

	/* no descriptor left behind once the slow peers have timed out */
	int socks = tcp_sockets(d.pid);
	for (int i = 0; i < 300 && socks > 1; i++) {
		usleep(10000);
		socks = tcp_sockets(d.pid);
	}
	assert_int_equal(socks, 1);
	assert_true(kvt_test_stat(&d, "metrics_port") == port);
	kvt_test_daemon_destroy(&d);
}

static void test_operator_listen_choices(void **state)
{
	struct kvt_test_daemon a, b;
	assert_int_equal(kvt_test_daemon_start(&a, NULL), 0);
	int port = (int)kvt_test_stat(&a, "metrics_port");
	assert_true(port > 0);
	/* an address the operator named that another daemon holds stops the start */
	char taken[64];
	snprintf(taken, sizeof(taken), "metrics.listen=127.0.0.1:%d", port);
	const char *clash[] = {taken, NULL};
	assert_true(kvt_test_daemon_start(&b, clash) != 0);
	kvt_test_daemon_destroy(&b);
	const char *bad[] = {"metrics.listen=localhost", NULL};
	assert_true(kvt_test_daemon_start(&b, bad) != 0);
	kvt_test_daemon_destroy(&b);
	const char *off[] = {"metrics.listen=off", NULL};
	assert_int_equal(kvt_test_daemon_start(&b, off), 0);
	assert_int_equal(kvt_test_stat(&b, "metrics_port"), 0);
	kvt_test_daemon_destroy(&b);
	kvt_test_daemon_destroy(&a);
}

/* kvtier top against a daemon serving hits: frames follow one another, with the hit rate. */
static void test_operator_top_shows_rates(void **state)
{
	struct kvt_test_daemon d;
	const char *sets[] = {"tiers.order=host,nvme", "nvme.bytes=64MiB", NULL};
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	kvt_client_t *c;
	assert_int_equal(kvt_connect(d.sock, &c), 0);
	kvt_id_t keys[8];
	put_ns(c, model.name, 8, keys);
	kvt_close(c);
	int stop[2]; /* the engine reads until top is done: its write end closes then */
	assert_int_equal(pipe(stop), 0);
	pid_t busy = fork();
	assert_true(busy >= 0);
	if (!busy) { /* an engine re-reading its prefix while top runs (for two seconds before,
		      * which a loaded machine could spend starting top: no frame saw a hit) */
		close(stop[1]);
		kvt_client_t *e;
		kvt_id_t ens;
		if (kvt_connect(d.sock, &e) || kvt_namespace(e, &model, &ens))
			_exit(1);
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		struct pollfd done = {.fd = stop[0], .events = POLLIN};
		do {
			kvt_lease_t l[8];
			int got = kvt_acquire(e, ens, keys, 8, l);
			if (got != 8 || kvt_release(e, l, 8) != 8)
				_exit(2);
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while (!poll(&done, 1, 0) && t.tv_sec - t0.tv_sec < 60);
		kvt_close(e);
		_exit(0);
	}
	close(stop[0]);
	static char out[1 << 15];
	assert_int_equal(kvt_test_cli(&d, "top --interval 0.3 --count 3", out, sizeof(out)), 0);
	close(stop[1]);
	int st;
	assert_int_equal(waitpid(busy, &st, 0), busy);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_non_null(strstr(out, "frame 3)"));
	assert_null(strstr(out, "frame 4)"));
	/* some frame saw the engine's hits: all of them hits, at a rate above zero */
	bool seen = false;
	for (const char *h = out; (h = strstr(h, "\nhost ")); h++) {
		char used[32], hit[16];
		long long chunks, hits;
		assert_int_equal(sscanf(h, "\nhost %31s %lld %15s %lld", used, &chunks, hit, &hits),
		                 4);
		assert_int_equal(chunks, 8);
		if (hits > 0) {
			assert_string_equal(hit, "100.0");
			seen = true;
		}
	}
	assert_true(seen);
	assert_non_null(strstr(out, "\nnvme "));
	/* and the acquires' latency: some frame counted them, p50 at or under p99 */
	seen = false;
	for (const char *l = out; (l = strstr(l, "acquire <=")); l++) {
		long long p50, p99, n;
		assert_int_equal(sscanf(l, "acquire <=%lldus / <=%lldus (%lld)", &p50, &p99, &n),
		                 3);
		assert_true(p50 <= p99 && n > 0);
		seen = true;
	}
	assert_true(seen);
	if (getenv("KVT_TEST_SHOW"))
		fprintf(stderr, "%s", out);
	/* stats: the same acquires since the start */
	assert_int_equal(kvt_test_cli(&d, "stats", out, sizeof(out)), 0);
	const char *a = strstr(out, "latency p50 / p99 / max (us): acquire ");
	assert_non_null(a);
	long long p50, p99, mx, n;
	assert_int_equal(sscanf(a + 38, "%lld / %lld / %lld (%lld)", &p50, &p99, &mx, &n), 4);
	assert_true(n > 0 && p50 <= p99 && p50 > 0);
	assert_true(p99 <= mx); /* a bucket's bound is clamped to the slowest seen */
	/* the one put: its p50 and p99 are its own time, not its bucket's bound (2000 beside a
	 * max of 1023 before) */
	const char *p = strstr(out, ", put ");
	assert_non_null(p);
	assert_int_equal(sscanf(p + 6, "%lld / %lld / %lld (%lld)", &p50, &p99, &mx, &n), 4);
	assert_true(n >= 1 && p99 <= mx && p50 <= p99);
	if (n == 1)
		assert_int_equal(p99, mx);
	assert_int_not_equal(kvt_test_cli(&d, "top --interval 0", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "usage: kvtier top"));
	kvt_test_daemon_destroy(&d);
}

/* `kvtier config get NAME`'s value, a number. */
static long long config_num(const struct kvt_test_daemon *d, const char *name)
{
	char cmd[128], out[512];
	snprintf(cmd, sizeof(cmd), "config get %s", name);
	assert_int_equal(kvt_test_cli(d, cmd, out, sizeof(out)), 0);
	const char *eq = strstr(out, " = ");
	assert_non_null(eq);
	return atoll(eq + 3);
}

/* Writes text over d's config file. */
static void write_config(const struct kvt_test_daemon *d, const char *text)
{
	FILE *f = fopen(d->config, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

/* Writes text over d's config file and sends SIGHUP. */
static void write_and_hup(const struct kvt_test_daemon *d, const char *text)
{
	write_config(d, text);
	assert_int_equal(kill(d->pid, SIGHUP), 0);
}

/* write_and_hup, then waits (5 s at most) until `config get client.hello_ms` reads hello_ms,
 * which every reload here changes. */
static void reload(const struct kvt_test_daemon *d, const char *text, long long hello_ms)
{
	write_and_hup(d, text);
	for (int i = 0; i < 500 && config_num(d, "client.hello_ms") != hello_ms; i++)
		usleep(10000);
	assert_int_equal(config_num(d, "client.hello_ms"), hello_ms);
}

/*
 * SIGHUP reloads the options (README, "The daemon"): read as a start reads them (defaults, the
 * --config file, KVTIER_* variables, --set), each run-time option that differs is set as `config
 * set` sets it (a policy switch keeps every chunk), one read at start only waits for a restart,
 * and a value set by `config set` since is what the file says again. A file with a value
 * refused, or one that does not parse, changes nothing; the daemon serves on. `kvtier config
 * reload` does the same and says what it did.
 */
static void test_operator_sighup_reloads(void **state)
{
	(void)state;
	struct kvt_test_daemon d;
	const char *sets[] = {"lease.timeout_ms=7000", NULL}; /* --set wins over the file */
	assert_int_equal(
	    kvt_test_daemon_start_config(
	        &d, "host.policy = arc\nclient.hello_ms = 3000\nnvme.queue_depth = 16\n", sets),
	    0);
	char out[512];
	assert_int_equal(kvt_test_cli(&d, "policy get host", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "host arc"));
	assert_int_equal(config_num(&d, "client.hello_ms"), 3000);
	{ /* a boolean reads as the whole listing writes it (it read 0 or 1) */
		char got[256];
		assert_int_equal(kvt_test_cli(&d, "config get rocksdb.wal", got, sizeof(got)), 0);
		assert_true(strstr(got, "rocksdb.wal = true") ||
		            strstr(got, "rocksdb.wal = false"));
	}
	kvt_client_t *c;
	assert_int_equal(kvt_connect(d.sock, &c), 0);
	kvt_id_t k[8];
	kvt_id_t ns = put_ns(c, "reload", 8, k);

	/* a policy, a run-time option, one read at start only, and the --set one */
	reload(&d,
	       "host.policy = s3fifo\nclient.hello_ms = 4000\nnvme.queue_depth = 64\n"
	       "lease.timeout_ms = 100\n",
	       4000);
	assert_int_equal(kvt_test_cli(&d, "policy get host", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "host s3fifo"));
	assert_int_equal(config_num(&d, "nvme.queue_depth"), 16); /* at the next start */
	assert_int_equal(config_num(&d, "lease.timeout_ms"), 7000);
	assert_int_equal(kvt_lookup(c, ns, k, 8), 8); /* the switch kept every chunk */

	/* a file with one value refused changes nothing (it applied the others one by one), and
	 * `kvtier config reload` says so and exits 1 */
	assert_int_equal(kvt_test_cli(&d, "config set client.hello_ms 9000", out, sizeof(out)), 0);
	assert_int_equal(config_num(&d, "client.hello_ms"), 9000);
	static char said[4096];
	write_config(&d, "host.policy = lru\nhost.admit = bogus\nclient.hello_ms = 4000\n");
	assert_int_equal(kvt_test_cli(&d, "config reload", said, sizeof(said)), 1);
	assert_non_null(strstr(said, "host.admit = 'bogus' refused: host.admit: 'bogus' is not"));
	assert_non_null(strstr(said, "1 refused; nothing changed"));
	assert_int_equal(config_num(&d, "client.hello_ms"), 9000);
	assert_int_equal(kvt_test_cli(&d, "policy get host", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "host s3fifo"));

	/* what `config set` changed since goes back to what a start would read; an option of a
	 * tier that does not run is recorded, as a start records it */
	write_config(&d, "host.policy = s3fifo\nclient.hello_ms = 4000\nnvme.policy = clock\n");
	assert_int_equal(kvt_test_cli(&d, "config reload", said, sizeof(said)), 0);
	assert_non_null(strstr(said, "config: client.hello_ms = 4000 (reload)"));
	assert_non_null(strstr(said, "config: nvme.policy = 'clock' (reload; no nvme tier runs)"));
	assert_non_null(strstr(said, "2 applied, 0 failed"));
	assert_int_equal(config_num(&d, "client.hello_ms"), 4000);
	assert_int_equal(kvt_test_cli(&d, "config get host.admit", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "host.admit = none"));

	/* a policy parameter `config set` gave, which the file does not set, goes back to its
	 * default, as a restart would have it (the policy is built anew, its chunks kept); one the
	 * file sets is set; a second read of the same file changes nothing */
	assert_int_equal(
	    kvt_test_cli(&d, "config set host.policy.small_ratio 0.3", out, sizeof(out)), 0);
	assert_int_equal(kvt_test_cli(&d, "policy get host", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "small_ratio=0.3 "));
	write_config(&d, "host.policy = s3fifo\nclient.hello_ms = 4000\n"
	                 "host.policy.move_threshold = 2\nnvme.policy = clock\n");
	assert_int_equal(kvt_test_cli(&d, "config reload", said, sizeof(said)), 0);
	assert_non_null(strstr(said, "1 applied, 0 failed"));
	assert_int_equal(kvt_test_cli(&d, "policy get host", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "host s3fifo small_ratio=0.1 move_threshold=2"));
	assert_int_equal(kvt_test_cli(&d, "config get host.policy_params", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy_params = move_threshold=2\n");
	assert_int_equal(kvt_lookup(c, ns, k, 8), 8);
	assert_int_equal(kvt_test_cli(&d, "config reload", said, sizeof(said)), 0);
	assert_non_null(strstr(said, "0 applied, 0 failed"));
	/* and `policy set host s3fifo defaults` unsets by hand */
	assert_int_equal(
	    kvt_test_cli(&d, "policy set host s3fifo defaults small_ratio=0.2", out, sizeof(out)),
	    0);
	assert_int_equal(kvt_test_cli(&d, "policy get host", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "host s3fifo small_ratio=0.2 move_threshold=1"));
	assert_int_equal(kvt_test_cli(&d, "config get host.policy_params", out, sizeof(out)), 0);
	assert_string_equal(out, "host.policy_params = small_ratio=0.2\n");
	assert_int_equal(kvt_lookup(c, ns, k, 8), 8);

	/* a file that does not parse: nothing changes, and the daemon serves on */
	write_and_hup(&d, "host.policy = lru\nclient.hello_ms = [\n");
	reload(&d, "host.policy = s3fifo\nclient.hello_ms = 5000\n", 5000); /* after that one */
	assert_int_equal(kvt_test_cli(&d, "policy get host", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "host s3fifo"));
	assert_int_equal(kvt_lookup(c, ns, k, 8), 8);
	kvt_close(c);
	int st = kvt_test_daemon_stop(&d, SIGTERM);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	kvt_test_daemon_destroy(&d);
}

static void test_operator_inspect_and_flush(void **state)
{
	struct kvt_test_daemon d;
	const char *sets[] = {"tiers.order=host,nvme", "nvme.bytes=64MiB", NULL};
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	kvt_client_t *c;
	assert_int_equal(kvt_connect(d.sock, &c), 0);
	kvt_id_t k1[6], k2[4];
	kvt_id_t ns1 = put_ns(c, "inspect-a", 6, k1), ns2 = put_ns(c, "inspect-b", 4, k2);
	assert_true(kvt_test_stat_wait(&d, "demoted", 10, 1) >= 10);
	char h1[33], h2[33], key[33], parent[33], cmd[128];
	kvt_test_hex(ns1, h1);
	kvt_test_hex(ns2, h2);
	static char out[1 << 15];

	/* namespaces: chunks, and where they are */
	assert_int_equal(kvt_test_cli(&d, "inspect", out, sizeof(out)), 0);
	unsigned long long chunks, host, nvme;
	char *l = strstr(out, h1);
	assert_non_null(l);
	assert_int_equal(sscanf(l + 32, "%*u %*u %*u %llu %llu %llu", &chunks, &host, &nvme), 3);
	assert_true(chunks == 6 && host == 6 && nvme == 6);
	assert_non_null(l = strstr(out, h2));
	assert_int_equal(sscanf(l + 32, "%*u %*u %*u %llu", &chunks), 1);
	assert_int_equal(chunks, 4);

	/* a namespace's chunks, shallowest first */
	snprintf(cmd, sizeof(cmd), "inspect %s", h1);
	assert_int_equal(kvt_test_cli(&d, cmd, out, sizeof(out)), 0);
	const char *p = out;
	for (unsigned i = 0; i < 6; i++) {
		kvt_test_hex(k1[i], key);
		assert_non_null(p = strstr(p, key));
		unsigned depth;
		assert_int_equal(sscanf(p + 32, "%u", &depth), 1);
		assert_int_equal(depth, i);
	}
	assert_non_null(strstr(out, "6 chunks, depth 0..5"));

	/* one chunk */
	kvt_test_hex(k1[3], key);
	kvt_test_hex(k1[2], parent);
	snprintf(cmd, sizeof(cmd), "inspect %s %s", h1, key);
	assert_int_equal(kvt_test_cli(&d, cmd, out, sizeof(out)), 0);
	char want[128];
	snprintf(want, sizeof(want), "depth      3 (parent %s)", parent);
	assert_non_null(strstr(out, want));
	snprintf(want, sizeof(want), "payload    %zu bytes", kvt_chunk_bytes(&model));
	assert_non_null(strstr(out, want));
	assert_non_null(strstr(out, "in         host,nvme\n"));
	assert_null(strstr(out, "kept"));
	assert_int_equal(kvt_keep(c, ns1, &k1[3], 1, 600000), 1); /* kvt_keep: for how long */
	assert_int_equal(kvt_test_cli(&d, cmd, out, sizeof(out)), 0);
	double more = 0;
	const char *kept = strstr(out, "kept       ");
	assert_non_null(kept);
	assert_int_equal(sscanf(kept + 11, "%lf s more", &more), 1);
	assert_true(more > 590 && more <= 600);
	snprintf(cmd, sizeof(cmd), "inspect %s %s", h2, key); /* the key, in the wrong namespace */
	assert_int_not_equal(kvt_test_cli(&d, cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "no such chunk"));
	assert_int_not_equal(kvt_test_cli(&d, "inspect 12345", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "usage: kvtier inspect"));

	/* flush a namespace while one of its chunks is leased: the lease stays good */
	kvt_lease_t lease;
	assert_int_equal(kvt_acquire(c, ns1, k1, 1, &lease), 1);
	uint8_t *expect = malloc(lease.len);
	kvt_test_fill(expect, lease.len, 100);
	snprintf(cmd, sizeof(cmd), "flush %s", h1);
	assert_int_equal(kvt_test_cli(&d, cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "flushed 6 chunks (1 leased"));
	assert_int_equal(kvt_lookup(c, ns1, k1, 6), 0);
	assert_int_equal(kvt_lookup(c, ns2, k2, 4), 4);
	assert_memory_equal(lease.data, expect, lease.len);
	assert_int_equal(kvt_release(c, &lease, 1), 1);
	free(expect);
	snprintf(cmd, sizeof(cmd), "inspect %s", h1);
	assert_int_not_equal(kvt_test_cli(&d, cmd, out, sizeof(out)), 0);
	assert_int_equal(kvt_test_stat_wait(&d, "chunks", 4, 0), 4);
	/* the nvme copies went too: after a restart only the other namespace comes back */
	kvt_test_daemon_stop(&d, SIGTERM);
	assert_int_equal(kvt_test_daemon_restart(&d, sets), 0);
	assert_int_equal(kvt_test_stat(&d, "recovered"), 4);

	/* the daemon itself refuses a word too many, as a client other than the CLI may send it
	 * ("flush all extra" flushed everything): nothing goes */
	static const char *const raw_bad[] = {"flush all extra", "flush tenant 0 extra",
	                                      "check extra"};
	kvt_client_t *raw;
	assert_int_equal(kvt_connect(d.sock, &raw), 0);
	for (size_t k = 0; k < sizeof(raw_bad) / sizeof(raw_bad[0]); k++) {
		assert_int_equal(
		    kvt__client_simple(raw, KVT_MSG_INSPECT, raw_bad[k], out, sizeof(out)),
		    -EINVAL);
		assert_non_null(strstr(out, "usage: kvtier "));
	}
	kvt_close(raw);
	assert_int_equal(kvt_test_stat(&d, "chunks"), 4);
	/* flush a tenant (ours: uid 0 or whoever runs the test) */
	snprintf(cmd, sizeof(cmd), "flush tenant %u", (unsigned)geteuid());
	assert_int_equal(kvt_test_cli(&d, cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "flushed 4 chunks"));
	assert_int_not_equal(kvt_test_cli(&d, "flush tenant 4000000000", out, sizeof(out)), 0);
	assert_int_not_equal(kvt_test_cli(&d, "flush", out, sizeof(out)), 0);
	assert_int_not_equal(kvt_test_cli(&d, "flush everything", out, sizeof(out)), 0);
	assert_int_equal(kvt_test_cli(&d, "flush all", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "flushed 0 chunks"));
	kvt_close(c);
	kvt_test_daemon_destroy(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_operator_scrape_matches_stats),
	    cmocka_unit_test(test_operator_command_lines_refused),
	    cmocka_unit_test(test_operator_bad_clients),
	    cmocka_unit_test(test_operator_listen_choices),
	    cmocka_unit_test(test_operator_top_shows_rates),
	    cmocka_unit_test(test_operator_inspect_and_flush),
	    cmocka_unit_test(test_operator_sighup_reloads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
