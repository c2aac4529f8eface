/*
 * tier.c -- the rocksdb tier: records stored as values under (tenant | namespace | key).
 *
 * Value = the whole record (128-byte header + payload), so a read is one point lookup and the
 * record can be verified on its own. The in-memory index (index.c) holds every stored identity
 * with its size; it is authoritative for the worker thread, so a miss never touches RocksDB.
 *
 * Invariants, each held after every call returns:
 * - used_bytes = sum of slot bytes = logical bytes stored <= cap_bytes (rocksdb.bytes).
 * - every live slot has a value in the database, except records lost by a crash or a failed
 *   flush; those are found by the next scan (open or disk-full recovery) and reported dropped.
 * - a record that fails verification (header, identity, length, payload checksum) is deleted,
 *   counted as a corruption and reported through env->dropped; the caller gets -EBADMSG.
 *
 * Eviction: slot numbers are the policy's ids (rocksdb.policy, default ARC; switched at run time
 * by policy_set, which rebuilds the new policy from the old one's order and drops nothing).
 * With rocksdb.quota the policy's proposals pass through kvt_quota: a tenant at its maximum
 * evicts its own records, and no write takes another tenant below its guarantee (the write
 * fails with -ENOSPC instead); tenants are counted by a dense index (slot.tix). rocksdb.quota
 * may change at run time (quota_set): the accounts, made once from the index, stay, and only
 * the limits change; `none` turns the limits off.
 * Records have no parent here: the prefix tree lives in the daemon. Victims and the new record go
 * into one write batch, so a failed write evicts nothing. TTL (rocksdb.ttl_s) counts from the
 * write, across restarts too (the saved index and the metadata carry the age); only records
 * found by reading values (below) count from the open.
 *
 * Recovery: each record's metadata (its header, when written) is stored beside it in the meta
 * range (db.c), put and deleted in the same batch as the record. An open without a saved index
 * (a crash), and iterate() (the daemon's walk at every start), walk the meta range, 209 bytes a
 * record with RocksDB's checksums verified, instead of every value; payloads are checked when
 * read. A database whose meta range is not complete (made by an older kvtier: no marker) has
 * its values read once; that walk puts every record's metadata and then the marker. Damage in
 * the meta range sends the open to the values, after clearing the range (walk.c,
 * kvt__rdb_open_scan).
 *
 * Disk full: a write that meets ENOSPC marks the tier full and fails; later writes fail at once
 * (-ENOSPC, no RocksDB call) until a probe (every PROBE_NS) sees RESUME_FREE_BYTES free, then the
 * database is closed and reopened (RocksDB 7.8's C API has no resume) and a reconcile scan drops
 * whatever the failed flushes lost. Reads keep using the open database meanwhile.
 *
 * Damage: a record whose bytes changed fails the tier's own checks (header, identity, length,
 * payload checksum) or RocksDB's block checksum on a point read: it is deleted, counted as a
 * corruption, reported, and the read answers -EBADMSG. Every read verifies RocksDB's checksums
 * (an unverified read of a damaged block can abort the process: db.c), so a damaged block stops
 * a walk, and the error names its table. A table RocksDB cannot read (a damaged footer or index
 * stops its open; a damaged block stops a walk, or, met by a compaction, fails every later
 * write) is dropped (salvage.c), after its records are written again where RocksDB can drop it
 * and a walk can read them (evacuate.c, which passes over the damaged blocks; a damaged
 * block then costs the records it hit), else with its records; the index is reconciled with
 * what is left. Every walk confirms its end (kvt__rdb_iter_more: RocksDB 7.8 can end one early
 * with no error). Damage no table is named for, a damaged or missing manifest, a table that
 * cannot be dropped or more than SALVAGE_TRIES tables in a row go to RocksDB's repair, or,
 * where it refuses, a rebuild table by table (salvage.c); what is left is reconciled. Only a
 * database that cannot be repaired (blob files, tables past rocksdb.repair_max_bytes, a repair that
 * fails) is destroyed and made again, empty, every record it held reported dropped and the loss
 * logged (rebuild). It is a cache; the alternative is a tier that never takes a write again, or a
 * daemon that does not start. iterate() (the daemon's walk at every start, after an open that may
 * have walked nothing: a saved index) mends what it meets as the open's walk does (walk.c),
 * visiting each record once over its walks and reporting what a dropped table took.
 *
 * Deletes that fail: a value whose delete did not land (RocksDB refused it, or failed) would be
 * found by the next open's scan, and a deleted chunk would come back after a restart. Its id
 * becomes a *grave*: graves go into the batch of every later write or delete (GRAVE_STEP at a
 * time) and all of them at close, until one lands. A write that fails with anything but
 * -EAGAIN may have been applied, so its id is a grave too when the tier did not hold it before
 * (a failed put must not be found at the next open). A write of an id cancels its grave. Graves
 * live in memory: after a crash the deletes they stood for may be undone (as the WAL-off
 * memtable's are); past GRAVES_MAX they are counted (unburied) and logged. Those a close could
 * not land in 3 tries are counted and logged too, and go into the index it saves (saved.c):
 * the next open owes them again.
 *
 * Blocking: write() copies into the memtable (plus a WAL append when rocksdb.wal is on) and never
 * waits for RocksDB (no_slowdown); read() may pread from SST or blob files; open() reads the
 * index the last clean close saved (saved.c) or, without one it can trust, walks the metadata
 * (or, once, every value); close() flushes the memtable and saves the index; the disk-full probe
 * reopens (tens of milliseconds).
 */
#include "rocksdb_int.h"
#include "core/log.h"
#include "core/tenants.h"
#include "policy/quota.h"
#include "tiers/tier_quota.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <xxhash.h>

