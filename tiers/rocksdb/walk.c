/*
 * walk.c -- the rocksdb tier's walks of its database (the design: tier.c, "Recovery" and
 * "Damage"): the open's walk that fills the index, the reconcile after disk full or a dropped
 * table, and iterate()'s, each over the records' metadata when it is complete and over the
 * records otherwise; and what mends the damage a walk cannot read past (a table dropped, the
 * metadata cleared, RocksDB's repair, or, last, a database made anew).
 */
#include "rocksdb_int.h"
#include "core/log.h"

#include <errno.h>
#include <stdlib.h>

#define FIX_STEP      8192u /* a scan's metadata puts and deletes per batch */
#define SALVAGE_TRIES 8u    /* damaged tables dropped in a row before a rebuild */

/* What a scan walks and what it fixes as it goes. */
struct scan_ctx {
	enum kvt__rdb_scan_mode mode;
	bool meta;                 /* walks the meta range, not the records */
	bool fill;                 /* puts the metadata of every record it adds (a records walk) */
	rocksdb_writebatch_t *fix; /* metadata puts and deletes, written FIX_STEP at a time */
	int stop;
	kvt_tier_visit_fn visit;
	void *arg;
	struct kvt_tier *t;
	struct kvt__rdb_passed passed; /* damaged blocks a walk of the records passed over */
};

static void scan_one(struct kvt_tier *t, struct scan_ctx *c, const char *k, size_t klen,
                     const char *v, size_t vlen)
{
	struct kvt_tier_id id;
	struct kvt_chunk_hdr h;
	uint64_t bytes = vlen;
	uint32_t age_s = 0;
	bool bad =
	    kvt__rdb_key_decode(k, klen, &id) != 0 ||
	    (c->meta ? kvt__rdb_meta_decode(&id, v, vlen, &h, &bytes, &age_s)
	             : kvt__rdb_check_record(&id, v, vlen, c->mode == SCAN_ITERATE, &h)) != 0;
	uint32_t s = bad ? KVT__RDB_NIL : kvt__rdb_index_find(&t->ix, &id);
	if (s != KVT__RDB_NIL && t->ix.slots[s].bytes != bytes)
		bad = true; /* records are immutable: another length is a corrupt value */
	if (!bad && c->mode == SCAN_OPEN && s == KVT__RDB_NIL) {
		if (kvt__rdb_index_add(&t->ix, &id, bytes, kvt__rdb_now_s(t) - age_s, &s) == 0) {
			kvt__rdb_adopt(t, s);
			if (c->fill)
				kvt__rdb_batch_put_meta(c->fix, (const uint8_t *)k, v, 0);
		}
		return;
	}
	if (!bad && s != KVT__RDB_NIL) {
		t->ix.slots[s].mark = 1;
		if (c->fill) /* the record keeps its age */
			kvt__rdb_batch_put_meta(c->fix, (const uint8_t *)k, v,
			                        kvt__rdb_now_s(t) - t->ix.slots[s].born_s);
		if (c->mode == SCAN_ITERATE && !t->visited[s]) {
			t->visited[s] = 1;
			c->stop = c->visit(c->arg, &h, 0);
		}
		return;
	}
	/* Corrupt, or not in the index (a delete lost with the memtable): remove it. */
	if (klen == KVT__RDB_KEY_BYTES)
		kvt__rdb_batch_delete(c->fix, (const uint8_t *)k);
	else
		rocksdb_writebatch_delete(c->fix, k, klen);
	if (bad)
		ST_ADD(t, corruptions, 1);
	if (s != KVT__RDB_NIL)
		kvt__rdb_forget(t, s, c->mode != SCAN_OPEN);
}

/* Writes c->fix (best effort: a scan deletes again what it finds). @return : 0 or -errno. */
static int scan_fix(struct kvt_tier *t, struct scan_ctx *c)
{
	int rc = rocksdb_writebatch_count(c->fix) ? kvt__rdb_write(&t->db, c->fix) : 0;
	rocksdb_writebatch_clear(c->fix);
	return rc;
}

