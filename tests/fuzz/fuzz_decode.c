/*
 * fuzz_decode.c -- every decoder that reads bytes from outside the daemon: the wire-message
 * checks, the record header (what recovery reads from disk), the option and size parsers.
 *
 * Built two ways: as a libFuzzer target (`make fuzz`, clang -fsanitize=fuzzer,address) and, by
 * default, as a ctest program that drives the same entry point with a fixed-seed stream of
 * random inputs and of mutated valid messages, so every CI run also fuzzes a little under ASan.
 */
#include "core/chunk.h"
#include "core/keys.h"
#include "core/options.h"
#include "core/util.h"
#include "ipc/proto.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t n;
	kvt_model_t m;
	char name[KVT_MODEL_STR_MAX + 1], rev[KVT_MODEL_STR_MAX + 1];
	if (!kvt_proto_check_keys(data, size, &n) && n > KVT_BATCH_MAX)
		abort(); /* a count the daemon would trust past its bound */
	if (!kvt_proto_check_put(data, size, &n) &&
	    sizeof(struct kvt_msg_put) + (size_t)n * sizeof(struct kvt_msg_put_item) > size)
		abort();
	if (!kvt_proto_check_release(data, size, &n) &&
	    sizeof(struct kvt_msg_release) + (size_t)n * 8 > size)
		abort();
	if (!kvt_proto_check_namespace(data, size, &m, name, rev) && kvt_chunk_bytes(&m) == 0)
		abort(); /* accepted a model that has no chunk size */
	if (size >= KVT_CHUNK_HDR_BYTES) {
		struct kvt_chunk_hdr h;
		if (!kvt_chunk_hdr_decode(data, &h)) {
			uint8_t again[KVT_CHUNK_HDR_BYTES];
			kvt_chunk_hdr_encode(again, &h);
			if (memcmp(again, data, 120)) /* decode is the inverse of encode */
				abort();
			kvt_chunk_verify(&h, data + KVT_CHUNK_HDR_BYTES,
			                 size - KVT_CHUNK_HDR_BYTES);
		}
	}
	char text[512];
	size_t tl = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
	memcpy(text, data, tl);
	text[tl] = 0;
	static struct kvt_options o;
	kvt_opts_defaults(&o);
	kvt_opts_set_pair(&o, text);
	uint64_t v;
	kvt_parse_size(text, &v);
	return 0;
}

#ifndef KVT_LIBFUZZER
#include "fuzz_corpus.h"

/* A valid NAMESPACE body, PUT body and record header to mutate. */
static size_t seed_input(int which, uint8_t *buf)
{
	memset(buf, 0, 4096);
	if (which == 0) {
		struct kvt_msg_namespace *w = (void *)buf;
		*w = (struct kvt_msg_namespace){.dtype = 1,
		                                .n_layers = 4,
		                                .n_kv_heads = 4,
		                                .head_dim = 16,
		                                .tokens_per_chunk = 16,
		                                .name_len = 5};
		memcpy(w + 1, "model", 5);
		return sizeof(*w) + 5;
	}
	if (which == 1) {
		struct kvt_msg_put *p = (void *)buf;
		*p = (struct kvt_msg_put){.n = 3, .chunk_bytes = 4096};
		return sizeof(*p) + 3 * sizeof(struct kvt_msg_put_item);
	}
	struct kvt_chunk_hdr h = {.n_tokens = 16, .payload_bytes = 64, .raw_bytes = 64};
	h.payload_sum = kvt_chunk_sum(buf + KVT_CHUNK_HDR_BYTES, 64);
	kvt_chunk_hdr_encode(buf, &h);
	return KVT_CHUNK_HDR_BYTES + 64;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 200000;
	if (argc > 2) {
		long n = fuzz_replay_corpus(argv[2]);
		if (n == 0) {
			fprintf(stderr, "corpus %s: empty\n", argv[2]);
			return 1;
		}
		printf("%ld corpus inputs replayed\n", n);
	}
	uint64_t x = 0x9E3779B97F4A7C15ull;
	static uint8_t buf[4096];
	for (long i = 0; i < iters; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t len;
		if (i % 2) { /* random bytes of random length */
			len = (size_t)(x % 600);
			for (size_t j = 0; j < len; j++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				buf[j] = (uint8_t)x;
			}
		} else { /* a valid input with a few bytes changed, sometimes cut short */
			len = seed_input((int)(i / 2 % 3), buf);
			for (int k = 0; k < 1 + (int)(x % 4); k++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				buf[x % len] ^= (uint8_t)(x >> 32);
			}
			if (x % 5 == 0)
				len = (size_t)(x >> 40) % len;
		}
		LLVMFuzzerTestOneInput(buf, len);
	}
	printf("%ld inputs decoded, no crash\n", iters);
	return 0;
}
#endif
