/*
 * json.c -- just enough JSON to read a --requests file: one object per line with "prompt" (a
 * string, escapes and \uXXXX included), or "prompt_ids" (an array of integers), and optional
 * "steps", "session" (a string), "end" (true or false) and "keep_ms". Other members are skipped;
 * anything malformed is refused with the offending column.
 */
#include "minillm.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cur {
	const char *s, *start;
};

static void ws(struct cur *c)
{
	while (*c->s && isspace((unsigned char)*c->s))
		c->s++;
}

static int hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char ch = s[i];
		int d = isdigit((unsigned char)ch) ? ch - '0'
		        : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10
		        : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10
		                                   : -1;
		if (d < 0)
			return -1;
		v = v * 16 + (unsigned)d;
	}
	*out = v;
	return 0;
}

static size_t utf8(unsigned cp, char *o)
{
	if (cp < 0x80)
		return o[0] = (char)cp, 1;
	if (cp < 0x800)
		return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
	if (cp < 0x10000)
		return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
		       o[2] = (char)(0x80 | (cp & 0x3F)), 3;
	return o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
	       o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F)), 4;
}

/* Parses a string at c->s (which must be '"'); out may be NULL to skip. */
static int string(struct cur *c, char **out)
{
	if (*c->s != '"')
		return -EINVAL;
	const char *p = ++c->s;
	char *buf = out ? malloc(strlen(p) * 2 + 1) : NULL, *o = buf;
	if (out && !buf)
		return -ENOMEM;
	for (; *p && *p != '"'; p++) {
		if ((unsigned char)*p < 0x20)
			goto bad;
		if (*p != '\\') {
			if (o)
				*o++ = *p;
			continue;
		}
		char e = *++p, ch = 0;
		unsigned cp, lo;
		switch (e) {
		case '"':
			ch = '"';
			break;
		case '\\':
			ch = '\\';
			break;
		case '/':
			ch = '/';
			break;
		case 'b':
			ch = '\b';
			break;
		case 'f':
			ch = '\f';
			break;
		case 'n':
			ch = '\n';
			break;
		case 'r':
			ch = '\r';
			break;
		case 't':
			ch = '\t';
			break;
		case 'u':
			if (hex4(p + 1, &cp))
				goto bad;
			p += 4;
			if (cp >= 0xD800 && cp < 0xDC00 && p[1] == '\\' && p[2] == 'u' &&
			    !hex4(p + 3, &lo) && lo >= 0xDC00 && lo < 0xE000) {
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
				p += 6;
			}
			if (o)
				o += utf8(cp, o);
			continue;
		default:
			goto bad;
		}
		if (o)
			*o++ = ch;
	}
	if (*p != '"')
		goto bad;
	c->s = p + 1;
	if (out) {
		*o = 0;
		*out = buf;
	}
	return 0;
bad:
	c->s = p;
	free(buf);
	return -EINVAL;
}

static int integer(struct cur *c, long *v)
{
	char *end;
	*v = strtol(c->s, &end, 10);
	if (end == c->s || *end == '.' || *end == 'e' || *end == 'E')
		return -EINVAL;
	c->s = end;
	return 0;
}

static int skip_value(struct cur *c, int depth)
{
	ws(c);
	if (*c->s == '"')
		return string(c, NULL);
	if (*c->s == '{' || *c->s == '[') {
		char close = *c->s == '{' ? '}' : ']';
		if (depth > 32)
			return -EINVAL;
		c->s++;
		ws(c);
		if (*c->s == close)
			return c->s++, 0;
		for (;;) {
			if (close == '}') {
				ws(c);
				if (string(c, NULL))
					return -EINVAL;
				ws(c);
				if (*c->s++ != ':')
					return -EINVAL;
			}
			if (skip_value(c, depth + 1))
				return -EINVAL;
			ws(c);
			if (*c->s == ',') {
				c->s++;
				continue;
			}
			return *c->s++ == close ? 0 : -EINVAL;
		}
	}
	const char *p = c->s;
	while (*c->s && (isalnum((unsigned char)*c->s) || strchr("+-.", *c->s)))
		c->s++;
	return c->s > p ? 0 : -EINVAL;
}

