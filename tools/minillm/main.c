/*
 * main.c -- the minillm program: options, requests, reports (text or one JSON object per
 * request), and the --dump-kv / --prefix-kv quality tools. The engine itself is the kvt_minillm
 * library; this file only wires it to the command line.
 */
#include "minillm.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct opts {
	const char *model, *tokenizer, *prompt, *prompt_ids, *requests, *socket, *dump_kv,
	    *prefix_kv, *model_name;
	int steps, json, kvtier, tokens_per_chunk, kv_dtype, put_generated;
	long keep_ms; /* --keep-ms, -1 when not given */
	float temperature;
	uint64_t seed;
};

/* A conversation of a --requests file ("session"): where its own chunks begin. The chunks its
 * first request reused came from someone else (a shared system prompt, another engine), so
 * "end" names only the chunks from there on. */
struct session {
	char *name;
	int own_from;
};

#define MAX_SESSIONS 1024 /* open at once */

struct ctx {
	struct opts o;
	struct session sessions[MAX_SESSIONS];
	int n_sessions;
	struct kvt_llm_model *model;
	struct kvt_llm_tokenizer *tok;
	struct kvt_llm_engine *engine;
	struct kvt_llm_attach *attach;
	char model_name[256];
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: minillm --model FILE --tokenizer FILE [--prompt TEXT | --prompt-ids \"ID ...\" "
	    "| --requests FILE]\n"
	    "               [--steps N] [--temperature T] [--seed S] [--kv-dtype f16|f32]\n"
	    "               [--kvtier[=SOCKET]] [--tokens-per-chunk N] [--put-generated]\n"
	    "               [--model-name NAME] [--keep-ms N] [--json] [--dump-kv FILE]\n"
	    "               [--prefix-kv FILE]\n"
	    "  --prompt text gets BOS prepended; --prompt-ids are used exactly.\n"
	    "  --requests FILE: one JSON object per line, {\"prompt\": ...} or "
	    "{\"prompt_ids\": [...]}, optional \"steps\";\n"
	    "    \"session\": \"NAME\" groups a conversation's requests, and \"end\": true on its "
	    "last\n"
	    "    one tells kvtierd the engine is done with the conversation's own chunks "
	    "(kvt_done);\n"
	    "    \"keep_ms\": N keeps the request's chunks at host for N ms after it (kvt_keep; 0 "
	    "ends a keep).\n"
	    "  --keep-ms N: the same for every request without \"keep_ms\" or \"end\".\n"
	    "  --kvtier reuses and stores prefix KV through kvtierd ($KVTIER_SOCKET or the "
	    "default socket).\n"
	    "  --dump-kv writes the prompt's KV (canonical layout); --prefix-kv continues from a\n"
	    "  given prefix KV and reports KL divergence, top-1 agreement and perplexity.\n");
}