#define PROBE_NS          (500ull * 1000 * 1000)
#define SWEEP_NS          (1000ull * 1000 * 1000)
#define RESUME_FREE_BYTES (8ull << 20)
#define VICTIM_STEP       64u
#define COPY_STEP         (64u << 10) /* fused copy + checksum: a step stays in L2 */
#define GRAVE_STEP        256u        /* graves retried with each write or delete */
#define GRAVES_MAX        (1u << 16)  /* beyond: unburied, logged */
#define CLOSE_TRIES       3

static void slot_meta(void *arg, uint32_t s, struct kvt_policy_meta *m)
{
	const struct kvt__rdb_slot *sl = &((struct kvt_tier *)arg)->ix.slots[s];
	*m = (struct kvt_policy_meta){.key_hash = kvt__rdb_id_hash(&sl->id),
	                              .bytes = sl->bytes,
	                              .parent = KVT_POLICY_NONE,
	                              .tenant = sl->id.tenant};
}

static void policy_insert(struct kvt_tier *t, uint32_t s)
{
	struct kvt_policy_meta m;
	slot_meta(t, s, &m);
	t->pol_ops->on_insert(t->pol, s, &m);
}

/* ---- quotas ---- */

static uint16_t tenant_ix(struct kvt_tier *t, uint32_t key)
{
	return kvt_quota_key_ix(t->quota, key);
}

static int quota_item(void *arg, uint32_t key, uint64_t g, uint64_t m)
{
	struct kvt_tier *t = arg;
	return kvt_quota_set(t->quota, tenant_ix(t, key), g, m);
}

static int quota_check_item(void *arg, uint32_t key, uint64_t g, uint64_t m)
{
	(void)arg, (void)key, (void)g, (void)m;
	return 0;
}

/*
 * rocksdb.quota: "WHO=GUARANTEED/MAX,..." as tenant.quota (core/tenants.h), or "none" / "" for
 * off. The first list makes the accounts, from every record the index holds; a later one resets
 * every tenant's limits and sets the listed ones. On failure nothing changed.
 * @return : 0, -EINVAL (err says), -ENOMEM.
 */
static int quota_set(struct kvt_tier *t, const char *list, char *err, size_t err_len)
{
	if (!*list || !strcmp(list, "none")) {
		t->quota_on = false;
		return 0;
	}
	int rc = kvt_quota_list_each(list, quota_check_item, NULL, err, err_len);
	if (rc)
		return rc;
	if (!t->quota) {
		if ((rc = kvt_quota_create(&t->quota)))
			goto nomem;
		for (uint32_t s = 0; s < t->ix.n_slots; s++) {
			if (!t->ix.slots[s].live)
				continue;
			t->ix.slots[s].tix = tenant_ix(t, t->ix.slots[s].id.tenant);
			kvt_quota_charge(t->quota, t->ix.slots[s].tix,
			                 (int64_t)t->ix.slots[s].bytes);
		}
	}
	for (size_t i = 0; i < kvt_quota_keys(t->quota); i++)
		kvt_quota_set(t->quota, (uint32_t)i, 0, KVT_QUOTA_UNLIMITED);
	if ((rc = kvt_quota_list_each(list, quota_item, t, err, err_len)))
		goto nomem; /* checked above: only an account that could not grow */
	t->quota_on = true;
	return 0;
nomem:
	snprintf(err, err_len, "%s", strerror(-rc));
	t->quota_on = false;
	return rc;
}

static int open_quota(struct kvt_tier *t, const char *list)
{
	char err[KVT_OPT_STR_MAX + 64];
	int rc = quota_set(t, list, err, sizeof(err));
	if (rc == -EINVAL)
		kvt_log(KVT_LOG_ERROR, "rocksdb.quota: %s", err);
	return rc;
}

/* Slot s holds delta more (or fewer) bytes: the tier's usage and its tenant's account. */
static void account(struct kvt_tier *t, uint32_t s, int64_t delta)
{
	t->used_bytes += (uint64_t)delta;
	if (t->quota)
		kvt_quota_charge(t->quota, t->ix.slots[s].tix, delta);
}

static uint32_t slot_tenant(void *arg, uint32_t s)
{
	return ((struct kvt_tier *)arg)->ix.slots[s].tix;
}

static uint64_t slot_bytes(void *arg, uint32_t s)
{
	return ((struct kvt_tier *)arg)->ix.slots[s].bytes;
}

/* Drops slot s from the index and the policy; report tells the daemon. */
void kvt__rdb_forget(struct kvt_tier *t, uint32_t s, bool report)
{
	struct kvt_tier_id id = t->ix.slots[s].id;
	t->pol_ops->on_remove(t->pol, s);
	account(t, s, -(int64_t)t->ix.slots[s].bytes);
	kvt__rdb_index_del(&t->ix, s);
	if (report && t->env.dropped)
		t->env.dropped(t->env.arg, &id, 0);
}

void kvt__rdb_adopt(struct kvt_tier *t, uint32_t s)
{
	t->ix.slots[s].tix = t->quota ? tenant_ix(t, t->ix.slots[s].id.tenant) : 0;
	policy_insert(t, s);
	account(t, s, (int64_t)t->ix.slots[s].bytes);
}

/* ---- graves: deletes still owed to the database ---- */

static void lost_graves(struct kvt_tier *t, uint64_t n, const char *why)
{
	t->unburied += n;
	kvt_log_rl(KVT_LOG_WARN,
	           "rocksdb: %llu deleted records may come back at the next open (%llu in all): "
	           "their deletes %s",
	           (unsigned long long)n, (unsigned long long)t->unburied, why);
}

