/*
 * cli.c -- `kvtier sim` argument parsing and reports (text table, JSON lines, SVG plot).
 *
 * Single-tier form: --trace F --capacity N[,N...] --policy P[,P...]: every (policy, capacity)
 * pair is replayed, each beside Belady's MIN at the same capacity. Multi-tier form: --tier
 * NAME=SIZE (blocks, or bytes with a B/KiB/MiB/GiB suffix divided by --block-bytes), repeated
 * top tier first, with --policy NAME=P and --admission NAME=A per tier, and --placement
 * (write-through, the daemon's, or on-evict).
 */
#include "sim.h"
#include "sim_int.h"

#include "policy/admit.h"
#include "policy/policy.h"
#include "core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST 32
/* An error already described on stderr: the run's end adds no "sim: <errno>" line of its own. */
#define SAID (-100000)
/* The best measured policy (docs/policies.md): what --policy defaults to. */
#define KVT_SIM_DEFAULT_POLICY "conv"

struct opts {
	const char *trace, *synth, *dump, *plot;
	const char *warmup; /* --warmup N (requests) or P% (of the trace's requests) */
	const char *bypass; /* --bypass FILE: a predictor's byte per access, 1 = not kept */
	bool engine;        /* --engine: puts end where kvtierd's do (kvt_trace.engine) */
	uint64_t streams;   /* --streams K: K engines' requests in flight (kvt_trace.streams) */
	uint64_t seed;
	double hint_ends;    /* --hint-ends F: the fraction of conversation ends told (< 0: off) */
	uint64_t hint_delay; /* --hint-delay N: told N requests after the last turn */
	bool json;
	bool placement;  /* --placement was given (the --tier form's) */
	bool on_evict;   /* --placement on-evict */
	bool cascade;    /* --placement cascade (the default) */
	double mrc_rate; /* --mrc [--mrc-rate R]: > 0 prints curves */
	size_t mrc_keys; /* --mrc-keys N: the most keys the curve tracks (0: its default) */
	size_t minisim;  /* --minisim N: miniature simulations of N entries at 1x (0: off) */
	size_t caps[MAX_LIST], n_caps;
	char *pols[MAX_LIST];
	size_t n_pols;
	struct kvt_sim_tier tiers[KVT_SIM_MAX_TIERS];
	uint64_t
	    tier_bytes[KVT_SIM_MAX_TIERS]; /* each --tier's size in bytes as given (0: blocks) */
	size_t n_tiers;
	const char *params[MAX_LIST + 1];
	size_t n_params;
	/* a tier's own: the --param words above, then its --param TIER:k=v ones */
	const char *tier_params[KVT_SIM_MAX_TIERS][2 * MAX_LIST + 1];
	const char *admission;
	uint64_t block_bytes;
	/* --quota: [0] for the single-tier form, [1 + i] for tier i */
	struct kvt_sim_quota quotas[KVT_SIM_MAX_TIERS + 1][MAX_LIST];
	size_t n_quotas[KVT_SIM_MAX_TIERS + 1];
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: kvtier sim --trace FILE --capacity N[,N...] [--policy P[,P...] (conv)]\n"
	    "                  [--admission none|tinylfu|second_touch] [--param k=v]...\n"
	    "                  [--json] [--plot FILE.svg] [--block-bytes N (512KiB)]\n"
	    "                  [--hint-ends F [--hint-delay N]] (an engine that calls kvt_done\n"
	    "                  for a fraction F of the conversations' ends, N requests late)\n"
	    "                  [--engine] (as an engine drives kvtierd: a request reads its\n"
	    "                  leading hits and puts the rest, and the put ends where the\n"
	    "                  policy would evict the request's own blocks)\n"
	    "                  [--streams K] (K engines at once, taking turns message by\n"
	    "                  message: other engines' reads and puts come between a\n"
	    "                  request's read of its leading hits and its put of the rest)\n"
	    "                  [--bypass FILE] (one byte per access, 1: the block is not kept;\n"
	    "                  a predictor's decisions, replayed)\n"
	    "                  [--warmup N|P%%] (the first N requests, or P%% of them, are\n"
	    "                  replayed but not counted; OPT is counted alike)\n"
	    "                  [--quota [TIER:]T=G/M,...] (tenant T keeps G blocks and holds at\n"
	    "                  most M, '-' for no maximum; sizes in blocks or with a unit; the\n"
	    "                  top tier unless TIER is named; each tenant's hit ratio is printed)\n"
	    "       kvtier sim --trace FILE --capacity N[,N...] --mrc [--mrc-rate R] [--mrc-keys "
	    "N]\n"
	    "                  (SHARDS curve at 1/2x..8x beside exact LRU; sampling starts at "
	    "rate\n"
	    "                  R, default 1, and drops to track at most N keys, default 32768)\n"
	    "       kvtier sim --trace FILE --capacity N[,N...] --policy P[,P...] --minisim E\n"
	    "                  (each policy's own curve by miniature simulation, E entries at 1x,\n"
	    "                  beside exact replays of it)\n"
	    "       kvtier sim --trace FILE --tier host=4096 --tier nvme=64GiB\n"
	    "                  --policy host=s3fifo --policy nvme=lru\n"
	    "                  [--admission nvme=second_touch] [--param host:k=v]\n"
	    "                  --block-bytes N\n"
	    "                  [--placement cascade|write-through|on-evict] (as kvtierd's\n"
	    "                  tiers.placement: a lower tier is written when a block enters the\n"
	    "                  top tier, but one below nvme from nvme's evictions (cascade, the\n"
	    "                  default); every one when a block enters the top tier; or each\n"
	    "                  from the evictions of the tier above (on-evict);\n"
	    "                  a tier named nvme runs fifo, as kvtierd's log, unless named;\n"
	    "                  clock is the log with nvme.policy = clock; it is laid out as the\n"
	    "                  log: nvme=N is N records of a block, nvme=64GiB nvme.bytes)\n"
	    "       kvtier [--socket PATH] sim --daemon [--show] --trace FILE [ARGS]\n"
	    "                  (the running kvtierd's tiers, sizes, policies and their\n"
	    "                  parameters, admissions, placement, quotas and chunk size as\n"
	    "                  the --tier form's words, then ARGS, which may change them:\n"
	    "                  --tier host=8GiB, --policy host=arc; --show prints the words)\n"
	    "       kvtier sim --list-policies\n"
	    "Traces: Mooncake JSONL, or native text: '<timestamp_ms> [t=<tenant>] <id> <id>...'\n"
	    "        (and 'done <id>...': kvt_done before the next request)\n"
	    "        or --synth zipf|scan|docqa|agent|chat|tenants [--seed N] instead of --trace\n"
	    "        (a generated workload); --dump FILE writes the trace in the native format\n");
}

