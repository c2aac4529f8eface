/*
 * test_nvme_blockdev.c -- the nvme tier on a raw block device: a loop device over a 64 MiB image
 * (root only; skips with 77 where loop devices cannot be attached, e.g. in a container). The
 * tier sizes itself from BLKGETSIZE64 (no fallocate, no truncate), writes 2.5x its capacity so
 * that FIFO reclaim runs, and every record is byte-identical or reported dropped; after a
 * reopen the walk finds exactly what the tier says it holds, and the newest records are there.
 */
#include "nvme_fixture.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define IMG_BYTES (64u << 20)
#define N_RECS    240

static char g_dev[64];

static int attach(const char *img)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "losetup -f --show %s 2>/dev/null", img);
	FILE *f = popen(cmd, "r");
	if (!f)
		return -1;
	if (!fgets(g_dev, sizeof(g_dev), f))
		g_dev[0] = 0;
	int rc = pclose(f);
	g_dev[strcspn(g_dev, "\n")] = 0;
	return rc == 0 && !strncmp(g_dev, "/dev/loop", 9) ? 0 : -1;
}

static int detach(void **state)
{
	(void)state;
	if (g_dev[0]) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "losetup -d %s", g_dev);
		if (system(cmd))
			fprintf(stderr, "could not detach %s\n", g_dev);
		g_dev[0] = 0;
	}
	return 0;
}

static void test_nvme_blockdev(void **state)
{
	struct nvt n;
	nvt_init(&n, "1GiB", "8"); /* more than the device: the device's size wins */
	char img[300];
	snprintf(img, sizeof(img), "%s/blk.img", n.dir);
	int fd = open(img, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, IMG_BYTES), 0);
	close(fd);
	if (geteuid() != 0 || attach(img)) {
		nvt_fini(&n);
		print_message("SKIP: no loop device (needs root and loop support)\n");
		skip();
	}
	assert_int_equal(kvt_opts_set(&n.opts, "nvme.path", g_dev), 0);
	assert_int_equal(nvt_open(&n), 0);
	struct kvt_tier_stats s = nvt_stats(&n);
	assert_true(s.capacity_bytes > 0 && s.capacity_bytes < IMG_BYTES);
	uint64_t loc[N_RECS];
	size_t len[N_RECS];
	for (uint64_t i = 0; i < N_RECS; i++) {
		len[i] = nvt_len(i + 1, 100, 1300 << 10);
		assert_int_equal(nvt_put(&n, i + 1, len[i], &loc[i]), 0);
	}
	assert_true(n.n_dropped > 0); /* 2.5x the device: reclaim ran */
	size_t found = 0;
	for (uint64_t i = 0; i < N_RECS; i++) {
		int rc = nvt_check(&n, i + 1, len[i], loc[i]); /* fails on a wrong byte */
		if (rc == 0)
			found++;
		else
			assert_true(rc == -ENOENT && nvt_was_dropped(&n, loc[i]));
	}
	assert_int_equal(found, nvt_stats(&n).chunks);
	uint64_t used = nvt_stats(&n).used_bytes;
	nvt_close(&n);
	assert_int_equal(nvt_open(&n), 0);
	struct nvt_walk w = {.nv = &n};
	assert_int_equal(kvt_tier_nvme.iterate(n.t, nvt_verify_visit, &w), 0);
	assert_int_equal(w.n, found);
	assert_int_equal(w.bytes, used);
	assert_int_equal(nvt_stats(&n).used_bytes, used);
	assert_int_equal(nvt_check(&n, N_RECS, len[N_RECS - 1], loc[N_RECS - 1]), 0);
	nvt_close(&n);
	/* the tier used the device as it is: nothing resized it */
	fd = open(g_dev, O_RDONLY);
	uint64_t dev_bytes = 0;
	assert_true(fd >= 0 && ioctl(fd, BLKGETSIZE64, &dev_bytes) == 0);
	close(fd);
	assert_int_equal(dev_bytes, IMG_BYTES);
	print_message("%s: %zu of %d records kept, %zu dropped by reclaim\n", g_dev, found, N_RECS,
	              n.n_dropped);
	detach(NULL);
	nvt_fini(&n);
}

int main(int argc, char **argv)
{
	nvt_pick_backend(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_nvme_blockdev, detach),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