/* id's value must go: its delete did not land, or a failed write may have stored it. */
static void grave_add(struct kvt_tier *t, const struct kvt_tier_id *id)
{
	for (uint32_t i = 0; i < t->n_graves; i++)
		if (kvt__rdb_same_id(&t->graves[i], id))
			return;
	if (t->n_graves == t->cap_graves) {
		uint32_t cap = t->cap_graves ? 2 * t->cap_graves : 64;
		struct kvt_tier_id *g =
		    cap <= GRAVES_MAX ? realloc(t->graves, cap * sizeof(*g)) : NULL;
		if (!g) {
			lost_graves(t, 1, "failed, and no more can be kept for retrying");
			return;
		}
		t->graves = g;
		t->cap_graves = cap;
	}
	t->graves[t->n_graves++] = *id;
}

/* A write of id supersedes its grave. */
static void grave_cancel(struct kvt_tier *t, const struct kvt_tier_id *id)
{
	for (uint32_t i = 0; i < t->n_graves; i++)
		if (kvt__rdb_same_id(&t->graves[i], id)) {
			t->graves[i] = t->graves[--t->n_graves];
			return;
		}
}

/* Adds the deletes of the newest max graves to b. @return : how many. */
static uint32_t graves_to_batch(struct kvt_tier *t, rocksdb_writebatch_t *b, uint32_t max)
{
	uint32_t n = KVT_MIN(t->n_graves, max);
	for (uint32_t i = t->n_graves - n; i < t->n_graves; i++) {
		uint8_t k[KVT__RDB_KEY_BYTES];
		kvt__rdb_key_encode(k, &t->graves[i]);
		kvt__rdb_batch_delete(b, k);
	}
	return n;
}

/* The newest n graves landed. */
static void graves_landed(struct kvt_tier *t, uint32_t n)
{
	t->n_graves -= n;
	t->buried += n;
}

/* At close: every grave, CLOSE_TRIES times at most. */
static void graves_close(struct kvt_tier *t)
{
	for (int tries = 0; t->n_graves && t->db.db && tries < CLOSE_TRIES;) {
		rocksdb_writebatch_clear(t->batch);
		uint32_t n = graves_to_batch(t, t->batch, 4096);
		if (kvt__rdb_write(&t->db, t->batch))
			tries++;
		else
			graves_landed(t, n);
	}
	if (t->n_graves)
		lost_graves(t, t->n_graves, "failed at close (kept in the index the close saves)");
}

/* Deletes id's value (graves ride along); a delete that does not land becomes a grave. */
static int delete_key(struct kvt_tier *t, const struct kvt_tier_id *id)
{
	uint8_t k[KVT__RDB_KEY_BYTES];
	rocksdb_writebatch_clear(t->batch);
	uint32_t n_gr = graves_to_batch(t, t->batch, GRAVE_STEP);
	kvt__rdb_key_encode(k, id);
	kvt__rdb_batch_delete(t->batch, k);
	int rc = kvt__rdb_write(&t->db, t->batch);
	if (rc) {
		grave_add(t, id);
		return rc;
	}
	graves_landed(t, n_gr);
	return 0;
}

static void count_err(struct kvt_tier *t, int rc)
{
	if (rc == -ENOSPC) {
		t->full = true;
		t->last_probe_ns = kvt_now_ns();
		ST_ADD(t, err_nospc, 1);
	} else if (rc == -EAGAIN) {
		ST_ADD(t, err_again, 1);
	} else if (rc == -EIO) {
		ST_ADD(t, err_io, 1);
	} else {
		ST_ADD(t, err_other, 1);
	}
}

/* ---- eviction ---- */

static bool evictable(void *arg, uint32_t id)
{
	struct kvt_tier *t = arg;
	return id < t->ix.n_slots && t->ix.slots[id].live && !t->ix.slots[id].mark &&
	       id != t->exclude;
}

/* Whether a write of need bytes by tenant index r (UINT32_MAX: no quota), replacing old of its
 * own, still needs room once freed bytes are gone: the cap, or r's maximum. */
static bool needs_room(const struct kvt_tier *t, uint32_t r, uint64_t old, uint64_t need,
                       uint64_t freed)
{
	return t->used_bytes - old - freed + need > t->cap_bytes ||
	       (r != UINT32_MAX && !kvt_quota_fits(t->quota, r, need > old ? need - old : 0));
}

/* Up to VICTIM_STEP proposals for tenant index r (through the quota) or anyone's. */
static size_t propose(struct kvt_tier *t, uint32_t r, uint64_t old, uint64_t need, uint64_t freed,
                      uint32_t *out)
{
	if (r == UINT32_MAX)
		return t->pol_ops->pick_victims(t->pol, out, VICTIM_STEP, evictable, t);
	struct kvt_quota_view view = {slot_tenant, slot_bytes, evictable, t};
	uint64_t after = t->used_bytes - old - freed + need;
	uint64_t want = after > t->cap_bytes ? after - t->cap_bytes : need; /* else: r's maximum */
	return kvt_quota_pick_victims(t->quota, t->pol_ops, t->pol, r, want, &view, out,
	                              VICTIM_STEP);
}

/*
 * Chooses victims until a write of need bytes by tenant key requester (KVT__RDB_NIL: nobody's,
 * no quota), replacing old bytes of the same record, fits the cap and the requester's maximum;
 * marks them and adds their deletes to t->batch. Chosen victims are taken off their tenants'
 * accounts while choosing, so that later rounds see them gone, and put back before returning
 * (kvt__rdb_forget() takes them off for good). @return : how many victims (t->victims), or -ENOSPC.
 */