/* A size in blocks ("4096") or bytes ("2GiB", "512KiB", "100B"; whole blocks of block_bytes),
 * at most 2^32 - 1 blocks (block ids are u32); bytes, when not NULL, gets the size in bytes as
 * given, or 0 for blocks. @return : 0, -EINVAL, -ERANGE. */
static int parse_size(const char *s, uint64_t block_bytes, size_t *out, uint64_t *bytes)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -EINVAL; /* no sign, no space, no "inf" */
	double v = strtod(s, &end);
	double mul = 0;
	if (!*end)
		mul = 0; /* blocks */
	else if (!strcmp(end, "B"))
		mul = 1;
	else if (!strcmp(end, "KiB"))
		mul = 1024.0;
	else if (!strcmp(end, "MiB"))
		mul = 1048576.0;
	else if (!strcmp(end, "GiB"))
		mul = 1073741824.0;
	else
		return -EINVAL;
	double blocks = mul ? v * mul / (double)block_bytes : v;
	if (!(blocks < 4294967296.0)) /* NaN too */
		return -ERANGE;
	*out = (size_t)blocks;
	if (bytes)
		*bytes = mul ? (uint64_t)(v * mul) : 0;
	return 0;
}

/* A capacity: parse_size and at least one block; says what is wrong on stderr. */
static int parse_capacity(const char *what, const char *s, uint64_t block_bytes, size_t *out,
                          uint64_t *bytes)
{
	int rc = parse_size(s, block_bytes, out, bytes);
	if (!rc && !*out)
		rc = -ERANGE;
	if (rc)
		fprintf(stderr,
		        "sim: %s '%s': want blocks (N) or bytes (N B, KiB, MiB or GiB), from one "
		        "block (--block-bytes %llu) to 2^32 - 1 blocks\n",
		        what, s, (unsigned long long)block_bytes);
	return rc;
}

/* Splits a comma-separated list in place; an empty item ("1,,2", "lru,") is an error, and
 * leaves s as it was (its commas back), for the message that quotes it. */
static int split_list(char *s, char **out, size_t *n)
{
	size_t len = strlen(s);
	for (char *tok = s; tok;) {
		char *comma = strchr(tok, ',');
		if (comma)
			*comma = 0;
		if (!*tok || *n == MAX_LIST) {
			for (size_t i = 0; i < len; i++)
				s[i] = s[i] ? s[i] : ',';
			return *tok ? -E2BIG : -EINVAL;
		}
		out[(*n)++] = tok;
		tok = comma ? comma + 1 : NULL;
	}
	return 0;
}

/* "NAME=VAL" sets the policy (which 0) or admission (1) of the tier NAME. @return : 0, -EINVAL. */
/* The index of the --tier named by the len bytes at name, or o->n_tiers when none is. */
static size_t tier_named(const struct opts *o, const char *name, size_t len)
{
	size_t i = 0;
	while (i < o->n_tiers &&
	       (strlen(o->tiers[i].name) != len || strncmp(o->tiers[i].name, name, len)))
		i++;
	return i;
}

static int tier_pair(struct opts *o, const char *arg, int which)
{
	const char *eq = strchr(arg, '=');
	size_t i = eq ? tier_named(o, arg, (size_t)(eq - arg)) : o->n_tiers;
	if (i == o->n_tiers) {
		fprintf(stderr, "sim: no tier for '%s'\n", arg);
		return -EINVAL;
	}
	if (which) {
		o->tiers[i].admission = eq + 1;
	} else {
		o->tiers[i].policy = eq + 1;
		o->tiers[i].params = o->params;
	}
	return 0;
}

