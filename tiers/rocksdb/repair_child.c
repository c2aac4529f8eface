/*
 * repair_child.c -- RocksDB's RepairDB, run in a process of its own.
 *
 * Why: RepairDB reads every file it finds, and RocksDB 7.8's (Debian 12's) dereferences a null
 * pointer on a table whose footer's checksum type is zeroed ("none": no block is checked) over
 * zeroed blocks (found by fuzz_daemon: CURRENT removed, a small table zeroed from byte 200 on;
 * a five-line program calling rocksdb_repair_db with default options on that directory dies of
 * SIGSEGV too). Run in the daemon, the repair killed kvtierd at every start, and the damage
 * stayed on disk. In a child of its own, a repair that dies is one that failed (-EBADMSG): the
 * whole database's goes on to the rebuild table by table, one table's leaves that table out
 * (salvage.c; test_rocksdb_repair repaired and zeroed_table).
 *
 * How: the child is the running binary again (/proc/self/exe: nothing is installed beside the
 * daemon, and the tests and fuzzers that link the tier work the same), exec'd with argv[0]
 * "kvtier-rocksdb-repair" and KVT_RDB_REPAIR=<compression>:<write buffer bytes>:<path> in its
 * environment. A constructor here sees that argv[0] before main() runs (never main(), which
 * would start a daemon), repairs, writes RocksDB's error (if any) to its stdout, a pipe the
 * parent reads, and exits (EXIT_*). Not fork() without exec: the daemon has threads (its own and
 * RocksDB's pools), and a child forked from them may only call async-signal-safe functions;
 * RepairDB takes locks and allocates. The cost: one exec and the loading of librocksdb, 22-39
 * ms a repair (measured: docs/rocksdb.md). Without /proc (nothing to exec) the repair runs in
 * the daemon, as it did before, and the log says so.
 *
 * The child's options are those that shape what RepairDB writes (tables made from the write-
 * ahead logs: compression, write buffer size, the bloom filter; the LOG file's level), as db.c
 * sets them; the rest is read back from the files.
 */
#include "rocksdb_int.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define CHILD_ARGV0 "kvtier-rocksdb-repair"
#define CHILD_ENV   "KVT_RDB_REPAIR"
#define ERR_MAX     4096 /* of RocksDB's error read back; the rest is drained */
/* the child's exit status; any other (a sanitizer's report exits 1) is a child that died */
#define EXIT_REPAIRED 0
#define EXIT_ROCKSDB  90
#define EXIT_NOMEM    91
#define EXIT_USAGE    92

