/*
 * bench_trace.c -- kvtier bench trace: a request trace replayed through a real kvtierd, as an
 * engine would drive it, beside `kvtier sim`'s replay of the same requests.
 *
 * Each request of the trace (Mooncake JSONL or the simulator's native format) is one engine
 * turn: kvt_get of the request's chunks (the leading hits are copied out, as an engine reads its
 * cached prefix), then kvt_put of the rest from the first miss, under its parent, as an engine
 * stores what it computed. A trace block is one chunk of --chunk-kib; the host tier holds
 * exactly --capacity chunks (host.bytes is that many records) and there is no lower tier, so the
 * daemon's policy decides every hit. --rocksdb M[:P] puts a rocksdb tier of M chunks below host
 * (rocksdb.bytes that many records, rocksdb.policy P, lru unless named; demote.wait_ms at 60 s,
 * so that a put waits for its demotions rather than end short), --nvme M[:P] the nvme log
 * instead (nvme.bytes that many 4 KiB-padded records, fifo unless named), and the simulator replays
 * the same two tiers; the chunks promoted from it are reported beside the simulator's, with the
 * puts that waited for demotions. For each --policy the daemon is started afresh with
 * host.policy set, and reported are:
 *
 *  - the prefix hit ratio the engine got (chunks kvt_get returned / chunks asked for), beside the
 *    prefix hit ratio of kvt_sim_run() (tools/sim) with the same policy and capacity: the
 *    simulator runs the daemon's policy code, so the two should agree, and where they differ the
 *    daemon's wiring (depths, parents, what it tells the policy) is what differs;
 *  - the time per request (p50, p99, past the first fill of the tier's memory, whose p99 is
 *    given apart: warm_from()) and the put rate (the bytes handed to kvt_put over the
 *    time it took; a put that ends early stores fewer of them), beside memcpy of the same bytes
 *    in the same run (the baseline), and the first policy's row as the baseline of the others;
 *  - the daemon's evictions, the keys its own-curve worker replayed (curvework.c) beside
 *    those the loop thread had to (a drain when the queue was full) by the end of the run, and
 *    what the own curve's miniature simulations hold then (the stats' curve_bytes).
 *
 * --prefill-us N has the engine compute each chunk it missed in N us, slept between its get and
 * its put (in the bench's one thread: with several engines the others wait too), and left out
 * of the request times: replayed flat out, puts outrun the tier below and host's copies queue
 * for demotion by the hundred, which a real engine's prefill gives the disk time to write.
 *
 * With --clients K, K engines share the daemon, each its own connection making one request at
 * a time, and they take turns message by message: one engine's kvt_get or kvt_put, then the
 * next engine's, so other engines' messages come between a request's read and its put (where
 * its prefill would run). The simulator replays the same order (kvt_trace.streams). The time
 * per request is then its own two calls.
 *
 * usage: kvtier-bench-trace [--trace FILE] [--capacity N (4096)] [--chunk-kib K (64)]
 *                           [--requests R (all)] [--policy P[,P...] (lru,conv)] [--check T[,U]]
 *                           [--clients K (1)] [--rounds N (1)] [--record FILE]
 *                           [--rocksdb M[:P] | --nvme M[:P]] [--prefill-us N]
 * A policy may carry parameters, P:k=v[:k=v...] (conv:strict=0): host.policy_params in the
 * daemon, set_param in the simulator.
 * --rounds N replays the policies N times, in turn (lru, conv, lru, conv, ...), so that a
 * shared machine's slow minutes fall on each alike, and ends with each policy's median and
 * range over the rounds of its p50, p99 and run time against the first policy's in the same
 * round: the comparison docs/policies.md makes by hand.
 * --check T exits 1 when a policy's daemon and simulator prefix hit ratios differ by more than
 * T (the test suite runs it so).
 * --record FILE (an absolute path) has each daemon record its requests there (trace.file, begun
 * anew for each policy) and then compares the recording with the requests sent -- the same
 * requests in the same order, up to the names of their chunks (with several engines, in the
 * order they ended: the same requests' lengths) -- and replays it through the
 * simulator: the prefix hit ratio an operator would get from `kvtier sim --engine` on what
 * kvtierd recorded; and, before the daemon stops, replays it through `kvtier sim --daemon`,
 * which reads the tiers, policies and chunk size from that daemon as an operator's replay would.
 * With --check T, a recording that is not the requests sent, whose replay is more than T from
 * the daemon's, or whose two replays differ at all (--daemon read the layout wrong), fails too;
 * --check T,U allows the replay U instead (with several engines the recording's lines come as
 * requests ended, and its replay interleaves them in that order, not quite as the daemon saw them).
 */
