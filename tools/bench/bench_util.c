/* bench_util.c -- see bench_util.h. */
#include "bench_util.h"
#include "ipc/client/simple.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char sock[108];
char tmpdir[64];
pid_t daemon_pid;

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void die(const char *what, int rc)
{
	fprintf(stderr, "bench: %s: %s\n", what, kvt_strerror(rc));
	if (daemon_pid > 0)
		kill(daemon_pid, SIGKILL);
	exit(1);
}

void make_tmpdir(void)
{
	if (tmpdir[0])
		return;
	/* under /var/tmp: the same filesystem as the project's disk, not a tmpfs */
	snprintf(tmpdir, sizeof(tmpdir), "/var/tmp/kvt-bench-XXXXXX");
	if (!mkdtemp(tmpdir))
		die("mkdtemp", -errno);
}

void bin_path(const char *name, char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		die("readlink", -errno);
	self[n] = 0;
	snprintf(out, len, "%s/%s", dirname(self), name);
}

void start_daemon_with(const char *host_bytes, const char *const *sets)
{
	char bin[PATH_MAX + 16], set[64];
	bin_path("kvtierd", bin, sizeof(bin));
	make_tmpdir();
	snprintf(sock, sizeof(sock), "%s/s", tmpdir);
	snprintf(set, sizeof(set), "host.bytes=%s", host_bytes);
	const char *argv[32] = {bin,          "--socket", sock,
	                        "--data-dir", tmpdir,     "--set",
	                        set,          "--set",    "client.staging_bytes=256MiB"};
	int k = 9;
	argv[k++] = "--set"; /* a bench names the tiers it measures */
	argv[k++] = "tiers.order=host";
	argv[k++] = "--set";
	argv[k++] = "metrics.listen=off";
	for (int i = 0; sets && sets[i] && k < 28; i++) {
		argv[k++] = "--set";
		argv[k++] = sets[i];
	}
	const char *extra = getenv("BENCH_SET"); /* one more, last: what a comparison changes */
	if (extra && *extra) {                   /* set but empty: none */
		argv[k++] = "--set";
		argv[k++] = extra;
	}
	argv[k] = NULL;
	daemon_pid = fork();
	if (!daemon_pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int null = open(getenv("BENCH_LOG") ? getenv("BENCH_LOG") : "/dev/null",
		                O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(null, 1);
		dup2(null, 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 2000; i++) {
		kvt_client_t *c;
		if (!kvt_connect(sock, &c)) {
			kvt_close(c);
			return;
		}
		int st;
		if (waitpid(daemon_pid, &st, WNOHANG) == daemon_pid) { /* refused its options */
			daemon_pid = 0;
			fprintf(stderr, "bench: kvtierd exited with %d before it served (%s)\n",
			        WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
			        getenv("BENCH_LOG") ? "its log is $BENCH_LOG"
			                            : "set BENCH_LOG=FILE for its log");
			die("kvtierd did not start", -ECHILD);
		}
		usleep(5000);
	}
	die("kvtierd did not start", -ETIMEDOUT);
}

void stop_daemon(void)
{
	if (daemon_pid <= 0)
		return;
	kill(daemon_pid, SIGTERM);
	waitpid(daemon_pid, NULL, 0);
	daemon_pid = 0;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd))
		fprintf(stderr, "bench: could not remove %s\n", tmpdir);
	tmpdir[0] = 0;
}

kvt_model_t model_of(size_t bytes, uint32_t salt)
{
	static char names[8][32];
	snprintf(names[salt % 8], 32, "bench-%u", salt);
	kvt_model_t m = {.name = names[salt % 8],
	                 .dtype = KVT_DTYPE_F16,
	                 .n_layers = 1,
	                 .n_kv_heads = 1,
	                 .tokens_per_chunk = 16};
	if (bytes >= (64u << 10)) {
		m.n_kv_heads = 8, m.head_dim = 128, m.n_layers = (uint32_t)(bytes >> 16);
	} else {
		m.head_dim = (uint32_t)(bytes / (2 * 16 * 2));
	}
	return m;
}

void make_keys(kvt_id_t ns, kvt_id_t *keys, size_t n, uint32_t salt)
{
	uint32_t *toks = malloc(n * 16 * sizeof(uint32_t));
	for (size_t i = 0; i < n * 16; i++)
		toks[i] = (uint32_t)i * 2654435761u + salt;
	kvt_chunk_keys(ns, toks, n * 16, 16, keys, n);
	free(toks);
}

void *prefaulted(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap", -errno);
	memset(p, 1, bytes);
	return p;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void sort_doubles(double *v, size_t n)
{
	qsort(v, n, sizeof(double), cmp_double);
}

void pctl_ms(double *v, size_t n, double *p50, double *p99)
{
	sort_doubles(v, n);
	*p50 = n ? v[n / 2] * 1e3 : 0;
	*p99 = n ? v[n * 99 / 100] * 1e3 : 0;
}

int settle(kvt_client_t *c)
{
	return kvt__client_simple(c, 9 /* KVT_MSG_PING */, NULL, NULL, 0);
}

long long stat_of(kvt_client_t *c, const char *key)
{
	return tier_stat_of(c, NULL, key);
}

const char *stats_fetch(kvt_client_t *c)
{
	static char json[65536];
	if (kvt__client_simple(c, 8 /* KVT_MSG_STATS */, NULL, json, sizeof(json)) < 0)
		return NULL;
	return json;
}

long long stat_in(const char *json, const char *tier, const char *key)
{
	char pat[64];
	const char *from = json;
	if (!json)
		return -1;
	if (tier) {
		snprintf(pat, sizeof(pat), "{\"name\":\"%s\"", tier);
		if (!(from = strstr(json, pat)))
			return -1;
	}
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(from, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

long long tier_stat_of(kvt_client_t *c, const char *tier, const char *key)
{
	return stat_in(stats_fetch(c), tier, key);
}
