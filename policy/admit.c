/*
 * admit.c -- TinyLFU and second-touch admission (see admit.h). The sketch width is the power
 * of two at or above 4 x capacity_hint counters per row (bytes, saturating at 15); the
 * doorkeeper has 8 bits per expected key and two probes. The counters are plain bytes rather
 * than packed nibbles: simpler, and the sketch stays small next to the cache it guards. Both
 * index by hash & (size - 1), so growing by doubling copies each table onto its new half and
 * every key's estimate stays what it was (kvt_admit_grow).
 */
#include "admit.h"
#include "pol_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum kind { ALL, TINYLFU, SECOND };

struct kvt_admit {
	enum kind kind;
	uint8_t *cm;  /* 4 rows x width */
	uint64_t *dk; /* doorkeeper bits */
	size_t width, dk_bits, records, window;
	bool no_dk; /* doorkeeper off */
};

int kvt_admit_create(const char *name, size_t hint, struct kvt_admit **out)
{
	enum kind k;
	if (!strcmp(name, "none"))
		k = ALL;
	else if (!strcmp(name, "tinylfu"))
		k = TINYLFU;
	else if (!strcmp(name, "second_touch"))
		k = SECOND;
	else
		return -ENOENT;
	struct kvt_admit *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->kind = k;
	hint = hint < 64 ? 64 : hint;
	a->width = 64;
	while (a->width < 4 * hint)
		a->width *= 2;
	a->dk_bits = a->width * 2;
	a->window = 10 * hint;
	a->cm = calloc(4 * a->width, 1);
	a->dk = calloc(a->dk_bits / 64, sizeof(uint64_t));
	if (!a->cm || !a->dk) {
		kvt_admit_destroy(a);
		return -ENOMEM;
	}
	*out = a;
	return 0;
}

/* Fills a table of m cells of size sz, whose first n hold values (n divides m, both powers of
 * two), so that cell j holds what cell j mod n held: a key indexed by (hash & (cells - 1))
 * reads after a doubling what it read before. */
static void spread(uint8_t *t, size_t sz, size_t n, size_t m)
{
	for (size_t have = n; have < m; have *= 2)
		memcpy(t + have * sz, t, have * sz);
}

int kvt_admit_grow(struct kvt_admit *a, size_t hint)
{
	hint = hint < 64 ? 64 : hint;
	size_t w = a->width;
	while (w < 4 * hint)
		w *= 2;
	if (w == a->width)
		return 0;
	uint8_t *cm = malloc(4 * w);
	uint64_t *dk = malloc(w * 2 / 8);
	if (!cm || !dk) {
		free(cm);
		free(dk);
		return -ENOMEM;
	}
	for (size_t r = 0; r < 4; r++) {
		memcpy(cm + r * w, a->cm + r * a->width, a->width);
		spread(cm + r * w, 1, a->width, w);
	}
	memcpy(dk, a->dk, a->dk_bits / 8);
	spread((uint8_t *)dk, sizeof(*dk), a->dk_bits / 64, w * 2 / 64);
	free(a->cm);
	free(a->dk);
	a->cm = cm;
	a->dk = dk;
	a->width = w;
	a->dk_bits = w * 2;
	a->window = 10 * hint;
	return 0;
}

void kvt_admit_destroy(struct kvt_admit *a)
{
	if (!a)
		return;
	free(a->cm);
	free(a->dk);
	free(a);
}

void kvt_admit_doorkeeper(struct kvt_admit *a, bool on)
{
	a->no_dk = !on;
}

size_t kvt_admit_bytes(const struct kvt_admit *a)
{
	return sizeof(*a) + 4 * a->width + a->dk_bits / 8;
}

const char *kvt_admit_name(const struct kvt_admit *a)
{
	static const char *const names[] = {"none", "tinylfu", "second_touch"};
	return names[a->kind];
}

static bool dk_has(const struct kvt_admit *a, uint64_t h)
{
	uint64_t b1 = h & (a->dk_bits - 1), b2 = (h >> 32) & (a->dk_bits - 1);
	return (a->dk[b1 / 64] >> (b1 % 64) & 1) && (a->dk[b2 / 64] >> (b2 % 64) & 1);
}

static void dk_set(struct kvt_admit *a, uint64_t h)
{
	uint64_t b1 = h & (a->dk_bits - 1), b2 = (h >> 32) & (a->dk_bits - 1);
	a->dk[b1 / 64] |= 1ULL << (b1 % 64);
	a->dk[b2 / 64] |= 1ULL << (b2 % 64);
}

/* The key's four cells (one per row, by double hashing from one multiply of the already mixed
 * key), and the smallest of their counters. */
static unsigned cm_cells(const struct kvt_admit *a, uint64_t h, size_t idx[4])
{
	uint64_t x = h * 0x9e3779b97f4a7c15ULL;
	uint32_t h1 = (uint32_t)(x >> 32), h2 = (uint32_t)x | 1;
	unsigned m = 255;
	for (int r = 0; r < 4; r++) {
		idx[r] = (size_t)r * a->width + ((h1 + (uint32_t)r * h2) & (a->width - 1));
		unsigned c = a->cm[idx[r]];
		m = c < m ? c : m;
	}
	return m;
}

static unsigned cm_min(const struct kvt_admit *a, uint64_t h)
{
	size_t idx[4];
	return cm_cells(a, h, idx);
}

static void age(struct kvt_admit *a)
{
	for (size_t i = 0; i < 4 * a->width; i++)
		a->cm[i] >>= 1;
	memset(a->dk, 0, a->dk_bits / 8);
	a->records = 0;
}

void kvt_admit_record(struct kvt_admit *a, uint64_t key_hash)
{
	if (a->kind == ALL)
		return;
	uint64_t h = kvt__mix64(key_hash);
	if (!a->no_dk && !dk_has(a, h)) {
		dk_set(a, h);
	} else {
		size_t idx[4];
		unsigned m = cm_cells(a, h, idx);
		if (m < 15) /* conservative update: raise only the minimal cells */
			for (int r = 0; r < 4; r++)
				if (a->cm[idx[r]] == m)
					a->cm[idx[r]]++;
	}
	if (++a->records >= a->window)
		age(a);
}

unsigned kvt_admit_estimate(const struct kvt_admit *a, uint64_t key_hash)
{
	uint64_t h = kvt__mix64(key_hash);
	/* the doorkeeper's bit counts one more (TinyLFU: the first record of a period is there) */
	return cm_min(a, h) + (!a->no_dk && dk_has(a, h) ? 1u : 0u);
}

bool kvt_admit_check(struct kvt_admit *a, uint64_t cand_hash, const uint64_t *victim_hash)
{
	switch (a->kind) {
	case SECOND:
		return kvt_admit_estimate(a, cand_hash) >= 2;
	case TINYLFU:
		return !victim_hash ||
		       kvt_admit_estimate(a, cand_hash) > kvt_admit_estimate(a, *victim_hash);
	default:
		return true;
	}
}
