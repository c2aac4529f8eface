/*
 * test_metrics.c -- the operator's live views of kvtierd. `kvtier top` shows the hit rate of a
 * busy engine. The Prometheus endpoint (metrics.listen), over real TCP: the scrape is
 * in the text format (a # TYPE line once per family, before its samples; counters end in
 * _total; every value a number), carries the same numbers as `kvtier stats --json`, and bad or
 * slow HTTP clients get an error status or a closed socket while the daemon keeps serving and
 * leaks no descriptor. An address that cannot be bound stops the start when the operator chose
 * it.
 */
#include "testlib.h"
#include "kvtier.h"
#include "put_chain.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	char cur[112] = "";
	for (const char *l = body; *l; l = strchr(l, '\n') + 1) {
		const char *e = strchr(l, '\n');
		assert_non_null(e); /* every line ends */
		char line[512];
		snprintf(line, sizeof(line), "%.*s", (int)(e - l), l);
		if (!strncmp(line, "# TYPE ", 7)) {
			char name[96], type[16];
			assert_int_equal(sscanf(line + 7, "%95s %15s", name, type), 2);
			assert_true(!strcmp(type, "counter") || !strcmp(type, "gauge"));
			for (int i = 0; i < nf; i++)
				assert_string_not_equal(families[i], name); /* once per family */
			assert_true(nf < 256);
			snprintf(families[nf++], sizeof(families[0]), "%s", name);
			snprintf(cur, sizeof(cur), "%s%s", name,
			         strcmp(type, "counter") ? "" : "_total");
			continue;
		}
		assert_true(line[0] != '#');
		size_t nl = strcspn(line, "{ ");
		assert_true(nl > 7 && !strncmp(line, "kvtier_", 7));
		char name[96];
		snprintf(name, sizeof(name), "%.*s", (int)nl, line);
		assert_string_equal(name, cur); /* under its family's TYPE line */
		const char *v = strrchr(line, ' ');
		assert_non_null(v);
		char *end;
		strtod(v + 1, &end);
		assert_true(end != v + 1 && *end == 0);
		if (line[nl] == '{')
			assert_non_null(strstr(line, "\"} ")); /* labels close before the value */
		samples++;
	}
	return samples;
}

static const kvt_model_t model = {.name = "metrics",
                                  .dtype = KVT_DTYPE_F16,
                                  .n_layers = 1,
                                  .n_kv_heads = 8,
                                  .head_dim = 128,
                                  .tokens_per_chunk = 16};

static void test_metrics_scrape_matches_stats(void **state)
{
	struct kvt_test_daemon d;
	const char *sets[] = {"tiers.order=host,nvme", "nvme.bytes=64MiB", "nvme.quota=4242=0/8MiB",
	                      NULL};
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	int port = (int)kvt_test_stat(&d, "metrics_port");
	assert_true(port > 0);
	kvt_client_t *c;
	assert_int_equal(kvt_connect(d.sock, &c), 0);
	kvt_id_t ns, keys[12];
	assert_int_equal(kvt_namespace(c, &model, &ns), 0);
	uint32_t toks[12 * 16];
	for (size_t i = 0; i < 12 * 16; i++)
		toks[i] = (uint32_t)i * 7 + 1;
	assert_int_equal(kvt_chunk_keys(ns, toks, 12 * 16, 16, keys, 12), 12);
	kvt_test_put_chain(c, ns, keys, 8, kvt_chunk_bytes(&model), 1);
	assert_int_equal(kvt_lookup(c, ns, keys, 12), 8);
	kvt_lease_t l[8];
	assert_int_equal(kvt_acquire(c, ns, keys, 8, l), 8);
	assert_int_equal(kvt_release(c, l, 8), 8); /* all 8 were valid */
	assert_true(kvt_test_stat_wait(&d, "demoted", 8, 1) >= 8);

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
	assert_int_equal(sample(body, "kvtier_demoted_total"), kvt_test_stat(&d, "demoted"));
	assert_int_equal(sample(body, "kvtier_tier_writes_total{tier=\"nvme\"}"),
	                 kvt_test_stat(&d, "writes"));
	assert_int_equal(sample(body, "kvtier_tier_capacity_bytes{tier=\"host\"}"), 64ll << 20);
	assert_int_equal(sample(body, "kvtier_metrics_port"), port);
	assert_int_equal(
	    sample(body, "kvtier_tier_tenant_max_bytes{tier=\"nvme\",tenant=\"4242\"}"), 8ll << 20);
	assert_non_null(strstr(body, "\nkvtier_tier_info{tier=\"host\",policy=\"lru\"} 1\n"));
	assert_non_null(strstr(body, "\nkvtier_build_info{version=\""));
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
	kvt_close(c);
	kvt_test_daemon_destroy(&d);
}

