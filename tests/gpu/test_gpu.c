/*
 * test_gpu.c -- the GPU interface: the host-memory stand-in always; a real device when present
 * (exit 77 otherwise: this machine has no GPU). Without CUDA at build time, or without a device
 * at run time, every device call must answer -ENODEV.
 */
#include "testlib.h"
#include "gpu/gpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_gpu_hostmem_roundtrip(void **state)
{
	struct kvt_gpu_mem m;
	assert_int_equal(kvt_hostmem_alloc(1 << 20, &m), 0);
	assert_true(m.host);
	uint8_t *a = malloc(4096), *b = malloc(4096);
	kvt_test_fill(a, 4096, 1);
	assert_int_equal(kvt_gpu_copy_to(&m, 8192, a, 4096), 0);
	assert_int_equal(kvt_gpu_copy_from(&m, 8192, b, 4096), 0);
	assert_memory_equal(a, b, 4096);
	assert_int_equal(kvt_gpu_copy_to(&m, (1 << 20) - 100, a, 4096), -EINVAL);
	assert_int_equal(kvt_gpu_ipc_export(&m, (uint8_t[KVT_GPU_IPC_HANDLE_BYTES]){0}), -ENODEV);
	kvt_gpu_free(&m);
	assert_null(m.ptr);
	free(a);
	free(b);
}

static void test_gpu_absent_answers_enodev(void **state)
{
	if (kvt_gpu_probe() > 0)
		skip(); /* a device is present: test_gpu_device covers it */
	struct kvt_gpu_mem m;
	char buf[64];
	assert_int_equal(kvt_gpu_alloc(0, 4096, &m), -ENODEV);
	assert_int_equal(kvt_gpu_host_register(buf, sizeof(buf)), -ENODEV);
	assert_int_equal(kvt_gpu_alloc_or_host(0, 4096, &m), 0); /* falls back to host memory */
	assert_true(m.host);
	kvt_gpu_free(&m);
}

static void test_gpu_device_roundtrip(void **state)
{
	int n = kvt_gpu_probe();
	if (n <= 0) {
		fprintf(stderr, "SKIP: no GPU on this machine (kvt_gpu_probe: %d)\n", n);
		skip();
	}
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gpu_hostmem_roundtrip),
	    cmocka_unit_test(test_gpu_absent_answers_enodev),
	    cmocka_unit_test(test_gpu_device_roundtrip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
