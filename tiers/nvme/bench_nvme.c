/*
 * bench_nvme.c -- kvtier-bench-nvme: the nvme tier against raw io_uring O_DIRECT on the same file
 * system, in the same run (`kvtier bench nvme` execs it). Not a test.
 *
 * For each record size B and queue depth Q:
 *   raw     an io_uring loop of its own (fixed file, registered buffers) on a second file in the
 *           same directory: sequential and random writes and reads of B-byte I/Os, Q in flight
 *           ("raw B x Q"); and the same bytes in flight as the tier issues for one record: B cut
 *           into pieces of max(128 KiB, B/Q), all in flight, one record at a time ("raw 1 rec").
 *           Latency: one B-byte read as such pieces, timed, many times (p50/p99).
 *   tier    write() of B-byte records back to back (nvme.queue_depth = Q), then read() of them in
 *           random order, each read verified (XXH3) by the tier; throughput, p50/p99 latency.
 *   batch   write_batch() of Q records a call (as many as the raw case has in flight), then
 *           read_batch() of Q random records a call, verified; throughput.
 * Ratios are tier / raw from this run. The disk here may be virtual: ratios are what count.
 *
 * --quota: what nvme.quota's copying forward costs. Tenant 1 writes a share of the tier (0 %,
 * 10 %, 25 %, 50 %, guaranteed by nvme.quota), its records together or spread among tenant 2's
 * (one in 100 / share: every region then holds some), then tenant 2 floods 3x the tier with
 * write_batch calls of 8 records; the same flood with no quota (the plain FIFO) runs in the same
 * run as the baseline. Reported: the flood's throughput and its ratio to the baseline, the write
 * amplification (device bytes / flood bytes), tenant 1's records still there, and the slowest
 * batch (a reclaim that copies forward runs inside the write that needed the room). Then the
 * same shares with no guarantee and tenant 2 held to a maximum of a quarter of the tier instead:
 * what keeping the room its trims leave for tenant 1 costs.
 *
 * --recover: what a restart costs (RELIABILITY D1). A tier of --mib-per-case is filled to 90 %
 * with records of each size (write_batch, 8 a call) and closed (timed: the close saves the
 * index, index.c); the open that follows reads that index; the tier is closed again and opened
 * with the index turned off, which rebuilds it from the device (region headers, then one 4 KiB
 * header read per record, queue-depth regions walked at once). Baselines in the same run: one
 * sequential read of the index file out of the page cache (the least an open from it must
 * read), and raw io_uring reads of one 4 KiB block per record at the same offsets pattern (a
 * record's stride apart), queue depth in flight, on a written file of the same size -- the least
 * I/O any walk must do. Reported: records found each way, the index's size, the close, both
 * opens and both baselines in seconds, each open's ratio to its baseline, and both opens scaled
 * to 1 TB of such records.
 *
 * usage: kvtier-bench-nvme [--dir DIR] [--sizes 256K,2M,32M] [--qd 1,8,32] [--mib-per-case 512]
 *                          [--backend uring|pio] [--fio]
 *        kvtier-bench-nvme --quota [--dir DIR] [--sizes 2M] [--mib-per-case 512 (the tier)]
 *        kvtier-bench-nvme --recover [--dir DIR] [--sizes 64K,512K,2M] [--mib-per-case 2048]
 */
#include "nvme.h"
#include "nvme_int.h"
#include "core/options.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef KVT_HAVE_URING
#include <liburing.h>
#endif

#define PIECE_MIN (128u << 10)

static double now_s(void)
{
	return (double)kvt_now_ns() / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return n ? v[(size_t)(p * (double)(n - 1))] : 0;
}

static uint64_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 17;
}

#ifdef KVT_HAVE_URING
struct raw {
	struct io_uring ring;
	int fd;
	uint64_t file_bytes;
	uint8_t *buf;
	size_t buf_bytes;
};

/* Moves total bytes in io_bytes I/Os, depth in flight. @return : MB/s, or -1. */
static double raw_stream(struct raw *r, bool wr, bool random, size_t io_bytes, unsigned depth,
                         uint64_t total)
{
	uint64_t n_ios = total / io_bytes, issued = 0, done = 0, seq = 0, rng = 99;
	uint64_t slots = r->file_bytes / io_bytes;
	double t0 = now_s();
	unsigned inflight = 0;
	while (done < n_ios) {
		while (inflight < depth && issued < n_ios) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
			uint64_t off = (random ? rnd(&rng) % slots : seq++ % slots) * io_bytes;
			uint8_t *b = r->buf + (size_t)(issued % depth) * io_bytes;
			if (wr)
				io_uring_prep_write_fixed(sqe, 0, b, (unsigned)io_bytes, off, 0);
			else
				io_uring_prep_read_fixed(sqe, 0, b, (unsigned)io_bytes, off, 0);
			sqe->flags |= IOSQE_FIXED_FILE;
			issued++, inflight++;
		}
		io_uring_submit(&r->ring);
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&r->ring, &cqe))
			return -1;
		if (cqe->res != (int)io_bytes)
			return -1;
		io_uring_cqe_seen(&r->ring, cqe);
		inflight--, done++;
	}
	return (double)(n_ios * io_bytes) / (now_s() - t0) / 1e6;
}

