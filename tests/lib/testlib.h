/* testlib.h -- fixtures shared by the tests: temp dirs, shared data, a daemon on a temp socket. */
#ifndef KVT_TESTLIB_H
#define KVT_TESTLIB_H
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <cmocka.h>

#define KVT_TEST_SKIP 77

/* Path of a file under ../shared/data, or NULL when absent (the caller skips, or fails in CI). */
const char *kvt_test_shared(const char *rel, char *buf, size_t len);
/* Exits 77 with a message when the shared data is absent, but fails (exit 1) when CI=true. */
void kvt_test_require_shared(const char *path_or_null, const char *what);
/* Creates a fresh temporary directory; returns its path in buf. */
const char *kvt_test_tmpdir(char *buf, size_t len);
/* Removes a directory tree. */
void kvt_test_rmtree(const char *path);
/* Path of a built binary (KVT_BIN_DIR/name). */
const char *kvt_test_bin(const char *name, char *buf, size_t len);
/* Runs this test binary again (/proc/self/exe, argv[0] argv0) with var ("NAME=value") added to
 * this environment, and waits for it: its main() looks for NAME and plays the child's part.
 * @return : its exit status, or -1 when it did not exit (killed by a signal). */
int kvt_test_run_self(const char *argv0, const char *var);

/* A kvtierd started on a temporary socket. */
struct kvt_test_daemon {
	pid_t pid;
	uid_t as_uid; /* 0: the test's own uid; else kvtierd runs as this uid (and gid) */
	char dir[256];
	char sock[300];
	char data[300];
	char config[320]; /* passed as --config when set (kvt_test_daemon_start_config) */
};
/* Starts kvtierd with extra "--set" arguments (NULL-terminated), waits until it accepts. */
int kvt_test_daemon_start(struct kvt_test_daemon *d, const char *const *sets);
/* The same, kvtierd running as uid (and gid uid), its directories its own (uid 0: as
 * kvt_test_daemon_start). Another uid needs root. */
int kvt_test_daemon_start_as(struct kvt_test_daemon *d, const char *const *sets, uid_t uid);
/* The same, with the test defaults (host.bytes, host.policy, ...) and then text written to
 * DIR/kvtier.conf, passed as --config instead of the defaults' --set (restarts too). */
int kvt_test_daemon_start_config(struct kvt_test_daemon *d, const char *text,
                                 const char *const *sets);
/* Restarts the same daemon (same socket and data dir) after a stop. */
int kvt_test_daemon_restart(struct kvt_test_daemon *d, const char *const *sets);
/* Sends sig and waits for exit; @return : the wait status. */
int kvt_test_daemon_stop(struct kvt_test_daemon *d, int sig);
/* Stops and removes the directory. */
void kvt_test_daemon_destroy(struct kvt_test_daemon *d);
/* Runs `kvtier stats --json` against d and returns a number found after "key": in the output. */
long long kvt_test_stat(struct kvt_test_daemon *d, const char *key);
/* The same, the first "key": after tier's "name" (host, nvme, rocksdb); -1 when absent. */
long long kvt_test_tier_stat(struct kvt_test_daemon *d, const char *tier, const char *key);
/* Runs `kvtier --socket d->sock ARGS`, its stdout and stderr into out (NUL-terminated).
 * @return : its exit status, or -1 when it could not run or did not exit. */
int kvt_test_cli(const struct kvt_test_daemon *d, const char *args, char *out, size_t len);
/* Runs the shell command cmd, its output into out (NUL-terminated; what does not fit is read
 * and let go). @return : as kvt_test_cli. */
int kvt_test_cmd(const char *cmd, char *out, size_t len);
/* kvt_test_cli in two halves, for a command that waits: started (popen; NULL when it could
 * not be), then its output into out and its exit status, as kvt_test_cli's (pclose). */
FILE *kvt_test_cli_start(const struct kvt_test_daemon *d, const char *args);
int kvt_test_cmd_end(FILE *f, char *out, size_t len);
/* `kvtier check` against d: the daemon's books against its index. A mismatch fails the test
 * with the daemon's words; the check's lines are printed when verbose. Retries while tier jobs
 * are in flight (the bytes are then compared as at most), 2 s at most. @return : what the check
 * printed (static: valid until the next call). */
const char *kvt_test_check_books(const struct kvt_test_daemon *d, int verbose);
/* `kvtier stats --json` of d into out (NUL-terminated). @return : its length, or -1. */
long long kvt_test_stats_json(struct kvt_test_daemon *d, char *out, size_t len);
/* Polls kvt_test_stat (10 ms apart, 20 s at most) until key is >= want (at_least) or == want.
 * @return : the last value read. */
