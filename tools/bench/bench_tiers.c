/*
 * bench_tiers.c -- kvtier bench tiers: the persistent tiers end to end, through the daemon.
 *
 * For each tier (nvme, rocksdb) and chunk size: put enough chunks to overflow a small host tier
 * and time until every chunk is acknowledged as demoted (demotion throughput, end to end: the
 * engine's puts and the tier's writes share the machine), and separately the rate at which the
 * backlog left in host when the last put returns is drained (the tier's writes alone), with the
 * share of the phase the tier worker was busy; then get the whole prefix back with one kvt_get
 * (the library works in batches of up to 64 chunks, 64 MiB or a quarter of host: each is promoted
 * from the tier into host and copied into the client's buffers while the next is prefetched); then
 * single-chunk gets of chunks only in the tier, each right after a raw QD1 read of the same size,
 * so that both latency series see the same device and machine noise (p50, p99). Baseline, in the
 * same run and on the same filesystem (/var/tmp): O_DIRECT writes and reads of the same bytes
 * and block size, one thread (QD1) and 8 threads (QD8) with pread/pwrite.
 *
 * usage: kvtier-bench-tiers [nvme|rocksdb [256|2048|32768]]
 *        kvtier-bench-tiers cascade [CHUNK_KIB]   (tiers.placement, below)
 *        kvtier-bench-tiers busy [CHUNK_KIB]      (gets while the tiers write, below)
 */
#include "bench_util.h"
#include "core/util.h"

#include <stdbool.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BATCH_MAX 32

struct raw_job {
	int fd;
	size_t block, blocks;
	int writer, threads, me;
};

static void *raw_thread(void *arg)
{
	struct raw_job *j = arg;
	void *buf;
	if (posix_memalign(&buf, 4096, j->block))
		return NULL;
	memset(buf, 7, j->block);
	for (size_t b = (size_t)j->me; b < j->blocks; b += (size_t)j->threads) {
		ssize_t n = j->writer ? pwrite(j->fd, buf, j->block, (off_t)(b * j->block))
		                      : pread(j->fd, buf, j->block, (off_t)(b * j->block));
		if (n != (ssize_t)j->block)
			die("raw I/O", n < 0 ? -errno : -EIO);
	}
	free(buf);
	return NULL;
}

/* Raw O_DIRECT pass over a file of blocks x block with threads threads. @return : GB/s. */
static double raw_pass(const char *path, size_t block, size_t blocks, int writer, int threads)
{
	int fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
	if (fd < 0)
		die("open raw file", -errno);
	pthread_t th[8];
	struct raw_job jobs[8];
	double t0 = now_s();
	for (int i = 0; i < threads; i++) {
		jobs[i] = (struct raw_job){fd, block, blocks, writer, threads, i};
		pthread_create(&th[i], NULL, raw_thread, &jobs[i]);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	if (writer)
		fdatasync(fd);
	double gbps = (double)block * (double)blocks / (now_s() - t0) / 1e9;
	close(fd);
	return gbps;
}

/*
 * Writes the whole file once (O_DIRECT, 8 MiB at a time), as storage benchmarks precondition a
 * device: the tier then overwrites allocated blocks, like the raw QD8 pass, which follows the
 * QD1 pass over the same file. Without it the tier's first writes land in the fallocated,
 * unwritten extents of a fresh file, and ext4 converts each extent as it is written.
 */
static void precondition(const char *path, size_t bytes)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_DIRECT, 0600);
	void *buf;
	if (fd < 0 || posix_memalign(&buf, 4096, 8u << 20))
		die("precondition", -errno);
	memset(buf, 0, 8u << 20);
	for (size_t off = 0; off < bytes; off += 8u << 20)
		if (pwrite(fd, buf, 8u << 20, (off_t)off) != 8 << 20)
			die("precondition", -errno);
	fdatasync(fd);
	free(buf);
	close(fd);
}

