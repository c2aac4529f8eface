/* testlib.c -- see testlib.h. */
#include "testlib.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* KVT_TEST_ONLY=PATTERN runs only the tests of a program whose names match it (cmocka's filter,
 * with * and ?): a soak of one test of several, e.g. test_daemon_model's random calls without
 * its crash loop. Set before main() of any test that links this file. */
__attribute__((constructor)) static void only_matching_tests(void)
{
	const char *pattern = getenv("KVT_TEST_ONLY");
	if (pattern && *pattern)
		cmocka_set_test_filter(pattern);
}

const char *kvt_test_shared(const char *rel, char *buf, size_t len)
{
	const char *root = getenv("KVT_SHARED_DATA");
	if (!root)
		root = "../shared/data";
	snprintf(buf, len, "%s/%s", root, rel);
	return access(buf, R_OK) == 0 ? buf : NULL;
}

void kvt_test_require_shared(const char *path, const char *what)
{
	if (path)
		return;
	const char *ci = getenv("CI");
	if (ci && !strcmp(ci, "true")) {
		fprintf(stderr, "FAIL: %s is missing from ../shared/data, and CI always has it\n",
		        what);
		exit(1);
	}
	fprintf(stderr, "SKIP: %s not found under ../shared/data (set KVT_SHARED_DATA)\n", what);
	exit(KVT_TEST_SKIP);
}

const char *kvt_test_tmpdir(char *buf, size_t len)
{
	const char *base = getenv("TMPDIR");
	snprintf(buf, len, "%s/kvt-test-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(buf)) {
		perror("mkdtemp");
		exit(1);
	}
	return buf;
}

void kvt_test_rmtree(const char *path)
{
	DIR *d = opendir(path);
	if (!d) {
		unlink(path);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char sub[1024];
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		struct stat st;
		if (!lstat(sub, &st) && S_ISDIR(st.st_mode))
			kvt_test_rmtree(sub);
		else
			unlink(sub);
	}
	closedir(d);
	rmdir(path);
}

const char *kvt_test_bin(const char *name, char *buf, size_t len)
{
	const char *dir = getenv("KVT_BIN_DIR");
	snprintf(buf, len, "%s/%s", dir ? dir : "build/bin", name);
	return buf;
}

static int wait_accepting(const char *sock, pid_t pid)
{
	for (int i = 0; i < 4000; i++) { /* 20 s: valgrind starts slowly */
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		struct sockaddr_un a = {.sun_family = AF_UNIX};
		if (strlen(sock) >= sizeof(a.sun_path))
			return -ENAMETOOLONG;
		memcpy(a.sun_path, sock, strlen(sock) + 1);
		int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(fd);
		if (ok)
			return 0;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return -ECHILD;
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return -ETIMEDOUT;
}

/* What every test daemon runs with unless its test says otherwise. */
static const char *const test_defaults[] = {
    "host.bytes=64MiB",
    "host.policy=lru",            /* the tests' eviction orders are lru's (auto: its own test) */
    "tiers.order=host",           /* host alone unless a test names its tiers (test_tiers) */
    "metrics.listen=127.0.0.1:0", /* tests run side by side: each scrape on a free port */
};

static int spawn(struct kvt_test_daemon *d, const char *const *sets)
{
	char bin[512];
	kvt_test_bin("kvtierd", bin, sizeof(bin));
	const char *argv[80];
	int n = 0;
	/* KVT_TEST_DAEMON_WRAPPER="valgrind --leak-check=full ..." runs the daemon under a tool */
	static char wrap[512];
	const char *w = getenv("KVT_TEST_DAEMON_WRAPPER");
	if (w && *w) {
		snprintf(wrap, sizeof(wrap), "%s", w);
		for (char *save = NULL, *t = strtok_r(wrap, " ", &save); t && n < 16;
		     t = strtok_r(NULL, " ", &save))
			argv[n++] = t;
	}
	argv[n++] = bin;
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	argv[n++] = "--data-dir";
	argv[n++] = d->data;
	if (d->config[0]) { /* the defaults below are in the file, which may change them */
		argv[n++] = "--config";
		argv[n++] = d->config;
	} else {
		for (size_t i = 0; i < sizeof(test_defaults) / sizeof(test_defaults[0]); i++) {
			argv[n++] = "--set";
			argv[n++] = test_defaults[i];
		}
	}
	for (int i = 0; sets && sets[i] && n < 60; i++) {
		argv[n++] = "--set";
		argv[n++] = sets[i];
	}
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* a test that fails mid-way never leaves a daemon holding ctest's pipes */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (!getenv("KVT_TEST_DAEMON_VERBOSE")) {
			int null = open("/dev/null", O_WRONLY);
			dup2(null, 1);
		}
		/* the daemon starts with stdio alone, as a service manager starts it: every other
		 * fd it holds is its own (test_robust checks they are close-on-exec) */
		close_range(3, ~0u, 0);
		if (d->as_uid && kvt_test_become(d->as_uid))
			_exit(126);
		if (argv[0] == bin)
			execv(bin, (char *const *)argv);
		else
			execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	d->pid = pid;
	int rc = wait_accepting(d->sock, pid);
	if (rc == -ECHILD)
		d->pid = 0; /* exited, and reaped: nothing left to stop */
	return rc;
}