static void expect_status(int port, const char *req, size_t len, const char *status)
{
	char resp[4096];
	assert_true(http(port, req, len, resp, sizeof(resp)) > 0);
	if (strncmp(resp, status, strlen(status)))
		fail_msg("'%.40s' answered '%.60s', want '%s'", req, resp, status);
}

static void test_metrics_bad_clients(void **state)
{
	struct kvt_test_daemon d;
	assert_int_equal(kvt_test_daemon_start(&d, NULL), 0);
	int port = (int)kvt_test_stat(&d, "metrics_port");
	assert_true(port > 0);
	int fds0 = kvt_test_fd_count(d.pid);

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
	int fds = kvt_test_fd_count(d.pid);
	for (int i = 0; i < 300 && fds > fds0; i++) {
		usleep(10000);
		fds = kvt_test_fd_count(d.pid);
	}
	assert_int_equal(fds, fds0);
	assert_true(kvt_test_stat(&d, "metrics_port") == port);
	kvt_test_daemon_destroy(&d);
}

static void test_metrics_listen_choices(void **state)
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
static void test_metrics_top_shows_rates(void **state)
{
	struct kvt_test_daemon d;
	const char *sets[] = {"tiers.order=host,nvme", "nvme.bytes=64MiB", NULL};
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	kvt_client_t *c;
	assert_int_equal(kvt_connect(d.sock, &c), 0);
	kvt_id_t ns, keys[8];
	assert_int_equal(kvt_namespace(c, &model, &ns), 0);
	uint32_t toks[8 * 16];
	for (size_t i = 0; i < 8 * 16; i++)
		toks[i] = (uint32_t)i * 5 + 3;
	assert_int_equal(kvt_chunk_keys(ns, toks, 8 * 16, 16, keys, 8), 8);
	kvt_test_put_chain(c, ns, keys, 8, kvt_chunk_bytes(&model), 7);
	kvt_close(c);
	pid_t busy = fork();
	assert_true(busy >= 0);
	if (!busy) { /* an engine re-reading its prefix for two seconds */
		kvt_client_t *e;
		kvt_id_t ens;
		if (kvt_connect(d.sock, &e) || kvt_namespace(e, &model, &ens))
			_exit(1);
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			kvt_lease_t l[8];
			int got = kvt_acquire(e, ens, keys, 8, l);
			if (got != 8 || kvt_release(e, l, 8) != 8)
				_exit(2);
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while (t.tv_sec - t0.tv_sec < 2);
		kvt_close(e);
		_exit(0);
	}
	static char out[1 << 15];
	assert_int_equal(kvt_test_cli(&d, "top --interval 0.3 --count 3", out, sizeof(out)), 0);
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
	assert_int_not_equal(kvt_test_cli(&d, "top --interval 0", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "usage: kvtier top"));
	kvt_test_daemon_destroy(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_metrics_scrape_matches_stats),
	    cmocka_unit_test(test_metrics_bad_clients),
	    cmocka_unit_test(test_metrics_listen_choices),
	    cmocka_unit_test(test_metrics_top_shows_rates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
