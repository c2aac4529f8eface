/*
 * bench_gpu.c -- kvtier bench gpu: copies between host memory and a GPU through kvt_gpu (the
 * calls a GPU tier makes), against memcpy between two host buffers in the same run.
 *
 * For each chunk size, GB/s of:
 *   memcpy          host to host, two pre-faulted private buffers (the baseline)
 *   to GPU, pageable   kvt_gpu_copy_to from a pre-faulted private buffer
 *   to GPU, shm        kvt_gpu_copy_to from a memfd mapping registered with
 *                      kvt_gpu_host_register -- the host tier's own kind of memory, pinned
 *   from GPU, pageable / shm   kvt_gpu_copy_from into the same two
 *   batched, shm    kvt_gpu_copy_to_many / _from_many: --batch chunks a call (fewer where they
 *                   would not fit in 256 MiB), consecutive in the mapping, one wait a batch
 * Each cell copies chunks one after another (the device offset moving through a 1 GiB
 * allocation) for at least --seconds (0.3), and reports the best of --runs (3).
 *
 * usage: kvtier-bench-gpu [--seconds S] [--runs N] [--device D] [--batch N (64, at most 1024)]
 * Exits 77 where kvt_gpu_probe() finds no device (as the tests do), 1 on an error.
 *
 * It links kvt_gpu alone, not bench_util (which brings the whole library and its Debian
 * packages), so that tools/gpu-check.sh can carry it to a GPU machine without them; hence its
 * own now_s() and die().
 */
#include "core/util.h"
#include "gpu/gpu.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define DEV_BYTES     ((size_t)1 << 30)
#define MAX_CHUNK     ((size_t)256 << 20)
#define KVT_MIN(a, b) ((a) < (b) ? (a) : (b))

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "kvtier bench gpu: %s: %s\n", what, strerror(-rc));
	exit(1);
}

enum op { MEMCPY, TO, FROM, TO_MANY, FROM_MANY };

#define MAX_BATCH 1024

struct env {
	struct kvt_gpu_mem dev;
	char *src, *dst; /* pageable, MAX_CHUNK each */
	char *shm;       /* a registered memfd mapping, MAX_CHUNK */
	double seconds;
	int runs;
	size_t batch; /* pieces a batched call */
};

/* One step of a cell: a chunk of len bytes at off, or `per` of them from off on. */
static int copy_once(struct env *e, enum op op, char *host, size_t off, size_t len, size_t per)
{
	static struct kvt_gpu_piece v[MAX_BATCH];
	switch (op) {
	case MEMCPY:
		memcpy(e->dst, host, len);
		return 0;
	case TO:
		return kvt_gpu_copy_to(&e->dev, off, host, len);
	case FROM:
		return kvt_gpu_copy_from(&e->dev, off, host, len);
	case TO_MANY:
	case FROM_MANY:
		break;
	}
	for (size_t i = 0; i < per; i++)
		v[i] = (struct kvt_gpu_piece){off + i * len, host + i * len, len};
	return op == TO_MANY ? kvt_gpu_copy_to_many(&e->dev, v, per)
	                     : kvt_gpu_copy_from_many(&e->dev, v, per);
}

/* GB/s of one kind of copy of chunks of len bytes, the best of e->runs. */
static double rate(struct env *e, enum op op, char *host, size_t len)
{
	size_t per = op == TO_MANY || op == FROM_MANY ? KVT_MIN(e->batch, MAX_CHUNK / len) : 1;
	double best = 0;
	for (int r = 0; r < e->runs; r++) {
		size_t off = 0, n = 0;
		double t0 = now_s(), t;
		do {
			int rc = copy_once(e, op, host, off, len, per);
			if (rc)
				die("a copy", rc);
			off = off + 2 * per * len <= DEV_BYTES ? off + per * len
			                                       : 0; /* the next fits */
			n += per;
			t = now_s();
		} while (t - t0 < e->seconds);
		double gbs = (double)n * (double)len / (t - t0) / 1e9;
		best = gbs > best ? gbs : best;
	}
	return best;
}