/* One B-byte read as pieces all in flight; @return : seconds. */
static double raw_read_once(struct raw *r, uint64_t off, size_t bytes, size_t piece)
{
	double t0 = now_s();
	unsigned n = 0;
	for (size_t d = 0; d < bytes; d += piece, n++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
		io_uring_prep_read_fixed(sqe, 0, r->buf + d, (unsigned)KVT_MIN(piece, bytes - d),
		                         off + d, 0);
		sqe->flags |= IOSQE_FIXED_FILE;
	}
	io_uring_submit(&r->ring);
	for (unsigned i = 0; i < n; i++) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&r->ring, &cqe))
			return -1;
		io_uring_cqe_seen(&r->ring, cqe);
	}
	return now_s() - t0;
}

/* n 4 KiB reads stride bytes apart, depth in flight. @return : seconds, or -1. */
static double raw_strided(struct raw *r, uint64_t stride, uint64_t n, unsigned depth)
{
	uint64_t issued = 0, done = 0;
	unsigned inflight = 0;
	double t0 = now_s();
	while (done < n) {
		while (inflight < depth && issued < n) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
			io_uring_prep_read_fixed(sqe, 0, r->buf + (size_t)(issued % depth) * 4096,
			                         4096, (issued * stride) % r->file_bytes, 0);
			sqe->flags |= IOSQE_FIXED_FILE;
			issued++, inflight++;
		}
		io_uring_submit(&r->ring);
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&r->ring, &cqe) || cqe->res != 4096)
			return -1;
		io_uring_cqe_seen(&r->ring, cqe);
		inflight--, done++;
	}
	return now_s() - t0;
}

static int raw_open(struct raw *r, const char *path, uint64_t file_bytes, size_t buf_bytes,
                    unsigned entries)
{
	r->file_bytes = file_bytes;
	r->fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
	if (r->fd < 0 || fallocate(r->fd, 0, 0, (off_t)file_bytes))
		return -errno;
	r->buf_bytes = buf_bytes;
	r->buf = aligned_alloc(4096, buf_bytes);
	if (!r->buf)
		return -ENOMEM;
	memset(r->buf, 0x5a, buf_bytes);
	int rc = io_uring_queue_init(entries, &r->ring, 0);
	if (rc)
		return rc;
	struct iovec iov = {r->buf, buf_bytes};
	io_uring_register_files(&r->ring, &r->fd, 1);
	return io_uring_register_buffers(&r->ring, &iov, 1);
}

static void raw_close(struct raw *r)
{
	io_uring_queue_exit(&r->ring);
	free(r->buf);
	close(r->fd);
}
#endif

struct tier_res {
	double w_mbs, r_mbs, p50, p99;
	double bw_mbs, br_mbs; /* write_batch / read_batch, bq records per call */
};

/* write_batch() of n records, bq per call, then read_batch() of them in random order. */
static int tier_batched(struct kvt_tier *t, size_t rec, size_t n, unsigned bq, struct tier_res *res)
{
	size_t buf_len = KVT_ALIGN_UP(rec, (size_t)4096);
	uint8_t *bufs = aligned_alloc(4096, buf_len * bq);
	uint64_t *locs = calloc(n, sizeof(*locs));
	struct kvt_tier_wreq *w = calloc(bq, sizeof(*w));
	struct kvt_tier_rreq *r = calloc(bq, sizeof(*r));
	int rc = -ENOMEM;
	if (!bufs || !locs || !w || !r)
		goto out;
	kvt_tier_nvme_register(t, bufs, buf_len * bq);
	memset(bufs, 0x44, buf_len * bq);
	struct kvt_chunk_hdr h = {.tenant = 2, .payload_bytes = rec - KVT_CHUNK_HDR_BYTES};
	h.payload_sum = kvt_chunk_sum(bufs + KVT_CHUNK_HDR_BYTES, h.payload_bytes);
	double t0 = now_s();
	for (size_t i = 0; i < n; i += bq) {
		unsigned m = (unsigned)KVT_MIN((size_t)bq, n - i);
		for (unsigned k = 0; k < m; k++) {
			h.key.w[0] = i + k, h.seq = i + k;
			kvt_chunk_hdr_encode(bufs + k * buf_len, &h);
			w[k] = (struct kvt_tier_wreq){
			    .buf = bufs + k * buf_len, .rec_len = rec, .buf_len = buf_len};
		}
		if (kvt_tier_nvme.write_batch(t, w, m) != m) {
			rc = -EIO;
			goto out;
		}
		for (unsigned k = 0; k < m; k++)
			locs[i + k] = w[k].loc;
	}
	res->bw_mbs = (double)(n * rec) / (now_s() - t0) / 1e6;
	uint64_t rng = 11;
	t0 = now_s();
	for (size_t i = 0; i < n; i += bq) {
		unsigned m = (unsigned)KVT_MIN((size_t)bq, n - i);
		for (unsigned k = 0; k < m; k++) {
			size_t j = (size_t)(rnd(&rng) % n);
			r[k] = (struct kvt_tier_rreq){.id = {.tenant = 2},
			                              .loc = locs[j],
			                              .buf = bufs + k * buf_len,
			                              .buf_len = buf_len};
			r[k].id.key.w[0] = j;
		}
		if (kvt_tier_nvme.read_batch(t, r, m) != m) {
			rc = -EIO;
			goto out;
		}
	}
	res->br_mbs = (double)(n * rec) / (now_s() - t0) / 1e6;
	rc = 0;
out:
	free(r), free(w), free(locs), free(bufs);
	return rc;
}

