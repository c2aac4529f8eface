/*
 * bench_host.c -- kvtier bench host: the host tier through libkvtier against memcpy, measured
 * in the same run (the machines are shared and noisy; the ratios are what count).
 *
 *  get      batches of 32 chunks into private pre-faulted buffers, 1 and 2 client processes,
 *           against memcpy of the same bytes out of a pre-faulted memfd mapping (2 concurrent
 *           memcpys for the 2-process case)
 *  acquire  zero-copy acquire + release of a batch of 64: microseconds per chunk
 *  put      plain kvt_put and the reserve/commit path, against memcpy
 *  lookup   keys per second per client, batches of 64 prefix keys
 *  scale    --scale: 10^6 chunks of 4 KiB and 64 clients: metadata per chunk, get latency at
 *           10^3 and 10^6 chunks
 *  quota    --quota (as root): one tenant's put flood of 4 KiB chunks through a 512 MiB lru
 *           host while another tenant (uid 65534) holds 256 MiB of cold chunks under a
 *           guarantee of that size, against the same flood with no quota, in the same run
 *  keep     --keep: 20,000 chunks of 4 KiB kept (kvt_keep), then a put flood through a 512 MiB
 *           lru host: the flood's rate and the kept chunks left, against the same without keep
 *
 * Starts its own kvtierd (next to this binary) on a temporary socket unless --socket is given.
 */
#include "bench_util.h"
#include "core/util.h"
#include "ipc/client/simple.h"
#include "kvtier.h"
#include "ipc/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* memcpy of n chunks out of a pre-faulted memfd mapping. @return : GB/s. */
static double memcpy_gbps(size_t chunk, size_t n, int iters, void *const *dst)
{
	int fd = memfd_create("bench-baseline", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)(chunk * n)))
		die("memfd", -errno);
	uint8_t *src = mmap(NULL, chunk * n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	memset(src, 3, chunk * n);
	double t0 = now_s();
	for (int it = 0; it < iters; it++)
		for (size_t i = 0; i < n; i++)
			memcpy(dst[i], src + i * chunk, chunk);
	double dt = now_s() - t0;
	munmap(src, chunk * n);
	close(fd);
	return (double)chunk * (double)n * iters / dt / 1e9;
}

struct get_result {
	double gbps, base_gbps;
};

/* One process: put n chunks, then time gets (or the baseline). Writes GB/s to the pipe. */
static void get_worker(size_t chunk, int iters, int which, int wfd, int rfd, uint32_t salt)
{
	const size_t n = 32;
	void *dst[32];
	for (size_t i = 0; i < n; i++)
		dst[i] = prefaulted(chunk);
	double r = 0;
	char go;
	if (which == 0) {
		kvt_client_t *c;
		int rc = kvt_connect(sock, &c);
		if (rc)
			die("connect", rc);
		kvt_model_t m = model_of(chunk, salt);
		kvt_id_t ns, keys[32];
		if ((rc = kvt_namespace(c, &m, &ns)))
			die("namespace", rc);
		make_keys(ns, keys, n, salt);
		if ((rc = kvt_put(c, ns, NULL, keys, n, (const void *const *)dst, chunk)) != (int)n)
			die("put", rc);
		if ((rc = kvt_get(c, ns, keys, n, dst, chunk)) != (int)n) /* warm */
			die("get", rc);
		if (write(wfd, "r", 1) != 1 || read(rfd, &go, 1) != 1)
			die("sync", -EIO);
		double t0 = now_s();
		for (int it = 0; it < iters; it++)
			if ((rc = kvt_get(c, ns, keys, n, dst, chunk)) != (int)n)
				die("get", rc);
		r = (double)chunk * (double)n * iters / (now_s() - t0) / 1e9;
		kvt_close(c);
	} else {
		if (write(wfd, "r", 1) != 1 || read(rfd, &go, 1) != 1)
			die("sync", -EIO);
		r = memcpy_gbps(chunk, n, iters, dst);
	}
	if (write(wfd, &r, sizeof(r)) != sizeof(r))
		die("report", -EIO);
	_exit(0);
}