static int choose_victims(struct kvt_tier *t, uint32_t requester, uint64_t old, uint64_t need,
                          uint32_t *n_out)
{
	uint32_t r =
	    t->quota_on && requester != KVT__RDB_NIL ? tenant_ix(t, requester) : UINT32_MAX;
	uint64_t freed = 0;
	uint32_t n = 0;
	int rc = -ENOSPC;
	while (needs_room(t, r, old, need, freed)) {
		if (n + VICTIM_STEP > t->cap_victims) {
			uint32_t cap = 2 * (n + VICTIM_STEP);
			uint32_t *v = realloc(t->victims, cap * sizeof(*v));
			if (!v)
				goto out;
			t->victims = v;
			t->cap_victims = cap;
		}
		size_t got = propose(t, r, old, need, freed, t->victims + n);
		if (!got)
			goto out;
		for (size_t i = 0; i < got && needs_room(t, r, old, need, freed); i++) {
			uint32_t s = t->victims[n++];
			uint8_t k[KVT__RDB_KEY_BYTES];
			t->ix.slots[s].mark = 1;
			freed += t->ix.slots[s].bytes;
			if (r != UINT32_MAX)
				kvt_quota_charge(t->quota, t->ix.slots[s].tix,
				                 -(int64_t)t->ix.slots[s].bytes);
			kvt__rdb_key_encode(k, &t->ix.slots[s].id);
			kvt__rdb_batch_delete(t->batch, k);
		}
	}
	rc = 0;
out:
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = t->victims[i];
		if (r != UINT32_MAX)
			kvt_quota_charge(t->quota, t->ix.slots[s].tix,
			                 (int64_t)t->ix.slots[s].bytes);
		if (rc)
			t->ix.slots[s].mark = 0;
	}
	*n_out = rc ? 0 : n;
	return rc;
}

static void commit_victims(struct kvt_tier *t, uint32_t n, bool report)
{
	for (uint32_t i = 0; i < n; i++) {
		if (t->pol_ops->is_done && t->pol_ops->is_done(t->pol, t->victims[i]))
			ST_ADD(t, told_evictions, 1);
		t->ix.slots[t->victims[i]].mark = 0;
		kvt__rdb_forget(t, t->victims[i], report);
	}
	ST_ADD(t, evictions, n);
}

static void sweep_ttl(struct kvt_tier *t)
{
	uint64_t now = kvt_now_ns();
	if (!t->ttl_s || now - t->last_sweep_ns < SWEEP_NS)
		return;
	t->last_sweep_ns = now;
	uint32_t sec = kvt__rdb_now_s(t);
	for (uint32_t s = 0; s < t->ix.n_slots; s++) {
		if (!t->ix.slots[s].live || sec - t->ix.slots[s].born_s < t->ttl_s)
			continue;
		delete_key(t, &t->ix.slots[s].id);
		kvt__rdb_forget(t, s, true);
		ST_ADD(t, evictions, 1);
	}
}

/* ---- disk full ---- */

/* After a reopen following a disk full: drops from the index what the failed flushes lost
 * (and a table the walk cannot read). @return : 0 or -errno. */
static int reconcile(struct kvt_tier *t)
{
	int rc = kvt__rdb_scan(t, SCAN_RECONCILE, false, NULL, NULL);
	if (rc == -EBADMSG)
		rc = kvt__rdb_salvage_or_rebuild(
		    t, "a walk after disk full met damage it cannot read past");
	return rc;
}

/* @return : 0 when the tier may write, -ENOSPC while the disk stays full. */
static int probe_full(struct kvt_tier *t)
{
	struct statvfs sv;
	uint64_t now = kvt_now_ns();
	if (now - t->last_probe_ns < PROBE_NS)
		return -ENOSPC;
	t->last_probe_ns = now;
	if (statvfs(t->db.path, &sv) || (uint64_t)sv.f_bavail * sv.f_frsize < RESUME_FREE_BYTES)
		return -ENOSPC;
	int rc = kvt__rdb_db_reopen(&t->db);
	if (rc) {
		kvt_log_rl(KVT_LOG_WARN, "rocksdb: reopen after disk full: %d", rc);
		return -ENOSPC; /* reads answer -EAGAIN (kept) until a later probe reopens */
	}
	if ((rc = reconcile(t)))
		return rc;
	t->full = false;
	kvt__rdb_publish_usage(t);
	kvt_log(KVT_LOG_INFO, "rocksdb: resumed after disk full, %u records", t->ix.n_live);
	return 0;
}

/* ---- the ops table ---- */

