/*
 * tierdone.c -- the loop's side of finished lower-tier jobs (the design: tiers.c), in each
 * worker's order: a demotion landed (or is tried again while the tier pushes back), a promotion
 * publishes its host copy into the policy and resumes the parked acquires, a tier's drop or move
 * updates the index, a hand-over's copy is held and queued and its write recorded. A copy whose
 * chunk was deleted or replaced meanwhile is nobody's, and is removed again.
 */
#include "tierjob.h"
#include "core/chunk.h"
#include "core/log.h"
#include "core/util.h"
#include "policy/mrc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* After a tier answers a read -EAGAIN (disabled, its database closed: the record is kept), how
 * long promotions skip it (its enable ends the wait): without it a parked get would ask again at
 * once, and again, until its deadline. */
#define READS_AGAIN_NS (1000ull * 1000 * 1000)

/* The entry a job was made for, if it is still the same version. */
struct kvd_entry *kvd_job_entry(struct kvd *d, const struct kvd_job *j)
{
	if (j->entry >= d->idx.cap)
		return NULL;
	struct kvd_entry *e = &d->idx.e[j->entry];
	return e->state != KVD_FREE && e->seq == j->seq ? e : NULL;
}

/* Entry e has a copy in tier k now, at loc (a demotion or a hand-over landed). For the tier's
 * curves a write makes the key resident; it is not a read. */
static void copy_landed(struct kvd *d, struct kvd_entry *e, uint8_t k, uint64_t loc)
{
	e->where |= (uint8_t)(2u << k);
	e->loc[k] = loc;
	if (d->lower[k].mrc)
		kvt_mrc_touch(d->lower[k].mrc, kvd_key_hash(d, e->tenant, e->ns, e->key));
	if (d->lower[k].minisim)
		kvt_minisim_touch(d->lower[k].minisim, kvd_key_hash(d, e->tenant, e->ns, e->key));
}

/* A demotion of entry id's host copy ended; with its last, the copy is clean (host.dirty_pct).
 * While a demotion is pending the entry is at host, and its jobs are all demotions. */
static void demote_ended(struct kvd *d, uint32_t id)
{
	struct kvd_entry *e = &d->idx.e[id];
	uint64_t rb = kvd_rec_bytes(e->payload_bytes);
	if (e->jobs == 1 && !KVT_NEVER(d->dirty_bytes < rb))
		d->dirty_bytes -= rb;
	kvd_entry_unjob(d, id);
}

static void complete_demote(struct kvd *d, struct kvd_job *j)
{
	d->demotes_inflight--;
	struct kvd_entry *e = kvd_job_entry(d, j);
	uint64_t now = j->result == -EAGAIN ? kvt_now_ns() : 0;
	if (j->result == -EAGAIN && !j->again_since)
		j->again_since = now;
	if (j->result == -EAGAIN && now - j->again_since < DEMOTE_STALL_NS && e &&
	    e->state == KVD_PUBLISHED && (e->where & KVD_AT_HOST)) {
		d->demotes_inflight++; /* backpressure, or a batch cut short: try it again */
		kvd_job_submit(d, j);
		return;
	}
	bool moot = !e || e->state != KVD_PUBLISHED; /* deleted (or replaced) meanwhile */
	if (j->result < 0 && !moot) {
		d->st.demote_failed++;
		if (j->result != -EFBIG && j->result != -EDQUOT) /* by design: no log line each */
			kvt_log_rl(KVT_LOG_WARN, "demotion to %s failed: %s",
			           d->lower[j->tier].ops->name, strerror((int)-j->result));
	} else if (j->result < 0) {
		/* nothing was owed: the chunk is gone (its retries above stopped with it) */
	} else if (!moot) {
		d->st.demoted++;
		copy_landed(d, e, j->tier, j->loc);
	} else { /* deleted meanwhile: take the new copy back out */
		j->kind = JOB_REMOVE;
		j->entry = KVD_NIL;
		kvd_job_submit(d, j);
		if (e)
			demote_ended(d, (uint32_t)(e - d->idx.e));
		return;
	}
	if (e)
		demote_ended(d, j->entry);
	free(j);
}