int kvt_test_daemon_start(struct kvt_test_daemon *d, const char *const *sets)
{
	return kvt_test_daemon_start_as(d, sets, 0);
}

/* A fresh directory for d: its socket and data dir, owned by uid unless 0. */
static int prepare(struct kvt_test_daemon *d, uid_t uid)
{
	memset(d, 0, sizeof(*d));
	kvt_test_tmpdir(d->dir, sizeof(d->dir));
	snprintf(d->sock, sizeof(d->sock), "%s/kvtier.sock", d->dir);
	snprintf(d->data, sizeof(d->data), "%s/data", d->dir);
	mkdir(d->data, 0750);
	if (uid && (chown(d->dir, uid, uid) || chown(d->data, uid, uid)))
		return -errno;
	d->as_uid = uid;
	return 0;
}

int kvt_test_daemon_start_as(struct kvt_test_daemon *d, const char *const *sets, uid_t uid)
{
	int rc = prepare(d, uid);
	return rc ? rc : spawn(d, sets);
}

int kvt_test_daemon_start_config(struct kvt_test_daemon *d, const char *text,
                                 const char *const *sets)
{
	int rc = prepare(d, 0);
	if (rc)
		return rc;
	snprintf(d->config, sizeof(d->config), "%s/kvtier.conf", d->dir);
	FILE *f = fopen(d->config, "w");
	if (!f)
		return -errno;
	bool ok = true;
	for (size_t i = 0; i < sizeof(test_defaults) / sizeof(test_defaults[0]); i++)
		ok = ok && fprintf(f, "%s\n", test_defaults[i]) > 0; /* name=value: a config line */
	ok = ok && fputs(text, f) >= 0;
	if (fclose(f) || !ok)
		return -EIO;
	return spawn(d, sets);
}

int kvt_test_daemon_restart(struct kvt_test_daemon *d, const char *const *sets)
{
	return spawn(d, sets);
}

int kvt_test_daemon_stop(struct kvt_test_daemon *d, int sig)
{
	int st = -1;
	if (d->pid <= 0)
		return -1;
	kill(d->pid, sig);
	for (int i = 0; i < 2000; i++) {
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			d->pid = 0;
			return st;
		}
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &st, 0);
	d->pid = 0;
	return -1;
}

/* Stops d with SIGTERM (if it still runs) and removes its directory. A daemon that does not
 * then exit 0 within 10 s fails the test: a hang at shutdown, a crash, or, under ASan, the leak
 * report LeakSanitizer makes at exit (exit status 23), which would otherwise go unnoticed. */
