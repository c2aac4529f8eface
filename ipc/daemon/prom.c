/*
 * prom.c -- the stats object (stats.c's JSON) in the Prometheus text exposition format.
 *
 * One source of truth: every number `kvtier stats --json` shows becomes a sample, so a counter
 * added to stats.c reaches the metrics with no second list to keep. The mapping:
 *  - a number or boolean at the top: kvtier_NAME;
 *  - an array of objects: each object's fields as kvtier_PREFIX_NAME{LABEL="..."}, the label
 *    taken from the object's identifying field ("tiers" -> tier="host", "tenant_stats" and
 *    "tenant_usage" -> tenant="1000"); nested arrays add their label to the parent's;
 *  - strings become labels of a kvtier_..._info sample of value 1 (version, policy, backend),
 *    so a policy switch does not start new series for every counter; null is left out.
 * Gauges are the names in gauge_names[]; every other number is a counter and gets _total.
 * Samples of one name are printed together under one # TYPE line, as the format requires.
 */
#include "daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SAMPLES 2048
#define MAX_DEPTH   4

static const char *const gauge_names[] = {
    "protocol",         "policy_bytes",  "capacity_bytes",  "used_bytes",
    "chunks",           "queue_depth",   "disabled",        "full",
    "leases",           "clients",       "tenants",         "namespaces",
    "guaranteed_bytes", "max_bytes",     "index_bytes",     "index_bytes_per_chunk",
    "metrics_port",     "draining",      "lru_hit_ratio",   "policy_hit_ratio",
    "mrc_samples",      "kept_chunks",   "kept_bytes",      "keep_pending",
    "io_max_us",        "curve_bytes",   "trace_recording", "trace_requests",
    "trace_bytes",      "trace_stopped",
};

/* An array of objects: its metric prefix, its label, and the field that gives the label. */
static const struct {
	const char *key, *prefix, *label, *id;
} arrays[] = {
    {"tiers", "tier_", "tier", "name"},
    {"tenant_stats", "tenant_", "tenant", "tenant"},
    {"tenant_usage", "tenant_", "tenant", "tenant"},
    {"mrc", "mrc_", "size", "size"},
};

struct sample {
	char name[96];
	char labels[192];
	char value[32];
	bool gauge, info;
	unsigned order;
};

struct walk {
	const char *p, *end;
	struct sample *s; /* grows as samples come, up to MAX_SAMPLES (~650 KiB) */
	size_t n, cap;
	int err;
};

static bool is_gauge(const char *field)
{
	for (size_t i = 0; i < sizeof(gauge_names) / sizeof(gauge_names[0]); i++)
		if (!strcmp(gauge_names[i], field))
			return true;
	return false;
}

static void ws(struct walk *w)
{
	while (w->p < w->end && (*w->p == ' ' || *w->p == '\n' || *w->p == '\t' || *w->p == '\r'))
		w->p++;
}

/* How many bytes from the cursor, before the end, are in set. */
static size_t span(const struct walk *w, const char *set)
{
	size_t n = 0;
	while (w->p + n < w->end && w->p[n] && strchr(set, w->p[n]))
		n++;
	return n;
}

/* Whether the cursor is at word (bounded by the end). */
static bool at(const struct walk *w, const char *word)
{
	size_t n = strlen(word);
	return (size_t)(w->end - w->p) >= n && !memcmp(w->p, word, n);
}

/* After an item of an array or object: its comma, if any. */
static void next_item(struct walk *w)
{
	ws(w);
	if (w->p < w->end && *w->p == ',')
		w->p++;
	ws(w);
}

/* The closing quote, bracket or brace a loop stopped at. @return : 0, -EINVAL at the end. */
static int close_at(struct walk *w)
{
	if (w->p >= w->end)
		return -EINVAL;
	w->p++;
	return 0;
}

/* A JSON string into out (the stats object has no escapes but \" and \\). */
static int str(struct walk *w, char *out, size_t len)
{
	if (w->p >= w->end || *w->p != '"')
		return -EINVAL;
	size_t n = 0;
	for (w->p++; w->p < w->end && *w->p != '"'; w->p++) {
		if (*w->p == '\\' && w->p + 1 < w->end)
			w->p++;
		if (n + 1 < len)
			out[n++] = *w->p;
	}
	out[n] = 0;
	return close_at(w);
}

