/*
 * conv.c -- "conv": conversation-aware eviction by learned reuse-time distributions.
 *
 * What it predicts. A chunk is reused when its conversation comes back (the next turn re-reads
 * the whole prefix) or when another request shares it. The policy learns online, per class of
 * chunk, the distribution of the time X (in policy events) from a chunk's access to its next
 * reuse, from the whole access stream: a resident chunk's reuse is seen in on_access, an
 * evicted chunk's in on_insert through a history of evicted chunks (a direct-mapped table keyed
 * by key_hash, so the estimate does not depend on what this policy chose to keep -- LHD's
 * small-cache blind spot). Overwritten history entries are censored observations, so the
 * per-class survival curve S(x) = P(X > x) is a Kaplan-Meier estimate over log-spaced age bins.
 *
 * What it keeps. From S it derives, for each (class, age bin), the hit density of keeping the
 * chunk to a horizon h: P(reuse in (a, h]) / E[space-time spent until the reuse or h], the
 * expected hits per slot-event (LHD's measure, with the true rather than the observed hit
 * distribution). The horizon is the reuse distance g up to which an optimal cache of this size
 * can afford to keep reuses, E[X; X <= g] = capacity per event, from the pooled distribution
 * (`horizon` divides the capacity in that equation; default 1). Sparse classes lean on the
 * pooled distribution (a prior worth 16 observations).
 *
 * Victims. Within a class the density depends on the age alone, so residents sit in one list
 * per class ordered by last use (a chunk used right after its parent goes behind the parent,
 * so a chain offers its tip first); each class offers its oldest and newest entry and the
 * lowest density goes. With `leaf_first` (default 1) an entry with resident children counts
 * double, so prefixes are trimmed from the tip; 0 optimises block hits alone. An *orphan*, a
 * chunk past the first whose parent this tier does not hold, serves no prefix hit until its
 * parent is back (an engine uses only a request's leading run of hits): its density is
 * multiplied by `orphan` (default 0.5, the mirror of leaf_first; 0: orphans go first, 1: they
 * count like any other). On the Mooncake trace 0.5 raises the prefix hit ratio by 0.011 /
 * 0.017 at 1,024 / 4,096 blocks and loses no block hits; 0 gains up to 0.022 of prefix hits
 * for 0.003 of block hits and a third more time per victim (docs/policies.md). A parent is
 * looked up only for an end whose score could win as an orphan's.
 *
 * Strict prefixes (`strict`, default 1). The entry the scores pick stands for its subtree: the
 * victim is a leaf below it, reached through each chunk's list of children, so an
 * ancestor never goes before its descendants and no orphan is made; and the chunks the request
 * in flight has read or put (since the last depth-0 chunk) are passed over while anything else
 * can go, so a request does not evict the prefix it is extending. Without it (strict=0, the
 * policy until 2026-12-03) the scores alone decide: on Mooncake's second real trace
 * (synthetic_trace.jsonl) conv served 0.028 / 0.157 of accesses as prefix hits at 1,024 / 4,096
 * blocks, below LRU's 0.084 / 0.237, because young chains' roots scored lowest and a request's
 * inserts evicted their own parents; strict reads 0.083 / 0.240. On the conversation trace its
 * prefix hits rise (0.067 / 0.131 / 0.278 -> 0.075 / 0.144 / 0.284) and its block hits fall at
 * 1,024 and 4,096 (0.082 / 0.152 -> 0.075 / 0.144): the block hits it gives up were hits no
 * engine can use (docs/policies.md, "A thirteenth look").
 *
 * Engines at once (on_stream). What a request is -- its start at a depth-0 chunk, the chunks it
 * has touched, the chunk it touched last (a hit's parent), its pending chunks -- is kept per
 * stream: kvtierd names the connection each get and put comes from, `kvtier sim --streams`
 * the simulated engine. Without it a second engine's request ended the first's, so the first
 * engine's put, made after its prefill while others read and put, found its prefix unprotected
 * and its newest chunks tips. With 16 engines on Mooncake's second trace that put conv below
 * LRU in prefix hits (0.082 / 0.224 against 0.089 / 0.240 at 1,024 / 4,096 blocks); per stream
 * it reads 0.095 / 0.244, and on the conversation trace 0.063 / 0.142 / 0.283 for 0.064 /
 * 0.143 / 0.283 (docs/policies.md, "A fourteenth look"). 64 streams are told apart; more share.
 *
 * Classes come from the prefix tree and the access stream, nothing fitted to a trace:
 *  - returns along the chain (0, 1, 2, 3+): a new chunk inherits its parent's count, plus one
 *    when the parent was itself re-accessed -- the chunk extends a conversation that came back
 *    (a new turn), so the count is the conversation's turn number;
 *  - reuses of the chunk itself (0, 1, 2, 3-5, 6+: the frequency that keyed workloads
 *    without prefix structure live on);
 *  - whether it is a tip: its request has ended and no later chunk was ever chained to it (a
 *    prompt's last, often partial, chunk; it rarely returns). A chunk is not a tip while its
 *    request may still extend it: the chunks inserted since the last request began are pending,
 *    and become tips (when childless) as the next request begins -- a depth-0 chunk is accessed
 *    or inserted -- or when 4,096 are pending. A chunk gets a child when one is chained to it on
 *    insert, or when a hit follows it at the next depth (its child stayed resident while it was
 *    evicted and re-inserted, so the chain link was lost);
 *  - the conversation's last gap, relative to the capacity c: none, < c, < 2c, < 4c, < 8c, more
 *    (a new chunk takes its parent's when the parent was just reused).
 *  - chunks an engine said it is done with (cv_done) form classes of their own, by reuses.
 *
 * Links. A chunk names its parent by key hash, found through a map of the residents by key
 * hash (parent_of()), never by id: the ids are the caller's, and kvtierd gives a removed
 * chunk's id to the next chunk it stores, so the policy's choices depend on the chunks alone
 * and the daemon's replay of a trace equals the simulator's (`kvtier bench trace`). A parent's
 * list of children (for strict) holds ids, which is safe because a chunk leaves it when removed;
 * each child found there is checked against its own parent link.
 *
 * Cost: insert, access and removal O(1) plus one history probe and one map probe (finalising a
 * request's pending chunks is O(1) per chunk, once); the density table (245 classes x 96 bins)
 * is rebuilt every 4,096 events (~15 ns per event amortised). A victim is the best of the two
 * ends of every class list, and with strict a walk down to a leaf (a map probe per level). The
 * scan reads the ends from a mirror (struct ends), one line per class, with each end's density
 * and orphan status kept until its age leaves its bin or a chunk of its parent's key hash comes
 * or goes, and passes over the classes (in groups of four) whose bound -- the least score their
 * ends can have -- is above the best found so far: a victim looks at ~15 classes of 245, and the
 * same one as a look at every class (test_conv_ends). On the Mooncake trace at 4,096 blocks
 * that halved the replay's instructions (3.84 -> 1.89 G) and cut its first-level cache misses
 * 14-fold (docs/policies.md). Memory: 52 bytes per id (12 of them the child lists), 8-16 bytes
 * per resident (the map), 16 bytes per history slot (16 x capacity slots, so ~0.5 KiB per cached
 * chunk), ~510 KiB of tables and the pending list.
 *
 * Why tips wait for the end of their request: a chunk is inserted before its child, so a
 * class bit "has a child" computed at once puts every chain's newest chunk, for one event, in
 * the class of dead tips -- the next insert's eviction then often takes it. Waiting for the
 * request to end raised the block hit ratio on the Mooncake trace at 4,096 and 16,384 blocks
 * by 0.007-0.015, in the whole trace and in each half (docs/policies.md).
 */