#include "bench_util.h"
#include "core/keys.h"
#include "core/tenants.h"
#include "ipc/client/simple.h"
#include "ipc/proto.h"
#include "sim.h"
#include "sim_int.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_POL 16

struct args {
	const char *trace;
	size_t capacity, chunk, requests, clients, rounds;
	char *pols[MAX_POL];
	size_t n_pols;
	size_t prefill_us;      /* --prefill-us N: the engine computes a missed chunk in N us */
	double check;           /* < 0: no check */
	double check_rec;       /* --check T,U: U, the recording's replay against the daemon */
	const char *record;     /* --record: each daemon records its requests here (trace.file) */
	size_t lower;           /* --rocksdb / --nvme N: a tier of N chunks below host (0: none) */
	const char *lower_name; /* "rocksdb" or "nvme" */
	const char *lower_pol;  /* its policy: P of M[:P], else lru (rocksdb) or fifo (nvme) */
};

struct row {
	int rec_same;   /* --record: 1 when the recording is the requests sent (same_requests) */
	double rec_phr; /* ... and kvtier sim --engine's prefix hit ratio on the recording */
	double rec_daemon_phr; /* ... and kvtier sim --daemon's, the layout read from the daemon */
	double daemon_phr, sim_phr, p50_us, p99_us, cold_p99_us, put_gbs, memcpy_gbs, total_s;
	long long evictions, curve_worker, curve_loop, curve_bytes;
	long long promoted, sim_promoted; /* --rocksdb, --nvme: chunks brought up from it */
	long long eagain, parked;         /* puts that waited for demotions: too long, at all */
};

/* Block blk's key: 128 bits that look like an engine's chained hash. The daemon shows its
 * policy a hash of the chunk's id (kvt__chunk_id of the tenant's key, the bench's uid here, the
 * namespace and this key),
 * and the simulator's replay is given the same ids (replay()), as a recording is, so hashed
 * structures -- conv's history, wtinylfu's sketch, hindsight's table -- see the same hashes in
 * the daemon and in both replays. */
static kvt_id_t key_of(uint32_t blk)
{
	kvt_id_t k = {
	    {kvt_splitmix64(blk ^ 0x6b76746965726b31ULL), kvt_splitmix64(blk ^ 0x6b7674696572ULL)}};
	return k;
}

/* memcpy of bytes from src (chunk bytes, as the puts copy it) into a ring as large as the
 * host tier (64 MiB at least, past the caches), GB/s: the put's baseline. */
static double memcpy_gbs(const void *src, size_t chunk, size_t capacity, uint64_t bytes)
{
	size_t slots = KVT_MAX(capacity, (size_t)(64 << 20) / chunk);
	uint8_t *dst = prefaulted(chunk * slots);
	double t0 = now_s();
	for (uint64_t done = 0, i = 0; done < bytes; done += chunk, i++)
		memcpy(dst + (i % slots) * chunk, src, chunk);
	double s = now_s() - t0;
	munmap(dst, chunk * slots);
	return s > 0 ? (double)bytes / s / 1e9 : 0;
}

/* One engine: its connection, the request it is making (SIZE_MAX: none), its leading hits once
 * read, and the time its calls for the request took. */
struct engine {
	kvt_client_t *c;
	size_t q;
	int h;
	bool put; /* its read is done: its put is next */
	double busy_s;
};

/* The buffers the engines share (one thread makes every call), and what they did in all. */
struct io {
	kvt_id_t *keys;
	void **dst;
	const void **src;
	size_t chunk;
	kvt_id_t ns;
	size_t prefill_us; /* per chunk put: the engine's prefill, slept before its put */
	uint64_t asked, got, put_bytes;
	double put_s;
};

/* Engine e's turn: the read of its request's leading hits, then (now, or on its next turn when
 * yield) the put of the rest from the first miss. @return : true when the request is done. */
