/*
 * metrics.c -- Prometheus metrics over HTTP on loopback (metrics.listen, GET /metrics).
 *
 * A scrape is rare and small, so the server is the least HTTP that serves it, on the daemon's
 * own loop: accept, read one request (at most 2047 bytes, struct kvd_http's in[]; anything
 * bigger gets 431), answer
 * with the stats object rendered by prom.c, half-close, and close once the peer has (so the
 * answer is never lost to a reset). GET /metrics gets 200; any other path 404,
 * any other method 405, a request line that is not HTTP 400. At most KVD_HTTP_MAX scrapes are
 * open at once (a new one closes the oldest), and one that has not finished within
 * HTTP_TIMEOUT_NS is closed by the timer, so a slow or silent peer costs a slot for two
 * seconds and never blocks the loop. Writes that do not fit the socket wait for EPOLLOUT.
 *
 * The default address, 127.0.0.1:9464, is taken if free: when it is not, the daemon logs a
 * warning and runs without metrics. An address the operator set must bind, or the start stops.
 * Port 0 takes a free port; `kvtier stats --json` shows it as metrics_port.
 */
#include "daemon.h"
#include "core/log.h"
#include "core/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define HTTP_TIMEOUT_NS (2000ull * 1000 * 1000)
#define PROM_MAX        (512u << 10)

static void http_close(struct kvd *d, struct kvd_http *h)
{
	if (h->fd < 0)
		return;
	epoll_ctl(d->ep, EPOLL_CTL_DEL, h->fd, NULL);
	close(h->fd);
	free(h->out);
	*h = (struct kvd_http){.fd = -1};
}

/* "ADDR:PORT" into an IPv4 address. */
static int parse_listen(const char *s, struct sockaddr_in *a)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return -EINVAL;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - s), s);
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || port > 65535)
		return -EINVAL;
	*a = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -EINVAL;
}

int kvd_metrics_check(const struct kvt_options *o)
{
	const char *want = kvt_opt_str(o, KVT_OPT_METRICS_LISTEN);
	struct sockaddr_in a;
	if (!*want || !strcmp(want, "off") || !parse_listen(want, &a))
		return 0;
	kvt_log(KVT_LOG_ERROR, "metrics.listen: '%s' is not ADDR:PORT (or off)", want);
	return -EINVAL;
}

int kvd_metrics_open(struct kvd *d)
{
	d->metrics_fd = -1;
	for (int i = 0; i < KVD_HTTP_MAX; i++)
		d->http[i] = (struct kvd_http){.fd = -1};
	const char *want = kvt_opt_str(&d->opts, KVT_OPT_METRICS_LISTEN);
	bool dflt = !strcmp(want, kvt_opt_def(KVT_OPT_METRICS_LISTEN)->def);
	struct sockaddr_in a;
	int rc = kvd_metrics_check(&d->opts);
	if (rc || !*want || !strcmp(want, "off"))
		return rc;
	parse_listen(want, &a); /* kvd_metrics_check read it */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	socklen_t al = sizeof(a);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&a, &al)) {
		rc = -errno;
		close(fd);
		kvt_log(dflt ? KVT_LOG_WARN : KVT_LOG_ERROR, "metrics.listen %s: %s%s", want,
		        strerror(-rc), dflt ? "; running without metrics" : "");
		return dflt ? 0 : rc;
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = KVD_EV_METRICS};
	if (epoll_ctl(d->ep, EPOLL_CTL_ADD, fd, &ev)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	d->metrics_fd = fd;
	d->metrics_port = ntohs(a.sin_port);
	return 0;
}

void kvd_metrics_close(struct kvd *d)
{
	for (int i = 0; i < KVD_HTTP_MAX; i++)
		http_close(d, &d->http[i]);
	if (d->metrics_fd >= 0) {
		epoll_ctl(d->ep, EPOLL_CTL_DEL, d->metrics_fd, NULL);
		close(d->metrics_fd);
		d->metrics_fd = -1;
	}
}

void kvd_metrics_accept(struct kvd *d)
{
	for (;;) {
		int fd = accept4(d->metrics_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				kvt_log_rl(KVT_LOG_WARN, "metrics: accept: %s", strerror(errno));
			return;
		}
		int slot = 0; /* a free slot, else the oldest scrape gives way */
		for (int i = 0; i < KVD_HTTP_MAX; i++) {
			if (d->http[i].fd < 0) {
				slot = i;
				break;
			}
			if (d->http[i].since_ns < d->http[slot].since_ns)
				slot = i;
		}
		http_close(d, &d->http[slot]);
		struct epoll_event ev = {.events = EPOLLIN,
		                         .data.u64 = KVD_EV_HTTP0 + (uint64_t)slot};
		if (epoll_ctl(d->ep, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			continue;
		}
		d->http[slot] = (struct kvd_http){.fd = fd, .since_ns = kvt_now_ns()};
	}
}

/* Queues status and body as the whole answer. */
static void respond(struct kvd_http *h, const char *status, const char *type, const char *body,
                    size_t blen)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
	                 "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	                 "Connection: close\r\n\r\n",
	                 status, type, blen);
	h->out = malloc((size_t)n + blen);
	if (!h->out) {
		h->out_len = 0;
		return;
	}
	memcpy(h->out, head, (size_t)n);
	memcpy(h->out + n, body, blen);
	h->out_len = (size_t)n + blen;
	h->out_pos = 0;
}

