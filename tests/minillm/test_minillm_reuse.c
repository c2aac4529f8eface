/* test_minillm_reuse.c -- engines in separate processes share prefix KV through kvtierd:
 * bit-identical output with and without reuse, partial prefix hits, prompts shorter than a
 * chunk, and namespaces (tokens_per_chunk, dtype, model name) that must never hit. The
 * daemon's recording of such engines (trace.file) replays through the simulator to the chunks
 * they reused. */
#include "testlib.h"
#include "mllm_util.h"
#include "sim.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>
#include "kvtier.h"
#include <stdlib.h>
#include <string.h>

static struct kvt_test_daemon daemon_;
static const char *sock_ = daemon_.sock; /* the daemon run() attaches to */
static struct kvt_llm_model *model;
static struct kvt_llm_tokenizer *tok;
static int P[128], NP; /* the shared prompt's ids */
static char out[1 << 16], err[1 << 14];

static const char *text =
    "Echoes of vectors unfold, a gentle hum of precision, as I sense the nodes, a gentle hum "
    "of precision";

static int setup(void **state)
{
	mllm_open(&model, &tok);
	assert_int_equal(kvt_llm_encode(tok, text, 1, P, 128, &NP), 0);
	assert_true(NP > 32 && NP < 48); /* two full chunks of 16 and a partial one */
	int rc = kvt_test_daemon_start(&daemon_, NULL);
	if (rc) {
		fprintf(stderr, "kvtierd did not start: %d\n", rc);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	kvt_test_daemon_destroy(&daemon_);
	kvt_llm_tokenizer_close(tok);
	kvt_llm_model_close(model);
	return 0;
}

static char *ids_arg(const int *ids, int n)
{
	static char buf[2048];
	size_t off = 0;
	for (int i = 0; i < n; i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%d", i ? " " : "", ids[i]);
	return buf;
}

struct run {
	long prompt, reused, put;
	char ids[1024], top5[512], hash[64], kverr[128];
};

/* Runs minillm on ids with extra args; kvtier attached when kvtier. */
static void run(const int *ids, int n, int kvtier, const char *extra, struct run *r)
{
	char args[4096];
	snprintf(args, sizeof(args),
	         "--json --steps 24 --temperature 0.7 --seed 3 %s%s %s "
	         "--prompt-ids \"%s\"",
	         kvtier ? "--kvtier=" : "", kvtier ? sock_ : "", extra ? extra : "",
	         ids_arg(ids, n));
	int st = mllm_exec(args, out, sizeof(out), err, sizeof(err));
	if (st) {
		fprintf(stderr, "minillm exited %d: %s\n", st, err);
		fail();
	}
	r->prompt = mllm_json_int(out, 0, "prompt_tokens");
	r->reused = mllm_json_int(out, 0, "reused_tokens");
	r->put = mllm_json_int(out, 0, "put_chunks");
	mllm_json_raw(out, 0, "output_ids", r->ids, sizeof(r->ids));
	mllm_json_raw(out, 0, "top5", r->top5, sizeof(r->top5));
	mllm_json_raw(out, 0, "logits_hash", r->hash, sizeof(r->hash));
	mllm_json_raw(out, 0, "kvtier_error", r->kverr, sizeof(r->kverr));
	assert_int_equal(r->prompt, n);
	assert_true(r->ids[0] == '[' && strlen(r->hash) == 18);
	assert_string_equal(r->kverr, ""); /* kvtier never failed */
}

static void same_output(const struct run *a, const struct run *b)
{
	assert_string_equal(a->ids, b->ids);
	assert_string_equal(a->top5, b->top5);
	assert_string_equal(a->hash, b->hash); /* every logit, bit for bit */
}

static void test_minillm_reuse_cross_process(void **state)
{
	static const char *modes[] = {"", "--kv-dtype f32"};
	for (int m = 0; m < 2; m++) {
		struct run base, a, b;
		run(P, NP, 0, modes[m], &base);
		assert_int_equal(base.reused, 0);
		run(P, NP, 1, modes[m], &a); /* process A computes and puts chunks 0 and 1 */
		assert_int_equal(a.reused, 0);
		assert_int_equal(a.put, 2);
		same_output(&base, &a);
		run(P, NP, 1, modes[m], &b); /* process B reuses them */
		assert_int_equal(b.reused, 32);
		assert_int_equal(b.put, 0);
		same_output(&base, &b);
	}
}

static void test_minillm_reuse_partial(void **state)
{
	int q[128];
	struct run base, r;
	/* shares 20 tokens with P: only chunk 0 matches */
	memcpy(q, P, 20 * sizeof(int));
	for (int i = 20; i < 44; i++)
		q[i] = 300 + i;
	run(q, 44, 0, NULL, &base);
	run(q, 44, 1, NULL, &r);
	assert_int_equal(r.reused, 16);
	assert_int_equal(r.put, 1); /* chunk 1 of q is new; chunk 0 was already stored */
	same_output(&base, &r);
	/* P extended: chunks 0 and 1 match, chunk 2 is computed and put */
	memcpy(q, P, (size_t)NP * sizeof(int));
	for (int i = NP; i < 60; i++)
		q[i] = 270 + i;
	run(q, 60, 0, NULL, &base);
	run(q, 60, 1, NULL, &r);
	assert_int_equal(r.reused, 32);
	assert_int_equal(r.put, 1);
	same_output(&base, &r);
	run(q, 60, 1, NULL, &r); /* and now three chunks are there */
	assert_int_equal(r.reused, 48);
	same_output(&base, &r);
	/* the first token differs: nothing matches though later tokens are equal */
	q[1] = q[1] == 300 ? 301 : 300;
	run(q, 60, 1, NULL, &r);
	assert_int_equal(r.reused, 0);
}

static void test_minillm_reuse_short_prompt(void **state)
{
	struct run base, r;
	run(P, 10, 0, NULL, &base);
	run(P, 10, 1, NULL, &r);
	assert_int_equal(r.reused, 0);
	assert_int_equal(r.put, 0);
	same_output(&base, &r);
	/* exactly one chunk: stored, but never reused -- its last token is recomputed */
	int q[16];
	for (int i = 0; i < 16; i++)
		q[i] = 400 + i;
	run(q, 16, 1, NULL, &r);
	assert_int_equal(r.put, 1);
	run(q, 16, 1, NULL, &r);
	assert_int_equal(r.reused, 0);
	run(q, 15, 1, NULL, &r);
	assert_int_equal(r.reused, 0);
}

static void test_minillm_reuse_namespace_mismatch(void **state)
{
	struct run r;
	run(P, NP, 1, NULL, &r); /* f16, 16 tokens per chunk: stored by now */
	assert_int_equal(r.reused, 32);
	run(P, NP, 1, "--tokens-per-chunk 8", &r);
	assert_int_equal(r.reused, 0);
	assert_int_equal(r.put, NP / 8);
	run(P, NP, 1, "--tokens-per-chunk 8", &r); /* its own namespace does hit */
	assert_int_equal(r.reused, (NP - 1) / 8 * 8);
	run(P, NP, 1, "--tokens-per-chunk 32", &r);
	assert_int_equal(r.reused, 0);
	run(P, NP, 1, "--model-name someone-else", &r);
	assert_int_equal(r.reused, 0);
	char args[256];
	snprintf(args, sizeof(args), "--kv-dtype f32 --model-name f32-only");
	run(P, NP, 1, args, &r); /* f32 under a fresh name: nothing an f16 engine put */
	assert_int_equal(r.reused, 0);
}

static void test_minillm_reuse_requests_file(void **state)
{
	char dir[256], path[300], args[1024];
	kvt_test_tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/req.jsonl", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "{\"prompt\": \"I dream of quiet rivers of light, of circuits that hum like "
	           "bees in the warm evening air\", \"steps\": 4}\n");
	fprintf(f, "{\"prompt\": \"I dream of quiet rivers of light, of circuits that hum like "
	           "bees in the warm evening air and more\"}\n");
	fprintf(f, "{\"prompt_ids\": [%s], \"steps\": 2}\n", "1, 300, 301");
	fclose(f);
	snprintf(args, sizeof(args), "--json --steps 3 --kvtier=%s --requests %s", daemon_.sock,
	         path);
	assert_int_equal(mllm_exec(args, out, sizeof(out), err, sizeof(err)), 0);
	assert_true(mllm_json_int(out, 0, "prompt_tokens") >= 17);
	assert_int_equal(mllm_json_int(out, 0, "reused_tokens"), 0);
	assert_true(mllm_json_int(out, 0, "put_chunks") >= 1);
	assert_true(mllm_json_int(out, 1, "reused_tokens") >= 16); /* same process, request 0 */
	assert_int_equal(mllm_json_int(out, 2, "prompt_tokens"), 3);
	char ids[64];
	mllm_json_raw(out, 1, "output_ids", ids, sizeof(ids));
	assert_int_equal(strchr(ids, ',') - ids > 0, 1);
	mllm_json_raw(out, 2, "output_ids", ids, sizeof(ids));
	assert_int_equal((int)(strchr(ids + 1, ',') != NULL) + (strchr(ids, ']') != NULL), 2);
	kvt_test_rmtree(dir);
}

/* A prompt of n ids (BOS first) that no other in this file shares. */
static void distinct_prompt(int *q, int n, int seed)
{
	q[0] = 1;
	for (int i = 1; i < n; i++)
		q[i] = 3 + (seed * 131 + i * 17) % 500;
}

/* kvtierd records three real engines (trace.file): A computes and puts a prompt's two chunks,
 * B reuses them, C reuses them and puts the two that extend them. The recording is one line per
 * engine, each what the engine asked for and stored, the same chunk the same id, and the
 * simulator's replay of it (as an engine drives kvtierd) serves the prefixes they reused. */
static void test_minillm_reuse_recorded(void **state)
{
	char dir[256], path[300], cmd[400], said[512];
	kvt_test_tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/engines.trace", dir);
	snprintf(cmd, sizeof(cmd), "config set trace.file %s", path);
	assert_int_equal(kvt_test_cli(&daemon_, cmd, said, sizeof(said)), 0);
	int a[64], c[64];
	distinct_prompt(a, 40, 91); /* two full chunks: 39 tokens are looked up, 40 put */
	memcpy(c, a, 40 * sizeof(int));
	for (int i = 40; i < 64; i++)
		c[i] = 3 + (i * 29) % 500; /* four: three looked up (two found), two put */
	struct run r;
	long reused = 0;
	run(a, 40, 1, NULL, &r);
	assert_int_equal(r.reused, 0);
	assert_int_equal(r.put, 2);
	run(a, 40, 1, NULL, &r);
	assert_int_equal(r.reused, 32);
	reused += r.reused;
	run(c, 64, 1, NULL, &r);
	assert_int_equal(r.reused, 32);
	assert_int_equal(r.put, 2);
	reused += r.reused;
	assert_int_equal(kvt_test_cli(&daemon_, "config set trace.file none", said, sizeof(said)),
	                 0);

	struct kvt_trace t;
	assert_int_equal(kvt_trace_load(path, &t), 0);
	static const uint64_t off[] = {0, 2, 4, 8};
	assert_int_equal(t.n_req, 3);
	assert_int_equal(t.n_blocks, 4);
	for (size_t q = 0; q <= 3; q++)
		assert_int_equal(t.req_off[q], off[q]);
	for (uint64_t i = 0; i < t.n_acc; i++) /* a0 a1, a0 a1, a0 a1 c2 c3 */
		assert_int_equal(t.blk[i], i < 6 ? i % 2 : i - 4);
	t.engine = true;
	struct kvt_sim_tier tier = {.name = "host", .policy = "lru", .capacity_blocks = 64};
	struct kvt_sim_result s;
	assert_int_equal(kvt_sim_run(&t, &tier, 1, &s), 0);
	assert_int_equal(s.prefix_hits, (uint64_t)reused / 16);
	kvt_trace_free(&t);
	kvt_test_rmtree(dir);
}

/* A --requests file in a scratch directory, written line by line, then run by one engine. */
struct reqs {
	char dir[256], path[300];
	FILE *f;
};

static void reqs_open(struct reqs *r)
{
	kvt_test_tmpdir(r->dir, sizeof(r->dir));
	snprintf(r->path, sizeof(r->path), "%s/req.jsonl", r->dir);
	r->f = fopen(r->path, "w");
	assert_non_null(r->f);
}

/* One line of one step; session NULL names none, keep_ms < 0 asks no keep. */
static void reqs_line(struct reqs *r, const int *q, int n, const char *session, bool end,
                      long keep_ms)
{
	fprintf(r->f, "{\"prompt_ids\": [");
	for (int i = 0; i < n; i++)
		fprintf(r->f, "%s%d", i ? ", " : "", q[i]);
	fprintf(r->f, "], \"steps\": 1");
	if (session)
		fprintf(r->f, ", \"session\": \"%s\"%s", session, end ? ", \"end\": true" : "");
	if (keep_ms >= 0)
		fprintf(r->f, ", \"keep_ms\": %ld", keep_ms);
	fprintf(r->f, "}\n");
}

/* Runs the file through one engine on sock (f32 KV), output in out; the directory goes. */
static void reqs_run(struct reqs *r, const char *sock, const char *extra)
{
	char args[1024];
	fclose(r->f);
	snprintf(args, sizeof(args), "--json --kv-dtype f32 %s --kvtier=%s --requests %s", extra,
	         sock, r->path);
	assert_int_equal(mllm_exec(args, out, sizeof(out), err, sizeof(err)), 0);
	kvt_test_rmtree(r->dir);
}

/* @return : how many of q's tokens a second engine on sock reuses. */
static long reused_elsewhere(const char *sock, const int *q, int n)
{
	struct run r;
	sock_ = sock;
	run(q, n, 1, "--kv-dtype f32 --steps 1", &r);
	sock_ = daemon_.sock;
	return r.reused;
}

/* A daemon with a 1 MiB lru host tier and nothing below (28 chunks of 32 KiB, f32); keep_pct is
 * the "host.keep_pct=N" setting. */
static void small_host_start(struct kvt_test_daemon *d, const char *keep_pct)
{
	const char *sets[] = {"host.bytes=1MiB", "tiers.order=host", "host.policy=lru", keep_pct,
	                      NULL};
	assert_int_equal(kvt_test_daemon_start(d, sets), 0);
}

/*
 * One engine, five conversations on the small host that holds fewer than their 32 chunks: a
 * (7), b (7), then a again, ending it ("end": true) or not, then c (7), d (7), e (4). Without
 * the end, b is the least recently used and loses chunks; with it, a's chunks go first
 * (kvt_done) and b keeps all 7. @return : b's tokens reused by a second engine.
 */
static long session_end_keeps_other(bool end, long *done_chunks, long long *hints)
{
	struct kvt_test_daemon d;
	small_host_start(&d, "host.keep_pct=25");
	int q[5][113];
	for (int s = 0; s < 5; s++)
		distinct_prompt(q[s], 113, s + 1);
	struct reqs r;
	reqs_open(&r);
	reqs_line(&r, q[0], 113, "a", false, -1);
	reqs_line(&r, q[1], 113, "b", false, -1);
	reqs_line(&r, q[0], 113, "a", end, -1);
	reqs_line(&r, q[2], 113, "c", false, -1);
	reqs_line(&r, q[3], 113, "d", false, -1);
	reqs_line(&r, q[4], 65, "e", false, -1);
	reqs_run(&r, d.sock, "");
	assert_int_equal(mllm_json_int(out, 0, "put_chunks"), 7);
	assert_int_equal(mllm_json_int(out, 2, "reused_tokens"), 112); /* a's own, again */
	*done_chunks = mllm_json_int(out, 2, "done_chunks");
	assert_int_equal(mllm_json_int(out, 3, "done_chunks"), 0);
	assert_int_equal(mllm_json_int(out, 5, "put_chunks"), 4);
	*hints = kvt_test_stat_wait(&d, "done_hints", *done_chunks, 0);
	long reused = reused_elsewhere(d.sock, q[1], 113);
	kvt_test_daemon_destroy(&d);
	return reused;
}

static void test_minillm_session_end(void **state)
{
	long done, plain, ended;
	long long hints;
	plain = session_end_keeps_other(false, &done, &hints);
	assert_int_equal(done, 0);
	assert_int_equal(hints, 0);
	ended = session_end_keeps_other(true, &done, &hints);
	fprintf(stderr, "b's tokens reused: %ld without a's end, %ld with it (%ld chunks named)\n",
	        plain, ended, done);
	assert_int_equal(done, 7);
	assert_int_equal(hints, 7);
	assert_true(plain < 112); /* the tier is small enough to matter */
	assert_int_equal(ended, 112);
}

/*
 * One engine, five prompts on the small host with host.keep_pct = 50: b (7 chunks), kept for a
 * minute ("keep_ms") or not, then c, d, e (7 each) and f (4). Without the keep b is the least
 * recently used and loses chunks to the others; with it b stays whole (kvt_keep).
 * @return : b's tokens reused by a second engine; *kept: b's "kept_chunks".
 */
static long keep_keeps_prefix(bool keep, long *kept, long long *kept_stat)
{
	struct kvt_test_daemon d;
	small_host_start(&d, "host.keep_pct=50");
	int q[5][113];
	for (int s = 0; s < 5; s++)
		distinct_prompt(q[s], 113, s + 11);
	struct reqs r;
	reqs_open(&r);
	reqs_line(&r, q[0], 113, NULL, false, keep ? 60000 : -1);
	for (int s = 1; s < 4; s++)
		reqs_line(&r, q[s], 113, NULL, false, -1);
	reqs_line(&r, q[4], 65, NULL, false, -1);
	reqs_run(&r, d.sock, "");
	assert_int_equal(mllm_json_int(out, 0, "put_chunks"), 7);
	*kept = mllm_json_int(out, 0, "kept_chunks");
	for (int i = 1; i < 5; i++)
		assert_int_equal(mllm_json_int(out, i, "kept_chunks"), 0);
	assert_int_equal(mllm_json_int(out, 4, "put_chunks"), 4);
	*kept_stat = kvt_test_stat(&d, "kept_chunks");
	long reused = reused_elsewhere(d.sock, q[0], 113);
	kvt_test_daemon_destroy(&d);
	return reused;
}

static void test_minillm_keep(void **state)
{
	long kept, plain, with_keep;
	long long kept_stat;
	plain = keep_keeps_prefix(false, &kept, &kept_stat);
	assert_int_equal(kept, 0);
	assert_int_equal(kept_stat, 0);
	with_keep = keep_keeps_prefix(true, &kept, &kept_stat);
	fprintf(stderr, "b's tokens reused: %ld without its keep, %ld with it (%ld chunks kept)\n",
	        plain, with_keep, kept);
	assert_int_equal(kept, 7);
	assert_int_equal(kept_stat, 7);
	assert_true(plain < 112); /* the tier is small enough to matter */
	assert_int_equal(with_keep, 112);
}

/*
 * --keep-ms keeps every request's chunks, up to host.keep_pct: on the small host at 25 %
 * (256 KiB), the first prompt's 7 chunks (224 KiB) fit, the second's find room for at most one
 * more, and a keep that fits none is an error the request reports without failing.
 */
static void test_minillm_keep_cap(void **state)
{
	struct kvt_test_daemon d;
	small_host_start(&d, "host.keep_pct=25");
	int q[3][113];
	struct reqs r;
	reqs_open(&r);
	for (int s = 0; s < 3; s++) {
		distinct_prompt(q[s], 113, s + 21);
		reqs_line(&r, q[s], 113, NULL, false, -1);
	}
	reqs_run(&r, d.sock, "--keep-ms 60000");
	long k0 = mllm_json_int(out, 0, "kept_chunks"), k1 = mllm_json_int(out, 1, "kept_chunks"),
	     k2 = mllm_json_int(out, 2, "kept_chunks");
	fprintf(stderr, "kept per request: %ld %ld %ld\n", k0, k1, k2);
	assert_int_equal(k0, 7);
	assert_true(k1 <= 1);
	assert_int_equal(k2, 0);
	char e[64];
	assert_non_null(mllm_json_raw(out, 2, "kvtier_error", e, sizeof(e)));
	assert_non_null(strstr(e, "space"));
	assert_int_equal(kvt_test_stat(&d, "kept_chunks"), k0 + k1);
	assert_true(kvt_test_stat(&d, "keep_refused") >= 1);
	kvt_test_daemon_destroy(&d);
}

/* Fills the host tier with another model's chunks, so every earlier chunk leaves host. */
static void flush_host(const char *sock)
{
	kvt_client_t *c;
	assert_int_equal(kvt_connect(sock, &c), 0);
	kvt_model_t m = {.name = "ballast",
	                 .dtype = KVT_DTYPE_F16,
	                 .n_layers = 8,
	                 .n_kv_heads = 8,
	                 .head_dim = 128,
	                 .tokens_per_chunk = 16}; /* 512 KiB chunks */
	kvt_id_t ns, keys[8];
	uint32_t toks[8 * 16];
	for (int i = 0; i < 8 * 16; i++)
		toks[i] = (uint32_t)i;
	assert_int_equal(kvt_namespace(c, &m, &ns), 0);
	kvt_chunk_keys(ns, toks, 8 * 16, 16, keys, 8);
	size_t cb = kvt_chunk_bytes(&m);
	void *buf = calloc(1, cb);
	for (int i = 0; i < 8; i++) {
		const void *ch[1] = {buf};
		int rc;
		while ((rc = kvt_put(c, ns, i ? &keys[i - 1] : NULL, &keys[i], 1, ch, cb)) ==
		       -EAGAIN)
			usleep(10000);
		assert_int_equal(rc, 1);
	}
	free(buf);
	kvt_close(c);
}

static void wait_demoted(struct kvt_test_daemon *d, long long want)
{
	for (int i = 0; i < 500 && kvt_test_stat(d, "demoted") < want; i++)
		usleep(10000);
	assert_true(kvt_test_stat(d, "demoted") >= want);
}

/* Reuse from the nvme tier (after eviction from host) and after daemon restarts. */
static void test_minillm_reuse_after_demotion_and_restart(void **state)
{
	const char *sets[] = {"host.bytes=2MiB", "tiers.order=host,nvme", "nvme.bytes=64MiB", NULL};
	struct kvt_test_daemon d;
	assert_int_equal(kvt_test_daemon_start(&d, sets), 0);
	sock_ = d.sock;
	struct run base, a, b;
	run(P, NP, 0, "", &base);
	run(P, NP, 1, "", &a);
	assert_int_equal(a.put, 2);
	wait_demoted(&d, 2);
	flush_host(d.sock);
	assert_true(kvt_test_stat(&d, "evictions") >= 2);
	run(P, NP, 1, "", &b); /* promoted back from nvme */
	assert_int_equal(b.reused, 32);
	same_output(&base, &b);
	assert_true(kvt_test_stat(&d, "promoted") >= 2);
	for (int sig = 0; sig < 2; sig++) { /* SIGTERM, then kill -9 */
		kvt_test_daemon_stop(&d, sig ? SIGKILL : SIGTERM);
		assert_int_equal(kvt_test_daemon_restart(&d, sets), 0);
		run(P, NP, 1, "", &b);
		assert_int_equal(b.reused, 32);
		same_output(&base, &b);
	}
	sock_ = daemon_.sock;
	kvt_test_daemon_destroy(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_minillm_reuse_cross_process),
	    cmocka_unit_test(test_minillm_reuse_partial),
	    cmocka_unit_test(test_minillm_reuse_short_prompt),
	    cmocka_unit_test(test_minillm_reuse_namespace_mismatch),
	    cmocka_unit_test(test_minillm_reuse_requests_file),
	    cmocka_unit_test(test_minillm_reuse_recorded),
	    cmocka_unit_test(test_minillm_session_end),
	    cmocka_unit_test(test_minillm_keep),
	    cmocka_unit_test(test_minillm_keep_cap),
	    cmocka_unit_test(test_minillm_reuse_after_demotion_and_restart),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
