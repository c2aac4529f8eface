/*
 * test_gpu_device.c -- the GPU interface on a real device; exits 77 (skipped) where kvt_gpu_probe()
 * finds none, as on every CI machine, and fails where it finds one and a call misbehaves.
 *
 * The IPC test is two real processes: this one exports an allocation and runs itself again
 * (KVT_TEST_GPU_IPC_CHILD=handle in hex) as the importer, which checks the owner's bytes, writes
 * its own into the second half and unmaps; the owner then reads them back. CUDA refuses a
 * process its own export, and a forked child may not use its parent's CUDA context.
 */
#include "testlib.h"
#include "gpu/gpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IPC_BYTES (16u << 20)

static void test_gpu_device_roundtrip(void **state)
{
	struct kvt_gpu_mem m;
	assert_int_equal(kvt_gpu_alloc(0, 64 << 20, &m), 0);
	assert_false(m.host);
	size_t len = 32 << 20;
	uint8_t *a = malloc(len), *b = calloc(1, len);
	kvt_test_fill(a, len, 7);
	assert_int_equal(kvt_gpu_host_register(a, len), 0);
	assert_int_equal(kvt_gpu_copy_to(&m, 4096, a, len), 0);
	assert_int_equal(kvt_gpu_copy_from(&m, 4096, b, len), 0);
	assert_memory_equal(a, b, len);
	uint8_t h[KVT_GPU_IPC_HANDLE_BYTES];
	assert_int_equal(kvt_gpu_ipc_export(&m, h), 0);
	assert_int_equal(kvt_gpu_host_unregister(a), 0);
	kvt_gpu_free(&m);
	free(a);
	free(b);
}

/* Batched copies on a device, from registered and from pageable memory: 64 chunks of 64 KiB
 * scattered over the allocation come back in order; a piece out of range copies nothing. */
static void test_gpu_device_copy_many(void **state)
{
	struct kvt_gpu_mem m;
	assert_int_equal(kvt_gpu_alloc(0, 64 << 20, &m), 0);
	size_t n = 64, len = 64 << 10;
	uint8_t *a = aligned_alloc(4096, n * len), *b = aligned_alloc(4096, n * len);
	assert_int_equal(kvt_gpu_host_register(a, n * len), 0);
	for (int round = 0; round < 2; round++) { /* a registered, then b pageable, as the source */
		uint8_t *src = round ? b : a, *dst = round ? a : b;
		kvt_test_fill(src, n * len, 21 + round);
		memset(dst, 0, n * len);
		struct kvt_gpu_piece v[64], w[64];
		for (size_t i = 0; i < n; i++) {
			size_t off =
			    ((i * 37) % n) * (1 << 20) + 512 * i; /* scattered, unaligned */
			v[i] =
			    (struct kvt_gpu_piece){.off = off, .host = src + i * len, .len = len};
			w[i] =
			    (struct kvt_gpu_piece){.off = off, .host = dst + i * len, .len = len};
		}
		assert_int_equal(kvt_gpu_copy_to_many(&m, v, n), 0);
		assert_int_equal(kvt_gpu_copy_from_many(&m, w, n), 0);
		assert_memory_equal(src, dst, n * len);
		memset(dst, 0, n * len);
		w[n - 1].off = (64 << 20) - len + 1;
		assert_int_equal(kvt_gpu_copy_from_many(&m, w, n), -EINVAL);
		for (size_t i = 0; i < n * len; i += 4096)
			assert_int_equal(dst[i], 0); /* nothing copied */
	}
	assert_int_equal(kvt_gpu_host_unregister(a), 0);
	kvt_gpu_free(&m);
	free(a);
	free(b);
}