#include "pol_int.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NSEG   4 /* returns along the chain: 0, 1, 2, 3+ */
#define NHITS  5 /* reuses of the chunk: 0, 1, 2, 3-5, 6+ */
#define NKEPT  (NSEG * NHITS * 2 * 6)
#define NCLASS (NKEPT + NHITS) /* then the chunks an engine is done with, by reuses */
_Static_assert(NCLASS <= 256, "a class fits the uint8_t that learn() takes");
#define NBIN      96
#define PERIOD    4096
#define HIST_MULT 16
#define PRIOR     16.0

#define GROUP    4    /* classes a victim scan passes over at once */
#define RVER     4096 /* residency versions (struct kvt_policy.rver) */
#define NGROUP   ((NCLASS + GROUP - 1) / GROUP)
#define PEND_MAX 4096
#define NSTREAM  64 /* streams told apart (on_stream); more share slots */

enum { F_LIVE = 1, F_CHILD = 2, F_REACC = 4, F_PEND = 8, F_TIP = 16, F_DONE = 32 };

struct hent {
	uint64_t tag;  /* key_hash, 0 = empty */
	uint32_t time; /* event count at its last access (low 32 bits) */
	uint16_t cls;
	uint8_t seg, hits;
};

/* A class list's two ends as the victim scan scores them, mirrored from the per-id columns so
 * that a scan reads one line per class instead of three scattered reads per end. Set stale
 * when the list changes or an end's last use or child count may have (mark()), refreshed by
 * the next scan (scan_class()). */
struct ends {
	uint32_t id[2], last[2]; /* the tail (oldest), the head */
	uint32_t amin[2], amax[2];
	float dens[2];          /* the density at ages amin..amax (end_dens()) */
	uint32_t over[2];       /* the parent's residency version when orph was found */
	uint16_t oslot[2];      /* the parent's slot in p->rver */
	bool inner[2], orph[2]; /* has resident children; is an orphan (end_orphaned()) */
	bool oknown[2];
	bool stale;
};

struct kvt_policy {
	/* per id */
	uint64_t *hash;
	struct kvt__link *lk;
	uint64_t *phash;                     /* the parent's key hash, 0 for none (parent_of()) */
	uint32_t *kid, *sib_prev, *sib_next; /* its children, a list: the first, the siblings */
	uint32_t *last, *nchild;
	uint8_t *strm; /* the stream that touched it last */
	uint16_t *cls;
	uint8_t *flags, *seg, *hits, *gap, *depth;
	size_t cap;
	/* residents: one list per class, most recent access at the head */
	struct kvt__list cl[NCLASS];
	struct ends ends[NCLASS]; /* each list's two ends, as a victim scan reads them */
	/* per class, and per group of GROUP classes: the least score an end there can have, and
	 * the first event at which that bound may stop holding (scan_class()) */
	double lb[NCLASS], glb[NGROUP];
	uint64_t exp[NCLASS], gexp[NGROUP];
	/* residency versions: a chunk of key hash h stored or removed bumps rver[rver_slot(h)],
	 * and a new residents map (rmap_add()) bumps every one, so an end's orphan status holds
	 * while its parent's version does */
	uint32_t rver[RVER];
	size_t n_res, c;
	/* history of evicted chunks */
	struct hent *hist;
	size_t hist_n;
	/* learning */
	double ev[NCLASS][NBIN], cen[NCLASS][NBIN];
	float dens[NCLASS][NBIN];
	uint64_t now, next_fold;
	double horizon, decay_hl, orphan;
	unsigned walk;
	bool leaf_first, strict;
	/* per stream (on_stream): the event its request in flight began at, its last chunk */
	struct {
		uint32_t req_start, prev;
	} st[NSTREAM];
	uint8_t cur; /* the stream the calls come from now */
	/* the residents by key hash: id + 1 per slot (0 empty), linear probing, at most half full
	 */
	uint32_t *rmap;
	size_t rmask, rmap_n;
	/* chunks inserted since the current request began (tips once it ends) */
	uint32_t pend[PEND_MAX], pend_tag[PEND_MAX]; /* ids, and their key hashes' low half */
	uint8_t pend_strm[PEND_MAX];                 /* and the stream that put them */
	size_t n_pend;
};

static unsigned age_bin(uint64_t age)
{
	if (age < 8)
		return (unsigned)age;
	unsigned e = 63u - (unsigned)__builtin_clzll(age);
	unsigned b = 8 + (e - 3) * 4 + ((unsigned)(age >> (e - 2)) & 3u);
	return b < NBIN ? b : NBIN - 1;
}

/* The least age in bin b (< NBIN). */
static uint32_t bin_start(unsigned b)
{
	if (b < 8)
		return b;
	unsigned e = (b - 8) / 4 + 3;
	return (1u << e) + ((b - 8) % 4) * (1u << (e - 2));
}

static double bin_lo(unsigned b)
{
	return bin_start(b);
}

static double bin_w(unsigned b)
{
	return b < 8 ? 1.0 : (double)(1ULL << ((b - 8) / 4 + 1));
}