/* Runs `procs` workers at once. @return : aggregate GB/s. */
static double run_get(size_t chunk, int iters, int procs, int which)
{
	int up[2], down[2];
	if (pipe(up) || pipe(down))
		die("pipe", -errno);
	pid_t pids[8];
	for (int p = 0; p < procs; p++) {
		pids[p] = fork();
		if (!pids[p])
			get_worker(chunk, iters, which, up[1], down[0],
			           (uint32_t)(p + 1 + 10 * which));
	}
	char ch;
	for (int p = 0; p < procs; p++)
		if (read(up[0], &ch, 1) != 1)
			die("sync", -EIO);
	for (int p = 0; p < procs; p++)
		if (write(down[1], "g", 1) != 1)
			die("sync", -EIO);
	double sum = 0;
	for (int p = 0; p < procs; p++) {
		double r;
		if (read(up[0], &r, sizeof(r)) != sizeof(r))
			die("result", -EIO);
		sum += r;
	}
	for (int p = 0; p < procs; p++)
		waitpid(pids[p], NULL, 0);
	close(up[0]), close(up[1]), close(down[0]), close(down[1]);
	return sum;
}

static void bench_get(void)
{
	static const size_t sizes[] = {256u << 10, 2u << 20, 32u << 20};
	static const int iters[] = {200, 30, 3};
	printf("\n## get: batch of 32 chunks into private pre-faulted buffers\n\n");
	printf("| chunk | procs | kvt_get GB/s | memcpy GB/s | ratio |\n|---|---|---|---|---|\n");
	for (int s = 0; s < 3; s++) {
		for (int procs = 1; procs <= 2; procs++) {
			double g = run_get(sizes[s], iters[s], procs, 0);
			double b = run_get(sizes[s], iters[s], procs, 1);
			printf("| %zu KiB | %d | %.2f | %.2f | %.2f |\n", sizes[s] >> 10, procs, g,
			       b, g / b);
			fflush(stdout);
		}
	}
}

/* Cycles `bytes` of junk through the pool so that later puts land on pages the pool has
 * touched before: the steady state of a full cache (a cold pool pays a page fault and a page
 * clear per 4 KiB on first use; memfd pages are only allocated when used). */
static void warm_pool(kvt_client_t *c, uint64_t bytes)
{
	kvt_model_t m = model_of(8u << 20, 150);
	kvt_id_t ns, keys[16];
	int rc = kvt_namespace(c, &m, &ns);
	if (rc)
		die("namespace", rc);
	size_t cb = kvt_chunk_bytes(&m);
	void *src = prefaulted(cb);
	const void *ch[16];
	for (int i = 0; i < 16; i++)
		ch[i] = src;
	for (uint64_t done = 0, salt = 1000; done < bytes; done += 16 * cb, salt++) {
		make_keys(ns, keys, 16, (uint32_t)salt);
		if ((rc = kvt_put(c, ns, NULL, keys, 16, ch, cb)) != 16)
			die("warm", rc);
	}
	munmap(src, cb);
}

