/*
 * lease.c -- leases: a pin on an entry, owned by one connection, named by a handle
 * (seq << 32 | slot) so that a stale or forged handle is recognised and ignored.
 *
 * Every lease sits on two lists: its connection's (released at once when the connection
 * closes, invariant 3) and the global age list, oldest first: the loop sleeps no longer than
 * the oldest lease's expiry (kvd_leases_next_ns), so a lease is revoked within a millisecond or
 * two of lease.timeout_ms, not at the next 100 ms tick (RELIABILITY F2). Revoking only unpins: the
 * record's generation moves when its bytes are reused, which is what the client's release check
 * reads.
 */
#include "daemon.h"
#include "core/chunk.h"
#include "core/util.h"
#include "policy/mrc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int grow(struct kvd *d)
{
	uint32_t cap = d->cap_leases ? d->cap_leases * 2 : 1024;
	struct kvd_lease *l = realloc(d->leases, sizeof(*l) * cap);
	if (!l)
		return -ENOMEM;
	for (uint32_t i = d->cap_leases; i < cap; i++) {
		l[i] = (struct kvd_lease){.conn = KVD_NIL, .cnext = i + 1 < cap ? i + 1 : KVD_NIL};
	}
	d->free_lease = d->cap_leases; /* only called with an empty free list */
	d->leases = l;
	d->cap_leases = cap;
	return 0;
}

static uint32_t lease_new(struct kvd *d, uint32_t conn, uint32_t entry)
{
	if (d->free_lease == KVD_NIL && grow(d))
		return KVD_NIL;
	uint32_t i = d->free_lease;
	struct kvd_lease *l = &d->leases[i];
	d->free_lease = l->cnext;
	struct kvd_conn *c = &d->conns[conn];
	l->entry = entry;
	l->conn = conn;
	l->seq++;
	l->t_ns = kvt_now_ns();
	l->cprev = KVD_NIL;
	l->cnext = c->lease_head;
	if (c->lease_head != KVD_NIL)
		d->leases[c->lease_head].cprev = i;
	c->lease_head = i;
	c->n_leases++;
	l->anext = KVD_NIL;
	l->aprev = d->age_tail;
	if (d->age_tail != KVD_NIL)
		d->leases[d->age_tail].anext = i;
	else
		d->age_head = i;
	d->age_tail = i;
	d->n_leases++;
	return i;
}

static void lease_free(struct kvd *d, uint32_t i)
{
	struct kvd_lease *l = &d->leases[i];
	struct kvd_conn *c = &d->conns[l->conn];
	if (l->cprev != KVD_NIL)
		d->leases[l->cprev].cnext = l->cnext;
	else
		c->lease_head = l->cnext;
	if (l->cnext != KVD_NIL)
		d->leases[l->cnext].cprev = l->cprev;
	c->n_leases--;
	if (l->aprev != KVD_NIL)
		d->leases[l->aprev].anext = l->anext;
	else
		d->age_head = l->anext;
	if (l->anext != KVD_NIL)
		d->leases[l->anext].aprev = l->aprev;
	else
		d->age_tail = l->aprev;
	d->n_leases--;
	kvd_entry_unpin(d, l->entry);
	l->conn = KVD_NIL;
	l->cnext = d->free_lease;
	d->free_lease = i;
}

int kvd_acquire(struct kvd *d, uint32_t conn, kvt_id_t ns, const kvt_id_t *keys, uint32_t n,
                struct kvt_msg_lease *out, bool *promote)
{
	uint32_t t = d->conns[conn].tenant;
	uint32_t ids[KVT_BATCH_MAX], found = 0; /* one index lookup per key */
	uint64_t kh[KVT_BATCH_MAX];             /* and one key hash (kvd_key_hash) */
	n = KVT_MIN(n, KVT_BATCH_MAX);          /* the message's limit (kvt_proto_check_keys) */
	for (uint32_t k = 0; k < n; k++)
		kh[k] = kvd_key_hash(d, t, ns, keys[k]);
	kvd_policy_stream(d, conn);
	bool lower_only = false;
	for (; found < n; found++) {
		ids[found] = kvd_index_find(&d->idx, t, ns, keys[found]);
		if (ids[found] == KVD_NIL)
			break;
		lower_only |= !(d->idx.e[ids[found]].where & KVD_AT_HOST);
	}
	for (uint32_t k = 0; d->n_lower && !d->resuming && k < n; k++) {
		uint32_t id = k < found ? ids[k] : kvd_index_find(&d->idx, t, ns, keys[k]);
		kvd_tiers_note_read(d, kh[k], id == KVD_NIL ? 0 : d->idx.e[id].where);
	}
	/* a leading chunk only in a lower tier: promote first (unless this is the last try) */
	*promote = lower_only && !d->resume_final;
	if (*promote)
		return 0;
	for (uint32_t k = 0; k < n; k++) {
		if (d->mrc)
			kvt_mrc_access(d->mrc, kh[k]);
		kvd_admit_record(d, kh[k]);
	}
	if (d->minisim)
		kvd_minisim_feed(d, kh, n);
	uint32_t i = 0;
	for (; i < found; i++) {
		uint32_t id = ids[i];
		if (!(d->idx.e[id].where & KVD_AT_HOST) || d->idx.e[id].pins == UINT16_MAX)
			break;
		uint32_t li = lease_new(d, conn, id);
		if (li == KVD_NIL)
			break;
		struct kvd_entry *e = &d->idx.e[id];
		e->pins++;
		d->pol_ops->on_access(d->pol, id);
		kvd_tiers_again(d, id);
		kvd_tiers_demote(d, id, false); /* second touch admission */
		struct kvt_pool *p = &d->tenants[t].pool;
		out[i] = (struct kvt_msg_lease){
		    .payload_off = e->off + KVT_CHUNK_HDR_BYTES,
		    .payload_bytes = e->payload_bytes,
		    .handle = (uint64_t)d->leases[li].seq << 32 | li,
		    .gen = kvt_pool_gen(p, e->off),
		    .gen_index = (uint32_t)(e->off / KVT_GRANULE),
		    .codec = e->codec,
		};
		d->st.hits++;
		d->tenants[t].hits++;
		d->st.leases_granted++;
	}
	if (i < n) {
		d->st.misses++;
		d->tenants[t].misses++;
	}
	return (int)i;
}

void kvd_release(struct kvd *d, uint32_t conn, const uint64_t *handles, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = (uint32_t)handles[k], seq = (uint32_t)(handles[k] >> 32);
		/* forged, stale (revoked) or another connection's handle: ignored */
		if (i >= d->cap_leases || d->leases[i].conn != conn || d->leases[i].seq != seq)
			continue;
		lease_free(d, i);
	}
}

void kvd_release_all(struct kvd *d, uint32_t conn)
{
	while (d->conns[conn].lease_head != KVD_NIL)
		lease_free(d, d->conns[conn].lease_head);
}

uint64_t kvd_leases_next_ns(const struct kvd *d)
{
	if (d->age_head == KVD_NIL)
		return 0;
	uint64_t limit = kvt_opt_u64(&d->opts, KVT_OPT_LEASE_TIMEOUT_MS) * 1000000ull;
	return d->leases[d->age_head].t_ns + limit + 1;
}

void kvd_leases_expire(struct kvd *d, uint64_t now_ns)
{
	while (d->age_head != KVD_NIL && now_ns >= kvd_leases_next_ns(d)) {
		lease_free(d, d->age_head);
		d->st.leases_revoked++;
	}
}