/* The options of a tier of file_bytes at queue depth qd, the rest defaults. */
static void tier_opts(struct kvt_options *o, uint64_t file_bytes, unsigned qd)
{
	char v[32];
	kvt_opts_defaults(o);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)file_bytes);
	kvt_opts_set(o, "nvme.bytes", v);
	snprintf(v, sizeof(v), "%u", qd);
	kvt_opts_set(o, "nvme.queue_depth", v);
}

static int tier_case(const char *dir, const char *backend, size_t rec, unsigned qd, unsigned bq,
                     uint64_t total, uint64_t file_bytes, struct tier_res *res)
{
	struct kvt_options o;
	tier_opts(&o, file_bytes, qd);
	struct kvt_tier_env env = {.opts = &o, .data_dir = dir};
	struct kvt__nvme_hooks hooks = {.backend = backend};
	struct kvt_tier *t;
	int rc = kvt__nvme_open_hooked(&env, &hooks, &t);
	if (rc)
		return rc;
	size_t buf_len = KVT_ALIGN_UP(rec, (size_t)4096);
	uint8_t *buf = aligned_alloc(4096, buf_len);
	size_t n = (size_t)(total / rec);
	uint64_t *locs = calloc(n, sizeof(*locs));
	double *lat = calloc(n, sizeof(*lat));
	if (!buf || !locs || !lat)
		return -ENOMEM;
	kvt_tier_nvme_register(t, buf, buf_len); /* as the daemon registers its host pool */
	memset(buf, 0x33, buf_len);
	struct kvt_chunk_hdr h = {.tenant = 1, .payload_bytes = rec - KVT_CHUNK_HDR_BYTES};
	double t0 = now_s();
	for (size_t i = 0; i < n; i++) {
		h.key.w[0] = i, h.seq = i;
		/* the daemon computes the checksum when the chunk is put, not at demotion */
		h.payload_sum = i == 0 ? kvt_chunk_sum(buf + KVT_CHUNK_HDR_BYTES, h.payload_bytes)
		                       : h.payload_sum;
		kvt_chunk_hdr_encode(buf, &h);
		if ((rc = kvt_tier_nvme.write(t, buf, rec, buf_len, &locs[i])))
			goto out;
	}
	res->w_mbs = (double)(n * rec) / (now_s() - t0) / 1e6;
	uint64_t rng = 5;
	t0 = now_s();
	for (size_t i = 0; i < n; i++) {
		size_t j = (size_t)(rnd(&rng) % n);
		struct kvt_tier_id id = {.tenant = 1};
		id.key.w[0] = j;
		double a = now_s();
		ssize_t got = kvt_tier_nvme.read(t, &id, locs[j], buf, buf_len);
		lat[i] = now_s() - a;
		if (got != (ssize_t)rec) {
			rc = got < 0 ? (int)got : -EIO;
			goto out;
		}
	}
	res->r_mbs = (double)(n * rec) / (now_s() - t0) / 1e6;
	res->p50 = pct(lat, n, 0.5) * 1e3;
	res->p99 = pct(lat, n, 0.99) * 1e3;
	rc = tier_batched(t, rec, n, bq, res);
out:
	free(lat), free(locs), free(buf);
	kvt_tier_nvme.close(t);
	return rc;
}

/* ---- --quota ---- */

struct quota_res {
	double flood_mbs, wa, worst_ms;
	uint64_t kept, written, moved;
};

static void count_move(void *arg, const struct kvt_tier_id *id, uint64_t from, uint64_t to)
{
	(void)id, (void)from, (void)to;
	++*(uint64_t *)arg;
}

