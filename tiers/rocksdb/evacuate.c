/*
 * evacuate.c -- a damaged table's records written elsewhere before the table is dropped, so that
 * damage costs the records it hit, not every record of its table.
 *
 * Why: RocksDB cannot rewrite a table past a damaged block: a compaction reads every block of
 * its input and fails on it, and every write fails after that. The tier's way past such a table
 * is to drop it (salvage.c), and with it every record it holds, ~64 MiB of them for one bad
 * block. And damage in the metadata, which the walks mend by clearing the meta range and reading
 * the records (walk.c, kvt__rdb_walk_mending), left its block in its table: a delete in RocksDB is
 * a tombstone, so the first compaction to take that table failed and dropped records that were
 * never damaged.
 *
 * How: the database is reopened with automatic compactions off (no compaction meets the block
 * meanwhile; the reopen also clears the background error a failed one left). The records under
 * the table's keys (from its smallest key up to the meta range) are read through the database's
 * merged view, which gives the newest version of each, whichever table holds it, checksums
 * verified, and written again (the memtable, flushed: a new table). The walk passes over each
 * block it cannot read (db.c, pass_damage: the next key a seek reaches); a pass can take a good
 * block lying between damaged ones too, so the records the tier's index knows in what it
 * passed are read one by one (copy_passed): the damage costs the records in its blocks. (The
 * walk read blocks unverified before, and Debian's RocksDB, which keeps its assertions, aborted
 * the process on a block whose entry lengths were damaged.) Then the table is dropped (salvage.c; a
 * drop over a key range may take other tables lying inside it, whose records were copied too). A
 * record deleted in the dropped table may still be put in an older table the drop left: it would
 * come back, so the range is walked once more and whatever the first walk did not see is deleted.
 * Then compactions are turned back on.
 *
 * What it cannot do: RocksDB drops a level-0 table only when it is the oldest and no deeper
 * level holds a table (DeleteFile; a drop over a key range skips level 0), so a young table
 * (level 0 holds the last few flushes) goes on as before: the tier's mend of the failing
 * compaction goes to a repair, which loses the table's records. Such a table spans every key
 * (each flush reaches the meta range), so its records are not copied. Records the index does
 * not know (the walk at open, before the index is whole) that a pass took go with the table.
 *
 * Cost: the records of the range are read and written once, and the database reopened three
 * times (quietly; the drop's two); a range holding more than EVACUATE_MAX_BYTES is not copied. A
 * table of metadata alone (most of the meta range, at the bottom level) has no records to copy.
 * Each damaged block passed over costs up to 16 seeks per key byte (db.c), and a copy that
 * passed any looks at every slot of the index once.
 */
#include "rocksdb_int.h"
#include "core/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EVACUATE_MAX_BYTES (1ull << 30)

/* The key range of table no: [lo, end), end just past its largest key or the meta range's
 * start, whichever is first. */
struct evac_range {
	char *lo, *end;
	size_t lo_len, end_len;
	int level;
	bool empty; /* lo >= end: a table of metadata alone */
};

/* Finds table no and the range of its records. @return : 0, -ENOENT (not one of the
 * database's), -EPERM (a level-0 table RocksDB would not drop: not the oldest, or a deeper
 * level holds a table) or -ENOMEM. */