/* A walk of the records passed over [lo, hi), a block it cannot read (in a level-0 table, which
 * stays until the compaction that meets it fails and the tier repairs): the records there are
 * missed, but those the index knows are read one by one (reread) before a walk that reconciles
 * drops them. */
static void scan_passed(void *arg, const char *lo, size_t lo_len, const char *hi, size_t hi_len,
                        const char *why)
{
	struct scan_ctx *c = arg; /* the damage was counted when the walk first met it */
	kvt__rdb_passed_add(&c->passed, lo, lo_len, hi, hi_len);
	kvt_log(KVT_LOG_WARN,
	        "rocksdb: %s: a walk of the records passed over a block it cannot read (%s)",
	        c->t->db.path, why);
}

/* Whether slot s's record, unseen by a walk that passed over damage, lies where it passed and
 * reads right by itself (a point read reads only its own block): then it is marked, and visited
 * by ITERATE. */
static bool reread(struct kvt_tier *t, struct scan_ctx *c, uint32_t s)
{
	uint8_t k[KVT__RDB_KEY_BYTES];
	struct kvt_chunk_hdr h;
	const char *v;
	size_t vl;
	kvt__rdb_key_encode(k, &t->ix.slots[s].id);
	if (!kvt__rdb_passed_has(&c->passed, k))
		return false;
	rocksdb_pinnableslice_t *ps = kvt__rdb_get_quiet(&t->db, k, sizeof(k), &v, &vl);
	bool right = ps && vl == t->ix.slots[s].bytes &&
	             !kvt__rdb_check_record(&t->ix.slots[s].id, v, vl, c->mode == SCAN_ITERATE, &h);
	if (ps)
		rocksdb_pinnableslice_destroy(ps);
	if (right) {
		t->ix.slots[s].mark = 1;
		if (c->mode == SCAN_ITERATE && !t->visited[s] && !c->stop) {
			t->visited[s] = 1;
			c->stop = c->visit(c->arg, &h, 0);
		}
	}
	return right;
}

/*
 * Walks the database: the metadata when it is complete, except for ITERATE, which wants the
 * records; the records otherwise. OPEN fills the index; RECONCILE and ITERATE mark what they
 * find and then drop (and report) every slot that has no valid record or metadata any more. A
 * walk of the records by OPEN or ITERATE also fills the metadata, and marks it complete. pass:
 * a walk of the records passes over the blocks it cannot read (scan_passed) instead of failing.
 */
