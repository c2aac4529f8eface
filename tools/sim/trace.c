/*
 * trace.c -- trace loading. The whole file is read into memory and scanned once; block ids go
 * through an open-addressing map to dense ids (first appearance order), so policies can keep
 * per-id arrays. Mooncake lines are parsed by looking for the "timestamp" and "hash_ids" keys
 * only; the rest of the object is ignored. A native line "done <id>..." is an engine's kvt_done
 * before the next request (t->hint_off / hint_blk). A file with native lines keeps each dense
 * id's own id (t->key): the policies hash it, as kvtierd hashes the ids it records, so a
 * recording replays with kvtierd's hashes. Mooncake ids are numbers given in order, and there
 * the dense id is the key (the figures in docs/policies.md were measured so).
 */
#include "sim.h"
#include "sim_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct idmap {
	uint64_t *keys; /* key + 1; 0 = empty */
	uint32_t *vals;
	size_t cap, n;
	uint32_t max_val; /* the id of key UINT64_MAX (whose key + 1 would be 0) */
	bool has_max;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static int idmap_get(struct idmap *m, uint64_t key, uint32_t *out)
{
	if (key == UINT64_MAX) {
		if (!m->has_max) {
			m->has_max = true;
			m->max_val = (uint32_t)m->n++;
		}
		*out = m->max_val;
		return 0;
	}
	if ((m->n + 1) * 2 > m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 1024;
		uint64_t *k = calloc(nc, sizeof(*k));
		uint32_t *v = calloc(nc, sizeof(*v));
		if (!k || !v) {
			free(k);
			free(v);
			return -ENOMEM;
		}
		for (size_t i = 0; i < m->cap; i++)
			if (m->keys[i]) {
				size_t j = mix(m->keys[i]) & (nc - 1);
				while (k[j])
					j = (j + 1) & (nc - 1);
				k[j] = m->keys[i];
				v[j] = m->vals[i];
			}
		free(m->keys);
		free(m->vals);
		m->keys = k;
		m->vals = v;
		m->cap = nc;
	}
	uint64_t k1 = key + 1;
	size_t j = mix(k1) & (m->cap - 1);
	while (m->keys[j] && m->keys[j] != k1)
		j = (j + 1) & (m->cap - 1);
	if (!m->keys[j]) {
		m->keys[j] = k1;
		m->vals[j] = (uint32_t)m->n++;
	}
	*out = m->vals[j];
	return 0;
}

struct builder {
	struct kvt_trace *t;
	size_t cap_req, cap_acc;
	struct idmap map;
	/* native "done" lines: each hinted id and the request it comes before */
	uint32_t *hint_id;
	uint64_t *hint_req;
	size_t n_hint, cap_hint;
	bool native; /* a native line was read: the trace keeps its ids (t->key) */
};

static int push_req(struct builder *b, uint64_t ts, uint32_t tenant)
{
	struct kvt_trace *t = b->t;
	if (t->n_req + 2 > b->cap_req) {
		size_t nc = b->cap_req ? b->cap_req * 2 : 256;
		uint64_t *off = realloc(t->req_off, nc * sizeof(*off));
		if (!off)
			return -ENOMEM;
		t->req_off = off;
		uint64_t *tsa = realloc(t->ts_ms, nc * sizeof(*tsa));
		if (!tsa)
			return -ENOMEM;
		t->ts_ms = tsa;
		uint32_t *ten = realloc(t->tenant, nc * sizeof(*ten));
		if (!ten)
			return -ENOMEM;
		t->tenant = ten;
		b->cap_req = nc;
	}
	t->ts_ms[t->n_req] = ts;
	t->tenant[t->n_req] = tenant;
	t->req_off[t->n_req] = t->n_acc;
	t->n_req++;
	t->req_off[t->n_req] = t->n_acc;
	return 0;
}

/* A "done" line's id: hinted before the next request. */
static int push_hint(struct builder *b, uint64_t raw)
{
	if (b->n_hint == b->cap_hint) {
		size_t nc = b->cap_hint ? b->cap_hint * 2 : 1024;
		uint32_t *id = realloc(b->hint_id, nc * sizeof(*id));
		if (!id)
			return -ENOMEM;
		b->hint_id = id;
		uint64_t *rq = realloc(b->hint_req, nc * sizeof(*rq));
		if (!rq)
			return -ENOMEM;
		b->hint_req = rq;
		b->cap_hint = nc;
	}
	int rc = idmap_get(&b->map, raw, &b->hint_id[b->n_hint]);
	if (!rc)
		b->hint_req[b->n_hint++] = b->t->n_req;
	return rc;
}

