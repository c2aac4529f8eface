/*
 * main.c -- kvtier, the operator CLI: kvtier [--socket PATH] COMMAND [ARGS].
 * Connects like the library (--socket, else $KVTIER_SOCKET, else the default path).
 */
#include "cli.h"
#include "ipc/proto.h"

#include <errno.h>
#include <stdbool.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: kvtier [--socket PATH] COMMAND [ARGS]\n"
	       "       kvtier [--socket PATH] --version\n\n"
	       "commands:\n"
	       "  ping                      check that kvtierd answers\n"
	       "  stats [--json]            tiers, leases, clients, corruptions\n"
	       "  top [--interval S] [--count N]  the tiers live: fill, hit ratio, rates\n"
	       "  tier enable NAME          re-probe a tier disabled after device errors\n"
	       "  policy get TIER           the eviction policy of host or rocksdb\n"
	       "  policy set TIER NAME [defaults] [k=v ...]\n"
	       "                            switch policy (no chunk dropped) or set params;\n"
	       "                            defaults: the parameters not named at their defaults\n"
	       "  mrc TIER                  hit ratio at 1/2x..8x the tier's size (sampled)\n"
	       "  config get [NAME]         the running daemon's options (a valid config file)\n"
	       "  config set NAME VALUE     change a runtime option (kvtierd --help marks them)\n"
	       "  config reload             read the options again, as SIGHUP does: all or none\n"
	       "  inspect [NS [KEY]]        namespaces; a namespace's chunks; one chunk (hex ids)\n"
	       "  flush all|NS|tenant UID   drop those chunks from every tier\n"
	       "  check                     audit kvtierd's books against its index (exit 1: a "
	       "mismatch)\n"
	       "  record FILE [SECONDS]     record the engines' requests as a trace (trace.file)\n"
	       "  sim ARGS                  replay a trace through the daemon's policies\n"
	       "  sim --daemon [--show] ARGS  ... through this kvtierd's tiers and policies\n"
	       "  bench [NAME] [ARGS]       benchmarks with their baselines (host, tiers, nvme, "
	       "rocksdb,\n"
	       "                            policy, quota, trace, gpu; kvtier bench --help)\n");
}