int kvt__rdb_scan(struct kvt_tier *t, enum kvt__rdb_scan_mode mode, bool pass,
                  kvt_tier_visit_fn visit, void *arg)
{
	struct scan_ctx c = {
	    .mode = mode, .meta = t->db.meta_whole, .visit = visit, .arg = arg, .t = t};
	c.fill = mode != SCAN_RECONCILE && !c.meta; /* and puts the marker after a whole walk */
	if (!(c.fix = rocksdb_writebatch_create()))
		return -ENOMEM;
	/* damage met in the metadata's walk (it verifies checksums) sends the open to the records
	 * (open_scan) */
	rocksdb_iterator_t *it = rocksdb_create_iterator(t->db.db, t->db.walk[c.meta]);
	char *err = NULL;
	int rc, fix_rc = 0;
	for (uint32_t s = 0; s < t->ix.n_slots; s++)
		t->ix.slots[s].mark = 0;
	struct kvt__rdb_cursor cur = {0}; /* a walk ended early is found (db.c) */
	if (!c.meta && pass)
		cur = (struct kvt__rdb_cursor){
		    .passed = scan_passed, .arg = &c, .db = t->db.db, .ro = t->db.walk[0]};
	for (rocksdb_iter_seek_to_first(it); !c.stop && kvt__rdb_iter_more(&it, &cur);
	     rocksdb_iter_next(it)) {
		size_t klen, vlen;
		const char *k = rocksdb_iter_key(it, &klen);
		if (c.meta && kvt__rdb_is_marker(k, klen))
			continue;
		if (c.meta) { /* the record's key: what follows the range's start */
			if (klen != KVT__RDB_META_KEY_BYTES) {
				rocksdb_writebatch_delete(c.fix, k, klen);
				ST_ADD(t, corruptions, 1);
				continue;
			}
			k += KVT__RDB_META_LO_BYTES, klen -= KVT__RDB_META_LO_BYTES;
		}
		const char *v = rocksdb_iter_value(it, &vlen);
		if (c.fill)
			ST_ADD(t, open_values_read, 1);
		scan_one(t, &c, k, klen, v, vlen);
		if ((uint32_t)rocksdb_writebatch_count(c.fix) >= FIX_STEP && (rc = scan_fix(t, &c)))
			fix_rc = rc;
	}
	rocksdb_iter_get_error(it, &err);
	rc = kvt__rdb_err_db(&t->db, err);
	rocksdb_iter_destroy(it);
	kvt__rdb_cursor_fini(&cur);
	if (!rc && !c.stop && mode != SCAN_OPEN)
		for (uint32_t s = 0; s < t->ix.n_slots && !c.stop; s++)
			if (t->ix.slots[s].live && !t->ix.slots[s].mark &&
			    !(c.passed.n && reread(t, &c, s)))
				kvt__rdb_forget(t, s, true);
	for (uint32_t s = 0; s < t->ix.n_slots; s++)
		t->ix.slots[s].mark = 0; /* mark is the victim flag outside scans */
	c.fill = c.fill && !c.stop;      /* a walk cut short leaves records without metadata */
	if (c.fill && !rc && !fix_rc)
		kvt__rdb_marker_put(c.fix); /* after every put of the walk, or with them */
	int last_rc = scan_fix(t, &c);
	/* On disk at once when it walked any record: a crash before the next flush would cost the
	 * walk again. (A new database's marker goes with its first records.) */
	if (c.fill && !rc && !fix_rc && !last_rc && (!t->ix.n_live || !kvt__rdb_flush(t, true)))
		t->db.meta_whole = true;
	else if (c.fill && !rc)
		kvt_log(KVT_LOG_WARN,
		        "rocksdb: %s: the records' metadata could not be written: the next open "
		        "reads every record again",
		        t->db.path);
	rocksdb_writebatch_destroy(c.fix);
	kvt__rdb_publish_usage(t);
	return rc;
}

/* Drops every record from the index (reported when report: the daemon knows them). */
static void forget_all(struct kvt_tier *t, bool report)
{
	for (uint32_t s = 0; s < t->ix.n_slots; s++)
		if (t->ix.slots[s].live)
			kvt__rdb_forget(t, s, report);
}

/*
 * Destroys the database and opens it again, empty: every record is dropped (reported when
 * report: the daemon knows them), and nothing is owed to the old files. @return : 0 or -errno.
 */
int kvt__rdb_rebuild(struct kvt_tier *t, bool report, const char *why)
{
	uint32_t lost = t->ix.n_live;
	forget_all(t, report);
	t->n_graves = 0;
	t->full = false;
	ST_ADD(t, corruptions, 1);
	kvt_log(KVT_LOG_ERROR,
	        "rocksdb: %s: %s; destroying it and starting empty (%u records lost)", t->db.path,
	        why, lost);
	int rc = kvt__rdb_db_wipe(&t->db);
	kvt__rdb_publish_usage(t);
	return rc;
}

/* Whether RocksDB's repair (salvage.c) rebuilt the database from its tables; counted. */
static bool repaired(struct kvt_tier *t, const char *why)
{
	uint64_t lost = t->db.tables_dropped;
	bool ok = kvt__rdb_repair(&t->db, why) == 0;
	ST_SET(t, repairs, t->db.repairs);
	ST_ADD(t, corruptions, t->db.tables_dropped - lost + ok);
	return ok;
}

/*
 * Damage a write or a walk met after the open: drops the table the error named (salvage.c) and
 * reconciles the index with what is left, reporting what went; or, when no table is named or
 * the damage goes on, makes the database anew (rebuild). @return : 0 or -errno.
 */