static void bench_put_acquire_lookup(void)
{
	static const size_t sizes[] = {256u << 10, 2u << 20, 32u << 20};
	kvt_client_t *c;
	int rc = kvt_connect(sock, &c);
	if (rc)
		die("connect", rc);
	warm_pool(c, 5ull << 29);
	printf("\n## put: batch of 32 chunks (plain kvt_put and reserve/commit) vs memcpy, "
	       "into a warm pool\n\n");
	printf(
	    "| chunk | kvt_put GB/s | reserve+commit GB/s | memcpy GB/s | put ratio | r/c ratio |\n"
	    "|---|---|---|---|---|---|\n");
	for (int s = 0; s < 3; s++) {
		size_t chunk = sizes[s], n = s == 2 ? 6 : 32;
		int iters = s == 0 ? 20 : s == 1 ? 6 : 3;
		void *src[32], *dst[32];
		for (size_t i = 0; i < n; i++)
			src[i] = prefaulted(chunk), dst[i] = prefaulted(chunk);
		kvt_model_t m = model_of(chunk, 100 + (uint32_t)s);
		kvt_id_t ns, *keys = malloc(sizeof(kvt_id_t) * n * (size_t)(2 * iters + 2));
		if ((rc = kvt_namespace(c, &m, &ns)))
			die("namespace", rc);
		make_keys(ns, keys, n * (size_t)(2 * iters + 2), 7);
		kvt_put(c, ns, NULL, keys, n, (const void *const *)src, chunk); /* warm staging */
		double t0 = now_s();
		for (int it = 1; it <= iters; it++)
			if ((rc = kvt_put(c, ns, NULL, keys + (size_t)it * n, n,
			                  (const void *const *)src, chunk)) != (int)n)
				die("put", rc);
		double put = (double)chunk * (double)n * iters / (now_s() - t0) / 1e9;
		t0 = now_s();
		for (int it = iters + 1; it <= 2 * iters; it++) {
			void *bufs[32];
			size_t done = 0;
			while (done < n) {
				int k = kvt_put_reserve(c, ns, n - done, bufs);
				if (k <= 0)
					die("reserve", k);
				for (int i = 0; i < k; i++) /* the engine's own copy (or DMA) */
					memcpy(bufs[i], src[done + (size_t)i], chunk);
				rc = kvt_put_commit(c, ns, NULL, keys + (size_t)it * n + done,
				                    (size_t)k);
				if (rc != k)
					die("commit", rc);
				done += (size_t)k;
			}
		}
		double rcm = (double)chunk * (double)n * iters / (now_s() - t0) / 1e9;
		double base = memcpy_gbps(chunk, n, iters, dst);
		printf("| %zu KiB | %.2f | %.2f | %.2f | %.2f | %.2f |\n", chunk >> 10, put, rcm,
		       base, put / base, rcm / base);
		fflush(stdout);
		for (size_t i = 0; i < n; i++)
			munmap(src[i], chunk), munmap(dst[i], chunk);
		free(keys);
		kvt_model_t mm = m;
		kvt_id_t *all = malloc(sizeof(kvt_id_t) * n * (size_t)(2 * iters + 2));
		make_keys(ns, all, n * (size_t)(2 * iters + 2), 7);
		kvt_delete(c, ns, all, n * (size_t)(2 * iters + 2));
		free(all);
		(void)mm;
	}

	/* acquire + release, batches of 64 small chunks */
	kvt_model_t m = model_of(64u << 10, 200);
	kvt_id_t ns, keys[64];
	if ((rc = kvt_namespace(c, &m, &ns)))
		die("namespace", rc);
	make_keys(ns, keys, 64, 9);
	size_t cb = kvt_chunk_bytes(&m);
	void *src[64];
	for (int i = 0; i < 64; i++)
		src[i] = prefaulted(cb);
	if ((rc = kvt_put(c, ns, NULL, keys, 64, (const void *const *)src, cb)) != 64)
		die("put", rc);
	kvt_lease_t l[64];
	const int iters = 2000;
	double t0 = now_s();
	for (int it = 0; it < iters; it++) {
		if ((rc = kvt_acquire(c, ns, keys, 64, l)) != 64)
			die("acquire", rc);
		if ((rc = kvt_release(c, l, 64)) != 64)
			die("release", rc);
	}
	double us = (now_s() - t0) * 1e6 / (iters * 64.0);
	printf("\n## acquire + release (zero-copy), batches of 64\n\n%.3f us per chunk "
	       "(target <= 5)\n",
	       us);
	/* lookup */
	t0 = now_s();
	const int liters = 20000;
	for (int it = 0; it < liters; it++)
		if ((rc = kvt_lookup(c, ns, keys, 64)) != 64)
			die("lookup", rc);
	double kps = liters * 64.0 / (now_s() - t0);
	printf("\n## lookup, batches of 64 prefix keys\n\n%.2f million keys/s per client (shared "
	       "lookup "
	       "table, no round trip)\n",
	       kps / 1e6);
	kvt_close(c);
}