static int find_table(struct kvt__rdb_db *d, uint64_t no, struct evac_range *r)
{
	const rocksdb_livefiles_t *lf = rocksdb_livefiles(d->db);
	int n = lf ? rocksdb_livefiles_count(lf) : 0, at = -1;
	bool blocks_l0 = false; /* a deeper table, or an older one in level 0 */
	for (int i = 0; i < n; i++) {
		uint64_t fno = kvt__rdb_table_named(rocksdb_livefiles_name(lf, i));
		int level = rocksdb_livefiles_level(lf, i);
		at = fno == no ? i : at;
		blocks_l0 |= level > 0 || (fno < no && level == 0);
	}
	int rc = at < 0 ? -ENOENT : 0;
	if (!rc && (r->level = rocksdb_livefiles_level(lf, at)) == 0 && blocks_l0)
		rc = -EPERM;
	if (!rc) {
		size_t lo_len, hi_len;
		const char *lo = rocksdb_livefiles_smallestkey(lf, at, &lo_len);
		const char *hi = rocksdb_livefiles_largestkey(lf, at, &hi_len);
		bool hi_first = memcmp(hi, d->meta_lo, KVT_MIN(hi_len, sizeof(d->meta_lo))) < 0;
		r->end_len = hi_first ? hi_len + 1 : sizeof(d->meta_lo);
		r->lo = malloc(lo_len + 1);
		r->end = malloc(r->end_len);
		if (r->lo && r->end) {
			memcpy(r->lo, lo, r->lo_len = lo_len);
			memcpy(r->end, hi_first ? hi : (const char *)d->meta_lo,
			       hi_first ? hi_len : sizeof(d->meta_lo));
			if (hi_first)
				r->end[hi_len] = 0; /* just past hi */
			int c = memcmp(r->lo, r->end, KVT_MIN(r->lo_len, r->end_len));
			r->empty = c > 0 || (c == 0 && r->lo_len >= r->end_len);
		} else {
			rc = -ENOMEM;
		}
	}
	if (lf)
		rocksdb_livefiles_destroy(lf);
	return rc;
}

/* A walk of the range (checksums verified: the cursor's note in rocksdb_int.h). */
struct range_walk {
	rocksdb_readoptions_t *ro;
	rocksdb_iterator_t *it;
	struct kvt__rdb_cursor cur;
};

static int walk_open(struct kvt__rdb_db *d, const struct evac_range *r, struct range_walk *w)
{
	*w = (struct range_walk){.ro = rocksdb_readoptions_create()};
	if (!w->ro)
		return -ENOMEM;
	rocksdb_readoptions_set_fill_cache(w->ro, 0);
	rocksdb_readoptions_set_iterate_lower_bound(w->ro, r->lo, r->lo_len);
	rocksdb_readoptions_set_iterate_upper_bound(w->ro, r->end, r->end_len);
	w->it = rocksdb_create_iterator(d->db, w->ro);
	rocksdb_iter_seek(w->it, r->lo, r->lo_len);
	return 0;
}

/* Ends a walk that wrote b as it went (rc: how that went): the walk's error, or the last
 * write's. */
static int walk_close(struct kvt__rdb_db *d, struct range_walk *w, int rc,
                      rocksdb_writeoptions_t *wo, rocksdb_writebatch_t *b)
{
	char *err = NULL;
	rocksdb_iter_get_error(w->it, &err);
	int it_rc = kvt__rdb_err(err);
	rocksdb_iter_destroy(w->it);
	rocksdb_readoptions_destroy(w->ro);
	kvt__rdb_cursor_fini(&w->cur);
	if (!rc)
		rc = it_rc ? it_rc : kvt__rdb_write_to(d->db, wo, b);
	return rc;
}

/* The keys the copy saw (records' keys are KVT__RDB_KEY_BYTES long), and the stretches of
 * keys it passed over, unread (damaged blocks). */
struct evac_keys {
	uint8_t *k;
	size_t n, cap;
	struct kvt__rdb_passed passed;
	const char *path;
};

static int keys_add(struct evac_keys *s, const char *k)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 1024;
		uint8_t *g = realloc(s->k, cap * KVT__RDB_KEY_BYTES);
		if (!g)
			return -ENOMEM;
		s->k = g, s->cap = cap;
	}
	memcpy(s->k + s->n++ * KVT__RDB_KEY_BYTES, k, KVT__RDB_KEY_BYTES);
	return 0;
}

/* Takes a record's key (another length is not a record: left to the tier's walk, which
 * deletes it), noting it. */
static int keep_record(void *arg, const char *k, size_t klen)
{
	return klen != KVT__RDB_KEY_BYTES ? 0 : keys_add(arg, k) ? -ENOMEM : 1;
}

/* The copy passed over a damaged block: the records of the table there are lost with it. */
static void note_passed(void *arg, const char *lo, size_t lo_len, const char *hi, size_t hi_len,
                        const char *why)
{
	struct evac_keys *s = arg;
	kvt__rdb_passed_add(&s->passed, lo, lo_len, hi, hi_len);
	kvt_log(KVT_LOG_WARN, "rocksdb: %s: the copy passed over a block it cannot read (%s)",
	        s->path, why);
}

static int key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, KVT__RDB_KEY_BYTES);
}

