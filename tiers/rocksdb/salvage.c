/*
 * salvage.c -- dropping the tables RocksDB cannot read, instead of the whole database.
 *
 * Why: a table whose footer or index block is damaged stops RocksDB's open (it loads every
 * table), and one whose data block is damaged stops a walk or, met by a compaction, leaves a
 * background error after which every write fails. The tier used to destroy the database then:
 * one bad 64 MiB table cost a terabyte of cache. Now it deletes that table's files from the
 * database (DeleteFilesInRange over the table's keys, an edit of the manifest that reads nothing
 * of the table) and goes on with the rest. A record whose value was in the table is a miss from
 * then on (found when read, or by the walk that follows), unless evacuate.c could write the
 * table's records elsewhere first (the tier tries it before each drop a walk or a write asks
 * for). When a dropped table held metadata, the meta range counts as incomplete (meta_whole
 * false), so the next open walks the values and finds again the records whose metadata went,
 * and puts it back.
 *
 * Finding the tables: an error from a read, a walk or a write names the table ("... in
 * /path/000123.sst ..."; kvt__rdb_err_db keeps its number). An open that fails names only the
 * manifest, so kvt__rdb_salvage_open opens without paranoid checks (tables that fail to load do
 * not stop it) and seeks into each table's key range, with checksums verified: a table that
 * cannot be opened fails the seek. A table whose footer says its blocks carry no checksums
 * (footer_unchecked) is dropped too, found by reading its footer at every open: RocksDB opens
 * it, and would read its zeroed blocks as good ones.
 *
 * Repair (kvt__rdb_repair): damage no table can be dropped for -- a damaged or missing manifest
 * (damage RocksDB would read as its end found before the open: manifest.c) or CURRENT, a level-0
 * table that is not the oldest (DeleteFile takes only the oldest, and DeleteFilesInRange skips
 * level 0), damage that goes on past SALVAGE_TRIES -- used to destroy the database. RocksDB's
 * RepairDB (in a child process, which may die of the damage: repair_child.c) rebuilds a manifest
 * from the tables it can read instead; those it cannot are moved to lost/, which the tier empties
 * (a cache keeps no evidence: the log says what went). The cost: every table comes back in level 0,
 * so point reads check every table's bloom filter and writes stall (refused: no_slowdown) until
 * compactions have moved them down. RepairDB in RocksDB 7.8 refuses a tree whose tables came from
 * several levels (their sequence ranges nest in level 0: Debian's build runs that check always),
 * which is most databases the tier has run for a while; then each table is read alone and its
 * entries written into a new database that takes the old one's place (rebuild_by_tables): every
 * table read twice and written once, about 5x RepairDB's time (docs/rocksdb.md). Both block the
 * open (or the tier's worker), so a database whose tables hold more than rocksdb.repair_max_bytes
 * is made anew instead. Not with blob files (rocksdb.blob_min_bytes): RepairDB in RocksDB 7.8
 * leaves them out of the manifest it writes, and the next open deletes them (rocksdb#13090);
 * those databases are made anew, as before.
 */
#include "rocksdb_int.h"
#include "core/log.h"
#include "core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/*
 * Whether the table file at f says its blocks carry no checksums: the first byte of the 53-byte
 * footer of block-based format versions 1-5 (RocksDB 7.8 writes 5) is the checksum type, and 0
 * is none. The tier's tables carry crc32c (RocksDB's default), so that byte is damage; and it
 * is damage RocksDB does not see: it then compares each block's stored checksum to 0, so a
 * zeroed block passes and is parsed, and RepairDB dies on such a table (repair_child.c).
 */
static bool footer_unchecked(const char *f)
{
	enum { FOOTER = 53 };
	const uint64_t magic = 0x88e241b785f4cff7ull; /* a block-based table's */
	uint8_t b[FOOTER];
	struct stat st;
	int fd = open(f, O_RDONLY | O_CLOEXEC);
	bool read = fd >= 0 && !fstat(fd, &st) && st.st_size >= FOOTER &&
	            pread(fd, b, FOOTER, st.st_size - FOOTER) == FOOTER;
	if (fd >= 0)
		close(fd);
	if (!read)
		return false;
	uint32_t version = kvt_load_le32(b + FOOTER - 12);
	return kvt_load_le64(b + FOOTER - 8) == magic && version >= 1 && version <= 5 && !b[0];
}