static unsigned class_of(const struct kvt_policy *p, uint32_t id)
{
	unsigned s = p->seg[id] >= NSEG ? NSEG - 1 : p->seg[id];
	unsigned h = p->hits[id] < 3 ? p->hits[id] : p->hits[id] < 6 ? 3u : 4u;
	if (p->flags[id] & F_DONE)
		return NKEPT + h;
	return ((s * NHITS + h) * 2 + (p->flags[id] & F_TIP ? 0u : 1u)) * 6 + p->gap[id];
}

/* ---- the class lists ---- */

/* Class k's ends may have changed: the next scan looks at it. */
static void mark(struct kvt_policy *p, unsigned k)
{
	p->ends[k].stale = true;
	p->lb[k] = p->glb[k / GROUP] = -INFINITY;
	p->exp[k] = p->gexp[k / GROUP] = 0;
}

/* Every class's ends may score differently (the densities or the parameters changed). */
static void mark_all(struct kvt_policy *p)
{
	for (unsigned k = 0; k < NCLASS; k++)
		mark(p, k);
}

static void cl_unlink(struct kvt_policy *p, uint32_t id)
{
	kvt__list_unlink(&p->cl[p->cls[id]], p->lk, id);
	mark(p, p->cls[id]);
}

/* Links id (of class k) at the head of k's list, or behind at when at is not KVT__NIL. */
static void cl_link(struct kvt_policy *p, unsigned k, uint32_t id, uint32_t at)
{
	if (at == KVT__NIL)
		kvt__list_push_head(&p->cl[k], p->lk, id);
	else
		kvt__list_insert_after(&p->cl[k], p->lk, at, id);
	mark(p, k);
}

/* ---- the residents by key hash ---- */

/* An id per slot, checked against p->hash: 4 bytes a slot where kvt__hset takes 16 with its
 * key, and two residents may share a key hash (different namespaces), which a set of keys
 * cannot hold. */

static size_t rslot(const struct kvt_policy *p, uint64_t h)
{
	return (size_t)kvt__mix64(h) & p->rmask;
}

/* @return : the resident chunk whose key hash is h, or KVT__NIL. */
static uint32_t resident(const struct kvt_policy *p, uint64_t h)
{
	for (size_t i = rslot(p, h); p->rmap[i]; i = (i + 1) & p->rmask)
		if (p->hash[p->rmap[i] - 1] == h)
			return p->rmap[i] - 1;
	return KVT__NIL;
}

static void rmap_put(uint32_t *map, size_t mask, uint64_t h, uint32_t slot_val)
{
	size_t i = (size_t)kvt__mix64(h) & mask;
	while (map[i])
		i = (i + 1) & mask;
	map[i] = slot_val;
}

static unsigned rver_slot(uint64_t h)
{
	return (unsigned)(kvt__mix64(h) >> 52) & (RVER - 1);
}

/* Maps id by its key hash; out of memory it stays out, and its children count as orphans. */
static void rmap_add(struct kvt_policy *p, uint32_t id)
{
	p->rver[rver_slot(p->hash[id])]++;
	if (2 * (p->rmap_n + 1) > p->rmask + 1) {
		size_t n = 2 * (p->rmask + 1);
		uint32_t *m = calloc(n, sizeof(*m));
		if (!m)
			return;
		for (size_t i = 0; i <= p->rmask; i++)
			if (p->rmap[i])
				rmap_put(m, n - 1, p->hash[p->rmap[i] - 1], p->rmap[i]);
		free(p->rmap);
		p->rmap = m;
		p->rmask = n - 1;
		for (size_t i = 0; i < RVER; i++) /* chunks of one key hash may now probe in */
			p->rver[i]++;             /* another order (parent_of() takes the first) */
	}
	rmap_put(p->rmap, p->rmask, p->hash[id], id + 1);
	p->rmap_n++;
}

/* Unmaps id (backward-shift deletion: no tombstones, and the order of the others kept). */
static void rmap_del(struct kvt_policy *p, uint32_t id)
{
	p->rver[rver_slot(p->hash[id])]++;
	size_t i = rslot(p, p->hash[id]);
	while (p->rmap[i] && p->rmap[i] != id + 1)
		i = (i + 1) & p->rmask;
	if (!p->rmap[i])
		return;
	for (size_t j = i;;) {
		j = (j + 1) & p->rmask;
		if (!p->rmap[j])
			break;
		size_t k = rslot(p, p->hash[p->rmap[j] - 1]); /* where j's entry wants to be */
		if (((j - k) & p->rmask) >= ((j - i) & p->rmask)) { /* k is not in (i, j] */
			p->rmap[i] = p->rmap[j];
			i = j;
		}
	}
	p->rmap[i] = 0;
	p->rmap_n--;
}

/*
 * id's parent, resident here, or KVT__NIL. A link is the parent's key hash, not its id: a
 * caller may give a removed chunk's id to the next chunk it inserts (kvtierd's index does, at
 * once) and gives a chunk evicted and put again a new id, while kvtier sim names a block by one
 * id for ever. Linked by id, the daemon's conv took a stranger at the right depth for a parent
 * and took a child off the stranger's count, so leaf_first ranked inner chunks as leaves, and
 * it took a child whose parent was put again for an orphan; it kept 0.133 of a replay's prefixes
 * where the simulator's conv kept 0.137 (`kvtier bench trace`, docs/bench.md).
 */
static uint32_t parent_of(const struct kvt_policy *p, uint32_t id)
{
	uint32_t pa = p->phash[id] ? resident(p, p->phash[id]) : KVT__NIL;
	return pa == id ? KVT__NIL : pa; /* two chunks of one key hash: never its own parent */
}

/* ---- children, for strict: a doubly linked list of ids per parent ---- */

/* Puts id first in pa's list of children. An id is unlinked when it is removed, so the lists
 * hold ids, not key hashes: a removed id given to the next chunk is in no list. */
static void kid_push(struct kvt_policy *p, uint32_t pa, uint32_t id)
{
	p->sib_prev[id] = KVT__NIL;
	p->sib_next[id] = p->kid[pa];
	if (p->kid[pa] != KVT__NIL)
		p->sib_prev[p->kid[pa]] = id;
	p->kid[pa] = id;
}

/* Takes id out of its parent's list of children, O(1). (A parent removed leaves its children's
 * list headless; the one re-inserted starts with an empty list, which relink() refills.) */
static void kid_unlink(struct kvt_policy *p, uint32_t id)
{
	uint32_t prev = p->sib_prev[id], next = p->sib_next[id];
	if (prev != KVT__NIL) {
		p->sib_next[prev] = next;
	} else {
		uint32_t pa = parent_of(p, id);
		if (pa != KVT__NIL && p->kid[pa] == id)
			p->kid[pa] = next;
	}
	if (next != KVT__NIL)
		p->sib_prev[next] = prev;
	p->sib_prev[id] = p->sib_next[id] = KVT__NIL;
}

