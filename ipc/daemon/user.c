/*
 * user.c -- kvtierd started as root becomes daemon.user before it opens anything else.
 *
 * Root is needed only to make the directories a root install uses (/run/kvtier, /var/lib/kvtier)
 * and hand them over; nothing kvtierd does afterwards needs it. So, before any tier, pool,
 * thread or socket exists: the socket's directory and the data directory are made and given
 * to the user, and so are the tier files a run as root left (the nvme file and its index, a
 * RocksDB directory). Then the supplementary
 * groups (the user's, from the group database: `kvtier:disk` or membership of disk is how a
 * raw NVMe device is reached), the gid and the uid are set, all three ids of each, and
 * no_new_privs; a parent-death signal the starter set (the kernel clears it at the change) is
 * set again. RLIMIT_MEMLOCK goes to unlimited first, as root may: the capability that let
 * root register the host pool with io_uring is gone afterwards. A setuid(0) that succeeds
 * afterwards stops the start. Whatever the user can't reach is then an error at start with its
 * path, not a failure later.
 *
 * Started as anything but root, daemon.user must name the uid kvtierd already runs as.
 */
#include "daemon.h"
#include "core/log.h"

#include <errno.h>
#include <ftw.h>
#include <grp.h>
#include <libgen.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

int kvd_make_dirs(const char *dir)
{
	char p[sizeof(((struct kvd *)0)->data_dir)];
	if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + 1;; s++) {
		if (*s && *s != '/')
			continue;
		char c = *s;
		*s = 0;
		if (mkdir(p, 0750) && errno != EEXIST)
			return -errno;
		*s = c;
		if (!c)
			return 0;
	}
}

/* NAME, UID, NAME:GROUP or UID:GID; the group defaults to the user's own (or the uid). */
static int resolve(const char *spec, uid_t *uid, gid_t *gid, char *name, size_t name_len)
{
	char u[KVT_OPT_STR_MAX], *g = NULL, *end;
	snprintf(u, sizeof(u), "%s", spec);
	if ((g = strchr(u, ':')))
		*g++ = 0;
	struct passwd *pw;
	unsigned long n = strtoul(u, &end, 10);
	if (*u && !*end) {
		*uid = (uid_t)n;
		pw = getpwuid(*uid);
	} else if (!(pw = *u ? getpwnam(u) : NULL)) {
		kvt_log(KVT_LOG_ERROR, "daemon.user: no user named '%s'", u);
		return -ENOENT;
	} else {
		*uid = pw->pw_uid;
	}
	*gid = pw ? pw->pw_gid : (gid_t)*uid;
	snprintf(name, name_len, "%s", pw ? pw->pw_name : "");
	if (!g || !*g)
		return 0;
	n = strtoul(g, &end, 10);
	if (!*end) {
		*gid = (gid_t)n;
		return 0;
	}
	struct group *gr = getgrnam(g);
	if (!gr) {
		kvt_log(KVT_LOG_ERROR, "daemon.user: no group named '%s'", g);
		return -ENOENT;
	}
	*gid = gr->gr_gid;
	return 0;
}

static uid_t to_uid;
static gid_t to_gid;
static int walk_err;

/* Root's entries become the user's; another uid's are left alone (and will say so at open). */
static int give(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)flag, (void)ftw;
	if (st->st_uid == 0 && lchown(path, to_uid, to_gid)) {
		walk_err = -errno;
		kvt_log(KVT_LOG_ERROR, "daemon.user: chown %s: %s", path, strerror(errno));
		return 1;
	}
	return 0;
}

/* The socket's and the data directory: made if missing (0750); root's handed over if it grants
 * nothing past 0750, as a directory kvtierd made does (never /tmp, /var/lib or a home: those
 * are an error to fix by hand); another uid's refused. */
static int hand_over_dir(const char *dir)
{
	int rc = kvd_make_dirs(dir);
	struct stat st;
	if (rc || (rc = stat(dir, &st) ? -errno : 0)) {
		kvt_log(KVT_LOG_ERROR, "daemon.user: %s: %s", dir, strerror(-rc));
		return rc;
	}
	if (st.st_uid == to_uid)
		return 0;
	if (st.st_uid != 0 || (st.st_mode & 027)) {
		kvt_log(
		    KVT_LOG_ERROR,
		    "daemon.user: %s (uid %u, mode %03o) is not one kvtierd made; make it uid %u's "
		    "with mode 0750 or less",
		    dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777), (unsigned)to_uid);
		return -EPERM;
	}
	walk_err = 0;
	give(dir, &st, FTW_D, NULL);
	return walk_err;
}

/* What the tiers left from a run as root: the nvme file, the indexes a clean stop saves, and a
 * RocksDB directory (one with a CURRENT file: never a tree that is not RocksDB's). A block device
 * is not handed over: the user reaches it through a group (daemon.user=kvtier:disk). */