long long kvt_test_stat_wait(struct kvt_test_daemon *d, const char *key, long long want,
                             int at_least);
/* Lets another uid reach d's socket (its directory is 0750 and the socket 0660 by default).
 * A restart needs the directory back at 0750 first: the daemon refuses a more open one. */
void kvt_test_open_to_others(const struct kvt_test_daemon *d);
/* In a forked child: become uid (gid uid, no supplementary groups), the parent-death signal
 * SIGKILL set again after (a change of uid clears it). @return : 0, or -1 (errno). Needs root. */
int kvt_test_become(uid_t uid);
/* fork(), the child running as uid and gid 65534 (it exits 30 when it cannot switch).
 * @return : as fork(). Needs root. */
pid_t kvt_test_fork_as_nobody(void);
/* CLOCK_MONOTONIC in milliseconds, for timing calls. */
double kvt_test_ms_now(void);
/* Sorts n timings ascending (then ms[n * 99 / 100] is the p99). */
void kvt_test_sort_ms(double *ms, size_t n);
/* Whether kvtierd runs slowed: under valgrind (make valgrind) or in a sanitizing build. */
bool kvt_test_slowed(void);
/* The number in environment variable name (a longer search's seeds, steps or stream), or dflt
 * when it is unset, empty or not a whole number (said on stderr). */
uint64_t kvt_test_env_u64(const char *name, uint64_t dflt);
/* kvt_test_env_u64, held to [lo, hi] (a test's knob for longer runs by hand). */
uint64_t kvt_test_env_in(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi);
/* A seed for rand() in a test whose rounds differ run to run: KVT_SEED when set, else the clock.
 * Printed with what (the test's name), so that a failure names the seed that repeats it. */
unsigned kvt_test_seed(const char *what);
/* Reads up to len - 1 bytes of path into buf, NUL-terminated. @return : the bytes read, or -1. */
long kvt_test_read_file(const char *path, char *buf, size_t len);
/* Process pid's anonymous resident memory in KiB (RssAnon: not shared memory), or -1. */
long kvt_test_rss_anon_kib(pid_t pid);
/* Writes bytes (rounded up to MiB) of 0xa5 to path: ballast that fills a file system. */
void kvt_test_ballast(const char *path, size_t bytes);
/* Makes a temporary directory (dir) and mounts a tmpfs of size ("32m") at dir/mnt (mnt).
 * Mounting needs root (CAP_SYS_ADMIN): elsewhere it says why, removes dir and returns -errno,
 * and the caller skips. @return : 0 or -errno. */
int kvt_test_mount_tmpfs(char *dir, size_t dir_len, char *mnt, size_t mnt_len, const char *size);
/* Unmounts mnt and removes dir. */
void kvt_test_umount_tmpfs(const char *dir, const char *mnt);
/* Fills buf with bytes derived from seed (deterministic). */
void kvt_test_fill(void *buf, size_t len, uint64_t seed);
/* The next number of a xorshift64 sequence in *s (not 0), for the tests' seeded fuzzers. */
uint64_t kvt_test_xorshift(uint64_t *s);
/* Counts open fds of pid. */
int kvt_test_fd_count(pid_t pid);
/* Inverts the last 64 bytes of file (a table's footer) or, with mid, 64 from its middle.
 * @return : whether it could (the file is over 128 bytes and writable). */
bool kvt_test_invert64(const char *file, bool mid);
/* The path of the manifest that the rocksdb database at db names in its CURRENT, into out.
 * @return : whether CURRENT named one. */
bool kvt_test_rdb_manifest(const char *db, char *out, size_t len);
/* Damages the header of the first record of the rocksdb manifest file that starts at or past
 * the file's middle: its length inverted (one that runs past its block, which RocksDB's reader
 * takes for the cut end of the file when it is in the last block) or, with zero, its 7 bytes
 * zeroed (a record RocksDB's reader skips with the rest of its block, as a preallocated
 * region). @return : whether there was one. */
bool kvt_test_rdb_manifest_header(const char *manifest, bool zero);
/* Flips a bit of the first metadata key of a record of tenant (0xff x 36, 0, then the record's
 * key, its tenant first, little-endian) in a table of the closed rocksdb database at db: a bit
 * 8 bytes into that key, whose block then fails RocksDB's checksum (tables are not compressed,
 * so the key is there as written). @return : whether one was found. */
bool kvt_test_rdb_flip_meta(const char *db, uint32_t tenant);
/* The same in one table file (its path). */
bool kvt_test_rdb_flip_meta_in(const char *sst, uint32_t tenant);
/* Writes to out the path of db's table file with the highest number (the newest).
 * @return : whether db has one. */
bool kvt_test_rdb_newest_table(const char *db, char *out, size_t len);
#endif