/* A client of the running daemon, the namespace of chunk-sized chunks, and n keys (salt). */
static kvt_client_t *attach(size_t chunk, size_t n, uint32_t salt, kvt_id_t *ns, kvt_id_t **keys)
{
	kvt_client_t *c;
	int rc = kvt_connect(sock, &c);
	if (rc)
		die("connect", rc);
	kvt_model_t m = model_of(chunk, 1);
	if ((rc = kvt_namespace(c, &m, ns)))
		die("namespace", rc);
	if (!(*keys = malloc(n * sizeof(kvt_id_t))))
		die("malloc", -ENOMEM);
	make_keys(*ns, *keys, n, salt);
	return c;
}

/* Puts keys[0..n) as one prefix, batch chunks a call (the bytes of ch), as an engine puts a
 * prompt's chunks; waits while host is full of chunks still being demoted (-EAGAIN). */
static void put_prefix(kvt_client_t *c, kvt_id_t ns, const kvt_id_t *keys, size_t n,
                       const void *const *ch, size_t batch, size_t chunk)
{
	for (size_t i = 0; i < n;) {
		size_t k = KVT_MIN(batch, n - i);
		int rc = kvt_put(c, ns, i ? &keys[i - 1] : NULL, &keys[i], k, ch, chunk);
		if (rc == -EAGAIN) {
			usleep(200);
			continue;
		}
		if (rc <= 0)
			die("put", rc);
		i += (size_t)rc;
	}
}

/* Waits until every chunk was demoted or failed to be. @return : how many failed. */
static long long wait_demoted(kvt_client_t *c, long long want)
{
	for (int i = 0; i < 240000; i++) {
		long long ok = stat_of(c, "demoted"), failed = stat_of(c, "demote_failed");
		if (ok + failed >= want)
			return failed;
		usleep(500);
	}
	die("demotion did not finish", -ETIMEDOUT);
}

