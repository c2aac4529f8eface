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
	char stats[KVT_MSG_MAX], config[KVT_MSG_MAX], reply[KVT_MSG_MAX];
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

/* config get's value of name (its "name = value" line) into out; "" when absent. */
static void config_value(const struct simd *s, const char *name, char *out, size_t len)
{
	size_t nl = strlen(name);
	out[0] = 0;
	for (const char *p = s->config; *p;) {
		size_t line = strcspn(p, "\n");
		if (line > nl + 3 && !strncmp(p, name, nl) && !strncmp(p + nl, " = ", 3)) {
			snprintf(out, len, "%.*s", (int)(line - nl - 3), p + nl + 3);
			return;
		}
		p += line + (p[line] == '\n');
	}
}

/* The string value of "key" in obj into out. @return : 0 or -ENOENT. */
static int json_str(const char *obj, const char *key, char *out, size_t len)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	const char *p = strstr(obj, pat);
	if (!p)
		return -ENOENT;
	p += strlen(pat);
	snprintf(out, len, "%.*s", (int)strcspn(p, "\""), p);
	return 0;
}

/* The operator's size for the daemon's tier name (--tier NAME=SIZE), or NULL. */
static const char *size_given(struct simd *s, const char *name)
{
	size_t len = strlen(name);
	for (size_t k = 0; k < s->n_given; k++)
		if (!strncmp(s->given[k], name, len) && s->given[k][len] == '=') {
			s->used[k] = true;
			return s->given[k] + len + 1;
		}
	return NULL;
}

/* Whether the operator named another policy than pol for tier: the daemon's parameters are
 * pol's, which another policy may not take (s3fifo's small_ratio is not arc's). */
static bool policy_changed(const struct simd *s, const char *tier, const char *pol)
{
	size_t len = strlen(tier);
	for (size_t k = 0; k < s->n_policies; k++)
		if (!strncmp(s->policies[k], tier, len) && s->policies[k][len] == '=' &&
		    strcmp(s->policies[k] + len + 1, pol))
			return true;
	return false;
}

/* The parameters set for tier's policy (TIER.policy_params, which kvtier policy set keeps), each
 * --param TIER:k=v: the rest are the policy's defaults in the daemon and the replay alike. Not
 * what policy get prints: that is the policy's state too (duel's lead=1 once arc leads), and a
 * replay begins where the daemon began. */
static void policy_params(struct simd *s, const char *tier, const char *pol)
{
	char opt[40], list[KVT_OPT_STR_MAX];
	snprintf(opt, sizeof(opt), "%s.policy_params", tier);
	config_value(s, opt, list, sizeof(list));
	char *save = NULL;
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
	char opt[32], v[64];
	snprintf(opt, sizeof(opt), "%s.admit", tier);
	config_value(s, opt, v, sizeof(v));
	if (v[0] && strcmp(v, "all")) {
		word(s, "--admission");
		word(s, "%s=%s", tier, v);
	}
}

/* One tier of stats' "tiers" array, obj its object: --tier, --policy, --param, --admission. */
static int one_tier(struct simd *s, kvt_client_t *c, const char *obj)
{
	char name[16], pol[64], size[64];
	if (json_str(obj, "name", name, sizeof(name)) || json_str(obj, "policy", pol, sizeof(pol)))
		return -EPROTO;
	snprintf(s->tier[s->n_tiers++], sizeof(s->tier[0]), "%s", name);
	const char *given = size_given(s, name);
	long long cap = cli_json_num(obj, "capacity_bytes");
	char file[32] = "";
	if (!strcmp(name, "nvme")) /* the log's file; stats' capacity is its data area */
		config_value(s, "nvme.bytes", file, sizeof(file));
	if (file[0] && strspn(file, "0123456789") == strlen(file))
		snprintf(size, sizeof(size), "%sB", file);
	else /* nvme.bytes not a count of bytes: the data area, a little short of the file */
		snprintf(size, sizeof(size), "%lldB", cap);
	word(s, "--tier");
	word(s, "%s=%s", name, given ? given : size);
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
	char opt[32], list[KVT_OPT_STR_MAX];
	snprintf(opt, sizeof(opt), "%s.quota", strcmp(tier, "host") ? tier : "tenant");
	config_value(s, opt, list, sizeof(list));
	if (!list[0] || !strcmp(list, "none"))
		return;
	struct quota_walk q = {s, tier};
	char why[KVT_OPT_STR_MAX + 64];
	if (kvt_quota_list_each(list, quota_item, &q, why, sizeof(why)) < 0)
		fprintf(stderr, "kvtier sim --daemon: %s: %s (left out)\n", opt, why);
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
	if (rc || (rc = kvt__client_simple(c, KVT_MSG_CONFIG, "get", s->config, sizeof(s->config))))
		return rc;
	if (!s->engine)
		word(s, "--engine");
	if (!s->given_bytes) {
		uint64_t b = block_bytes(s, c);
		if (!b)
			return -ENODATA;
		word(s, "--block-bytes");
		word(s, "%" PRIu64, b);
	}
	char v[64];
	config_value(s, "tiers.placement", v, sizeof(v));
	if (v[0]) {
		word(s, "--placement");
		word(s, "%s", v);
	}
	const char *p = strstr(s->stats, "\"tiers\":[");
	const char *end = p ? strstr(p, "],\"demoted\"") : NULL;
	if (!end)
		return -EPROTO;
	char obj[4096];
	for (p = strstr(p, "{\"name\":\""); p && p < end && s->n_tiers < SIMD_TIERS;
	     p = strstr(p + 1, "{\"name\":\"")) {
		const char *next = strstr(p + 1, "{\"name\":\"");
		size_t len = (size_t)((next && next < end ? next : end) - p);
		snprintf(obj, sizeof(obj), "%.*s", (int)(len < sizeof(obj) ? len : sizeof(obj) - 1),
		         p);
		if ((rc = one_tier(s, c, obj)))
			return rc;
	}
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
