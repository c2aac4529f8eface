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
	if (err < 0 && err > -4096)
		return strerror(-err);
	return "unknown error";
}

KVT_API unsigned kvt_version(void)
{
	return KVT_VERSION;
}