static void bench_one(const char *tier, size_t chunk, size_t total_bytes)
{
	size_t n = total_bytes / chunk;
	char order[64];
	snprintf(order, sizeof(order), "tiers.order=host,%s", tier);
	const char *sets[] = {order, "nvme.bytes=4GiB", "rocksdb.bytes=4GiB", NULL};
	if (!strcmp(tier, "nvme")) { /* written once, as the raw baseline's file is before QD8 */
		make_tmpdir();
		char path[128];
		snprintf(path, sizeof(path), "%s/nvme.dat", tmpdir);
		precondition(path, (size_t)4 << 30);
	}
	start_daemon_with("256MiB", sets);
	kvt_id_t ns, *keys;
	kvt_client_t *c = attach(chunk, n, 3, &ns, &keys);
	int rc;
	const size_t batch = KVT_MIN((size_t)BATCH_MAX, KVT_MAX((size_t)1, (64u << 20) / chunk));
	void *bufs[BATCH_MAX];
	for (size_t i = 0; i < batch; i++)
		bufs[i] = prefaulted(chunk);

	const void *ch[BATCH_MAX];
	for (size_t i = 0; i < batch; i++)
		ch[i] = bufs[i];
	/* The pool's first pass, host's size of other chunks: its pages are faulted in and pinned
	 * for the tier's I/O as they are first used, once in a daemon's life (until 2026-12 every
	 * tenant's pool was pinned whole at its first hello, so the timed pass below found it so).
	 * Timed and printed after the table, not in it; the timed pass starts 5 s after it. */
	size_t wn = (256u << 20) / chunk;
	kvt_id_t *wkeys = malloc(wn * sizeof(kvt_id_t));
	if (!wkeys)
		die("malloc", -ENOMEM);
	make_keys(ns, wkeys, wn, 4);
	double w0 = now_s();
	put_prefix(c, ns, wkeys, wn, ch, batch, chunk);
	if (wait_demoted(c, (long long)wn))
		die("first pass", -EIO);
	double first = (double)chunk * (double)wn / (now_s() - w0) / 1e9;
	sleep(5); /* the kernel's work after the pins (pages moved) ends first */
	free(wkeys);

	long long busy0 = stat_of(c, "busy_us");
	double t0 = now_s();
	put_prefix(c, ns, keys, n, ch, batch, chunk);
	/* the backlog left when the last put returns is drained with nothing else running: the
	 * tier's own write rate inside the daemon */
	double t_puts = now_s();
	long long backlog = (long long)(n + wn) - stat_of(c, "demoted");
	long long failed = wait_demoted(c, (long long)(n + wn));
	if (failed)
		fprintf(stderr, "%s %zu KiB: %lld demotions failed\n", tier, chunk >> 10, failed);
	double t_end = now_s(), demote_s = t_end - t0;
	double demote = (double)chunk * (double)n / demote_s / 1e9;
	double drain = (double)chunk * (double)backlog / (t_end - t_puts) / 1e9;
	double busy = (double)(stat_of(c, "busy_us") - busy0) / 1e6 / demote_s;

	void **dst = malloc(n * sizeof(void *)); /* the whole prefix in one call, as an engine */
	for (size_t i = 0; i < n; i++)
		dst[i] = bufs[i % batch];
	t0 = now_s();
	if ((rc = kvt_get(c, ns, keys, n, dst, chunk)) <= 0)
		die("get", rc);
	double get = (double)chunk * (double)rc / (now_s() - t0) / 1e9;
	if (rc != (int)n)
		fprintf(stderr, "%s %zu KiB: got %d of %zu chunks\n", tier, chunk >> 10, rc, n);
	free(dst);
	long long promoted = stat_of(c, "promoted");

	char raw[128];
	snprintf(raw, sizeof(raw), "%s/raw.dat", tmpdir);
	double rw1 = raw_pass(raw, chunk, n, 1, 1);
	double rw8 = raw_pass(raw, chunk, n, 1, 8);
	double rr1 = raw_pass(raw, chunk, n, 0, 1);
	double rr8 = raw_pass(raw, chunk, n, 0, 8);

	/* Latency, interleaved so that both see the same device and machine noise: a raw QD1
	 * read of block j, then a single-chunk get of chunk j. Chunks are taken in order, so each
	 * was evicted from host (1 GiB of chunks, 256 MiB of host) since it was last read. */
	size_t samples = KVT_MIN((size_t)1000, KVT_MAX((size_t)200, ((size_t)4 << 30) / chunk));
	double *lat = calloc(samples, sizeof(double)), *rlat = calloc(samples, sizeof(double));
	int rfd = open(raw, O_RDONLY | O_DIRECT);
	if (rfd < 0)
		die("open raw file", -errno);
	for (size_t i = 0; i < samples; i++) {
		size_t j = i % n;
		double t = now_s();
		if (pread(rfd, bufs[0], chunk, (off_t)(j * chunk)) != (ssize_t)chunk)
			die("raw read", -EIO);
		rlat[i] = now_s() - t;
		t = now_s();
		if ((rc = kvt_get(c, ns, keys + j, 1, bufs, chunk)) != 1)
			die("get", rc);
		lat[i] = now_s() - t;
	}
	close(rfd);
	double p50, p99, rp50, rp99;
	pctl_ms(lat, samples, &p50, &p99);
	pctl_ms(rlat, samples, &rp50, &rp99);
	printf("| %s | %zu KiB | %zu | %.2f | %.2f / %.2f | %.2f | %.2f | %.2f | %.0f%% | %.2f | "
	       "%.2f / %.2f | %.2f | %.2f / %.2f | %.2f / %.2f | %.2f | %lld |\n",
	       tier, chunk >> 10, n, demote, rw1, rw8, demote / rw8, drain, drain / rw8, busy * 100,
	       get, rr1, rr8, get / rr8, p50, p99, rp50, rp99, p99 / rp99, promoted);
	printf("  (%s %zu KiB: the pool's first pass, host's 256 MiB into an untouched pool, "
	       "demoted at %.2f GB/s)\n",
	       tier, chunk >> 10, first);
	fflush(stdout);
	free(lat);
	free(rlat);
	for (size_t i = 0; i < batch; i++)
		munmap(bufs[i], chunk);
	free(keys);
	kvt_close(c);
	stop_daemon();
}

