/* util.c -- panics, size parsing and formatting. */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <strings.h>

void kvt__panic(const char *file, int line, const char *what)
{
	fprintf(stderr, "kvtier: fatal: %s:%d: %s\n", file, line, what);
	abort();
}

int kvt_parse_size(const char *s, uint64_t *out)
{
	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	while (isspace((unsigned char)*end))
		end++;
	static const struct {
		const char *suffix;
		unsigned shift;
	} units[] = {{"", 0},    {"b", 0},    {"k", 10},   {"kib", 10}, {"kb", 10},
	             {"m", 20},  {"mib", 20}, {"mb", 20},  {"g", 30},   {"gib", 30},
	             {"gb", 30}, {"t", 40},   {"tib", 40}, {"tb", 40}};
	for (size_t i = 0; i < KVT_ARRAY_SIZE(units); i++) {
		if (strcasecmp(end, units[i].suffix))
			continue;
		if (units[i].shift && v > (UINT64_MAX >> units[i].shift))
			return -ERANGE;
		*out = (uint64_t)v << units[i].shift;
		return 0;
	}
	return -EINVAL;
}

const char *kvt_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	size_t u = 0;
	double v = (double)bytes;
	while (v >= 1024 && u + 1 < KVT_ARRAY_SIZE(unit))
		v /= 1024, u++;
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}