/* The same for a live table, by the name RocksDB gives it ("/000123.sst"). */
static bool live_unchecked(const struct kvt__rdb_db *d, const char *name)
{
	char f[PATH_MAX + 256];
	snprintf(f, sizeof(f), "%s%s", d->path, name);
	return footer_unchecked(f);
}

bool kvt__rdb_unchecked_table(struct kvt__rdb_db *d)
{
	const rocksdb_livefiles_t *lf = rocksdb_livefiles(d->db);
	bool any = false;
	for (int i = 0; lf && !any && i < rocksdb_livefiles_count(lf); i++)
		any = live_unchecked(d, rocksdb_livefiles_name(lf, i));
	if (lf)
		rocksdb_livefiles_destroy(lf);
	return any;
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

/* How many tables the database has. */
static int live_tables(struct kvt__rdb_db *d)
{
	const rocksdb_livefiles_t *lf = rocksdb_livefiles(d->db);
	int n = lf ? rocksdb_livefiles_count(lf) : 0;
	if (lf)
		rocksdb_livefiles_destroy(lf);
	return n;
}

/* Deletes table i of lf: DeleteFile takes a table of the last level or the oldest of level 0,
 * DeleteFilesInRange (over its keys) one of levels 1 and up, and with it any other table of
 * those levels whose keys all lie in that range (counted in *others). A level-0 table that is
 * not the oldest is left to a repair: a range over its keys spans nearly every table (each
 * flush reaches the meta range). @return : whether it is gone. */
static bool delete_table(struct kvt__rdb_db *d, const rocksdb_livefiles_t *lf, int i, uint64_t no,
                         int *others)
{
	char *err = NULL;
	rocksdb_delete_file(d->db, rocksdb_livefiles_name(lf, i)); /* whether it went is checked */
	if (!table_live(d, no))
		return true;
	if (rocksdb_livefiles_level(lf, i) < 1)
		return false;
	size_t lo_len, hi_len;
	const char *lo = rocksdb_livefiles_smallestkey(lf, i, &lo_len);
	const char *hi = rocksdb_livefiles_largestkey(lf, i, &hi_len);
	int before = live_tables(d);
	rocksdb_delete_file_in_range(d->db, lo, lo_len, hi, hi_len, &err);
	free(err);
	bool gone = !table_live(d, no);
	*others += gone ? before - live_tables(d) - 1 : 0;
	return gone;
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
		bool want = no == file_no, unchecked = false;
		if (probe && !want) {
			unchecked = live_unchecked(d, name);
			want = unchecked || table_unreadable(d, lo, lo_len, hi, hi_len);
		}
		if (!want)
			continue;
		int others = 0;
		if ((unsigned)dropped == SALVAGE_MAX || !delete_table(d, lf, i, no, &others)) {
			kvt_log(KVT_LOG_ERROR,
			        "rocksdb: %s: table %s is damaged and cannot be dropped", d->path,
			        name);
			rc = -EBADMSG;
			break;
		}
		dropped += 1 + others;
		*meta |= in_meta_range(d, hi, hi_len) || others; /* theirs may reach it */
		/* RocksDB counts a table's entries from its properties block: 0 when that is
		 * damaged too (no table of this tier is written empty) */
		char entries[48] = "its entries (their count unreadable)";
		uint64_t n = rocksdb_livefiles_entries(lf, i);
		if (n)
			snprintf(entries, sizeof(entries), "its %llu entries",
			         (unsigned long long)n);
		kvt_log(KVT_LOG_ERROR,
		        "rocksdb: %s: table %s (level %d) is damaged%s: dropped, with %s (and %d "
		        "other tables inside its keys)",
		        d->path, name, rocksdb_livefiles_level(lf, i),
		        unchecked ? " (its footer says its blocks carry no checksums)" : "",
		        entries, others);
	}
	rocksdb_livefiles_destroy(lf);
	return rc ? rc : dropped;
}