static int push_blk(struct builder *b, uint64_t raw)
{
	struct kvt_trace *t = b->t;
	if (t->n_acc == b->cap_acc) {
		size_t nc = b->cap_acc ? b->cap_acc * 2 : 1024;
		uint32_t *blk = realloc(t->blk, nc * sizeof(*blk));
		if (!blk)
			return -ENOMEM;
		t->blk = blk;
		b->cap_acc = nc;
	}
	uint32_t id;
	int rc = idmap_get(&b->map, raw, &id);
	if (rc)
		return rc;
	t->blk[t->n_acc++] = id;
	t->req_off[t->n_req] = t->n_acc;
	return 0;
}

/* A decimal u64 at *p (a sign, or a number past 2^64 - 1, is refused: strtoull would take
 * "-1" as 2^64 - 1 and saturate silently). @return : 0 with *p past it, -EINVAL, -ERANGE. */
static int num(char **p, uint64_t *v)
{
	char *s = *p, *end;
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	*p = end;
	return 0;
}

static int parse_mooncake(struct builder *b, char *line)
{
	char *p = strstr(line, "\"timestamp\"");
	char *h = strstr(line, "\"hash_ids\"");
	if (!h)
		return -EINVAL;
	uint64_t ts = 0, v;
	int rc;
	if (p && (p = strchr(p, ':')) && (p++, rc = num(&p, &ts)))
		return rc;
	h = strchr(h, '[');
	if (!h)
		return -EINVAL;
	if ((rc = push_req(b, ts, 0)))
		return rc;
	for (h++;;) {
		while (*h == ' ' || *h == '\t')
			h++;
		if (*h == ']')
			return 0;
		if ((rc = num(&h, &v)) || (rc = push_blk(b, v)))
			return rc;
		while (*h == ' ' || *h == '\t')
			h++;
		if (*h != ',' && *h != ']')
			return -EINVAL;
		h += *h == ',';
	}
}

/* The rest of a native line, p on, as ids, each given to push ("12x": -EINVAL). */
static int ids(struct builder *b, char *p, int (*push)(struct builder *, uint64_t))
{
	uint64_t v;
	for (int rc = 0;; rc = push(b, v)) {
		if (rc)
			return rc;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			return 0;
		if ((rc = num(&p, &v)))
			return rc;
		if (*p && *p != ' ' && *p != '\t')
			return -EINVAL;
	}
}

static int parse_native(struct builder *b, char *line)
{
	char *c = strchr(line, '#');
	if (c)
		*c = 0;
	line[strcspn(line, "\r\n")] = 0;
	char *p = line;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return 0;
	b->native = true;
	if (!strncmp(p, "done", 4) && (!p[4] || p[4] == ' ' || p[4] == '\t'))
		return ids(b, p + 4, push_hint); /* the engine is done with these (kvt_done) */
	uint64_t ts, tenant = 0;
	int rc = num(&p, &ts);
	if (rc)
		return rc;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!strncmp(p, "t=", 2)) {
		p += 2;
		if ((rc = num(&p, &tenant)))
			return rc;
		if (tenant > UINT32_MAX)
			return -ERANGE;
	}
	rc = push_req(b, ts, (uint32_t)tenant);
	return rc ? rc : ids(b, p, push_blk);
}

/* The done lines' hints as the trace's hint_off / hint_blk (those after the last request are
 * dropped: no request follows them). */
static int hints_done(struct builder *b)
{
	struct kvt_trace *t = b->t;
	size_t n = 0;
	while (n < b->n_hint && b->hint_req[n] < t->n_req)
		n++;
	if (!n)
		return 0;
	t->hint_off = calloc(t->n_req + 1, sizeof(*t->hint_off));
	t->hint_blk = malloc(n * sizeof(*t->hint_blk));
	if (!t->hint_off || !t->hint_blk)
		return -ENOMEM;
	memcpy(t->hint_blk, b->hint_id, n * sizeof(*t->hint_blk));
	for (size_t i = 0; i < n; i++)
		t->hint_off[b->hint_req[i] + 1]++;
	for (size_t q = 0; q < t->n_req; q++)
		t->hint_off[q + 1] += t->hint_off[q];
	return 0;
}

/* Each dense id's own id, read back from the map (t->key), for a trace with native lines. */
static int own_ids(struct builder *b)
{
	const struct idmap *m = &b->map;
	uint64_t *key = m->n ? malloc(m->n * sizeof(*key)) : NULL;
	if (m->n && !key)
		return -ENOMEM;
	for (size_t j = 0; j < m->cap; j++)
		if (m->keys[j])
			key[m->vals[j]] = m->keys[j] - 1;
	if (m->has_max)
		key[m->max_val] = UINT64_MAX;
	b->t->key = key;
	return 0;
}