static bool engine_turn(const struct kvt_trace *t, struct io *io, struct engine *e, bool yield)
{
	size_t n = (size_t)(t->req_off[e->q + 1] - t->req_off[e->q]);
	for (size_t i = 0; i < n; i++)
		io->keys[i] = key_of(t->blk[t->req_off[e->q] + i]);
	if (!e->put) {
		double t0 = now_s();
		e->h = kvt_get(e->c, io->ns, io->keys, n, io->dst, io->chunk);
		if (e->h < 0)
			die("get", e->h);
		e->busy_s = now_s() - t0;
		io->asked += n;
		io->got += (uint64_t)e->h;
		e->put = true;
		if (e->h == (int)n || yield)
			return e->h == (int)n;
	}
	if (io->prefill_us && n > (size_t)e->h) { /* the engine computes what it missed */
		uint64_t ns = (uint64_t)io->prefill_us * 1000u * (n - (size_t)e->h);
		struct timespec d = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
		while (nanosleep(&d, &d) && errno == EINTR)
			;
	}
	double t1 = now_s();
	for (int rc;;) { /* a short count is a normal answer: the rest is not cached */
		size_t h = (size_t)e->h;
		rc = kvt_put(e->c, io->ns, h ? &io->keys[h - 1] : NULL, &io->keys[h], n - h,
		             io->src, io->chunk);
		if (rc == -EAGAIN) {
			usleep(100);
			continue;
		}
		if (rc < 0)
			die("put", rc);
		break;
	}
	double s = now_s() - t1;
	e->busy_s += s;
	io->put_s += s;
	io->put_bytes += (uint64_t)(n - (size_t)e->h) * io->chunk;
	return true;
}

/* The first request that starts after the first a->capacity chunk reads: the requests before
 * it touch the host tier's memory for the first time, and its page faults (~200 us a 64 KiB
 * chunk on the development VM) made them the p99 of every run. */
static size_t warm_from(const struct kvt_trace *t, const struct args *a)
{
	size_t q = 0;
	while (q < a->requests && t->req_off[q] < a->capacity)
		q++;
	return q;
}

/* Whether recording rec holds the first n requests of t with every chunk asked for: in order
 * (both number their blocks in order of first appearance, so the same requests give the same
 * numbers), or, with several engines, whose requests end in another order than they began, as
 * many requests of the same lengths over as many distinct blocks. */
static bool same_requests(const struct kvt_trace *rec, const struct kvt_trace *t, size_t n,
                          bool in_order)
{
	if (rec->n_req != n || rec->req_off[n] != t->req_off[n])
		return false;
	if (!in_order) {
		size_t max = 0, *count;
		for (size_t q = 0; q < n; q++)
			max = KVT_MAX(max, (size_t)(t->req_off[q + 1] - t->req_off[q]));
		if (!(count = calloc(max + 1, sizeof(*count))))
			die("calloc", -ENOMEM);
		bool same = true;
		for (size_t q = 0; q < n; q++)
			count[t->req_off[q + 1] - t->req_off[q]]++;
		for (size_t q = 0; q < n && same; q++) {
			uint64_t len = rec->req_off[q + 1] - rec->req_off[q];
			same = len <= max && count[len]-- > 0;
		}
		free(count);
		uint32_t blocks = 0;
		for (uint64_t i = 0; i < t->req_off[n]; i++)
			blocks = KVT_MAX(blocks, t->blk[i] + 1);
		return same && rec->n_blocks == blocks;
	}
	for (size_t q = 0; q <= n; q++)
		if (rec->req_off[q] != t->req_off[q])
			return false;
	return !memcmp(rec->blk, t->blk, t->req_off[n] * sizeof(*t->blk));
}

/* --record: the daemon's recording, compared with the requests it was sent and replayed by
 * kvtier sim --engine at the same tier. */
static void replay_recording(const struct args *a, const struct kvt_trace *t,
                             const struct kvt_sim_tier *tier, size_t n_tiers, struct row *r)
{
	struct kvt_trace rec;
	int rc = kvt_trace_load(a->record, &rec);
	if (rc)
		die(a->record, rc);
	r->rec_same = same_requests(&rec, t, a->requests, a->clients == 1);
	rec.engine = true;
	rec.streams = a->clients;
	struct kvt_sim_result s;
	if ((rc = kvt_sim_run(&rec, tier, n_tiers, &s)))
		die("kvtier sim (the recording)", rc);
	r->rec_phr = s.accesses ? (double)s.prefix_hits / (double)s.accesses : 0;
	kvt_trace_free(&rec);
}

