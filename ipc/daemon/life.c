/*
 * life.c -- kvtierd's life after its options are read: the checks a start makes before it
 * touches anything, the start (data directory, tiers, socket, the loop's fds), the event loop
 * and the stop. main.c reads the arguments around these; the dispatcher fuzzer
 * (tests/fuzz/fuzz_daemon.c) runs the same start, loop turns and stop in its own process.
 *
 * The loop multiplexes the listening socket, clients, a signalfd and a 100 ms timerfd (lease
 * timeouts, drain deadline, connections that said no hello). The socket's directory must be
 * owned by us with no permissions beyond 0750 (created if missing); a stale socket (nobody
 * accepting) is replaced, a live one is an error.
 */
#include "daemon.h"
#include "core/log.h"
#include "core/util.h"
#include "policy/admit.h"
#include "policy/mrc.h"
#include "tiers/tier.h"

#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

enum { EV_LISTEN = 1, EV_SIGNAL = 2, EV_TIMER = 3, EV_TIERS = 4, EV_CONN0 = 16 };

/* The signals the loop takes through its signalfd: SIGTERM and SIGINT drain, SIGHUP reloads
 * the options (kvd_config_reload_owed: once no lower tier is inside an I/O). Blocked from the
 * start, so one sent while the tiers recover waits for the loop instead of killing the daemon. */
const sigset_t *kvd_loop_signals(sigset_t *ss)
{
	sigemptyset(ss);
	sigaddset(ss, SIGTERM);
	sigaddset(ss, SIGINT);
	sigaddset(ss, SIGHUP);
	return ss;
}