/* Bad requests on a real device: an error code each, and the device still usable after. */
static void test_gpu_device_errors(void **state)
{
	struct kvt_gpu_mem m, big;
	assert_int_equal(kvt_gpu_alloc(0, (size_t)1 << 52, &big), -ENOMEM);    /* 4 PiB */
	assert_int_equal(kvt_gpu_alloc(kvt_gpu_probe(), 4096, &big), -ENODEV); /* no such device */
	assert_int_equal(kvt_gpu_alloc(0, 1 << 20, &m), 0);
	uint8_t buf[4096] = {0}, back[4096];
	assert_int_equal(kvt_gpu_copy_to(&m, (1 << 20) - 100, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(kvt_gpu_copy_from(&m, (size_t)-1, back, 1), -EINVAL);
	uint8_t junk[KVT_GPU_IPC_HANDLE_BYTES];
	memset(junk, 0xa5, sizeof(junk));
	struct kvt_gpu_mem o;
	int rc = kvt_gpu_ipc_open(junk, 0, 4096, &o);
	assert_int_equal(rc, -EINVAL);
	kvt_test_fill(buf, sizeof(buf), 3); /* and the device still works */
	assert_int_equal(kvt_gpu_copy_to(&m, 0, buf, sizeof(buf)), 0);
	assert_int_equal(kvt_gpu_copy_from(&m, 0, back, sizeof(back)), 0);
	assert_memory_equal(buf, back, sizeof(buf));
	kvt_gpu_free(&m);
}

/* The importer: KVT_TEST_GPU_IPC_CHILD's handle names IPC_BYTES whose first half is
 * kvt_test_fill(.., 11); it writes kvt_test_fill(.., 12) into the second half, after maps of one
 * byte more and of twice what was exported are refused. Exits 0, or 2-6: the step that failed. */
static int ipc_child(const char *hex)
{
	uint8_t h[KVT_GPU_IPC_HANDLE_BYTES];
	for (size_t i = 0; i < sizeof(h); i++)
		if (sscanf(hex + 2 * i, "%2hhx", &h[i]) != 1)
			return 2;
	struct kvt_gpu_mem m;
	if (kvt_gpu_ipc_open(h, 0, 2 * IPC_BYTES, &m) != -EINVAL ||
	    kvt_gpu_ipc_open(h, 0, IPC_BYTES + 1, &m) != -EINVAL) /* past the allocation's end */
		return 6;
	int rc = kvt_gpu_ipc_open(h, 0, IPC_BYTES, &m);
	if (rc) {
		fprintf(stderr, "child: kvt_gpu_ipc_open: %d\n", rc);
		return 3;
	}
	size_t half = IPC_BYTES / 2;
	uint8_t *want = malloc(half), *got = malloc(half);
	kvt_test_fill(want, half, 11);
	if (kvt_gpu_copy_from(&m, 0, got, half) || memcmp(want, got, half))
		return 4;
	kvt_test_fill(want, half, 12);
	if (kvt_gpu_copy_to(&m, half, want, half))
		return 5;
	kvt_gpu_free(&m); /* unmaps; the owner's memory stays */
	free(want);
	free(got);
	return 0;
}

static void test_gpu_device_ipc_across_processes(void **state)
{
	struct kvt_gpu_mem m;
	assert_int_equal(kvt_gpu_alloc(0, IPC_BYTES, &m), 0);
	size_t half = IPC_BYTES / 2;
	uint8_t *a = malloc(half), *b = malloc(half);
	kvt_test_fill(a, half, 11);
	assert_int_equal(kvt_gpu_copy_to(&m, 0, a, half), 0);
	uint8_t h[KVT_GPU_IPC_HANDLE_BYTES];
	assert_int_equal(kvt_gpu_ipc_export(&m, h), 0);
	struct kvt_gpu_mem own; /* CUDA maps an export in other processes only */
	assert_int_equal(kvt_gpu_ipc_open(h, 0, IPC_BYTES, &own), -EINVAL);
	char env[64 + 2 * KVT_GPU_IPC_HANDLE_BYTES] = "KVT_TEST_GPU_IPC_CHILD=";
	for (size_t i = 0; i < sizeof(h); i++)
		sprintf(env + strlen(env), "%02x", h[i]);
	assert_int_equal(kvt_test_run_self("test_gpu_device", env), 0);
	kvt_test_fill(a, half, 12);
	assert_int_equal(kvt_gpu_copy_from(&m, half, b, half), 0);
	assert_memory_equal(a, b, half); /* the importer's bytes, in the owner's memory */
	kvt_gpu_free(&m);
	free(a);
	free(b);
}

int main(void)
{
	const char *child = getenv("KVT_TEST_GPU_IPC_CHILD");
	if (child)
		return ipc_child(child);
	int n = kvt_gpu_probe();
	if (n <= 0) {
		fprintf(stderr, "SKIP: no GPU on this machine (kvt_gpu_probe: %d)\n", n);
		return KVT_TEST_SKIP;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gpu_device_roundtrip),
	    cmocka_unit_test(test_gpu_device_copy_many),
	    cmocka_unit_test(test_gpu_device_errors),
	    cmocka_unit_test(test_gpu_device_ipc_across_processes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
