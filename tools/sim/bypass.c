/*
 * bypass.c -- a predictor's admission decisions, replayed (`kvtier sim --bypass FILE`).
 *
 * Learned caches (Hawkeye, LRB) split a policy in two: a predictor says, at each access,
 * whether the block is worth keeping at all, and an eviction order ranks what is kept. This
 * file lets any predictor be judged by the replay that judges kvtier's policies, without
 * building it into one: FILE holds one byte per block access of the trace, in trace order,
 * 1 for "do not keep this block" and 0 for "replay as usual". A bypassed access that misses is
 * stored in no tier; one that hits is served (a hit like any other) and then dropped from every
 * tier that holds it. The policy sees both, as the daemon's would see a chunk an engine never
 * put and one it deleted after a read.
 *
 * A predictor written with hindsight (tools/sim/which_error.py --write) gives a bound on what
 * its features can tell; docs/policies.md ("A twelfth look") has the figures.
 *
 * The file must hold exactly one byte per access, each 0 or 1: a text file of '0' and '1'
 * characters, or a file for another trace, is refused with what was wrong, not replayed.
 */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kvt_trace_bypass(struct kvt_trace *t, const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		int rc = -errno;
		fprintf(stderr, "sim: --bypass %s: %s\n", path, strerror(-rc));
		return rc;
	}
	uint8_t *b = malloc(t->n_acc + 1);
	int rc = b ? 0 : -ENOMEM;
	size_t got = b ? fread(b, 1, t->n_acc + 1, f) : 0;
	if (!rc && ferror(f)) {
		rc = -EIO;
		fprintf(stderr, "sim: --bypass %s: read error\n", path);
	} else if (!rc && got != t->n_acc) {
		rc = -EINVAL;
		fprintf(stderr, "sim: --bypass %s: %s bytes, want one per access (%zu)\n", path,
		        got > t->n_acc ? "more" : "fewer", t->n_acc);
	}
	for (size_t i = 0; !rc && i < t->n_acc; i++)
		if (b[i] > 1) {
			rc = -EINVAL;
			fprintf(stderr, "sim: --bypass %s: byte %zu is 0x%02x, want 0 or 1\n", path,
			        i, b[i]);
		}
	fclose(f);
	if (rc) {
		free(b);
		return rc;
	}
	free(t->bypass);
	t->bypass = b;
	return 0;
}
