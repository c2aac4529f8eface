/*
 * record.c -- kvtier record FILE [SECONDS]: kvtierd records its engines' requests into FILE
 * (trace.file) for SECONDS, or until Ctrl-C, then stops and says how to replay the recording.
 *
 * The same as `kvtier config set trace.file FILE`, a wait and `config set trace.file none`, with
 * what an operator would otherwise get wrong taken care of: a relative FILE is made absolute
 * from this shell's directory (kvtierd runs elsewhere), a recording already running is left
 * alone (refused, not replaced), the recording is ended on Ctrl-C or SIGTERM as on time, and one
 * that ends by itself (trace.max_bytes, a full disk) ends the wait with the daemon's reason.
 */
#include "cli.h"
#include "ipc/proto.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RECORD_USAGE "usage: kvtier record FILE [SECONDS] (until Ctrl-C without SECONDS)"

static volatile sig_atomic_t stop_asked;

static void on_signal(int sig)
{
	(void)sig;
	stop_asked = 1;
}

const char *cli_record_misshapen(int argc, char **argv)
{
	if (argc < 2 || argc > 3 || !argv[1][0])
		return RECORD_USAGE;
	if (argc == 3) {
		char *end;
		double s = strtod(argv[2], &end);
		if (end == argv[2] || *end || !(s > 0 && s <= 86400 * 365))
			return RECORD_USAGE;
	}
	return NULL;
}

static int stats(kvt_client_t *c, char *json, size_t len)
{
	return kvt__client_simple(c, KVT_MSG_STATS, NULL, json, len);
}

static int set_file(kvt_client_t *c, const char *value)
{
	char cmd[PATH_MAX + 32], out[1024] = "";
	snprintf(cmd, sizeof(cmd), "set trace.file %s", value);
	int rc = kvt__client_simple(c, KVT_MSG_CONFIG, cmd, out, sizeof(out));
	if (rc < 0 && out[0]) {
		fprintf(stderr, "kvtier record: %s\n", out);
		return KVT_CLI_SAID;
	}
	return rc;
}

int cli_record(kvt_client_t *c, int argc, char **argv)
{
	static char json[KVT_MSG_MAX];
	char path[PATH_MAX];
	if (argv[1][0] == '/') {
		snprintf(path, sizeof(path), "%s", argv[1]);
	} else {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)))
			return -errno;
		if (snprintf(path, sizeof(path), "%s/%s", cwd, argv[1]) >= (int)sizeof(path))
			return -ENAMETOOLONG;
	}
	double seconds = argc == 3 ? strtod(argv[2], NULL) : 0;
	int rc = stats(c, json, sizeof(json));
	if (rc)
		return rc;
	if (cli_json_num(json, "trace_recording") > 0) {
		fprintf(stderr,
		        "kvtier record: kvtierd is recording already (kvtier config get "
		        "trace.file says where; kvtier config set trace.file none ends it)\n");
		return KVT_CLI_SAID;
	}
	struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: the wait wakes */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if ((rc = set_file(c, path)))
		return rc;
	if (seconds > 0)
		printf("recording to %s for %g s (Ctrl-C ends it sooner)\n", path, seconds);
	else
		printf("recording to %s until Ctrl-C\n", path);
	fflush(stdout);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bool ended = false; /* by itself */
	while (!stop_asked) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		double left = seconds - (double)(now.tv_sec - t0.tv_sec) -
		              (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		if (seconds > 0 && left <= 0)
			break;
		double nap = seconds > 0 && left < 0.2 ? left : 0.2;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(nap * 1e9)};
		nanosleep(&ts, NULL);
		if ((rc = stats(c, json, sizeof(json))))
			return rc;
		if ((ended = cli_json_num(json, "trace_recording") == 0))
			break;
	}
	if (!ended && (rc = set_file(c, "none")))
		return rc; /* writes out what waits */
	if ((rc = stats(c, json, sizeof(json))))
		return rc;
	long long why = cli_json_num(json, "trace_stopped");
	if (ended && why > 0)
		printf("the recording stopped by itself: %s (kvtierd's log says more)\n",
		       strerror((int)why));
	else if (ended)
		printf("the recording was ended by another command\n");
	/* the host tier's size in chunks, from its bytes per chunk now: the sizes to replay */
	long long cap = cli_json_num(json, "capacity_bytes"),
	          used = cli_json_num(json, "used_bytes"),
	          chunks = cli_json_num(json, "chunks"); /* the first tier's: host's */
	long long full = cap > 0 && used > 0 && chunks > 0
	                     ? (long long)((double)cap * (double)chunks / (double)used)
	                     : 0;
	char sizes[96] = "CHUNKS[,CHUNKS...]";
	if (full >= 2)
		snprintf(sizes, sizeof(sizes), "%lld,%lld,%lld", full / 2, full, full * 2);
	printf("%lld requests written to %s (%lld bytes); replay them with\n"
	       "  kvtier sim --engine --trace %s --capacity %s --policy lru,arc,conv,duel\n",
	       cli_json_num(json, "trace_requests"), path, cli_json_num(json, "trace_bytes"), path,
	       sizes);
	if (full >= 2)
		printf(
		    "(host holds %lld chunks now, about %lld when full: the sizes are 1/2x, 1x and "
		    "2x that)\n",
		    chunks, full);
	printf("or through this kvtierd's tiers and policies as they are now (--tier host=SIZE, "
	       "--policy host=P change one):\n  kvtier sim --daemon --trace %s\n",
	       path);
	return 0;
}