static int parse_ids(const char *s, int *ids, int max, int *n)
{
	*n = 0;
	while (*s) {
		char *end;
		while (*s == ' ' || *s == ',' || *s == '\t')
			s++;
		if (!*s)
			break;
		long v = strtol(s, &end, 10);
		if (end == s || v < 0 || v > 0x7fffffff)
			return -EINVAL;
		if (*n >= max)
			return -E2BIG;
		ids[(*n)++] = (int)v;
		s = end;
	}
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum {
		O_MODEL = 256,
		O_TOK,
		O_PROMPT,
		O_IDS,
		O_REQ,
		O_STEPS,
		O_TEMP,
		O_SEED,
		O_KVT,
		O_TPC,
		O_JSON,
		O_DUMP,
		O_PREFIX,
		O_DTYPE,
		O_NAME,
		O_PUTGEN,
		O_KEEP,
		O_HELP
	};
	static const struct option lo[] = {{"model", required_argument, 0, O_MODEL},
	                                   {"tokenizer", required_argument, 0, O_TOK},
	                                   {"prompt", required_argument, 0, O_PROMPT},
	                                   {"prompt-ids", required_argument, 0, O_IDS},
	                                   {"requests", required_argument, 0, O_REQ},
	                                   {"steps", required_argument, 0, O_STEPS},
	                                   {"temperature", required_argument, 0, O_TEMP},
	                                   {"seed", required_argument, 0, O_SEED},
	                                   {"kvtier", optional_argument, 0, O_KVT},
	                                   {"tokens-per-chunk", required_argument, 0, O_TPC},
	                                   {"json", no_argument, 0, O_JSON},
	                                   {"dump-kv", required_argument, 0, O_DUMP},
	                                   {"prefix-kv", required_argument, 0, O_PREFIX},
	                                   {"kv-dtype", required_argument, 0, O_DTYPE},
	                                   {"model-name", required_argument, 0, O_NAME},
	                                   {"put-generated", no_argument, 0, O_PUTGEN},
	                                   {"keep-ms", required_argument, 0, O_KEEP},
	                                   {"help", no_argument, 0, O_HELP},
	                                   {0, 0, 0, 0}};
	*o = (struct opts){.steps = 32,
	                   .temperature = 1.0f,
	                   .seed = 42,
	                   .tokens_per_chunk = 16,
	                   .keep_ms = -1,
	                   .kv_dtype = KVT_LLM_F16};
	int c, at = 0;
	char *end;
	while ((c = getopt_long(argc, argv, "", lo, &at)) != -1) {
		switch (c) {
		case O_MODEL:
			o->model = optarg;
			break;
		case O_TOK:
			o->tokenizer = optarg;
			break;
		case O_PROMPT:
			o->prompt = optarg;
			break;
		case O_IDS:
			o->prompt_ids = optarg;
			break;
		case O_REQ:
			o->requests = optarg;
			break;
		case O_STEPS:
			o->steps = (int)strtol(optarg, &end, 10);
			if (*end || end == optarg || o->steps < 0)
				goto bad;
			break;
		case O_TEMP:
			o->temperature = strtof(optarg, &end);
			if (*end || end == optarg || !(o->temperature >= 0))
				goto bad;
			break;
		case O_SEED:
			o->seed = strtoull(optarg, &end, 10);
			if (*end || end == optarg || optarg[0] == '-')
				goto bad;
			break;
		case O_KVT:
			o->kvtier = 1;
			o->socket = optarg;
			break;
		case O_TPC:
			o->tokens_per_chunk = (int)strtol(optarg, &end, 10);
			if (*end || end == optarg || o->tokens_per_chunk <= 0)
				goto bad;
			break;
		case O_JSON:
			o->json = 1;
			break;
		case O_DUMP:
			o->dump_kv = optarg;
			break;
		case O_PREFIX:
			o->prefix_kv = optarg;
			break;
		case O_DTYPE:
			if (!strcmp(optarg, "f16") || !strcmp(optarg, "fp16"))
				o->kv_dtype = KVT_LLM_F16;
			else if (!strcmp(optarg, "f32") || !strcmp(optarg, "fp32"))
				o->kv_dtype = KVT_LLM_F32;
			else
				goto bad;
			break;
		case O_NAME:
			o->model_name = optarg;
			break;
		case O_PUTGEN:
			o->put_generated = 1;
			break;
		case O_KEEP:
			o->keep_ms = strtol(optarg, &end, 10);
			if (*end || end == optarg || o->keep_ms < 0 ||
			    (unsigned long)o->keep_ms > UINT32_MAX)
				goto bad;
			break;
		case O_HELP:
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc || !o->model || !o->tokenizer) {
		if (optind < argc) /* a glob that matched two files, a prompt without --prompt */
			fprintf(stderr, "minillm: unexpected argument '%s'\n", argv[optind]);
		else
			fprintf(stderr, "minillm: --model and --tokenizer are required\n");
		usage(stderr);
		return -EINVAL;
	}
	if (!!o->prompt + !!o->prompt_ids + !!o->requests > 1) {
		fprintf(stderr, "minillm: give one of --prompt, --prompt-ids and --requests\n");
		return -EINVAL;
	}
	if (o->requests && (o->dump_kv || o->prefix_kv)) {
		fprintf(stderr, "minillm: --dump-kv and --prefix-kv take a single prompt\n");
		return -EINVAL;
	}
	return 0;
bad: /* which option: "bad value for an option: -1" named none */
	fprintf(stderr, "minillm: --%s %s: %s\n", lo[at].name, optarg,
	        c == O_TEMP    ? "not a number from 0"
	        : c == O_DTYPE ? "not f16 or f32"
	        : c == O_TPC   ? "not a whole number from 1"
	        : c == O_KEEP  ? "not a whole number of ms from 0 to 2^32 - 1"
	                       : "not a whole number from 0");
	return -EINVAL;
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch == '\n')
			fputs("\\n", f);
		else if (ch < 0x20 || ch == 0x7f)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void report(struct ctx *x, int idx, int prev, const struct kvt_llm_result *r)
{
	char text[4096];
	kvt_llm_decode(x->tok, prev, r->output_ids, r->n_out, text, sizeof(text));
	if (!x->o.json) {
		printf("%s\n", text);
		fflush(stdout);
		fprintf(
		    stderr,
		    "minillm: prompt %d tokens, reused %d, prefill %.3f ms, ttft %.3f ms, put %d "
		    "chunks, %d tokens in %.3f ms\n",
		    r->prompt_tokens, r->reused_tokens, r->prefill_ms, r->ttft_ms, r->put_chunks,
		    r->n_out, r->decode_ms);
		return;
	}
	printf("{\"request\":%d,\"prompt_tokens\":%d,\"reused_tokens\":%d,\"put_chunks\":%d,"
	       "\"done_chunks\":%d,\"kept_chunks\":%d,\"prefill_ms\":%.4f,\"ttft_ms\":%.4f,\"copy_"
	       "ms\":%.4f,"
	       "\"put_ms\":%.4f,\"decode_ms\":%.4f,\"output_ids\":[",
	       idx, r->prompt_tokens, r->reused_tokens, r->put_chunks, r->done_chunks,
	       r->kept_chunks, r->prefill_ms, r->ttft_ms, r->copy_ms, r->put_ms, r->decode_ms);
	for (int i = 0; i < r->n_out; i++)
		printf("%s%d", i ? "," : "", r->output_ids[i]);
	printf("],\"top5\":[");
	for (int i = 0; i < 5; i++)
		printf("%s[%d,%.9g]", i ? "," : "", r->top5_ids[i], (double)r->top5_vals[i]);
	printf("],\"logits_hash\":\"%016llx\",\"text\":", (unsigned long long)r->logits_hash);
	json_string(stdout, text);
	if (r->kvtier_err)
		printf(",\"kvtier_error\":\"%s\"", strerror(-r->kvtier_err));
	printf("}\n");
}

/* @return : the open session named name, or NULL. */
static struct session *find_session(struct ctx *x, const char *name)
{
	for (int i = 0; i < x->n_sessions; i++)
		if (!strcmp(x->sessions[i].name, name))
			return &x->sessions[i];
	return NULL;
}

/* Records what a session's request did: its first one fixes own_from; "end" closes it. */
static int track_session(struct ctx *x, const struct kvt_llm_line *l, struct session *s,
                         const struct kvt_llm_result *res)
{
	if (l->end) {
		if (s) {
			free(s->name);
			*s = x->sessions[--x->n_sessions];
		}
		return 0;
	}
	if (s)
		return 0;
	if (x->n_sessions == MAX_SESSIONS) {
		fprintf(stderr, "minillm: more than %d sessions open at once\n", MAX_SESSIONS);
		return -E2BIG;
	}
	int C = x->attach ? kvt_llm_attach_chunk_tokens(x->attach) : 1;
	char *name = strdup(l->session);
	if (!name)
		return -ENOMEM;
	x->sessions[x->n_sessions++] = (struct session){name, res->reused_tokens / C};
	return 0;
}

/* The keep a request asks for: its line's "keep_ms", else --keep-ms unless it ends its
 * conversation, else none (-1). */
static int64_t keep_ms_of(const struct ctx *x, const struct kvt_llm_line *l)
{
	if (l && l->keep_ms >= 0)
		return l->keep_ms;
	return l && l->end ? -1 : x->o.keep_ms;
}

/* l: the requests-file line (session, end), or NULL for a single prompt. */
static int run_one(struct ctx *x, int idx, const int *ids, int n, int steps,
                   const struct kvt_llm_line *l)
{
	struct session *s = l && l->session ? find_session(x, l->session) : NULL;
	struct kvt_llm_request req = {.ids = ids,
	                              .n_ids = n,
	                              .steps = steps,
	                              .temperature = x->o.temperature,
	                              .seed = x->o.seed,
	                              .end = l && l->end,
	                              .keep_ms = keep_ms_of(x, l),
	                              .own_from = s ? s->own_from : -1};
	struct kvt_llm_result res;
	int rc = kvt_llm_engine_run(x->engine, &req, &res);
	if (rc == -E2BIG) {
		fprintf(
		    stderr,
		    "minillm: request %d: %d prompt tokens + %d steps exceed the model's context "
		    "(seq_len %d)\n",
		    idx, n, steps, x->model->cfg.seq_len);
		return rc;
	}
	if (rc) {
		fprintf(stderr, "minillm: request %d: %s\n", idx,
		        rc == -EINVAL ? "invalid prompt (empty, or an id outside the vocabulary)"
		                      : strerror(-rc));
		return rc;
	}
	if (res.kvtier_err && !x->o.json)
		fprintf(stderr, "minillm: kvtier: %s (request ran without it)\n",
		        strerror(-res.kvtier_err));
	report(x, idx, ids[n - 1], &res);
	if (l && l->session)
		rc = track_session(x, l, s, &res);
	free(res.output_ids);
	if (x->o.dump_kv) {
		char err[512];
		rc = kvt_llm_dump_write(x->o.dump_kv, x->engine->kv, &x->model->cfg, ids, n, err,
		                        sizeof(err));
		if (rc)
			fprintf(stderr, "minillm: --dump-kv: %s\n", err);
	}
	return rc;
}

static int prompt_ids(struct ctx *x, const char *text, int *ids, int max, int *n)
{
	int rc = kvt_llm_encode(x->tok, text, 1, ids, max, n);
	if (rc == -ENOSPC)
		fprintf(stderr,
		        "minillm: the prompt is longer than the model's context (seq_len %d)\n",
		        x->model->cfg.seq_len);
	else if (rc)
		fprintf(stderr, "minillm: cannot tokenize the prompt: %s\n", strerror(-rc));
	return rc;
}

static int run_requests(struct ctx *x, int *ids, int max)
{
	FILE *f = fopen(x->o.requests, "r");
	if (!f) {
		fprintf(stderr, "minillm: %s: %s\n", x->o.requests, strerror(errno));
		return -errno;
	}
	char *line = NULL;
	size_t cap = 0;
	int idx = 0, failed = 0;
	while (getline(&line, &cap, f) > 0) {
		struct kvt_llm_line l;
		char err[256];
		if (strspn(line, " \t\r\n") == strlen(line))
			continue;
		int rc = kvt_llm_parse_request(line, &l, ids, max, err, sizeof(err));
		int n = l.n_ids;
		if (!rc && l.text)
			rc = prompt_ids(x, l.text, ids, max, &n);
		else if (rc)
			fprintf(stderr, "minillm: %s: request %d: %s\n", x->o.requests, idx, err);
		if (!rc)
			rc = run_one(x, idx, ids, n, l.steps >= 0 ? l.steps : x->o.steps, &l);
		kvt_llm_line_free(&l);
		failed |= rc != 0;
		idx++;
	}
	free(line);
	fclose(f);
	return failed ? -EINVAL : 0;
}

/* --prefix-kv: the exact run, then the run from the given prefix, teacher-forced on the exact
 * run's tokens; compares the next-token distributions of the generated positions. */
static int run_prefix(struct ctx *x, const int *ids, int n)
{
	const struct kvt_llm_config *c = &x->model->cfg;
	struct kvt_llm_dump_hdr h;
	void *prefix = NULL;
	char err[512];
	int rc = kvt_llm_dump_read(x->o.prefix_kv, c, x->o.kv_dtype, &h, &prefix, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "minillm: --prefix-kv: %s\n", err);
		return rc;
	}
	rc = -EINVAL;
	if ((int)h.n_tokens > n - 1 || h.tokens_hash != kvt_llm_tokens_hash(ids, (int)h.n_tokens) ||
	    x->o.steps < 1) {
		fprintf(stderr,
		        "minillm: --prefix-kv: the dump's %u tokens are not a proper prefix "
		        "of this prompt (or --steps is 0)\n",
		        h.n_tokens);
		free(prefix);
		return rc;
	}
	size_t V = (size_t)c->vocab_size, S = (size_t)x->o.steps;
	float *exact = malloc(S * V * sizeof(float)), *lossy = malloc(S * V * sizeof(float));
	float *lp = malloc(V * sizeof(float)), *lq = malloc(V * sizeof(float));
	struct kvt_llm_result r0 = {0}, r1 = {0};
	struct kvt_llm_request req = {.ids = ids,
	                              .n_ids = n,
	                              .steps = x->o.steps,
	                              .temperature = x->o.temperature,
	                              .seed = x->o.seed,
	                              .logits_out = exact};
	struct kvt_llm_attach *saved = x->engine->attach;
	x->engine->attach = NULL;
	if (!exact || !lossy || !lp || !lq || (rc = kvt_llm_engine_run(x->engine, &req, &r0)))
		goto out;
	req.logits_out = lossy;
	req.prefix_kv = prefix;
	req.prefix_tokens = (int)h.n_tokens;
	req.force_ids = r0.output_ids;
	if ((rc = kvt_llm_engine_run(x->engine, &req, &r1)))
		goto out;
	double kl = 0, kl_max = 0, nll_p = 0, nll_q = 0;
	int agree = 0;
	for (size_t i = 0; i < S; i++) {
		kvt_llm_log_softmax(exact + i * V, (int)V, lp);
		kvt_llm_log_softmax(lossy + i * V, (int)V, lq);
		double k = 0;
		int ap = 0, aq = 0;
		for (size_t v = 0; v < V; v++) {
			k += exp((double)lp[v]) * ((double)lp[v] - (double)lq[v]);
			ap = lp[v] > lp[ap] ? (int)v : ap;
			aq = lq[v] > lq[aq] ? (int)v : aq;
		}
		kl += k;
		kl_max = k > kl_max ? k : kl_max;
		agree += ap == aq;
		nll_p -= lp[r0.output_ids[i]];
		nll_q -= lq[r0.output_ids[i]];
	}
	printf("{\"prefix_tokens\":%u,\"prompt_tokens\":%d,\"positions\":%zu,\"kl_mean\":%.9g,"
	       "\"kl_max\":%.9g,\"top1_agreement\":%.6f,\"ppl_exact\":%.6f,\"ppl_prefix\":%.6f}\n",
	       h.n_tokens, n, S, kl / (double)S, kl_max, (double)agree / (double)S,
	       exp(nll_p / (double)S), exp(nll_q / (double)S));
out:
	x->engine->attach = saved;
	free(r0.output_ids);
	free(r1.output_ids);
	free(exact);
	free(lossy);
	free(lp);
	free(lq);
	free(prefix);
	return rc;
}

