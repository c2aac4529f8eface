/*
 * manifest.c -- the manifest's record lengths, read before RocksDB reads them.
 *
 * Why: RocksDB's manifest is a log of 32 KiB blocks of records (a 4-byte crc32c, a 2-byte
 * length, a 1-byte type, the payload), and its reader takes a record whose length runs past
 * the bytes it has read, in the file's last block, for a write cut short at the end of the file
 * (RocksDB 7.8, log_reader.cc, kBadRecordLen at eof: no error in the default recovery mode). So
 * a damaged length there is not an error: the open goes on with the edits before it, an older
 * version of the database, and may delete as obsolete the tables made since (a test lost 318 of
 * 360 records, and under load all of them). Damage anywhere else in the manifest fails the open,
 * and the tier repairs the database from its tables (salvage.c).
 *
 * A writer never puts a record across a block's end: it starts a new block when fewer than 7
 * bytes are left, and splits a longer payload into records of one block each. A length that
 * runs past its block is damage, then, and sends the open straight to the repair. A length
 * that runs past the end of the file but not past its block is the cut tail RocksDB means, and
 * is left to it. Reading the lengths costs a read of the manifest at each open (RocksDB reads it
 * all too); payloads are not checked here: a damaged one fails RocksDB's checksum.
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

/* Whether one block of n bytes (n < LOG_BLOCK: the file's last) holds a record whose length runs
 * past the block's end. */
static bool block_overlong(const uint8_t *b, size_t n)
{
	for (size_t p = 0; p + LOG_HEADER <= n && LOG_BLOCK - p >= LOG_HEADER;) {
		size_t len = b[p + 4] | (size_t)b[p + 5] << 8;
		if (b[p + 6] >= LOG_RECYCLED_LO && b[p + 6] <= LOG_RECYCLED_LO + 3)
			return false; /* not a manifest's: left to RocksDB */
		if (p + LOG_HEADER + len > LOG_BLOCK)
			return true;
		p += LOG_HEADER + len; /* past n: a cut tail, RocksDB's to judge */
	}
	return false;
}

bool kvt__rdb_manifest_overlong(const char *path)
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
	bool overlong = false;
	for (off_t at = 0; b && fd >= 0 && !overlong; at += LOG_BLOCK) {
		n = pread(fd, b, LOG_BLOCK, at);
		if (n <= 0)
			break;
		overlong = block_overlong(b, (size_t)n);
		if (n < LOG_BLOCK)
			break;
	}
	if (fd >= 0)
		close(fd);
	free(b);
	return overlong;
}
