/*
 * test_record.c -- trace.file: kvtierd records its engines' requests as a trace `kvtier sim`
 * reads (ipc/daemon/record.c). A real daemon, real clients through libkvtier, the file read back
 * by the simulator's own loader: each request is pieced together from the engine's get and the
 * put of what it missed, a long request asked in batches is one line, a kvt_done is a done line
 * after its request, lookups are not recorded, two connections' requests stay apart, another
 * tenant's chunks have other ids. The file is appended across restarts with the times running
 * on. A relative or unopenable path is refused with the recording left as it was (and stops a
 * start); trace.max_bytes and a full device (/dev/full) end the recording with the file whole
 * line by line, `kvtier stats` saying why, and the daemon serving every byte as before.
 * (kvtier bench trace --record, run by test_policy_sim, checks that a recording of the Mooncake
 * trace is that trace, request for request, and replays to the daemon's hit ratio.)
 */
#include "testlib.h"
#include "ipc/client/simple.h"
#include "ipc/proto.h"
#include "kvtier.h"
#include "sim.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNKS 300 /* keys of one token chain: more than one 256-key batch */

static kvt_model_t model(void)
{
	kvt_model_t m = {.name = "rec",
	                 .dtype = KVT_DTYPE_F16,
	                 .n_layers = 1,
	                 .n_kv_heads = 1,
	                 .head_dim = 64,
	                 .tokens_per_chunk = 16}; /* 4 KiB chunks */
	return m;
}

struct engine {
	kvt_client_t *c;
	kvt_id_t ns, keys[CHUNKS];
	size_t cb;
	uint8_t *buf; /* CHUNKS chunks: what a get copies out, and what a put stores */
};

/* e's keys become those of the chain of `salt` tokens. */
static void chain(struct engine *e, uint32_t salt)
{
	uint32_t toks[CHUNKS * 16];
	for (size_t i = 0; i < CHUNKS * 16; i++)
		toks[i] = (uint32_t)i * 7 + salt;
	assert_int_equal(kvt_chunk_keys(e->ns, toks, CHUNKS * 16, 16, e->keys, CHUNKS), CHUNKS);
}

/* Connects e to d and makes the keys of one chain of `salt` tokens. */
static void engine_open(struct engine *e, const struct kvt_test_daemon *d, uint32_t salt)
{
	assert_int_equal(kvt_connect(d->sock, &e->c), 0);
	kvt_model_t m = model();
	assert_int_equal(kvt_namespace(e->c, &m, &e->ns), 0);
	chain(e, salt);
	e->cb = kvt_chunk_bytes(&m);
	e->buf = malloc(CHUNKS * e->cb);
	assert_non_null(e->buf);
	for (size_t i = 0; i < CHUNKS; i++)
		kvt_test_fill(e->buf + i * e->cb, e->cb, salt * 1000 + i);
}

static void engine_close(struct engine *e)
{
	kvt_close(e->c);
	free(e->buf);
}

/* One engine request for keys [0, n): kvt_get of all of them, then kvt_put of the rest from
 * the first miss on, under the last hit. @return : how many the get found. */
static int request(struct engine *e, size_t n)
{
	void *dst[CHUNKS];
	uint8_t *got_buf = malloc(n * e->cb);
	assert_non_null(got_buf);
	for (size_t i = 0; i < n; i++)
		dst[i] = got_buf + i * e->cb;
	int got = kvt_get(e->c, e->ns, e->keys, n, dst, e->cb);
	assert_true(got >= 0 && (size_t)got <= n);
	for (int i = 0; i < got; i++) /* every byte served is the one put */
		assert_memory_equal(got_buf + (size_t)i * e->cb, e->buf + (size_t)i * e->cb, e->cb);
	free(got_buf);
	if ((size_t)got < n) {
		const void *ch[CHUNKS];
		for (size_t i = (size_t)got; i < n; i++)
			ch[i - (size_t)got] = e->buf + i * e->cb;
		assert_int_equal(kvt_put(e->c, e->ns, got ? &e->keys[got - 1] : NULL, e->keys + got,
		                         n - (size_t)got, ch, e->cb),
		                 (int)(n - (size_t)got));
	}
	return got;
}