struct raw {
	char *caps, *tiers[KVT_SIM_MAX_TIERS], *pol_pairs[MAX_LIST], *adm_pairs[MAX_LIST];
	char *quotas[MAX_LIST];
	char *tier_params[MAX_LIST]; /* --param TIER:k=v */
	size_t n_tiers, n_pp, n_ap, n_quotas, n_tier_params;
};

/* A quota's size: blocks, or bytes as the tier named tier holds them (kvt_sim_tier_blocks; the
 * single tier's, tier NULL, in blocks of block_bytes). @return : 0, -EINVAL, -ERANGE. */
static int quota_size(const char *v, const char *tier, uint64_t block_bytes, size_t *out)
{
	uint64_t bytes;
	int rc = parse_size(v, block_bytes, out, &bytes);
	if (!rc && bytes)
		*out = kvt_sim_tier_blocks(tier ? tier : "", block_bytes, bytes);
	return rc;
}

/* "T=G/M[,T=G/M...]" into q[*n...]: tenant T's guaranteed and maximum blocks ('-': none), of
 * the tier named tier (NULL: the single tier). */
static int parse_quotas(char *spec, const char *tier, uint64_t block_bytes, struct kvt_sim_quota *q,
                        size_t *n)
{
	char *save = NULL;
	for (char *it = strtok_r(spec, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(it, '='), *sl = eq ? strchr(eq, '/') : NULL, *end;
		if (!sl || *n >= MAX_LIST)
			return -EINVAL;
		*eq = *sl = 0;
		unsigned long t = strtoul(it, &end, 10);
		if (end == it || *end || *it < '0' || *it > '9' || t > UINT32_MAX)
			return -EINVAL;
		struct kvt_sim_quota *x = &q[(*n)++];
		x->tenant = (uint32_t)t;
		x->max_blocks = SIZE_MAX;
		if (quota_size(eq + 1, tier, block_bytes, &x->guaranteed_blocks) ||
		    (strcmp(sl + 1, "-") &&
		     quota_size(sl + 1, tier, block_bytes, &x->max_blocks)) ||
		    x->guaranteed_blocks > x->max_blocks)
			return -EINVAL;
	}
	return 0;
}

/* --quota [TIER:]SPEC: the named tier's, else the top tier's (or the single tier's). */
static int take_quota(struct opts *o, char *arg)
{
	size_t slot = o->n_tiers ? 1 : 0;
	char *colon = strchr(arg, ':');
	if (colon) {
		slot = tier_named(o, arg, (size_t)(colon - arg));
		if (slot == o->n_tiers) {
			fprintf(stderr, "sim: --quota: no tier named '%.*s'\n", (int)(colon - arg),
			        arg);
			return -EINVAL;
		}
		slot++;
		arg = colon + 1;
	}
	if (parse_quotas(arg, slot ? o->tiers[slot - 1].name : NULL, o->block_bytes,
	                 o->quotas[slot], &o->n_quotas[slot])) {
		fprintf(stderr, "sim: --quota: want T=GUARANTEED/MAX,... (T a tenant of the trace, "
		                "as its t=T: 0 to 4294967295)\n");
		return -EINVAL;
	}
	if (slot) {
		o->tiers[slot - 1].quotas = o->quotas[slot];
		o->tiers[slot - 1].n_quotas = o->n_quotas[slot];
	}
	return 0;
}

/* A decimal count in [lo, hi] (no sign, no space, nothing after it) into *out.
 * @return : 0 or -EINVAL. */
static int count_in(const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	errno = 0;
	*out = strtoull(v, &end, 10);
	return *v >= '0' && *v <= '9' && !*end && !errno && *out >= lo && *out <= hi ? 0 : -EINVAL;
}

static int parse_fraction(const char *v, double *out)
{
	char *end;
	*out = strtod(v, &end);
	return end != v && !*end && *out >= 0 && *out <= 1 ? 0 : -EINVAL;
}

/* "TIER:k=v", a parameter of one tier's policy ("k=v" of every policy run has no colon). */
static bool tier_scoped(const char *v)
{
	const char *colon = strchr(v, ':'), *eq = strchr(v, '=');
	return colon && (!eq || colon < eq);
}

static int take(struct opts *o, struct raw *w, const char *a, char *v)
{
	if (!strcmp(a, "--trace"))
		o->trace = v;
	else if (!strcmp(a, "--synth"))
		o->synth = v;
	else if (!strcmp(a, "--seed"))
		return count_in(v, 0, UINT64_MAX, &o->seed);
	else if (!strcmp(a, "--dump"))
		o->dump = v;
	else if (!strcmp(a, "--plot"))
		o->plot = v;
	else if (!strcmp(a, "--warmup"))
		o->warmup = v;
	else if (!strcmp(a, "--bypass"))
		o->bypass = v;
	else if (!strcmp(a, "--hint-ends"))
		return parse_fraction(v, &o->hint_ends);
	else if (!strcmp(a, "--streams"))
		return count_in(v, 1, 65536, &o->streams);
	else if (!strcmp(a, "--hint-delay"))
		return count_in(v, 0, UINT32_MAX, &o->hint_delay);
	else if (!strcmp(a, "--quota") && w->n_quotas < MAX_LIST)
		w->quotas[w->n_quotas++] = v;
	else if (!strcmp(a, "--capacity"))
		w->caps = v;
	else if (!strcmp(a, "--policy") && strchr(v, '=') && w->n_pp < MAX_LIST)
		w->pol_pairs[w->n_pp++] = v;
	else if (!strcmp(a, "--policy"))
		return split_list(v, o->pols, &o->n_pols) ? -EINVAL : 0;
	else if (!strcmp(a, "--admission") && strchr(v, '=') && w->n_ap < MAX_LIST)
		w->adm_pairs[w->n_ap++] = v;
	else if (!strcmp(a, "--admission"))
		o->admission = v;
	else if (!strcmp(a, "--param") && tier_scoped(v) && w->n_tier_params < MAX_LIST)
		w->tier_params[w->n_tier_params++] = v;
	else if (!strcmp(a, "--param") && !tier_scoped(v) && o->n_params < MAX_LIST)
		o->params[o->n_params++] = v;
	else if (!strcmp(a, "--tier") && w->n_tiers < KVT_SIM_MAX_TIERS)
		w->tiers[w->n_tiers++] = v;
	else if (!strcmp(a, "--mrc-rate")) {
		char *end;
		o->mrc_rate = strtod(v, &end);
		if (end == v || *end || !(o->mrc_rate > 0 && o->mrc_rate <= 1))
			return -EINVAL; /* a sampling rate in (0, 1] */
	} else if (!strcmp(a, "--mrc-keys")) {
		uint64_t n;
		int rc = count_in(v, 64, 1ull << 30, &n);
		o->mrc_keys = (size_t)n;
		return rc;
	} else if (!strcmp(a, "--minisim")) {
		uint64_t n;
		int rc = count_in(v, 1, 1ull << 24, &n);
		o->minisim = (size_t)n;
		return rc;
	} else if (!strcmp(a, "--block-bytes")) /* "524288", "512KiB" */
		return *v >= '0' && *v <= '9' && !kvt_parse_size(v, &o->block_bytes) &&
		               o->block_bytes
		           ? 0
		           : -EINVAL;
	else if (!strcmp(a, "--placement") &&
	         (!strcmp(v, "write-through") || !strcmp(v, "on-evict") || !strcmp(v, "cascade"))) {
		o->on_evict = !strcmp(v, "on-evict");
		o->cascade = !strcmp(v, "cascade");
		o->placement = true;
	} else
		return -EINVAL;
	return 0;
}

/* An admission name, tried before anything runs: "--admission bogus" stopped the run after
 * the table's header. @return : 0 or -EINVAL (said). */
static int admission_known(const char *name)
{
	struct kvt_admit *a = NULL;
	if (!name || !strcmp(name, "none"))
		return 0;
	int rc = kvt_admit_create(name, 64, &a);
	kvt_admit_destroy(a);
	if (rc)
		fprintf(stderr, "sim: unknown admission '%s' (none, tinylfu or second_touch)\n",
		        name);
	return rc ? -EINVAL : 0;
}

/* The single-tier form (--capacity, --plot, --mrc, --minisim) or the tiers' (--tier,
 * --placement): a word of the other form was dropped without a word. @return : 0, -EINVAL. */
static int one_form(const struct opts *o, const struct raw *w)
{
	const char *single = w->caps           ? "--capacity"
	                     : o->plot         ? "--plot"
	                     : o->mrc_rate > 0 ? "--mrc"
	                     : o->minisim      ? "--minisim"
	                                       : NULL;
	if (w->n_tiers && single)
		fprintf(stderr, "sim: %s is the single-tier form's, --tier the tiers' (give one)\n",
		        single);
	else if (!w->n_tiers && o->placement)
		fprintf(stderr, "sim: --placement places blocks among --tier tiers (none given)\n");
	else
		return 0;
	return -EINVAL;
}

/* Each --param TIER:k=v onto its tier's list, after the --param words every policy takes (a
 * tier whose policy was not named, as nvme's fifo, takes only its own). kvtier sim --daemon
 * gives each tier the parameters kvtierd's policy there runs with. @return : 0, -EINVAL. */
static int take_tier_params(struct opts *o, struct raw *w)
{
	size_t n[KVT_SIM_MAX_TIERS] = {0};
	for (size_t k = 0; k < w->n_tier_params; k++) {
		char *v = w->tier_params[k], *colon = strchr(v, ':');
		size_t i = tier_named(o, v, (size_t)(colon - v));
		if (i == o->n_tiers || !strchr(colon, '=')) {
			fprintf(stderr, "sim: --param %s: want TIER:k=v, TIER a --tier's name\n",
			        v);
			return -EINVAL;
		}
		if (!n[i]) /* the words every policy takes come first */
			for (size_t j = 0; o->tiers[i].params && o->tiers[i].params[j]; j++)
				o->tier_params[i][n[i]++] = o->tiers[i].params[j];
		o->tier_params[i][n[i]++] = colon + 1;
		o->tier_params[i][n[i]] = NULL;
		o->tiers[i].params = o->tier_params[i];
	}
	return 0;
}

static int finish(struct opts *o, struct raw *w)
{
	char *l[MAX_LIST];
	size_t n = 0;
	int rc = one_form(o, w);
	if (rc || (rc = admission_known(o->admission)))
		return rc;
	if (w->caps && (rc = split_list(w->caps, l, &n))) {
		fprintf(stderr, "sim: --capacity '%s': an empty item, or more than %d\n", w->caps,
		        MAX_LIST);
		return rc;
	}
	for (size_t k = 0; k < n && !rc; k++)
		rc =
		    parse_capacity("--capacity", l[k], o->block_bytes, &o->caps[o->n_caps++], NULL);
	for (size_t k = 0; k < w->n_tiers && !rc; k++) {
		char *eq = strchr(w->tiers[k], '=');
		struct kvt_sim_tier *t = &o->tiers[o->n_tiers++];
		if (!eq || eq == w->tiers[k]) {
			fprintf(stderr, "sim: --tier '%s': want NAME=CAPACITY\n", w->tiers[k]);
			return -EINVAL;
		}
		uint64_t bytes;
		if ((rc = parse_capacity("--tier", eq + 1, o->block_bytes, &t->capacity_blocks,
		                         &bytes)))
			return rc;
		o->tier_bytes[o->n_tiers - 1] = bytes;
		*eq = 0;
		t->name = w->tiers[k];
		if (bytes) /* as the daemon's tier of that name holds chunks of a block */
			t->capacity_blocks = kvt_sim_tier_blocks(t->name, o->block_bytes, bytes);
		if (!t->capacity_blocks) {
			fprintf(stderr,
			        "sim: --tier %s=%s: holds no block of %llu bytes and its header\n",
			        t->name, eq + 1, (unsigned long long)o->block_bytes);
			return -ERANGE;
		}
		for (size_t j = 0; j + 1 < o->n_tiers; j++)
			if (!strcmp(o->tiers[j].name, t->name)) {
				fprintf(stderr, "sim: --tier %s given twice\n", t->name);
				return -EINVAL;
			}
		/* the daemon's nvme tier is a log reclaimed in write order: fifo, unless named */
		t->policy = !strcmp(t->name, "nvme") ? "fifo"
		            : o->n_pols              ? o->pols[0]
		                                     : KVT_SIM_DEFAULT_POLICY;
		t->admission = o->admission;
		t->params = strcmp(t->name, "nvme") ? o->params : NULL; /* fifo has none */
		/* cascade, as kvtierd: the tier below nvme (a log that hands its evictions over)
		 * fills from them; every other tier is written through */
		t->fill_on_evict = o->on_evict || (o->cascade && k >= 2 &&
		                                   !strcmp(o->tiers[o->n_tiers - 2].name, "nvme"));
	}
	for (size_t k = 0; k < w->n_pp && !rc; k++)
		rc = tier_pair(o, w->pol_pairs[k], 0);
	for (size_t k = 0; k < w->n_ap && !rc; k++)
		rc = tier_pair(o, w->adm_pairs[k], 1);
	for (size_t k = 0; k < w->n_quotas && !rc; k++)
		rc = take_quota(o, w->quotas[k]);
	if (!rc)
		rc = take_tier_params(o, w);
	for (size_t k = 0; k < o->n_tiers && !rc; k++)
		if (!strcmp(o->tiers[k].name, "nvme") &&
		    kvt_sim_nvme_log(&o->tiers[k], o->block_bytes, o->tier_bytes[k]))
			fprintf(
			    stderr,
			    "sim: --tier nvme=%zu: no log kvtierd would open (3 MiB and a record "
			    "at least): modelled a record at a time\n",
			    o->tiers[k].capacity_blocks);
	return rc;
}

/* @return : 0, 1 when the command is complete (help, list), -EINVAL. */
static int parse(struct opts *o, int argc, char **argv)
{
	struct raw w;
	memset(&w, 0, sizeof(w));
	o->block_bytes = 512 * 1024;
	o->seed = 1;
	o->hint_ends = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--json")) {
			o->json = true;
		} else if (!strcmp(a, "--engine")) {
			o->engine = true;
		} else if (!strcmp(a, "--mrc")) {
			o->mrc_rate = o->mrc_rate > 0 ? o->mrc_rate : 1;
		} else if (!strcmp(a, "--list-policies")) {
			for (size_t k = 0; kvt_policy_at(k); k++)
				printf("%s\n", kvt_policy_at(k)->name);
			return 1;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 1;
		} else if (!strcmp(a, "--daemon") || !strcmp(a, "--show")) {
			fprintf(stderr,
			        "sim: %s is kvtier's: kvtier [--socket PATH] sim --daemon ...\n",
			        a);
			return -EINVAL;
		} else if (i + 1 >= argc || take(o, &w, a, argv[i + 1])) {
			if (i + 1 < argc)
				fprintf(stderr, "sim: bad option %s %s (--help lists them)\n", a,
				        argv[i + 1]);
			else
				fprintf(stderr, "sim: %s wants a value\n", a);
			return -EINVAL;
		} else {
			i++;
		}
	}
	if (!o->block_bytes || !o->trace == !o->synth) {
		fprintf(stderr, "sim: one of --trace and --synth is required\n");
		return -EINVAL;
	}
	return finish(o, &w);
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

