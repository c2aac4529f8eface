/* errors.c -- kvt_strerror over errno and the KVT_ERRORS X-macro list. */
#include "kvtier.h"

#include <string.h>

KVT_API const char *kvt_strerror(int err)
{
	switch (err) {
#define KVT_ERR_CASE(name, value, text)                                                            \
	case value:                                                                                \
		return text;
		KVT_ERRORS(KVT_ERR_CASE)
#undef KVT_ERR_CASE
	case 0:
		return "success";
	default:
		break;
	}
	/* glibc's own static text, never strerror's buffer ("Unknown error 1000"), which the
	 * next call overwrites */
	const char *s = err < 0 && err > -4096 ? strerrordesc_np(-err) : NULL;
	return s ? s : "unknown error";
}

KVT_API unsigned kvt_version(void)
{
	return KVT_VERSION;
}