static int hand_over_tiers(struct kvd *d)
{
	char rdb[KVT_OPT_STR_MAX + 300], nvme[KVT_OPT_STR_MAX + 300], p[KVT_OPT_STR_MAX + 320];
	kvt_opts_tier_path(&d->opts, KVT_OPT_ROCKSDB_PATH, d->data_dir, rdb, sizeof(rdb));
	kvt_opts_tier_path(&d->opts, KVT_OPT_NVME_PATH, d->data_dir, nvme, sizeof(nvme));
	struct stat st;
	walk_err = 0;
	snprintf(p, sizeof(p), "%s/CURRENT", rdb);
	if (!stat(p, &st))
		nftw(rdb, give, 16, FTW_PHYS | FTW_MOUNT);
	char files[4][sizeof(p)];
	snprintf(files[0], sizeof(files[0]), "%s", nvme);
	snprintf(files[1], sizeof(files[1]), "%s.index", nvme);
	snprintf(files[2], sizeof(files[2]), "%s.index", rdb);
	snprintf(files[3], sizeof(files[3]), "%s/nvme.index", d->data_dir);
	for (int i = 0; i < 4 && !walk_err; i++)
		if (!lstat(files[i], &st) && S_ISREG(st.st_mode))
			give(files[i], &st, FTW_F, NULL);
	return walk_err;
}

/* After the drop: the user must be able to make files in dir. */
static int reachable(const char *dir)
{
	if (!access(dir, W_OK | X_OK))
		return 0;
	int rc = -errno;
	kvt_log(KVT_LOG_ERROR,
	        "daemon.user: uid %u cannot write %s: %s (the modes of its parents?)",
	        (unsigned)to_uid, dir, strerror(errno));
	return rc;
}

/* daemon.user (spec) into to_uid, to_gid and name, and whether kvtierd may be that user: what
 * needs no change of credentials or directories. @return : 0 (nothing to change), 1 (root
 * becomes the user), -ENOENT, -EPERM (logged). */
static int check_user(const char *spec, char *name, size_t name_len)
{
	if (!*spec)
		return 0;
	int rc = resolve(spec, &to_uid, &to_gid, name, name_len);
	if (rc)
		return rc;
	if (geteuid() != 0) {
		if (geteuid() == to_uid && getegid() == to_gid)
			return 0;
		kvt_log(KVT_LOG_ERROR,
		        "daemon.user=%s: kvtierd runs as uid %u gid %u, and only root can become "
		        "uid %u gid %u",
		        spec, (unsigned)geteuid(), (unsigned)getegid(), (unsigned)to_uid,
		        (unsigned)to_gid);
		return -EPERM;
	}
	return to_uid != 0; /* root it stays, as asked */
}

int kvd_user_check(const struct kvd *d)
{
	char name[256];
	int rc = check_user(kvt_opt_str(&d->opts, KVT_OPT_DAEMON_USER), name, sizeof(name));
	return rc < 0 ? rc : 0;
}

int kvd_become_user(struct kvd *d)
{
	const char *spec = kvt_opt_str(&d->opts, KVT_OPT_DAEMON_USER);
	char name[256];
	int rc = check_user(spec, name, sizeof(name));
	if (rc <= 0)
		return rc;
	char sock_dir[sizeof(d->sock_path)];
	snprintf(sock_dir, sizeof(sock_dir), "%s", d->sock_path);
	dirname(sock_dir);
	if ((rc = hand_over_dir(sock_dir)) || (rc = hand_over_dir(d->data_dir)) ||
	    (rc = hand_over_tiers(d)))
		return rc;
	struct rlimit unlimited = {RLIM_INFINITY,
	                           RLIM_INFINITY}; /* io_uring's registered buffers */
	if (setrlimit(RLIMIT_MEMLOCK, &unlimited))
		kvt_log(KVT_LOG_WARN, "daemon.user: RLIMIT_MEMLOCK stays: %s", strerror(errno));
	int pdeath = 0; /* a change of credentials clears it: what the parent asked for stays */
	pid_t parent = getppid();
	prctl(PR_GET_PDEATHSIG, &pdeath);
	if ((*name ? initgroups(name, to_gid) : setgroups(1, &to_gid)) ||
	    setresgid(to_gid, to_gid, to_gid) || setresuid(to_uid, to_uid, to_uid)) {
		rc = -errno;
		kvt_log(KVT_LOG_ERROR, "daemon.user=%s: %s", spec, strerror(errno));
		return rc;
	}
	if (pdeath && (prctl(PR_SET_PDEATHSIG, pdeath) || getppid() != parent)) {
		kvt_log(KVT_LOG_ERROR, "daemon.user=%s: the process that started kvtierd is gone",
		        spec);
		return -ESRCH;
	}
	if (setuid(0) == 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		kvt_log(KVT_LOG_ERROR, "daemon.user=%s: root could be taken back; not starting",
		        spec);
		return -EPERM;
	}
	if ((rc = reachable(sock_dir)) || (rc = reachable(d->data_dir)))
		return rc;
	kvt_log(KVT_LOG_INFO, "running as uid %u gid %u (daemon.user=%s)", (unsigned)to_uid,
	        (unsigned)to_gid, spec);
	return 0;
}