void kvt_test_daemon_destroy(struct kvt_test_daemon *d)
{
	int st = 0;
	pid_t pid = d->pid;
	if (pid > 0)
		st = kvt_test_daemon_stop(d, SIGTERM);
	if (d->dir[0])
		kvt_test_rmtree(d->dir);
	if (pid > 0 && (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st)))
		fail_msg("kvtierd %d did not stop cleanly on SIGTERM: %s %d", (int)pid,
		         st == -1        ? "still running after 10 s, status"
		         : WIFEXITED(st) ? "exit status"
		                         : "killed by signal",
		         st == -1        ? -1
		         : WIFEXITED(st) ? WEXITSTATUS(st)
		                         : WTERMSIG(st));
}

void kvt_test_open_to_others(const struct kvt_test_daemon *d)
{
	chmod(d->dir, 0755);
	chmod(d->sock, 0666);
}

double kvt_test_ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void kvt_test_sort_ms(double *ms, size_t n)
{
	qsort(ms, n, sizeof(*ms), by_value);
}

uint64_t kvt_test_env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	char *end;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (errno || *end ||
	    *v == '-') { /* "x" ran as 0: a search of no seeds, a load of nothing */
		fprintf(stderr, "%s=%s: not a whole number; %llu used\n", name, v,
		        (unsigned long long)dflt);
		return dflt;
	}
	return n;
}

uint64_t kvt_test_env_in(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi)
{
	uint64_t n = kvt_test_env_u64(name, dflt);
	return n < lo ? lo : n > hi ? hi : n;
}

unsigned kvt_test_seed(const char *what)
{
	unsigned seed = (unsigned)kvt_test_env_u64("KVT_SEED", (uint64_t)time(NULL));
	fprintf(stderr, "%s: seed %u (KVT_SEED=%u repeats it)\n", what, seed, seed);
	return seed;
}

bool kvt_test_slowed(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return true;
#else
	return getenv("KVT_TEST_DAEMON_WRAPPER") != NULL;
#endif
}

int kvt_test_become(uid_t uid)
{
	return setgroups(0, NULL) || setgid(uid) || setuid(uid) || prctl(PR_SET_PDEATHSIG, SIGKILL)
	           ? -1
	           : 0;
}

pid_t kvt_test_fork_as_nobody(void)
{
	pid_t p = fork();
	if (!p && (setgid(65534) || setuid(65534)))
		_exit(30);
	return p;
}

long kvt_test_read_file(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	fclose(f);
	return (long)n;
}

long kvt_test_rss_anon_kib(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	const char *at =
	    kvt_test_read_file(path, buf, sizeof(buf)) > 0 ? strstr(buf, "RssAnon:") : NULL;
	return at ? strtol(at + strlen("RssAnon:"), NULL, 10) : -1;
}

int kvt_test_mount_tmpfs(char *dir, size_t dir_len, char *mnt, size_t mnt_len, const char *size)
{
	char opts[64];
	kvt_test_tmpdir(dir, dir_len);
	snprintf(mnt, mnt_len, "%s/mnt", dir);
	snprintf(opts, sizeof(opts), "size=%s", size);
	if (mkdir(mnt, 0700) || mount("tmpfs", mnt, "tmpfs", 0, opts)) {
		int rc = -errno;
		print_message("skip: mounting a tmpfs needs root (CAP_SYS_ADMIN): %s\n",
		              strerror(-rc));
		kvt_test_rmtree(dir);
		return rc;
	}
	return 0;
}

void kvt_test_umount_tmpfs(const char *dir, const char *mnt)
{
	umount2(mnt, MNT_DETACH);
	kvt_test_rmtree(dir);
}

void kvt_test_ballast(const char *path, size_t bytes)
{
	static char blk[1 << 20];
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	memset(blk, 0xa5, sizeof(blk));
	for (size_t off = 0; off < bytes; off += sizeof(blk))
		assert_int_equal(write(fd, blk, sizeof(blk)), sizeof(blk));
	close(fd);
}

FILE *kvt_test_cli_start(const struct kvt_test_daemon *d, const char *args)
{
	char bin[512], cmd[1200];
	kvt_test_bin("kvtier", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "%s --socket %s %s 2>&1", bin, d->sock, args);
	return popen(cmd, "r");
}

