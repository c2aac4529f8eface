/*
 * ghost.c -- the policies' ghost FIFO (pol_int.h): fingerprints of keys recently evicted, in
 * order, in a ring, found through an open-addressed table with no tombstones (backward shift
 * on delete) that is rebuilt sparse as the ring grows.
 */
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifndef GHOST_SPARSE
#define GHOST_SPARSE 8 /* table slots per live ghost after a rebuild */
#endif

#define ghost_fp kvt__ghost_fp

static inline bool seq_live(const struct kvt__ghost *g, uint64_t slot)
{
	return (uint32_t)((uint32_t)slot - (uint32_t)g->head) < (uint32_t)(g->tail - g->head);
}

/* Rebuilds the table at cap slots with its live entries only (expired ones are dropped here,
 * not when they expire, so that trimming touches the ring alone). */
static int ghost_table(struct kvt__ghost *g, size_t cap)
{
	uint64_t *t = calloc(cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	uint64_t *old = g->slots;
	size_t old_cap = g->cap;
	g->slots = t;
	g->cap = cap;
	g->occ = 0;
	for (size_t i = 0; i < old_cap; i++) {
		if (!old[i] || !seq_live(g, old[i]))
			continue;
		size_t j = (old[i] >> 32) & (cap - 1);
		while (t[j])
			j = (j + 1) & (cap - 1);
		t[j] = old[i];
		g->occ++;
	}
	free(old);
	return 0;
}

int kvt__ghost_init(struct kvt__ghost *g, size_t expect)
{
	memset(g, 0, sizeof(*g));
	g->rcap = 64;
	while (g->rcap < expect)
		g->rcap *= 2;
	g->ring = malloc(g->rcap * sizeof(*g->ring));
	if (!g->ring || ghost_table(g, GHOST_SPARSE * g->rcap)) {
		free(g->ring);
		return -ENOMEM;
	}
	return 0;
}

size_t kvt__ghost_bytes(const struct kvt__ghost *g)
{
	return g->cap * sizeof(*g->slots) + g->rcap * sizeof(*g->ring);
}

void kvt__ghost_free(struct kvt__ghost *g)
{
	free(g->slots);
	free(g->ring);
	memset(g, 0, sizeof(*g));
}

/* @return : the slot of fingerprint fp, live or expired, or SIZE_MAX. */
static size_t ghost_find(const struct kvt__ghost *g, uint32_t fp)
{
	size_t mask = g->cap - 1;
	for (size_t i = fp & mask; g->slots[i]; i = (i + 1) & mask)
		if ((uint32_t)(g->slots[i] >> 32) == fp)
			return i;
	return SIZE_MAX;
}

/* Empties slot i, shifting back later members of its probe run (Knuth's algorithm R). */
static void ghost_erase(struct kvt__ghost *g, size_t i)
{
	size_t mask = g->cap - 1;
	for (size_t j = (i + 1) & mask; g->slots[j]; j = (j + 1) & mask) {
		size_t home = (g->slots[j] >> 32) & mask;
		/* j's entry may move to i when i lies cyclically within [home, j) */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			g->slots[i] = g->slots[j];
			i = j;
		}
	}
	g->slots[i] = 0;
	g->occ--;
}

bool kvt__ghost_has(const struct kvt__ghost *g, uint64_t h)
{
	size_t i = ghost_find(g, ghost_fp(h));
	return i != SIZE_MAX && seq_live(g, g->slots[i]);
}

static int ghost_grow_ring(struct kvt__ghost *g)
{
	uint32_t *r = malloc(2 * g->rcap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (uint64_t s = g->head; s < g->tail; s++)
		r[s & (2 * g->rcap - 1)] = g->ring[s & (g->rcap - 1)];
	free(g->ring);
	g->ring = r;
	g->rcap *= 2;
	return 0;
}

int kvt__ghost_add(struct kvt__ghost *g, uint64_t h)
{
	if (g->tail - g->head == g->rcap) {
		/* drop stale slots first; grow only when the ring is really full of live ghosts */
		while (g->head < g->tail && !g->ring[g->head & (g->rcap - 1)])
			g->head++;
		if (g->tail - g->head == g->rcap && ghost_grow_ring(g))
			return -ENOMEM;
	}
	if ((g->occ + 1) * 2 > g->cap) {
		size_t cap = g->cap;
		while (cap < GHOST_SPARSE * (g->n + 1))
			cap *= 2;
		if (ghost_table(g, cap))
			return -ENOMEM;
	}
	uint32_t fp = ghost_fp(h);
	size_t mask = g->cap - 1, i = fp & mask;
	while (g->slots[i] && (uint32_t)(g->slots[i] >> 32) != fp)
		i = (i + 1) & mask;
	if (!g->slots[i])
		g->occ++;
	if (g->slots[i] && seq_live(g, g->slots[i]))
		g->ring[(uint32_t)g->slots[i] & (g->rcap - 1)] = 0; /* its old place goes stale */
	else
		g->n++;
	uint64_t seq = g->tail++;
	g->ring[seq & (g->rcap - 1)] = fp;
	g->slots[i] = (uint64_t)fp << 32 | (uint32_t)seq;
	return 0;
}

void kvt__ghost_del(struct kvt__ghost *g, uint64_t h)
{
	size_t i = ghost_find(g, ghost_fp(h));
	if (i == SIZE_MAX || !seq_live(g, g->slots[i]))
		return;
	g->ring[(uint32_t)g->slots[i] & (g->rcap - 1)] = 0;
	ghost_erase(g, i);
	g->n--;
}

void kvt__ghost_trim(struct kvt__ghost *g, size_t limit)
{
	while (g->n > limit && g->head < g->tail)
		if (g->ring[g->head++ & (g->rcap - 1)])
			g->n--; /* its table entry is expired from now on */
}
