/*
 * record.c -- trace.file: kvtierd records what its host policy sees, as a trace `kvtier sim`
 * replays, so that an operator can compare policies on the host's own traffic.
 *
 * What is recorded: each engine request as `kvtier sim` models one, a line of the simulator's
 * native format, "<ms> [t=<tenant>] <id> <id> ...": the wall clock in ms since the epoch when
 * the request began (a restart appends, and the times still run forward), the tenant's key (its
 * uid, or a tenant.map name's 0x80000000 | hash) when it is not 0 (root's), and the request's
 * chunks in prefix order, each a 64-bit hash of (tenant key, namespace, key): the same chunk
 * has the same id in every line and across restarts, whatever order the tenants come in, two
 * chunks two ids (a collision needs ~2^32 distinct chunks). Each kvt_done is a line "done <id>
 * ...".
 *
 * A request is pieced together per connection from what the engine sends, since the daemon is
 * never told where one starts: the keys of an acquire (the policy's accesses; counted after any
 * promotion it waited for, once), the next acquire's too while every key so far was found (the
 * client library's kvt_get asks a long prefix 64 keys at a time, and asks on only while it finds
 * them), then the keys of the puts that store what the engine computed: a put whose first key
 * was asked takes the request's place from that key on (the engine puts from its first miss),
 * one whose parent is the request's last key goes on from it (a long put's next message), and
 * any other put is a request of its own (a prefill that read nothing first). A put that a short
 * reply cut sends the keys it did not send (UNSENT; a put's reply says that the daemon records),
 * and they end the request: a policy or admission that cuts puts still records what the engine
 * computed. An acquire that finds nothing right after one that found all is either the
 * request's next batch, whose first key is missing, or a new request whose root is: the put
 * after it decides (it goes on from the batch before: the same request; anything else: two),
 * and without a put it is a request of its own. The request is written when the connection's
 * next one begins, at a done hint, when the connection closes or when the recording ends. So
 * the line holds what the engine asked for and what it computed, as a trace does, whatever this
 * policy served: another policy replayed on it may serve more of it. Lookups are not accesses
 * and are not recorded. With one engine the recording of a trace sent as `kvtier bench trace`
 * sends it is that trace, request for request (`kvtier bench trace --record`); with several,
 * each request is whole but the lines come in the order requests end.
 *
 * The file. trace.file names an absolute path, opened O_APPEND (created 0640); a header comment
 * says who wrote what from when. Lines are built in a 64 KiB buffer on the loop thread and
 * written when it fills (in the call that fills it), at each 100 ms tick and when the recording
 * ends (trace.file set to "" or "none", another path, SIGTERM): a write(2) into the page cache
 * per 64 KiB at most, ~120 requests of 25 chunks. A line that would take the file past
 * trace.max_bytes ends the recording, as does a write that fails (a full disk: ENOSPC); the daemon
 * logs why, `kvtier stats` shows it, and serving goes on, since nothing of the cache depends on the
 * file. A recording that stopped starts again only when trace.file is set again.
 *
 * Cost while recording: a hash per key acquired or put, ~21 bytes of decimal per chunk written,
 * and the connection's open request (8 bytes a chunk); when not, one branch per call.
 */
#include "daemon.h"
#include "core/file.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REC_BUF     (64u << 10)
#define REC_IDS_MAX (1u << 20) /* chunks of one open request (8 MiB); the rest is not recorded */

