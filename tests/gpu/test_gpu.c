/*
 * test_gpu.c -- the GPU interface without a device: the host-memory stand-in, and -ENODEV from
 * every device call (a build without CUDA, or a machine without a GPU). test_gpu_device.c has
 * the tests that need a device.
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

/* Batched copies on the stand-in: every piece lands; a piece out of range copies nothing. */
static void test_gpu_hostmem_copy_many(void **state)
{
	struct kvt_gpu_mem m;
	assert_int_equal(kvt_hostmem_alloc(1 << 20, &m), 0);
	uint8_t *a = malloc(8 * 4096), *b = calloc(8, 4096);
	kvt_test_fill(a, 8 * 4096, 5);
	struct kvt_gpu_piece v[8], w[8];
	for (size_t i = 0; i < 8; i++) { /* scattered on the device, in order in host memory */
		v[i] = (struct kvt_gpu_piece){
		    .off = (7 - i) * 65536 + 100, .host = a + i * 4096, .len = 4096};
		w[i] = (struct kvt_gpu_piece){.off = v[i].off, .host = b + i * 4096, .len = 4096};
	}
	assert_int_equal(kvt_gpu_copy_to_many(&m, v, 8), 0);
	assert_int_equal(kvt_gpu_copy_from_many(&m, w, 8), 0);
	assert_memory_equal(a, b, 8 * 4096);
	memset(b, 0, 8 * 4096);
	w[7].off = (1 << 20) - 4095; /* one byte past the end */
	assert_int_equal(kvt_gpu_copy_from_many(&m, w, 8), -EINVAL);
	for (size_t i = 0; i < 8 * 4096; i++)
		assert_int_equal(b[i], 0); /* nothing copied */
	assert_int_equal(kvt_gpu_copy_to_many(&m, v, 0), 0);
	kvt_gpu_free(&m);
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
	uint8_t h[KVT_GPU_IPC_HANDLE_BYTES] = {0};
	assert_int_equal(kvt_gpu_ipc_open(h, 0, 4096, &m), -ENODEV);
	assert_int_equal(kvt_gpu_alloc_or_host(0, 4096, &m), 0); /* falls back to host memory */
	assert_true(m.host);
	kvt_gpu_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gpu_hostmem_roundtrip),
	    cmocka_unit_test(test_gpu_hostmem_copy_many),
	    cmocka_unit_test(test_gpu_absent_answers_enodev),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