static int check_dir(const char *dir)
{
	struct stat st;
	if (stat(dir, &st)) {
		if (errno != ENOENT || mkdir(dir, 0750))
			return -errno;
		if (stat(dir, &st))
			return -errno;
	}
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (st.st_uid != geteuid()) {
		kvt_log(KVT_LOG_ERROR, "%s is owned by uid %u, not by us (%u)", dir,
		        (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (st.st_mode & 027) {
		kvt_log(KVT_LOG_ERROR, "%s has mode %03o; it must not exceed 0750", dir,
		        (unsigned)(st.st_mode & 0777));
		return -EPERM;
	}
	return 0;
}

/*
 * Whether path can be listened on: its directory private enough, and no socket there that a
 * live kvtierd answers (a stale one is replaced at listen_on). Asked before the tiers open too,
 * so that a second daemon started on the same socket stops before it touches them.
 * @return : 0, or the error listen_on would meet (logged when another daemon serves it).
 */
static int socket_free(const char *path, struct sockaddr_un *a)
{
	*a = (struct sockaddr_un){.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(a->sun_path))
		return -ENAMETOOLONG;
	memcpy(a->sun_path, path, strlen(path) + 1);
	char dir[KVT_SOCK_PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	int rc = check_dir(dirname(dir));
	if (rc)
		return rc;
	struct stat st;
	if (lstat(path, &st))
		return 0;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int live = probe >= 0 && connect(probe, (struct sockaddr *)a, sizeof(*a)) == 0;
	if (probe >= 0)
		close(probe);
	if (live) {
		kvt_log(KVT_LOG_ERROR, "another kvtierd is serving %s", path);
		return -EADDRINUSE;
	}
	return 0;
}

static int listen_on(const char *path)
{
	struct sockaddr_un a;
	int rc = socket_free(path, &a);
	if (rc)
		return rc;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (!lstat(path, &st)) {
		kvt_log(KVT_LOG_INFO, "replacing the stale socket %s", path);
		unlink(path);
	}
	mode_t old = umask(0117);
	rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
	umask(old);
	if (rc || chmod(path, 0660) || listen(fd, 128)) {
		rc = -errno;
		goto err;
	}
	return fd;
err:
	close(fd);
	return rc;
}

/* The host tier's policy, its parameters and admission filter, and the tenant options: in
 * memory only (kvd_policy_set refuses a parameter as the running daemon would). */
static int setup_host(struct kvd *d)
{
	d->host_cap = kvt_opt_u64(&d->opts, KVT_OPT_HOST_BYTES) & ~(uint64_t)(KVT_GRANULE - 1);
	d->pol_auto = !strcmp(kvt_opt_str(&d->opts, KVT_OPT_HOST_POLICY), "auto");
	d->pol_ops = d->pol_auto ? &kvt_policy_lru
	                         : kvt_policy_find(kvt_opt_str(&d->opts, KVT_OPT_HOST_POLICY));
	if (!d->pol_ops) {
		kvt_log(KVT_LOG_ERROR, "host.policy: no policy named '%s'",
		        kvt_opt_str(&d->opts, KVT_OPT_HOST_POLICY));
		return -EINVAL;
	}
	d->pol_chunks = kvd_host_chunks(d);
	int rc = d->pol_ops->create(d->pol_chunks, &d->pol);
	if (rc)
		return rc;
	d->mrc = kvd_mrc_new(d); /* NULL: no curve, nothing else lost */
	const char *quota = kvt_opt_str(&d->opts, KVT_OPT_TENANT_QUOTA);
	char why[KVT_OPT_STR_MAX + 96];
	if (kvd_quota_check(quota, why, sizeof(why)) ||
	    kvd_tenant_map_check(kvt_opt_str(&d->opts, KVT_OPT_TENANT_MAP), why, sizeof(why)) ||
	    kvd_client_allow_check(kvt_opt_str(&d->opts, KVT_OPT_CLIENT_ALLOW), why, sizeof(why))) {
		kvt_log(KVT_LOG_ERROR, "%s", why); /* read at every attach: refused here, once */
		return -EINVAL;
	}
	if (*quota && strcmp(quota, "none") && (rc = kvt_quota_create(&d->quota)))
		return rc;
	char params[KVT_OPT_STR_MAX], err[256];
	snprintf(params, sizeof(params), "%s", kvt_opt_str(&d->opts, KVT_OPT_HOST_POLICY_PARAMS));
	if ((rc = kvd_policy_set(d, kvt_opt_str(&d->opts, KVT_OPT_HOST_POLICY), params, err,
	                         sizeof(err)))) {
		kvt_log(KVT_LOG_ERROR, "host.policy_params: %s", err);
		return rc;
	}
	if ((rc = kvd_admit_set(d, kvt_opt_str(&d->opts, KVT_OPT_HOST_ADMIT), err, sizeof(err)))) {
		kvt_log(KVT_LOG_ERROR, "host.admit: %s", err);
		return rc;
	}
	return 0;
}

/*
 * Every check of the options a start makes that needs no file, socket, tier or change of user:
 * daemon.user names a user kvtierd may become, the host tier's options (setup_host, in memory),
 * the tiers' (kvd_tiers_check), metrics.listen's form and trace.file's. A start runs them before it
 * touches anything, and --print-config runs them before it prints, so that a config it prints is
 * one a start takes. What only doing shows is left to the start: the data directory and the
 * socket's (made, locked, a live daemon on them), each tier's open (its device or file, its size, a
 * quota's guarantees against that size), metrics.listen's bind, trace.file's open, and root
 * becoming daemon.user.
 */
int kvd_daemon_check(struct kvd *d)
{
	int rc;
	char err[160];
	if ((rc = kvd_user_check(d)) || (rc = setup_host(d)) || (rc = kvd_tiers_check(&d->opts)) ||
	    (rc = kvd_metrics_check(&d->opts)))
		return rc;
	if ((rc = kvd_record_check(kvt_opt_str(&d->opts, KVT_OPT_TRACE_FILE), err, sizeof(err))))
		kvt_log(KVT_LOG_ERROR, "%s", err);
	return rc;
}

/* The rest of the start, after kvd_daemon_check and kvd_become_user. */
int kvd_daemon_setup(struct kvd *d)
{
	int rc;
	if ((rc = kvd_index_init(&d->idx, 4096)))
		return rc;
	d->metrics_fd = -1;
	d->owner_fd = d->lfd = d->sigfd = d->timerfd = d->ep = d->rec.fd = -1;
	d->free_lease = KVD_NIL;
	d->age_head = d->age_tail = KVD_NIL;
	d->evfd = -1;
	if ((rc = kvd_make_dirs(d->data_dir))) {
		kvt_log(KVT_LOG_ERROR, "data dir %s: %s", d->data_dir, strerror(-rc));
		return rc;
	}
	if ((rc = kvd_own_data_dir(d->data_dir)) < 0)
		return rc;
	d->owner_fd = rc;
	struct sockaddr_un a;
	if ((rc = socket_free(d->sock_path, &a))) { /* before the tiers: they may take minutes */
		kvt_log(KVT_LOG_ERROR, "cannot listen on %s: %s", d->sock_path, strerror(-rc));
		return rc;
	}
	if ((rc = kvd_tiers_open(d)))
		return rc;
	sigset_t ss;
	d->sigfd = signalfd(-1, kvd_loop_signals(&ss), SFD_CLOEXEC | SFD_NONBLOCK);
	d->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	d->ep = epoll_create1(EPOLL_CLOEXEC);
	if (d->sigfd < 0 || d->timerfd < 0 || d->ep < 0)
		return -errno;
	if ((rc = kvd_metrics_open(d))) /* before the socket: a client never meets a dying daemon */
		return rc;
	char err[320];
	if ((rc =
	         kvd_record_open(d, kvt_opt_str(&d->opts, KVT_OPT_TRACE_FILE), err, sizeof(err)))) {
		kvt_log(KVT_LOG_ERROR, "%s", err);
		return rc;
	}
	if ((d->lfd = listen_on(d->sock_path)) < 0) {
		kvt_log(KVT_LOG_ERROR, "cannot listen on %s: %s", d->sock_path, strerror(-d->lfd));
		return d->lfd;
	}
	struct itimerspec its = {.it_interval = {0, 100000000}, .it_value = {0, 100000000}};
	timerfd_settime(d->timerfd, 0, &its, NULL);
	struct epoll_event ev = {.events = EPOLLIN};
	ev.data.u64 = EV_LISTEN;
	epoll_ctl(d->ep, EPOLL_CTL_ADD, d->lfd, &ev);
	ev.data.u64 = EV_SIGNAL;
	epoll_ctl(d->ep, EPOLL_CTL_ADD, d->sigfd, &ev);
	ev.data.u64 = EV_TIMER;
	epoll_ctl(d->ep, EPOLL_CTL_ADD, d->timerfd, &ev);
	ev.data.u64 = EV_TIERS;
	if (d->evfd >= 0)
		epoll_ctl(d->ep, EPOLL_CTL_ADD, d->evfd, &ev);
	return 0;
}

void kvd_drain(struct kvd *d)
{
	if (d->draining)
		return;
	d->draining = true;
	d->drain_deadline_ns =
	    kvt_now_ns() + kvt_opt_u64(&d->opts, KVT_OPT_SHUTDOWN_TIMEOUT_MS) * 1000000ull;
	epoll_ctl(d->ep, EPOLL_CTL_DEL, d->lfd, NULL);
	close(d->lfd);
	d->lfd = -1;
	unlink(d->sock_path);
	kvt_log(KVT_LOG_INFO, "draining: %u leases outstanding, %llu ms to release them",
	        d->n_leases,
	        (unsigned long long)kvt_opt_u64(&d->opts, KVT_OPT_SHUTDOWN_TIMEOUT_MS));
}

/* One turn of the loop: waits up to timeout_ms (-1: until something happens) and handles
 * what is ready. @return : how many events, 0 when none came, or -errno from epoll_wait. */
int kvd_loop_once(struct kvd *d, int timeout_ms)
{
	struct epoll_event evs[64];
	int n = epoll_wait(d->ep, evs, 64, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int k = 0; k < n; k++) {
		uint64_t tag = evs[k].data.u64;
		if (tag == EV_LISTEN) {
			kvd_conn_accept(d);
		} else if (tag == EV_SIGNAL) {
			struct signalfd_siginfo si;
			while (read(d->sigfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGHUP) { /* once the tiers' locks are free */
					if (!d->reload_owed_ns)
						d->reload_owed_ns = kvt_now_ns();
					kvd_config_reload_owed(d);
				} else
					kvd_drain(d);
			}
		} else if (tag == EV_TIMER) {
			uint64_t ticks;
			if (read(d->timerfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
				kvt_log_rl(KVT_LOG_WARN, "timerfd: %s", strerror(errno));
			kvd_conns_expire_hello(d, kvt_now_ns());
			kvd_refusing_expire(d, kvt_now_ns(), false);
			kvd_conn_resume_ready(d, kvt_now_ns());
			kvd_config_reload_owed(d);
			kvd_metrics_tick(d, kvt_now_ns());
			kvd_record_tick(d);
		} else if (tag == KVD_EV_METRICS) {
			kvd_metrics_accept(d);
		} else if (tag >= KVD_EV_HTTP0 && tag < KVD_EV_HTTP0 + KVD_HTTP_MAX) {
			kvd_metrics_io(d, (int)(tag - KVD_EV_HTTP0));
		} else if (tag == EV_TIERS) {
			kvd_tiers_complete(d);
		} else if (tag & KVD_EV_REFUSING) {
			kvd_refusing_readable(d, (uint32_t)tag);
		} else if (tag & KVD_EV_PEER_GONE) {
			kvd_conn_peer_gone(d, (uint32_t)tag);
		} else {
			uint32_t i = (uint32_t)(tag - EV_CONN0);
			if (i < d->cap_conns && d->conns[i].fd >= 0)
				kvd_conn_readable(d, i);
		}
	}
	if (d->park_next_ns && kvt_now_ns() >= d->park_next_ns)
		kvd_conn_resume_ready(d, kvt_now_ns());
	kvd_leases_expire(d, kvt_now_ns()); /* looks at the oldest lease only */
	kvd_lower_give_all(d); /* the loop holds a lower tier's lock no longer than an event */
	return n;
}

void kvd_daemon_run(struct kvd *d)
{
	for (;;) {
		if (d->draining && (d->n_leases == 0 || kvt_now_ns() >= d->drain_deadline_ns))
			break;
		/* a parked request's deadline (at most 60 s away: promote.wait_ms, demote.wait_ms)
		 * and the oldest lease's expiry (at most a day) are kept to the millisecond, not
		 * the timer's 100 */
		int timeout = -1;
		uint64_t lease_next = kvd_leases_next_ns(d), next = d->park_next_ns;
		if (lease_next && (!next || lease_next < next))
			next = lease_next; /* and the oldest lease's expiry (lease.c) */
		if (next) {
			uint64_t now = kvt_now_ns();
			timeout = next <= now ? 0 : (int)((next - now + 999999) / 1000000);
		}
		int rc = kvd_loop_once(d, timeout);
		if (rc < 0) {
			kvt_log(KVT_LOG_ERROR, "epoll_wait: %s", strerror(-rc));
			break;
		}
	}
}

void kvd_daemon_stop(struct kvd *d)
{
	if (d->n_leases)
		kvt_log(KVT_LOG_WARN,
		        "draining: shutdown.timeout_ms passed with %u leases outstanding: their "
		        "clients are disconnected",
		        d->n_leases);
	for (uint32_t i = 0; i < d->cap_conns; i++)
		kvd_conn_close(d, i);
	kvd_refusing_expire(d, kvt_now_ns(), true);
	kvd_metrics_close(d);
	kvd_tiers_close(d);
	if (d->lfd >= 0) {
		unlink(d->sock_path);
		close(d->lfd);
	}
	for (uint32_t i = 0; i < d->n_tenants; i++) {
		kvd_shmidx_close(d, i); /* clients stop trusting the table at once */
		kvt_pool_close(&d->tenants[i].pool);
	}
	d->pol_ops->destroy(d->pol);
	kvt_mrc_destroy(d->mrc);
	kvd_curvework_fini(d);
	kvt_minisim_destroy(d->minisim);
	kvd_record_close(d);
	kvt_admit_destroy(d->admit);
	kvt_quota_destroy(d->quota);
	kvd_keep_fini(d);
	kvd_index_fini(&d->idx);
	free(d->tenants);
	free(d->nss);
	free(d->conns);
	free(d->leases);
	int fds[] = {d->sigfd, d->timerfd, d->ep, d->owner_fd}; /* the lock goes last */
	for (size_t k = 0; k < sizeof(fds) / sizeof(fds[0]); k++)
		if (fds[k] >= 0)
			close(fds[k]);
	kvt_log(KVT_LOG_INFO, "stopped");
}
