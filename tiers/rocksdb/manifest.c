/*
 * manifest.c -- the manifest's record headers, read before RocksDB reads them.
 *
 * Why: RocksDB's manifest is a log of 32 KiB blocks of records (a 4-byte crc32c, a 2-byte
 * length, a 1-byte type, the payload), and its reader passes over two kinds of damage without
 * an error (RocksDB 7.8, log_reader.cc, in the default recovery mode):
 *
 * - a length that runs past the bytes left in the file's last block: read as a write cut short
 *   at the end of the file (kBadRecordLen at eof), so the edits after it are never read;
 * - a header whose length and type are zero: read as a preallocated region, and the rest of
 *   its block is skipped.
 *
 * Either way the open goes on without the edits it missed: an older version of the database,
 * whose open deletes as obsolete the tables made since, and fails on the ones compactions have
 * removed; the repair that follows finds what is left (a test kept 42, and 0, of 360 records).
 * Damage anywhere else in the manifest fails the open, and the tier repairs the database from
 * its tables (salvage.c).
 *
 * A writer never puts a record across a block's end (it starts a new block when fewer than 7
 * bytes are left, and splits a longer payload into records of a block each), and never writes a
 * zeroed header. So a length that runs past its block, or a zeroed header with anything but
 * zeros after it, is damage, and sends the open straight to the repair. A length past the end
 * of the file but not past its block is the cut tail RocksDB means, and zeros to the end of
 * the file hold no edit; both are left to RocksDB. Payloads are not read: a damaged one fails
 * RocksDB's checksum. The cost: a read of the manifest at each open, which RocksDB reads next.
 */
#include "rocksdb_int.h"

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	LOG_BLOCK = 32768,  /* RocksDB's log::kBlockSize */
	LOG_HEADER = 7,     /* crc32c, length, type */
	LOG_RECYCLED_LO = 5 /* types 5-8 have an 11-byte header: never a manifest's */
};

/* Whether block b of n bytes (fewer: the file's last) has a header RocksDB would read short of
 * the file's end; *zeroed: a zeroed header was met (in this block or an earlier one). */
static bool block_read_short(const uint8_t *b, size_t n, bool *zeroed)
{
	for (size_t p = 0; p + LOG_HEADER <= n && LOG_BLOCK - p >= LOG_HEADER;) {
		size_t len = b[p + 4] | (size_t)b[p + 5] << 8;
		uint8_t type = b[p + 6];
		if (!len && !type) { /* zeros from here on, or damage */
			*zeroed = true;
			p += LOG_HEADER;
			continue;
		}
		if (*zeroed)
			return true;
		if (type >= LOG_RECYCLED_LO && type <= LOG_RECYCLED_LO + 3)
			return false; /* not a manifest's (its header is longer): left to RocksDB */
		if (p + LOG_HEADER + len > LOG_BLOCK)
			return true;
		p += LOG_HEADER + len; /* past n: a cut tail, RocksDB's to judge */
	}
	return false;
}

bool kvt__rdb_manifest_read_short(const char *path)
{
	char f[PATH_MAX + 16], name[256] = {0};
	snprintf(f, sizeof(f), "%s/CURRENT", path);
	int fd = open(f, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, name, sizeof(name) - 1) : -1;
	if (fd >= 0)
		close(fd);
	name[n > 0 ? strcspn(name, "\n") : 0] = 0;
	if (!name[0] || strchr(name, '/'))
		return false; /* no manifest named: RocksDB's open says so */
	snprintf(f, sizeof(f), "%s/%s", path, name);
	uint8_t *b = malloc(LOG_BLOCK);
	fd = open(f, O_RDONLY | O_CLOEXEC);
	bool zeroed = false, short_read = false;
	for (off_t at = 0; b && fd >= 0 && !short_read; at += LOG_BLOCK) {
		n = pread(fd, b, LOG_BLOCK, at);
		if (n <= 0)
			break;
		short_read = block_read_short(b, (size_t)n, &zeroed);
		if (n < LOG_BLOCK)
			break;
	}
	if (fd >= 0)
		close(fd);
	free(b);
	return short_read;
}