int kvt__rdb_salvage_or_rebuild(struct kvt_tier *t, const char *why)
{
	for (unsigned tries = 0; tries < SALVAGE_TRIES; tries++) {
		uint64_t no = t->db.bad_table;
		t->db.bad_table = 0;
		if (!no ||
		    (kvt__rdb_evacuate(&t->db, &t->ix, no) && kvt__rdb_drop_table(&t->db, no)))
			break;
		ST_ADD(t, corruptions, 1);
		int rc = kvt__rdb_scan(t, SCAN_RECONCILE, false, NULL, NULL);
		if (rc != -EBADMSG)
			return rc;
	}
	if (repaired(t, why)) { /* what the repair left is reconciled, the rest reported */
		int rc = kvt__rdb_scan(t, SCAN_RECONCILE, false, NULL, NULL);
		if (rc != -EBADMSG)
			return rc;
	}
	return kvt__rdb_rebuild(t, true, why);
}

/*
 * A walk (scan: OPEN or ITERATE) that mends the damage it cannot read past, and walks again:
 * damaged metadata is cleared and the records read instead; a table the error names is dropped,
 * its readable records written elsewhere first (evacuate.c), or, in level 0 (which RocksDB
 * will not drop), the walk of the records passes over its damaged blocks (scan's pass, whose
 * records it misses, but for those the index knows); damage neither mends, or more than
 * SALVAGE_TRIES in a row, goes to RocksDB's repair. ITERATE visits each record once over its
 * walks (t->visited), and its last walk reports what a dropped table took, visited or not.
 * @return : 0, -EBADMSG (nothing mended it: the caller makes the database anew) or -errno.
 */
int kvt__rdb_walk_mending(struct kvt_tier *t, enum kvt__rdb_scan_mode mode, kvt_tier_visit_fn visit,
                          void *arg, const char *why)
{
	bool pass = false; /* the walks of the records pass over damage (a level-0 table's) */
	int rc = kvt__rdb_scan(t, mode, pass, visit, arg);
	for (unsigned tries = 0; rc == -EBADMSG && tries < SALVAGE_TRIES; tries++) {
		bool meta = t->db.meta_whole; /* the walk that failed was of the metadata */
		uint64_t no = t->db.bad_table;
		t->db.bad_table = 0;
		ST_ADD(t, corruptions, 1);
		if (mode == SCAN_OPEN) /* which walks again from an empty index */
			forget_all(t, false);
		if (meta) {
			kvt_log(KVT_LOG_WARN,
			        "rocksdb: %s: the records' metadata is damaged: dropping it and "
			        "reading every record",
			        t->db.path);
			/* so that no later walk or compaction meets the block; a level-0 table
			 * stays, and the walk of the records passes over it (its end's seek reads
			 * it) */
			if (no && kvt__rdb_evacuate(&t->db, &t->ix, no) == -EPERM)
				pass = true;
			rocksdb_writebatch_clear(t->batch);
			kvt__rdb_meta_clear(t->batch);
			t->db.meta_whole = false;
			rc = kvt__rdb_write(&t->db, t->batch);
		} else if (no) { /* its records written elsewhere first, where that can be done */
			rc = kvt__rdb_evacuate(&t->db, &t->ix, no);
			if (rc == -EPERM && !pass) /* level 0: walked past instead */
				pass = true, rc = 0;
			else if (rc)
				rc = kvt__rdb_drop_table(&t->db, no);
		} else {
			break;
		}
		if (!rc) /* the metadata if still whole, else the records (filling the range) */
			rc = kvt__rdb_scan(t, mode, pass, visit, arg);
	}
	if (rc == -EBADMSG) {
		if (mode == SCAN_OPEN)
			forget_all(t, false);
		if (repaired(t, why))
			rc = kvt__rdb_scan(t, mode, pass, visit, arg);
	}
	return rc;
}

int kvt__rdb_open_scan(struct kvt_tier *t)
{
	static const char why[] = "a walk at open met damage it cannot read past";
	int rc = kvt__rdb_walk_mending(t, SCAN_OPEN, NULL, NULL, why);
	if (rc == -EBADMSG)
		rc = kvt__rdb_rebuild(t, false, why);
	return rc;
}
