/*
 * minillm.h -- the reference engine's library (kvt_minillm): a llama2.c-format model, its BPE
 * tokenizer, a paged KV cache and a forward pass, plus the kvtier attach that lets several engine
 * processes reuse each other's prefix KV through kvtierd.
 *
 * The engine is deliberately small and deterministic. Every reduction runs in a fixed order and
 * attention reads K and V back from the paged cache (also at the current position), so a sequence
 * whose leading KV was copied in from kvtier and one that computed it produce the same bits.
 *
 * Errors are -errno; functions that can fail for a reason a user must read also fill an err
 * buffer with one line of text (the library never prints).
 */
#ifndef KVT_MINILLM_H
#define KVT_MINILLM_H

#include <stddef.h>
#include <stdint.h>

/* KV element types; the values are the KVT_DTYPE_* of include/kvtier.h. */
enum { KVT_LLM_F32 = 0, KVT_LLM_F16 = 1 };

/* ---- model (model.c) ---- */

struct kvt_llm_config {
	int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
	int32_t head_dim, kv_dim; /* derived */
	int shared_classifier;    /* vocab_size > 0 in the file: the classifier is the embedding */
};

struct kvt_llm_model {
	struct kvt_llm_config cfg;
	float *data; /* owned: the whole file's floats after the header */
	const float *tok_emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final,
	    *wcls;
};

/* Reads and validates a llama2.c version-0 checkpoint (header sanity, exact file size, finite
 * weights). @return : 0 and *out (owned by the caller), or -errno with err filled. */
int kvt_llm_model_open(const char *path, struct kvt_llm_model **out, char *err, size_t err_len);
void kvt_llm_model_close(struct kvt_llm_model *m);
/* Expected file size for a header, or 0 when the header is not a plausible model. */
uint64_t kvt_llm_model_file_bytes(const int32_t hdr[7], char *err, size_t err_len);

/* ---- tokenizer (tokenizer.c) ---- */

enum { KVT_LLM_UNK = 0, KVT_LLM_BOS = 1, KVT_LLM_EOS = 2 };

struct kvt_llm_tokenizer;

/* Reads a llama2.c tokenizer of vocab_size records; the file must end after the last record.
 * @return : 0 and *out (owned), or -errno with err filled. */
int kvt_llm_tokenizer_open(const char *path, int vocab_size, struct kvt_llm_tokenizer **out,
                           char *err, size_t err_len);
void kvt_llm_tokenizer_close(struct kvt_llm_tokenizer *t);
/* BPE-encodes text (llama2.c rules: a leading space, byte fallback, best-score merges) into
 * ids[0..*n_out), BOS first when bos. @return : 0, -ENOSPC (max_ids too small), -ENOMEM. */
int kvt_llm_encode(const struct kvt_llm_tokenizer *t, const char *text, int bos, int *ids,
                   int max_ids, int *n_out);
/* The bytes that token prints after prev (raw byte for <0xNN>, no leading space after BOS).
 * @return : the piece's length; *piece points into t or into byte_buf (>= 2 bytes). */
size_t kvt_llm_piece(const struct kvt_llm_tokenizer *t, int prev, int token, char *byte_buf,
                     const char **piece);
/* Decodes ids, which follow the token prev (-1: none), into dst (always NUL-terminated).
 * @return : the length it needed (like snprintf). */
size_t kvt_llm_decode(const struct kvt_llm_tokenizer *t, int prev, const int *ids, int n, char *dst,
                      size_t dst_len);
int kvt_llm_tokenizer_vocab(const struct kvt_llm_tokenizer *t);

/* ---- paged KV cache (kvcache.c) ---- */

#define KVT_LLM_BLOCK_TOKENS 16

struct kvt_llm_kvcache {
	int dtype, n_layers, kv_dim, seq_len;
	int blocks_per_layer; /* ceil(seq_len / KVT_LLM_BLOCK_TOKENS) */
	size_t elem_bytes, row_bytes, block_bytes;
	uint8_t *pool;  /* owned: n_layers * blocks_per_layer blocks */
	int32_t *table; /* owned: [layer][logical block] -> physical block */
};

int kvt_llm_kv_create(int dtype, int n_layers, int kv_dim, int seq_len,
                      struct kvt_llm_kvcache **out);
void kvt_llm_kv_destroy(struct kvt_llm_kvcache *kv);
/* Starts a new sequence: a fresh, seed-shuffled block table (the pool's bytes stay). */
void kvt_llm_kv_reset(struct kvt_llm_kvcache *kv, uint64_t seed);
/* The row of kv_dim elements of K (which 0) or V (which 1) of layer at pos. */
void *kvt_llm_kv_row(const struct kvt_llm_kvcache *kv, int layer, int which, int pos);
/* Converts and stores the K and V rows of layer at pos. */
void kvt_llm_kv_store(struct kvt_llm_kvcache *kv, int layer, int pos, const float *k,
                      const float *v);