static void respond_text(struct kvd_http *h, const char *status, const char *msg)
{
	respond(h, status, "text/plain; charset=utf-8", msg, strlen(msg));
}

static void answer(struct kvd *d, struct kvd_http *h)
{
	char method[16], path[256], version[16];
	if (sscanf(h->in, "%15s %255s %15s", method, path, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7)) {
		respond_text(h, "400 Bad Request", "a request line is METHOD PATH HTTP/1.x\n");
		return;
	}
	if (strcmp(method, "GET")) {
		respond_text(h, "405 Method Not Allowed", "only GET\n");
		return;
	}
	size_t pl = strcspn(path, "?");
	if (pl != strlen("/metrics") || strncmp(path, "/metrics", pl)) {
		respond_text(h, "404 Not Found", "metrics are at /metrics\n");
		return;
	}
	static char json[KVT_MSG_MAX];
	char *prom = malloc(PROM_MAX);
	int n = kvd_stats_json(d, json, sizeof(json));
	int m = n < 0 || !prom ? -ENOMEM : kvd_prom_render(json, (size_t)n, prom, PROM_MAX);
	if (m >= 0) {
		size_t hist = kvd_latency_prom(d, prom + m, PROM_MAX - (size_t)m);
		m = hist < PROM_MAX - (size_t)m ? m + (int)hist : -ENOBUFS;
	}
	if (m < 0) {
		kvt_log_rl(KVT_LOG_WARN, "metrics: cannot render: %s", strerror(-m));
		respond_text(h, "500 Internal Server Error", "cannot render the metrics\n");
	} else {
		respond(h, "200 OK", "text/plain; version=0.0.4; charset=utf-8", prom, (size_t)m);
	}
	free(prom);
}

/* Sends what is left. @return : 1 when the answer is out, 0 when the socket is full (EPOLLOUT
 * wakes us), -1 when the peer is gone. */
static int flush_out(struct kvd *d, struct kvd_http *h, int slot)
{
	while (h->out_pos < h->out_len) {
		ssize_t w = send(h->fd, h->out + h->out_pos, h->out_len - h->out_pos, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct epoll_event ev = {.events = EPOLLOUT,
			                         .data.u64 = KVD_EV_HTTP0 + (uint64_t)slot};
			epoll_ctl(d->ep, EPOLL_CTL_MOD, h->fd, &ev);
			return 0;
		}
		if (w <= 0)
			return -1;
		h->out_pos += (size_t)w;
	}
	return 1;
}

/* Reads and drops what the peer still sends. @return : true once it has closed (or failed). */
static bool drain(struct kvd_http *h)
{
	char sink[1024];
	for (;;) {
		ssize_t r = read(h->fd, sink, sizeof(sink));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return false;
		if (r <= 0)
			return true;
	}
}

/*
 * The answer is out: half-close and wait for the peer's end before closing. Closing with unread
 * bytes (the rest of an oversized request) would send a reset, which can destroy the answer
 * in the peer's buffers before it is read. The timer ends a peer that never closes.
 */
static void linger(struct kvd *d, struct kvd_http *h, int slot)
{
	shutdown(h->fd, SHUT_WR);
	h->out_pos = h->out_len = 0; /* marks the lingering state (out stays non-NULL) */
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = KVD_EV_HTTP0 + (uint64_t)slot};
	epoll_ctl(d->ep, EPOLL_CTL_MOD, h->fd, &ev);
	if (drain(h))
		http_close(d, h);
}

/* After answer() queued the response: send it, then linger (or close on error). */
static void send_answer(struct kvd *d, struct kvd_http *h, int slot)
{
	int rc = h->out ? flush_out(d, h, slot) : -1;
	if (rc < 0)
		http_close(d, h);
	else if (rc > 0)
		linger(d, h, slot);
}

void kvd_metrics_io(struct kvd *d, int slot)
{
	struct kvd_http *h = &d->http[slot];
	if (h->fd < 0)
		return;
	if (h->out && h->out_pos < h->out_len) { /* writable again */
		send_answer(d, h, slot);
		return;
	}
	if (h->out) { /* lingering */
		if (drain(h))
			http_close(d, h);
		return;
	}
	for (;;) {
		if (h->in_len == sizeof(h->in) - 1) {
			respond_text(h, "431 Request Header Fields Too Large",
			             "request too large\n");
			break;
		}
		ssize_t r = read(h->fd, h->in + h->in_len, sizeof(h->in) - 1 - h->in_len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return; /* the rest of the request later */
		if (r <= 0) {
			http_close(d, h); /* the peer left, or an error */
			return;
		}
		h->in_len += (size_t)r;
		h->in[h->in_len] = 0;
		if (memchr(h->in, 0, h->in_len)) {
			respond_text(h, "400 Bad Request", "a NUL byte in the request\n");
			break;
		}
		if (strstr(h->in, "\r\n\r\n") || strstr(h->in, "\n\n")) {
			answer(d, h);
			break;
		}
	}
	send_answer(d, h, slot);
}

void kvd_metrics_tick(struct kvd *d, uint64_t now_ns)
{
	for (int i = 0; i < KVD_HTTP_MAX; i++)
		if (d->http[i].fd >= 0 && now_ns - d->http[i].since_ns > HTTP_TIMEOUT_NS)
			http_close(d, &d->http[i]);
}