/* --record, before the daemon stops: the recording ended, and replayed by `kvtier sim --daemon
 * --json`, which reads the tiers, policies and chunk size from this daemon (tools/cli/simd.c) as
 * an operator's replay of it would. @return : the prefix hit ratio of its "all" line. */
static double replay_as_daemon(const struct args *a)
{
	kvt_client_t *c;
	int rc = kvt_connect(sock, &c);
	if (rc || (rc = kvt__client_simple(c, KVT_MSG_CONFIG, "set trace.file none", NULL, 0)))
		die("ending the recording", rc);
	kvt_close(c);
	char bin[PATH_MAX + 16], cmd[2 * PATH_MAX + 256], line[4096];
	bin_path("kvtier", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "%s --socket %s sim --daemon --trace %s --streams %zu --json",
	         bin, sock, a->record, a->clients);
	FILE *f = popen(cmd, "r");
	if (!f)
		die("kvtier sim --daemon", -errno);
	double phr = -1;
	while (fgets(line, sizeof(line), f)) {
		const char *acc = strstr(line, "\"accesses\":"),
		           *ph = strstr(line, "\"prefix_hits\":");
		if (strstr(line, "\"tier\":\"all\"") && acc && ph) /* the counts: the ratio exact */
			phr = (double)strtoull(ph + 14, NULL, 10) /
			      (double)KVT_MAX(strtoull(acc + 11, NULL, 10), 1ull);
	}
	if (pclose(f) || phr < 0)
		die("kvtier sim --daemon (no \"all\" line)", -EPROTO);
	return phr;
}