/* Bytes of n_tokens in the canonical layout [layer][K,V][token][kv_head][head_dim]. */
size_t kvt_llm_kv_bytes(const struct kvt_llm_kvcache *kv, int n_tokens);
/* Copies tokens [pos, pos+n) out of (gather) or into (scatter) the paged cache, canonical layout
 * on the other side. @return : 0 or -EINVAL (range or buffer size). */
int kvt_llm_kv_gather(const struct kvt_llm_kvcache *kv, int pos, int n, void *dst, size_t dst_len);
int kvt_llm_kv_scatter(struct kvt_llm_kvcache *kv, int pos, int n, const void *src, size_t src_len);

/* fp16 <-> fp32 (round to nearest even), independent of compiler support for _Float16. */
uint16_t kvt_llm_f32_to_f16(float f);
float kvt_llm_f16_to_f32(uint16_t h);
/* The 65536-entry half -> float table behind kvt_llm_f16_to_f32 (thread-safe, filled once). */
const float *kvt_llm_f16_table(void);

/* ---- forward pass and sampling (forward.c, sample.c) ---- */

struct kvt_llm_state {
	float *x, *xb, *xb2, *hb, *hb2, *q, *k, *v, *kvrow, *att, *logits; /* one allocation */
};

int kvt_llm_state_create(const struct kvt_llm_config *cfg, struct kvt_llm_state **out);
void kvt_llm_state_destroy(struct kvt_llm_state *s);
/* Runs token at pos through the model, storing its K and V into kv; computes s->logits only
 * when want_logits. Positions before pos must already be in kv. */
void kvt_llm_forward(const struct kvt_llm_model *m, struct kvt_llm_state *s,
                     struct kvt_llm_kvcache *kv, int token, int pos, int want_logits);

struct kvt_llm_rng {
	uint64_t state;
};
void kvt_llm_rng_seed(struct kvt_llm_rng *r, uint64_t seed);
/* Greedy when temperature <= 0, else samples softmax(logits / temperature). */
int kvt_llm_sample(const float *logits, int n, float temperature, struct kvt_llm_rng *r);
/* The k largest logits, ties to the lower id, in decreasing order. */
void kvt_llm_topk(const float *logits, int n, int k, int *ids, float *vals);
/* log-softmax of logits into out (n floats). */
void kvt_llm_log_softmax(const float *logits, int n, float *out);

/* ---- kvtier attach (attach.c) ---- */

struct kvt_llm_attach;

/* 1 when this build can attach to kvtierd. */
/* Connects (socket NULL = the library's default) and registers the namespace of the model
 * {"aidreams260K"-style name, dtype of kv, tokens_per_chunk}. @return : 0 or -errno. */
int kvt_llm_attach_open(const char *socket, const char *model_name,
                        const struct kvt_llm_config *cfg, int dtype, int tokens_per_chunk,
                        struct kvt_llm_attach **out, char *err, size_t err_len);
void kvt_llm_attach_close(struct kvt_llm_attach *a);
/* Acquires the leading stored chunks of ids[0..n) that end before the last token, scatters them
 * into kv, releases and checks the leases. @return : tokens reused (a multiple of the chunk
 * size; 0 on a miss), or -errno (the caller then recomputes everything). */
int kvt_llm_attach_fetch(struct kvt_llm_attach *a, struct kvt_llm_kvcache *kv, const int *ids,
                         int n);
/* Gathers the full chunks of ids[0..n) from chunk index first_chunk on and puts them.
 * @return : how many chunks (from first_chunk) are stored now, or -errno. */
int kvt_llm_attach_store(struct kvt_llm_attach *a, const struct kvt_llm_kvcache *kv, const int *ids,
                         int n, int first_chunk);
int kvt_llm_attach_chunk_tokens(const struct kvt_llm_attach *a);
/* Tells kvtierd the engine is done with the full chunks of ids[0..n) from chunk index
 * first_chunk on (kvt_done). @return : how many chunks were named, or -errno. */
int kvt_llm_attach_done(struct kvt_llm_attach *a, const int *ids, int n, int first_chunk);
/* Keeps the full chunks of ids[0..n) at host for ttl_ms (kvt_keep). @return : how many are
 * kept, or -errno (-ENOSPC: none fit under host.keep_pct). */
int kvt_llm_attach_keep(struct kvt_llm_attach *a, const int *ids, int n, uint32_t ttl_ms);

/* ---- one request (engine.c) ---- */

