/*
 * synth.c -- synthetic traces of workload shapes other than the Mooncake conversations, so that
 * a policy's gains can be checked on traces it was not designed against (`kvtier sim --synth
 * KIND`). Each kind is a few lines of a plain generative model; no parameter is fitted to a
 * measurement, and the same kind and seed give the same trace.
 *
 *  zipf   300,000 one-block requests, Zipf(0.9) popularity over 100,000 keys: the classic skewed
 *         key-value stream, with no prefix structure.
 *  scan   zipf, except that in every third window of 20,000 requests the first 8,000 read one
 *         loop of 8,000 keys in order (the same loop each time): scan resistance.
 *  docqa  12,000 requests over 500 documents of 8-40 blocks with Zipf(0.8) popularity, each the
 *         shared system block, the whole document and 1-3 fresh question blocks: long shared
 *         prefixes with fresh tips (question answering over a corpus).
 *  agent  12,000 requests, 300 ms apart: 40% start a session of 2-30 blocks, the rest extend one
 *         of the 60 most recent sessions by 1-4 blocks (one extension in ten ends its session):
 *         agent loops whose prefixes grow step by step and come back within seconds.
 *  chat   multi-turn conversations for an hour: new ones arrive as a Poisson process (2.2/s);
 *         each turn re-reads the conversation's prompt, adds 1-8 full blocks (the first turn
 *         1-16) and ends in a partial block that no later request shares; a conversation goes
 *         on with probability 0.3 after its first turn, 0.08 more after each (at most 0.8),
 *         after a lognormal think time (median 90 s, sigma 1). The structure of the Mooncake
 *         trace, with parameters of its own.
 *  tenants 300,000 one-block requests from two tenants: tenant 1 (30%) reads a Zipf(0.9) set of
 *         20,000 keys, tenant 2 (70%) floods keys it never reads again (a batch job prefilling
 *         unique prompts): what per-tenant quotas are for (`--quota`).
 *
 * Block 0 (a shared system prompt) begins every docqa, agent and chat request. Keys are built
 * from (session, index) so no list of blocks is kept; the trace builder makes them dense.
 */
#include "sim.h"
#include "sim_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rng {
	uint64_t s;
};

static uint64_t rnext(struct rng *r)
{
	return kvt_splitmix64(r->s += 0x9e3779b97f4a7c15ULL);
}

/* uniform in (0, 1) */
static double unif(struct rng *r)
{
	return ((double)(rnext(r) >> 11) + 0.5) * 0x1.0p-53;
}

/* uniform in [lo, hi] */
static uint32_t range(struct rng *r, uint32_t lo, uint32_t hi)
{
	return lo + (uint32_t)(rnext(r) % (hi - lo + 1));
}

static double normal(struct rng *r)
{
	return sqrt(-2.0 * log(unif(r))) * cos(2.0 * M_PI * unif(r));
}

/* Zipf(a) over n keys, ranks shuffled so a key's number says nothing of its popularity. */
struct zipf {
	double *cdf;
	uint32_t *perm;
	size_t n;
};

static int zipf_init(struct zipf *z, size_t n, double a, struct rng *r)
{
	z->n = n;
	z->cdf = malloc(n * sizeof(*z->cdf));
	z->perm = malloc(n * sizeof(*z->perm));
	if (!z->cdf || !z->perm)
		return -ENOMEM;
	double s = 0;
	for (size_t i = 0; i < n; i++) {
		s += pow((double)(i + 1), -a);
		z->cdf[i] = s;
		z->perm[i] = (uint32_t)i;
	}
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = rnext(r) % (i + 1);
		uint32_t t = z->perm[i];
		z->perm[i] = z->perm[j];
		z->perm[j] = t;
	}
	return 0;
}

