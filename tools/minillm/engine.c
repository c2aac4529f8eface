/*
 * engine.c -- one request: reuse (kvtier or a given prefix KV), prefill the rest, sample, put.
 *
 * Every request starts from an empty cache with a freshly shuffled block table. The reused
 * prefix ends at least one token before the prompt's end: the last prompt token is always run
 * through the model, for its logits. Prefill processes positions one at a time in the same code
 * path as decoding, so a reused prefix changes which positions are computed, never how.
 *
 * Timing (CLOCK_MONOTONIC): copy_ms = lookup, lease and scatter; prefill_ms = copy_ms plus the
 * forward passes of the remaining prompt tokens up to the first logits; ttft_ms adds sampling
 * the first token. The put of the computed chunks happens after the first token (as an engine
 * would do it off the critical path) and is reported as put_ms. A request that ends its
 * conversation then names the conversation's own chunks to kvtierd (kvt_done); one that asks
 * for a keep has every chunk it cached kept at host for that long (kvt_keep).
 */
#include "minillm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int kvt_llm_engine_create(const struct kvt_llm_model *m, int kv_dtype, struct kvt_llm_engine **out)
{
	struct kvt_llm_engine *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->model = m;
	int rc =
	    kvt_llm_kv_create(kv_dtype, m->cfg.n_layers, m->cfg.kv_dim, m->cfg.seq_len, &e->kv);
	if (!rc)
		rc = kvt_llm_state_create(&m->cfg, &e->state);
	if (rc) {
		kvt_llm_engine_destroy(e);
		return rc;
	}
	*out = e;
	return 0;
}

void kvt_llm_engine_destroy(struct kvt_llm_engine *e)
{
	if (!e)
		return;
	kvt_llm_kv_destroy(e->kv);
	kvt_llm_state_destroy(e->state);
	free(e);
}

static int check_request(const struct kvt_llm_config *c, const struct kvt_llm_request *r)
{
	if (!r->ids || r->n_ids < 1 || r->steps < 0)
		return -EINVAL;
	if (r->n_ids > c->seq_len || r->steps > c->seq_len - r->n_ids)
		return -E2BIG;
	for (int i = 0; i < r->n_ids; i++)
		if (r->ids[i] < 0 || r->ids[i] >= c->vocab_size)
			return -EINVAL;
	if (r->prefix_kv && (r->prefix_tokens < 0 || r->prefix_tokens > r->n_ids - 1))
		return -EINVAL;
	return 0;
}

/* Reuses what it can; @return : tokens whose KV is now in the cache. */
static int reuse(struct kvt_llm_engine *e, const struct kvt_llm_request *r,
                 struct kvt_llm_result *res)
{
	if (r->prefix_kv) {
		int rc = kvt_llm_kv_scatter(e->kv, 0, r->prefix_tokens, r->prefix_kv,
		                            kvt_llm_kv_bytes(e->kv, r->prefix_tokens));
		return rc ? 0 : r->prefix_tokens;
	}
	if (!e->attach)
		return 0;
	int got = kvt_llm_attach_fetch(e->attach, e->kv, r->ids, r->n_ids);
	if (got < 0) {
		res->kvtier_err = got;
		return 0;
	}
	return got;
}

static void put_chunks(struct kvt_llm_engine *e, const int *ids, int n, int first,
                       struct kvt_llm_result *res)
{
	int rc = kvt_llm_attach_store(e->attach, e->kv, ids, n, first);
	if (rc < 0)
		res->kvtier_err = rc;
	else
		res->put_chunks += rc;
}

/* Counts what a kvtier call after the request did into *n, or its failure into kvtier_err. */
static void note(int rc, int *n, struct kvt_llm_result *res)
{
	if (rc < 0)
		res->kvtier_err = rc;
	else
		*n = rc;
}

int kvt_llm_engine_run(struct kvt_llm_engine *e, const struct kvt_llm_request *r,
                       struct kvt_llm_result *res)
{
	const struct kvt_llm_config *c = &e->model->cfg;
	memset(res, 0, sizeof(*res));
	int rc = check_request(c, r);
	if (rc)
		return rc;
	/* the prompt and then the generated ids: what the cache holds, in order */
	int *seq = malloc(((size_t)r->n_ids + (size_t)r->steps + 1) * sizeof(int));
	if (!seq)
		return -ENOMEM;
	memcpy(seq, r->ids, (size_t)r->n_ids * sizeof(int));
	int *out = seq + r->n_ids;
	struct kvt_llm_rng rng;
	kvt_llm_rng_seed(&rng, r->seed);
	kvt_llm_kv_reset(e->kv, ++e->runs);

	double t0 = now_ms();
	int reused = reuse(e, r, res);
	double t_copy = now_ms();
	for (int pos = reused; pos < r->n_ids; pos++)
		kvt_llm_forward(e->model, e->state, e->kv, r->ids[pos], pos, pos == r->n_ids - 1);
	double t_prefill = now_ms();
	const float *logits = e->state->logits;
	kvt_llm_topk(logits, c->vocab_size, 5, res->top5_ids, res->top5_vals);
	res->logits_hash = kvt_llm_fnv1a(0, logits, (size_t)c->vocab_size * sizeof(float));
	if (r->steps > 0)
		out[0] = kvt_llm_sample(logits, c->vocab_size, r->temperature, &rng);
	double t_first = now_ms();
	int C = e->attach ? kvt_llm_attach_chunk_tokens(e->attach) : 1;
	if (e->attach && !r->prefix_kv)
		put_chunks(e, r->ids, r->n_ids, reused / C, res);
	double t_put = now_ms();

	for (int i = 0; i < r->steps; i++) {
		if (r->logits_out)
			memcpy(r->logits_out + (size_t)i * c->vocab_size, e->state->logits,
			       (size_t)c->vocab_size * sizeof(float));
		if (i + 1 == r->steps)
			break;
		int tok = r->force_ids ? r->force_ids[i] : out[i];
		kvt_llm_forward(e->model, e->state, e->kv, tok, r->n_ids + i, 1);
		out[i + 1] = kvt_llm_sample(e->state->logits, c->vocab_size, r->temperature, &rng);
	}
	double t_done = now_ms();
	int cached = r->n_ids;
	if (e->attach && e->put_generated && !r->prefix_kv && r->steps > 1) {
		cached = r->n_ids + r->steps - 1;
		put_chunks(e, seq, cached, r->n_ids / C, res);
	}
	if (e->attach && r->end && !r->prefix_kv)
		note(kvt_llm_attach_done(e->attach, seq, cached,
		                         r->own_from < 0 ? reused / C : r->own_from),
		     &res->done_chunks, res);
	if (e->attach && r->keep_ms >= 0 && !r->prefix_kv)
		note(kvt_llm_attach_keep(e->attach, seq, cached, (uint32_t)r->keep_ms),
		     &res->kept_chunks, res);

	res->prompt_tokens = r->n_ids;
	res->reused_tokens = reused;
	res->copy_ms = t_copy - t0;
	res->prefill_ms = t_prefill - t0;
	res->ttft_ms = t_first - t0;
	res->put_ms = t_put - t_first;
	res->decode_ms = t_done - t_put;
	res->n_out = r->steps;
	res->output_ids = malloc(((size_t)r->steps + 1) * sizeof(int));
	if (!res->output_ids) {
		free(seq);
		return -ENOMEM;
	}
	memcpy(res->output_ids, out, (size_t)r->steps * sizeof(int));
	free(seq);
	return 0;
}