static void replay(const struct args *a, const struct kvt_trace *t, const char *spec, struct row *r)
{
	char host[64], policy[128], pset[160] = "host.policy_params=", buf[96];
	const char *params[8] = {NULL};
	snprintf(buf, sizeof(buf), "%s", spec);
	char *save = NULL, *name = strtok_r(buf, ":", &save);
	name = name ? name : buf;
	size_t np = 0;
	for (char *kv; np < 7 && (kv = strtok_r(NULL, ":", &save));) {
		params[np++] = kv;
		size_t l = strlen(pset);
		snprintf(pset + l, sizeof(pset) - l, "%s%s", np > 1 ? " " : "", kv);
	}
	/* each tier's bytes for its chunks, as it counts a record (header + payload) */
	snprintf(host, sizeof(host), "%llu",
	         (unsigned long long)(kvt_sim_rec_bytes("host", a->chunk) * a->capacity));
	snprintf(policy, sizeof(policy), "host.policy=%s", name);
	char rset[600], lbytes[64], lpol[96], order[64];
	const char *sets[8] = {policy};
	size_t n_sets = 1;
	if (a->lower) {
		snprintf(
		    lbytes, sizeof(lbytes), "%s.bytes=%llu", a->lower_name,
		    (unsigned long long)(kvt_sim_rec_bytes(a->lower_name, a->chunk) * a->lower));
		snprintf(lpol, sizeof(lpol), "%s.policy=%s", a->lower_name, a->lower_pol);
		snprintf(order, sizeof(order), "tiers.order=host,%s", a->lower_name);
		sets[n_sets++] = order;
		sets[n_sets++] = lbytes;
		sets[n_sets++] = lpol;
		/* a put waits for its demotions rather than end short (-EAGAIN after 100 ms by
		 * default): how fast the disk is is not the policies' to answer for */
		sets[n_sets++] = "demote.wait_ms=60000";
	}
	if (a->record) {
		snprintf(rset, sizeof(rset), "trace.file=%s", a->record);
		sets[n_sets++] = rset;
		unlink(a->record); /* the file is appended to: this run's alone */
	}
	if (np)
		sets[n_sets++] = pset;
	start_daemon_with(host, sets);
	struct engine *e = calloc(a->clients, sizeof(*e));
	if (!e)
		die("malloc", -ENOMEM);
	kvt_model_t m = model_of(a->chunk, 1);
	kvt_id_t ns;
	int rc;
	for (size_t k = 0; k < a->clients; k++) {
		if ((rc = kvt_connect(sock, &e[k].c)))
			die("connect", rc);
		if ((rc = kvt_namespace(e[k].c, &m, &ns)))
			die("namespace", rc);
		e[k].q = SIZE_MAX;
	}
	size_t maxlen = 0;
	for (size_t q = 0; q < a->requests; q++)
		maxlen = KVT_MAX(maxlen, (size_t)(t->req_off[q + 1] - t->req_off[q]));
	struct io io = {.keys = malloc(maxlen * sizeof(kvt_id_t)),
	                .dst = malloc(maxlen * sizeof(void *)),
	                .src = malloc(maxlen * sizeof(void *)),
	                .chunk = a->chunk,
	                .ns = ns,
	                .prefill_us = a->prefill_us};
	uint8_t *dbuf = prefaulted(maxlen * a->chunk), *sbuf = prefaulted(a->chunk);
	double *lat = malloc(a->requests * sizeof(*lat));
	if (!io.keys || !io.dst || !io.src || !lat)
		die("malloc", -ENOMEM);
	memset(sbuf, 0x5a, a->chunk);
	for (size_t i = 0; i < maxlen; i++)
		io.dst[i] = dbuf + i * a->chunk, io.src[i] = sbuf;
	double t_all = now_s();
	size_t next = 0, busy;
	do {
		busy = 0;
		for (size_t k = 0; k < a->clients; k++) {
			if (e[k].q == SIZE_MAX && next < a->requests)
				e[k] = (struct engine){.c = e[k].c, .q = next++};
			if (e[k].q == SIZE_MAX)
				continue;
			busy++;
			bool done = engine_turn(t, &io, &e[k], a->clients > 1);
			/* its releases are handled before the next engine's turn, so no lease of
			 * this one pins a chunk then (the simulator has no leases) */
			if (a->clients > 1 && (rc = settle(e[k].c)))
				die("ping", rc);
			if (!done)
				continue;
			lat[e[k].q] = e[k].busy_s;
			e[k].q = SIZE_MAX;
		}
	} while (busy);
	r->total_s = now_s() - t_all;
	const char *js = stats_fetch(e[0].c);
	r->curve_loop = stat_in(js, NULL, "curve_keys_loop");
	r->curve_worker = stat_in(js, NULL, "curve_keys_worker");
	r->curve_bytes = stat_in(js, NULL, "curve_bytes");
	r->evictions = stat_in(js, NULL, "evictions");
	r->promoted = stat_in(js, NULL, "promoted");
	r->eagain = stat_in(js, NULL, "eagain");
	r->parked = stat_in(js, NULL, "puts_parked");
	for (size_t k = 0; k < a->clients; k++)
		kvt_close(e[k].c);
	free(e);
	if (a->record)
		r->rec_daemon_phr = replay_as_daemon(a);
	stop_daemon();
	size_t warm = warm_from(t, a);
	double cold_p50;
	pctl_ms(lat, warm, &cold_p50, &r->cold_p99_us);
	pctl_ms(lat + warm, a->requests - warm, &r->p50_us, &r->p99_us);
	r->p50_us *= 1e3, r->p99_us *= 1e3, r->cold_p99_us *= 1e3;
	r->daemon_phr = io.asked ? (double)io.got / (double)io.asked : 0;
	r->put_gbs = io.put_s > 0 ? (double)io.put_bytes / io.put_s / 1e9 : 0;
	r->memcpy_gbs = memcpy_gbs(sbuf, a->chunk, a->capacity, io.put_bytes);
	free(lat);
	free(io.keys);
	free(io.dst);
	free(io.src);
	munmap(dbuf, maxlen * a->chunk);
	munmap(sbuf, a->chunk);

	struct kvt_sim_tier tier[2] = {
	    {.name = "host", .policy = name, .params = params, .capacity_blocks = a->capacity},
	    {.name = a->lower_name, .policy = a->lower_pol, .capacity_blocks = a->lower}};
	size_t n_tiers = a->lower ? 2 : 1;
	if (a->lower && !strcmp(a->lower_name, "nvme") &&
	    kvt_sim_nvme_log(&tier[1], a->chunk, 0)) /* the log's regions, as the daemon's */
		die("--nvme: no log kvtierd would open", -ENOSPC);
	struct kvt_sim_result s;
	struct kvt_trace same = *t;
	same.streams = a->clients; /* the engines' turns, as the daemon saw them */
	if (!(same.key = malloc(t->n_blocks * sizeof(*same.key))))
		die("malloc", -ENOMEM);
	for (uint32_t b = 0; b < t->n_blocks; b++)
		same.key[b] = kvt__chunk_id(kvt_tenant_key_of_uid(geteuid()), ns, key_of(b));
	rc = kvt_sim_run(&same, tier, n_tiers, &s); /* engine: puts end as the daemon's do */
	free(same.key);
	if (rc)
		die("kvtier sim", rc);
	r->sim_phr = s.accesses ? (double)s.prefix_hits / (double)s.accesses : 0;
	r->sim_promoted = a->lower ? (long long)s.tier[1].promoted_blocks : 0;
	if (a->record)
		replay_recording(a, t, tier, n_tiers, r);
}