static void complete_promote(struct kvd *d, struct kvd_job *j)
{
	struct kvd_entry *e = kvd_job_entry(d, j);
	d->promotes_inflight--; /* again below when it is sent again */
	if (!e) {
		free(j);
		return;
	}
	uint32_t id = j->entry;
	uint8_t bit = (uint8_t)(2u << j->tier);
	if (j->result == -ENOENT && e->state == KVD_PUBLISHED && !(e->where & KVD_AT_HOST) &&
	    (e->where & bit) && e->loc[j->tier] != j->loc && ++j->tries < 4) {
		j->loc = e->loc[j->tier]; /* the tier moved it meanwhile: read it where it is now */
		d->st.promote_resent++;
		d->promotes_inflight++;
		kvd_job_submit(d, j);
		return;
	}
	if (j->result < 0 || e->state != KVD_PUBLISHED || (e->where & KVD_AT_HOST)) {
		kvd_host_release(d, e->tenant, j->off, kvd_rec_bytes(e->payload_bytes));
		if (j->result < 0) {
			d->st.promote_failed++;
			if (j->result != -EAGAIN) /* the tier dropped it */
				e->where &= (uint8_t)~bit;
			else /* it kept it, and cannot read now: gets are misses for a while */
				d->lower[j->tier].reads_again_ns = kvt_now_ns() + READS_AGAIN_NS;
		}
	} else {
		e->off = j->off;
		e->where |= KVD_AT_HOST;
		uint32_t pid =
		    e->has_parent ? kvd_index_find(&d->idx, e->tenant, e->ns, e->parent) : KVD_NIL;
		struct kvt_policy_meta m = {.key_hash = kvd_key_hash(d, e->tenant, e->ns, e->key),
		                            .bytes = kvd_rec_bytes(e->payload_bytes),
		                            .parent = pid == KVD_NIL ? KVT_POLICY_NONE : pid,
		                            .depth = e->depth,
		                            .tenant = e->tenant};
		if (!kvd_keep_landed(d, id)) { /* a keep waited for it: out of the policy */
			kvd_policy_stream(d, KVD_NIL);
			d->pol_ops->on_insert(d->pol, id, &m);
		}
		d->st.promoted++;
	}
	free(j);
	kvd_entry_unjob(d, id);
	e = &d->idx.e[id];
	if (e->state == KVD_PUBLISHED && !e->where && !e->jobs)
		kvd_entry_drop(d, id); /* no copy left anywhere, none on its way (a hand-over) */
}

/* The entry whose copy in j's tier is the record a tier's notification names (at j->loc), or
 * KVD_NIL: the entry is gone, or holds another record there now. */
static uint32_t notified_entry(struct kvd *d, const struct kvd_job *j)
{
	int t = kvd_tenant_of_uid(d, j->id.tenant);
	uint32_t id = t < 0 ? KVD_NIL : kvd_index_find(&d->idx, (uint32_t)t, j->id.ns, j->id.key);
	if (id == KVD_NIL)
		return KVD_NIL;
	const struct kvd_entry *e = &d->idx.e[id];
	return (e->where & (2u << j->tier)) && e->loc[j->tier] == j->loc ? id : KVD_NIL;
}

static void complete_dropped(struct kvd *d, struct kvd_job *j)
{
	d->st.lower_dropped++;
	uint32_t id = notified_entry(d, j);
	if (id != KVD_NIL) {
		struct kvd_entry *e = &d->idx.e[id];
		e->where &= (uint8_t) ~(2u << j->tier);
		if (!e->where && !e->jobs)
			kvd_entry_drop(d, id);
	}
	free(j);
}

/* The tier rewrote a record elsewhere: the index follows it, unless the entry has gone or holds
 * another record there now, in which case the moved copy is nobody's and is removed. */
static void complete_moved(struct kvd *d, struct kvd_job *j)
{
	d->st.lower_moved++;
	uint32_t id = notified_entry(d, j);
	if (id != KVD_NIL) {
		d->idx.e[id].loc[j->tier] = j->moved_to;
		free(j);
		return;
	}
	j->kind = JOB_REMOVE;
	j->entry = KVD_NIL;
	j->loc = j->moved_to;
	kvd_job_submit(d, j);
}

/* The entry whose version a hand-over's record is (the sequence number of its header), or NULL:
 * gone, or another version now. */
