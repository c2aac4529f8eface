/*
 * ends.c -- an engine that says when a conversation ends (`kvtier sim --hint-ends F`).
 *
 * kvt_done lets an engine tell kvtierd that it is done with a conversation's chunks. This file
 * plays such an engine over a trace, so that what the hint is worth can be measured:
 *
 *  - Conversations. Request r continues an earlier request q of n >= 2 blocks when r holds q's
 *    first n - 1 blocks and at least n blocks in all (the next turn re-reads the prompt but its
 *    partial last block, and adds the answer and the new question). Block ids name a whole
 *    prefix, so "holds q's block n - 2 at that depth" is the test, and that block must be one
 *    q's conversation read first (a shared system prompt and a partial block is continued by
 *    nothing). A request that no later one continues is the last turn of its conversation.
 *  - What the engine names. Its own chunks: the blocks of the last turn that a request of the
 *    same conversation was the first to access and no other conversation has read so far. A
 *    shared system prompt, or a document another conversation read too, is not the engine's
 *    to give up.
 *  - When. A fraction F of the ends is told (each end drawn with the seed), `delay` requests
 *    after the last turn (an engine learns that a user left from an idle timeout or a closed
 *    session, not at once).
 *
 * The hints ride in the trace (hint_off, hint_blk): the blocks hinted before request i are
 * hint_blk[hint_off[i] .. hint_off[i + 1]). O(accesses) time and memory.
 */
#include "sim.h"
#include "sim_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Uniform in [0, 1), fixed by seed and i. */
static double draw(uint64_t seed, uint64_t i)
{
	return (double)(kvt_splitmix64(seed ^ (i * 0x9e3779b97f4a7c15ULL)) >> 11) * 0x1p-53;
}

static uint32_t len_of(const struct kvt_trace *t, size_t q)
{
	return (uint32_t)(t->req_off[q + 1] - t->req_off[q]);
}

/*
 * conv[q]: q's conversation (the index of its first turn); first[b]: the conversation that
 * accessed block b first. Only a block of q's own can carry its conversation on: a request of a
 * shared system prompt and one partial block is continued by nothing.
 */
static void find_convs(const struct kvt_trace *t, uint32_t *ends_at, uint32_t *conv,
                       uint32_t *first)
{
	for (size_t q = 0; q < t->n_req; q++) {
		const uint32_t *b = t->blk + t->req_off[q];
		uint32_t n = len_of(t, q);
		conv[q] = (uint32_t)q;
		/* the deepest earlier request whose prompt, but its last block, q holds */
		for (uint32_t i = n; i-- > 0;) {
			uint32_t p = ends_at[b[i]];
			if (p != UINT32_MAX && len_of(t, p) == i + 2 && n >= i + 2) {
				conv[q] = conv[p];
				break;
			}
		}
		for (uint32_t i = 0; i < n; i++)
			if (first[b[i]] == UINT32_MAX)
				first[b[i]] = conv[q];
		if (n >= 2 && first[b[n - 2]] == conv[q])
			ends_at[b[n - 2]] = (uint32_t)q;
	}
}

/* ended[q]: q has a prompt of its own and no later request continues it. */
static void find_ends(const struct kvt_trace *t, const uint32_t *conv, const uint32_t *first,
                      uint32_t *longest_after, uint8_t *ended)
{
	for (size_t q = t->n_req; q-- > 0;) {
		const uint32_t *b = t->blk + t->req_off[q];
		uint32_t n = len_of(t, q);
		ended[q] = n >= 2 && (first[b[n - 2]] != conv[q] || longest_after[b[n - 2]] < n);
		for (uint32_t i = 0; i < n; i++)
			if (longest_after[b[i]] < n)
				longest_after[b[i]] = n;
	}
}

int kvt_trace_ends(struct kvt_trace *t, double fraction, uint64_t seed, size_t delay)
{
	if (fraction < 0 || fraction > 1 || t->n_req >= UINT32_MAX)
		return -EINVAL;
	free(t->hint_off);
	free(t->hint_blk);
	t->hint_off = NULL;
	t->hint_blk = NULL;
	int rc = -ENOMEM;
	uint32_t *by_blk = malloc((t->n_blocks + 1) * sizeof(*by_blk));
	uint32_t *first = malloc((t->n_blocks + 1) * sizeof(*first));
	uint32_t *conv = malloc(t->n_req * sizeof(*conv));
	uint8_t *ended = malloc(t->n_req);
	uint64_t *off = calloc(t->n_req + 1, sizeof(*off));
	uint32_t *out = malloc((t->n_acc + 1) * sizeof(*out));
	if (!by_blk || !first || !conv || !ended || !off || !out)
		goto fail;
	memset(by_blk, 0xff, (t->n_blocks + 1) * sizeof(*by_blk));
	memset(first, 0xff, (t->n_blocks + 1) * sizeof(*first));
	find_convs(t, by_blk, conv, first);
	memset(by_blk, 0, (t->n_blocks + 1) * sizeof(*by_blk));
	find_ends(t, conv, first, by_blk, ended);
	/* count, then place, each told end's own blocks before request q + 1 + delay; by_blk
	 * marks the blocks another conversation has read by then (the engine served it too) */
	for (int pass = 0; pass < 2; pass++) {
		memset(by_blk, 0, (t->n_blocks + 1) * sizeof(*by_blk));
		for (size_t q = 0; q < t->n_req; q++) {
			for (uint64_t i = t->req_off[q]; i < t->req_off[q + 1]; i++)
				by_blk[t->blk[i]] |= first[t->blk[i]] != conv[q];
			size_t at = q + 1 + delay;
			if (!ended[q] || at >= t->n_req || draw(seed, q) >= fraction)
				continue;
			for (uint64_t i = t->req_off[q]; i < t->req_off[q + 1]; i++)
				if (first[t->blk[i]] == conv[q] && !by_blk[t->blk[i]]) {
					if (pass)
						out[off[at]++] = t->blk[i];
					else
						off[at + 1]++;
				}
		}
		if (!pass) /* counts to starts: off[i] = where request i's hints begin */
			for (size_t q = 0; q < t->n_req; q++)
				off[q + 1] += off[q];
	}
	/* placing moved each start to the next one's: shift back */
	memmove(off + 1, off, t->n_req * sizeof(*off));
	off[0] = 0;
	t->hint_off = off;
	t->hint_blk = out;
	off = NULL;
	out = NULL;
	rc = 0;
fail:
	free(by_blk);
	free(first);
	free(conv);
	free(ended);
	free(off);
	free(out);
	return rc;
}