static int builder_done(struct builder *b)
{
	b->t->n_blocks = b->map.n;
	int rc = hints_done(b);
	if (!rc && b->native)
		rc = own_ids(b);
	free(b->map.keys);
	free(b->map.vals);
	free(b->hint_id);
	free(b->hint_req);
	return rc;
}

int kvt_trace_load(const char *path, struct kvt_trace *t)
{
	int rc = 0;
	memset(t, 0, sizeof(*t));
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	struct builder b = {.t = t};
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	size_t lineno = 0;
	while ((len = getline(&line, &cap, f)) > 0 && !rc) {
		lineno++;
		char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		rc = *s == '{' ? parse_mooncake(&b, s) : parse_native(&b, s);
		if (rc == -EINVAL)
			fprintf(stderr, "sim: %s:%zu: malformed line\n", path, lineno);
		else if (rc == -ERANGE)
			fprintf(stderr,
			        "sim: %s:%zu: a number past 2^64 - 1 (or a tenant past 2^32 - 1)\n",
			        path, lineno);
	}
	if (!rc && ferror(f))
		rc = -EIO;
	free(line);
	fclose(f);
	int brc = builder_done(&b);
	rc = rc ? rc : brc;
	if (!rc && !t->n_req) {
		fprintf(stderr, "sim: %s: no requests (Mooncake JSON lines or native lines)\n",
		        path);
		rc = -ENODATA;
	}
	if (rc)
		kvt_trace_free(t);
	return rc;
}

/* ---- the builder, for generators (sim_int.h) ---- */

struct kvt__tb {
	struct builder b;
};

struct kvt__tb *kvt__tb_new(struct kvt_trace *t)
{
	memset(t, 0, sizeof(*t));
	struct kvt__tb *tb = calloc(1, sizeof(*tb));
	if (tb)
		tb->b.t = t;
	return tb;
}

int kvt__tb_req(struct kvt__tb *tb, uint64_t ts_ms, uint32_t tenant)
{
	return push_req(&tb->b, ts_ms, tenant);
}

int kvt__tb_blk(struct kvt__tb *tb, uint64_t key)
{
	return push_blk(&tb->b, key);
}

int kvt__tb_done(struct kvt__tb *tb, int rc)
{
	struct kvt_trace *t = tb->b.t;
	int brc = builder_done(&tb->b);
	rc = rc ? rc : brc;
	free(tb);
	if (rc)
		kvt_trace_free(t);
	return rc;
}

int kvt_trace_from(struct kvt_trace *t, size_t n_req, const uint32_t *lens, const uint32_t *ids)
{
	struct kvt__tb *b = kvt__tb_new(t);
	if (!b)
		return -ENOMEM;
	int rc = 0;
	size_t k = 0;
	for (size_t i = 0; i < n_req && !rc; i++) {
		rc = kvt__tb_req(b, i, 0);
		for (uint32_t j = 0; j < lens[i] && !rc; j++)
			rc = kvt__tb_blk(b, ids[k++]);
	}
	return kvt__tb_done(b, rc);
}

/* The id block blk is written as: its own (t->key), or its dense id. */
static uint64_t id_of(const struct kvt_trace *t, uint32_t blk)
{
	return t->key ? t->key[blk] : blk;
}

int kvt_trace_write(const struct kvt_trace *t, FILE *f)
{
	for (size_t q = 0; q < t->n_req; q++) {
		if (t->hint_off && t->hint_off[q + 1] > t->hint_off[q]) {
			fputs("done", f);
			for (uint64_t i = t->hint_off[q]; i < t->hint_off[q + 1]; i++)
				fprintf(f, " %llu", (unsigned long long)id_of(t, t->hint_blk[i]));
			fputc('\n', f);
		}
		fprintf(f, "%llu", (unsigned long long)t->ts_ms[q]);
		if (t->tenant[q])
			fprintf(f, " t=%u", t->tenant[q]);
		for (uint64_t i = t->req_off[q]; i < t->req_off[q + 1]; i++)
			fprintf(f, " %llu", (unsigned long long)id_of(t, t->blk[i]));
		fputc('\n', f);
	}
	return ferror(f) ? -EIO : 0;
}

void kvt_trace_free(struct kvt_trace *t)
{
	free(t->req_off);
	free(t->blk);
	free(t->key);
	free(t->ts_ms);
	free(t->tenant);
	free(t->hint_off);
	free(t->hint_blk);
	free(t->bypass);
	memset(t, 0, sizeof(*t));
}
