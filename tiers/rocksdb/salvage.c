/*
 * salvage.c -- dropping the tables RocksDB cannot read, instead of the whole database.
 *
 * Why: a table whose footer or index block is damaged stops RocksDB's open (it loads every
 * table), and one whose data block is damaged stops a walk or, met by a compaction, leaves a
 * background error after which every write fails. The tier used to destroy the database then:
 * one bad 64 MiB table cost a terabyte of cache. Now it deletes that table's files from the
 * database (DeleteFilesInRange over the table's keys, an edit of the manifest that reads nothing
 * of the table) and goes on with the rest. A record whose value was in the table is a miss from
 * then on (found when read, or by the walk that follows). When a dropped table held metadata,
 * the meta range counts as incomplete (meta_whole false), so the next open walks the values and
 * finds again the records whose metadata went, and puts it back.
 *
 * Finding the tables: an error from a read, a walk or a write names the table ("... in
 * /path/000123.sst ..."; kvt__rdb_err_db keeps its number). An open that fails names only the
 * manifest, so kvt__rdb_salvage_open opens without paranoid checks (tables that fail to load do
 * not stop it) and seeks into each table's key range, with checksums verified: a table that
 * cannot be opened fails the seek.
 */
#include "rocksdb_int.h"
#include "core/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SALVAGE_MAX 16u /* tables dropped at one open, at most; past it: rebuild */

uint64_t kvt__rdb_table_named(const char *msg)
{
	const char *p = msg ? strstr(msg, ".sst") : NULL;
	if (!p)
		return 0;
	const char *q = p;
	while (q > msg && q[-1] >= '0' && q[-1] <= '9')
		q--;
	return q < p ? strtoull(q, NULL, 10) : 0;
}

/* Whether a seek into the key range [lo, hi] of one table fails (the table cannot be read). */
static bool table_unreadable(struct kvt__rdb_db *d, const char *lo, size_t lo_len, const char *hi,
                             size_t hi_len)
{
	char *err = NULL, *end = malloc(hi_len + 1); /* hi + 0: just past hi */
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	if (!end || !ro) {
		free(end);
		rocksdb_readoptions_destroy(ro);
		return false;
	}
	memcpy(end, hi, hi_len);
	end[hi_len] = 0;
	rocksdb_readoptions_set_fill_cache(ro, 0);
	rocksdb_readoptions_set_iterate_upper_bound(ro, end, hi_len + 1);
	rocksdb_iterator_t *it = rocksdb_create_iterator(d->db, ro);
	rocksdb_iter_seek(it, lo, lo_len);
	rocksdb_iter_get_error(it, &err);
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	free(end);
	bool bad = err != NULL;
	free(err);
	return bad;
}

/* Whether table no is still one of the database's. */
static bool table_live(struct kvt__rdb_db *d, uint64_t no)
{
	const rocksdb_livefiles_t *lf = rocksdb_livefiles(d->db);
	bool live = false;
	for (int i = 0; lf && i < rocksdb_livefiles_count(lf); i++)
		live |= kvt__rdb_table_named(rocksdb_livefiles_name(lf, i)) == no;
	if (lf)
		rocksdb_livefiles_destroy(lf);
	return live;
}

/* Deletes one table: DeleteFile takes a table of the last level or the oldest of level 0,
 * DeleteFilesInRange (over its keys) one of levels 1 and up. @return : whether it is gone. */
static bool delete_table(struct kvt__rdb_db *d, uint64_t no, const char *name, const char *lo,
                         size_t lo_len, const char *hi, size_t hi_len)
{
	char *err = NULL;
	rocksdb_delete_file(d->db, name); /* no error to read: whether it went is checked */
	if (!table_live(d, no))
		return true;
	rocksdb_delete_file_in_range(d->db, lo, lo_len, hi, hi_len, &err);
	free(err);
	return !table_live(d, no);
}

/* Whether key k sorts at or after the start of the meta range. */
static bool in_meta_range(const struct kvt__rdb_db *d, const char *k, size_t len)
{
	int c = memcmp(k, d->meta_lo, KVT_MIN(len, sizeof(d->meta_lo)));
	return c > 0 || (c == 0 && len >= sizeof(d->meta_lo));
}

/* Deletes table file_no (0: none) and, with probe, those a seek cannot read; *meta: one of them
 * held metadata. @return : how many went, or -EBADMSG when one could not. */
static int delete_tables(struct kvt__rdb_db *d, uint64_t file_no, bool probe, bool *meta)
{
	const rocksdb_livefiles_t *lf = rocksdb_livefiles(d->db);
	if (!lf)
		return -ENOMEM;
	int dropped = 0, rc = 0;
	for (int i = 0; !rc && i < rocksdb_livefiles_count(lf); i++) {
		const char *name = rocksdb_livefiles_name(lf, i);
		uint64_t no = kvt__rdb_table_named(name);
		size_t lo_len, hi_len;
		const char *lo = rocksdb_livefiles_smallestkey(lf, i, &lo_len);
		const char *hi = rocksdb_livefiles_largestkey(lf, i, &hi_len);
		bool want = no == file_no;
		if (probe && !want)
			want = table_unreadable(d, lo, lo_len, hi, hi_len);
		if (!want)
			continue;
		if ((unsigned)dropped == SALVAGE_MAX ||
		    !delete_table(d, no, name, lo, lo_len, hi, hi_len)) {
			kvt_log(KVT_LOG_ERROR,
			        "rocksdb: %s: table %s is damaged and cannot be dropped", d->path,
			        name);
			rc = -EBADMSG;
			break;
		}
		dropped++;
		*meta |= in_meta_range(d, hi, hi_len);
		kvt_log(
		    KVT_LOG_ERROR,
		    "rocksdb: %s: table %s (level %d) is damaged: dropped, with its %llu entries",
		    d->path, name, rocksdb_livefiles_level(lf, i),
		    (unsigned long long)rocksdb_livefiles_entries(lf, i));
	}
	rocksdb_livefiles_destroy(lf);
	return rc ? rc : dropped;
}

/* Opens without paranoid checks, deletes the table asked for (or those found), and opens again
 * as usual. @return : 0, -EBADMSG (nothing to drop, or the database still fails), or -errno. */
static int salvage(struct kvt__rdb_db *d, uint64_t file_no, bool probe)
{
	int rc = kvt__rdb_db_reopen_lax(d);
	if (rc)
		return rc;
	bool meta = false;
	int dropped = delete_tables(d, file_no, probe, &meta);
	if (dropped <= 0)
		return dropped ? dropped : -EBADMSG;
	d->tables_dropped += (uint64_t)dropped;
	rc = kvt__rdb_db_reopen(d);
	if (!rc && meta) { /* the records whose metadata went: found by a walk of the values */
		rocksdb_writebatch_t *b = rocksdb_writebatch_create();
		if (!b)
			return -ENOMEM;
		kvt__rdb_marker_del(b);
		rc = kvt__rdb_write(d, b);
		rocksdb_writebatch_destroy(b);
		d->meta_whole = false;
	}
	return rc;
}

int kvt__rdb_salvage_open(struct kvt__rdb_db *d)
{
	return salvage(d, 0, true);
}

int kvt__rdb_drop_table(struct kvt__rdb_db *d, uint64_t file_no)
{
	return file_no ? salvage(d, file_no, false) : -EBADMSG;
}
