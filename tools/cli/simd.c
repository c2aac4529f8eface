/*
 * simd.c -- kvtier sim --daemon: replay a trace through the running kvtierd's layout.
 *
 * kvtier sim models the daemon's tiers when told them (--tier, --policy, --param, --admission,
 * --placement, --quota, --block-bytes); an operator who asks "what would my daemon serve with
 * host twice as big, or arc on host" had to spell every one from kvtier stats and kvtier config
 * get. --daemon asks the daemon and writes those words itself, then the operator's own after
 * them, which change what they name (a later --policy host=P wins, and the daemon's parameters
 * of host's policy are left out when P is another; --tier host=SIZE resizes host in place), and
 * runs kvtier-sim with them. --show prints the command instead.
 *
 * Where each word comes from, all from one daemon: the tiers and their order, host's and
 * rocksdb's capacity and each policy's name as it runs (an "auto" policy is what stats shows)
 * from stats; nvme's size from nvme.bytes, since the simulator lays the log out from the file's
 * bytes as the tier does (stats' capacity is the log's data area); each policy's parameters as
 * set (host.policy_params, rocksdb.policy_params; a replay starts the policy as the daemon
 * did); host's running admission (policy get), nvme.admit and rocksdb.admit; tiers.placement;
 * the quotas of tenant.quota, nvme.quota and rocksdb.quota, each tenant by its key, as a
 * recording's t= names it (a uid, or a tenant.map name's 0x80000000 | hash); the block bytes from
 * the namespaces kvtier inspect lists (the chunk size holding most chunks, with a note when
 * there are several).
 * --engine is added: a request reads its leading hits and puts the rest, as kvtierd serves one.
 *
 * Not carried: host.dirty_pct, host.keep_pct, promote.wait_ms and the other options of time
 * (the simulator has no clock; docs/policies.md measures what they cost).
 */
#include "cli.h"
#include "core/options.h"
#include "core/tenants.h"
#include "core/util.h"
#include "ipc/proto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIMD_WORDS 160
#define SIMD_WORD  320
#define SIMD_TIERS 4

struct simd {
	char words[SIMD_WORDS][SIMD_WORD];
	size_t n;
	int err;                       /* a word that did not fit: -E2BIG */
	const char *given[SIMD_TIERS]; /* the operator's --tier NAME=SIZE words */
	bool used[SIMD_TIERS];         /* given[k] named one of the daemon's tiers */
	size_t n_given;
	const char *policies[SIMD_WORDS]; /* the operator's --policy TIER=P words */
	size_t n_policies;
	char *user[SIMD_WORDS]; /* the operator's words but those, after the daemon's */
	size_t n_user;
	bool show, engine, given_bytes; /* --show; --engine, --block-bytes given */
	char tier[SIMD_TIERS][16];      /* the daemon's tiers, top first */
	size_t n_tiers;
	struct kvt_options opts; /* the daemon's, as config get prints them */
	char stats[KVT_MSG_MAX], reply[KVT_MSG_MAX];
};