int kvt_test_cli(const struct kvt_test_daemon *d, const char *args, char *out, size_t len)
{
	return kvt_test_cmd_end(kvt_test_cli_start(d, args), out, len);
}

int kvt_test_cmd(const char *cmd, char *out, size_t len)
{
	return kvt_test_cmd_end(popen(cmd, "r"), out, len);
}

int kvt_test_cmd_end(FILE *f, char *out, size_t len)
{
	out[0] = 0;
	if (!f)
		return -1;
	size_t n = fread(out, 1, len - 1, f);
	out[n] = 0;
	char rest[4096]; /* what does not fit is read and let go: a closed pipe killed the CLI */
	while (fread(rest, 1, sizeof(rest), f) > 0)
		;
	int st = pclose(f);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const char *kvt_test_check_books(const struct kvt_test_daemon *d, int verbose)
{
	static char out[4096];
	int rc = 0;
	for (int tries = 0; tries < 200; tries++) {
		rc = kvt_test_cli(d, "check", out, sizeof(out));
		if (rc || !strstr(out, "in flight"))
			break;
		usleep(10000);
	}
	if (rc)
		fail_msg("kvtier check: exit %d:\n%s", rc, out);
	if (verbose)
		print_message("%s", out);
	return out;
}

long long kvt_test_stats_json(struct kvt_test_daemon *d, char *out, size_t len)
{
	return kvt_test_cli(d, "stats --json", out, len) ? -1 : (long long)strlen(out);
}

long long kvt_test_stat(struct kvt_test_daemon *d, const char *key)
{
	return kvt_test_tier_stat(d, NULL, key);
}

long long kvt_test_tier_stat(struct kvt_test_daemon *d, const char *tier, const char *key)
{
	static char out[1 << 16];
	if (kvt_test_stats_json(d, out, sizeof(out)) < 0)
		return -1;
	char pat[128];
	const char *p = out;
	if (tier) {
		snprintf(pat, sizeof(pat), "\"name\":\"%s\"", tier);
		if (!(p = strstr(out, pat)))
			return -1;
	}
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(p, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

long long kvt_test_stat_wait(struct kvt_test_daemon *d, const char *key, long long want,
                             int at_least)
{
	/* a deadline, not a count of polls: each poll runs the CLI, slow on a loaded machine
	 * (ASan builds running side by side missed 5 s of polls at demotions of 56 MiB) */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long long v = kvt_test_stat(d, key);
	while (at_least ? v < want : v != want) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= 20)
			break;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
		v = kvt_test_stat(d, key);
	}
	return v;
}

void kvt_test_fill(void *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	uint8_t *b = buf;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(b + i, &x, 8);
	}
	for (; i < len; i++)
		b[i] = (uint8_t)(seed + i);
}

uint64_t kvt_test_xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

