/* test_chunk.c -- the record header round-trips and rejects damage. */
#include "testlib.h"
#include "core/chunk.h"

#include <xxhash.h>

#include <errno.h>
#include <string.h>

static struct kvt_chunk_hdr sample(void)
{
	struct kvt_chunk_hdr h = {.codec = 0,
	                          .level = 0,
	                          .flags = KVT_CHUNK_F_HAS_PARENT,
	                          .n_tokens = 16,
	                          .tenant = 1000,
	                          .raw_bytes = 4096,
	                          .payload_bytes = 4096,
	                          .seq = 42};
	h.ns.w[0] = 1, h.ns.w[1] = 2, h.key.w[0] = 3, h.key.w[1] = 4;
	h.parent.w[0] = 5, h.parent.w[1] = 6;
	return h;
}

static void test_chunk_roundtrip(void **state)
{
	uint8_t buf[KVT_CHUNK_HDR_BYTES], payload[4096];
	kvt_test_fill(payload, sizeof(payload), 7);
	struct kvt_chunk_hdr h = sample(), g;
	h.payload_sum = kvt_chunk_sum(payload, sizeof(payload));
	kvt_chunk_hdr_encode(buf, &h);
	assert_int_equal(kvt_chunk_hdr_decode(buf, &g), 0);
	assert_int_equal(g.version, KVT_CHUNK_VERSION);
	assert_memory_equal(&g.ns, &h.ns, 16);
	assert_memory_equal(&g.key, &h.key, 16);
	assert_memory_equal(&g.parent, &h.parent, 16);
	assert_int_equal(g.seq, 42);
	assert_int_equal(g.tenant, 1000);
	assert_int_equal(g.payload_bytes, 4096);
	assert_int_equal(kvt_chunk_verify(&g, payload, sizeof(payload)), 0);
	payload[100] ^= 1;
	assert_int_equal(kvt_chunk_verify(&g, payload, sizeof(payload)), -EBADMSG);
	assert_int_equal(kvt_chunk_verify(&g, payload, 4095), -EBADMSG);
}

static void test_chunk_header_damage(void **state)
{
	uint8_t buf[KVT_CHUNK_HDR_BYTES];
	struct kvt_chunk_hdr h = sample(), g;
	kvt_chunk_hdr_encode(buf, &h);
	/* every single-bit flip is caught */
	for (size_t bit = 0; bit < KVT_CHUNK_HDR_BYTES * 8; bit++) {
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_int_not_equal(kvt_chunk_hdr_decode(buf, &g), 0);
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	memset(buf, 0, sizeof(buf));
	assert_int_equal(kvt_chunk_hdr_decode(buf, &g), -EBADMSG);
}

static void test_chunk_layout_is_stable(void **state)
{
	uint8_t buf[KVT_CHUNK_HDR_BYTES];
	struct kvt_chunk_hdr h = sample();
	kvt_chunk_hdr_encode(buf, &h);
	assert_memory_equal(buf, "KVTC", 4);
	assert_int_equal(buf[4], 1);
	assert_int_equal(buf[12], 16);
	assert_int_equal(buf[16], 1);
	assert_int_equal(buf[32], 3);
	assert_int_equal(buf[48], 5);
	assert_int_equal(buf[80], 42);
	assert_int_equal(buf[96], 1000 & 0xff);
}

/* The payload checksum is plain XXH3-64 (seed 0) whatever code path computes it (the runtime
 * dispatch to AVX2/AVX-512 included): other implementations must agree. */
static void test_chunk_sum_is_xxh3(void **state)
{
	static uint8_t buf[3 << 20];
	kvt_test_fill(buf, sizeof(buf), 9);
	const size_t lens[] = {0, 1, 17, 128, 240, 241, 4096, 65537, 2 << 20, sizeof(buf)};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		assert_true(kvt_chunk_sum(buf, lens[i]) == XXH3_64bits(buf, lens[i]));
	assert_true(kvt_chunk_sum("abc", 3) == 0x78af5f94892f3950ull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_chunk_roundtrip),
	    cmocka_unit_test(test_chunk_header_damage),
	    cmocka_unit_test(test_chunk_layout_is_stable),
	    cmocka_unit_test(test_chunk_sum_is_xxh3),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
