/*
 * saved.c -- the rocksdb tier's index, saved at a clean close so that the next open need not
 * scan the database (RELIABILITY.md D1, a warm roll).
 *
 * Why: without it the open rebuilds the tier's index (identity, length, age per record) by
 * walking the records' metadata (tier.c, "Recovery"), which costs about as much (`kvtier bench
 * rocksdb --recover`), or, for a database from before the metadata, by reading every value
 * (~700-2,200 s per TB). iterate() walks the metadata either way: the index holds no headers. At a
 * clean close the tier knows its index, so it writes it out, 48 bytes a record, and the next open
 * reads that instead.
 *
 * When it is trusted: the file names the database's identity (RocksDB's IDENTITY file) and its
 * latest sequence number at the close, whose flush put the memtable on disk (a flush that
 * failed leaves the next open a lower number: the file is refused). The open compares both with
 * the database it opened, and both checksums must hold. Any write to the database since -- by
 * this tier after an open that read the file, or by anything else -- moves the sequence number
 * on, so a stale file is refused; the open removes the file either way. A crash leaves no file
 * (it is written after the close only), and the open walks the metadata. Anything odd makes the
 * open walk, with a warning.
 *
 * What it holds: the live records, and the deletes still owed (graves the close gave up on, with
 * length 0): the next open leaves those records out and tries their deletes again, with its
 * first write or delete, so that a later crash does not bring them back. A close that has no
 * database (a reopen after a disk full failed, and failed again at the close) writes the
 * deletes alone, marked good for any sequence number; the next open scans, then forgets the
 * records those deletes name and owes the deletes again (tier.c).
 * Damage done while down is found on a record's read (RocksDB's block checksum and the tier's
 * own checks: -EBADMSG, dropped), not at the open.
 *
 * Layout (little-endian): a 4 KiB header (magic, version, entry size, sequence number, records,
 * body checksum, the identity as text; the header's checksum in its last 8 bytes), then per
 * record {key[36] (kvt__rdb_key_encode), bytes u64, age in seconds u32}, then per grave {key[36],
 * 0, 0}. XXH3-64.
 */
#include "rocksdb_int.h"
#include "core/file.h"
#include "core/log.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define SV_MAGIC   0x58494244524b564bull /* "KVKRDBIX" */
#define SV_VERSION 2u                    /* 2: graves (length 0) after the records */
#define SV_HDR     4096u
#define SV_ENTRY   48u
#define SV_ID_OFF  64u
#define SV_ID_MAX  256u
#define SV_SUM_OFF (SV_HDR - 8)
#define SV_ANY_SEQ UINT64_MAX /* graves only: good for whatever the database holds */

/* The database's identity (RocksDB's IDENTITY file). @return : 0, or -errno. */
static int identity(const char *db_path, char out[SV_ID_MAX])
{
	char p[PATH_MAX + 16];
	snprintf(p, sizeof(p), "%s/IDENTITY", db_path);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, out, SV_ID_MAX - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	out[n] = '\0';
	return 0;
}