static int count_tenant1(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	(void)loc;
	*(uint64_t *)arg += h->tenant == 1;
	return 0;
}

/* Writes n records of tenant from key k0 on, 8 a call. @return : 0 or -EIO; *worst: the
 * slowest call in seconds. */
static int write_tenant(struct kvt_tier *t, uint8_t *bufs, size_t rec, uint32_t tenant, uint64_t k0,
                        size_t n, double *worst)
{
	size_t buf_len = KVT_ALIGN_UP(rec, (size_t)4096);
	struct kvt_tier_wreq w[8];
	struct kvt_chunk_hdr h = {.tenant = tenant, .payload_bytes = rec - KVT_CHUNK_HDR_BYTES};
	h.payload_sum = kvt_chunk_sum(bufs + KVT_CHUNK_HDR_BYTES, h.payload_bytes);
	for (size_t i = 0; i < n; i += 8) {
		unsigned m = (unsigned)KVT_MIN((size_t)8, n - i);
		for (unsigned k = 0; k < m; k++) {
			h.key.w[0] = k0 + i + k, h.seq = k0 + i + k;
			kvt_chunk_hdr_encode(bufs + k * buf_len, &h);
			w[k] = (struct kvt_tier_wreq){
			    .buf = bufs + k * buf_len, .rec_len = rec, .buf_len = buf_len};
		}
		double a = now_s();
		if (kvt_tier_nvme.write_batch(t, w, m) != m)
			return -EIO;
		*worst = KVT_MAX(*worst, now_s() - a);
	}
	return 0;
}

/* Tenant 1 writes pct % of the tier (spread among tenant 2's records or together), then tenant 2
 * floods; tenant 1 is guaranteed its share, or (cap2) tenant 2 is held to a quarter of the
 * tier. pct 0: no quota. */
static int quota_case(const char *dir, const char *backend, size_t rec, uint64_t tier_bytes,
                      unsigned pct, bool spread, bool cap2, struct quota_res *res)
{
	struct kvt_options o;
	char v[96];
	tier_opts(&o, tier_bytes, 8);
	uint64_t moves = 0;
	struct kvt_tier_env env = {.opts = &o, .data_dir = dir, .moved = count_move, .arg = &moves};
	struct kvt__nvme_hooks hooks = {.backend = backend};
	struct kvt_tier *t;
	int rc = kvt__nvme_open_hooked(&env, &hooks, &t);
	if (rc)
		return rc;
	struct kvt_tier_stats st;
	kvt_tier_nvme.stats(t, &st);
	uint64_t cap = st.capacity_bytes, share = cap / 100 * pct;
	kvt_tier_nvme.close(t);
	if (pct) { /* reopen with the quota, now that the capacity is known */
		if (cap2)
			snprintf(v, sizeof(v), "2=0/%llu", (unsigned long long)(cap / 4));
		else
			snprintf(v, sizeof(v), "1=%llu/%llu", (unsigned long long)share,
			         (unsigned long long)cap);
		kvt_opts_set(&o, "nvme.quota", v);
	}
	char p[600];
	snprintf(p, sizeof(p), "%s/nvme.dat", dir);
	unlink(p);
	if ((rc = kvt__nvme_open_hooked(&env, &hooks, &t)))
		return rc;
	size_t buf_len = KVT_ALIGN_UP(rec, (size_t)4096);
	uint8_t *bufs = aligned_alloc(4096, buf_len * 8);
	if (!bufs) {
		kvt_tier_nvme.close(t);
		return -ENOMEM;
	}
	memset(bufs, 0x55, buf_len * 8);
	kvt_tier_nvme_register(t, bufs, buf_len * 8);
	size_t n_a = (size_t)(share / buf_len), n_flood = (size_t)(3 * cap / buf_len);
	double worst = 0;
	if (!spread) {
		rc = write_tenant(t, bufs, rec, 1, 0, n_a, &worst);
	} else { /* one of tenant 1's records every 100 / pct, tenant 2's between */
		size_t gap = 100 / pct - 1;
		for (size_t i = 0; i < n_a && !rc; i++)
			if (!(rc = write_tenant(t, bufs, rec, 1, i, 1, &worst)))
				rc = write_tenant(t, bufs, rec, 2, (1u << 29) + i * gap, gap,
				                  &worst);
	}
	kvt_tier_nvme.stats(t, &st);
	uint64_t before = st.write_bytes;
	struct kvt__nvme_xstats x0;
	kvt__nvme_xstats(t, &x0);
	worst = 0;
	double t0 = now_s();
	if (!rc)
		rc = write_tenant(t, bufs, rec, 2, 1u << 30, n_flood, &worst);
	double dt = now_s() - t0;
	struct kvt__nvme_xstats x;
	kvt__nvme_xstats(t, &x);
	kvt_tier_nvme.stats(t, &st);
	uint64_t flood = st.write_bytes - before, moved_bytes = x.moved_bytes - x0.moved_bytes;
	res->flood_mbs = (double)flood / dt / 1e6;
	res->wa = (double)(flood + moved_bytes) / (double)flood;
	res->worst_ms = worst * 1e3;
	res->written = n_a;
	res->moved = moves;
	res->kept = 0;
	kvt_tier_nvme.iterate(t, count_tenant1, &res->kept);
	free(bufs);
	kvt_tier_nvme.close(t);
	unlink(p);
	return rc;
}