static size_t count_of(const char *v, size_t min)
{
	char *end;
	unsigned long long x = strtoull(v, &end, 10);
	if (end == v || *end || x < min || x > (1ULL << 32) || v[0] == '-') {
		fprintf(stderr, "bench: '%s' is not a count of at least %zu\n", v, min);
		exit(2);
	}
	return (size_t)x;
}

static const char usage_text[] =
    "usage: kvtier bench trace [--trace FILE] [--capacity N (4096)] [--chunk-kib K (64)]\n"
    "                          [--requests R (all)] [--policy P[,P...] (lru,conv)] [--check "
    "T[,U]]\n"
    "                          [--clients K (1, at most 64)] [--rounds N (1)] [--record FILE]\n"
    "                          [--rocksdb M[:P] | --nvme M[:P] (none)] [--prefill-us N (0)]\n"
    "  a Mooncake JSONL or native trace through a fresh kvtierd per policy (host tier of N\n"
    "  chunks of K KiB; below it nothing, or a rocksdb tier or the nvme log of M chunks\n"
    "  running P, lru or fifo unless named), beside kvtier sim's replay of the same requests;\n"
    "  P may carry parameters, P:k=v[:k=v...]; --check T exits 1 when the daemon's and the\n"
    "  simulator's prefix hit ratios differ by more than T; --rounds N runs the policies N\n"
    "  times in turn and ends with their medians; --record FILE (absolute) has each daemon\n"
    "  record its requests there (trace.file) and replays the recording beside them (with\n"
    "  --check, within T of the daemon's ratio, or U when given); --prefill-us N has the\n"
    "  engine compute each chunk it missed in N us before its put (slept; not in the\n"
    "  request times), so that demotions may keep up as behind a real prefill; the\n"
    "  default trace is the shared conversation trace (KVT_SHARED_DATA, or ../shared/data)\n";

/* A word parse() cannot take: the word, why, then the usage; exit 2. */
static void refuse(const char *word, const char *why)
{
	fprintf(stderr, "bench: %s: %s\n%s", word, why, usage_text);
	exit(2);
}