int cli_exec_sibling(const char *name, int argc, char **argv)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return 1;
	self[n] = 0;
	snprintf(path, sizeof(path), "%s/kvtier-%s", dirname(self), name);
	if (access(path, X_OK)) {
		fprintf(stderr, "kvtier: %s is not built (%s)\n", name, path);
		return 1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		argv[0] = path;
		execv(path, argv);
		_exit(127);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return 1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

#define POLICY_USAGE                                                                               \
	"usage: kvtier policy get TIER | kvtier policy set TIER NAME [defaults] [k=v ...]"
#define CONFIG_USAGE                                                                               \
	"usage: kvtier config get [NAME] | kvtier config set NAME VALUE | kvtier config reload"
#define TIER_USAGE                                                                                 \
	"usage: kvtier tier enable NAME (a lower tier disabled after device errors: nvme or "      \
	"rocksdb)"

static bool is(const char *a, const char *b)
{
	return !strcmp(a, b);
}

/*
 * The command line's shape (argv[0] the command), checked before any connection, so that a
 * wrong one gets its usage whether or not a daemon runs. What needs the daemon's knowledge (a
 * tier's or a policy's name, NAME VALUE) the daemon checks, and stats and top parse their own.
 * @return : NULL (well formed), "" (no such command) or the command's usage line.
 */
static const char *misshapen(int argc, char **argv)
{
	const char *cmd = argv[0], *sub = argc > 1 ? argv[1] : "";
	if (is(cmd, "stats"))
		return cli_stats_misshapen(argc, argv);
	if (is(cmd, "top"))
		return cli_top_misshapen(argc, argv);
	if (is(cmd, "record"))
		return cli_record_misshapen(argc, argv);
	if (is(cmd, "ping") || is(cmd, "check")) /* "check extra" checked */
		return argc == 1         ? NULL
		       : is(cmd, "ping") ? "usage: kvtier ping"
		                         : "usage: kvtier check";
	if (is(cmd, "inspect"))
		return argc <= 3 ? NULL
		                 : "usage: kvtier inspect [NAMESPACE [KEY]] (ids: 32 hex digits)";
	if (is(cmd, "flush")) /* "flush all extra" flushed everything */
		return (argc == 2 && !is(sub, "tenant")) || (argc == 3 && is(sub, "tenant"))
		           ? NULL
		           : "usage: kvtier flush all | NAMESPACE | tenant UID";
	if (is(cmd, "mrc"))
		return argc == 2 ? NULL : "usage: kvtier mrc TIER (host, nvme or rocksdb)";
	if (is(cmd, "tier"))
		return argc == 3 && is(sub, "enable") ? NULL : TIER_USAGE;
	if (is(cmd, "policy")) /* set: the daemon says what its words lack */
		return (is(sub, "get") && argc == 3) || is(sub, "set") ? NULL : POLICY_USAGE;
	if (is(cmd, "config"))
		return (is(sub, "get") && argc <= 3) || is(sub, "set") ||
		               (is(sub, "reload") && argc == 2)
		           ? NULL
		           : CONFIG_USAGE;
	return "";
}

/* The socket kvtier talks to: sock, else where the library looks. */
static void sock_path(const char *sock, char *path, size_t len)
{
	path[0] = 0;
	if (sock)
		snprintf(path, len, "%s", sock);
	else
		kvt_sockpath_client(path, len);
}

/* kvtier --version: this binary's version, its library's and protocol, then the daemon's when
 * one answers at sock. None answering is said, not an error: the question was this binary's. */
static int version(const char *sock)
{
	unsigned lib = kvt_version();
	printf("kvtier %d.%d.%d (libkvtier %u.%u.%u, protocol %d)\n", KVT_VERSION_MAJOR,
	       KVT_VERSION_MINOR, KVT_VERSION_PATCH, lib >> 16, (lib >> 8) & 255, lib & 255,
	       KVT_PROTO_MAJOR);
	char path[KVT_SOCK_PATH_MAX];
	sock_path(sock, path, sizeof(path));
	kvt_client_t *c;
	int rc = kvt_connect(sock, &c);
	if (rc) {
		printf("kvtierd: none answers at %s (%s)\n", path, kvt_strerror(rc));
		return 0;
	}
	static char json[KVT_MSG_MAX];
	char ver[32] = "";
	int proto = -1;
	rc = kvt__client_simple(c, KVT_MSG_STATS, NULL, json, sizeof(json));
	kvt_close(c);
	if (rc || sscanf(json, "{\"version\":\"%31[^\"]\",\"protocol\":%d", ver, &proto) != 2) {
		fprintf(stderr, "kvtier: --version: kvtierd at %s sent no version (%s)\n", path,
		        rc ? kvt_strerror(rc) : "its stats lack it");
		return 1;
	}
	printf("kvtierd %s (protocol %d) at %s\n", ver, proto, path);
	return 0;
}

int main(int argc, char **argv)
{
	const char *sock = NULL;
	bool show_version = false;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--socket") && i + 1 < argc)
			sock = argv[++i];
		else if (!strcmp(argv[i], "--version"))
			show_version = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (show_version && i == argc)
		return version(sock);
	if (i >= argc || show_version) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[i];
	for (int k = i + 1; !strcmp(cmd, "sim") && k < argc; k++)
		if (!strcmp(argv[k], "--daemon")) {
			int rc = cli_sim_daemon(sock, argc - i, argv + i);
			if (rc < 0 && rc != KVT_CLI_SAID)
				fprintf(stderr, "kvtier sim --daemon: %s\n", kvt_strerror(rc));
			return rc < 0 ? 1 : rc; /* else kvtier-sim's own status */
		}
	if (!strcmp(cmd, "sim"))
		return cli_exec_sibling("sim", argc - i, argv + i);
	if (!strcmp(cmd, "bench"))
		return cli_bench(sock, argc - i, argv + i);
	const char *bad = misshapen(argc - i, argv + i);
	if (bad && !*bad) {
		fprintf(stderr, "kvtier: unknown command '%s'\n", cmd);
		usage(stderr);
		return 1;
	}
	if (bad) {
		fprintf(stderr, "%s\n", bad);
		return 1;
	}
	kvt_client_t *c;
	int rc = kvt_connect(sock, &c);
	if (rc) {
		char path[KVT_SOCK_PATH_MAX];
		sock_path(sock, path, sizeof(path));
		fprintf(stderr, "kvtier: cannot reach kvtierd at %s: %s\n", path, kvt_strerror(rc));
		return 1;
	}
	if (!strcmp(cmd, "ping")) {
		rc = kvt__client_simple(c, KVT_MSG_PING, NULL, NULL, 0);
		if (!rc)
			printf("kvtierd is alive\n");
	} else if (!strcmp(cmd, "stats")) {
		rc = cli_stats(c, argc - i, argv + i);
	} else if (!strcmp(cmd, "top")) {
		rc = cli_top(c, argc - i, argv + i);
	} else if (!strcmp(cmd, "record")) {
		rc = cli_record(c, argc - i, argv + i);
	} else if (!strcmp(cmd, "policy") || !strcmp(cmd, "mrc") || !strcmp(cmd, "config") ||
	           !strcmp(cmd, "inspect") || !strcmp(cmd, "flush") || !strcmp(cmd, "check")) {
		char body[1024] = "", out[8192] = "";
		size_t n = 0;
		bool chunks =
		    !strcmp(cmd, "inspect") || !strcmp(cmd, "flush") || !strcmp(cmd, "check");
		if (!strcmp(cmd, "mrc") || chunks)
			n = (size_t)snprintf(body, sizeof(body), "%s", cmd);
		for (int k = i + 1; k < argc && n < sizeof(body); k++)
			n += (size_t)snprintf(body + n, sizeof(body) - n, "%s%s", n ? " " : "",
			                      argv[k]);
		rc = kvt__client_simple(c,
		                        chunks                  ? KVT_MSG_INSPECT
		                        : strcmp(cmd, "config") ? KVT_MSG_POLICY
		                                                : KVT_MSG_CONFIG,
		                        body, out, sizeof(out));
		size_t len = strlen(out);
		if (len)
			fprintf(rc < 0 ? stderr : stdout, "%s%s", out,
			        out[len - 1] == '\n' ? "" : "\n");
		if (rc < 0 && len) /* the daemon's own words said why: no errno line after them */
			rc = KVT_CLI_SAID;
	} else if (!strcmp(cmd, "tier")) {
		rc = kvt__client_simple(c, KVT_MSG_TIER_ENABLE, argv[i + 2], NULL, 0);
		if (!rc)
			printf("tier %s enabled\n", argv[i + 2]);
		if (rc == -ENOENT && !strcmp(argv[i + 2], "host")) {
			fprintf(stderr, "kvtier: host is never disabled (a lower tier is, after "
			                "device errors: nvme or rocksdb)\n");
			rc = KVT_CLI_SAID;
		} else if (rc == -ENOENT) {
			fprintf(stderr,
			        "kvtier: no tier named '%s' here (kvtier stats lists them)\n",
			        argv[i + 2]);
			rc = KVT_CLI_SAID;
		} else if (rc == -EOPNOTSUPP) {
			fprintf(stderr,
			        "kvtier: tier %s is never disabled by device errors (it reopens "
			        "itself), so there is nothing to enable\n",
			        argv[i + 2]);
			rc = KVT_CLI_SAID;
		} else if (rc == -EIO || rc == -EAGAIN) {
			fprintf(stderr,
			        "kvtier: tier %s stays disabled: its device still fails (%s; the "
			        "daemon's log has the details)\n",
			        argv[i + 2], kvt_strerror(rc));
			rc = KVT_CLI_SAID;
		}
	}
	kvt_close(c);
	if (rc < 0 && rc != KVT_CLI_SAID)
		fprintf(stderr, "kvtier: %s: %s\n", cmd, kvt_strerror(rc));
	return rc < 0 ? 1 : 0;
}