static double get_latency_us(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n,
                             void *dst, size_t cb)
{
	/* one pass first, in batches: this client maps each pool page on first touch, and a
	 * latency that includes those page faults says nothing about the index */
	static void *warm[64];
	for (size_t i = 0; i < 64; i++)
		warm[i] = dst;
	for (size_t i = 0; i < n; i += 64)
		kvt_get(c, ns, keys + i, KVT_MIN(n - i, (size_t)64), warm, cb);
	const int iters = 20000;
	void *d1[1] = {dst};
	double t0 = now_s();
	for (int it = 0; it < iters; it++) {
		int rc = kvt_get(c, ns, &keys[(size_t)it * 7919 % n], 1, d1, cb);
		if (rc != 1)
			die("get", rc);
	}
	return (now_s() - t0) * 1e6 / iters;
}

/* Puts n chunks of model m in batches of 64 (fresh keys from salt). @return : chunks stored. */
static long put_flood(const kvt_model_t *m, long n, uint32_t salt, double *secs)
{
	kvt_client_t *c;
	kvt_id_t ns, keys[64];
	if (kvt_connect(sock, &c) || kvt_namespace(c, m, &ns))
		return -1;
	size_t cb = kvt_chunk_bytes(m);
	char *buf = calloc(1, cb);
	const void *ch[64];
	for (int i = 0; i < 64; i++)
		ch[i] = buf;
	long stored = 0;
	double t0 = now_s();
	for (long b = 0; buf && b < n / 64; b++) {
		make_keys(ns, keys, 64, salt + (uint32_t)b * 64);
		int rc = kvt_put(c, ns, NULL, keys, 64, ch, cb);
		stored += rc > 0 ? rc : 0;
	}
	*secs = now_s() - t0;
	free(buf);
	kvt_close(c);
	return stored;
}

/* The flood of a run: n fresh chunks of m put as fast as they go. @return : chunks per second;
 * dies naming what when the puts fail. */
static double flood_rate(const kvt_model_t *m, long n, const char *what)
{
	double secs;
	long got = put_flood(m, n, 1u << 24, &secs);
	if (got < 0)
		die(what, -EIO);
	return (double)got / secs;
}

/* A flood's puts while another tenant keeps its guarantee of cold chunks, against no quota. */
static void bench_quota(void)
{
	if (geteuid() != 0) {
		printf("quota: needs root (the other tenant runs as uid 65534); skipped\n");
		return;
	}
	enum { COLD = 40000, FLOOD = 200000 };
	kvt_model_t m = model_of(4096, 91);
	printf("\n# quota: %d puts of 4 KiB chunks through a 512 MiB lru host, another tenant's "
	       "%d cold chunks first\n",
	       FLOOD, COLD);
	printf("%-34s %12s %12s %10s\n", "", "chunks/s", "MB/s", "vs none");
	double base = 0;
	for (int q = 0; q < 2; q++) {
		const char *sets[] = {"host.policy=lru",
		                      q ? "tenant.quota=65534=256MiB/512MiB" : NULL, NULL};
		start_daemon_with("512MiB", sets);
		chmod(tmpdir, 0755); /* the other tenant's client connects as nobody */
		chmod(sock, 0666);
		pid_t o = fork();
		if (!o) {
			double s;
			_exit(setgid(65534) || setuid(65534) || put_flood(&m, COLD, 7, &s) < 0 ? 1
			                                                                       : 0);
		}
		int st;
		if (waitpid(o, &st, 0) != o || !WIFEXITED(st) || WEXITSTATUS(st))
			die("quota: the other tenant's puts", -EIO);
		double rate = flood_rate(&m, FLOOD, "quota: the flood");
		base = q ? base : rate;
		printf("%-34s %12.0f %12.1f %9.2fx\n",
		       q ? "65534 guaranteed 256 MiB" : "no quota (baseline)", rate,
		       rate * 4096 / 1e6, rate / base);
		stop_daemon();
	}
}