static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* v in decimal at p; @return : the end */
static char *put_u64(char *p, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

/* Ends the recording: what is buffered is dropped (the caller wrote it, or could not). */
static void stop(struct kvd *d, int why)
{
	struct kvd_record *r = &d->rec;
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	r->len = 0;
	r->stopped = why;
}

/* Writes the buffer out. @return : 0, or -errno (the recording has ended, logged) */
static int flush(struct kvd *d)
{
	struct kvd_record *r = &d->rec;
	int rc = kvt_file_write_all(r->fd, r->buf, r->len);
	if (rc) {
		kvt_log(KVT_LOG_ERROR,
		        "trace.file %s: %s after %llu requests: the recording has stopped "
		        "(kvtierd serves on; set trace.file again to go on)",
		        kvt_opt_str(&d->opts, KVT_OPT_TRACE_FILE), strerror(-rc),
		        (unsigned long long)r->requests);
		stop(d, rc);
		return rc;
	}
	r->file_bytes += r->len;
	r->len = 0;
	return 0;
}

/* Whether a line of at most want bytes keeps the file within trace.max_bytes; when it does not,
 * the recording ends here (logged). */
static bool fits(struct kvd *d, size_t want)
{
	struct kvd_record *r = &d->rec;
	uint64_t max = kvt_opt_u64(&d->opts, KVT_OPT_TRACE_MAX_BYTES);
	if (r->file_bytes + r->len + want <= max)
		return true;
	if (flush(d))
		return false;
	kvt_log(KVT_LOG_WARN,
	        "trace.file %s: %llu bytes, the next line would pass trace.max_bytes (%llu): "
	        "the recording has stopped after %llu requests",
	        kvt_opt_str(&d->opts, KVT_OPT_TRACE_FILE), (unsigned long long)r->file_bytes,
	        (unsigned long long)max, (unsigned long long)r->requests);
	stop(d, -EFBIG);
	return false;
}

/* One line: head (NUL-terminated, at most 40 bytes), then n ids, then a newline; written out
 * as the buffer fills, so a line may be longer than the buffer. @return : whether it was. */
static bool line(struct kvd *d, const char *head, const uint64_t *ids, size_t n)
{
	struct kvd_record *r = &d->rec;
	size_t hl = strlen(head);
	if (!fits(d, hl + 21 * n + 1) || (r->len + hl > REC_BUF && flush(d)))
		return false;
	memcpy(r->buf + r->len, head, hl);
	r->len += hl;
	for (size_t i = 0; i < n; i++) {
		if (r->len + 22 > REC_BUF && flush(d))
			return false;
		r->buf[r->len++] = ' ';
		r->len = (size_t)(put_u64(r->buf + r->len, ids[i]) - r->buf);
	}
	if (r->len + 1 > REC_BUF && flush(d))
		return false;
	r->buf[r->len++] = '\n';
	return true;
}

/* A request's line: begun at ms, by tenant t (its key written, t=KEY, when not 0), ids[0..n). */
static void request_line(struct kvd *d, uint64_t ms, uint32_t t, const uint64_t *ids, uint32_t n)
{
	char head[40], *p = put_u64(head, ms);
	if (d->tenants[t].key) {
		memcpy(p, " t=", 3);
		p = put_u64(p + 3, d->tenants[t].key);
	}
	*p = 0;
	d->rec.requests += line(d, head, ids, n);
}

/* The part of q before maybe_at written out as a request of its own; q keeps the rest, as the
 * request that began at maybe_ms. */
static void split(struct kvd *d, uint32_t conn, struct kvd_rec_req *q)
{
	uint32_t at = q->maybe_at;
	request_line(d, q->ms, d->conns[conn].tenant, q->ids, at);
	memmove(q->ids, q->ids + at, (size_t)(q->n - at) * sizeof(*q->ids));
	q->n -= at;
	q->ms = q->maybe_ms;
	q->maybe_at = 0;
}

/* Connection conn's open request written out (if it has one) and emptied. */
static void emit(struct kvd *d, uint32_t conn)
{
	struct kvd_rec_req *q = d->conns[conn].rec;
	if (!q || !q->n)
		return;
	if (q->maybe_at && q->maybe_at < q->n) /* no put said: two requests */
		split(d, conn, q);
	request_line(d, q->ms, d->conns[conn].tenant, q->ids, q->n);
	q->n = 0;
	q->maybe_at = 0;
}

/* conn's open request, made when it has none. @return : NULL without memory (not recorded). */
static struct kvd_rec_req *req_of(struct kvd *d, uint32_t conn)
{
	struct kvd_conn *c = &d->conns[conn];
	if (!c->rec)
		c->rec = calloc(1, sizeof(*c->rec));
	return c->rec;
}

/* keys' ids appended to q; ids past REC_IDS_MAX are dropped (the line is written whole up to
 * there). @return : false without memory. */
static bool append(const struct kvd *d, struct kvd_rec_req *q, uint32_t tenant, kvt_id_t ns,
                   const kvt_id_t *keys, const struct kvt_msg_put_item *items, uint32_t n)
{
	n = KVT_MIN(n, REC_IDS_MAX - q->n);
	if (q->n + n > q->cap) {
		uint32_t c = KVT_MAX(q->cap * 2, KVT_MAX(q->n + n, 64u));
		uint64_t *ids = realloc(q->ids, (size_t)c * sizeof(*ids));
		if (!ids)
			return false;
		q->ids = ids;
		q->cap = c;
	}
	for (uint32_t i = 0; i < n; i++)
		q->ids[q->n++] = kvd_chunk_id(d, tenant, ns, keys ? keys[i] : items[i].key);
	return true;
}

/* conn's open request begins anew (the one before written out). */
static void begin(struct kvd *d, uint32_t conn, struct kvd_rec_req *q)
{
	emit(d, conn);
	q->ms = wall_ms();
	q->all_found = true;
	q->put = false;
}

/* Whether an acquire whose first key is key (got: what it served) asks on for q, the client's
 * next batch of one request: all q asked for was found and nothing was put yet, and key's
 * parent is q's last chunk (a request begins at its prefix's root, which has no parent). A key
 * not held at all cannot tell: the batch may be the next one, whose first chunk is missing, or a
 * request whose root is; it goes on with q, marked (maybe_at) for the put after it to decide. */
static bool asks_on(struct kvd *d, struct kvd_rec_req *q, uint32_t t, kvt_id_t ns, kvt_id_t key,
                    int got)
{
	if (!q->n || !q->all_found || q->put)
		return false;
	uint32_t id = kvd_index_find(&d->idx, t, ns, key);
	if (id == KVD_NIL && !got) {
		q->maybe_at = q->n, q->maybe_ms = wall_ms();
		return true;
	}
	const struct kvd_entry *e = id == KVD_NIL ? NULL : &d->idx.e[id];
	return e && e->has_parent && kvd_chunk_id(d, t, ns, e->parent) == q->ids[q->n - 1];
}

void kvd_record_acquire(struct kvd *d, uint32_t conn, kvt_id_t ns, const kvt_id_t *keys, uint32_t n,
                        int got)
{
	struct kvd_rec_req *q = req_of(d, conn);
	if (!q || !n)
		return;
	uint32_t t = d->conns[conn].tenant;
	if (!asks_on(d, q, t, ns, keys[0], got))
		begin(d, conn, q);
	q->all_found = got >= 0 && (uint32_t)got == n;
	append(d, q, t, ns, keys, NULL, n);
}

void kvd_record_put(struct kvd *d, uint32_t conn, const struct kvt_msg_put *p,
                    const struct kvt_msg_put_item *items, uint32_t n)
{
	struct kvd_rec_req *q = req_of(d, conn);
	if (!q || !n)
		return;
	uint32_t t = d->conns[conn].tenant;
	bool has_parent = p->flags & KVT_PUT_F_PARENT;
	uint64_t parent = has_parent ? kvd_chunk_id(d, t, p->ns, p->parent) : 0;
	bool on = q->n && has_parent && q->ids[q->n - 1] == parent;
	if (!on && q->n && !q->put) { /* from the engine's first miss on, if it was asked */
		uint64_t first = kvd_chunk_id(d, t, p->ns, items[0].key);
		uint32_t j = 0;
		while (j < q->n && q->ids[j] != first)
			j++;
		uint32_t at = q->maybe_at;
		if (at && j < q->n && j >= at &&
		    !(j == at && has_parent && q->ids[j - 1] == parent)) {
			split(d, conn, q); /* the batch found nothing and the put does not go on */
			j -= at;
		}
		if (j < q->n)
			q->n = j, on = true;
		if (q->maybe_at >= q->n)
			q->maybe_at = 0; /* the put went on from the batch before, or before it */
	}
	if (!on)
		begin(d, conn, q);
	q->put = true;
	append(d, q, t, p->ns, NULL, items, n);
}

void kvd_record_unsent(struct kvd *d, uint32_t conn, kvt_id_t ns, const kvt_id_t *keys, uint32_t n)
{
	struct kvd_rec_req *q = d->conns[conn].rec;
	if (q && q->n && q->put && n) /* after its put; without one there is nothing it ends */
		append(d, q, d->conns[conn].tenant, ns, keys, NULL, n);
}

void kvd_record_done(struct kvd *d, uint32_t conn, kvt_id_t ns, const kvt_id_t *keys, uint32_t n)
{
	emit(d, conn); /* the hint follows its request */
	uint64_t ids[KVT_BATCH_MAX];
	n = KVT_MIN(n, KVT_BATCH_MAX);
	for (uint32_t i = 0; i < n; i++)
		ids[i] = kvd_chunk_id(d, d->conns[conn].tenant, ns, keys[i]);
	line(d, "done", ids, n);
}

void kvd_record_conn_gone(struct kvd *d, uint32_t conn)
{
	struct kvd_conn *c = &d->conns[conn];
	if (!c->rec)
		return;
	if (d->rec.fd >= 0)
		emit(d, conn);
	free(c->rec->ids);
	free(c->rec);
	c->rec = NULL;
}

void kvd_record_tick(struct kvd *d)
{
	if (d->rec.fd >= 0 && d->rec.len)
		flush(d);
}

void kvd_record_close(struct kvd *d)
{
	for (uint32_t i = 0; i < d->cap_conns; i++)
		kvd_record_conn_gone(d, i);
	if (d->rec.fd >= 0 && d->rec.len)
		flush(d);
	if (d->rec.fd >= 0)
		stop(d, 0);
	free(d->rec.buf);
	d->rec.buf = NULL;
}

/* Whether path turns the recording off ("" or "none"). */
static bool is_off(const char *path)
{
	return !*path || !strcmp(path, "none");
}

int kvd_record_check(const char *path, char *err, size_t err_len)
{
	if (is_off(path) || (path[0] == '/' && !strpbrk(path, "\r\n")))
		return 0; /* a line break would end the file's header comment early */
	snprintf(err, err_len, "trace.file: '%s' is not an absolute path (or none)", path);
	return -EINVAL;
}

int kvd_record_open(struct kvd *d, const char *path, char *err, size_t err_len)
{
	int rc = kvd_record_check(path, err, err_len);
	if (rc)
		return rc;
	struct kvd_record *r = &d->rec;
	if (is_off(path)) {
		kvd_record_close(d); /* requests: what it wrote, until the next one starts */
		r->stopped = 0;
		return 0;
	}
	/* the new file first: a set that is refused leaves the recording as it was */
	int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0640); /* its last byte */
	if (fd < 0 && errno == EACCES) /* write-only to us: no look at the last byte */
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		snprintf(err, err_len, "trace.file: %s: %s", path, strerror(-rc));
		return rc;
	}
	uint64_t max = kvt_opt_u64(&d->opts, KVT_OPT_TRACE_MAX_BYTES);
	char *buf = (uint64_t)st.st_size < max ? malloc(REC_BUF) : NULL;
	if (!buf) {
		close(fd);
		if ((uint64_t)st.st_size < max) {
			snprintf(err, err_len, "trace.file: %s: %s", path, strerror(ENOMEM));
			return -ENOMEM;
		}
		snprintf(err, err_len, "trace.file: %s holds %llu bytes, trace.max_bytes is %llu",
		         path, (unsigned long long)st.st_size, (unsigned long long)max);
		return -EFBIG;
	}
	kvd_record_close(d);
	*r = (struct kvd_record){.fd = fd, .buf = buf, .file_bytes = (uint64_t)st.st_size};
	time_t now = time(NULL);
	struct tm tm;
	char when[32] = "?";
	if (gmtime_r(&now, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	char last = '\n'; /* a line cut short by a kill -9 is ended before the comment */
	if (st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) != 1)
		last = '\n';
	int n = snprintf(
	    buf, REC_BUF,
	    "%s# kvtierd %d.%d.%d (pid %d) from %s: a line per engine request (what it "
	    "got, then put), <epoch ms> [t=<tenant>] <chunk ids>, and 'done <ids>' per "
	    "kvt_done; host %llu bytes, policy %s. Replay: kvtier sim --engine --trace "
	    "%s --capacity CHUNKS --policy P\n",
	    last == '\n' ? "" : "\n", KVT_VERSION_MAJOR, KVT_VERSION_MINOR, KVT_VERSION_PATCH,
	    (int)getpid(), when, (unsigned long long)d->host_cap, d->pol_ops->name, path);
	r->len = n > 0 && (size_t)n < REC_BUF ? (size_t)n : 0;
	if (r->file_bytes + r->len > max)
		r->len = 0; /* no room for a comment: the first line stops it */
	kvt_log(KVT_LOG_INFO, "trace.file %s: recording every request (trace.max_bytes %llu)", path,
	        (unsigned long long)max);
	return 0;
}