static int rdb_write(struct kvt_tier *t, const void *buf, size_t rec_len, size_t buf_len,
                     uint64_t *loc)
{
	struct kvt_chunk_hdr h;
	uint32_t n_vic = 0, s;
	int rc;
	if (rec_len < KVT_CHUNK_HDR_BYTES || rec_len > buf_len || kvt_chunk_hdr_decode(buf, &h) ||
	    h.payload_bytes != rec_len - KVT_CHUNK_HDR_BYTES)
		return -EINVAL;
	if (rec_len > t->cap_bytes)
		return -EFBIG;
	if (t->full && (rc = probe_full(t))) {
		ST_ADD(t, err_nospc, 1);
		return rc;
	}
	if (!t->db.db)
		return -EIO;
	sweep_ttl(t);
	struct kvt_tier_id id = {.tenant = h.tenant, .ns = h.ns, .key = h.key};
	s = kvt__rdb_index_find(&t->ix, &id);
	uint64_t old = s == KVT__RDB_NIL ? 0 : t->ix.slots[s].bytes;
	t->exclude = s;
	rocksdb_writebatch_clear(t->batch);
	uint32_t n_gr = graves_to_batch(t, t->batch, GRAVE_STEP); /* before the put: it wins */
	rc = choose_victims(t, id.tenant, old, rec_len, &n_vic);
	if (rc) { /* no room the policy and the quota allow: a refusal, not a full disk */
		t->exclude = KVT__RDB_NIL;
		ST_ADD(t, err_nospc, 1);
		return rc;
	}
	uint8_t k[KVT__RDB_KEY_BYTES];
	kvt__rdb_key_encode(k, &id);
	kvt__rdb_batch_put(t->batch, k, buf, rec_len);
	rc = kvt__rdb_write(&t->db, t->batch);
	if (rc == -EBADMSG) { /* a background error from damage: writes fail until made anew */
		for (uint32_t i = 0; i < n_vic; i++)
			t->ix.slots[t->victims[i]].mark = 0;
		t->exclude = KVT__RDB_NIL;
		rc = kvt__rdb_salvage_or_rebuild(t, "a write met a corruption error");
		count_err(t, -EIO);
		return rc ? rc : -EIO;
	}
	if (rc) {
		if (rc != -EAGAIN && s == KVT__RDB_NIL)
			grave_add(t, &id); /* it may have been stored */
		goto err_unmark;
	}
	graves_landed(t, n_gr);
	grave_cancel(t, &id);
	commit_victims(t, n_vic, true);
	if (s == KVT__RDB_NIL) {
		rc = kvt__rdb_index_add(&t->ix, &id, rec_len, kvt__rdb_now_s(t), &s);
		if (rc) {
			delete_key(t, &id);
			goto err;
		}
		t->ix.slots[s].tix = t->quota ? tenant_ix(t, id.tenant) : 0;
		policy_insert(t, s);
	} else {
		account(t, s, -(int64_t)old);
		t->ix.slots[s].bytes = rec_len;
		t->ix.slots[s].born_s = kvt__rdb_now_s(t);
		t->pol_ops->on_access(t->pol, s);
	}
	account(t, s, (int64_t)rec_len);
	t->exclude = KVT__RDB_NIL;
	ST_ADD(t, writes, 1);
	ST_ADD(t, write_bytes, rec_len);
	kvt__rdb_publish_usage(t);
	*loc = 0;
	return 0;
err_unmark:
	for (uint32_t i = 0; i < n_vic; i++)
		t->ix.slots[t->victims[i]].mark = 0;
err:
	t->exclude = KVT__RDB_NIL;
	count_err(t, rc);
	kvt__rdb_publish_usage(t);
	return rc;
}

static void drop_corrupt(struct kvt_tier *t, uint32_t s)
{
	delete_key(t, &t->ix.slots[s].id);
	kvt__rdb_forget(t, s, true);
	ST_ADD(t, corruptions, 1);
	kvt__rdb_publish_usage(t);
	kvt_log_rl(KVT_LOG_WARN, "rocksdb: corrupt record dropped");
}

/*
 * Copies a value into buf and verifies it in one pass over memory: the payload is copied in
 * COPY_STEP pieces and each piece is hashed from the (cache-hot) destination, so the checksum
 * costs no second trip to DRAM. The sum is XXH3-64 seed 0, as kvt_chunk_sum (checked at open).
 */
static int copy_verify(struct kvt_tier *t, const struct kvt_tier_id *id, uint8_t *buf,
                       const char *v, size_t len, struct kvt_chunk_hdr *h)
{
	memcpy(buf, v, KVT_CHUNK_HDR_BYTES);
	if (kvt__rdb_check_record(id, buf, len, false, h))
		return -EBADMSG;
	XXH3_64bits_reset(t->xxh);
	for (size_t off = KVT_CHUNK_HDR_BYTES; off < len; off += COPY_STEP) {
		size_t n = KVT_MIN((size_t)COPY_STEP, len - off);
		memcpy(buf + off, v + off, n);
		XXH3_64bits_update(t->xxh, buf + off, n);
	}
	return XXH3_64bits_digest(t->xxh) == h->payload_sum ? 0 : -EBADMSG;
}

static ssize_t rdb_read(struct kvt_tier *t, const struct kvt_tier_id *id, uint64_t loc, void *buf,
                        size_t buf_len)
{
	uint32_t s = kvt__rdb_index_find(&t->ix, id);
	uint8_t k[KVT__RDB_KEY_BYTES];
	struct kvt_chunk_hdr h;
	size_t len;
	if (s == KVT__RDB_NIL)
		goto miss;
	if (t->ttl_s && kvt__rdb_now_s(t) - t->ix.slots[s].born_s >= t->ttl_s) {
		delete_key(t, id);
		kvt__rdb_forget(t, s, true);
		ST_ADD(t, evictions, 1);
		kvt__rdb_publish_usage(t);
		goto miss;
	}
	kvt__rdb_key_encode(k, id);
	int rc;
	rocksdb_pinnableslice_t *ps = kvt__rdb_get(&t->db, k, sizeof(k), &rc);
	if (rc == -EBADMSG) { /* RocksDB's block checksum failed */
		drop_corrupt(t, s);
		return -EBADMSG;
	}
	if (rc == -EAGAIN) /* the database is closed: kept, read after the next reopen */
		return -EAGAIN;
	if (rc) { /* unreadable: dropped, as the daemon takes it (tiers/tier.h) */
		count_err(t, -EIO);
		delete_key(t, id);
		kvt__rdb_forget(t, s, true);
		kvt__rdb_publish_usage(t);
		return -EIO;
	}
	if (!ps) { /* lost behind the index's back (damage, a manual flush cut short): a miss */
		delete_key(t, id); /* its metadata */
		kvt__rdb_forget(t, s, true);
		kvt__rdb_publish_usage(t);
		goto miss;
	}
	const char *v = rocksdb_pinnableslice_value(ps, &len);
	if (len != t->ix.slots[s].bytes) {
		rocksdb_pinnableslice_destroy(ps);
		drop_corrupt(t, s);
		return -EBADMSG;
	}
	if (len > buf_len) {
		rocksdb_pinnableslice_destroy(ps);
		return -ENOBUFS;
	}
	int bad = copy_verify(t, id, buf, v, len, &h);
	rocksdb_pinnableslice_destroy(ps);
	if (bad) {
		drop_corrupt(t, s);
		return -EBADMSG;
	}
	t->pol_ops->on_access(t->pol, s);
	ST_ADD(t, reads, 1);
	ST_ADD(t, hits, 1);
	ST_ADD(t, read_bytes, len);
	return (ssize_t)len;
miss:
	ST_ADD(t, misses, 1);
	return -ENOENT;
}