static int open_all(struct ctx *x)
{
	char err[512];
	int rc = kvt_llm_model_open(x->o.model, &x->model, err, sizeof(err));
	if (!rc)
		rc = kvt_llm_tokenizer_open(x->o.tokenizer, x->model->cfg.vocab_size, &x->tok, err,
		                            sizeof(err));
	if (rc) {
		fprintf(stderr, "minillm: %s\n", err);
		return rc;
	}
	rc = kvt_llm_engine_create(x->model, x->o.kv_dtype, &x->engine);
	if (rc) {
		fprintf(stderr, "minillm: %s\n", strerror(-rc));
		return rc;
	}
	if (!x->o.kvtier)
		return 0;
	const char *name = x->o.model_name;
	if (!name) { /* the file's name without its folder and ".bin" */
		const char *b = strrchr(x->o.model, '/');
		snprintf(x->model_name, sizeof(x->model_name), "%s", b ? b + 1 : x->o.model);
		char *dot = strrchr(x->model_name, '.');
		if (dot && !strcmp(dot, ".bin"))
			*dot = 0;
		name = x->model_name;
	}
	rc = kvt_llm_attach_open(x->o.socket, name, &x->model->cfg, x->o.kv_dtype,
	                         x->o.tokens_per_chunk, &x->attach, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "minillm: %s\n", err);
		return rc;
	}
	x->engine->attach = x->attach;
	x->engine->put_generated = x->o.put_generated;
	return 0;
}

