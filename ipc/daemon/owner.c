/*
 * owner.c -- one kvtierd per data directory.
 *
 * A second daemon on a running one's data directory would open the same nvme log and RocksDB
 * database beside it. Each tier refuses a second owner on its own (the nvme tier locks its file,
 * RocksDB its LOCK file), but with tiers.order = auto a tier that cannot open is skipped, and
 * the second daemon would run on host alone, unseen. So before any tier opens, kvtierd takes an
 * exclusive flock on the data directory itself and keeps it until it exits (after the tiers
 * close; kvd_daemon_stop closes its fd); a second one stops, naming the holder's pid when
 * /proc/locks tells it. The lock goes with the process: a daemon killed with -9 leaves nothing to
 * clean up, and nothing is written in the directory for it, so a run as root and one as daemon.user
 * share it without a hand-over.
 */
#include "daemon.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* The pid /proc/locks names for a FLOCK on st's inode, or 0. Lines read
 * "1: FLOCK  ADVISORY  WRITE 4242 08:01:131 0 EOF" (major and minor in hex, the inode decimal). */
static long holder_of(const struct stat *st)
{
	FILE *f = fopen("/proc/locks", "re");
	if (!f)
		return 0;
	char line[256];
	long pid = 0;
	while (!pid && fgets(line, sizeof(line), f)) {
		char kind[16];
		long p;
		unsigned maj, min;
		unsigned long long ino;
		if (sscanf(line, "%*[^:]: %15s %*s %*s %ld %x:%x:%llu", kind, &p, &maj, &min,
		           &ino) == 5 &&
		    !strcmp(kind, "FLOCK") && ino == (unsigned long long)st->st_ino &&
		    maj == major(st->st_dev) && min == minor(st->st_dev))
			pid = p;
	}
	fclose(f);
	return pid;
}

int kvd_own_data_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int rc = -errno;
		kvt_log(KVT_LOG_ERROR, "data dir %s: %s", dir, strerror(errno));
		return rc;
	}
	if (!flock(fd, LOCK_EX | LOCK_NB))
		return fd; /* open, and the lock held, until kvd_daemon_stop or the exit */
	int rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
	struct stat st;
	long pid = rc == -EBUSY && !fstat(fd, &st) ? holder_of(&st) : 0;
	if (pid)
		kvt_log(KVT_LOG_ERROR, "data dir %s is in use by another kvtierd (pid %ld)", dir,
		        pid);
	else
		kvt_log(KVT_LOG_ERROR, "data dir %s: cannot lock it: %s", dir, strerror(-rc));
	close(fd);
	return rc;
}