/* With --engine, that the replay was one; with --bypass, how many counted accesses the
 * predictor's file said not to keep. */
static void print_bypassed(const struct opts *o, const struct kvt_trace *t,
                           const struct kvt_sim_result *r)
{
	if (t->engine && o->json)
		printf(",\"engine\":true");
	if (t->streams > 1 && o->json)
		printf(",\"streams\":%zu", t->streams);
	if (t->bypass)
		printf(o->json ? ",\"bypassed\":%llu" : "%27llu accesses bypassed\n",
		       (unsigned long long)r->bypassed);
}

/* Each tenant's share, when there are several or quotas: a JSON array member (the caller's
 * object goes on), or indented table lines. */
static void print_tenants(const struct opts *o, const struct kvt_sim_result *r, bool quotas)
{
	if (r->n_tenants < 2 && !quotas)
		return;
	if (o->json)
		printf(",\"tenants\":[");
	for (size_t k = 0; k < r->n_tenants; k++) {
		const struct kvt_sim_tenant_result *x = &r->tenants[k];
		if (o->json)
			printf("%s{\"tenant\":%u,\"accesses\":%llu,\"hit_ratio\":%.6f,"
			       "\"prefix_hit_ratio\":%.6f}",
			       k ? "," : "", x->tenant, (unsigned long long)x->accesses,
			       ratio(x->hits, x->accesses), ratio(x->prefix_hits, x->accesses));
		else
			printf("  tenant %-6u %10llu accesses  hit %.4f  prefix hit %.4f\n",
			       x->tenant, (unsigned long long)x->accesses,
			       ratio(x->hits, x->accesses), ratio(x->prefix_hits, x->accesses));
	}
	if (o->json)
		printf("]");
}