/*
 * tiers.placement, through host, nvme and rocksdb (256 MiB, 512 MiB, 512 MiB): 1.5 GiB of
 * chunks put as one prefix, timed until every chunk is demoted; then how many of them the
 * daemon still has (a lookup each) and the bytes each tier wrote. write-through, in the same
 * run, is the baseline: it writes every chunk to both tiers, cascade writes rocksdb only what
 * nvme evicts (after reading it back).
 */
static void bench_cascade(const char *placement, size_t chunk)
{
	size_t n = ((size_t)3 << 29) / chunk;
	char p[64];
	snprintf(p, sizeof(p), "tiers.placement=%s", placement);
	const char *sets[] = {"tiers.order=host,nvme,rocksdb",
	                      "nvme.bytes=512MiB",
	                      "rocksdb.bytes=512MiB",
	                      "rocksdb.policy=arc",
	                      p,
	                      NULL};
	start_daemon_with("256MiB", sets);
	kvt_id_t ns, *keys;
	kvt_client_t *c = attach(chunk, n, 5, &ns, &keys);
	const size_t batch = KVT_MIN((size_t)BATCH_MAX, KVT_MAX((size_t)1, (64u << 20) / chunk));
	const void *ch[BATCH_MAX];
	for (size_t i = 0; i < batch; i++)
		ch[i] = prefaulted(chunk);
	double t0 = now_s();
	put_prefix(c, ns, keys, n, ch, batch, chunk);
	/* write-through demotes each chunk twice, cascade once (and moves some on) */
	long long failed = wait_demoted(c, (long long)n * (strcmp(placement, "cascade") ? 2 : 1));
	double s = now_s() - t0;
	size_t found = 0;
	for (size_t i = 0; i < n; i++)
		found += kvt_lookup(c, ns, &keys[i], 1) == 1;
	double nv = (double)tier_stat_of(c, "nvme", "write_bytes") / (1 << 20);
	double nr = (double)tier_stat_of(c, "nvme", "read_bytes") / (1 << 20);
	double rw = (double)tier_stat_of(c, "rocksdb", "write_bytes") / (1 << 20);
	printf("| %s | %zu KiB | %zu | %.2f | %zu (%.0f%%) | %.0f | %.0f | %.0f | %lld | %lld |\n",
	       placement, chunk >> 10, n, (double)chunk * (double)n / s / 1e9, found,
	       100.0 * (double)found / (double)n, nv, nr, rw, stat_of(c, "cascaded"), failed);
	fflush(stdout);
	for (size_t i = 0; i < batch; i++)
		munmap((void *)ch[i], chunk);
	free(keys);
	kvt_close(c);
	stop_daemon();
}

/*
 * Gets while the tiers are busy writing: one client puts an endless prefix (3 GiB) through host
 * 256 MiB, nvme 512 MiB and rocksdb 1 GiB, so that nvme writes, reclaims and (with cascade)
 * hands its evictions to rocksdb, or (write-through) rocksdb takes every chunk too. Meanwhile
 * another reads, every few milliseconds, the chunk put 384 MiB ago -- out of host, still in nvme
 * -- each read right after a raw QD1 pread of the same size (the device's own latency under the
 * same load). Then the same gets with nothing else running. p50 / p99 of each.
 */
struct flood {
	size_t n, chunk;
	_Atomic size_t done;
};

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	kvt_id_t ns, *keys;
	kvt_client_t *c = attach(f->chunk, f->n, 7, &ns, &keys); /* the reader's namespace */
	void *buf = prefaulted(f->chunk);
	const void *ch[1] = {buf};
	for (size_t i = 0; i < f->n; i++) {
		for (int rc; (rc = kvt_put(c, ns, i ? &keys[i - 1] : NULL, &keys[i], 1, ch,
		                           f->chunk)) != 1;) {
			if (rc != -EAGAIN && rc != 0)
				die("put", rc);
			usleep(200);
		}
		f->done = i + 1;
	}
	munmap(buf, f->chunk);
	free(keys);
	kvt_close(c);
	return NULL;
}