struct kvd_entry *kvd_handover_entry(struct kvd *d, const struct kvd_job *j, uint32_t *id)
{
	int t = kvd_tenant_of_uid(d, j->id.tenant);
	*id = t < 0 ? KVD_NIL : kvd_index_find(&d->idx, (uint32_t)t, j->id.ns, j->id.key);
	struct kvd_entry *e = *id == KVD_NIL ? NULL : &d->idx.e[*id];
	if (!e || e->state != KVD_PUBLISHED || e->seq != j->seq ||
	    (size_t)e->payload_bytes + KVT_CHUNK_HDR_BYTES != j->rec_len)
		return NULL;
	return e;
}

/*
 * A record tier j->tier - 1 evicted (on_evicted). As a copy (j->buf): the entry is held for it
 * (jobs, so it stays while no tier has it, and a get waits for the write), and the write is
 * queued. Written: the entry gets the copy, unless it is gone or another version, and then the
 * copy is nobody's and is removed; a held entry is let go, and dropped when the write failed and
 * no tier has it any more.
 */
static void complete_cascaded(struct kvd *d, struct kvd_job *j)
{
	uint32_t id;
	struct kvd_entry *e = kvd_handover_entry(d, j, &id);
	if (j->buf) {
		if (!e || (e->where & (2u << j->tier))) {
			kvd_handover_free(&d->workers[j->tier], j);
			free(j);
			return;
		}
		if (!(e->where & KVD_AT_HOST) || !e->jobs) { /* at host, jobs are demotions */
			e->jobs++;
			j->entry = id;
		}
		kvd_job_submit(d, j);
		return;
	}
	uint32_t held = j->entry;
	if (j->result == 1) { /* second_touch turned it away: not read while in the tier above */
		d->st.not_admitted++;
	} else if (j->result < 0) {
		d->st.cascade_failed++;
		if (j->result != -EFBIG && j->result != -EDQUOT)
			kvt_log_rl(KVT_LOG_WARN, "cascade into %s failed: %s",
			           d->lower[j->tier].ops->name, strerror((int)-j->result));
	} else {
		d->st.cascaded++;
		if (e) {
			copy_landed(d, e, j->tier, j->loc);
		} else { /* nobody's: take it back out */
			j->kind = JOB_REMOVE;
			j->entry = KVD_NIL;
			kvd_job_submit(d, j);
			j = NULL;
		}
	}
	free(j);
	if (held == KVD_NIL)
		return;
	kvd_entry_unjob(d, held);
	e = &d->idx.e[held];
	if (e->state == KVD_PUBLISHED && !e->where && !e->jobs)
		kvd_entry_drop(d, held); /* the write failed, and no tier has it */
}

/* Takes w's finished jobs. @return : them, oldest first. */
static struct kvd_job *take_done(struct kvd_worker *w)
{
	pthread_mutex_lock(&w->lock);
	struct kvd_job *list = w->done;
	w->done = NULL;
	pthread_mutex_unlock(&w->lock);
	struct kvd_job *rev = NULL;
	while (list) {
		struct kvd_job *nx = list->next;
		list->next = rev;
		rev = list;
		list = nx;
	}
	return rev;
}

static void complete_list(struct kvd *d, struct kvd_job *rev)
{
	while (rev) {
		struct kvd_job *j = rev;
		rev = rev->next;
		switch (j->kind) {
		case JOB_DEMOTE:
			complete_demote(d, j);
			break;
		case JOB_PROMOTE:
			complete_promote(d, j);
			break;
		case JOB_DROPPED:
			complete_dropped(d, j);
			break;
		case JOB_MOVED:
			complete_moved(d, j);
			break;
		case JOB_CASCADED:
			complete_cascaded(d, j);
			break;
		default:
			free(j);
			break;
		}
	}
}

/* Each worker's news in its order; between workers there is none to keep (a hand-over's write
 * is queued by the loop only after it has heard of the hand-over). */
void kvd_tiers_complete(struct kvd *d)
{
	uint64_t cnt;
	if (read(d->evfd, &cnt, sizeof(cnt)) < 0 || !d->workers)
		return;
	for (uint8_t k = 0; k < d->n_lower; k++)
		complete_list(d, take_done(&d->workers[k]));
	/* what found a tier's lock busy and did not park (kvd_lower_take) looks again */
	bool auto_owed = false;
	for (uint8_t k = 0; k < d->n_lower; k++)
		auto_owed |= d->lower[k].auto_owed;
	if (auto_owed)
		kvd_tiers_policy_auto(d);
	kvd_tiers_register_pools(d);
	kvd_config_reload_owed(d);
	kvd_conn_resume_ready(d, kvt_now_ns());
}