int main(int argc, char **argv)
{
	struct ctx x = {0};
	int rc = parse_opts(argc, argv, &x.o);
	if (rc)
		return 2;
	if ((rc = open_all(&x)))
		goto out;
	int max = x.model->cfg.seq_len, n = 0;
	int *ids = calloc((size_t)max + 1, sizeof(int));
	if (!ids) {
		rc = -ENOMEM;
		goto out;
	}
	if (x.o.requests) {
		rc = run_requests(&x, ids, max);
	} else {
		if (x.o.prompt_ids) {
			rc = parse_ids(x.o.prompt_ids, ids, max, &n);
			if (rc)
				fprintf(stderr, "minillm: --prompt-ids: %s\n",
				        rc == -E2BIG ? "more ids than the model's context (seq_len)"
				                     : "not a list of non-negative integers");
		} else {
			rc = prompt_ids(&x, x.o.prompt ? x.o.prompt : "", ids, max, &n);
		}
		if (!rc)
			rc = x.o.prefix_kv ? run_prefix(&x, ids, n)
			                   : run_one(&x, 0, ids, n, x.o.steps, NULL);
	}
	free(ids);
out:
	kvt_llm_attach_close(x.attach);
	kvt_llm_engine_destroy(x.engine);
	for (int i = 0; i < x.n_sessions; i++)
		free(x.sessions[i].name);
	kvt_llm_tokenizer_close(x.tok);
	kvt_llm_model_close(x.model);
	return rc ? 1 : 0;
}