/* A child of x that is resident, still x's, and not yet proposed, or KVT__NIL. */
static uint32_t kid_of(const struct kvt_policy *p, uint32_t x, const uint32_t *out, size_t n)
{
	uint32_t c = p->kid[x];
	for (unsigned i = 0; c != KVT__NIL && i < 4096; i++, c = p->sib_next[c])
		if (c != x && (p->flags[c] & F_LIVE) && parent_of(p, c) == x &&
		    !kvt__proposed(out, n, c))
			return c;
	return KVT__NIL;
}

/*
 * The leaf reached from x by going down through children (x itself when it has none left). The
 * links can loop: a chunk's parent is the chunk touched before it one level up, and a client
 * that reads or stores a chain from its middle numbers depths from there, so the same chunk can
 * be one level below another in one request and above it in the next (a relink). The walk
 * detects a loop (Brent's: a marker that moves to the walker at each power of two, O(the path))
 * and stops at the chunk that closes it; evicting that one breaks the loop. Without the check a
 * loop hung kvtierd inside an acquire (test_policy conv_survives_link_loops).
 */
static uint32_t leaf_below(const struct kvt_policy *p, uint32_t x, const uint32_t *out, size_t n)
{
	uint32_t marker = x, c;
	size_t steps = 0, power = 1;
	while (p->nchild[x] && (c = kid_of(p, x, out, n)) != KVT__NIL) {
		if (c == marker)
			return x;
		x = c;
		if (++steps == power) {
			marker = x;
			power *= 2;
			steps = 0;
		}
	}
	return x;
}

/* Whether id was inserted or read by a request in flight: since the last depth-0 chunk of the
 * stream that touched it last. */
static bool in_request(const struct kvt_policy *p, uint32_t id)
{
	return p->last[id] - p->st[p->strm[id]].req_start < 0x80000000u;
}

/*
 * Recomputes id's class and moves it to the front of that class's list (it was just used) --
 * but behind its parent when the parent is in the same list: a request touches a prefix root
 * first, so this keeps each chain ordered root to tip from the head, and the tail end of a
 * list, where victims come from, offers a chain's tip before its ancestors.
 */
static void reclass(struct kvt_policy *p, uint32_t id)
{
	cl_unlink(p, id);
	unsigned k = class_of(p, id);
	uint32_t pa = parent_of(p, id);
	p->cls[id] = (uint16_t)k;
	bool behind = pa != KVT__NIL && p->cls[pa] == k && (uint32_t)p->now - p->last[pa] <= 64;
	cl_link(p, k, id, behind ? pa : KVT__NIL);
}

static inline unsigned cls_idx(uint8_t c)
{
	return c;
}

/* The last reuse distance relative to the capacity: none, < c, < 2c, < 4c, < 8c, more. */
static uint8_t gap_bucket(const struct kvt_policy *p, uint64_t dist)
{
	unsigned b = 1;
	while (b < 5 && dist >= ((uint64_t)p->c << (b - 1)))
		b++;
	return (uint8_t)b;
}

/* ---- learning ---- */

/* The reuse distance g up to which a cache of c entries can keep every reuse: E[X; X<=g] = c. */
static unsigned horizon_bin(const struct kvt_policy *p)
{
	double tot = 0, ev[NBIN] = {0};
	for (unsigned k = 0; k < NCLASS; k++)
		for (unsigned b = 0; b < NBIN; b++) {
			ev[b] += p->ev[k][b];
			tot += p->ev[k][b] + p->cen[k][b];
		}
	if (tot <= 0)
		return NBIN - 1;
	double space = 0, c = (double)p->c / p->horizon;
	for (unsigned b = 0; b < NBIN; b++) {
		space += ev[b] * (bin_lo(b) + bin_w(b) / 2) / tot;
		if (space >= c)
			return b;
	}
	return NBIN - 1;
}

static void fold(struct kvt_policy *p)
{
	mark_all(p); /* the densities change */
	unsigned hb = horizon_bin(p);
	double pev[NBIN] = {0}, pcen[NBIN] = {0}, ptot = 0;
	for (unsigned k = 0; k < NCLASS; k++)
		for (unsigned b = 0; b < NBIN; b++) {
			pev[b] += p->ev[k][b];
			pcen[b] += p->cen[k][b];
			ptot += p->ev[k][b] + p->cen[k][b];
		}
	/* a sparse class leans on the pooled distribution (PRIOR observations' worth) */
	double wp = ptot > 0 ? PRIOR / ptot : 0;
	for (unsigned k = 0; k < NCLASS; k++) {
		/* survival at each bin's lower edge, Kaplan-Meier */
		double s[NBIN + 1], risk = 0;
		for (unsigned b = 0; b < NBIN; b++)
			risk += p->ev[k][b] + p->cen[k][b] + wp * (pev[b] + pcen[b]);
		s[0] = 1;
		for (unsigned b = 0; b < NBIN; b++) {
			double e = p->ev[k][b] + wp * pev[b];
			double hz = risk > 0 ? e / risk : 0;
			s[b + 1] = s[b] * (1 - hz);
			risk -= e + p->cen[k][b] + wp * pcen[b];
		}
		/* density(a) = (S(a) - S(h)) / integral_a^h S, accumulated from h down */
		double space = 0;
		for (int b = NBIN - 1; b >= 0; b--) {
			if ((unsigned)b > hb) {
				p->dens[k][b] = 0;
				continue;
			}
			space += (s[b] + s[b + 1]) / 2 * bin_w((unsigned)b);
			double hits = s[b] - s[hb + 1];
			p->dens[k][b] = space > 0 ? (float)(hits / space) : 0;
		}
	}
	double d = pow(0.5, (double)PERIOD / p->decay_hl);
	for (unsigned k = 0; k < NCLASS; k++)
		for (unsigned b = 0; b < NBIN; b++) {
			p->ev[k][b] *= d;
			p->cen[k][b] *= d;
		}
}

static void tick(struct kvt_policy *p)
{
	if (++p->now >= p->next_fold) {
		fold(p);
		p->next_fold = p->now + PERIOD;
	}
}

static struct hent *hslot(struct kvt_policy *p, uint64_t h)
{
	return &p->hist[kvt__mix64(h) & (p->hist_n - 1)];
}