static int config(const struct kvt_test_daemon *d, const char *cmd, char *out, size_t len)
{
	char args[600];
	snprintf(args, sizeof(args), "config %s", cmd);
	return kvt_test_cli(d, args, out, len);
}

/* Starts d (with sets, NULL-terminated, or NULL) and its recording to path, d's dir/name
 * (path 400 bytes), set at run time. */
static void start_recording(struct kvt_test_daemon *d, const char **sets, const char *name,
                            char *path)
{
	char cmd[512], out[4096];
	assert_int_equal(kvt_test_daemon_start(d, sets), 0);
	snprintf(path, 400, "%s/%s", d->dir, name);
	snprintf(cmd, sizeof(cmd), "set trace.file %s", path);
	assert_int_equal(config(d, cmd, out, sizeof(out)), 0);
}

/* The file's lines that are not comments, each NUL-terminated in place; @return : how many. */
static size_t lines_of(char *text, char **line, size_t max)
{
	size_t n = 0;
	for (char *s = text, *nl; *s && (nl = strchr(s, '\n')); s = nl + 1) {
		*nl = 0;
		if (*s != '#' && n < max)
			line[n++] = s;
	}
	return n;
}

static size_t words(const char *s)
{
	size_t n = 0;
	for (const char *p = s; *p;) {
		p += strspn(p, " ");
		if (*p)
			n++;
		p += strcspn(p, " ");
	}
	return n;
}