__attribute__((format(printf, 2, 3))) static void word(struct simd *s, const char *fmt, ...)
{
	if (s->n == SIMD_WORDS) {
		s->err = -E2BIG;
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(s->words[s->n], SIMD_WORD, fmt, ap);
	va_end(ap);
	if (w < 0 || w >= SIMD_WORD)
		s->err = -E2BIG;
	else
		s->n++;
}

/* The daemon's option TIER.WHAT (tenant.quota for host's quota), "" when there is none. */
static const char *tier_opt(const struct simd *s, const char *tier, const char *what)
{
	char name[48];
	snprintf(name, sizeof(name), "%s.%s",
	         strcmp(tier, "host") || strcmp(what, "quota") ? tier : "tenant", what);
	int id = kvt_opt_find(name);
	return id < 0 ? "" : kvt_opt_str(&s->opts, (enum kvt_opt_id)id);
}

/* The last of words[0..n) that is "name=VALUE": its VALUE, or NULL; *at gets its index. */
static const char *named(const char *const *words, size_t n, const char *name, size_t *at)
{
	size_t len = strlen(name);
	for (size_t k = n; k-- > 0;)
		if (!strncmp(words[k], name, len) && words[k][len] == '=') {
			*at = k;
			return words[k] + len + 1;
		}
	return NULL;
}

/* The operator's size for the daemon's tier name (--tier NAME=SIZE), or NULL. */
static const char *size_given(struct simd *s, const char *name)
{
	size_t k;
	const char *size = named(s->given, s->n_given, name, &k);
	if (size)
		s->used[k] = true;
	return size;
}

/* Whether the operator named another policy than pol for tier: the daemon's parameters are
 * pol's, which another policy may not take (s3fifo's small_ratio is not arc's). */
static bool policy_changed(const struct simd *s, const char *tier, const char *pol)
{
	size_t k;
	const char *p = named(s->policies, s->n_policies, tier, &k);
	return p && strcmp(p, pol);
}

/* The parameters set for tier's policy (TIER.policy_params, which kvtier policy set keeps), each
 * --param TIER:k=v: the rest are the policy's defaults in the daemon and the replay alike. Not
 * what policy get prints: that is the policy's state too (duel's lead=1 once arc leads), and a
 * replay begins where the daemon began. */
static void policy_params(struct simd *s, const char *tier, const char *pol)
{
	char list[KVT_OPT_STR_MAX], *save = NULL;
	snprintf(list, sizeof(list), "%s", tier_opt(s, tier, "policy_params"));
	for (char *w = strtok_r(list, " ", &save); w && !policy_changed(s, tier, pol);
	     w = strtok_r(NULL, " ", &save)) {
		word(s, "--param");
		word(s, "%s:%s", tier, w);
	}
}

/* Host's admission filter as it runs (host.admit, or kvtier policy set host NAME admit=A):
 * policy get host ends with admit=A when there is one. */
static int host_admission(struct simd *s, kvt_client_t *c)
{
	int rc = kvt__client_simple(c, KVT_MSG_POLICY, "get host", s->reply, sizeof(s->reply));
	if (rc)
		return rc;
	const char *a = strstr(s->reply, " admit=");
	if (a && strncmp(a + 7, "none", 4)) {
		word(s, "--admission");
		word(s, "host=%.*s", (int)strcspn(a + 7, " \n"), a + 7);
	}
	return 0;
}

/* A lower tier's admission, TIER.admit: all (none) or second_touch. */
static void admission(struct simd *s, const char *tier)
{
	const char *v = tier_opt(s, tier, "admit");
	if (v[0] && strcmp(v, "all")) {
		word(s, "--admission");
		word(s, "%s=%s", tier, v);
	}
}

/* One tier of stats' "tiers" array, obj its object: --tier, --policy, --param, --admission. */
static int one_tier(struct simd *s, kvt_client_t *c, const char *obj)
{
	char name[16], pol[64];
	if (cli_json_str(obj, "name", name, sizeof(name)) ||
	    cli_json_str(obj, "policy", pol, sizeof(pol)))
		return -EPROTO;
	snprintf(s->tier[s->n_tiers++], sizeof(s->tier[0]), "%s", name);
	const char *given = size_given(s, name);
	/* nvme: the log's file (stats' capacity is its data area, a little short of it) */
	long long bytes =
	    strcmp(name, "nvme") ? 0 : (long long)kvt_opt_u64(&s->opts, KVT_OPT_NVME_BYTES);
	if (!bytes)
		bytes = cli_json_num(obj, "capacity_bytes");
	word(s, "--tier");
	if (given)
		word(s, "%s=%s", name, given);
	else
		word(s, "%s=%lldB", name, bytes);
	word(s, "--policy");
	word(s, "%s=%s", name, pol);
	if (strcmp(name, "nvme")) /* nvme's fifo and clock have no parameters */
		policy_params(s, name, pol);
	return strcmp(name, "host") ? (admission(s, name), 0) : host_admission(s, c);
}

struct quota_walk {
	struct simd *s;
	const char *tier;
};

/* One quota item as --quota TIER:KEY=G/M: a recording's t= is the tenant's key. */
static int quota_item(void *arg, uint32_t key, uint64_t g, uint64_t m)
{
	struct quota_walk *q = arg;
	word(q->s, "--quota");
	if (m == UINT64_MAX)
		word(q->s, "%s:%" PRIu32 "=%" PRIu64 "B/-", q->tier, key, g);
	else
		word(q->s, "%s:%" PRIu32 "=%" PRIu64 "B/%" PRIu64 "B", q->tier, key, g, m);
	return 0;
}

/* TIER's quota option (tenant.quota for host) as --quota words. */
static void quotas(struct simd *s, const char *tier)
{
	const char *list = tier_opt(s, tier, "quota");
	if (!list[0] || !strcmp(list, "none"))
		return;
	struct quota_walk q = {s, tier};
	char why[KVT_OPT_STR_MAX + 64];
	if (kvt_quota_list_each(list, quota_item, &q, why, sizeof(why)) < 0)
		fprintf(stderr, "kvtier sim --daemon: %s's quota: %s (left out)\n", tier, why);
}

/* The chunk size of the namespaces kvtier inspect lists that holds the most chunks, summed
 * over the namespaces of each size. @return : its bytes, or 0 when there is no namespace. */
static uint64_t block_bytes(struct simd *s, kvt_client_t *c)
{
	if (kvt__client_simple(c, KVT_MSG_INSPECT, "inspect", s->reply, sizeof(s->reply)))
		return 0;
	uint64_t sizes[8], held[8];
	size_t n = 0, best = 0;
	for (char *line = strchr(s->reply, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
		char ns[40];
		unsigned tenant, tokens;
		uint64_t bytes, chunks;
		if (sscanf(line + 1, "%39s %u %u %" SCNu64 " %" SCNu64, ns, &tenant, &tokens,
		           &bytes, &chunks) != 5)
			continue;
		size_t k = 0;
		while (k < n && sizes[k] != bytes)
			k++;
		if (k == n && n == 8)
			continue; /* a ninth size: rare enough to leave out of the count */
		if (k == n)
			sizes[n] = bytes, held[n++] = 0;
		held[k] += chunks;
		best = held[k] > held[best] ? k : best;
	}
	if (n > 1)
		fprintf(
		    stderr,
		    "kvtier sim --daemon: namespaces of %zu chunk sizes; the blocks are %" PRIu64
		    " bytes, the size holding most chunks (--block-bytes N to choose)\n",
		    n, sizes[best]);
	return n ? sizes[best] : 0;
}

/* The daemon's words, in s. @return : 0, -EPROTO (stats not as expected), -ENODATA (no block
 * size: no namespace and none given), or the connection's error. */
static int daemon_words(struct simd *s, kvt_client_t *c)
{
	int rc = kvt__client_simple(c, KVT_MSG_STATS, NULL, s->stats, sizeof(s->stats));
	if (rc || (rc = kvt__client_simple(c, KVT_MSG_CONFIG, "get", s->reply, sizeof(s->reply))))
		return rc;
	/* config get prints a config file: read back through the one options table */
	kvt_opts_defaults(&s->opts);
	char *save = NULL;
	for (char *line = strtok_r(s->reply, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		kvt_opts_set_pair(&s->opts, line); /* the daemon's own values: taken as they are */
	if (!s->engine)
		word(s, "--engine");
	if (!s->given_bytes) {
		uint64_t b = block_bytes(s, c);
		if (!b)
			return -ENODATA;
		word(s, "--block-bytes");
		word(s, "%" PRIu64, b);
	}
	word(s, "--placement");
	word(s, "%s", kvt_opt_str(&s->opts, KVT_OPT_TIERS_PLACEMENT));
	char obj[4096];
	for (const char *t = NULL, *end;
	     s->n_tiers < SIMD_TIERS && cli_json_tier(s->stats, &t, &end);) {
		size_t len = (size_t)(end - t);
		snprintf(obj, sizeof(obj), "%.*s", (int)KVT_MIN(len, sizeof(obj) - 1), t);
		if ((rc = one_tier(s, c, obj)))
			return rc;
	}
	if (!s->n_tiers)
		return -EPROTO;
	for (size_t k = 0; k < s->n_tiers; k++)
		quotas(s, s->tier[k]);
	return s->err;
}

/* The operator's words (argv[1..]): --daemon and --show taken out, --tier NAME=SIZE kept for
 * the daemon's tier of that name, the rest to follow the daemon's. @return : 0, KVT_CLI_SAID
 * (a --policy list, said), -E2BIG. */
static int operator_words(struct simd *s, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
		s->show |= !strcmp(a, "--show");
		s->engine |= !strcmp(a, "--engine");
		s->given_bytes |= !strcmp(a, "--block-bytes");
		if (!strcmp(a, "--daemon") || !strcmp(a, "--show"))
			continue;
		if (!strcmp(a, "--policy") && !strchr(v, '=')) {
			fprintf(stderr,
			        "kvtier sim --daemon: --policy %s: the daemon names each tier's "
			        "policy; --policy TIER=P changes one\n",
			        v);
			return KVT_CLI_SAID;
		}
		if (!strcmp(a, "--policy") && s->n_policies < SIMD_WORDS)
			s->policies[s->n_policies++] = v;
		if (!strcmp(a, "--tier") && s->n_given < SIMD_TIERS && strchr(v, '=')) {
			s->given[s->n_given++] = argv[++i];
			continue;
		}
		if (s->n_user == SIMD_WORDS)
			return -E2BIG;
		s->user[s->n_user++] = argv[i];
	}
	return 0;
}

int cli_sim_daemon(const char *sock, int argc, char **argv)
{
	static struct simd s;
	memset(&s, 0, sizeof(s));
	int rc = operator_words(&s, argc, argv);
	if (rc)
		return rc;
	kvt_client_t *c;
	if ((rc = kvt_connect(sock, &c))) {
		fprintf(stderr, "kvtier sim --daemon: cannot reach kvtierd: %s\n",
		        kvt_strerror(rc));
		return KVT_CLI_SAID;
	}
	rc = daemon_words(&s, c);
	kvt_close(c);
	if (rc == -ENODATA) {
		fprintf(stderr,
		        "kvtier sim --daemon: kvtierd holds no namespace, so its chunk size "
		        "is unknown: give --block-bytes N\n");
		return KVT_CLI_SAID;
	}
	if (rc)
		return rc;
	for (size_t k = 0; k < s.n_given; k++)
		if (!s.used[k]) {
			fprintf(stderr,
			        "kvtier sim --daemon: --tier %s: kvtierd has no such tier (kvtier "
			        "stats "
			        "lists them); --tier NAME=SIZE resizes one of its own\n",
			        s.given[k]);
			return KVT_CLI_SAID;
		}
	static char *out[2 * SIMD_WORDS + 2];
	size_t n = 0;
	out[n++] = "sim";
	for (size_t k = 0; k < s.n; k++)
		out[n++] = s.words[k];
	for (size_t k = 0; k < s.n_user; k++)
		out[n++] = s.user[k];
	out[n] = NULL;
	FILE *f = s.show ? stdout : stderr;
	fprintf(f, "%skvtier", s.show ? "" : "kvtier sim --daemon runs: ");
	for (size_t k = 0; k < n; k++)
		fprintf(f, " %s", out[k]);
	fprintf(f, "\n");
	return s.show ? 0 : cli_exec_sibling("sim", (int)n, out);
}