/* glibc calls a constructor of the executable with main()'s arguments. */
__attribute__((constructor)) static void repair_child(int argc, char **argv)
{
	if (argc < 1 || !argv || !argv[0] || strcmp(argv[0], CHILD_ARGV0))
		return;
	const char *v = getenv(CHILD_ENV);
	int compression, at = 0;
	unsigned long long write_buffer;
	if (!v || sscanf(v, "%d:%llu:%n", &compression, &write_buffer, &at) != 2 || !at)
		_exit(EXIT_USAGE);
	const struct rlimit no_core = {0, 0}; /* a repair that dies leaves no core file */
	setrlimit(RLIMIT_CORE, &no_core);
	rocksdb_options_t *o = rocksdb_options_create();
	rocksdb_block_based_table_options_t *bbto = rocksdb_block_based_options_create();
	if (!o || !bbto)
		_exit(EXIT_NOMEM);
	rocksdb_options_set_compression(o, compression);
	rocksdb_options_set_write_buffer_size(o, (size_t)write_buffer);
	rocksdb_options_set_info_log_level(o, 2 /* WARN, as db.c */);
	rocksdb_block_based_options_set_filter_policy(
	    bbto, rocksdb_filterpolicy_create_bloom_full(KVT__RDB_BLOOM_BITS));
	rocksdb_options_set_block_based_table_factory(o, bbto);
	char *err = NULL;
	rocksdb_repair_db(o, v + at, &err);
	if (!err)
		_exit(EXIT_REPAIRED);
	for (size_t n = strlen(err), off = 0; off < n;) {
		ssize_t w = write(STDOUT_FILENO, err + off, n - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	_exit(EXIT_ROCKSDB);
}

/* Reads the child's stdout to its end into buf (NUL-terminated, what fits). */
static void read_all(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	for (;;) {
		char sink[512];
		bool room = n + 1 < cap;
		ssize_t r = read(fd, room ? buf + n : sink, room ? cap - 1 - n : sizeof(sink));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (room)
			n += (size_t)r;
	}
	buf[n] = 0;
}

/* Spawns the child for path with pipe end out as its stdout; only fds 0-2 go with it. */
static int spawn(const struct kvt__rdb_db *d, const char *path, int out, pid_t *pid)
{
	size_t ne = 0;
	while (environ[ne])
		ne++;
	size_t vlen = strlen(path) + 96;
	char **envp = calloc(ne + 2, sizeof(*envp)), *var = malloc(vlen);
	int rc = envp && var ? 0 : -ENOMEM;
	posix_spawn_file_actions_t fa;
	if (!rc)
		rc = -posix_spawn_file_actions_init(&fa);
	if (!rc) {
		size_t k = 0;
		for (size_t i = 0; i < ne; i++) /* one variable of that name: the one set here */
			if (strncmp(environ[i], CHILD_ENV "=", sizeof(CHILD_ENV)))
				envp[k++] = environ[i];
		snprintf(var, vlen, CHILD_ENV "=%d:%llu:%s", d->compression,
		         (unsigned long long)d->write_buffer_bytes, path);
		envp[k] = var;
		char *argv[] = {CHILD_ARGV0, NULL};
		rc = -posix_spawn_file_actions_adddup2(&fa, out, STDOUT_FILENO);
		if (!rc)
			rc = -posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
		if (!rc)
			rc = -posix_spawn(pid, "/proc/self/exe", &fa, NULL, argv, envp);
		posix_spawn_file_actions_destroy(&fa);
	}
	free(envp);
	free(var);
	return rc;
}

int kvt__rdb_repair_db(const struct kvt__rdb_db *d, const char *path)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid_t pid;
	int rc = spawn(d, path, p[1], &pid);
	close(p[1]);
	if (rc) {
		close(p[0]);
		if (rc != -ENOENT && rc != -EACCES) {
			kvt_log(KVT_LOG_ERROR, "rocksdb: %s: cannot start RocksDB's repair: %s",
			        path, strerror(-rc));
			return rc;
		}
		/* no /proc/self/exe to run (no /proc mounted): in this process, as before */
		kvt_log(KVT_LOG_WARN,
		        "rocksdb: %s: cannot run RocksDB's repair in a child (%s): repairing here",
		        path, strerror(-rc));
		char *err = NULL;
		rocksdb_repair_db(d->opts, path, &err);
		return kvt__rdb_err(err);
	}
	char err[ERR_MAX];
	read_all(p[0], err, sizeof(err));
	close(p[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			kvt_log(KVT_LOG_ERROR, "rocksdb: %s: RocksDB's repair: waitpid: %s", path,
			        strerror(errno));
			return -EIO;
		}
	if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_REPAIRED)
		return 0;
	if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_ROCKSDB) {
		kvt_log(KVT_LOG_WARN, "rocksdb: %s: repair: %s", path, err);
		return kvt__rdb_err_code(err);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_NOMEM)
		return -ENOMEM;
	if (WIFSIGNALED(st))
		kvt_log(KVT_LOG_ERROR, "rocksdb: %s: RocksDB's repair died: signal %d (%s)", path,
		        WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		kvt_log(KVT_LOG_ERROR, "rocksdb: %s: RocksDB's repair died: exit status %d", path,
		        WEXITSTATUS(st));
	return -EBADMSG;
}
