/*
 * main.c -- kvtierd: the arguments, the options, the banner; the start, the loop and the stop
 * are life.c's.
 *
 * Start-up: defaults < --config FILE < KVTIER_* environment < --set name=value; a KVTIER_
 * variable kvtier does not read is logged as ignored (a typo, not an error). The options are
 * checked before anything is touched (kvd_daemon_check), by --print-config too.
 */
#include "daemon.h"
#include "core/log.h"
#include "core/util.h"
#include "policy/admit.h"
#include "policy/mrc.h"
#include "tiers/tier.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static void log_stderr(enum kvt_log_level lvl, const char *msg)
{
	static const char *names[] = {"error", "warn", "info", "debug"};
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	fprintf(stderr, "%02d:%02d:%02d.%03ld kvtierd %s: %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
	        ts.tv_nsec / 1000000, names[lvl], msg);
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: kvtierd [--socket PATH] [--data-dir DIR] [--config FILE] [--set "
	        "name=value]...\n"
	        "               [--print-config] [--help] [--version]\n"
	        "SIGTERM or SIGINT drains and stops; SIGHUP reads the options again and applies\n"
	        "the (runtime) ones that changed.\n\noptions (also KVTIER_<NAME>, dots as "
	        "underscores):\n");
	kvt_opts_help(f);
}

static int parse_args(struct kvd *d, int argc, char **argv, bool *print)
{
	static const struct option lo[] = {
	    {"socket", required_argument, 0, 's'}, {"data-dir", required_argument, 0, 'd'},
	    {"config", required_argument, 0, 'c'}, {"set", required_argument, 0, 'S'},
	    {"print-config", no_argument, 0, 'p'}, {"help", no_argument, 0, 'h'},
	    {"version", no_argument, 0, 'V'},      {0, 0, 0, 0}};
	const char *config = NULL;
	char err[512];
	int o, nsets = 0;
	static const char *sets[256]; /* kept: a reload reads them again */
	while ((o = getopt_long(argc, argv, "s:d:c:S:ph", lo, NULL)) != -1) {
		switch (o) {
		case 's':
			snprintf(d->sock_path, sizeof(d->sock_path), "%s", optarg);
			break;
		case 'd':
			snprintf(d->data_dir, sizeof(d->data_dir), "%s", optarg);
			break;
		case 'c':
			config = optarg;
			break;
		case 'S':
			if (nsets == 256) { /* the rest were dropped without a word */
				fprintf(stderr, "kvtierd: more than 256 --set options\n");
				return -E2BIG;
			}
			sets[nsets++] = optarg;
			break;
		case 'p':
			*print = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("kvtierd %d.%d.%d (protocol %d)\n", KVT_VERSION_MAJOR,
			       KVT_VERSION_MINOR, KVT_VERSION_PATCH, KVT_PROTO_MAJOR);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "kvtierd: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (kvd_options_read(&d->opts, config, sets, nsets, err, sizeof(err))) {
		fprintf(stderr, "kvtierd: %s\n", err);
		return -EINVAL;
	}
	if (!d->sock_path[0] && kvt_sockpath_daemon(d->sock_path, sizeof(d->sock_path)))
		return -ENAMETOOLONG;
	if (!d->data_dir[0]) {
		const char *home = getenv("XDG_STATE_HOME");
		if (geteuid() == 0)
			snprintf(d->data_dir, sizeof(d->data_dir), "/var/lib/kvtier");
		else if (home && *home)
			snprintf(d->data_dir, sizeof(d->data_dir), "%s/kvtier", home);
		else
			snprintf(d->data_dir, sizeof(d->data_dir), "/tmp/kvtier-%u/data",
			         (unsigned)getuid());
	}
	kvt_opts_resolve(&d->opts, d->data_dir);
	d->config_file = config;
	d->arg_sets = sets;
	d->n_arg_sets = nsets;
	return 0;
}

static void print_banner(struct kvd *d)
{
	char cap[32];
	printf("kvtierd %d.%d.%d listening on %s\n", KVT_VERSION_MAJOR, KVT_VERSION_MINOR,
	       KVT_VERSION_PATCH, d->sock_path);
	printf("  host tier: %s shared memory, policy %s%s%s%s; data dir %s\n",
	       kvt_fmt_bytes(d->host_cap, cap, sizeof(cap)), d->pol_ops->name,
	       d->pol_auto ? " (auto: conv once chunks are 64 KiB or more)" : "",
	       d->admit ? ", admit " : "", d->admit ? kvt_admit_name(d->admit) : "", d->data_dir);
	d->lower_wait = true; /* at start: no I/O runs yet, nothing to park */
	for (uint32_t k = 0; k < d->n_lower; k++) {
		struct kvt_tier_stats s = {0};
		char pol[96];
		d->lower[k].ops->stats(d->lower[k].t, &s);
		if (kvd_tiers_policy_get(d, k, pol, sizeof(pol)))
			snprintf(pol, sizeof(pol), "%s write order", d->lower[k].ops->name);
		printf("  %s tier: %s, %llu chunks recovered, policy %s\n", d->lower[k].ops->name,
		       kvt_fmt_bytes(s.capacity_bytes, cap, sizeof(cap)),
		       (unsigned long long)s.chunks, strchr(pol, ' ') + 1);
	}
	d->lower_wait = false;
	kvd_lower_give_all(d);
	printf("  engines attach with kvt_connect(NULL, &c) and KVTIER_SOCKET=%s\n", d->sock_path);
	printf(
	    "  (link with `pkg-config --libs kvtier`); inspect with `kvtier --socket %s stats`\n",
	    d->sock_path);
	if (d->metrics_fd >= 0) {
		const char *l = kvt_opt_str(&d->opts, KVT_OPT_METRICS_LISTEN);
		printf("  Prometheus metrics at http://%.*s:%u/metrics\n",
		       (int)(strrchr(l, ':') - l), l, d->metrics_port);
	}
	fflush(stdout);
}

/* A KVTIER_ variable that names no option was ignored without a word (a typo of
 * KVTIER_HOST_BYTES kept the default): said, not refused, since other programs that share the
 * environment set KVTIER_ names of their own. */
static void warn_env(void *arg, const char *name, const char *near)
{
	(void)arg;
	if (near)
		kvt_log(KVT_LOG_WARN, "%s is not an option (did you mean %s?); ignored", name,
		        near);
	else
		kvt_log(KVT_LOG_WARN, "%s is not an option; ignored", name);
}

/* Clients, tier files and RocksDB's tables all take fds: the soft limit (often 1,024) goes up
 * to the hard one. RocksDB bounds its open tables by the limit it finds (tiers/rocksdb/db.c). */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	rlim_t was = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		kvt_log(KVT_LOG_DEBUG, "fd limit stays %llu: %s", (unsigned long long)was,
		        strerror(errno));
	else
		kvt_log(KVT_LOG_DEBUG, "fd limit raised from %llu to %llu", (unsigned long long)was,
		        (unsigned long long)rl.rlim_cur);
}

