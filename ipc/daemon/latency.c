/*
 * latency.c -- how long requests take, per kind, from the read of a request to its reply.
 *
 * A request parked for tier jobs (an acquire waiting for promotions, a put waiting for room)
 * keeps the time of its first read, so its wait counts: this is the latency an engine sees,
 * less the socket. Counts go into fixed log-spaced buckets (1, 2, 5 per decade from 1 us to
 * 10 s, and one above), the form Prometheus histograms take, and from which `kvtier top`
 * reads percentiles over any interval by subtracting two samples. Cost: two clock reads and
 * a bucket search per request.
 */
#include "daemon.h"

#include <inttypes.h>
#include <stdio.h>

const uint64_t kvd_lat_bound_us[KVD_LAT_BUCKETS] = {
    1,    2,     5,     10,    20,     50,     100,    200,     500,     1000,    2000,
    5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000, 2000000, 5000000, 10000000};

static const char *const op_name[KVD_OP__N] = {"lookup", "acquire", "put", "delete", "other"};

static enum kvd_op op_of(uint16_t type)
{
	switch (type) {
	case KVT_MSG_LOOKUP:
		return KVD_OP_LOOKUP;
	case KVT_MSG_ACQUIRE:
		return KVD_OP_ACQUIRE;
	case KVT_MSG_PUT:
		return KVD_OP_PUT;
	case KVT_MSG_DELETE:
		return KVD_OP_DELETE;
	default:
		return KVD_OP_OTHER;
	}
}

void kvd_latency_add(struct kvd *d, uint16_t type, uint64_t ns)
{
	struct kvd_latency *l = &d->lat[op_of(type)];
	uint64_t us = ns / 1000;
	unsigned b = 0;
	while (b < KVD_LAT_BUCKETS && us > kvd_lat_bound_us[b])
		b++;
	l->bucket[b]++;
	l->count++;
	l->sum_ns += ns;
	l->max_ns = ns > l->max_ns ? ns : l->max_ns;
}

/* The bucket bound below which a fraction q of the counts lie (an upper estimate), never
 * above the largest time seen (a p99 of 2000 us beside a max of 1023 read as nonsense). */
static uint64_t quantile_us(const struct kvd_latency *l, double q)
{
	if (!l->count)
		return 0;
	uint64_t want = (uint64_t)((double)l->count * q + 0.999999), seen = 0;
	uint64_t max_us = l->max_ns / 1000;
	for (unsigned b = 0; b < KVD_LAT_BUCKETS; b++)
		if ((seen += l->bucket[b]) >= want)
			return kvd_lat_bound_us[b] < max_us ? kvd_lat_bound_us[b] : max_us;
	return max_us;
}

void kvd_latency_json(const struct kvd *d, struct kvd_out *out)
{
	kvd_out(out, "\"latency\":[");
	for (unsigned op = 0; op < KVD_OP__N; op++) {
		const struct kvd_latency *l = &d->lat[op];
		kvd_out(out,
		        "%s{\"op\":\"%s\",\"count\":%" PRIu64 ",\"sum_us\":%" PRIu64
		        ",\"max_us\":%" PRIu64 ",\"p50_us\":%" PRIu64 ",\"p99_us\":%" PRIu64
		        ",\"buckets\":[",
		        op ? "," : "", op_name[op], l->count, l->sum_ns / 1000, l->max_ns / 1000,
		        quantile_us(l, 0.5), quantile_us(l, 0.99));
		for (unsigned b = 0; b <= KVD_LAT_BUCKETS; b++)
			kvd_out(out, "%s%" PRIu64, b ? "," : "", l->bucket[b]);
		kvd_out(out, "]}");
	}
	kvd_out(out, "],\"latency_bounds_us\":[");
	for (unsigned b = 0; b < KVD_LAT_BUCKETS; b++)
		kvd_out(out, "%s%" PRIu64, b ? "," : "", kvd_lat_bound_us[b]);
	kvd_out(out, "],");
}

size_t kvd_latency_prom(const struct kvd *d, char *buf, size_t len)
{
	struct kvd_out o = {buf, len, 0};
	kvd_out(&o, "# TYPE kvtier_request_seconds histogram\n");
	for (unsigned op = 0; op < KVD_OP__N; op++) {
		const struct kvd_latency *l = &d->lat[op];
		uint64_t cum = 0;
		for (unsigned b = 0; b <= KVD_LAT_BUCKETS; b++) {
			cum += l->bucket[b];
			char le[32] = "+Inf";
			if (b < KVD_LAT_BUCKETS)
				snprintf(le, sizeof(le), "%g", (double)kvd_lat_bound_us[b] * 1e-6);
			kvd_out(&o,
			        "kvtier_request_seconds_bucket{op=\"%s\",le=\"%s\"} %" PRIu64 "\n",
			        op_name[op], le, cum);
		}
		kvd_out(&o,
		        "kvtier_request_seconds_sum{op=\"%s\"} %.9f\n"
		        "kvtier_request_seconds_count{op=\"%s\"} %" PRIu64 "\n",
		        op_name[op], (double)l->sum_ns * 1e-9, op_name[op], l->count);
	}
	return o.pos;
}
