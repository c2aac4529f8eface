/*
 * fuzz_sim.c -- every policy against traces of any shape, through `kvtier sim`'s own loader and
 * replay: the same bytes the daemon's policies see from engines that do odd things (a block
 * twice in one request, a child before its parent, hints for blocks never seen, tenants that
 * flood, a capacity of one).
 *
 * An input is a policy's parameter words (first byte 2 mod 4: byte 1 picks the policy, the rest
 * is the words of `kvtier policy set TIER NAME words`), a trace's text (0 mod 4: the rest is
 * handed to kvt_trace_load as a file, so the Mooncake and native parsers take it) or, more
 * often useful, a compact program that writes a native trace (first byte odd):
 *
 *   byte 1      capacity in blocks, 1 + b % 24
 *   byte 2      the layout: bits 0-1 admission (none, tinylfu, second_touch), bit 2 engine
 *               mode, bit 3 two tiers and bit 4 three (below tier 0: second_touch lru, then a
 *               log filled on eviction), bit 5 quotas on tier 0 (guarantees and maxima from
 *               byte 3), bit 6 one parameter of each policy set (byte 3: which, and where
 *               in its range), bit 7 the second tier as kvtierd's nvme log (regions of a
 *               quarter of its capacity: region_blocks; clock when byte 4's bit 7 is set, else
 *               fifo; with bit 5 and byte 4's bit 6, the quotas on it too)
 *   byte 3      the quotas' and the parameter's draws
 *   byte 4      the policy of tier 0 (the registry's, b % how many)
 *   then        b < 0xf0: block b % 40 (0xef: id 2^64 - 1) in the current request;
 *               0xf0-0xf7: a new request of tenant b - 0xf0; 0xf8 v: "done v % 40";
 *               0xf9-0xff: a new request of tenant 0
 *
 * After every replay: hits <= OPT at the tiers' summed capacity, prefix hits <= hits, the
 * tiers' hits add up to the whole, and OPT by its heap equals OPT by a direct scan. A trace the
 * loader refuses must have been refused with -EINVAL, -ERANGE or -ENODATA (never a crash).
 * Parameter words are refused with a reason or taken, and what `policy get` then prints sets
 * every parameter to the same value (a daemon's config written out reloads as it ran).
 *
 * Built as a libFuzzer target (`make fuzz`) and, by default, as a ctest program that replays
 * tests/fuzz/corpus-sim and a fixed-seed stream of random programs.
 */
#include "policy/policy.h"
#include "sim.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ACC 4096 /* longer traces are loaded, not replayed (each policy runs) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char trace_path[64];

/* The registry's policy b % (how many there are). */
static const struct kvt_policy_ops *pick_policy(unsigned b)
{
	unsigned n = 0;
	while (kvt_policy_at(n))
		n++;
	return kvt_policy_at(b % n);
}

static void fail(const char *what, const char *policy, unsigned long long a, unsigned long long b)
{
	fprintf(stderr, "fuzz_sim: %s (%s): %llu, %llu\n", what, policy ? policy : "-", a, b);
	abort();
}

/* The compact program as a native trace. @return : its length. */
static size_t write_program(const uint8_t *p, size_t n, char *out, size_t cap)
{
	size_t len = (size_t)snprintf(out, cap, "0");
	unsigned long long ms = 0;
	for (size_t i = 0; i < n && len + 48 < cap; i++) {
		uint8_t b = p[i];
		if (b == 0xef)
			len += (size_t)snprintf(out + len, cap - len, " 18446744073709551615");
		else if (b < 0xf0)
			len += (size_t)snprintf(out + len, cap - len, " %u", b % 40u);
		else if (b == 0xf8 && i + 1 < n)
			len += (size_t)snprintf(out + len, cap - len, "\ndone %u\n%llu",
			                        p[++i] % 40u, ++ms);
		else if (b < 0xf8)
			len +=
			    (size_t)snprintf(out + len, cap - len, "\n%llu t=%u", ++ms, b - 0xf0u);
		else
			len += (size_t)snprintf(out + len, cap - len, "\n%llu", ++ms);
	}
	out[len++] = '\n';
	return len;
}