/* The records whose metadata went with a table are found by a walk of the values: the marker
 * goes, and the next open reads every record (and puts their metadata back). */
static int meta_incomplete(struct kvt__rdb_db *d)
{
	rocksdb_writebatch_t *b = rocksdb_writebatch_create();
	if (!b)
		return -ENOMEM;
	kvt__rdb_marker_del(b);
	int rc = kvt__rdb_write(d, b);
	rocksdb_writebatch_destroy(b);
	d->meta_whole = false;
	return rc;
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
	if (!rc && meta)
		rc = meta_incomplete(d);
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

/* Whether name ends in suffix. */
static bool ends_with(const char *name, const char *suffix)
{
	size_t l = strlen(name), k = strlen(suffix);
	return l > k && !strcmp(name + l - k, suffix);
}

bool kvt__rdb_orphan_tables(const char *path)
{
	char f[PATH_MAX + 16];
	snprintf(f, sizeof(f), "%s/CURRENT", path);
	if (!access(f, F_OK))
		return false;
	DIR *dp = opendir(path);
	bool tables = false;
	for (struct dirent *e; dp && !tables && (e = readdir(dp));)
		tables = ends_with(e->d_name, ".sst");
	if (dp)
		closedir(dp);
	return tables;
}

/* Removes dir and everything under it (a database's directory: files, and lost/). */
static void remove_dir(const char *dir)
{
	char f[PATH_MAX + 256];
	DIR *dp = opendir(dir);
	for (struct dirent *e; dp && (e = readdir(dp));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(f, sizeof(f), "%s/%s", dir, e->d_name);
		if (unlink(f) && errno == EISDIR)
			remove_dir(f);
	}
	if (dp)
		closedir(dp);
	rmdir(dir);
}

/* Where a rebuild writes the new database, and where the old one waits for its removal. */
static void rebuild_paths(const char *path, char *fresh, char *old, size_t len)
{
	snprintf(fresh, len, "%s.rebuild", path);
	snprintf(old, len, "%s.old", path);
}

void kvt__rdb_rebuild_finish(const char *path)
{
	char fresh[PATH_MAX + 16], old[PATH_MAX + 16], tmp[PATH_MAX + 16];
	rebuild_paths(path, fresh, old, sizeof(fresh));
	snprintf(tmp, sizeof(tmp), "%s.table", path);
	if (access(path, F_OK) && !access(fresh, F_OK) && !rename(fresh, path))
		kvt_log(KVT_LOG_WARN, "rocksdb: %s: a rebuild's last step done at this open", path);
	if (access(path, F_OK))
		return;
	remove_dir(old); /* a finished rebuild's leftovers, or an unfinished one's */
	remove_dir(fresh);
	remove_dir(tmp);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The numbers of path's table files, ascending (malloc'd into *out), and their bytes.
 * @return : how many, or -errno. */
static int list_tables(const char *path, uint64_t **out, uint64_t *bytes)
{
	char f[PATH_MAX + 256];
	int n = 0, cap = 0;
	*out = NULL, *bytes = 0;
	DIR *dp = opendir(path);
	if (!dp)
		return -errno;
	for (struct dirent *e; (e = readdir(dp));) {
		uint64_t no = ends_with(e->d_name, ".sst") ? kvt__rdb_table_named(e->d_name) : 0;
		struct stat st;
		snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
		if (!no || stat(f, &st))
			continue;
		if (n == cap) {
			uint64_t *g =
			    realloc(*out, sizeof(*g) * (size_t)(cap = cap ? 2 * cap : 64));
			if (!g) {
				closedir(dp);
				return -ENOMEM;
			}
			*out = g;
		}
		(*out)[n++] = no;
		*bytes += (uint64_t)st.st_size;
	}
	closedir(dp);
	if (n)
		qsort(*out, (size_t)n, sizeof(**out), cmp_u64);
	return n;
}

/* Empties and removes path/lost, where RepairDB moves what it could not use (damaged tables,
 * the old manifests, replayed logs). @return : how many tables it held. */
static int lost_clear(const char *path)
{
	char lost[PATH_MAX + 8];
	uint64_t *tables, bytes;
	snprintf(lost, sizeof(lost), "%s/lost", path);
	int n = list_tables(lost, &tables, &bytes);
	free(tables);
	remove_dir(lost);
	return KVT_MAX(n, 0);
}

/* Writes every entry of d's table no into to: the table is linked alone into tmp, where
 * RepairDB makes a database of it (one table cannot fail the tree's check), and read with
 * checksums verified. @return : 0, -EBADMSG (unreadable; what was read of it stays written)
 * or -errno (writing to failed). */
static int copy_table(const struct kvt__rdb_db *d, uint64_t no, const char *tmp, rocksdb_t *to,
                      rocksdb_writeoptions_t *wo)
{
	char src[PATH_MAX + 32], dst[PATH_MAX + 32], *err = NULL;
	snprintf(src, sizeof(src), "%s/%06llu.sst", d->path, (unsigned long long)no);
	snprintf(dst, sizeof(dst), "%s/%06llu.sst", tmp, (unsigned long long)no);
	remove_dir(tmp);
	if (mkdir(tmp, 0700) || link(src, dst))
		return -errno;
	int rc = kvt__rdb_repair_db(d, tmp);
	rocksdb_t *one = NULL;
	if (!rc) {
		one = rocksdb_open(d->opts, tmp, &err);
		rc = kvt__rdb_err(err);
	}
	if (rc) {
		if (one)
			rocksdb_close(one);
		remove_dir(tmp);
		return rc == -ENOMEM ? rc : -EBADMSG;
	}
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_iterator_t *it = ro ? rocksdb_create_iterator(one, ro) : NULL;
	rc = it ? 0 : -ENOMEM;
	if (ro)
		rocksdb_readoptions_set_fill_cache(ro, 0);
	if (!rc) {
		rocksdb_iter_seek_to_first(it);
		struct kvt__rdb_cursor cur = {0};
		rc = kvt__rdb_copy_walk(&it, &cur, to, wo, NULL, NULL);
		kvt__rdb_cursor_fini(&cur);
		rocksdb_iter_destroy(it);
	}
	if (ro)
		rocksdb_readoptions_destroy(ro);
	rocksdb_close(one);
	remove_dir(tmp);
	return rc;
}

/*
 * When RepairDB refuses the tree its tables make: in RocksDB 7.8 (Debian's build runs the
 * tree's consistency checks always) every table goes to level 0, and tables that came from
 * different levels have sequence ranges that nest, which the check calls corrupt. Each table is
 * then read alone (copy_table) into a new database beside the old, oldest table first, so that
 * a later version of a key is written last; the new database takes the old one's place. A key
 * deleted in one table and still put in an older one comes back (a record the tier checks when
 * read, as after a crash). A crash before the swap leaves the old database to repair again;
 * one between its two renames is finished by the next open (kvt__rdb_rebuild_finish).
 * @return : 0 or -errno; *lost: tables that could not be read.
 */
static int rebuild_by_tables(const struct kvt__rdb_db *d, const uint64_t *tables, int n, int *lost)
{
	char fresh[PATH_MAX + 16], old[PATH_MAX + 16], tmp[PATH_MAX + 16], *err = NULL;
	rebuild_paths(d->path, fresh, old, sizeof(fresh));
	snprintf(tmp, sizeof(tmp), "%s.table", d->path);
	remove_dir(fresh);
	rocksdb_t *to = rocksdb_open(d->opts, fresh, &err);
	int rc = kvt__rdb_err(err);
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	if (!rc && (!wo || !fo))
		rc = -ENOMEM;
	if (wo)
		rocksdb_writeoptions_disable_WAL(wo, 1); /* waits out stalls: no_slowdown is off */
	for (int i = 0; !rc && i < n; i++) {
		int c = copy_table(d, tables[i], tmp, to, wo);
		if (c == -EBADMSG) {
			++*lost;
			kvt_log(KVT_LOG_ERROR,
			        "rocksdb: %s: table %06llu.sst cannot be read: left out", d->path,
			        (unsigned long long)tables[i]);
		} else {
			rc = c;
		}
	}
	if (!rc) {
		rocksdb_flush(to, fo, &err); /* waits: the flush options' default */
		rc = kvt__rdb_err(err);
	}
	if (to)
		rocksdb_close(to);
	if (wo)
		rocksdb_writeoptions_destroy(wo);
	if (fo)
		rocksdb_flushoptions_destroy(fo);
	if (!rc && (rename(d->path, old) || rename(fresh, d->path)))
		rc = -errno;
	if (rc)
		remove_dir(fresh);
	remove_dir(old);
	return rc;
}

/* Deletes those of path's n tables whose footer says they carry no checksums, before a repair
 * reads them (RepairDB dies on some). @return : how many. */
static int unlink_unchecked(const char *path, const uint64_t *tables, int n)
{
	int gone = 0;
	for (int i = 0; i < n; i++) {
		char f[PATH_MAX + 32];
		snprintf(f, sizeof(f), "%s/%06llu.sst", path, (unsigned long long)tables[i]);
		if (!footer_unchecked(f) || unlink(f))
			continue;
		gone++;
		kvt_log(KVT_LOG_ERROR,
		        "rocksdb: %s: table %06llu.sst says its blocks carry no checksums (its "
		        "footer is damaged): left out",
		        path, (unsigned long long)tables[i]);
	}
	return gone;
}

int kvt__rdb_repair(struct kvt__rdb_db *d, const char *why)
{
	if (d->blob_files) {
		kvt_log(KVT_LOG_ERROR,
		        "rocksdb: %s: %s; not repaired: RocksDB's repair loses blob files "
		        "(rocksdb.blob_min_bytes is set)",
		        d->path, why);
		return -EBADMSG;
	}
	uint64_t *tables, bytes;
	int n = list_tables(d->path, &tables, &bytes);
	if (!d->repair_max_bytes || (n >= 0 && bytes > d->repair_max_bytes)) {
		kvt_log(KVT_LOG_ERROR,
		        "rocksdb: %s: %s; not repaired: its tables hold %llu MiB, "
		        "rocksdb.repair_max_bytes is %llu MiB",
		        d->path, why, (unsigned long long)(bytes >> 20),
		        (unsigned long long)(d->repair_max_bytes >> 20));
		free(tables);
		return -EBADMSG;
	}
	if (d->db)
		rocksdb_close(d->db);
	d->db = NULL;
	lost_clear(d->path); /* an earlier repair's, if it could not empty it */
	int unchecked = n > 0 ? unlink_unchecked(d->path, tables, n) : 0;
	int rc = kvt__rdb_repair_db(d, d->path);
	int lost = lost_clear(d->path) + unchecked;
	const char *how = "repaired from its tables";
	if (rc == -EBADMSG && n > 0) {
		/* The tree refused. RepairDB has set the old manifests aside (and left a new, empty
		 * one: the directory must not be opened as it is now) and the tables it could not
		 * read (counted in lost); the rest are read table by table. */
		free(tables);
		how = "rebuilt from its tables one by one";
		n = list_tables(d->path, &tables, &bytes);
		rc = n < 0 ? n : rebuild_by_tables(d, tables, n, &lost);
	}
	free(tables);
	if (!rc)
		rc = kvt__rdb_db_reopen(d);
	if (rc) {
		kvt_log(KVT_LOG_ERROR, "rocksdb: %s: %s; RocksDB's repair failed: %s", d->path, why,
		        strerror(-rc));
		return rc == -ENOMEM ? rc : -EBADMSG;
	}
	d->repairs++;
	d->tables_dropped += (uint64_t)lost;
	kvt_log(KVT_LOG_ERROR, "rocksdb: %s: %s; %s (%d unreadable, left out)%s", d->path, why, how,
	        lost,
	        strcmp(how, "repaired from its tables")
	            ? ""
	            : "; every table is in level 0 until compactions move it, and writes may be "
	              "refused until then");
	return lost && d->meta_whole ? meta_incomplete(d) : 0;
}