static uint32_t zipf_draw(const struct zipf *z, struct rng *r)
{
	double u = unif(r) * z->cdf[z->n - 1];
	size_t lo = 0, hi = z->n - 1;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (z->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return z->perm[lo];
}

static void zipf_free(struct zipf *z)
{
	free(z->cdf);
	free(z->perm);
}

/* block i of session s; fresh blocks (never shared) come from their own space */
#define KEY(s, i)  (((uint64_t)(s) + 1) << 24 | (uint64_t)(i))
#define FRESH(n)   ((1ULL << 63) | (uint64_t)(n))
#define LOOP_BASE  (1ULL << 62)
#define SYSTEM_KEY 0

static int gen_zipf(struct kvt__tb *b, struct rng *r, bool scan)
{
	struct zipf z;
	int rc = zipf_init(&z, 100000, 0.9, r);
	for (uint32_t i = 0; i < 300000 && !rc; i++) {
		bool in_loop = scan && (i / 20000) % 3 == 2 && i % 20000 < 8000;
		rc = kvt__tb_req(b, i, 0);
		if (!rc)
			rc = kvt__tb_blk(b, in_loop ? LOOP_BASE + i % 20000
			                            : KEY(0, zipf_draw(&z, r)));
	}
	zipf_free(&z);
	return rc;
}

static int gen_tenants(struct kvt__tb *b, struct rng *r)
{
	struct zipf z;
	int rc = zipf_init(&z, 20000, 0.9, r);
	for (uint32_t i = 0; i < 300000 && !rc; i++) {
		bool flood = unif(r) < 0.7;
		rc = kvt__tb_req(b, i, flood ? 2 : 1);
		if (!rc)
			rc = kvt__tb_blk(b, flood ? FRESH(i) : KEY(0, zipf_draw(&z, r)));
	}
	zipf_free(&z);
	return rc;
}

static int gen_docqa(struct kvt__tb *b, struct rng *r)
{
	uint32_t len[500];
	uint64_t fresh = 0;
	struct zipf z;
	for (size_t d = 0; d < 500; d++)
		len[d] = range(r, 8, 40);
	int rc = zipf_init(&z, 500, 0.8, r);
	for (uint32_t i = 0; i < 12000 && !rc; i++) {
		uint32_t d = zipf_draw(&z, r), q = range(r, 1, 3);
		rc = kvt__tb_req(b, (uint64_t)i * 300, 0);
		if (!rc)
			rc = kvt__tb_blk(b, SYSTEM_KEY);
		for (uint32_t j = 0; j < len[d] && !rc; j++)
			rc = kvt__tb_blk(b, KEY(d, j));
		for (uint32_t j = 0; j < q && !rc; j++)
			rc = kvt__tb_blk(b, FRESH(fresh++));
	}
	zipf_free(&z);
	return rc;
}

#define AGENT_ACTIVE 60

static int gen_agent(struct kvt__tb *b, struct rng *r)
{
	uint32_t sess[AGENT_ACTIVE], len[AGENT_ACTIVE], n = 0, next = 0;
	int rc = 0;
	for (uint32_t i = 0; i < 12000 && !rc; i++) {
		uint32_t k;
		bool ext = n && unif(r) >= 0.4;
		if (!ext) {
			if (n == AGENT_ACTIVE) { /* the oldest goes */
				memmove(sess, sess + 1, (n - 1) * sizeof(*sess));
				memmove(len, len + 1, (n - 1) * sizeof(*len));
				n--;
			}
			k = n++;
			sess[k] = next++;
			len[k] = range(r, 2, 30);
		} else {
			k = range(r, 0, n - 1);
			len[k] += range(r, 1, 4);
		}
		rc = kvt__tb_req(b, (uint64_t)i * 300, 0);
		if (!rc)
			rc = kvt__tb_blk(b, SYSTEM_KEY);
		for (uint32_t j = 0; j < len[k] && !rc; j++)
			rc = kvt__tb_blk(b, KEY(sess[k], j));
		if (ext && unif(r) < 0.1) { /* the session ends */
			memmove(sess + k, sess + k + 1, (n - k - 1) * sizeof(*sess));
			memmove(len + k, len + k + 1, (n - k - 1) * sizeof(*len));
			n--;
		}
	}
	return rc;
}

struct turn {
	uint64_t t_ms;
	uint32_t conv, nfull;
};

static int by_time(const void *a, const void *b)
{
	const struct turn *x = a, *y = b;
	if (x->t_ms != y->t_ms)
		return x->t_ms < y->t_ms ? -1 : 1;
	return x->conv < y->conv ? -1 : x->conv > y->conv;
}

static int gen_chat(struct kvt__tb *b, struct rng *r)
{
	const double hour_ms = 3600e3;
	size_t n = 0, cap = 16384;
	struct turn *t = malloc(cap * sizeof(*t));
	if (!t)
		return -ENOMEM;
	double start = 0;
	for (uint32_t c = 0;; c++) {
		start += -log(unif(r)) / 2.2 * 1e3;
		if (start >= hour_ms)
			break;
		double at = start, p = 0.3;
		uint32_t nfull = range(r, 1, 16);
		for (;;) {
			if (n == cap) {
				struct turn *nt = realloc(t, 2 * cap * sizeof(*t));
				if (!nt) {
					free(t);
					return -ENOMEM;
				}
				t = nt;
				cap *= 2;
			}
			t[n++] = (struct turn){.t_ms = (uint64_t)at, .conv = c, .nfull = nfull};
			if (unif(r) >= p)
				break;
			p = p + 0.08 > 0.8 ? 0.8 : p + 0.08;
			at += 90e3 * exp(normal(r));
			if (at >= hour_ms)
				break;
			nfull += range(r, 1, 8);
		}
	}
	qsort(t, n, sizeof(*t), by_time);
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		rc = kvt__tb_req(b, t[i].t_ms, 0);
		if (!rc)
			rc = kvt__tb_blk(b, SYSTEM_KEY);
		for (uint32_t j = 0; j < t[i].nfull && !rc; j++)
			rc = kvt__tb_blk(b, KEY(t[i].conv, j));
		if (!rc)
			rc = kvt__tb_blk(b, FRESH(i)); /* the partial tail */
	}
	free(t);
	return rc;
}

static const char *const kinds[] = {"zipf", "scan", "docqa", "agent", "chat", "tenants"};

const char *kvt_sim_synth_kind(size_t i)
{
	return i < sizeof(kinds) / sizeof(kinds[0]) ? kinds[i] : NULL;
}

int kvt_sim_synth(const char *kind, uint64_t seed, struct kvt_trace *t)
{
	struct rng r = {.s = seed * 0x2545f4914f6cdd1dULL + 1};
	size_t k = 0;
	while (kvt_sim_synth_kind(k) && strcmp(kvt_sim_synth_kind(k), kind))
		k++;
	if (!kvt_sim_synth_kind(k))
		return -ENOENT;
	struct kvt__tb *b = kvt__tb_new(t);
	if (!b)
		return -ENOMEM;
	int rc;
	switch (k) {
	case 0:
	case 1:
		rc = gen_zipf(b, &r, k == 1);
		break;
	case 2:
		rc = gen_docqa(b, &r);
		break;
	case 3:
		rc = gen_agent(b, &r);
		break;
	case 4:
		rc = gen_chat(b, &r);
		break;
	default:
		rc = gen_tenants(b, &r);
		break;
	}
	return kvt__tb_done(b, rc);
}