static int load(const void *text, size_t len, struct kvt_trace *t)
{
	FILE *f = fopen(trace_path, "w");
	if (!f || fwrite(text, 1, len, f) != len || fclose(f))
		fail("cannot write the trace file", trace_path, len, 0);
	int rc = kvt_trace_load(trace_path, t);
	if (rc && rc != -EINVAL && rc != -ERANGE && rc != -ENODATA)
		fail("the loader failed oddly", NULL, (unsigned long long)-rc, len);
	return rc;
}

/* "k=v" for parameter draw % n of policy ops, at draw's place in its range; "" for none. */
static void param_word(const struct kvt_policy_ops *ops, uint8_t draw, char *out, size_t cap)
{
	struct kvt_policy *p;
	struct kvt_policy_param pa;
	size_t n = 0;
	out[0] = 0;
	if (!ops->get_param || ops->create(16, &p))
		return;
	while (!ops->get_param(p, n, &pa))
		n++;
	if (n && !ops->get_param(p, draw % n, &pa)) {
		double v = pa.lo + (pa.hi - pa.lo) * (draw / 255.0);
		if (pa.lo == (double)(long long)pa.lo && pa.hi == (double)(long long)pa.hi)
			v = (double)(long long)v;
		snprintf(out, cap, "%s=%.9g", pa.name, v);
	}
	ops->destroy(p);
}

static void replay(struct kvt_trace *t, size_t cap, uint8_t layout, uint8_t draw, uint8_t pick)
{
	static const char *const adm[] = {"none", "tinylfu", "second_touch"};
	size_t n_tiers = layout & 0x10 ? 3 : layout & 0x08 ? 2 : 1;
	size_t total = cap + (n_tiers > 1 ? 2 * cap : 0) + (n_tiers > 2 ? 4 * cap : 0);
	struct kvt_sim_result opt, naive;
	if (kvt_sim_opt(t, total, &opt) || kvt_sim_opt_naive(t, total, &naive))
		fail("OPT refused a loaded trace", NULL, t->n_req, t->n_acc);
	if (opt.hits != naive.hits || opt.prefix_hits != naive.prefix_hits)
		fail("OPT two ways disagrees", NULL, opt.hits, naive.hits);
	t->engine = layout & 0x04;
	struct kvt_sim_quota q[3];
	for (uint32_t k = 0; k < 3; k++) {
		size_t g = (draw >> (2 * k) & 3) * cap / 4;
		q[k] = (struct kvt_sim_quota){.tenant = k,
		                              .guaranteed_blocks = g,
		                              .max_blocks = g + 1 + (draw >> 6) * cap / 3};
	}
	const struct kvt_policy_ops *ops = pick_policy(pick);
	char word[96];
	const char *params[2] = {word, NULL};
	param_word(ops, draw, word, sizeof(word));
	struct kvt_sim_tier tiers[3] = {{.name = "host",
	                                 .policy = ops->name,
	                                 .admission = adm[layout % 3],
	                                 .params = layout & 0x40 && word[0] ? params : NULL,
	                                 .capacity_blocks = cap,
	                                 .quotas = layout & 0x20 ? q : NULL,
	                                 .n_quotas = layout & 0x20 ? 3 : 0},
	                                {.name = "nvme",
	                                 .policy = "lru",
	                                 .admission = "second_touch",
	                                 .capacity_blocks = 2 * cap},
	                                {.name = "rocksdb",
	                                 .policy = "fifo",
	                                 .capacity_blocks = 4 * cap,
	                                 .fill_on_evict = true}};
	if (layout & 0x80) { /* nvme as kvtierd's log, a region at a time (nvmelog.c) */
		tiers[1].policy = pick & 0x80 ? "clock" : "fifo";
		tiers[1].region_blocks = cap > 4 ? cap / 4 : 1;
		if (layout & 0x20 && pick & 0x40) /* and nvme.quota: the same accounts */
			tiers[1].quotas = q, tiers[1].n_quotas = 3;
	}
	struct kvt_sim_result r;
	int rc = kvt_sim_run(t, tiers, n_tiers, &r);
	t->engine = false;
	if (rc)
		fail("a replay failed", ops->name, (unsigned long long)-rc, layout);
	if (r.hits > opt.hits)
		fail("more hits than OPT", ops->name, r.hits, opt.hits);
	if (r.prefix_hits > r.hits || r.hits > r.accesses || r.accesses != t->n_acc)
		fail("prefix hits, hits and accesses out of order", ops->name, r.prefix_hits,
		     r.hits);
	uint64_t sum = 0, psum = 0;
	for (size_t i = 0; i < n_tiers; i++)
		sum += r.tier[i].hits, psum += r.tier[i].prefix_hits;
	if (sum != r.hits || psum != r.prefix_hits)
		fail("the tiers' hits do not add up", ops->name, sum, r.hits);
}