static struct sample *add(struct walk *w, const char *prefix, const char *field, const char *labels)
{
	if (w->n == MAX_SAMPLES) {
		w->err = -ENOBUFS;
		return NULL;
	}
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 128;
		struct sample *g = realloc(w->s, cap * sizeof(*g));
		if (!g) {
			w->err = -ENOMEM;
			return NULL;
		}
		w->s = g;
		w->cap = cap;
	}
	struct sample *s = &w->s[w->n];
	s->gauge = s->info = false;
	s->value[0] = 0;
	snprintf(s->name, sizeof(s->name), "kvtier_%s%s", prefix, field);
	snprintf(s->labels, sizeof(s->labels), "%s", labels);
	s->order = (unsigned)w->n++;
	return s;
}

/* Label values: Prometheus escapes backslash, double quote and newline. */
static void label_append(char *labels, size_t len, const char *name, const char *value)
{
	size_t n = strlen(labels);
	n += (size_t)snprintf(labels + n, n < len ? len - n : 0, "%s%s=\"", n ? "," : "", name);
	for (const char *v = value; *v && n + 3 < len; v++) {
		if (*v == '\\' || *v == '"' || *v == '\n')
			labels[n++] = '\\';
		labels[n++] = *v == '\n' ? 'n' : *v;
	}
	if (n + 1 < len) {
		labels[n++] = '"';
		labels[n] = 0;
	}
}

static int object(struct walk *w, const char *prefix, const char *labels, const char *idf,
                  int depth);

/* Members that are not flattened: the latency histograms, which metrics.c writes as
 * Prometheus histograms. */
static const char *const skipped[] = {"latency", "latency_bounds_us"};

/* Steps over one JSON value of any shape. */
static int skip(struct walk *w, int depth)
{
	ws(w);
	if (w->p >= w->end || depth > 8)
		return -EINVAL;
	char c = *w->p;
	if (c == '"') {
		char v[8];
		return str(w, v, sizeof(v));
	}
	if (c != '[' && c != '{') {
		size_t n = span(w, "-+0123456789.eEtruefalsn");
		w->p += n;
		return n ? 0 : -EINVAL;
	}
	char close = c == '[' ? ']' : '}';
	for (w->p++, ws(w); w->p < w->end && *w->p != close;) {
		if (c == '{') {
			char k[64];
			ws(w);
			if (str(w, k, sizeof(k)))
				return -EINVAL;
			ws(w);
			if (w->p >= w->end || *w->p != ':')
				return -EINVAL;
			w->p++;
		}
		if (skip(w, depth + 1))
			return -EINVAL;
		next_item(w);
	}
	return close_at(w);
}

/* The value of field in an object whose samples go under prefix with labels. */
static int value(struct walk *w, const char *prefix, const char *field, const char *labels,
                 const char *idf, char *info, size_t info_len, int depth)
{
	bool is_id = idf && !strcmp(field, idf); /* already the object's label */
	for (size_t i = 0; !depth && i < sizeof(skipped) / sizeof(skipped[0]); i++)
		if (!strcmp(field, skipped[i]))
			return skip(w, 0);
	ws(w);
	if (w->p >= w->end)
		return -EINVAL;
	char c = *w->p;
	if (c == '"') {
		char v[128];
		int rc = str(w, v, sizeof(v));
		if (!rc && !is_id)
			label_append(info, info_len, field, v);
		return rc;
	}
	if (c == '[') {
		size_t a = 0;
		while (a < sizeof(arrays) / sizeof(arrays[0]) && strcmp(arrays[a].key, field))
			a++;
		char pre[64];
		snprintf(pre, sizeof(pre), "%s%s", prefix,
		         a < sizeof(arrays) / sizeof(arrays[0]) ? arrays[a].prefix : "");
		w->p++;
		for (ws(w); w->p < w->end && *w->p != ']';) {
			if (*w->p != '{' || a == sizeof(arrays) / sizeof(arrays[0]))
				return -EINVAL; /* only arrays of known objects */
			/* the identifying field first: scan ahead for it */
			char key[80], id[64] = "?";
			snprintf(key, sizeof(key), "\"%s\":", arrays[a].id);
			size_t left = (size_t)(w->end - w->p);
			const char *close = memchr(w->p, '}', left);
			const char *k =
			    close ? memmem(w->p, (size_t)(close - w->p), key, strlen(key)) : NULL;
			if (k) { /* the value, up to the next ',' or '}' (inside the object) */
				k += strlen(key);
				k += *k == '"';
				size_t n = 0;
				while (k + n < close && k[n] != ',' && k[n] != '"' &&
				       n + 1 < sizeof(id))
					n++;
				snprintf(id, sizeof(id), "%.*s", (int)n, k);
			}
			char lab[192];
			snprintf(lab, sizeof(lab), "%s", labels);
			label_append(lab, sizeof(lab), arrays[a].label, id);
			int rc = object(w, pre, lab, arrays[a].id, depth + 1);
			if (rc)
				return rc;
			next_item(w);
		}
		return close_at(w);
	}
	if (c == '{')
		return -EINVAL; /* the stats object nests only arrays */
	if (at(w, "null")) {
		w->p += 4;
		return 0;
	}
	char v[32];
	if (at(w, "true") || at(w, "false")) {
		bool t = *w->p == 't';
		w->p += t ? 4 : 5;
		snprintf(v, sizeof(v), "%d", t);
	} else {
		size_t n = span(w, "-+0123456789.eE");
		if (!n || n >= sizeof(v))
			return -EINVAL;
		snprintf(v, sizeof(v), "%.*s", (int)n, w->p);
		w->p += n;
	}
	if (is_id)
		return 0;
	bool gauge = is_gauge(field) || (c == 't' || c == 'f');
	char f[80];
	snprintf(f, sizeof(f), "%s%s", field, gauge ? "" : "_total");
	struct sample *s = add(w, prefix, f, labels);
	if (!s)
		return w->err;
	snprintf(s->value, sizeof(s->value), "%s", v);
	s->gauge = gauge;
	return 0;
}