/* One replay plus its OPT bound, printed as a table row or a JSON line. */
static int single(struct opts *o, const struct kvt_trace *t, const char *pol, size_t cap,
                  double *hr, double *opt_hr)
{
	struct kvt_sim_tier tier = {.name = "tier",
	                            .policy = pol,
	                            .admission = o->admission,
	                            .params = o->params,
	                            .capacity_blocks = cap,
	                            .quotas = o->quotas[0],
	                            .n_quotas = o->n_quotas[0]};
	struct kvt_sim_result r, opt;
	int rc = kvt_sim_run(t, &tier, 1, &r);
	if (!rc)
		rc = kvt_sim_opt(t, cap, &opt);
	if (rc)
		return rc;
	*hr = ratio(r.hits, r.accesses);
	*opt_hr = ratio(opt.hits, opt.accesses);
	const struct kvt_sim_tier_result *x = &r.tier[0];
	if (o->json)
		printf("{\"policy\":\"%s\",\"admission\":\"%s\",\"capacity_blocks\":%zu,"
		       "\"accesses\":%llu,\"hits\":%llu,\"hit_ratio\":%.6f,"
		       "\"prefix_hit_ratio\":%.6f,\"opt_hit_ratio\":%.6f,"
		       "\"opt_prefix_hit_ratio\":%.6f,\"evictions\":%llu,\"rejected\":%llu,"
		       "\"quota_rejected\":%llu,\"replay_s\":%.4f,\"params\":\"%s\"",
		       pol, o->admission ? o->admission : "none", cap,
		       (unsigned long long)r.accesses, (unsigned long long)r.hits, *hr,
		       ratio(r.prefix_hits, r.accesses), *opt_hr,
		       ratio(opt.prefix_hits, opt.accesses), (unsigned long long)x->evictions,
		       (unsigned long long)x->rejected, (unsigned long long)x->quota_rejected,
		       r.elapsed_s, r.params[0]);
	else
		printf("%-12s %10zu %9.4f %9.4f %9.4f %9.3f\n", pol, cap, *hr,
		       ratio(r.prefix_hits, r.accesses), *opt_hr, r.elapsed_s);
	if (t->hint_off)
		printf(o->json ? ",\"done_hints\":%llu" : "%27llu done hints found their block\n",
		       (unsigned long long)r.done_hints);
	print_bypassed(o, t, &r);
	print_tenants(o, &r, o->n_quotas[0] > 0);
	if (o->json)
		printf("}\n");
	return 0;
}