int kvt_test_fd_count(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

bool kvt_test_invert64(const char *file, bool mid)
{
	struct stat st;
	int fd = open(file, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false;
	uint8_t b[64];
	bool ok = !fstat(fd, &st) && st.st_size > 128;
	off_t at = mid ? st.st_size / 2 - 32 : st.st_size - 64;
	ok = ok && pread(fd, b, 64, at) == 64;
	for (int k = 0; ok && k < 64; k++)
		b[k] = (uint8_t)~b[k];
	ok = ok && pwrite(fd, b, 64, at) == 64;
	close(fd);
	return ok;
}

bool kvt_test_rdb_manifest_header(const char *manifest, bool zero)
{
	enum { BLOCK = 32768, HEADER = 7 }; /* RocksDB's log format: blocks of records */
	int fd = open(manifest, O_RDWR | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	uint8_t *b = malloc((size_t)st.st_size + 1);
	bool found = false;
	if (b && pread(fd, b, (size_t)st.st_size, 0) == st.st_size) {
		size_t size = (size_t)st.st_size, p = 0;
		while (p + HEADER <= size) {
			if (BLOCK - p % BLOCK < HEADER) { /* a block's trailer */
				p += BLOCK - p % BLOCK;
				continue;
			}
			if (p >= size / 2) {
				for (int i = zero ? 0 : 4; i < (zero ? HEADER : 6); i++)
					b[p + i] = zero ? 0 : (uint8_t)~b[p + i];
				found = pwrite(fd, b + p, HEADER, (off_t)p) == HEADER;
				break;
			}
			p += HEADER + (b[p + 4] | (size_t)b[p + 5] << 8);
		}
	}
	free(b);
	close(fd);
	return found;
}

bool kvt_test_rdb_manifest(const char *db, char *out, size_t len)
{
	char cur[PATH_MAX], name[256] = {0};
	snprintf(cur, sizeof(cur), "%s/CURRENT", db);
	FILE *f = fopen(cur, "r");
	bool ok = f && fgets(name, sizeof(name), f);
	if (f)
		fclose(f);
	name[strcspn(name, "\n")] = 0;
	snprintf(out, len, "%s/%s", db, name);
	return ok && name[0];
}

bool kvt_test_rdb_flip_meta_in(const char *sst, uint32_t tenant)
{
	uint8_t lo[41]; /* the meta range's start, and the tenant */
	memset(lo, 0xff, 36);
	lo[36] = 0;
	for (int i = 0; i < 4; i++)
		lo[37 + i] = (uint8_t)(tenant >> (8 * i));
	struct stat st;
	bool found = false;
	int fd = open(sst, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || st.st_size < (off_t)sizeof(lo) + 8) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	uint8_t *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	uint8_t *at = m == MAP_FAILED ? NULL : memmem(m, (size_t)st.st_size, lo, sizeof(lo));
	if (at && at + sizeof(lo) + 4 < m + st.st_size) {
		at[sizeof(lo) + 4] ^= 1; /* the namespace's first word */
		found = msync(m, (size_t)st.st_size, MS_SYNC) == 0;
	}
	if (m != MAP_FAILED)
		munmap(m, (size_t)st.st_size);
	close(fd);
	return found;
}

/* Calls each on every table file of db (its path) until one answers true. */
static bool each_table(const char *db, bool (*each)(const char *sst, void *arg), void *arg)
{
	DIR *dp = opendir(db);
	bool done = false;
	for (struct dirent *e; dp && !done && (e = readdir(dp));) {
		size_t l = strlen(e->d_name);
		char f[PATH_MAX];
		if (l < 5 || strcmp(e->d_name + l - 4, ".sst"))
			continue;
		snprintf(f, sizeof(f), "%s/%s", db, e->d_name);
		done = each(f, arg);
	}
	if (dp)
		closedir(dp);
	return done;
}

static bool flip_in(const char *sst, void *arg)
{
	return kvt_test_rdb_flip_meta_in(sst, *(const uint32_t *)arg);
}

bool kvt_test_rdb_flip_meta(const char *db, uint32_t tenant)
{
	return each_table(db, flip_in, &tenant);
}

struct newest {
	char *out;
	size_t len;
};

static bool newer_table(const char *sst, void *arg)
{
	struct newest *b = arg;
	const char *n = strrchr(sst, '/') + 1, *o = b->out[0] ? strrchr(b->out, '/') + 1 : "";
	if (strtoull(n, NULL, 10) > strtoull(o, NULL, 10))
		snprintf(b->out, b->len, "%s", sst);
	return false;
}

bool kvt_test_rdb_newest_table(const char *db, char *out, size_t len)
{
	struct newest b = {out, len};
	out[0] = 0;
	each_table(db, newer_table, &b);
	return out[0] != 0;
}

int kvt_test_run_self(const char *argv0, const char *var)
{
	size_t ne = 0;
	while (environ[ne])
		ne++;
	char **envp = calloc(ne + 2, sizeof(*envp)); /* this environment, and var */
	assert_non_null(envp);
	memcpy(envp, environ, ne * sizeof(*envp));
	envp[ne] = (char *)var;
	char *argv[] = {(char *)argv0, NULL};
	pid_t pid;
	int rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, envp);
	free(envp);
	assert_int_equal(rc, 0);
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