static int object(struct walk *w, const char *prefix, const char *labels, const char *idf,
                  int depth)
{
	if (depth > MAX_DEPTH)
		return -EINVAL;
	ws(w);
	if (w->p >= w->end || *w->p != '{')
		return -EINVAL;
	w->p++;
	char info[192];
	snprintf(info, sizeof(info), "%s", labels);
	size_t base = strlen(info);
	for (ws(w); w->p < w->end && *w->p != '}';) {
		char field[64];
		int rc = str(w, field, sizeof(field));
		ws(w);
		if (rc || w->p >= w->end || *w->p != ':')
			return -EINVAL;
		w->p++;
		if ((rc = value(w, prefix, field, labels, idf, info, sizeof(info), depth)))
			return rc;
		next_item(w);
	}
	if (w->p >= w->end)
		return -EINVAL;
	w->p++;
	if (strlen(info) > base) { /* the object's strings: one info sample */
		struct sample *s = add(w, prefix, depth ? "info" : "build_info", info);
		if (!s)
			return w->err;
		snprintf(s->value, sizeof(s->value), "1");
		s->gauge = s->info = true;
	}
	return 0;
}

static int by_name(const void *a, const void *b)
{
	const struct sample *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x->order > y->order) - (x->order < y->order);
}

int kvd_prom_render(const char *json, size_t json_len, char *out, size_t len)
{
	struct walk w = {json, json + json_len, NULL, 0, 0, 0};
	int rc = object(&w, "", "", NULL, 0);
	if (rc) {
		free(w.s);
		return rc;
	}
	if (w.n)
		qsort(w.s, w.n, sizeof(*w.s), by_name);
	size_t pos = 0;
	if (len)
		out[0] = 0;
	for (size_t i = 0; i < w.n && pos < len; i++) {
		const struct sample *s = &w.s[i];
		int n = 0;
		if (!i || strcmp(s->name, w.s[i - 1].name)) {
			/* a counter's family is its name without _total */
			size_t fl = strlen(s->name) - (s->gauge ? 0 : strlen("_total"));
			n = snprintf(out + pos, len - pos, "# TYPE %.*s %s\n", (int)fl, s->name,
			             s->gauge ? "gauge" : "counter");
			pos += n > 0 ? (size_t)n : 0;
			if (pos >= len)
				break;
		}
		n = snprintf(out + pos, len - pos, "%s%s%s%s %s\n", s->name, *s->labels ? "{" : "",
		             s->labels, *s->labels ? "}" : "", s->value);
		pos += n > 0 ? (size_t)n : 0;
	}
	free(w.s);
	return pos < len ? (int)pos : -ENOBUFS;
}