static void no_meta(void *arg, uint32_t id, struct kvt_policy_meta *out)
{
	(void)arg, (void)id;
	memset(out, 0, sizeof(*out));
}

/* text as `kvtier policy set TIER NAME text` on policy ops: refused with a reason, or taken;
 * taken, the words `policy get` then prints set every parameter to the same value. */
static void policy_words(const struct kvt_policy_ops *ops, const char *text)
{
	char err[256] = "", words[1024], again[1024], line[KVT_POLICY_LINE_MAX],
	     line2[KVT_POLICY_LINE_MAX];
	int rc = kvt_policy_check(ops->name, text, err, sizeof(err));
	if (rc && (!err[0] || (rc != -EINVAL && rc != -ENOENT && rc != -ERANGE)))
		fail("policy words refused oddly", ops->name, (unsigned long long)-rc, strlen(err));
	if (rc || strlen(text) >= sizeof(words)) /* refused, or longer than any config line */
		return;
	memcpy(words, text, strlen(text) + 1);
	const struct kvt_policy_ops *cur = ops;
	struct kvt_policy *p;
	if (ops->create(64, &p))
		fail("create failed", ops->name, 0, 0);
	if (kvt_policy_set(&cur, &p, 0, ops->name, words, 64, no_meta, NULL, err, sizeof(err)))
		fail("words checked but not set", ops->name, 0, 0);
	struct kvt_policy_param was[16], now;
	size_t n = 0;
	while (n < 16 && ops->get_param && !ops->get_param(p, n, &was[n]))
		n++;
	kvt_policy_params_str(cur, p, line, sizeof(line));
	snprintf(again, sizeof(again), "defaults%s", line);
	if (kvt_policy_set(&cur, &p, 0, ops->name, again, 64, no_meta, NULL, err, sizeof(err))) {
		fprintf(stderr, "fuzz_sim: '%s' -> '%s': %s\n", text, again, err);
		fail("policy get's words not taken back", ops->name, 0, 0);
	}
	for (size_t i = 0; i < n; i++)
		if (ops->get_param(p, i, &now) || now.value != was[i].value) {
			fprintf(stderr,
			        "fuzz_sim: '%s': %s=%.17g printed as '%s' reads back %.17g\n", text,
			        was[i].name, was[i].value, line, now.value);
			fail("policy get's words set another value", ops->name, i, n);
		}
	kvt_policy_params_str(cur, p, line2, sizeof(line2));
	if (strcmp(line, line2)) {
		fprintf(stderr, "fuzz_sim: '%s' then '%s'\n", line, line2);
		fail("policy get's words print otherwise when taken back", ops->name, 0, 0);
	}
	cur->destroy(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char text[1 << 16];
	struct kvt_trace t;
	if (!trace_path[0])
		snprintf(trace_path, sizeof(trace_path), "/dev/shm/kvt-fuzz-sim.%d", (int)getpid());
	if (size < 5)
		return 0;
	int rc;
	if (data[0] % 4 == 2) {
		size_t len = size - 2 < sizeof(text) - 1 ? size - 2 : sizeof(text) - 1;
		memcpy(text, data + 2, len);
		text[len] = 0;
		policy_words(pick_policy(data[1]), text);
		return 0;
	}
	if (data[0] % 2 == 0)
		rc = load(data + 1, size - 1, &t);
	else
		rc = load(text, write_program(data + 5, size - 5, text, sizeof(text)), &t);
	if (rc)
		return 0;
	if (t.n_acc && t.n_acc <= MAX_ACC)
		replay(&t, 1 + data[1] % 24u, data[2], data[3], data[4]);
	kvt_trace_free(&t);
	return 0;
}

#ifndef KVT_LIBFUZZER
#include "fuzz_corpus.h"

static uint64_t next(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return *x;
}

/* Parameter words for a random policy: its own names (or a stranger's) with edge values.
 * @return : the input's length. */
static size_t random_words(uint64_t *x, uint8_t *buf)
{
	static const char *const values[] = {"0",
	                                     "1",
	                                     "-1",
	                                     "0.5",
	                                     "1e308",
	                                     "-1e308",
	                                     "nan",
	                                     "inf",
	                                     "-inf",
	                                     "1e-320",
	                                     "0x10",
	                                     "1e15",
	                                     "007",
	                                     "",
	                                     "2.5e",
	                                     "1,5",
	                                     " ",
	                                     "=",
	                                     "4294967297",
	                                     "18446744073709551616",
	                                     "0.9999999999",
	                                     "defaults"};
	size_t len = 2, n_par = 0;
	buf[0] = 2;
	buf[1] = (uint8_t)next(x);
	const struct kvt_policy_ops *ops = pick_policy(buf[1]);
	struct kvt_policy *p;
	struct kvt_policy_param pa;
	if (ops->create(16, &p))
		return len;
	while (ops->get_param && !ops->get_param(p, n_par, &pa))
		n_par++;
	for (int w = 0, words = 1 + (int)(next(x) % 4); w < words; w++) {
		const char *name = "ratio";
		if (n_par && next(x) % 8 && !ops->get_param(p, next(x) % n_par, &pa))
			name = pa.name;
		const char *v = values[next(x) % (sizeof(values) / sizeof(values[0]))];
		char word[96];
		if (next(x) % 3 == 0) /* a value inside the range, written at random precision */
			snprintf(word, sizeof(word), "%s=%.*g ", name, (int)(next(x) % 12),
			         n_par ? pa.lo + (pa.hi - pa.lo) * (double)(next(x) % 1000) / 999
			               : 0);
		else
			snprintf(word, sizeof(word), "%s=%s ", name, v);
		if (w == 0 && next(x) % 8 == 0)
			len += (size_t)snprintf((char *)buf + len, 1022 - len, "defaults ");
		len += (size_t)snprintf((char *)buf + len, 1022 - len, "%s", word);
	}
	ops->destroy(p);
	return len;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 3000;
	long n = 0;
	if (argc > 2 && (n = fuzz_replay_corpus(argv[2])) == 0) {
		fprintf(stderr, "corpus %s: empty\n", argv[2]);
		return 1;
	}
	/* KVT_FUZZ_SEED=N draws another stream of programs */
	const char *seed = getenv("KVT_FUZZ_SEED");
	uint64_t x =
	    0x2545F4914F6CDD1Dull ^ (seed ? strtoull(seed, NULL, 10) * 0x9E3779B97F4A7C15ull : 0);
	static uint8_t buf[1024];
	for (long i = 0; i < iters; i++) {
		size_t len = 5 + (size_t)(i % 400);
		for (size_t j = 0; j < len; j++)
			buf[j] = (uint8_t)next(&x);
		buf[0] |= 1; /* programs: random text rarely parses */
		if (i % 4 == 3)
			len = random_words(&x, buf);
		LLVMFuzzerTestOneInput(buf, len);
	}
	unlink(trace_path);
	printf("%ld corpus inputs and %ld programs replayed, no property broken\n", n, iters);
	return 0;
}
#endif