static int run_quota(const char *dir, const char *backend, size_t rec, uint64_t tier_bytes)
{
	printf("# kvtier-bench-nvme --quota: dir %s, backend %s, %llu MiB tier, %zu-byte records, "
	       "flood 3x the tier\n",
	       dir, backend, (unsigned long long)(tier_bytes >> 20), rec);
	printf("| tenant 1's share | quota | tenant 1's records | tenant 1 kept / written | flood "
	       "MB/s | **vs no quota** | write amplification | records moved | slowest batch ms "
	       "|\n"
	       "|---|---|---|---|---|---|---|---|---|\n");
	struct quota_res base = {0};
	static const unsigned pcts[] = {0, 10, 25, 50, 10, 25, 50, 10, 25, 50, 10, 25, 50};
	for (size_t i = 0; i < sizeof(pcts) / sizeof(pcts[0]); i++) {
		struct quota_res r = {0};
		bool spread = i && (i - 1) / 3 % 2, cap2 = i > 6;
		int rc = quota_case(dir, backend, rec, tier_bytes, pcts[i], spread, cap2, &r);
		if (rc) {
			fprintf(stderr, "quota case %u%%: %s\n", pcts[i], strerror(-rc));
			return 1;
		}
		if (!pcts[i])
			base = r;
		printf("| %u %% | %s | %s | %llu / %llu | %.0f | **%.2f** | %.3f | %llu | %.1f |\n",
		       pcts[i],
		       !pcts[i] ? "none"
		       : cap2   ? "tenant 2 at most 25 %"
		                : "tenant 1 guaranteed its share",
		       !pcts[i] ? "-"
		       : spread ? "spread"
		                : "together",
		       (unsigned long long)r.kept, (unsigned long long)r.written, r.flood_mbs,
		       r.flood_mbs / base.flood_mbs, r.wa, (unsigned long long)r.moved, r.worst_ms);
		fflush(stdout);
	}
	printf("(0 %%: no quota, the baseline; tenant 1's records are written before the flood, so "
	       "with no guarantee the flood takes them all)\n");
	return 0;
}

static void run_fio(const char *dir)
{
	char cmd[1024];
	for (int i = 0; i < 2; i++) {
		snprintf(
		    cmd, sizeof(cmd),
		    "fio --name=ref --filename=%s/fio.dat --size=1G --direct=1 "
		    "--ioengine=io_uring --fixedbufs --registerfiles --rw=%s --bs=2M --iodepth=8 "
		    "--runtime=3 --time_based --output-format=terse --terse-version=3 2>/dev/null "
		    "| awk -F';' '{printf \"fio %s 2MiB qd8: %%.0f MB/s\\n\", "
		    "($7+$48)*1.024/1000}'",
		    dir, i ? "randread" : "write", i ? "randread" : "write");
		if (system(cmd) != 0)
			printf("fio: not run\n");
	}
	snprintf(cmd, sizeof(cmd), "%s/fio.dat", dir);
	unlink(cmd);
}

/* ---- --recover ---- */

struct recover_res {
	uint64_t written, found_index, found_sum, found_walk, index_bytes, sum_regions;
	double close_s, index_open_s, index_raw_s, sum_open_s, walk_open_s;
};

static int count_all(void *arg, const struct kvt_chunk_hdr *h, uint64_t loc)
{
	(void)h, (void)loc;
	++*(uint64_t *)arg;
	return 0;
}

/* Drops the file's pages from the page cache (it was just written and synced). */
static void uncache(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
}

/* The baseline of an open from the index: one buffered sequential read of the file, uncached. */
static double read_seq(const char *path, uint64_t *bytes)
{
	uncache(path);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char *buf = malloc(1 << 20);
	double t0 = now_s();
	ssize_t r;
	*bytes = 0;
	while (buf && (r = read(fd, buf, 1 << 20)) > 0)
		*bytes += (uint64_t)r;
	double s = now_s() - t0;
	free(buf);
	close(fd);
	uncache(path);
	return s;
}

/* Fills a tier of file_bytes to 90 % with rec-byte records and closes it (timed: it saves the
 * index); times the open that reads the index, then (closed again) the open after a crash, which
 * has no index and reads the region summaries, then the walk of every record's header alone. */