static int setup_hist(struct kvt_policy *p, size_t c)
{
	size_t n = 1024;
	while (n < HIST_MULT * c)
		n *= 2;
	struct hent *h = calloc(n, sizeof(*h));
	if (!h)
		return -ENOMEM;
	free(p->hist);
	p->hist = h;
	p->hist_n = n;
	p->c = c;
	p->decay_hl = 32.0 * (double)c > 131072 ? 32.0 * (double)c : 131072;
	return 0;
}

/* ---- tips ---- */

/* A request of stream s has ended (all: every stream's): its pending chunks that got no child
 * are tips. The other streams' stay pending. */
static void finalize(struct kvt_policy *p, unsigned s, bool all)
{
	size_t keep = 0;
	for (size_t i = 0; i < p->n_pend; i++) {
		uint32_t id = p->pend[i];
		if (!all && p->pend_strm[i] != s) {
			p->pend[keep] = id;
			p->pend_tag[keep] = p->pend_tag[i];
			p->pend_strm[keep++] = p->pend_strm[i];
			continue;
		}
		if (!(p->flags[id] & F_PEND) || (uint32_t)p->hash[id] != p->pend_tag[i])
			continue; /* removed since, listed twice, or the id given to a later chunk
			           */
		p->flags[id] &= (uint8_t)~F_PEND;
		if (!(p->flags[id] & F_CHILD)) {
			p->flags[id] |= F_TIP;
			reclass(p, id);
		}
	}
	p->n_pend = keep;
}

/* A depth-0 chunk is read or put: the stream's request before it has ended, and what this event
 * touches (the next tick) belongs to the one in flight. */
static void begin_request(struct kvt_policy *p)
{
	finalize(p, p->cur, false);
	p->st[p->cur].req_start = (uint32_t)p->now + 1;
}

static void add_pend(struct kvt_policy *p, uint32_t id)
{
	if (p->n_pend == PEND_MAX)
		finalize(p, 0, true);
	p->flags[id] |= F_PEND;
	p->pend_tag[p->n_pend] = (uint32_t)p->hash[id];
	p->pend_strm[p->n_pend] = p->cur;
	p->pend[p->n_pend++] = id;
}

/* The calls that follow come from stream s (an engine's connection, a simulated engine). */
static void cv_stream(struct kvt_policy *p, uint32_t s)
{
	p->cur = (uint8_t)(s % NSTREAM);
}

/* Cancels id's done hint: it goes back to its class. */
static void undone(struct kvt_policy *p, uint32_t id)
{
	p->flags[id] &= (uint8_t)~F_DONE;
	reclass(p, id);
}

/* pa (live) has a child: never a tip. */
static void set_child(struct kvt_policy *p, uint32_t pa)
{
	if (p->flags[pa] & F_DONE) /* the conversation goes on after all */
		undone(p, pa);
	if (p->flags[pa] & F_CHILD)
		return;
	p->flags[pa] = (uint8_t)((p->flags[pa] | F_CHILD) & ~F_TIP);
	reclass(p, pa);
}

/*
 * id, a resident chunk, was just read right after pv one level up: pv is its parent. When pv
 * was evicted and re-inserted while id stayed, the link was lost (a re-inserted chunk starts
 * with no children): count id again, so leaf_first still ranks pv after its descendants.
 */
static void relink(struct kvt_policy *p, uint32_t id, uint32_t pv)
{
	uint32_t pa = parent_of(p, id);
	if (pa != pv) {
		if (pa != KVT__NIL && p->nchild[pa]) {
			p->nchild[pa]--;
			mark(p, p->cls[pa]);
		}
		kid_unlink(p, id);
		p->phash[id] = p->hash[pv];
		p->nchild[pv]++;
		mark(p, p->cls[pv]);
		kid_push(p, pv, id);
	} else if (!p->nchild[pv]) {
		p->nchild[pv] = 1;
		mark(p, p->cls[pv]);
		kid_unlink(p, id); /* from the list its parent left when it was removed */
		kid_push(p, pv, id);
	}
	set_child(p, pv);
}

/* ---- ops ---- */

#define COLS(p)                                                                                    \
	{                                                                                          \
		KVT__COL((p)->hash), KVT__COL((p)->last), KVT__COL((p)->lk), KVT__COL((p)->phash), \
		    KVT__COL((p)->kid), KVT__COL((p)->sib_prev), KVT__COL((p)->sib_next),          \
		    KVT__COL((p)->nchild), KVT__COL((p)->flags), KVT__COL((p)->seg),               \
		    KVT__COL((p)->hits), KVT__COL((p)->cls), KVT__COL((p)->depth),                 \
		    KVT__COL((p)->gap), KVT__COL((p)->strm)                                        \
	}

static int ensure(struct kvt_policy *p, uint32_t id)
{
	if (id < p->cap)
		return 0;
	struct kvt__col c[] = COLS(p);
	return kvt__cols_grow(c, KVT__NCOLS(c), &p->cap, id);
}

static void cv_destroy(struct kvt_policy *p)
{
	if (!p)
		return;
	struct kvt__col c[] = COLS(p);
	kvt__cols_free(c, KVT__NCOLS(c));
	free(p->hist);
	free(p->rmap);
	free(p);
}

static int cv_create(size_t hint, struct kvt_policy **out)
{
	struct kvt_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->walk = 1;
	p->leaf_first = true;
	for (unsigned s = 0; s < NSTREAM; s++)
		p->st[s].prev = KVT__NIL;
	p->horizon = 1.0;
	p->orphan = 0.5;
	p->strict = true;
	for (unsigned k = 0; k < NCLASS; k++)
		kvt__list_init(&p->cl[k]);
	mark_all(p);
	size_t slots = 16;
	while (slots < 2 * (hint ? hint : 1024))
		slots *= 2;
	p->rmap = calloc(slots, sizeof(*p->rmap));
	p->rmask = slots - 1;
	if (!p->rmap || setup_hist(p, hint ? hint : 1024)) {
		cv_destroy(p);
		return -ENOMEM;
	}
	/* No fold yet: with nothing learnt it would only write zeros over the zeros calloc left
	 * (every density 0, the counts 0), faulting in ~0.5 MiB of tables that a short-lived
	 * instance -- a trial for kvtier policy set, a curve's miniature -- never uses. */
	p->next_fold = PERIOD;
	*out = p;
	return 0;
}