/* Connects as a client of model m with n keys from salt (the caller frees them). */
static kvt_id_t *client_with_keys(const kvt_model_t *m, long n, uint32_t salt, kvt_client_t **c,
                                  kvt_id_t *ns)
{
	if (kvt_connect(sock, c) || kvt_namespace(*c, m, ns))
		die("keep: connect", -EIO);
	kvt_id_t *keys = malloc(sizeof(*keys) * (size_t)n);
	if (!keys)
		die("keep: keys", -ENOMEM);
	make_keys(*ns, keys, (size_t)n, salt);
	return keys;
}

/* Puts n chunks of model m under keys from salt, keeps them when keep. @return : keeps/s. */
static double put_and_keep(const kvt_model_t *m, long n, uint32_t salt, bool keep)
{
	kvt_client_t *c;
	kvt_id_t ns, *keys = client_with_keys(m, n, salt, &c, &ns);
	size_t cb = kvt_chunk_bytes(m);
	char *buf = calloc(1, cb);
	const void *ch[64];
	for (int i = 0; i < 64; i++)
		ch[i] = buf;
	for (long b = 0; b < n; b += 64)
		if (kvt_put(c, ns, NULL, keys + b, (size_t)KVT_MIN(64, n - b), ch, cb) <= 0)
			die("keep: put", -EIO);
	double t0 = now_s();
	int kept = keep ? kvt_keep(c, ns, keys, (size_t)n, 600000) : 0;
	double dt = now_s() - t0;
	if (keep && kept != n)
		die("keep: kvt_keep", kept < 0 ? kept : -EIO);
	free(buf);
	free(keys);
	kvt_close(c);
	return keep ? (double)n / dt : 0;
}

/* How many of the n chunks under salt's keys host holds. */
static long left_at_host(const kvt_model_t *m, long n, uint32_t salt)
{
	kvt_client_t *c;
	kvt_id_t ns, *keys = client_with_keys(m, n, salt, &c, &ns);
	long left = 0;
	for (long i = 0; i < n; i++)
		left += kvt_lookup(c, ns, keys + i, 1) == 1;
	free(keys);
	kvt_close(c);
	return left;
}

/* A put flood while 20,000 chunks are kept, against the same flood with nothing kept. */
static void bench_keep(void)
{
	enum { KEPT = 20000, FLOOD = 200000 }; /* a 4 KiB chunk takes 8 KiB of host */
	kvt_model_t m = model_of(4096, 92);
	printf("\n# keep: %d chunks of 4 KiB (160 MiB of host) put, kept or not, then %d puts of "
	       "others "
	       "through a 512 MiB lru host\n",
	       KEPT, FLOOD);
	printf("%-22s %12s %9s %14s %10s\n", "", "flood ch/s", "vs none", "kept left", "keeps/s");
	double base = 0;
	for (int k = 0; k < 2; k++) {
		const char *sets[] = {"host.policy=lru", "host.keep_pct=50", NULL};
		start_daemon_with("512MiB", sets);
		double keeps = put_and_keep(&m, KEPT, 5, k);
		double rate = flood_rate(&m, FLOOD, "keep: the flood");
		base = k ? base : rate;
		long left = left_at_host(&m, KEPT, 5);
		printf("%-22s %12.0f %8.2fx %8ld/%d %10.0f\n",
		       k ? "20,000 kept" : "none (baseline)", rate, rate / base, left, KEPT, keeps);
		stop_daemon();
	}
}