static int recover_case(const char *dir, const char *backend, size_t rec, uint64_t file_bytes,
                        struct recover_res *res)
{
	struct kvt_options o;
	tier_opts(&o, file_bytes, 32);
	struct kvt_tier_env env = {.opts = &o, .data_dir = dir};
	struct kvt__nvme_hooks hooks = {.backend = backend};
	struct kvt_tier *t;
	struct kvt_tier_stats st;
	int rc = kvt__nvme_open_hooked(&env, &hooks, &t);
	if (rc)
		return rc;
	size_t buf_len = KVT_ALIGN_UP(rec, (size_t)4096);
	uint8_t *bufs = aligned_alloc(4096, buf_len * 8);
	if (!bufs) {
		kvt_tier_nvme.close(t);
		return -ENOMEM;
	}
	kvt_tier_nvme_register(t, bufs, buf_len * 8);
	memset(bufs, 0x66, buf_len * 8);
	kvt_tier_nvme.stats(t, &st);
	double worst = 0;
	res->written = st.capacity_bytes / 10 * 9 / (buf_len + 4096);
	rc = write_tenant(t, bufs, rec, 1, 0, res->written, &worst);
	double t0 = now_s();
	kvt_tier_nvme.close(t);
	res->close_s = now_s() - t0;
	free(bufs);
	if (rc)
		return rc;
	char ip[600];
	snprintf(ip, sizeof(ip), "%s/nvme.dat.index", dir);
	res->index_raw_s = read_seq(ip, &res->index_bytes);
	t0 = now_s();
	if ((rc = kvt__nvme_open_hooked(&env, &hooks, &t)))
		return rc;
	res->index_open_s = now_s() - t0;
	struct kvt__nvme_xstats x;
	kvt__nvme_xstats(t, &x);
	res->found_index = 0;
	kvt_tier_nvme.iterate(t, count_all, &res->found_index);
	kvt_tier_nvme.close(t);
	if (x.index_loads != 1)
		return -ENOENT; /* the index was not used: nothing to report */
	hooks.no_index = true;
	t0 = now_s();
	if ((rc = kvt__nvme_open_hooked(&env, &hooks, &t)))
		return rc;
	res->sum_open_s = now_s() - t0;
	kvt__nvme_xstats(t, &x);
	res->sum_regions = x.sum_loaded;
	res->found_sum = 0;
	kvt_tier_nvme.iterate(t, count_all, &res->found_sum);
	kvt_tier_nvme.close(t);
	hooks.no_summary = true;
	t0 = now_s();
	if ((rc = kvt__nvme_open_hooked(&env, &hooks, &t)))
		return rc;
	res->walk_open_s = now_s() - t0;
	res->found_walk = 0;
	kvt_tier_nvme.iterate(t, count_all, &res->found_walk);
	kvt_tier_nvme.close(t);
	unlink(ip);
	return 0;
}