static void learn(struct kvt_policy *p, uint8_t cls, uint64_t dist, bool reused)
{
	unsigned b = age_bin(dist);
	if (reused)
		p->ev[cls_idx(cls)][b] += 1;
	else
		p->cen[cls_idx(cls)][b] += 1;
}

static void cv_insert(struct kvt_policy *p, uint32_t id, const struct kvt_policy_meta *m)
{
	if (ensure(p, id))
		return;
	if (m->depth == 0)
		begin_request(p);
	if (p->flags[id] & F_LIVE) {
		kid_unlink(p, id);
		cl_unlink(p, id);
		rmap_del(p, id); /* its key hash may change */
	} else if (++p->n_res > p->c)
		setup_hist(p, 2 * p->c); /* keeps the old history when out of memory */
	p->cls[id] = 0;
	cl_link(p, 0, id, KVT__NIL);
	tick(p);
	p->hash[id] = m->key_hash ? m->key_hash : 1; /* 0 marks a free history slot */
	rmap_add(p, id);
	p->depth[id] = m->depth > 255 ? 255 : (uint8_t)m->depth;
	p->nchild[id] = 0;
	p->kid[id] = p->sib_prev[id] = p->sib_next[id] = KVT__NIL;
	struct hent *e = hslot(p, p->hash[id]);
	uint32_t pa = m->parent;
	if (e->tag == p->hash[id]) {
		/* an evicted chunk is back: a reuse the cache missed */
		uint32_t dist = (uint32_t)p->now - e->time;
		learn(p, e->cls, dist, true);
		p->gap[id] = gap_bucket(p, dist);
		p->seg[id] = e->seg;
		p->hits[id] = e->hits < 255 ? e->hits + 1 : 255;
		p->flags[id] = F_LIVE | F_REACC;
		e->tag = 0;
	} else {
		bool pl = pa < p->cap && (p->flags[pa] & F_LIVE);
		unsigned s = pl ? p->seg[pa] + (p->flags[pa] & F_REACC ? 1u : 0u) : 0;
		p->seg[id] = s > 255 ? 255 : (uint8_t)s;
		p->hits[id] = 0;
		p->gap[id] = pl && (p->flags[pa] & F_REACC) ? p->gap[pa] : 0;
		p->flags[id] = F_LIVE;
	}
	p->phash[id] = 0;
	if (pa < p->cap && (p->flags[pa] & F_LIVE)) {
		p->phash[id] = p->hash[pa];
		p->nchild[pa]++;
		mark(p, p->cls[pa]);
		kid_push(p, pa, id);
		set_child(p, pa);
	}
	add_pend(p, id);
	reclass(p, id);
	if (!(m->flags & KVT_POLICY_META_REBUILT)) /* no engine touched it: not a hit's parent */
		p->st[p->cur].prev = id;
	p->strm[id] = p->cur;
	p->last[id] = (uint32_t)p->now; /* reclass() marked its class */
}

/* The depth a child of a chunk at depth d has, as stored (saturating at 255). */
static uint8_t child_depth(uint8_t d)
{
	return d < 255 ? (uint8_t)(d + 1) : 255;
}

static void cv_access(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !(p->flags[id] & F_LIVE))
		return;
	if (p->depth[id] == 0)
		begin_request(p);
	tick(p);
	uint32_t dist = (uint32_t)p->now - p->last[id];
	learn(p, p->cls[id], dist, true); /* a done chunk's class learns that hints can be wrong */
	p->flags[id] &= (uint8_t)~F_DONE;
	p->gap[id] = gap_bucket(p, dist);
	if (p->hits[id] < 255)
		p->hits[id]++;
	p->flags[id] |= F_REACC;
	/* the chunk touched just before, one level up, is (almost surely) its parent */
	uint32_t pv = p->st[p->cur].prev;
	if (pv < p->cap && (p->flags[pv] & F_LIVE) && p->depth[id] &&
	    child_depth(p->depth[pv]) == p->depth[id])
		relink(p, id, pv);
	reclass(p, id);
	p->st[p->cur].prev = id;
	p->strm[id] = p->cur;
	p->last[id] = (uint32_t)p->now; /* reclass() marked its class */
}

static void cv_remove(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || !(p->flags[id] & F_LIVE))
		return;
	struct hent *e = hslot(p, p->hash[id]);
	if (e->tag && e->tag != p->hash[id])
		learn(p, e->cls, (uint32_t)((uint32_t)p->now - e->time), false);
	e->tag = p->hash[id];
	e->time = p->last[id];
	e->cls = p->cls[id];
	e->seg = p->seg[id];
	e->hits = p->hits[id];
	uint32_t pa = parent_of(p, id);
	if (pa != KVT__NIL && p->nchild[pa]) {
		p->nchild[pa]--;
		mark(p, p->cls[pa]);
	}
	kid_unlink(p, id);
	cl_unlink(p, id);
	rmap_del(p, id);
	p->n_res--;
	p->flags[id] = 0;
}

/* Whether id is past the first chunk and its parent is not resident here (parent_of()). */
static bool orphaned(const struct kvt_policy *p, uint32_t id)
{
	return p->depth[id] && parent_of(p, id) == KVT__NIL;
}

/* Lower evicts first: with leaf_first, inner chunks rank after every leaf. The score as if id
 * were no orphan. */
static double plain_score(const struct kvt_policy *p, uint32_t id)
{
	double d = p->dens[p->cls[id]][age_bin((uint32_t)p->now - p->last[id])];
	return p->nchild[id] && p->leaf_first ? d * 2 : d;
}

/* id's score, an orphan's being its plain one times `orphan`. The parent is looked up only when
 * being an orphan could bring the score to bound or under (a victim walk's best so far). */
static double score_within(const struct kvt_policy *p, uint32_t id, double bound)
{
	double s = plain_score(p, id);
	return p->orphan != 1 && s * p->orphan <= bound && orphaned(p, id) ? s * p->orphan : s;
}

static double score(const struct kvt_policy *p, uint32_t id)
{
	return score_within(p, id, INFINITY);
}

/*
 * Within a class the density depends on the age alone, so each class offers its oldest entry
 * (and its newest, as density need not fall with age); the lowest of these goes. Entries the
 * caller cannot evict, or already proposed, are stepped over, up to `walk` per class end.
 */
/* Ranks a against the best so far: lower score, then a leaf before an inner entry, then older. */
static bool better(const struct kvt_policy *p, uint32_t a, double sa, uint32_t b, double sb)
{
	if (b == KVT__NIL || sa != sb)
		return b == KVT__NIL || sa < sb;
	if (!p->nchild[a] != !p->nchild[b])
		return !p->nchild[a];
	return (uint32_t)p->now - p->last[a] > (uint32_t)p->now - p->last[b];
}