static int rdb_remove(struct kvt_tier *t, const struct kvt_tier_id *id, uint64_t loc)
{
	uint32_t s = kvt__rdb_index_find(&t->ix, id);
	if (s == KVT__RDB_NIL)
		return -ENOENT;
	delete_key(t, id); /* one that fails is a grave, retried */
	kvt__rdb_forget(t, s, false);
	kvt__rdb_publish_usage(t);
	return 0;
}

static void rdb_hint_done(struct kvt_tier *t, const struct kvt_tier_id *id, uint64_t loc)
{
	(void)loc;
	uint32_t s = kvt__rdb_index_find(&t->ix, id);
	if (s != KVT__RDB_NIL && t->pol_ops->on_done)
		t->pol_ops->on_done(t->pol, s);
}

/* The chunk was read again at host after hint_done: the policy that marked it sees an access. */
static void rdb_hint_again(struct kvt_tier *t, const struct kvt_tier_id *id, uint64_t loc)
{
	(void)loc;
	uint32_t s = kvt__rdb_index_find(&t->ix, id);
	if (s != KVT__RDB_NIL && t->pol_ops->is_done && t->pol_ops->is_done(t->pol, s))
		t->pol_ops->on_access(t->pol, s);
}

static int rdb_iterate(struct kvt_tier *t, kvt_tier_visit_fn visit, void *arg)
{
	if (!t->db.db)
		return -EIO;
	if (!(t->visited = calloc(KVT_MAX(t->ix.n_slots, 1u), 1)))
		return -ENOMEM;
	static const char why[] = "a walk of every record met damage it cannot read past";
	int rc = kvt__rdb_walk_mending(t, SCAN_ITERATE, visit, arg, why);
	free(t->visited);
	t->visited = NULL;
	if (rc == -EBADMSG) /* what was visited is reported dropped */
		rc = kvt__rdb_rebuild(t, true, why);
	return rc;
}