/* pid's exit status once it has ended, or -1 when a signal ended it. */
static int exit_of(pid_t pid)
{
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* t holds n requests, request q lens[q] blocks numbered from[q] on (the loader numbers blocks
 * as they first appear). */
static void assert_requests(const struct kvt_trace *t, size_t n, const uint64_t *lens,
                            const uint32_t *from)
{
	assert_int_equal(t->n_req, n);
	for (size_t q = 0; q < n; q++) {
		assert_int_equal(t->req_off[q + 1] - t->req_off[q], lens[q]);
		for (uint64_t i = 0; i < lens[q]; i++)
			assert_int_equal(t->blk[t->req_off[q] + i], from[q] + i);
	}
}

/* Requests of one engine, a long one, a done hint, lookups and a second connection, read back
 * by the simulator's loader. */
static void test_record_requests(void **state)
{
	(void)state;
	struct kvt_test_daemon d;
	char path[400], out[4096];
	uint64_t t0 = wall_ms();
	start_recording(&d, NULL, "requests.trace", path);

	struct engine a, b;
	engine_open(&a, &d, 1);
	engine_open(&b, &d, 1);              /* the same chain, another connection */
	assert_int_equal(request(&a, 6), 0); /* 1: all missed, put */
	assert_int_equal(request(&a, 8), 6); /* 2: 6 found, 2 put under the 6th */
	assert_int_equal(kvt_done(a.c, a.ns, a.keys, 8), 0);
	assert_int_equal(kvt_lookup(a.c, a.ns, a.keys, 8), 8); /* not an access */
	assert_int_equal(request(&b, 4), 4);                   /* 3: all found, nothing put */
	assert_int_equal(request(&a, CHUNKS), 8);      /* 4: 300 keys, asked and put in batches */
	assert_int_equal(request(&a, CHUNKS), CHUNKS); /* 5: found in two batches of the client */
	/* written: 1, 2 and 4; 5 and b's wait for their connection's next request */
	assert_int_equal(kvt_test_stat(&d, "trace_recording"), 1);
	assert_int_equal(kvt_test_stat(&d, "trace_requests"), 3);
	assert_int_equal(kvt_test_cli(&d, "stats", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "trace.file: recording, 3 requests written"));
	assert_int_equal(config(&d, "set trace.file none", out, sizeof(out)), 0); /* written out */
	assert_int_equal(kvt_test_stat(&d, "trace_recording"), 0);
	assert_int_equal(kvt_test_stat(&d, "trace_requests"), 5);
	assert_int_equal(kvt_test_stat(&d, "trace_stopped"), 0);
	uint64_t t1 = wall_ms();
	assert_int_equal(request(&a, 4), 4); /* not recorded */

	struct kvt_trace t;
	assert_int_equal(kvt_trace_load(path, &t), 0);
	static const uint64_t lens[] = {6, 8, CHUNKS, CHUNKS, 4};
	static const uint32_t from[5] = {0}; /* one chain: chunk i is block i */
	/* b's request is written when the recording ends: it is the last line */
	assert_requests(&t, 5, lens, from);
	for (size_t q = 0; q < 5; q++)
		assert_true(t.ts_ms[q] >= t0 && t.ts_ms[q] <= t1);
	assert_int_equal(t.n_blocks, CHUNKS);
	/* the done hint after request 2, before request 3 */
	assert_non_null(t.hint_off);
	assert_int_equal(t.hint_off[2], 0);
	assert_int_equal(t.hint_off[3], 8);
	assert_int_equal(t.hint_off[5], 8);
	for (int i = 0; i < 8; i++)
		assert_int_equal(t.hint_blk[i], i);
	kvt_trace_free(&t);
	engine_close(&a);
	engine_close(&b);
	kvt_test_daemon_destroy(&d);
}

/* An acquire that finds nothing right after one that found every key it asked: kvt_get's next
 * batch of one request (it asks 64 keys at a time) when the put after it goes on from the batch
 * before, a request of its own otherwise -- a put from a root, a put under another parent, or
 * no put at all. */
static void test_record_batches(void **state)
{
	(void)state;
	struct kvt_test_daemon d;
	char path[400], out[4096];
	start_recording(&d, NULL, "batches.trace", path);
	struct engine a;
	engine_open(&a, &d, 11);
	assert_int_equal(request(&a, 64), 0);    /* 1: one batch, put */
	assert_int_equal(request(&a, 128), 64);  /* 2: the second batch finds nothing: one line */
	assert_int_equal(request(&a, 128), 128); /* 3: all found, nothing put */
	kvt_id_t first[16];
	chain(&a, 12);
	memcpy(first, a.keys, sizeof(first));
	assert_int_equal(request(&a, 10), 0);  /* 4: another chain, put from its root */
	assert_int_equal(request(&a, 10), 10); /* 5: all found */
	chain(&a, 13);
	kvt_lease_t l[4];
	assert_int_equal(kvt_acquire(a.c, a.ns, a.keys, 4, l), 0); /* 6: nothing found, no put */
	memcpy(a.keys, first, sizeof(first));
	assert_int_equal(request(&a, 10), 10); /* 7: all found */
	chain(&a, 13);
	assert_int_equal(kvt_acquire(a.c, a.ns, a.keys + 4, 4, l), 0);
	const void *ch[4] = {a.buf, a.buf, a.buf, a.buf};
	/* 8: put under the 4th chunk of request 7, not its last */
	assert_int_equal(kvt_put(a.c, a.ns, &first[3], a.keys + 4, 4, ch, a.cb), 4);
	assert_int_equal(config(&d, "set trace.file none", out, sizeof(out)), 0);
	assert_int_equal(kvt_test_stat(&d, "trace_requests"), 8);

	struct kvt_trace t;
	assert_int_equal(kvt_trace_load(path, &t), 0);
	/* blocks are numbered as they first appear: chain 11's 0-127, chain 12's 128-137, chain
	 * 13's 0-3 as 138-141 and 4-7 as 142-145 */
	static const uint64_t lens[] = {64, 128, 128, 10, 10, 4, 10, 4};
	static const uint32_t from[] = {0, 0, 0, 128, 128, 138, 128, 142};
	assert_requests(&t, 8, lens, from);
	for (size_t q = 1; q < 8; q++)
		assert_true(t.ts_ms[q] >= t.ts_ms[q - 1]);
	assert_int_equal(t.n_blocks, 146);
	kvt_trace_free(&t);
	engine_close(&a);
	kvt_test_daemon_destroy(&d);
}

/* A put that host.admit cuts short: the client sends the keys it did not send (a put's reply
 * says the daemon records), and the line is the whole request. Chunks of 1 MiB, so kvt_put
 * sends 4 a message, two messages ahead of the replies: 8 sent, 12 not. */
static void test_record_cut_put(void **state)
{
	(void)state;
	struct kvt_test_daemon d;
	char path[400], out[4096];
	const char *sets[] = {"host.admit=second_touch", NULL};
	start_recording(&d, sets, "cut.trace", path);
	kvt_client_t *c;
	assert_int_equal(kvt_connect(d.sock, &c), 0);
	kvt_model_t m = model();
	m.n_layers = 16, m.n_kv_heads = 16;
	kvt_id_t ns, keys[20];
	assert_int_equal(kvt_namespace(c, &m, &ns), 0);
	size_t cb = kvt_chunk_bytes(&m);
	assert_int_equal(cb, 1u << 20);
	uint32_t toks[20 * 16];
	for (uint32_t i = 0; i < 20 * 16; i++)
		toks[i] = i * 3 + 1;
	assert_int_equal(kvt_chunk_keys(ns, toks, 20 * 16, 16, keys, 20), 20);
	uint8_t *buf = malloc(cb);
	assert_non_null(buf);
	kvt_test_fill(buf, cb, 77);
	const void *ch[20];
	for (int i = 0; i < 20; i++)
		ch[i] = buf;
	assert_int_equal(kvt_put(c, ns, NULL, keys, 20, ch, cb), 0); /* a first touch each */
	assert_int_equal(kvt_test_stat(&d, "puts_cut") + kvt_test_stat(&d, "not_admitted") > 0, 1);
	assert_int_equal(kvt_lookup(c, ns, keys, 1), 0); /* a reply: the hint before it was read */
	assert_int_equal(config(&d, "set trace.file none", out, sizeof(out)), 0);
	struct kvt_trace t;
	assert_int_equal(kvt_trace_load(path, &t), 0);
	assert_int_equal(t.n_req, 1);
	assert_int_equal(t.req_off[1], 20); /* not just the 8 sent */
	for (uint32_t i = 0; i < 20; i++)
		assert_int_equal(t.blk[i], i);
	kvt_trace_free(&t);
	free(buf);
	kvt_close(c);
	kvt_test_daemon_destroy(&d);
}

/* Another tenant (nobody, 65534) asks d for the five chunks of salt 3, which are not its own:
 * a request of its own in the recording. */
static void other_tenant_request(struct kvt_test_daemon *d)
{
	pid_t pid = kvt_test_fork_as_nobody();
	if (pid == 0) {
		kvt_client_t *c;
		kvt_model_t m = model();
		kvt_id_t ns, keys[5];
		uint32_t toks[5 * 16];
		for (size_t i = 0; i < 5 * 16; i++)
			toks[i] = (uint32_t)i * 7 + 3;
		if (kvt_connect(d->sock, &c) || kvt_namespace(c, &m, &ns) ||
		    kvt_chunk_keys(ns, toks, 5 * 16, 16, keys, 5) != 5)
			_exit(1);
		kvt_lease_t l[5];
		_exit(kvt_acquire(c, ns, keys, 5, l) == 0 ? 0 : 2); /* not this tenant's */
	}
	assert_int_equal(exit_of(pid), 0);
}

/* Appended across a restart, the times running on, the same chunk the same id; another tenant's
 * chunks of the same keys are other ids, with its tenant's key on their lines (as root). After
 * the restart the other tenant comes first, and every line is as before the restart: a tenant
 * and its chunks are named by the tenant's key, not by the order tenants came in (until
 * 2026-12-07 the first tenant of a run was t=0 and its ids hashed 0: nobody took root's name).
 * A line cut short (as by a kill -9) is ended before the next start's comment. */
static void test_record_restart_and_tenants(void **state)
{
	(void)state;
	struct kvt_test_daemon d;
	char dir[256], path[300], set[320], text[1 << 16], *line[16];
	kvt_test_tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/t.trace", dir);
	snprintf(set, sizeof(set), "trace.file=%s", path);
	const char *sets[] = {set, NULL};
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	struct engine a;
	engine_open(&a, &d, 3);
	assert_int_equal(request(&a, 5), 0);
	engine_close(&a); /* its request is written when it goes */
	bool root = geteuid() == 0;
	if (root) {
		kvt_test_open_to_others(&d);
		other_tenant_request(&d);
	}
	assert_int_equal(kvt_test_daemon_stop(&d, SIGTERM), 0);
	FILE *f = fopen(path, "a"); /* a line a kill -9 cut short: the start's comment goes after */
	assert_non_null(f);
	fputs("17 42", f);
	fclose(f);
	assert_int_equal(chmod(d.dir, 0750), 0); /* a restart refuses a more open directory */
	assert_int_equal(kvt_test_daemon_restart(&d, sets), 0);
	if (root) { /* first, this time */
		kvt_test_open_to_others(&d);
		other_tenant_request(&d);
	}
	engine_open(&a, &d, 3);
	assert_int_equal(request(&a, 5), 0); /* host's chunks did not outlive the restart */
	engine_close(&a);
	assert_int_equal(kvt_test_daemon_stop(&d, SIGTERM), 0);

	assert_true(kvt_test_read_file(path, text, sizeof(text)) > 0);
	size_t comments = 0;
	for (const char *s = text; (s = strstr(s, "# kvtierd ")); s++)
		comments++;
	assert_int_equal(comments, 2); /* one per start */
	size_t n = lines_of(text, line, 16);
	assert_int_equal(n, root ? 5 : 3);
	assert_string_equal(line[root ? 2 : 1], "17 42"); /* ended, then the comment on its own */
	char *first = line[0], *last = line[n - 1];
	assert_int_equal(words(first), 6);
	assert_string_equal(strchr(first, ' '), strchr(last, ' ')); /* the same five ids */
	assert_true(strtoull(first, NULL, 10) <= strtoull(last, NULL, 10));
	if (root) {
		const char *other = line[1];
		assert_int_equal(strncmp(strchr(other, ' '), " t=65534 ", 9), 0);
		assert_int_equal(words(other), 7);
		/* after the restart, first this time: the same tenant key and ids */
		assert_string_equal(strchr(line[3], ' '), strchr(other, ' '));
		char ids[256];
		snprintf(ids, sizeof(ids), "%s", strchr(strchr(other, ' ') + 1, ' '));
		assert_string_not_equal(ids, strchr(first, ' '));
		for (char *id = strtok(ids, " "); id; id = strtok(NULL, " "))
			assert_null(strstr(strchr(first, ' '), id)); /* no id shared */
	}
	kvt_test_daemon_destroy(&d);
	kvt_test_rmtree(dir);
}

/* Paths refused, the recording as it was; a start with a relative path does not happen. */
static void test_record_refusals(void **state)
{
	(void)state;
	struct kvt_test_daemon d;
	char path[400], out[4096];
	start_recording(&d, NULL, "kept.trace", path);
	assert_int_not_equal(config(&d, "set trace.file relative.trace", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "not an absolute path"));
	assert_int_not_equal(
	    config(&d, "set trace.file /nonexistent-kvtier/x.trace", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "No such file or directory"));
	assert_int_equal(config(&d, "get trace.file", out, sizeof(out)), 0);
	assert_non_null(strstr(out, path)); /* still the first one */
	struct engine a;
	engine_open(&a, &d, 5);
	assert_int_equal(request(&a, 3), 0);
	assert_int_equal(kvt_test_stat(&d, "trace_recording"), 1);
	engine_close(&a); /* its request is written as the connection goes */
	assert_int_equal(kvt_test_stat_wait(&d, "trace_requests", 1, 0), 1);
	kvt_test_daemon_destroy(&d);

	const char *bad[] = {"trace.file=relative.trace", NULL};
	assert_true(kvt_test_daemon_start(&d, bad) != 0);
	kvt_test_daemon_destroy(&d);
}

/* trace.max_bytes, then a device that is full: the recording ends, every line written is whole,
 * stats say why, the daemon serves on, and setting the file again starts it again. */
static void test_record_limits(void **state)
{
	(void)state;
	struct kvt_test_daemon d;
	char path[400], cmd[512], out[4096], text[8192], *line[256];
	const char *sets[] = {"trace.max_bytes=4096", NULL};
	start_recording(&d, sets, "small.trace", path);
	struct engine a;
	engine_open(&a, &d, 7);
	for (int r = 0; r < 40; r++) /* ~20 ids of ~20 digits a line: past 4 KiB */
		request(&a, 20);
	assert_int_equal(kvt_test_stat(&d, "trace_recording"), 0);
	assert_int_equal(kvt_test_stat(&d, "trace_stopped"), EFBIG);
	assert_int_equal(kvt_test_cli(&d, "stats", out, sizeof(out)), 0);
	const char *said = strstr(out, "trace.file: stopped");
	assert_non_null(said);
	print_message("%.*s\n", (int)strcspn(said, "\n"), said);
	assert_non_null(strstr(said, strerror(EFBIG)));
	long len = kvt_test_read_file(path, text, sizeof(text));
	assert_true(len > 2048 && len <= 4096);
	assert_int_equal(text[len - 1], '\n');
	size_t n = lines_of(text, line, 256);
	assert_true(n >= 2);
	assert_int_equal(kvt_test_stat(&d, "trace_requests"), (long long)n); /* what it wrote */
	for (size_t i = 0; i < n; i++)
		assert_int_equal(words(line[i]), 21);
	assert_int_equal(request(&a, 20), 20); /* served on */
	/* a file already past trace.max_bytes is refused; a new one starts again */
	char full[420];
	snprintf(full, sizeof(full), "%s/full.trace", d.dir);
	FILE *f = fopen(full, "w");
	assert_non_null(f);
	for (int i = 0; i < 5000; i++)
		fputc('#', f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "set trace.file %s", full);
	assert_int_not_equal(config(&d, cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "trace.max_bytes"));
	assert_int_equal(kvt_test_stat(&d, "trace_stopped"), EFBIG); /* as it was */
	snprintf(cmd, sizeof(cmd), "set trace.file %s/again.trace", d.dir);
	assert_int_equal(config(&d, cmd, out, sizeof(out)), 0);
	assert_int_equal(kvt_test_stat(&d, "trace_recording"), 1);
	assert_int_equal(kvt_test_stat(&d, "trace_stopped"), 0);

	/* a full device: the first write fails (at the 100 ms tick at the latest) */
	assert_int_equal(config(&d, "set trace.file /dev/full", out, sizeof(out)), 0);
	assert_int_equal(request(&a, 20), 20);
	assert_int_equal(kvt_test_stat_wait(&d, "trace_stopped", ENOSPC, 0), ENOSPC);
	assert_int_equal(kvt_test_stat(&d, "trace_recording"), 0);
	assert_int_equal(request(&a, 20), 20);
	assert_int_equal(config(&d, "set trace.file none", out, sizeof(out)), 0);
	engine_close(&a);
	assert_int_equal(kvt_test_daemon_stop(&d, SIGTERM), 0); /* exits 0 */
	kvt_test_daemon_destroy(&d);
}

/* `kvtier record FILE [SECONDS]` started from dir (FILE relative to it), its output to out;
 * seconds NULL: until Ctrl-C. @return : its pid. */
static pid_t record_cli(const struct kvt_test_daemon *d, const char *dir, const char *file,
                        const char *seconds, const char *out)
{
	char bin[512];
	kvt_test_bin("kvtier", bin, sizeof(bin));
	pid_t pid = fork();
	if (pid == 0) {
		if (chdir(dir) || !freopen(out, "w", stdout) || !freopen(out, "a", stderr))
			_exit(99);
		execl(bin, bin, "--socket", d->sock, "record", file, seconds, (char *)NULL);
		_exit(98);
	}
	assert_true(pid > 0);
	return pid;
}

/* kvtier record: a relative file made absolute from the shell's directory, the requests of the
 * seconds it ran, refused while a recording runs, ended by Ctrl-C as well as on time. */
static void test_record_cli(void **state)
{
	(void)state;
	struct kvt_test_daemon d;
	char out[400], path[400], text[4096];
	assert_int_equal(kvt_test_daemon_start(&d, NULL), 0);
	snprintf(out, sizeof(out), "%s/record.out", d.dir);
	pid_t pid = record_cli(&d, d.dir, "cli.trace", "1.5", out);
	assert_int_equal(kvt_test_stat_wait(&d, "trace_recording", 1, 0), 1);
	struct engine a;
	engine_open(&a, &d, 11);
	for (int r = 0; r < 5; r++)
		request(&a, 3 + (size_t)r); /* five requests, each one chunk longer */
	char other[420];
	snprintf(other, sizeof(other), "%s/other.out", d.dir);
	assert_int_equal(exit_of(record_cli(&d, d.dir, "other.trace", "1", other)), 1);
	assert_true(kvt_test_read_file(other, text, sizeof(text)) > 0);
	assert_non_null(strstr(text, "recording already"));
	engine_close(&a);
	assert_int_equal(exit_of(pid), 0);
	assert_true(kvt_test_read_file(out, text, sizeof(text)) > 0);
	print_message("%s", text);
	snprintf(path, sizeof(path), "%s/cli.trace", d.dir);
	char said[480];
	snprintf(said, sizeof(said), "5 requests written to %s", path);
	assert_non_null(strstr(text, said));
	/* the sizes to replay at: host's capacity in chunks of the size it holds (64 MiB of 8 KiB
	 * records: 4 KiB chunks and their headers), halved and doubled */
	long long cap = kvt_test_tier_stat(&d, "host", "capacity_bytes"),
	          used = kvt_test_tier_stat(&d, "host", "used_bytes"),
	          held = kvt_test_tier_stat(&d, "host", "chunks");
	assert_true(cap > 0 && used > 0 && held == 7);
	long long full = cap * held / used;
	snprintf(said, sizeof(said), "--capacity %lld,%lld,%lld --policy", full / 2, full,
	         full * 2);
	assert_non_null(strstr(text, said));
	snprintf(said, sizeof(said), "(host holds %lld chunks now, about %lld when full", held,
	         full);
	assert_non_null(strstr(text, said));
	snprintf(said, sizeof(said), "kvtier sim --daemon --trace %s\n", path);
	assert_non_null(strstr(text, said));
	assert_int_equal(kvt_test_stat(&d, "trace_recording"), 0);
	struct kvt_trace t;
	assert_int_equal(kvt_trace_load(path, &t), 0);
	assert_int_equal(t.n_req, 5);
	for (size_t q = 0; q < 5; q++)
		assert_int_equal(t.req_off[q + 1] - t.req_off[q], 3 + q);
	kvt_trace_free(&t);

	/* a file kvtierd cannot open: its words, exit 1, nothing recording */
	assert_int_equal(exit_of(record_cli(&d, d.dir, "/nonexistent-kvtier/x", "1", other)), 1);
	assert_true(kvt_test_read_file(other, text, sizeof(text)) > 0);
	assert_non_null(strstr(text, "kvtier record: trace.file: /nonexistent-kvtier/x: No such "
	                             "file or directory"));
	assert_int_equal(kvt_test_stat(&d, "trace_recording"), 0);
	pid = record_cli(&d, d.dir, "/dev/null", NULL, out); /* until Ctrl-C */
	assert_int_equal(kvt_test_stat_wait(&d, "trace_recording", 1, 0), 1);
	kill(pid, SIGINT);
	assert_int_equal(exit_of(pid), 0);
	assert_int_equal(kvt_test_stat(&d, "trace_recording"), 0);
	kvt_test_daemon_destroy(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_record_requests),
	    cmocka_unit_test(test_record_batches),
	    cmocka_unit_test(test_record_cut_put),
	    cmocka_unit_test(test_record_restart_and_tenants),
	    cmocka_unit_test(test_record_refusals),
	    cmocka_unit_test(test_record_limits),
	    cmocka_unit_test(test_record_cli),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