/* What a victim walk steps over: ids the caller cannot evict (ok), ids already proposed (out),
 * ids whose leaf turned out not to be evictable (skip), and, while strict keeps it out, the
 * request in flight. */
struct walk {
	kvt_policy_evictable_fn ok;
	void *arg;
	const uint32_t *out;
	size_t n;
	uint32_t skip[32];
	size_t n_skip;
	bool not_request, loose;
};

static bool walk_takes(const struct kvt_policy *p, const struct walk *k, uint32_t id)
{
	if (k->not_request && in_request(p, id))
		return false;
	for (size_t i = 0; i < k->n_skip; i++)
		if (k->skip[i] == id)
			return false;
	return !kvt__proposed(k->out, k->n, id) && (!k->ok || k->ok(k->arg, id));
}

/* The best entry within w of either end of each class's list, or KVT__NIL. */
static uint32_t best_within(struct kvt_policy *p, unsigned w, const struct walk *k)
{
	uint32_t best = KVT__NIL;
	double bs = 0;
	for (unsigned c = 0; c < NCLASS; c++) {
		if (!p->cl[c].n)
			continue;
		for (int end = 0; end < 2; end++) {
			uint32_t id = end ? p->cl[c].head : p->cl[c].tail;
			for (unsigned i = 0; id != KVT__NIL && i < w; i++) {
				double s = score_within(p, id, best == KVT__NIL ? INFINITY : bs);
				if (better(p, id, s, best, bs) && walk_takes(p, k, id)) {
					best = id;
					bs = s;
				}
				id = end ? p->lk[id].next : p->lk[id].prev;
			}
		}
	}
	return best;
}

/* The density of class k at the age of end j of its mirrored list ends (struct ends): the
 * value of the age's bin, kept while the age stays in that bin and the table unchanged. */
static double end_dens(const struct kvt_policy *p, struct ends *e, unsigned k, int j, uint32_t age)
{
	if (age < e->amin[j] || age > e->amax[j]) {
		unsigned b = age_bin(age);
		e->dens[j] = p->dens[k][b];
		e->amin[j] = bin_start(b);
		e->amax[j] = b + 1 < NBIN ? bin_start(b + 1) - 1 : UINT32_MAX;
	}
	return e->dens[j];
}

/* Whether end j of a class list is an orphan (orphaned()), found again only when a chunk of
 * its parent's key hash (or one sharing its version slot) was stored or removed since. */
static bool end_orphaned(const struct kvt_policy *p, struct ends *e, int j)
{
	uint32_t ver = p->rver[e->oslot[j]];
	if (!e->oknown[j] || e->over[j] != ver) {
		e->orph[j] = orphaned(p, e->id[j]);
		e->over[j] = ver;
		e->oknown[j] = true;
	}
	return e->orph[j];
}

/* A victim scan's state: the walk, and the best end so far with what ranks it. */
struct scan {
	const struct walk *k;
	uint32_t best, bl, now;
	double bs; /* DBL_MAX before there is a best: what a bound must exceed to pass */
	bool binner;
};

/* Looks at class k's two ends as best_within() would, and leaves in lb[k] the least score
 * either can have (the orphan discount taken), in exp[k] the event at which the first of their
 * ages leaves its bin. */
static void scan_class(struct kvt_policy *p, struct scan *v, unsigned k)
{
	struct ends *e = &p->ends[k];
	if (e->stale) {
		e->stale = false;
		if (!p->cl[k].n) {
			p->lb[k] = INFINITY;
			p->exp[k] = UINT64_MAX;
			return;
		}
		e->id[0] = p->cl[k].tail;
		e->id[1] = p->cl[k].head;
		for (int j = 0; j < 2; j++) {
			e->last[j] = p->last[e->id[j]];
			e->inner[j] = p->nchild[e->id[j]] != 0;
			e->amin[j] = 1; /* no age: end_dens() looks the density up */
			e->amax[j] = 0;
			e->oslot[j] = (uint16_t)rver_slot(p->phash[e->id[j]]);
			e->oknown[j] = false;
		}
	}
	double lb = INFINITY;
	uint64_t exp = UINT64_MAX;
	for (int end = 0; end < 2; end++) {
		uint32_t id = e->id[end], age = v->now - e->last[end];
		double s = end_dens(p, e, k, end, age);
		if (e->inner[end] && p->leaf_first)
			s *= 2;
		lb = s * p->orphan < lb ? s * p->orphan : lb; /* orphan <= 1 */
		exp = KVT_MIN(exp, p->now + (e->amax[end] - age) + 1);
		if (p->orphan != 1 && (v->best == KVT__NIL || s * p->orphan <= v->bs) &&
		    end_orphaned(p, e, end))
			s *= p->orphan;
		bool win = v->best == KVT__NIL || s < v->bs ||
		           (s == v->bs &&
		            (v->binner != e->inner[end] ? !e->inner[end] : age > v->now - v->bl));
		if (win && walk_takes(p, v->k, id)) {
			v->best = id;
			v->bs = s;
			v->bl = e->last[end];
			v->binner = e->inner[end];
		}
	}
	p->lb[k] = lb;
	p->exp[k] = exp;
}

/* Whether a class or group with bound lb until exp can be passed over: the bound holds and
 * nothing under it can win, ties included. */
static bool passes(const struct kvt_policy *p, const struct scan *v, double lb, uint64_t exp)
{
	return exp > p->now && lb > v->bs;
}

/*
 * best_within(p, 1, k) from the mirrored ends (struct ends): the same entry, as the least by
 * (score, inner, age from old to young, class order) among the takeable ends. The classes are
 * looked at in order, and a class is passed over while its bound (the least score its ends can
 * have, the orphan discount included) holds and is above the best so far; so a victim costs a
 * look at the classes whose ends changed or aged into a new bin since the last scan and at
 * those that could still win, not at every class.
 */