static void parse(int argc, char **argv, struct args *a)
{
	static char dflt[] = "lru,conv";
	char *pols = dflt;
	a->capacity = 4096, a->chunk = 64 << 10, a->check = -1, a->clients = 1, a->rounds = 1;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
			fputs(usage_text, stdout);
			exit(0);
		}
		if (strncmp(o, "--", 2))
			refuse(o, "not an option");
		if (!v)
			refuse(o, "needs a value");
		if (!strcmp(o, "--trace"))
			a->trace = v;
		else if (!strcmp(o, "--capacity"))
			a->capacity = count_of(v, 1);
		else if (!strcmp(o, "--chunk-kib"))
			a->chunk = count_of(v, 4) << 10;
		else if (!strcmp(o, "--requests"))
			a->requests = count_of(v, 1);
		else if (!strcmp(o, "--policy"))
			pols = argv[i + 1];
		else if (!strcmp(o, "--clients"))
			a->clients = count_of(v, 1);
		else if (!strcmp(o, "--prefill-us"))
			a->prefill_us = count_of(v, 0);
		else if (!strcmp(o, "--check")) {
			char *end;
			a->check = strtod(v, &end); /* "x" was 0: any difference failed */
			a->check_rec = a->check;
			if (end != v && *end == ',') {
				const char *u = end + 1;
				a->check_rec = strtod(u, &end);
				if (end == u)
					end = (char *)v; /* "T," */
			}
			if (end == v || *end || !(a->check >= 0 && a->check <= 1) ||
			    !(a->check_rec >= 0 && a->check_rec <= 1)) {
				fprintf(stderr,
				        "bench: --check '%s' is not a tolerance from 0 to 1 (T or "
				        "T,U)\n",
				        v);
				exit(2);
			}
		} else if (!strcmp(o, "--rounds"))
			a->rounds = count_of(v, 1);
		else if (!strcmp(o, "--rocksdb") || !strcmp(o, "--nvme")) {
			static char lw[128];
			if (a->lower)
				refuse(o, "one tier below host: --rocksdb or --nvme");
			a->lower_name = o + 2;
			snprintf(lw, sizeof(lw), "%s", v);
			char *colon = strchr(lw, ':');
			if (colon)
				*colon = 0;
			a->lower = count_of(lw, 1);
			a->lower_pol = colon && colon[1]         ? colon + 1
			               : a->lower_name[0] == 'n' ? "fifo"
			                                         : "lru";
		} else if (!strcmp(o, "--record")) {
			if (v[0] != '/')
				refuse(o, "needs an absolute path (the daemon writes it)");
			a->record = v;
		} else
			refuse(o, "unknown option");
		i++;
	}
	if (a->clients > 64) {
		fprintf(stderr, "bench: at most 64 clients\n");
		exit(2);
	}
	for (char *save = NULL, *p = strtok_r(pols, ",", &save); p;
	     p = strtok_r(NULL, ",", &save)) {
		if (a->n_pols == MAX_POL) {
			fprintf(stderr, "bench: at most %d policies\n", MAX_POL);
			exit(2);
		}
		a->pols[a->n_pols++] = p;
	}
}

/* " median (lo-hi)" of n values (sorted in place). */
static void print_spread(double *v, size_t n)
{
	sort_doubles(v, n);
	double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	printf(" %.2f (%.2f-%.2f) |", med, v[0], v[n - 1]);
}

/* A row's request p50 (m 0), p99 (1) or run time (2). */
static double metric(const struct row *r, int m)
{
	return m == 0 ? r->p50_us : m == 1 ? r->p99_us : r->total_s;
}

/* Each policy against the first in the same round, over the rounds (--rounds). */
static void print_rounds(const struct args *a, const struct row *rows)
{
	double *v = malloc(a->rounds * sizeof(*v));
	if (!v)
		die("malloc", -ENOMEM);
	printf("\n%zu rounds: each policy's over %s's in the same round, median (range)\n\n",
	       a->rounds, a->pols[0]);
	printf("| host.policy | request p50 | request p99 | run time |\n|---|---|---|---|\n");
	for (size_t k = 0; k < a->n_pols; k++) {
		printf("| %s |", a->pols[k]);
		for (int m = 0; m < 3; m++) {
			for (size_t q = 0; q < a->rounds; q++)
				v[q] = metric(&rows[q * a->n_pols + k], m) /
				       metric(&rows[q * a->n_pols], m);
			print_spread(v, a->rounds);
		}
		printf("\n");
	}
	free(v);
}