static void bench_scale(void)
{
	const size_t total = 1000000, cb = 4096;
	kvt_client_t *c, *idle[64];
	int rc = kvt_connect(sock, &c);
	if (rc)
		die("connect", rc);
	for (int i = 0; i < 63; i++)
		if ((rc = kvt_connect(sock, &idle[i])))
			die("connect", rc);
	kvt_model_t m = model_of(cb, 300);
	kvt_id_t ns;
	if ((rc = kvt_namespace(c, &m, &ns)))
		die("namespace", rc);
	kvt_id_t *keys = malloc(sizeof(kvt_id_t) * total);
	make_keys(ns, keys, total, 11);
	uint8_t *buf = prefaulted(cb);
	const void *src[256];
	for (int i = 0; i < 256; i++)
		src[i] = buf;
	double lat3 = 0;
	for (size_t done = 0; done < total; done += 256) {
		if ((rc = kvt_put(c, ns, NULL, keys + done, 256, src, cb)) != 256)
			die("put", rc);
		if (done + 256 == 1024)
			lat3 = get_latency_us(c, ns, keys, 1024, buf, cb);
	}
	double lat6 = get_latency_us(c, ns, keys, total, buf, cb);
	long long chunks = stat_of(c, "chunks"), per = stat_of(c, "index_bytes_per_chunk");
	/* kvtier check walks the index, the pools and the policy; kvtier inspect, the baseline,
	 * walks the index once (it lists the namespaces) */
	static char out[8192];
	double t0 = now_s();
	int inspected = kvt__client_simple(c, KVT_MSG_INSPECT, "inspect", out, sizeof(out));
	double t_inspect = now_s() - t0;
	t0 = now_s();
	int checked = kvt__client_simple(c, KVT_MSG_INSPECT, "check", out, sizeof(out));
	double t_check = now_s() - t0;
	if (inspected || checked)
		die("inspect or check", inspected ? inspected : checked);
	printf("\n## scale: 10^6 chunks of 4 KiB, 64 connected clients\n\n"
	       "chunks indexed %lld, daemon metadata %lld bytes per chunk (target <= 128)\n"
	       "get latency (1 chunk): %.2f us at 10^3 chunks, %.2f us at 10^6 chunks\n"
	       "kvtier check: %.1f ms (kvtier inspect, one walk of the index: %.1f ms)\n",
	       chunks, per, lat3, lat6, t_check * 1e3, t_inspect * 1e3);
	for (int i = 0; i < 63; i++)
		kvt_close(idle[i]);
	kvt_close(c);
	free(keys);
}

#define USAGE "usage: kvtier bench host [--scale|--scale-only|--quota|--keep] [--socket PATH]\n"

int main(int argc, char **argv)
{
	int scale = 0, only_scale = 0, quota = 0, keep = 0;
	const char *given = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--scale"))
			scale = 1;
		else if (!strcmp(argv[i], "--scale-only"))
			scale = only_scale = 1;
		else if (!strcmp(argv[i], "--quota"))
			quota = only_scale = 1;
		else if (!strcmp(argv[i], "--keep"))
			keep = only_scale = 1;
		else if (!strcmp(argv[i], "--socket") && i + 1 < argc)
			given = argv[++i];
		else {
			bool help = kvt_help_asked(argc, argv);
			fputs(USAGE, help ? stdout : stderr);
			return help ? 0 : 2;
		}
	}
	if (given)
		snprintf(sock, sizeof(sock), "%s", given);
	printf("# kvtier bench host (%ld cores)\n", sysconf(_SC_NPROCESSORS_ONLN));
	if (!only_scale) {
		if (!given)
			start_daemon_with("3GiB", NULL);
		bench_get();
		if (!given) {
			stop_daemon();
			start_daemon_with("2GiB", NULL);
		}
		bench_put_acquire_lookup();
		if (!given)
			stop_daemon();
	}
	if (scale) {
		if (!given)
			start_daemon_with("8GiB", NULL);
		bench_scale();
		if (!given)
			stop_daemon();
	}
	if (quota && !given)
		bench_quota();
	if (keep && !given)
		bench_keep();
	return 0;
}
