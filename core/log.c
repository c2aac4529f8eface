/* log.c -- a process-wide log sink; single writer (the daemon's loop) by design. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static kvt_log_fn sink;
static enum kvt_log_level max_level = KVT_LOG_INFO;

void kvt_log_set(kvt_log_fn fn, enum kvt_log_level max)
{
	sink = fn;
	max_level = max;
}

void kvt_log_set_level(enum kvt_log_level max)
{
	max_level = max;
}

int kvt_log_level_parse(const char *s)
{
	static const char *names[] = {"error", "warn", "info", "debug"};
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

void kvt_log(enum kvt_log_level lvl, const char *fmt, ...)
{
	if (!sink || lvl > max_level)
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	sink(lvl, buf);
}