int main(int argc, char **argv)
{
	static struct kvd d;
	bool print = false;
	/* before any thread exists (the tier worker, RocksDB's): signals come through signalfd */
	sigset_t ss;
	pthread_sigmask(SIG_BLOCK, kvd_loop_signals(&ss), NULL);
	signal(SIGPIPE, SIG_IGN);
	kvt_log_set(log_stderr, KVT_LOG_INFO);
	if (parse_args(&d, argc, argv, &print))
		return 2;
	int lvl = kvt_log_level_parse(kvt_opt_str(&d.opts, KVT_OPT_LOG_LEVEL));
	if (lvl < 0) {
		kvt_log(KVT_LOG_ERROR, "log.level: '%s' is not error, warn, info or debug",
		        kvt_opt_str(&d.opts, KVT_OPT_LOG_LEVEL));
		return 2;
	}
	kvt_log_set(log_stderr, (enum kvt_log_level)lvl);
	kvt_opts_env_unknown(environ, warn_env, NULL);
	if (kvd_daemon_check(&d))
		return 1; /* --print-config too: it printed what a start refuses */
	if (print) {
		kvt_opts_print(&d.opts, stdout);
		return 0;
	}
	raise_fd_limit();
	kvd_curvework_init(&d);
	if (kvd_become_user(&d) || kvd_daemon_setup(&d))
		return 1;
	print_banner(&d);
	kvd_daemon_run(&d);
	kvd_daemon_stop(&d);
	return 0;
}