static void bench_busy(const char *placement, size_t chunk)
{
	char p[64];
	snprintf(p, sizeof(p), "tiers.placement=%s", placement);
	const char *sets[] = {"tiers.order=host,nvme,rocksdb", "nvme.bytes=512MiB",
	                      "rocksdb.bytes=1GiB", p, NULL};
	start_daemon_with("256MiB", sets);
	struct flood f = {.n = ((size_t)3 << 30) / chunk, .chunk = chunk};
	kvt_id_t ns, *keys;
	kvt_client_t *c = attach(chunk, f.n, 7, &ns, &keys);
	const size_t lag = ((size_t)384 << 20) / chunk;
	char raw[128];
	snprintf(raw, sizeof(raw), "%s/raw.dat", tmpdir);
	raw_pass(raw, chunk, lag, 1, 1);
	int rfd = open(raw, O_RDONLY | O_DIRECT);
	if (rfd < 0)
		die("open raw file", -errno);
	void *buf = prefaulted(chunk);
	void *bufs[1] = {buf};
	size_t cap = 100000, n = 0, misses = 0;
	double *lat = calloc(cap, sizeof(double)), *rlat = calloc(cap, sizeof(double));
	pthread_t th;
	pthread_create(&th, NULL, flood_main, &f);
	size_t last = 0;
	while (f.done < f.n && n < cap) {
		size_t d = f.done;
		if (d < lag + 1 || d == last) {
			usleep(1000);
			continue;
		}
		last = d;
		size_t j = d - lag;
		double t = now_s();
		if (pread(rfd, buf, chunk, (off_t)((j % lag) * chunk)) != (ssize_t)chunk)
			die("raw read", -EIO);
		rlat[n] = now_s() - t;
		t = now_s();
		int rc = kvt_get(c, ns, keys + j, 1, bufs, chunk);
		lat[n] = now_s() - t;
		if (rc != 1) {
			misses++;
			continue;
		}
		n++;
		usleep(2000);
	}
	pthread_join(th, NULL);
	double p50, p99, rp50, rp99;
	pctl_ms(lat, n, &p50, &p99);
	pctl_ms(rlat, n, &rp50, &rp99);
	wait_demoted(c, (long long)f.n * (strcmp(placement, "cascade") ? 2 : 1));
	/* the same gets, nothing else running: the last chunks put, lag behind the end */
	size_t m = 0;
	for (size_t i = 0; i < 200 && i + lag < f.n; i++) {
		size_t j = f.n - lag - 200 + i;
		double t = now_s();
		if (pread(rfd, buf, chunk, (off_t)((j % lag) * chunk)) != (ssize_t)chunk)
			die("raw read", -EIO);
		rlat[m] = now_s() - t;
		t = now_s();
		if (kvt_get(c, ns, keys + j, 1, bufs, chunk) != 1)
			continue;
		lat[m++] = now_s() - t;
	}
	double i50, i99, ir50, ir99;
	pctl_ms(lat, m, &i50, &i99);
	pctl_ms(rlat, m, &ir50, &ir99);
	printf("| %s | %zu KiB | %zu (%zu missed) | %.2f / %.2f | %.2f / %.2f | %.2f | %.2f / %.2f "
	       "| %.2f / %.2f | %lld |\n",
	       placement, chunk >> 10, n, misses, p50, p99, rp50, rp99, p99 / rp99, i50, i99, ir50,
	       ir99, stat_of(c, "cascaded"));
	fflush(stdout);
	close(rfd);
	munmap(buf, chunk);
	free(lat);
	free(rlat);
	free(keys);
	kvt_close(c);
	stop_daemon();
}

/* A mode that compares the placements: each twice, alternating (the machine's noise). */
static int both_placements(const char *name, size_t chunk, const char *layout, const char *columns,
                           void (*run)(const char *placement, size_t chunk))
{
	printf("# kvtier bench tiers %s (%ld cores; %s; files under /var/tmp)\n\n", name,
	       sysconf(_SC_NPROCESSORS_ONLN), layout);
	printf("%s", columns);
	for (int r = 0; r < 2; r++) {
		run("write-through", chunk);
		run("cascade", chunk);
	}
	return 0;
}