static int multi(struct opts *o, const struct kvt_trace *t)
{
	struct kvt_sim_result r, opt;
	size_t total = 0;
	int rc = kvt_sim_run(t, o->tiers, o->n_tiers, &r);
	for (size_t i = 0; i < o->n_tiers; i++)
		total += o->tiers[i].capacity_blocks;
	if (!rc)
		rc = kvt_sim_opt(t, total, &opt);
	if (rc)
		return rc;
	for (size_t i = 0; i < o->n_tiers; i++) {
		const struct kvt_sim_tier_result *x = &r.tier[i];
		const struct kvt_sim_tier *ti = &o->tiers[i];
		unsigned long long bb = o->block_bytes;
		if (o->json)
			printf(
			    "{\"tier\":\"%s\",\"policy\":\"%s\",\"admission\":\"%s\","
			    "\"capacity_blocks\":%zu,\"hit_ratio\":%.6f,\"prefix_hit_ratio\":%.6f,"
			    "\"bytes_promoted\":%llu,\"bytes_demoted\":%llu,\"rejected\":%llu,"
			    "\"quota_rejected\":%llu,\"region_blocks\":%zu,\"params\":\"%s\"}\n",
			    ti->name, ti->policy, ti->admission ? ti->admission : "none",
			    ti->capacity_blocks, ratio(x->hits, r.accesses),
			    ratio(x->prefix_hits, r.accesses),
			    (unsigned long long)x->promoted_blocks * bb,
			    (unsigned long long)x->demoted_blocks * bb,
			    (unsigned long long)x->rejected, (unsigned long long)x->quota_rejected,
			    ti->region_blocks, r.params[i]);
		else { /* --json has the exact byte counts */
			char up[32], down[32];
			printf(
			    "tier %-8s %-10s %10zu blocks  hit %.4f  prefix hit %.4f  promoted %s  "
			    "demoted %s  rejected %llu",
			    ti->name, ti->policy, ti->capacity_blocks, ratio(x->hits, r.accesses),
			    ratio(x->prefix_hits, r.accesses),
			    kvt_fmt_bytes(x->promoted_blocks * bb, up, sizeof(up)),
			    kvt_fmt_bytes(x->demoted_blocks * bb, down, sizeof(down)),
			    (unsigned long long)x->rejected);
			if (ti->region_blocks) /* a log: its regions */
				printf("  (a log of %zu regions of %zu)",
				       ti->capacity_blocks / ti->region_blocks, ti->region_blocks);
			printf("\n");
		}
	}
	if (o->json)
		printf("{\"tier\":\"all\",\"capacity_blocks\":%zu,\"hit_ratio\":%.6f,"
		       "\"prefix_hit_ratio\":%.6f,\"opt_hit_ratio\":%.6f,\"accesses\":%llu,"
		       "\"hits\":%llu,\"prefix_hits\":%llu",
		       total, ratio(r.hits, r.accesses), ratio(r.prefix_hits, r.accesses),
		       ratio(opt.hits, opt.accesses), (unsigned long long)r.accesses,
		       (unsigned long long)r.hits, (unsigned long long)r.prefix_hits);
	else
		printf("all  %zu blocks  hit %.4f  prefix hit %.4f  OPT %.4f\n", total,
		       ratio(r.hits, r.accesses), ratio(r.prefix_hits, r.accesses),
		       ratio(opt.hits, opt.accesses));
	print_bypassed(o, t, &r);
	bool quotas = false;
	for (size_t i = 0; i < o->n_tiers; i++)
		quotas = quotas || o->tiers[i].n_quotas;
	print_tenants(o, &r, quotas);
	if (o->json)
		printf("}\n");
	return 0;
}