static int id_array(struct cur *c, int *ids, int max_ids, int *n)
{
	*n = 0;
	if (*c->s++ != '[')
		return -EINVAL;
	ws(c);
	if (*c->s == ']')
		return c->s++, 0;
	for (;;) {
		long v;
		ws(c);
		if (integer(c, &v) || v < 0 || v > 0x7fffffff)
			return -EINVAL;
		if (*n >= max_ids)
			return -E2BIG;
		ids[(*n)++] = (int)v;
		ws(c);
		if (*c->s == ',') {
			c->s++;
			continue;
		}
		return *c->s++ == ']' ? 0 : -EINVAL;
	}
}

static int boolean(struct cur *c, int *v)
{
	if (!strncmp(c->s, "true", 4) && !isalnum((unsigned char)c->s[4]))
		return c->s += 4, *v = 1, 0;
	if (!strncmp(c->s, "false", 5) && !isalnum((unsigned char)c->s[5]))
		return c->s += 5, *v = 0, 0;
	return -EINVAL;
}

static int member(struct cur *c, struct kvt_llm_line *l, int *ids, int max_ids, int *have)
{
	char *key = NULL;
	ws(c);
	int rc = string(c, &key);
	if (rc)
		return rc;
	ws(c);
	if (*c->s++ != ':') {
		free(key);
		return -EINVAL;
	}
	ws(c);
	if (!strcmp(key, "prompt")) {
		free(l->text);
		l->text = NULL;
		rc = string(c, &l->text);
		*have |= 1;
	} else if (!strcmp(key, "prompt_ids")) {
		rc = id_array(c, ids, max_ids, &l->n_ids);
		*have |= 2;
	} else if (!strcmp(key, "steps")) {
		long v;
		rc = integer(c, &v);
		if (!rc && (v < 0 || v > 1 << 20))
			rc = -EINVAL;
		l->steps = (int)v;
	} else if (!strcmp(key, "session")) {
		free(l->session);
		l->session = NULL;
		rc = string(c, &l->session);
	} else if (!strcmp(key, "end")) {
		rc = boolean(c, &l->end);
	} else if (!strcmp(key, "keep_ms")) {
		long v;
		rc = integer(c, &v);
		if (!rc && (v < 0 || (unsigned long)v > UINT32_MAX))
			rc = -EINVAL;
		l->keep_ms = v;
	} else {
		rc = skip_value(c, 0);
	}
	free(key);
	return rc;
}

void kvt_llm_line_free(struct kvt_llm_line *l)
{
	free(l->text);
	free(l->session);
	l->text = l->session = NULL;
}

int kvt_llm_parse_request(const char *line, struct kvt_llm_line *l, int *ids, int max_ids,
                          char *err, size_t err_len)
{
	struct cur c = {line, line};
	int have = 0, rc = -EINVAL;
	*l = (struct kvt_llm_line){.steps = -1, .keep_ms = -1};
	ws(&c);
	if (*c.s++ != '{')
		goto bad;
	ws(&c);
	if (*c.s == '}') {
		c.s++;
	} else {
		for (;;) {
			rc = member(&c, l, ids, max_ids, &have);
			if (rc)
				goto bad;
			ws(&c);
			if (*c.s == ',') {
				c.s++;
				continue;
			}
			if (*c.s++ != '}')
				goto bad;
			break;
		}
	}
	ws(&c);
	if (*c.s) {
		rc = -EINVAL;
		goto bad;
	}
	if (have != 1 && have != 2) {
		snprintf(err, err_len,
		         "a request needs exactly one of \"prompt\" and \"prompt_ids\"");
		kvt_llm_line_free(l);
		return -EINVAL;
	}
	if (l->end && !l->session) {
		snprintf(err, err_len, "\"end\" needs the \"session\" it ends");
		kvt_llm_line_free(l);
		return -EINVAL;
	}
	if (l->end && l->keep_ms >= 0) {
		snprintf(err, err_len,
		         "\"end\" and \"keep_ms\" contradict each other (an ended conversation's "
		         "chunks go first)");
		kvt_llm_line_free(l);
		return -EINVAL;
	}
	return 0;
bad:
	snprintf(err, err_len, "%s at column %d",
	         rc == -E2BIG ? "more prompt ids than the context holds" : "malformed JSON request",
	         (int)(c.s - c.start));
	kvt_llm_line_free(l);
	return rc == -E2BIG ? rc : -EINVAL;
}