/*
 * Writes again the records the index knows in the stretches the copy passed over, read one by
 * one: a point read reads only its record's block, and the search for the next key a seek
 * reaches can pass a good block lying between two damaged ones (their keys are spaced very
 * unevenly). What fails its read went with the damage. @return : 0 or -errno.
 */
static int copy_passed(struct kvt__rdb_db *d, const struct kvt__rdb_index *ix,
                       struct evac_keys *keys, rocksdb_writeoptions_t *wo, rocksdb_writebatch_t *b)
{
	size_t seen = keys->n, bytes = 0;
	int rc = 0;
	if (!ix || !keys->passed.n)
		return 0;
	if (seen)
		qsort(keys->k, seen, KVT__RDB_KEY_BYTES, key_cmp);
	for (uint32_t sl = 0; !rc && sl < ix->n_slots; sl++) {
		uint8_t k[KVT__RDB_KEY_BYTES];
		if (!ix->slots[sl].live)
			continue;
		kvt__rdb_key_encode(k, &ix->slots[sl].id);
		if (!kvt__rdb_passed_has(&keys->passed, k) ||
		    (seen && bsearch(k, keys->k, seen, KVT__RDB_KEY_BYTES, key_cmp)))
			continue;
		const char *v;
		size_t vl;
		rocksdb_pinnableslice_t *ps = kvt__rdb_get_quiet(d, k, sizeof(k), &v, &vl);
		if (ps) { /* else a record in a damaged block: gone with it */
			rocksdb_writebatch_put(b, (const char *)k, sizeof(k), v, vl);
			bytes += vl;
			rc = keys_add(keys, (const char *)k);
			rocksdb_pinnableslice_destroy(ps);
		}
		if (!rc && bytes >= (4u << 20)) {
			rc = kvt__rdb_write_to(d->db, wo, b);
			bytes = 0;
		}
	}
	return rc ? rc : kvt__rdb_write_to(d->db, wo, b);
}

/* Writes again every record of the range it can read. @return : 0 or -errno. */
static int copy_range(struct kvt__rdb_db *d, const struct evac_range *r, struct evac_keys *keys,
                      rocksdb_writeoptions_t *wo)
{
	struct range_walk w;
	int rc = walk_open(d, r, &w);
	if (rc)
		return rc;
	w.cur.passed = note_passed, w.cur.arg = keys, w.cur.db = d->db, w.cur.ro = w.ro;
	w.cur.lo = r->lo, w.cur.lo_len = r->lo_len;
	rc = kvt__rdb_copy_walk(&w.it, &w.cur, d->db, wo, keep_record, keys);
	rocksdb_iter_destroy(w.it);
	rocksdb_readoptions_destroy(w.ro);
	kvt__rdb_cursor_fini(&w.cur);
	return rc;
}

/* Deletes every key of the range the copy did not see (a record the drop brought back), but
 * those in a stretch it passed over: one there may be another table's, which the copy did not
 * read past the damage. @return : how many, or -errno. */
static int delete_returned(struct kvt__rdb_db *d, const struct evac_range *r,
                           struct evac_keys *keys, rocksdb_writeoptions_t *wo,
                           rocksdb_writebatch_t *b)
{
	struct range_walk w;
	int n = 0, rc = walk_open(d, r, &w);
	if (rc)
		return rc;
	if (keys->n)
		qsort(keys->k, keys->n, KVT__RDB_KEY_BYTES, key_cmp);
	for (; !rc && kvt__rdb_iter_more(&w.it, &w.cur); rocksdb_iter_next(w.it)) {
		size_t kl;
		const char *k = rocksdb_iter_key(w.it, &kl);
		if (kl == KVT__RDB_KEY_BYTES &&
		    ((keys->n && bsearch(k, keys->k, keys->n, KVT__RDB_KEY_BYTES, key_cmp)) ||
		     kvt__rdb_passed_has(&keys->passed, (const uint8_t *)k)))
			continue;
		rocksdb_writebatch_delete(b, k, kl);
		n++;
		if (rocksdb_writebatch_count(b) >= 8192)
			rc = kvt__rdb_write_to(d->db, wo, b);
	}
	rc = walk_close(d, &w, rc, wo, b);
	return rc ? rc : n;
}