static uint32_t best_end(struct kvt_policy *p, const struct walk *k)
{
	struct scan v = {.k = k, .best = KVT__NIL, .now = (uint32_t)p->now, .bs = DBL_MAX};
	for (unsigned g = 0; g < NGROUP; g++) {
		if (passes(p, &v, p->glb[g], p->gexp[g]))
			continue;
		double lb = INFINITY;
		uint64_t exp = UINT64_MAX;
		for (unsigned c = g * GROUP; c < KVT_MIN(g * GROUP + GROUP, NCLASS); c++) {
			if (!passes(p, &v, p->lb[c], p->exp[c]))
				scan_class(p, &v, c);
			lb = p->lb[c] < lb ? p->lb[c] : lb;
			exp = KVT_MIN(exp, p->exp[c]);
		}
		p->glb[g] = lb;
		p->gexp[g] = exp;
	}
	return v.best;
}

/* The best entry, the walk deepened until one is found (to every entry at worst). */
static uint32_t best_entry(struct kvt_policy *p, const struct walk *k)
{
	for (size_t w = p->walk;; w *= 2) {
		uint32_t best = w == 1 ? best_end(p, k)
		                       : best_within(p, (unsigned)(w < p->n_res ? w : p->n_res), k);
		if (best != KVT__NIL || w >= p->n_res)
			return best;
	}
}

/*
 * Within a class the density depends on the age alone, so each class offers its oldest entry
 * (and its newest, as density need not fall with age); the lowest of these goes. When every
 * offer is rejected (leased) or already proposed, the walk deepens, to every entry at worst.
 * With strict, the entry found stands for its subtree: the victim is a leaf below it (an
 * ancestor never goes before its descendants), and the request in flight is left alone while
 * anything else can go.
 */
static size_t cv_victims(struct kvt_policy *p, uint32_t *out, size_t max,
                         kvt_policy_evictable_fn ok, void *arg)
{
	struct walk k = {.ok = ok, .arg = arg, .out = out, .not_request = p->strict};
	while (k.n < max && k.n < p->n_res) {
		uint32_t best = best_entry(p, &k);
		if (best == KVT__NIL && k.not_request) {
			k.not_request = false; /* the request in flight holds all that is left */
			k.n_skip = 0;          /* and the leaves it kept from going may go now */
			continue;
		}
		if (best == KVT__NIL && k.n_skip) {
			k.n_skip = 0; /* only ancestors of what cannot go are left: they may */
			k.loose = true;
			continue;
		}
		if (best == KVT__NIL)
			break;
		uint32_t leaf = p->strict && !k.loose ? leaf_below(p, best, out, k.n) : best;
		if (leaf != best && walk_takes(p, &k, leaf)) {
			best = leaf;
		} else if (leaf != best && k.n_skip < 32) {
			k.skip[k.n_skip++] = best; /* its subtree cannot go now */
			continue;
		}
		out[k.n++] = best;
	}
	return k.n;
}

/*
 * The engine is done with id's conversation (kvt_done): id moves to the done classes, whose
 * densities are learned like every other class's, so hints that come true make their chunks
 * the first victims and hints that do not (a document the engine took for its own) are
 * learned to be worth keeping. A read cancels the hint, as does a new child (the
 * conversation went on). A chunk other conversations branch from (two or more children)
 * keeps its class: it is theirs too.
 */
static void cv_done(struct kvt_policy *p, uint32_t id)
{
	if (id >= p->cap || (p->flags[id] & (F_LIVE | F_DONE)) != F_LIVE || p->nchild[id] > 1)
		return;
	p->flags[id] |= F_DONE;
	reclass(p, id);
}

static bool cv_is_done(struct kvt_policy *p, uint32_t id)
{
	return id < p->cap && (p->flags[id] & (F_LIVE | F_DONE)) == (F_LIVE | F_DONE);
}

/* clang-format off */
static const struct kvt__param cv_params[] = {
    KVT__PARAM(walk, KVT__P_UNSIGNED, 1, 1024),
    KVT__PARAM(leaf_first, KVT__P_BOOL, 0, 1),
    KVT__PARAM(horizon, KVT__P_DOUBLE, 0.01, 100),
    KVT__PARAM(orphan, KVT__P_DOUBLE, 0, 1),
    KVT__PARAM(strict, KVT__P_BOOL, 0, 1),
};
/* clang-format on */

static int cv_set_param(struct kvt_policy *p, const char *name, const char *value)
{
	double v;
	if (strcmp(name, "capacity")) {
		int rc = kvt__param_set(p, cv_params, KVT_ARRAY_SIZE(cv_params), name, value);
		mark_all(p); /* leaf_first and orphan weigh the ends */
		return rc;
	}
	if (kvt__param_double(value, 1, 1e9, &v))
		return -EINVAL;
	return setup_hist(p, (size_t)v);
}

static int cv_get_param(struct kvt_policy *p, size_t i, struct kvt_policy_param *out)
{
	return kvt__param_get(p, cv_params, KVT_ARRAY_SIZE(cv_params), i, out);
}

static size_t cv_export(struct kvt_policy *p, uint32_t *out, size_t max)
{
	size_t n = 0, m = p->n_res < max ? p->n_res : max;
	uint32_t *tmp = malloc((p->n_res + 1) * sizeof(*tmp));
	uint64_t *key = calloc(p->cap ? p->cap : 1, sizeof(*key));
	if (!tmp || !key) {
		free(tmp);
		free(key);
		return 0;
	}
	for (unsigned k = 0; k < NCLASS; k++)
		for (uint32_t id = p->cl[k].head; id != KVT__NIL; id = p->lk[id].next) {
			/* positive doubles order like their bit patterns */
			double s = score(p, id);
			memcpy(&key[id], &s, sizeof(s));
			tmp[n++] = id;
		}
	kvt__sort_ids_by(tmp, n, key);
	memcpy(out, tmp, m * sizeof(*out));
	free(tmp);
	free(key);
	return m;
}

/* What the policy holds: the struct, its per-id columns at capacity, and its other tables. */
static size_t cv_memory(struct kvt_policy *p)
{
	struct kvt__col c[] = COLS(p);
	return sizeof(*p) + kvt__cols_bytes(c, KVT__NCOLS(c), p->cap) +
	       p->hist_n * sizeof(*p->hist);
}

const struct kvt_policy_ops kvt_policy_conv = {
    .version = KVT_POLICY_OPS_VERSION,
    .name = "conv",
    .create = cv_create,
    .destroy = cv_destroy,
    .on_insert = cv_insert,
    .on_access = cv_access,
    .on_remove = cv_remove,
    .on_done = cv_done,
    .is_done = cv_is_done,
    .pick_victims = cv_victims,
    .export_order = cv_export,
    .set_param = cv_set_param,
    .get_param = cv_get_param,
    .memory_bytes = cv_memory,
    .on_stream = cv_stream,
};
