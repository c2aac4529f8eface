/* util.h -- small helpers: little-endian access, checks, time, alignment. */
#ifndef KVT_CORE_UTIL_H
#define KVT_CORE_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KVT_ARRAY_SIZE(a)  (sizeof(a) / sizeof((a)[0]))
#define KVT_ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((__typeof__(x))(a)-1))
#define KVT_MIN(a, b)      ((a) < (b) ? (a) : (b))
#define KVT_MAX(a, b)      ((a) > (b) ? (a) : (b))
#define KVT_LIKELY(x)      __builtin_expect(!!(x), 1)
#define KVT_UNLIKELY(x)    __builtin_expect(!!(x), 0)

/* Three kinds of checks (STYLE.md 12). */
#ifndef NDEBUG
#define KVT_ASSERT(x)                                                                              \
	do {                                                                                       \
		if (!(x))                                                                          \
			kvt__panic(__FILE__, __LINE__, #x);                                        \
	} while (0)
#define KVT_ALWAYS(x) ((x) ? 1 : (kvt__panic(__FILE__, __LINE__, #x), 0))
#define KVT_NEVER(x)  ((x) ? (kvt__panic(__FILE__, __LINE__, #x), 1) : 0)
#else
#define KVT_ASSERT(x) ((void)0)
#define KVT_ALWAYS(x) (!!(x))
#define KVT_NEVER(x)  (!!(x))
#endif
#define KVT_PANIC(msg) kvt__panic(__FILE__, __LINE__, msg)

/* Whether a tool's first word asks for its usage (-h, --help): the tool prints it on stdout
 * and exits 0, where a word it does not know prints it on stderr and exits 2. */
static inline int kvt_help_asked(int argc, char **argv)
{
	return argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
}

_Noreturn void kvt__panic(const char *file, int line, const char *what);

static inline void kvt_store_le32(void *p, uint32_t v)
{
	uint8_t *b = p;
	b[0] = (uint8_t)v, b[1] = (uint8_t)(v >> 8), b[2] = (uint8_t)(v >> 16),
	b[3] = (uint8_t)(v >> 24);
}
static inline void kvt_store_le64(void *p, uint64_t v)
{
	kvt_store_le32(p, (uint32_t)v);
	kvt_store_le32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t kvt_load_le32(const void *p)
{
	const uint8_t *b = p;
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static inline uint64_t kvt_load_le64(const void *p)
{
	return kvt_load_le32(p) | (uint64_t)kvt_load_le32((const uint8_t *)p + 4) << 32;
}

static inline uint64_t kvt_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Parses "64MiB", "4GiB", "1000", "2k"; @return : 0 or -EINVAL. */
int kvt_parse_size(const char *s, uint64_t *out);
/* Formats bytes with a binary unit into buf. */
const char *kvt_fmt_bytes(uint64_t bytes, char *buf, size_t len);
#endif