/* Turns automatic compactions back on in the open database, without a reopen. */
static int compactions_on(struct kvt__rdb_db *d)
{
	static const char *const key[] = {"disable_auto_compactions"}, *const off[] = {"false"};
	char *err = NULL;
	rocksdb_set_options(d->db, 1, key, off, &err);
	return kvt__rdb_err(err);
}

/* Reopens quietly, copies, flushes (the copies must be in a table before the drop reopens the
 * database), drops table no, deletes what came back, and turns compactions back on (a reopen
 * only where the drop failed: it may have left the database open without paranoid checks). */
static int evacuate(struct kvt__rdb_db *d, const struct kvt__rdb_index *ix, uint64_t no,
                    const struct evac_range *r, struct evac_keys *keys, int *returned)
{
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	rocksdb_writebatch_t *b = rocksdb_writebatch_create();
	char *err = NULL;
	int rc = wo && fo && b ? 0 : -ENOMEM;
	bool drop_failed = false;
	if (!rc) {
		/* no WAL: the flush follows; no no_slowdown: stalls are waited out */
		rocksdb_writeoptions_disable_WAL(wo, 1);
		rocksdb_flushoptions_set_wait(fo, 1);
		d->quiet = true; /* the drop's reopens (salvage.c) stay quiet too */
		rc = kvt__rdb_db_reopen(d);
	}
	if (!rc && !r->empty)
		rc = copy_range(d, r, keys, wo);
	if (!rc && !r->empty)
		rc = copy_passed(d, ix, keys, wo, b);
	if (!rc && keys->n) {
		rocksdb_flush(d->db, fo, &err);
		rc = kvt__rdb_err(err);
	}
	if (!rc)
		drop_failed = (rc = kvt__rdb_drop_table(d, no)) != 0;
	if (!rc && !r->empty && (*returned = delete_returned(d, r, keys, wo, b)) < 0)
		rc = *returned;
	if (!rc && *returned) {
		rocksdb_flush(d->db, fo, &err);
		rc = kvt__rdb_err(err);
	}
	if (d->quiet) {
		d->quiet = false;
		int on_rc = d->db && !drop_failed ? compactions_on(d) : -EIO;
		if (on_rc)
			on_rc = kvt__rdb_db_reopen(d);
		rc = rc ? rc : on_rc;
	}
	if (b)
		rocksdb_writebatch_destroy(b);
	if (fo)
		rocksdb_flushoptions_destroy(fo);
	if (wo)
		rocksdb_writeoptions_destroy(wo);
	return rc;
}

int kvt__rdb_evacuate(struct kvt__rdb_db *d, const struct kvt__rdb_index *ix, uint64_t no)
{
	struct evac_range r = {0};
	struct evac_keys keys = {.path = d->path};
	uint64_t bytes = 0;
	int returned = 0, rc = d->db ? find_table(d, no, &r) : -EIO;
	if (!rc && !r.empty) { /* RocksDB asserts lo <= end */
		const char *lo = r.lo, *end = r.end;
		char *err = NULL;
		rocksdb_approximate_sizes(d->db, 1, &lo, &r.lo_len, &end, &r.end_len, &bytes, &err);
		rc = kvt__rdb_err(err);
	}
	if (!rc && bytes > EVACUATE_MAX_BYTES)
		rc = -E2BIG;
	if (!rc)
		rc = evacuate(d, ix, no, &r, &keys, &returned);
	if (!rc)
		kvt_log(
		    KVT_LOG_WARN,
		    "rocksdb: %s: table %06llu.sst (level %d) is damaged: dropped after the %zu "
		    "records under its keys were written again (and %d that its deletes had "
		    "hidden, back with the drop, deleted again)",
		    d->path, (unsigned long long)no, r.level, keys.n, returned);
	else if (rc != -ENOENT) /* -ENOENT: gone already (a compaction took it) */
		kvt_log(KVT_LOG_WARN,
		        "rocksdb: %s: table %06llu.sst (level %d) is damaged, and its records were "
		        "not written elsewhere: %s",
		        d->path, (unsigned long long)no, r.level,
		        rc == -EPERM   ? "RocksDB drops no level-0 table while an older one or a "
		                         "deeper level holds tables"
		        : rc == -E2BIG ? "more than 1 GiB of records lie under its keys"
		                       : strerror(-rc));
	free(keys.k);
	free(r.lo);
	free(r.end);
	return rc;
}