/* The chunk sizes `nvme` and `rocksdb` measure. */
static const size_t measured[] = {256u << 10, 2u << 20, 32u << 20};

/* Whether the command line is one of the usage lines at the top: nvme and rocksdb measure
 * 256, 2,048 and 32,768 KiB (any other size ran nothing), cascade and busy any size from 4 KiB
 * to 64 MiB (a quarter of their host tier; past 4 GiB the namespace was refused after the
 * daemon had started). *chunk: the size given in bytes, or 0. */
static bool args_ok(int argc, char **argv, size_t *chunk)
{
	*chunk = 0;
	static const char *const first[] = {"nvme", "rocksdb", "cascade", "busy"};
	bool known = argc < 2;
	for (size_t k = 0; k < 4 && !known; k++)
		known = !strcmp(argv[1], first[k]);
	if (!known || argc > 3)
		return false;
	if (argc < 3)
		return true;
	char *end = NULL;
	unsigned long long kib = strtoull(argv[2], &end, 10);
	if (!end || *end || argv[2][0] == '-' || argv[2][0] == 0 || kib < 4 || kib > 65536)
		return false;
	*chunk = (size_t)kib << 10;
	if (argv[1][0] == 'c' || argv[1][0] == 'b')
		return true;
	for (size_t s = 0; s < KVT_ARRAY_SIZE(measured); s++)
		if (*chunk == measured[s])
			return true;
	return false;
}

int main(int argc, char **argv)
{
	size_t chunk;
	if (!args_ok(argc, argv, &chunk)) {
		bool help = kvt_help_asked(argc, argv);
		fputs("usage: kvtier bench tiers [nvme|rocksdb [256|2048|32768]]\n"
		      "       kvtier bench tiers cascade|busy [CHUNK_KIB (4 to 65536)]\n",
		      help ? stdout : stderr);
		return help ? 0 : 2;
	}
	if (argc > 1 && !strcmp(argv[1], "busy"))
		return both_placements(
		    "busy", chunk ? chunk : 2048 << 10, "host 256 MiB, nvme 512 MiB, rocksdb 1 GiB",
		    "| placement | chunk | gets under load | get p50 / p99 ms | raw read p50 / p99 "
		    "ms | "
		    "p99 ratio | idle get p50 / p99 ms | idle raw p50 / p99 ms | cascaded |\n"
		    "|---|---|---|---|---|---|---|---|---|\n",
		    bench_busy);
	if (argc > 1 && !strcmp(argv[1], "cascade"))
		return both_placements("cascade", chunk ? chunk : 256 << 10,
		                       "host 256 MiB, nvme and rocksdb 512 MiB",
		                       "| placement | chunk | chunks | put to demoted GB/s | still "
		                       "held | nvme MiB written | "
		                       "nvme MiB read | rocksdb MiB written | cascaded | failed |\n"
		                       "|---|---|---|---|---|---|---|---|---|---|\n",
		                       bench_cascade);
	const char *only = argc > 1 ? argv[1] : NULL;
	printf("# kvtier bench tiers (%ld cores; host tier 256 MiB; files under /var/tmp)\n\n",
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf(
	    "| tier | chunk | chunks | demote GB/s | raw write QD1 / QD8 GB/s | demote/raw QD8 | "
	    "drain GB/s | drain/raw QD8 | tier busy | get GB/s | raw read QD1 / QD8 GB/s | "
	    "get/raw QD8 | get p50 / p99 ms | raw read p50 / p99 ms | p99 ratio | promoted |\n"
	    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	static const char *tiers[] = {"nvme", "rocksdb"};
	for (int t = 0; t < 2; t++) {
		if (only && strcmp(only, tiers[t]))
			continue;
		for (size_t s = 0; s < KVT_ARRAY_SIZE(measured); s++)
			if (!chunk || chunk == measured[s])
				bench_one(tiers[t], measured[s], 1u << 30);
	}
	return 0;
}
