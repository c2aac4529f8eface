/*
 * log.h -- the daemon's log sink. Libraries stay silent (STYLE.md 18): core code logs only through
 * this sink, which is off (NULL) unless the daemon installs one.
 */
#ifndef KVT_CORE_LOG_H
#define KVT_CORE_LOG_H
#include "util.h"
enum kvt_log_level { KVT_LOG_ERROR, KVT_LOG_WARN, KVT_LOG_INFO, KVT_LOG_DEBUG };
typedef void (*kvt_log_fn)(enum kvt_log_level lvl, const char *msg);
void kvt_log_set(kvt_log_fn fn, enum kvt_log_level max);
/* Changes the level, keeping the sink (kvtier config set log.level). */
void kvt_log_set_level(enum kvt_log_level max);
int kvt_log_level_parse(const char *s);
void kvt_log(enum kvt_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Rate-limited: at most one line per second per call site. */
#define kvt_log_rl(lvl, ...)                                                                       \
	do {                                                                                       \
		static uint64_t kvt__last_ns;                                                      \
		uint64_t kvt__now = kvt_now_ns();                                                  \
		if (kvt__now - kvt__last_ns > 1000000000ull) {                                     \
			kvt__last_ns = kvt__now;                                                   \
			kvt_log(lvl, __VA_ARGS__);                                                 \
		}                                                                                  \
	} while (0)
#endif