/* v as a whole number from lo to hi into *out. @return : whether it is one. */
static bool whole(const char *v, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > hi)
		return false;
	*out = x;
	return true;
}

#define USAGE                                                                                      \
	"usage: kvtier bench gpu [--seconds S (0-3600)] [--runs N (1-100)] [--device D] "          \
	"[--batch 1-%d]"

int main(int argc, char **argv)
{
	struct env e = {.seconds = 0.3, .runs = 3, .batch = 64};
	int device = 0;
	if (kvt_help_asked(argc, argv)) {
		printf(USAGE "\n", MAX_BATCH);
		return 0;
	}
	for (int i = 1; i < argc; i += 2) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
		char *end;
		long x = 0;
		bool ok = false;
		if (!strcmp(o, "--seconds")) {
			e.seconds = strtod(v, &end);
			ok = end != v && !*end && e.seconds > 0 && e.seconds <= 3600;
		} else if (!strcmp(o, "--runs") && (ok = whole(v, 1, 100, &x)))
			e.runs = (int)x;
		else if (!strcmp(o, "--device") && (ok = whole(v, 0, 255, &x)))
			device = (int)x;
		else if (!strcmp(o, "--batch") && (ok = whole(v, 1, MAX_BATCH, &x)))
			e.batch = (size_t)x;
		if (!ok) { /* a word it does not know, or a value it cannot run: refused */
			fprintf(stderr, USAGE " (not '%s%s%s')\n", MAX_BATCH, o, *v ? " " : "", v);
			return 2;
		}
	}
	int n = kvt_gpu_probe();
	if (n <= 0) {
		fprintf(stderr, "kvtier bench gpu: no GPU on this machine (kvt_gpu_probe: %d)\n",
		        n);
		return 77;
	}
	int rc = kvt_gpu_alloc(device, DEV_BYTES, &e.dev);
	if (rc)
		die("kvt_gpu_alloc", rc);
	e.src = malloc(MAX_CHUNK);
	e.dst = malloc(MAX_CHUNK);
	int fd = memfd_create("kvtier-bench-gpu", MFD_CLOEXEC);
	if (!e.src || !e.dst || fd < 0 || ftruncate(fd, (off_t)MAX_CHUNK))
		die("host buffers", -ENOMEM);
	e.shm = mmap(NULL, MAX_CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (e.shm == MAP_FAILED)
		die("mmap", -errno);
	memset(e.src, 0x5a, MAX_CHUNK);
	memset(e.dst, 0xa5, MAX_CHUNK);
	memset(e.shm, 0x3c, MAX_CHUNK);
	if ((rc = kvt_gpu_host_register(e.shm, MAX_CHUNK)))
		die("kvt_gpu_host_register", rc);

	printf(
	    "# kvtier bench gpu: device %d of %d, best of %d runs of %.2f s per cell, batches of "
	    "%zu, GB/s\n\n",
	    device, n, e.runs, e.seconds, e.batch);
	printf(
	    "| chunk | memcpy | to GPU, pageable | to GPU, shm (registered) | to GPU, shm, batched "
	    "| from GPU, pageable | from GPU, shm (registered) | from GPU, shm, batched "
	    "| batched to / memcpy | batched from / memcpy |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|\n");
	static const size_t sizes[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 256 << 20};
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t len = sizes[k];
		double base = rate(&e, MEMCPY, e.src, len);
		double tp = rate(&e, TO, e.src, len), ts = rate(&e, TO, e.shm, len);
		double tb = rate(&e, TO_MANY, e.shm, len);
		double fp = rate(&e, FROM, e.dst, len), fs = rate(&e, FROM, e.shm, len);
		double fb = rate(&e, FROM_MANY, e.shm, len);
		printf(
		    "| %zu KiB | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n",
		    len >> 10, base, tp, ts, tb, fp, fs, fb, tb / base, fb / base);
		fflush(stdout);
	}
	kvt_gpu_host_unregister(e.shm);
	kvt_gpu_free(&e.dev);
	munmap(e.shm, MAX_CHUNK);
	close(fd);
	free(e.src);
	free(e.dst);
	return 0;
}
