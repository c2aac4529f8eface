/* sockpath.c -- where the daemon listens and where clients look for it (DESIGN.md, Processes). */
#include "proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int candidate(int i, char *out, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;
	switch (i) {
	case 0:
		n = snprintf(out, len, "/run/kvtier/kvtier.sock");
		break;
	case 1:
		if (!xdg || !*xdg)
			return -ENOENT;
		n = snprintf(out, len, "%s/kvtier/kvtier.sock", xdg);
		break;
	case 2:
		n = snprintf(out, len, "/tmp/kvtier-%u/kvtier.sock", (unsigned)getuid());
		break;
	default:
		return -ENOENT;
	}
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int kvt_sockpath_client(char *out, size_t len)
{
	const char *env = getenv("KVTIER_SOCKET");
	if (env && *env) {
		if (snprintf(out, len, "%s", env) >= (int)len)
			return -ENAMETOOLONG;
		return 0;
	}
	struct stat st;
	for (int i = 0; i < 3; i++)
		if (!candidate(i, out, len) && !stat(out, &st) && S_ISSOCK(st.st_mode))
			return 0;
	/* nothing running: name the path this user's daemon would use */
	return kvt_sockpath_daemon(out, len);
}

int kvt_sockpath_daemon(char *out, size_t len)
{
	if (geteuid() == 0 || access("/run/kvtier", W_OK) == 0)
		return candidate(0, out, len);
	if (!candidate(1, out, len))
		return 0;
	return candidate(2, out, len);
}