int main(int argc, char **argv)
{
	struct args a = {0};
	char path[4096];
	parse(argc, argv, &a);
	if (!a.trace) { /* the shared Mooncake trace, where the tests find it */
		const char *data = getenv("KVT_SHARED_DATA");
		snprintf(path, sizeof(path), "%s/traces/mooncake/conversation_trace.jsonl",
		         data ? data : "../shared/data");
		a.trace = path;
	}
	struct kvt_trace t;
	int rc = kvt_trace_load(a.trace, &t);
	if (rc == -ENOENT && a.trace == path)
		fprintf(stderr,
		        "bench: the default trace is not here: run from the repository's "
		        "root, set KVT_SHARED_DATA to the shared data folder, or name one with "
		        "--trace\n");
	if (rc)
		die(a.trace, rc);
	if (!a.requests || a.requests > t.n_req)
		a.requests = t.n_req;
	t.n_req = a.requests; /* the simulator replays the same requests, as the engine drives */
	t.n_acc = t.req_off[a.requests];
	t.engine = true;
	char below[160] = "no lower tier";
	if (a.lower)
		snprintf(below, sizeof(below), "%s below it of %zu chunks (%s.policy=%s)",
		         a.lower_name, a.lower, a.lower_name, a.lower_pol);
	printf("# kvtier bench trace: %s, %zu requests, %zu chunk reads, host of %zu chunks of "
	       "%zu KiB, %s, %zu engine%s\n\n",
	       a.trace, a.requests, t.n_acc, a.capacity, a.chunk >> 10, below, a.clients,
	       a.clients > 1 ? "s taking turns" : "");
	printf("(request p50 / p99: the requests after the first %zu chunk reads; the %zu before "
	       "them fill the host tier's memory for the first time: their p99 apart)\n\n",
	       a.capacity, warm_from(&t, &a));
	printf("| host.policy | prefix hit ratio, daemon | kvtier sim | request p50 / p99 us | "
	       "first fill p99 us | put GB/s | memcpy GB/s | put / memcpy | time vs %s | "
	       "evictions | own curve keys: worker / loop | own curve MiB |\n",
	       a.pols[0]);
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	int bad = 0;
	struct row *rows = calloc(a.rounds * a.n_pols, sizeof(*rows));
	if (!rows)
		die("calloc", -ENOMEM);
	for (size_t i = 0; i < a.rounds * a.n_pols; i++) {
		size_t k = i % a.n_pols;
		replay(&a, &t, a.pols[k], &rows[i]);
		const struct row *r = &rows[i];
		double first = rows[i - k].total_s;
		char name[160];
		snprintf(name, sizeof(name), a.rounds > 1 ? "%s (round %zu)" : "%s", a.pols[k],
		         i / a.n_pols + 1);
		printf(
		    "| %s | %.4f | %.4f | %.0f / %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %lld | "
		    "%lld / %lld | %.1f |\n",
		    name, r->daemon_phr, r->sim_phr, r->p50_us, r->p99_us, r->cold_p99_us,
		    r->put_gbs, r->memcpy_gbs, r->memcpy_gbs > 0 ? r->put_gbs / r->memcpy_gbs : 0,
		    r->total_s / first, r->evictions, r->curve_worker, r->curve_loop,
		    r->curve_bytes / 1048576.0);
		if (a.lower)
			printf("|  promoted from %s: daemon %lld, kvtier sim %lld; puts that "
			       "waited for demotions %lld, past demote.wait_ms %lld |\n",
			       a.lower_name, r->promoted, r->sim_promoted, r->parked, r->eagain);
		if (a.record)
			printf("|  recorded (%s): %s; kvtier sim --engine on it | %.4f | kvtier "
			       "sim --daemon on it | %.4f |\n",
			       a.record,
			       !r->rec_same     ? "NOT the requests sent"
			       : a.clients == 1 ? "the requests sent, in order"
			                        : "the requests sent, as they ended",
			       r->rec_phr, r->rec_daemon_phr);
		fflush(stdout);
		if (a.record && a.check >= 0 &&
		    (!r->rec_same || fabs(r->daemon_phr - r->rec_phr) > a.check_rec)) {
			fprintf(
			    stderr,
			    "bench: %s: the recording %s the requests sent, and replays to %.4f "
			    "against the daemon's %.4f\n",
			    a.pols[k], r->rec_same ? "holds" : "does not hold", r->rec_phr,
			    r->daemon_phr);
			bad = 1;
		}
		if (a.record && a.check >= 0 && r->rec_daemon_phr != r->rec_phr) { /* the counts */
			fprintf(
			    stderr,
			    "bench: %s: kvtier sim --daemon replays the recording to %.6f, not the "
			    "%.6f of the bench's own layout: it read the daemon's layout wrong\n",
			    a.pols[k], r->rec_daemon_phr, r->rec_phr);
			bad = 1;
		}
		if (a.check >= 0 && fabs(r->daemon_phr - r->sim_phr) > a.check) {
			fprintf(stderr,
			        "bench: %s: the daemon's prefix hit ratio %.4f is not within %g of "
			        "the simulator's %.4f\n",
			        a.pols[k], r->daemon_phr, a.check, r->sim_phr);
			bad = 1;
		}
	}
	if (a.rounds > 1)
		print_rounds(&a, rows);
	free(rows);
	kvt_trace_free(&t);
	return bad;
}