static void rdb_stats(struct kvt_tier *t, struct kvt_tier_stats *out)
{
	const uint64_t *src = (const uint64_t *)&t->st;
	uint64_t *dst = (uint64_t *)out;
	size_t n = offsetof(struct kvt_tier_stats, disabled) / sizeof(uint64_t);
	for (size_t i = 0; i < n; i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	out->disabled = false;
	out->full = __atomic_load_n(&t->st.full, __ATOMIC_RELAXED);
}

static uint64_t auto_capacity(const char *path)
{
	struct statvfs sv;
	if (statvfs(path, &sv))
		return 1ull << 30;
	return KVT_MAX((uint64_t)sv.f_bavail * sv.f_frsize / 8, 1ull << 20);
}

static void rdb_policy_get(struct kvt_tier *t, char *name, size_t name_len)
{
	char params[KVT_POLICY_PARAMS_MAX];
	kvt_policy_params_str(t->pol_ops, t->pol, params, sizeof(params));
	snprintf(name, name_len, "%s%s", t->pol_ops->name, params);
}

static int rdb_policy_set(struct kvt_tier *t, const char *name, char *params, char *err,
                          size_t err_len)
{
	size_t hint = KVT_MAX((size_t)t->ix.n_live, (size_t)1024);
	return kvt_policy_set(&t->pol_ops, &t->pol, t->ix.n_live, name, params, hint, slot_meta, t,
	                      err, err_len);
}

/* The open's walk of the metadata, or of the records, mended; what cannot be mended makes the
 * database anew. @return : 0 or -errno. */
/* One record of the index a clean close saved: as a walk at open would add it, with its age; or
 * (bytes 0) a delete it still owed. */
static int saved_one(void *arg, const struct kvt_tier_id *id, uint64_t bytes, uint32_t age_s)
{
	struct kvt_tier *t = arg;
	if (!bytes) { /* a delete the last close owed: owed again */
		grave_add(t, id);
		return 0;
	}
	uint32_t s;
	if (kvt__rdb_index_find(&t->ix, id) != KVT__RDB_NIL)
		return 0; /* once (a file we wrote has no twins) */
	int rc = kvt__rdb_index_add(&t->ix, id, bytes, kvt__rdb_now_s(t) - age_s, &s);
	if (rc)
		return rc;
	kvt__rdb_adopt(t, s);
	return 0;
}

int kvt__rdb_open_conf(const struct kvt_tier_env *env, const struct kvt__rdb_conf *c,
                       struct kvt_tier **out)
{
	int rc = -ENOMEM;
	struct kvt_tier *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->env = *env;
	t->env.data_dir = NULL; /* borrowed during open only */
	t->conf = *c;
	t->exclude = KVT__RDB_NIL;
	t->open_ns = t->last_sweep_ns = kvt_now_ns();
	const char *pname = kvt_opt_str(env->opts, KVT_OPT_ROCKSDB_POLICY);
	if (!strcmp(pname, "auto"))
		pname = "arc"; /* until the daemon picks (kvd_tiers_policy_auto) */
	if (!(t->pol_ops = kvt_policy_find(pname))) {
		kvt_log(KVT_LOG_ERROR, "rocksdb.policy: no policy named '%s'", pname);
		rc = -EINVAL;
		goto err_free;
	}
	if (KVT_NEVER(kvt_chunk_sum("kvt", 3) != XXH3_64bits("kvt", 3)))
		goto err_free; /* copy_verify() hashes as the chunk format does */
	if (!(t->xxh = XXH3_createState()))
		goto err_free;
	if (kvt__rdb_index_init(&t->ix))
		goto err_xxh;
	if ((rc = t->pol_ops->create(1024, &t->pol)))
		goto err_index;
	char params[KVT_OPT_STR_MAX], perr[256];
	snprintf(params, sizeof(params), "%s",
	         kvt_opt_str(env->opts, KVT_OPT_ROCKSDB_POLICY_PARAMS));
	if ((rc = rdb_policy_set(t, t->pol_ops->name, params, perr, sizeof(perr)))) {
		kvt_log(KVT_LOG_ERROR, "rocksdb.policy_params: %s", perr);
		goto err_policy;
	}
	rc = -ENOMEM;
	if (!(t->batch = rocksdb_writebatch_create()))
		goto err_policy;
	if ((rc = kvt__rdb_db_open(&t->db, c)))
		goto err_batch;
	t->cap_bytes = kvt_opt_u64(env->opts, KVT_OPT_ROCKSDB_BYTES);
	if (!t->cap_bytes)
		t->cap_bytes = auto_capacity(t->db.path);
	t->ttl_s = kvt_opt_u64(env->opts, KVT_OPT_ROCKSDB_TTL_S);
	if ((rc = open_quota(t, kvt_opt_str(env->opts, KVT_OPT_ROCKSDB_QUOTA))))
		goto err_db;
	ST_SET(t, capacity_bytes, t->cap_bytes);
	/* After a clean close the index saved then replaces any walk (saved.c). Without one, the
	 * open walks the records' metadata; a database whose metadata is not complete (made by an
	 * older kvtier, or a crash while a walk filled it) has its records read instead, which
	 * completes it. */
	ST_ADD(t, corruptions, t->db.tables_dropped + t->db.repairs); /* damage the open met */
	ST_SET(t, repairs, t->db.repairs);
	if (t->db.tables_dropped || t->db.repairs)
		kvt__rdb_saved_drop(&t->db); /* it names records those tables held */
	else
		rc = kvt__rdb_saved_read(
		    &t->db, t->cap_bytes / KVT_CHUNK_HDR_BYTES + 1 + GRAVES_MAX, saved_one, t);
	if (rc == 0 && !t->db.meta_whole && !t->db.created) /* a new one's marker comes later */
		kvt_log(KVT_LOG_INFO,
		        "rocksdb: %s: no complete metadata (a database from an older kvtier, or "
		        "damage): reading every record",
		        t->db.path);
	if (rc == 1) {
		ST_SET(t, opened_from_index, 1);
		rc = 0;
	} else if (rc == 0) {
		rc = kvt__rdb_open_scan(t);
	}
	if (rc)
		goto err_db;
	/* Deletes a close without a database owed: the scan found their records again */
	for (uint32_t i = 0; i < t->n_graves; i++) {
		uint32_t s = kvt__rdb_index_find(&t->ix, &t->graves[i]);
		if (s != KVT__RDB_NIL)
			kvt__rdb_forget(t, s, false);
	}
	/* Deletes are not durable with the WAL off: evict back under the cap before serving. */
	uint32_t n_vic = 0;
	rocksdb_writebatch_clear(t->batch);
	if (!choose_victims(t, KVT__RDB_NIL, 0, 0, &n_vic) && n_vic) {
		kvt__rdb_write(&t->db, t->batch);
		commit_victims(t, n_vic, false);
	}
	kvt__rdb_publish_usage(t);
	*out = t;
	return 0;
err_db:
	kvt_quota_destroy(t->quota);
	kvt__rdb_db_close(&t->db);
err_batch:
	rocksdb_writebatch_destroy(t->batch);
err_policy:
	t->pol_ops->destroy(t->pol);
err_index:
	kvt__rdb_index_fini(&t->ix);
err_xxh:
	XXH3_freeState(t->xxh);
err_free:
	free(t);
	return rc;
}

/* KVTIER_ROCKSDB_FAULT_PPM=N (tests only, like KVTIER_NVME_FAULT_PPM): a daemon's tier injects
 * each kind of fault db.c knows at N per million calls. Nothing else sets it. */
static uint32_t env_fault_ppm(void)
{
	const char *v = getenv("KVTIER_ROCKSDB_FAULT_PPM");
	char *end = NULL;
	unsigned long n = v && *v ? strtoul(v, &end, 10) : 0;
	if (!n || *end || n > 500000)
		return 0;
	kvt_log(KVT_LOG_WARN,
	        "rocksdb: KVTIER_ROCKSDB_FAULT_PPM=%lu: injecting faults (tests only)", n);
	return (uint32_t)n;
}

static int rdb_open(const struct kvt_tier_env *env, struct kvt_tier **out)
{
	struct kvt__rdb_conf c;
	int rc = kvt__rdb_conf_from_opts(&c, env->opts, env->data_dir);
	if (rc)
		return rc;
	c.fault_ppm = env_fault_ppm();
	/* A memtable is flushed whole into a level-0 table, and what it held stays on disk until
	 * compaction merges the deletes in: with 64 MiB memtables a 64 MiB tier took up to 500 MiB
	 * of disk under churn (test_rocksdb_tier disk_bounded). An eighth of the cap, 16 to 64 MiB.
	 */
	uint64_t cap = kvt_opt_u64(env->opts, KVT_OPT_ROCKSDB_BYTES);
	if (!cap)
		cap = auto_capacity(c.path);
	c.write_buffer_bytes = KVT_MIN(c.write_buffer_bytes, KVT_MAX(cap / 8, 16ull << 20));
	return kvt__rdb_open_conf(env, &c, out);
}

static void rdb_close(struct kvt_tier *t)
{
	if (!t)
		return;
	/* A reopen after a disk full that failed left no database: one more try, so that the
	 * removes owed as graves land and the index is saved; without either, the next open walks
	 * the records and finds those again. */
	if (!t->db.db) {
		int rc = kvt__rdb_db_reopen(&t->db);
		if (!rc)
			rc = reconcile(t);
		if (rc)
			kvt_log(
			    KVT_LOG_WARN,
			    "rocksdb: %s: closing without a database (%s): %u removes are saved "
			    "for the next open",
			    t->db.path, strerror(-rc), t->n_graves);
	}
	graves_close(t);
	/* The close flushes the memtable (records and metadata together); the index names the
	 * sequence number that leaves on disk (saved.c: a flush that failed leaves the next open
	 * a lower one, and it refuses the index). */
	bool was_open = t->db.db != NULL;
	uint64_t seq = was_open ? rocksdb_get_latest_sequence_number(t->db.db) : 0;
	kvt__rdb_db_close(&t->db);
	if (was_open)
		kvt__rdb_saved_write(t->db.path, seq, &t->ix, kvt__rdb_now_s(t), t->graves,
		                     t->n_graves);
	else if (t->n_graves && !kvt__rdb_saved_write(t->db.path, 0, NULL, 0, t->graves,
	                                              t->n_graves)) /* the deletes alone */
		kvt_log(KVT_LOG_INFO, "rocksdb: %s: %u removes owed to the next open", t->db.path,
		        t->n_graves);
	rocksdb_writebatch_destroy(t->batch);
	free(t->graves);
	t->pol_ops->destroy(t->pol);
	kvt_quota_destroy(t->quota);
	kvt__rdb_index_fini(&t->ix);
	XXH3_freeState(t->xxh);
	free(t->victims);
	free(t);
}

int kvt__rdb_compact(struct kvt_tier *t)
{
	if (!t->db.db)
		return -EIO;
	rocksdb_compactoptions_t *co = rocksdb_compactoptions_create();
	if (!co)
		return -ENOMEM;
	/* kForce: the last level's tables are rewritten too, so every table is read */
	rocksdb_compactoptions_set_bottommost_level_compaction(co, 2);
	rocksdb_compact_range_opt(t->db.db, co, NULL, 0, NULL, 0);
	rocksdb_compactoptions_destroy(co);
	return 0;
}

int kvt__rdb_flush(struct kvt_tier *t, bool wait)
{
	char *err = NULL;
	if (!t->db.db)
		return -EIO;
	rocksdb_flushoptions_set_wait(t->db.fo, wait);
	rocksdb_flush(t->db.db, t->db.fo, &err);
	rocksdb_flushoptions_set_wait(t->db.fo, 0);
	return kvt__rdb_err(err);
}

static size_t rdb_tenant_usage(struct kvt_tier *t, struct kvt_tier_tenant *out, size_t max)
{
	return t->quota_on ? kvt_tier_quota_usage(t->quota, out, max) : 0;
}

/* The options rdb_open reads and could refuse, checked without a database. */
static int rdb_check(const struct kvt_options *o, char *err, size_t err_len)
{
	struct kvt__rdb_conf c;
	char why[256];
	int rc = kvt__rdb_conf_from_opts(&c, o, NULL);
	if (rc) {
		snprintf(err, err_len, "rocksdb.compression: '%s' is not none, lz4 or zstd",
		         kvt_opt_str(o, KVT_OPT_ROCKSDB_COMPRESSION));
		return -EINVAL;
	}
	const char *pname = kvt_opt_str(o, KVT_OPT_ROCKSDB_POLICY);
	if (kvt_policy_check(strcmp(pname, "auto") ? pname : "arc",
	                     kvt_opt_str(o, KVT_OPT_ROCKSDB_POLICY_PARAMS), why, sizeof(why))) {
		snprintf(err, err_len, "rocksdb.policy: %s", why);
		return -EINVAL;
	}
	const char *q = kvt_opt_str(o, KVT_OPT_ROCKSDB_QUOTA);
	if (kvt_quota_list_check(q, why, sizeof(why))) {
		snprintf(err, err_len, "rocksdb.quota: %s", why);
		return -EINVAL;
	}
	return 0;
}

const struct kvt_tier_ops kvt_tier_rocksdb = {
    .version = KVT_TIER_OPS_VERSION,
    .name = "rocksdb",
    .open = rdb_open,
    .close = rdb_close,
    .write = rdb_write,
    .read = rdb_read,
    .remove = rdb_remove,
    .iterate = rdb_iterate,
    .stats = rdb_stats,
    .enable = NULL,
    .policy_get = rdb_policy_get,
    .policy_set = rdb_policy_set,
    .tenant_usage = rdb_tenant_usage,
    .quota_set = quota_set,
    .hint_done = rdb_hint_done,
    .hint_again = rdb_hint_again,
    .check = rdb_check,
};