static int path_of(const char *db_path, char *out, size_t len)
{
	int n = snprintf(out, len, "%s.index", db_path);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int kvt__rdb_saved_write(const char *db_path, uint64_t seq, const struct kvt__rdb_index *ix,
                         uint32_t now_s, const struct kvt_tier_id *graves, uint32_t n_graves)
{
	char path[PATH_MAX + 16], tmp[PATH_MAX + 32], id[SV_ID_MAX];
	int rc = path_of(db_path, path, sizeof(path));
	if (rc)
		return rc;
	unlink(path); /* whatever happens below, an older one is of no use */
	if ((rc = identity(db_path, id)))
		return rc;
	uint64_t n = (uint64_t)(ix ? ix->n_live : 0) + n_graves;
	size_t body = (size_t)n * SV_ENTRY;
	uint8_t *buf = calloc(1, SV_HDR + body);
	if (!buf)
		return -ENOMEM;
	uint8_t *e = buf + SV_HDR;
	for (uint32_t s = 0; ix && s < ix->n_slots; s++) {
		const struct kvt__rdb_slot *sl = &ix->slots[s];
		if (!sl->live)
			continue;
		kvt__rdb_key_encode(e, &sl->id);
		kvt_store_le64(e + KVT__RDB_KEY_BYTES, sl->bytes);
		kvt_store_le32(e + KVT__RDB_KEY_BYTES + 8, now_s - sl->born_s);
		e += SV_ENTRY;
	}
	for (uint32_t i = 0; i < n_graves; i++, e += SV_ENTRY) /* length 0: a delete still owed */
		kvt__rdb_key_encode(e, &graves[i]);
	kvt_store_le64(buf, SV_MAGIC);
	kvt_store_le32(buf + 8, SV_VERSION);
	kvt_store_le32(buf + 12, SV_ENTRY);
	kvt_store_le64(buf + 16, ix ? seq : SV_ANY_SEQ);
	kvt_store_le64(buf + 24, n);
	kvt_store_le64(buf + 32, XXH3_64bits(buf + SV_HDR, body));
	memcpy(buf + SV_ID_OFF, id, strlen(id));
	kvt_store_le64(buf + SV_SUM_OFF, XXH3_64bits(buf, SV_SUM_OFF));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	rc = fd < 0 ? -errno : kvt_file_write_all(fd, buf, SV_HDR + body);
	if (!rc && fsync(fd))
		rc = -errno;
	if (fd >= 0 && close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	free(buf);
	if (rc) {
		unlink(tmp);
		kvt_log(KVT_LOG_WARN, "rocksdb: index %s not written (%s): the next open scans",
		        path, strerror(-rc));
	}
	return rc;
}

static const char *check(const struct kvt__rdb_db *db, const uint8_t *m, uint64_t size)
{
	char id[SV_ID_MAX];
	if (size < SV_HDR)
		return "shorter than its header";
	if (kvt_load_le64(m) != SV_MAGIC ||
	    kvt_load_le64(m + SV_SUM_OFF) != XXH3_64bits(m, SV_SUM_OFF))
		return "its header is damaged";
	if (kvt_load_le32(m + 8) != SV_VERSION || kvt_load_le32(m + 12) != SV_ENTRY)
		return "another version";
	uint64_t n = kvt_load_le64(m + 24);
	if (n > (size - SV_HDR) / SV_ENTRY || size - SV_HDR != n * SV_ENTRY)
		return "its size does not match its header";
	if (identity(db->path, id) || strncmp(id, (const char *)m + SV_ID_OFF, SV_ID_MAX))
		return "written for another database";
	bool graves_only = kvt_load_le64(m + 16) == SV_ANY_SEQ;
	if (!graves_only && kvt_load_le64(m + 16) != rocksdb_get_latest_sequence_number(db->db))
		return "the database was written to since";
	if (XXH3_64bits(m + SV_HDR, size - SV_HDR) != kvt_load_le64(m + 32))
		return "its body is damaged";
	for (uint64_t i = 0; i < n; i++) {
		uint64_t bytes = kvt_load_le64(m + SV_HDR + i * SV_ENTRY + KVT__RDB_KEY_BYTES);
		if ((bytes && bytes < KVT_CHUNK_HDR_BYTES) || bytes > 1ull << 40)
			return "a record's length is out of range";
		if (bytes && graves_only)
			return "a record in a file of deletes";
	}
	return NULL;
}

int kvt__rdb_saved_read(const struct kvt__rdb_db *db, uint64_t max_records, kvt__rdb_saved_fn each,
                        void *arg)
{
	char path[PATH_MAX + 16];
	if (path_of(db->path, path, sizeof(path)) || !db->db)
		return 0;
	const uint8_t *m = NULL;
	size_t size = 0;
	uint64_t max = KVT_MIN(max_records, (uint64_t)(SIZE_MAX - SV_HDR) / SV_ENTRY);
	int rc = kvt_file_map(path, SV_HDR + max * SV_ENTRY, &m, &size);
	if (rc == -ENOENT)
		return 0;
	const char *why = rc ? strerror(-rc) : check(db, m, size);
	rc = 0;
	if (!why) {
		uint64_t n = kvt_load_le64(m + 24);
		for (uint64_t i = 0; !rc && i < n; i++) {
			const uint8_t *e = m + SV_HDR + i * SV_ENTRY;
			struct kvt_tier_id id;
			kvt__rdb_key_decode(e, KVT__RDB_KEY_BYTES, &id);
			rc = each(arg, &id, kvt_load_le64(e + KVT__RDB_KEY_BYTES),
			          kvt_load_le32(e + KVT__RDB_KEY_BYTES + 8));
		}
		if (!rc && kvt_load_le64(m + 16) == SV_ANY_SEQ) {
			kvt_log(KVT_LOG_INFO,
			        "rocksdb: %s: %llu deletes the last close owed and could not write "
			        "(it had no database): owed again, after a scan",
			        db->path, (unsigned long long)n);
		} else if (!rc) {
			rc = 1;
			kvt_log(KVT_LOG_INFO,
			        "rocksdb: %s: %llu records from the index saved at the last clean "
			        "close (no scan)",
			        db->path, (unsigned long long)n);
		}
	} else {
		kvt_log(KVT_LOG_WARN, "rocksdb: index %s not used (%s): scanning", path, why);
	}
	kvt_file_unmap(m, size);
	unlink(path); /* good for this open only */
	return rc;
}

void kvt__rdb_saved_drop(const struct kvt__rdb_db *db)
{
	char path[PATH_MAX + 16];
	if (!path_of(db->path, path, sizeof(path)))
		unlink(path);
}