struct kvt_llm_engine {
	const struct kvt_llm_model *model; /* borrowed */
	struct kvt_llm_kvcache *kv;        /* owned */
	struct kvt_llm_state *state;       /* owned */
	struct kvt_llm_attach *attach;     /* borrowed, may be NULL */
	int put_generated;                 /* also store chunks completed while generating */
	uint64_t runs;                     /* requests so far: seeds the block shuffle */
};

struct kvt_llm_request {
	const int *ids; /* borrowed: the prompt, exactly as the model sees it */
	int n_ids, steps;
	float temperature;
	uint64_t seed;
	const void *prefix_kv; /* optional: canonical KV of ids[0..prefix_tokens), used as is */
	int prefix_tokens;
	float *logits_out; /* optional: [steps][vocab] logits of each generated position */
	const int
	    *force_ids; /* optional: feed these instead of the sampled ids (teacher forcing) */
	/* The engine is done with this conversation after the request (kvt_done): the chunks it
	 * cached (the prompt's, and the generated ones with put_generated) from chunk own_from on
	 * are named; own_from < 0 means from the first chunk this request did not reuse. */
	int end, own_from;
	/* >= 0: after the request, keep every full chunk it cached at host for keep_ms
	 * milliseconds (kvt_keep; 0 ends an earlier keep), the whole prefix from chunk 0, since
	 * the conversation's next turn needs all of it. < 0: no keep. */
	int64_t keep_ms;
};

struct kvt_llm_result {
	int prompt_tokens, reused_tokens, put_chunks, done_chunks, kept_chunks, n_out;
	int *output_ids; /* owned by the result, free() it */
	double prefill_ms, ttft_ms, copy_ms, put_ms, decode_ms;
	int top5_ids[5];
	float top5_vals[5];
	uint64_t logits_hash; /* FNV-1a of the first generated position's logits, bit-exact */
	int kvtier_err;       /* last -errno from kvtier, 0 if none (the request still ran) */
};

int kvt_llm_engine_create(const struct kvt_llm_model *m, int kv_dtype, struct kvt_llm_engine **out);
void kvt_llm_engine_destroy(struct kvt_llm_engine *e);
/* Runs one request from an empty cache. @return : 0, -E2BIG (n_ids + steps > seq_len), -EINVAL,
 * -ENOMEM. kvtier failures do not fail the request (see kvtier_err). */
int kvt_llm_engine_run(struct kvt_llm_engine *e, const struct kvt_llm_request *req,
                       struct kvt_llm_result *res);

/* ---- KV dump files (dump.c) ---- */

/* A dump: a 64-byte little-endian header, then the canonical payload of n_tokens. */
struct kvt_llm_dump_hdr {
	char magic[8]; /* "KVTLLMKV" */
	uint32_t version, dtype, n_layers, n_kv_heads, head_dim, n_tokens;
	uint64_t tokens_hash; /* FNV-1a of the token ids (u32 LE) the KV belongs to */
	uint64_t payload_bytes;
	uint32_t reserved[4];
};
_Static_assert(sizeof(struct kvt_llm_dump_hdr) == 64, "dump header is 64 bytes");

uint64_t kvt_llm_fnv1a(uint64_t h, const void *p, size_t len);
uint64_t kvt_llm_tokens_hash(const int *ids, int n);
int kvt_llm_dump_write(const char *path, const struct kvt_llm_kvcache *kv,
                       const struct kvt_llm_config *cfg, const int *ids, int n, char *err,
                       size_t err_len);
/* Reads a dump and converts its payload to dtype. @return : 0 with *payload (owned, malloc) and
 * *hdr, or -errno with err filled. */
int kvt_llm_dump_read(const char *path, const struct kvt_llm_config *cfg, int dtype,
                      struct kvt_llm_dump_hdr *hdr, void **payload, char *err, size_t err_len);

/* ---- requests files and JSON (json.c) ---- */

/* One line of a requests file. */
struct kvt_llm_line {
	char *text;    /* "prompt" (owned), or NULL when "prompt_ids" filled the ids */
	char *session; /* "session" (owned), or NULL */
	int n_ids;     /* ids given by "prompt_ids" */
	int steps;     /* "steps", -1 when absent */
	int end;       /* "end": true, the session ends with this request */
	long keep_ms;  /* "keep_ms" (0 to UINT32_MAX), -1 when absent */
};

/* Parses one line {"prompt": "..."} or {"prompt_ids": [..]} with optional "steps", "session"
 * (a string naming a conversation), "end" (true or false) and "keep_ms" (an integer). "end"
 * needs "session"; "end" and "keep_ms" together contradict each other.
 * @return : 0 with *out filled (free with kvt_llm_line_free), or -EINVAL / -E2BIG with err
 *          filled and nothing owned. */
int kvt_llm_parse_request(const char *line, struct kvt_llm_line *out, int *ids, int max_ids,
                          char *err, size_t err_len);
void kvt_llm_line_free(struct kvt_llm_line *l);

#endif