static int run_recover(const char *dir, const char *backend, const uint64_t *sizes, size_t n_sizes,
                       uint64_t file_bytes)
{
#ifndef KVT_HAVE_URING
	(void)dir, (void)backend, (void)sizes, (void)n_sizes, (void)file_bytes;
	return 77;
#else
	char path[600], raw_path[600];
	snprintf(path, sizeof(path), "%s/nvme.dat", dir);
	snprintf(raw_path, sizeof(raw_path), "%s/raw.dat", dir);
	printf("# kvtier-bench-nvme --recover: dir %s, backend %s, tier %llu MiB, queue depth 32\n",
	       dir, backend, (unsigned long long)(file_bytes >> 20));
	printf("| rec | records | found: index / summaries / walk | regions from summaries | index "
	       "MiB | close s | open from index s | raw read of index s | open from summaries s | "
	       "walk s | raw 4 KiB reads s | index/raw | summaries/raw | walk/raw | s per TB: "
	       "index, summaries, walk |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	       "---|\n");
	for (size_t i = 0; i < n_sizes; i++) {
		size_t rec = (size_t)sizes[i];
		struct recover_res res = {0};
		int rc = recover_case(dir, backend, rec, file_bytes, &res);
		unlink(path);
		if (rc) {
			fprintf(stderr, "tier: %s\n", strerror(-rc));
			return 1;
		}
		struct raw r = {0};
		uint64_t stride = KVT_ALIGN_UP(rec, (size_t)4096) + 4096;
		uint64_t raw_bytes = file_bytes / (1 << 20) * (1 << 20);
		if ((rc = raw_open(&r, raw_path, raw_bytes, 1 << 20, 64)) ||
		    raw_stream(&r, true, false, 1 << 20, 1, raw_bytes) < 0) {
			fprintf(stderr, "raw: %s\n", strerror(rc ? -rc : EIO));
			return 1;
		}
		double raw_s = raw_strided(&r, stride, res.written, 32);
		raw_close(&r);
		unlink(raw_path);
		char bs[32];
		double tb = 1e12 / ((double)res.written * (double)rec);
		printf(
		    "| %s | %llu | %llu / %llu / %llu | %llu | %.1f | %.3f | %.3f | %.3f | %.3f | "
		    "%.3f | %.3f | %.2f | %.2f | %.2f | %.1f, %.1f, %.0f |\n",
		    kvt_fmt_bytes(rec, bs, sizeof(bs)), (unsigned long long)res.written,
		    (unsigned long long)res.found_index, (unsigned long long)res.found_sum,
		    (unsigned long long)res.found_walk, (unsigned long long)res.sum_regions,
		    (double)res.index_bytes / (1 << 20), res.close_s, res.index_open_s,
		    res.index_raw_s, res.sum_open_s, res.walk_open_s, raw_s,
		    res.index_open_s / res.index_raw_s, res.sum_open_s / raw_s,
		    res.walk_open_s / raw_s, res.index_open_s * tb, res.sum_open_s * tb,
		    res.walk_open_s * tb);
		fflush(stdout);
	}
	return 0;
#endif
}

/* A list of sizes or counts, "256K,2M": @return : how many, or 0 when one is not a size, is 0,
 * or is past max (a word the bench skipped ran it with a list of none, or with its default). */
static size_t parse_list(const char *s, uint64_t *out, size_t max)
{
	size_t n = 0;
	char tmp[256];
	snprintf(tmp, sizeof(tmp), "%s", s);
	for (char *save, *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (n == max || kvt_parse_size(tok, &out[n]) || !out[n++])
			return 0;
	return n;
}

/* The usage on stdout for --help (exit 0), else on stderr (exit 2). */
static int usage(bool help)
{
	fprintf(help ? stdout : stderr,
	        "usage: kvtier bench nvme [--dir DIR] [--sizes 256K,2M,32M] [--qd 1,8,32] "
	        "[--mib-per-case 512] [--backend uring|pio] [--fio]\n"
	        "       kvtier bench nvme --quota [--dir DIR] [--sizes 2M] "
	        "[--mib-per-case 512]\n"
	        "       kvtier bench nvme --recover [--dir DIR] [--sizes 64K,512K,2M] "
	        "[--mib-per-case 2048]\n"
	        "(at most 8 sizes, each a multiple of 4 KiB for O_DIRECT; queue depths "
	        "and MiB at least 1)\n");
	return help ? 0 : 2;
}

int main(int argc, char **argv)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
	const char *backend = "uring";
	uint64_t sizes[8] = {256 << 10, 2 << 20, 32 << 20}, qds[8] = {1, 8, 32};
	size_t n_sizes = 3, n_qds = 3;
	uint64_t per_case = 512ull << 20;
	bool fio = false, quota = false, recover = false, sized = false, sized_mib = false;
	if (kvt_help_asked(argc, argv))
		return usage(true);
	static const struct option lo[] = {
	    {"dir", 1, 0, 'd'},          {"sizes", 1, 0, 's'},   {"qd", 1, 0, 'q'},
	    {"mib-per-case", 1, 0, 'm'}, {"backend", 1, 0, 'b'}, {"fio", 0, 0, 'f'},
	    {"quota", 0, 0, 'Q'},        {"recover", 0, 0, 'R'}, {0, 0, 0, 0}};
	for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
		switch (c) {
		case 'd':
			dir = optarg;
			break;
		case 's':
			n_sizes = parse_list(optarg, sizes, 8);
			sized = true;
			for (size_t k = 0; k < n_sizes; k++)
				if (sizes[k] % 4096) /* O_DIRECT: the raw I/Os failed */
					return usage(false);
			if (!n_sizes)
				return usage(false);
			break;
		case 'q':
			n_qds = parse_list(optarg, qds, 8);
			if (!n_qds)
				return usage(false);
			break;
		case 'm':
			if (parse_list(optarg, &per_case, 1) != 1 || per_case > (1ull << 24))
				return usage(false);
			per_case <<= 20;
			sized_mib = true;
			break;
		case 'b':
			backend = optarg;
			if (strcmp(backend, "uring") && strcmp(backend, "pio"))
				return usage(false);
			break;
		case 'f':
			fio = true;
			break;
		case 'Q':
			quota = true;
			break;
		case 'R':
			recover = true;
			break;
		default:
			return usage(false);
		}
	}
	if (optind < argc)
		return usage(false);
#ifndef KVT_HAVE_URING
	fprintf(stderr, "kvtier-bench-nvme: built without liburing: no raw baseline\n");
	return 77;
#else
	char tdir[512], raw_path[600];
	snprintf(tdir, sizeof(tdir), "%s/kvt-bench-nvme-XXXXXX", dir);
	if (!mkdtemp(tdir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(raw_path, sizeof(raw_path), "%s/raw.dat", tdir);
	if (recover) {
		static const uint64_t rec_sizes[] = {64 << 10, 512 << 10, 2 << 20};
		int rrc = run_recover(tdir, backend, sized ? sizes : rec_sizes, sized ? n_sizes : 3,
		                      sized_mib ? per_case : 2048ull << 20);
		rmdir(tdir);
		return rrc;
	}
	if (quota) {
		int qrc =
		    run_quota(tdir, backend, n_sizes == 3 ? 2u << 20 : (size_t)sizes[0], per_case);
		rmdir(tdir);
		return qrc;
	}
	uint64_t file_bytes = per_case * 2 + (64ull << 20) * 4;
	printf("# kvtier-bench-nvme: dir %s, backend %s, %llu MiB per case\n", tdir, backend,
	       (unsigned long long)(per_case >> 20));
	printf(
	    "| rec | qd | raw seq wr | raw rnd wr | raw seq rd | raw rnd rd | raw 1-rec rd | "
	    "tier wr | tier rd | batch wr | batch rd | wr/raw seq | rd/raw rnd | rd/raw 1-rec | "
	    "**batch wr/raw seq** | **batch rd/raw rnd** | raw p99 ms | tier p50 ms | "
	    "tier p99 ms | p99 ratio |\n"
	    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	int rc = 0;
	for (size_t si = 0; si < n_sizes; si++) {
		for (size_t qi = 0; qi < n_qds; qi++) {
			size_t B = (size_t)sizes[si];
			unsigned Q = (unsigned)qds[qi];
			size_t piece =
			    KVT_MAX((size_t)PIECE_MIN, KVT_ALIGN_UP((B + Q - 1) / Q, (size_t)4096));
			uint64_t total = KVT_MAX(per_case, (uint64_t)B * 8);
			size_t rawbuf = KVT_MIN((size_t)B * Q, (size_t)512 << 20);
			unsigned rq = (unsigned)KVT_MIN((size_t)Q, rawbuf / B);
			struct raw r = {0};
			/* raw file = exactly the bytes the sequential write covers: no read ever
			 * hits an unwritten extent (which the file system answers without I/O) */
			uint64_t raw_bytes = total / B * B;
			if ((rc = raw_open(&r, raw_path, raw_bytes, KVT_MAX(rawbuf, B), 256))) {
				fprintf(stderr, "raw: %s\n", strerror(-rc));
				return 1;
			}
			double sw = raw_stream(&r, true, false, B, rq, total);
			double rw = raw_stream(&r, true, true, B, rq, total);
			double sr = raw_stream(&r, false, false, B, rq, total);
			double rr = raw_stream(&r, false, true, B, rq, total);
			size_t n_lat = (size_t)KVT_MAX(total / B, (uint64_t)50);
			double *lat = calloc(n_lat, sizeof(*lat)), sum = 0;
			uint64_t rng = 3, slots = raw_bytes / KVT_ALIGN_UP(B, (size_t)4096);
			for (size_t i = 0; i < n_lat; i++) {
				lat[i] = raw_read_once(
				    &r, (rnd(&rng) % slots) * KVT_ALIGN_UP(B, 4096), B, piece);
				sum += lat[i];
			}
			double one = (double)(n_lat * B) / sum / 1e6;
			double raw_p99 = pct(lat, n_lat, 0.99) * 1e3;
			free(lat);
			raw_close(&r);
			unlink(raw_path);
			struct tier_res tr = {0};
			rc = tier_case(tdir, backend, B, Q, rq, total, file_bytes, &tr);
			char p[600];
			snprintf(p, sizeof(p), "%s/nvme.dat", tdir);
			unlink(p);
			if (rc) {
				fprintf(stderr, "tier: %s\n", strerror(-rc));
				return 1;
			}
			char bs[32];
			printf(
			    "| %s | %u | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | "
			    "%.0f | %.2f | %.2f | %.2f | **%.2f** | **%.2f** | %.2f | %.2f | %.2f "
			    "| %.2f |\n",
			    kvt_fmt_bytes(B, bs, sizeof(bs)), Q, sw, rw, sr, rr, one, tr.w_mbs,
			    tr.r_mbs, tr.bw_mbs, tr.br_mbs, tr.w_mbs / sw, tr.r_mbs / rr,
			    tr.r_mbs / one, tr.bw_mbs / sw, tr.br_mbs / rr, raw_p99, tr.p50, tr.p99,
			    tr.p99 / raw_p99);
			fflush(stdout);
		}
	}
	printf("(throughput in MB/s; raw B x Q: B-byte I/Os, Q in flight; raw 1-rec: one record at "
	       "a time cut like the tier cuts it; batch: write_batch/read_batch of Q records a "
	       "call, at most 512 MiB)\n");
	if (fio)
		run_fio(tdir);
	rmdir(tdir);
	return 0;
#endif
}