static int dump(const char *path, const struct kvt_trace *t)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	int rc = kvt_trace_write(t, f);
	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}

/* --warmup N or P%: sets t->warmup_req, which must leave at least one request to count.
 * @return : 0 or SAID. */
static int set_warmup(const struct opts *o, struct kvt_trace *t)
{
	char *end;
	double v = strtod(o->warmup, &end);
	bool pct = *end == '%';
	/* nan, inf and counts past any trace are refused before the cast (undefined) */
	if (end == o->warmup || (*end && !(pct && !end[1])) ||
	    !(v >= 0 && v < (pct ? 100 : 1e15))) {
		fprintf(stderr, "sim: --warmup %s: not N or P%% (P below 100)\n", o->warmup);
		return SAID;
	}
	if (o->mrc_rate > 0) {
		fprintf(stderr, "sim: --warmup does not apply to --mrc\n");
		return SAID;
	}
	size_t n = pct ? (size_t)(v / 100.0 * (double)t->n_req) : (size_t)v;
	if (n && n >= t->n_req) {
		fprintf(stderr, "sim: --warmup %s: the trace has %zu requests\n", o->warmup,
		        t->n_req);
		return SAID;
	}
	t->warmup_req = n;
	return 0;
}

/* Every policy a run will use is one, and takes its --param words, tried before the trace is
 * read: the single form's --policy list (its words unused by --minisim), or each --tier's.
 * An unknown name in --minisim printed the table's header first, and a refused word stopped
 * the run after it. @return : 0, SAID or -ENOMEM. */
static int policies_known(const struct opts *o)
{
	size_t n = o->n_tiers ? o->n_tiers : o->n_pols;
	for (size_t k = 0; k < n; k++) {
		const char *name = o->n_tiers ? o->tiers[k].policy : o->pols[k];
		const char *const *params = o->n_tiers   ? o->tiers[k].params
		                            : o->minisim ? NULL
		                                         : o->params;
		const struct kvt_policy_ops *ops = kvt_policy_find(name);
		if (!ops) {
			fprintf(stderr, "sim: unknown policy '%s' (see --list-policies)\n", name);
			return SAID;
		}
		struct kvt_policy *pol;
		if (!params || !params[0])
			continue;
		if (ops->create(64, &pol))
			return -ENOMEM;
		int rc = kvt__sim_set_params(ops, pol, params); /* says which it refused */
		ops->destroy(pol);
		if (rc)
			return SAID;
	}
	return 0;
}

int kvt_sim_main(int argc, char **argv)
{
	struct opts o;
	struct kvt_trace t;
	memset(&o, 0, sizeof(o));
	o.cascade = true; /* kvtierd's tiers.placement default */
	int rc = parse(&o, argc, argv);
	if (rc) {
		if (rc < 0)
			usage(stderr);
		return rc < 0 ? 2 : 0;
	}
	if ((rc = policies_known(&o))) {
		if (rc != SAID)
			fprintf(stderr, "sim: %s\n", strerror(-rc));
		return 1;
	}
	rc = o.trace ? kvt_trace_load(o.trace, &t) : kvt_sim_synth(o.synth, o.seed, &t);
	if (rc) {
		fprintf(stderr, "sim: %s: %s\n", o.trace ? o.trace : o.synth,
		        rc == -ENOENT && o.synth
		            ? "no such synthetic trace (zipf, scan, docqa, agent, chat, tenants)"
		            : strerror(-rc));
		return 1;
	}
	if (o.warmup && (rc = set_warmup(&o, &t)))
		goto out;
	if (o.hint_ends >= 0 && (rc = kvt_trace_ends(&t, o.hint_ends, o.seed, o.hint_delay)))
		goto out;
	if (o.bypass && (o.mrc_rate > 0 || o.minisim)) {
		fprintf(stderr, "sim: --bypass applies to replays, not to --mrc or --minisim\n");
		rc = SAID;
		goto out;
	}
	if (o.bypass && (rc = kvt_trace_bypass(&t, o.bypass))) {
		rc = rc == -ENOMEM ? rc : SAID; /* it named the file and what is wrong */
		goto out;
	}
	if (o.engine && (o.mrc_rate > 0 || o.minisim)) {
		fprintf(stderr, "sim: --engine applies to replays, not to --mrc or --minisim\n");
		rc = SAID;
		goto out;
	}
	t.engine = o.engine;
	if (o.streams > 1 && (o.mrc_rate > 0 || o.minisim)) {
		fprintf(stderr, "sim: --streams applies to replays, not to --mrc or --minisim\n");
		rc = SAID;
		goto out;
	}
	t.streams = (size_t)o.streams;
	if (o.dump && (rc = dump(o.dump, &t))) { /* was silent: -ENOENT counted as said */
		fprintf(stderr, "sim: --dump %s: %s\n", o.dump, strerror(-rc));
		rc = SAID;
		goto out;
	}
	if (o.dump && !o.n_caps && !o.n_tiers)
		goto out;
	if (o.n_tiers) {
		rc = multi(&o, &t);
		goto out;
	}
	if (o.mrc_rate > 0 && o.n_caps) {
		rc = kvt__sim_mrc(&t, o.caps, o.n_caps, o.mrc_rate, o.mrc_keys, o.json);
		if (rc || (!o.n_pols && !o.minisim))
			goto out;
	}
	if (o.minisim && o.n_caps) {
		static char dflt[] = KVT_SIM_DEFAULT_POLICY;
		char *one[] = {dflt};
		rc = kvt__sim_minisim(&t, o.caps, o.n_caps, o.n_pols ? o.pols : one,
		                      o.n_pols ? o.n_pols : 1, o.minisim, o.json);
		goto out;
	}
	if (!o.n_pols) {
		static char def[] = KVT_SIM_DEFAULT_POLICY;
		o.pols[o.n_pols++] = def;
	}
	if (!o.n_caps) {
		fprintf(stderr, "sim: --capacity is required\n");
		rc = SAID;
		goto out;
	}
	double hr[MAX_LIST * MAX_LIST], opt[MAX_LIST];
	if (!o.json)
		printf("%-12s %10s %9s %9s %9s %9s\n", "policy", "capacity", "hit", "prefix", "opt",
		       "replay_s");
	for (size_t p = 0; p < o.n_pols && !rc; p++)
		for (size_t c = 0; c < o.n_caps && !rc; c++)
			rc = single(&o, &t, o.pols[p], o.caps[c], &hr[p * MAX_LIST + c], &opt[c]);
	if (!rc && o.plot &&
	    (rc = kvt__sim_plot(o.plot, o.pols, o.n_pols, o.caps, o.n_caps, hr, MAX_LIST, opt))) {
		fprintf(stderr, "sim: --plot %s: %s\n", o.plot, strerror(-rc));
		rc = SAID;
	}
out:
	kvt_trace_free(&t);
	if (rc && rc != SAID)
		fprintf(stderr, "sim: %s\n", strerror(-rc));
	return rc ? 1 : 0;
}
