/*
 * test_rocksdb_repair.c -- damage only RocksDB's repair gets past, against a real database in a
 * temporary directory: a manifest damaged or gone (its bytes, a header), CURRENT gone,
 * a level-0 table salvage cannot drop, tables whose sequence ranges nest (rebuilt table by
 * table), a rebuild's swap cut short, RocksDB's repair dying in its child process or run
 * without one, and the same damage met while the tier runs; and a manifest whose damage
 * RocksDB would read as its end, found before the open (manifest.c). Every read is the right
 * bytes or a miss, every record of a table that could be read is found again, and writes go on.
 */
#include "rdb_fixture.h"
#include "core/log.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- damage only RocksDB's repair gets past (salvage.c, kvt__rdb_repair) ---- */

enum repair_case {
	MANIFEST_BYTES,   /* 64 bytes of the manifest inverted */
	MANIFEST_GONE,    /* the manifest CURRENT names removed */
	CURRENT_GONE,     /* CURRENT removed: an open would start anew over the tables */
	MANIFEST_A_TABLE, /* the manifest's bytes and the footer of a table of records */
	NEWER_LEVEL0,     /* the footer of a level-0 table that is not the oldest */
	BLOB_FILES,       /* the manifest's bytes, values in blob files: made anew */
	NESTED_SEQNOS,    /* the manifest's bytes, tables whose sequence ranges nest: rebuilt */
	NESTED_A_TABLE,   /* the same and the footer of a table of records */
	SWAP_CUT,         /* a rebuild's swap cut short: the new database not yet in place */
	TOO_BIG,          /* the manifest's bytes, tables past rocksdb.repair_max_bytes: anew */
	ZEROED_TABLE, /* CURRENT removed and a table zeroed past its first block: RepairDB dies */
	MANIFEST_LENGTH, /* a record's length in the manifest's last block inverted */
	MANIFEST_ZEROED, /* a record's header in the manifest zeroed */
	REPAIR_CASES
};

static const char *const repair_names[] = {"manifest bytes",
                                           "manifest gone",
                                           "CURRENT gone",
                                           "manifest and a table",
                                           "a newer level-0 table",
                                           "manifest bytes, blob files",
                                           "manifest bytes, nested sequence ranges",
                                           "nested sequence ranges and a table",
                                           "a rebuild's swap cut short",
                                           "manifest bytes, past repair_max_bytes",
                                           "CURRENT gone, a table zeroed",
                                           "a manifest record's length",
                                           "a manifest record's header zeroed"};

static int repair_lines;    /* "repaired (rebuilt) from its tables" lines logged */
static int rebuild_lines;   /* of them, rebuilt table by table */
static int died_lines;      /* "RocksDB's repair died" (of a signal, or a sanitizer's exit) */
static int here_lines;      /* "repairing here": no child could be started */
static int unchecked_lines; /* "says its blocks carry no checksums" */
static int uncounted_lines; /* "their count unreadable": the properties block went too */

/* The last lines the tier logged, printed when a repair finds fewer records than it should.
 * (Runs under load once read "manifest bytes: 1 repairs, 0 of 360 records found": the middle
 * of a manifest laid out otherwise fell on a record's length, which RocksDB took for a cut
 * tail, opening an older version; MANIFEST_LENGTH now damages one every time, and
 * MANIFEST_ZEROED a header RocksDB reads as a preallocated region: manifest.c.) */
#define LOG_KEPT 48
static char log_kept[LOG_KEPT][240];
static unsigned log_next;

static void print_log_kept(void)
{
	for (unsigned i = log_next > LOG_KEPT ? log_next - LOG_KEPT : 0; i < log_next; i++)
		print_message("log: %s\n", log_kept[i % LOG_KEPT]);
}

static void repair_log(enum kvt_log_level lvl, const char *msg)
{
	(void)lvl;
	snprintf(log_kept[log_next++ % LOG_KEPT], sizeof(log_kept[0]), "%s", msg);
	repair_lines += strstr(msg, "from its tables") != NULL; /* repaired, or rebuilt */
	rebuild_lines += strstr(msg, "rebuilt from its tables one by one") != NULL;
	died_lines += strstr(msg, "RocksDB's repair died") != NULL;
	here_lines += strstr(msg, "repairing here") != NULL;
	unchecked_lines += strstr(msg, "says its blocks carry no checksums") != NULL;
	uncounted_lines += strstr(msg, "their count unreadable") != NULL;
	if (getenv("KVT_TEST_VERBOSE"))
		fprintf(stderr, "log: %s\n", msg);
}

/* Zeroes file from byte 200 through the first byte of its footer (the last 53 bytes), the
 * checksum type, which is then "none": RocksDB reads the zeroed blocks unchecked, and 7.8's
 * RepairDB dereferences null reading such a table (repair_child.c). */
static void zero_past_first_block(const char *file)
{
	struct stat st;
	assert_int_equal(stat(file, &st), 0);
	assert_true(st.st_size > 200 + 53);
	size_t len = (size_t)st.st_size - 200 - 52;
	char *zeros = calloc(1, len);
	int fd = open(file, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, zeros, len, 200), (ssize_t)len);
	close(fd);
	free(zeros);
}

/* The newest of the database's level-0 tables (of two at least), into out. */
static void newest_level0(const char *db, char *out, size_t len)
{
	struct rdb_raw r;
	rdb_raw_open(&r, db);
	const rocksdb_livefiles_t *lf = rocksdb_livefiles(r.db);
	uint64_t best = 0;
	int l0 = 0;
	for (int i = 0; i < rocksdb_livefiles_count(lf); i++) {
		if (rocksdb_livefiles_level(lf, i) != 0)
			continue;
		l0++;
		uint64_t no = kvt__rdb_table_named(rocksdb_livefiles_name(lf, i));
		if (no > best) {
			best = no;
			snprintf(out, len, "%s%s", db, rocksdb_livefiles_name(lf, i));
		}
	}
	rocksdb_livefiles_destroy(lf);
	rdb_raw_close(&r);
	assert_true(l0 >= 2);
}

enum { N = 300, MORE = 60, PAYLOAD = 20000 };

/* A database of N + MORE records in tables of about 12, compacted, and two level-0 tables of
 * MORE / 2 records on top; closed. The compaction moves everything to the last level, which
 * zeroes sequence numbers, unless a snapshot older than them keeps them (nested: written out
 * of key order, the compacted tables' sequence ranges then nest, which RocksDB's repair
 * refuses in level 0). */
static void repair_fill(const struct kvt_tier_env *env, struct kvt__rdb_conf *c, uint8_t *buf,
                        bool nested)
{
	struct kvt_tier *t = NULL;
	c->write_buffer_bytes = 1 << 20;  /* a level-0 table per MiB */
	c->target_file_bytes = 256 << 10; /* and, compacted, tables of about 12 records */
	assert_int_equal(kvt__rdb_open_conf(env, c, &t), 0);
	/* a snapshot older than every record: a compaction to the last level keeps them */
	const rocksdb_snapshot_t *snap = nested ? rocksdb_create_snapshot(t->db.db) : NULL;
	for (uint64_t i = 0; i < N; i++) /* nested: out of key order, so every table's range
	                                  * of sequence numbers spans most of the writes */
		assert_int_equal(rdb_write_waiting(t, buf, nested ? i * 7 % N : i, PAYLOAD), 0);
	assert_int_equal(kvt__rdb_flush(t, true), 0);
	assert_int_equal(kvt__rdb_compact(t), 0);
	if (snap)
		rocksdb_release_snapshot(t->db.db, snap);
	for (uint64_t i = N; i < N + MORE; i++) {
		assert_int_equal(rdb_write_waiting(t, buf, i, PAYLOAD), 0);
		if (i == N + MORE / 2 - 1)
			assert_int_equal(kvt__rdb_flush(t, true), 0);
	}
	kvt_tier_rocksdb.close(t);
}

/*
 * RELIABILITY B7, RocksDB's own books: a manifest damaged or gone, CURRENT gone, a level-0
 * table salvage cannot delete. The tier used to destroy the database for each (or, CURRENT
 * gone, RocksDB started a new one over the tables and deleted them); RocksDB's repair now
 * rebuilds it from its tables. Every record of a table that could be read is found again, byte
 * for byte; a damaged table's records are misses, never wrong bytes; the tier takes writes,
 * and the next open is an ordinary one. With blob files the database is made anew (RocksDB's
 * repair would lose them), as before.
 */
static void test_rocksdb_repaired(void **state)
{
	const char *blob[] = {"rocksdb.blob_min_bytes=16384", NULL};
	uint8_t *buf = rdb_buf(KVT_CHUNK_HDR_BYTES + PAYLOAD),
	        *exp = rdb_buf(KVT_CHUNK_HDR_BYTES + PAYLOAD);
	kvt_log_set(repair_log, KVT_LOG_INFO);
	for (int k = 0; k < REPAIR_CASES; k++) {
		repair_lines = rebuild_lines = unchecked_lines = 0;
		struct kvt_options o;
		struct rdb_drops d = {0};
		struct kvt__rdb_conf c;
		struct kvt_tier *t = NULL;
		char db[512], f[1200];
		rdb_opts(&o, dir, 1ull << 30, k == BLOB_FILES ? blob : NULL);
		snprintf(db, sizeof(db), "%s/db", dir);
		struct kvt_tier_env env = rdb_env(&o, &d);
		assert_int_equal(kvt__rdb_conf_from_opts(&c, &o, NULL), 0);
		bool nested = k == NESTED_SEQNOS || k == NESTED_A_TABLE;
		repair_fill(&env, &c, buf, nested);

		if (k == MANIFEST_A_TABLE || k == NESTED_A_TABLE) { /* while the manifest reads */
			rdb_records_table(db, 5, f, sizeof(f));
			assert_true(kvt_test_invert64(f, false));
		}
		if (k == MANIFEST_BYTES || k == MANIFEST_A_TABLE || k == BLOB_FILES ||
		    k == MANIFEST_GONE || nested || k == TOO_BIG) {
			assert_true(kvt_test_rdb_manifest(db, f, sizeof(f)));
			if (k == MANIFEST_GONE)
				assert_int_equal(unlink(f), 0);
			else
				assert_true(kvt_test_invert64(f, true));
		}
		if (k == MANIFEST_LENGTH || k == MANIFEST_ZEROED) {
			assert_true(kvt_test_rdb_manifest(db, f, sizeof(f)));
			assert_true(kvt_test_rdb_manifest_header(f, k == MANIFEST_ZEROED));
		}
		if (k == ZEROED_TABLE) {
			rdb_records_table(db, 5, f, sizeof(f));
			zero_past_first_block(f);
		}
		if (k == CURRENT_GONE || k == ZEROED_TABLE) {
			snprintf(f, sizeof(f), "%s/CURRENT", db);
			assert_int_equal(unlink(f), 0);
		}
		if (k == NEWER_LEVEL0) {
			newest_level0(db, f, sizeof(f));
			assert_true(kvt_test_invert64(f, false));
		}
		if (k == SWAP_CUT) { /* the old one set aside, the new one not yet renamed */
			char fresh[600], old[600];
			snprintf(fresh, sizeof(fresh), "%s.rebuild", db);
			snprintf(old, sizeof(old), "%s.old", db);
			assert_int_equal(rename(db, fresh), 0);
			assert_int_equal(mkdir(old, 0700), 0);
			snprintf(f, sizeof(f), "%s.index",
			         db); /* a rebuilt one is another database */
			assert_int_equal(unlink(f), 0);
			snprintf(f, sizeof(f), "%s/000009.sst", old);
			int fd = open(f, O_CREAT | O_WRONLY, 0600);
			assert_true(fd >= 0);
			close(fd);
		}

		if (k == TOO_BIG)
			c.repair_max_bytes = 1 << 20; /* the tables hold about 7 MiB */
		assert_int_equal(kvt__rdb_open_conf(&env, &c, &t), 0);
		struct kvt_tier_stats s = rdb_stats(t);
		int right = 0, missing = 0;
		for (uint64_t i = 0; i < N + MORE; i++) {
			ssize_t n = rdb_check(t, i, PAYLOAD, buf, exp); /* never a wrong byte */
			assert_true(n > 0 || n == -ENOENT);
			right += n > 0, missing += n == -ENOENT;
		}
		print_message("%s: %llu repairs, %d of %d records found, %llu tables lost, %llu "
		              "values read\n",
		              repair_names[k], (unsigned long long)s.repairs, right, N + MORE,
		              (unsigned long long)t->db.tables_dropped,
		              (unsigned long long)s.open_values_read);
		assert_int_equal(s.chunks, right);
		assert_int_equal(s.opened_from_index, 0);       /* the saved index is not trusted */
		assert_int_equal(repair_lines, (int)s.repairs); /* and the log says so */
		assert_int_equal(rebuild_lines, nested);
		assert_int_equal(unchecked_lines, k == ZEROED_TABLE); /* left out before RepairDB */
		if (k == SWAP_CUT) { /* finished: an ordinary open of the new database */
			assert_int_equal(s.repairs, 0);
			assert_int_equal(right, N + MORE);
			snprintf(f, sizeof(f), "%s.old", db);
			assert_int_not_equal(access(f, F_OK), 0);
			snprintf(f, sizeof(f), "%s.rebuild", db);
			assert_int_not_equal(access(f, F_OK), 0);
		} else if (k == BLOB_FILES || k == TOO_BIG) {
			assert_int_equal(s.repairs, 0);
			assert_int_equal(right, 0);
		} else {
			assert_int_equal(s.repairs, 1);
			bool lost = k == MANIFEST_A_TABLE || k == NEWER_LEVEL0 ||
			            k == NESTED_A_TABLE || k == ZEROED_TABLE;
			if (lost) {
				assert_true(missing > 0 && right >= N + MORE - (N + MORE) / 4);
				assert_true(t->db.tables_dropped >= 1);
			} else {
				if (right != N + MORE)
					print_log_kept();
				assert_int_equal(right, N + MORE);
			}
			/* a table's loss may have taken metadata: every value is read then */
			assert_int_equal(s.open_values_read, lost ? (uint64_t)right : 0);
		}
		for (uint64_t i = N + MORE; i < N + MORE + 20; i++) /* writes go on */
			assert_int_equal(rdb_write_waiting(t, buf, i, PAYLOAD), 0);
		assert_int_equal(kvt__rdb_flush(t, true), 0);
		kvt_tier_rocksdb.close(t);

		/* the next open is an ordinary one, from the index the close saved */
		assert_int_equal(kvt__rdb_open_conf(&env, &c, &t), 0);
		s = rdb_stats(t);
		assert_int_equal(s.repairs, 0);
		assert_int_equal(s.opened_from_index, 1);
		assert_int_equal(s.chunks, (uint64_t)right + 20);
		for (uint64_t i = 0; i < N + MORE + 20; i++) {
			ssize_t n = rdb_check(t, i, PAYLOAD, buf, exp);
			assert_true(n > 0 || (i < N + MORE && n == -ENOENT));
		}
		char lost[600];
		snprintf(lost, sizeof(lost), "%s/lost", db);
		assert_int_not_equal(access(lost, F_OK), 0); /* what the repair set aside is gone */
		kvt_tier_rocksdb.close(t);
		kvt_test_rmtree(dir);
		kvt_test_tmpdir(dir, sizeof(dir));
	}
	kvt_log_set(NULL, KVT_LOG_INFO);
	free(buf);
	free(exp);
}

/* A database of repair_fill's (not nested), closed, and what a test needs to open and check it
 * again. */
struct filled {
	struct kvt_options o;
	struct kvt__rdb_conf c;
	struct kvt_tier_env env;
	char db[512];
	uint8_t *buf, *exp;
};

static void filled_make(struct filled *f, struct rdb_drops *d)
{
	rdb_opts(&f->o, dir, 1ull << 30, NULL);
	snprintf(f->db, sizeof(f->db), "%s/db", dir);
	f->env = rdb_env(&f->o, d);
	assert_int_equal(kvt__rdb_conf_from_opts(&f->c, &f->o, NULL), 0);
	f->buf = rdb_buf(KVT_CHUNK_HDR_BYTES + PAYLOAD);
	f->exp = rdb_buf(KVT_CHUNK_HDR_BYTES + PAYLOAD);
	repair_fill(&f->env, &f->c, f->buf, false);
}

/*
 * A table whose footer says its blocks carry no checksums (zero_past_first_block) met by an
 * ordinary open: RocksDB opens it and would read its zeroed blocks unchecked (before the check,
 * each of its 14 records read as -EBADMSG, the tier's own check, then a compaction failed on
 * it, the next write answered -EIO and the tier repaired); the tier drops it at the open
 * instead (salvage.c footer_unchecked). Every other record is right, and compactions, writes
 * and the next open go on with no repair.
 */
static void test_rocksdb_zeroed_table(void **state)
{
	struct rdb_drops d = {0};
	struct filled bed;
	struct kvt_tier *t = NULL;
	char f[1200];
	filled_make(&bed, &d);
	uint8_t *buf = bed.buf, *exp = bed.exp;
	rdb_records_table(bed.db, 5, f, sizeof(f));
	zero_past_first_block(f);
	unchecked_lines = uncounted_lines = 0;
	kvt_log_set(repair_log, KVT_LOG_INFO);
	assert_int_equal(kvt__rdb_open_conf(&bed.env, &bed.c, &t), 0);
	assert_int_equal(t->db.tables_dropped, 1);
	assert_int_equal(unchecked_lines, 1);
	assert_int_equal(uncounted_lines, 1); /* not "with its 0 entries" */
	int right = 0;
	for (uint64_t i = 0; i < N + MORE; i++) {
		ssize_t n = rdb_check(t, i, PAYLOAD, buf, exp); /* never a wrong byte */
		assert_true(n > 0 || n == -ENOENT);
		right += n > 0;
	}
	print_message("a table zeroed, its footer's checksum type with it: dropped at the open, "
	              "%d of %d records right\n",
	              right, N + MORE);
	assert_true(right < N + MORE && right >= N + MORE - (N + MORE) / 10);
	assert_int_equal(rdb_stats(t).chunks, (uint64_t)right);
	assert_int_equal(kvt__rdb_compact(t), 0);
	for (uint64_t i = N + MORE; i < N + MORE + 20; i++) /* writes go on */
		assert_int_equal(rdb_write_waiting(t, buf, i, PAYLOAD), 0);
	assert_int_equal(kvt__rdb_flush(t, true), 0);
	assert_int_equal(kvt__rdb_compact(t), 0);
	assert_int_equal(rdb_stats(t).repairs, 0);
	kvt_tier_rocksdb.close(t);
	assert_int_equal(kvt__rdb_open_conf(&bed.env, &bed.c, &t), 0); /* from the index */
	assert_int_equal(rdb_stats(t).opened_from_index, 1);
	int again = 0;
	for (uint64_t i = 0; i < N + MORE + 20; i++) {
		ssize_t n = rdb_check(t, i, PAYLOAD, buf, exp);
		assert_true(n > 0 || n == -ENOENT);
		again += n > 0;
	}
	assert_int_equal(again, right + 20);
	kvt_tier_rocksdb.close(t);
	kvt_log_set(NULL, KVT_LOG_INFO);
	free(buf);
	free(exp);
}

/*
 * RocksDB 7.8's RepairDB dies of SIGSEGV on that table (CURRENT removed: the repair reads every
 * table). The tier now leaves such tables out before a repair, but RepairDB runs in a child
 * all the same (repair_child.c), for the damage no check foresees: here, called on the
 * directory as it is, the child dies, the repair answers -EBADMSG and says so, and this
 * process lives (before repair_child.c, the test binary died with it).
 */
static void test_rocksdb_repair_dies(void **state)
{
	struct rdb_drops d = {0};
	struct filled bed;
	char f[1200];
	filled_make(&bed, &d);
	rdb_records_table(bed.db, 5, f, sizeof(f));
	zero_past_first_block(f);
	snprintf(f, sizeof(f), "%s/CURRENT", bed.db);
	assert_int_equal(unlink(f), 0);
	struct kvt__rdb_db db = {.compression = bed.c.compression,
	                         .write_buffer_bytes = bed.c.write_buffer_bytes};
	died_lines = 0;
	kvt_log_set(repair_log, KVT_LOG_INFO);
	/* The child dies of the SIGSEGV itself: under ASan its report of the crash this test makes
	 * on purpose would read as a failure in CI's log. (The child inherits the environment;
	 * this process read ASAN_OPTIONS at its start, so the change is the child's alone.) */
	const char *asan = getenv("ASAN_OPTIONS");
	char *was = asan ? strdup(asan) : NULL, opts[1024];
	snprintf(opts, sizeof(opts), "%s%shandle_segv=0", was ? was : "", was && *was ? ":" : "");
	assert_int_equal(setenv("ASAN_OPTIONS", opts, 1), 0);
	int rc = kvt__rdb_repair_db(&db, bed.db);
	if (was)
		setenv("ASAN_OPTIONS", was, 1);
	else
		unsetenv("ASAN_OPTIONS");
	free(was);
	assert_int_equal(rc, -EBADMSG);
	assert_int_equal(died_lines, 1);
	kvt_log_set(NULL, KVT_LOG_INFO);
	free(bed.buf);
	free(bed.exp);
}

/* Makes every exec of this process (and of what it spawns) fail with ENOENT from now on, as an
 * exec of /proc/self/exe does where no /proc is mounted: a seccomp filter, which needs no
 * privilege. @return : 0 or -errno. */
static int refuse_exec(void)
{
	struct sock_filter f[] = {
#if defined(__x86_64__) || defined(__aarch64__) /* another ABI's calls number differently */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
#if defined(__x86_64__)
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
#else
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_AARCH64, 1, 0),
#endif
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
#endif
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execve, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execveat, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOENT),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return -errno;
	char *argv[] = {"true", NULL};
	pid_t pid;
	return posix_spawn(&pid, "/bin/true", NULL, NULL, argv, NULL) == ENOENT ? 0 : -EPERM;
}

/* main() of the process test_rocksdb_repair_without_exec starts: refuses itself every exec,
 * then opens the database in path, whose CURRENT is gone. @return : 0 when it was repaired in
 * this process (no child could be started) with every record found, 1 otherwise. */
static int without_exec(const char *path)
{
	int rc = refuse_exec();
	if (rc) {
		fprintf(stderr, "cannot refuse exec: %s\n", strerror(-rc));
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	struct rdb_drops d = {0};
	struct kvt_options o;
	struct kvt__rdb_conf c;
	struct kvt_tier *t = NULL;
	rdb_opts(&o, dir, 1ull << 30, NULL);
	struct kvt_tier_env env = rdb_env(&o, &d);
	kvt_log_set(repair_log, KVT_LOG_INFO);
	if (kvt__rdb_conf_from_opts(&c, &o, NULL) || kvt__rdb_open_conf(&env, &c, &t))
		return 1;
	uint8_t *buf = rdb_buf(KVT_CHUNK_HDR_BYTES + PAYLOAD),
	        *exp = rdb_buf(KVT_CHUNK_HDR_BYTES + PAYLOAD);
	int right = 0;
	for (uint64_t i = 0; i < N + MORE; i++)
		right += rdb_check(t, i, PAYLOAD, buf, exp) > 0;
	struct kvt_tier_stats s = rdb_stats(t);
	fprintf(stderr, "exec refused: %llu repairs (%d here), %d of %d records found\n",
	        (unsigned long long)s.repairs, here_lines, right, N + MORE);
	kvt_tier_rocksdb.close(t);
	kvt_log_set(NULL, KVT_LOG_INFO);
	free(buf);
	free(exp);
	return s.repairs == 1 && here_lines == 1 && right == N + MORE ? 0 : 1;
}

/*
 * Where the repair's child cannot be started (no /proc mounted, so no /proc/self/exe to run;
 * here every exec refused the same way, ENOENT), RocksDB's repair runs in the daemon's own
 * process, as it did before repair_child.c, and says so: CURRENT removed, every record found
 * again. Run in a process of its own, which keeps the refusal.
 */
static void test_rocksdb_repair_without_exec(void **state)
{
	struct rdb_drops d = {0};
	struct filled bed;
	char f[600], env[300];
	filled_make(&bed, &d);
	snprintf(f, sizeof(f), "%s/CURRENT", bed.db);
	assert_int_equal(unlink(f), 0);
	snprintf(env, sizeof(env), "KVT_TEST_WITHOUT_EXEC=%s", dir);
	assert_int_equal(kvt_test_run_self("test_rocksdb_repair", env), 0);
	free(bed.buf);
	free(bed.exp);
}

/*
 * The manifest's headers are read before RocksDB's open (manifest.c), and only a length that
 * runs past its 32 KiB block, or a zeroed header before other records, sends the open to a
 * repair (test_rocksdb_repaired damages each). A manifest of several blocks, records split
 * across them, opens as it is; so does one whose last record was cut short (a crash while it
 * was written), which RocksDB reads up to the cut, and one with zeros after its last record.
 */
static void test_rocksdb_manifest_lengths(void **state)
{
	(void)state;
	enum { RECORDS = 400, SMALL = 512 };
	uint8_t *buf = rdb_buf(KVT_CHUNK_HDR_BYTES + SMALL),
	        *exp = rdb_buf(KVT_CHUNK_HDR_BYTES + SMALL);
	struct kvt_options o;
	struct rdb_drops d = {0};
	struct kvt__rdb_conf c;
	struct kvt_tier *t = NULL;
	char db[512], f[1200];
	struct stat st;
	rdb_opts(&o, dir, 1ull << 30, NULL);
	snprintf(db, sizeof(db), "%s/db", dir);
	struct kvt_tier_env env = rdb_env(&o, &d);
	assert_int_equal(kvt__rdb_conf_from_opts(&c, &o, NULL), 0);
	assert_int_equal(kvt__rdb_open_conf(&env, &c, &t), 0);
	for (uint64_t i = 0; i < RECORDS; i++) { /* a table, and an edit, per record */
		assert_int_equal(rdb_write_waiting(t, buf, i, SMALL), 0);
		assert_int_equal(kvt__rdb_flush(t, true), 0);
	}
	assert_true(kvt_test_rdb_manifest(db, f, sizeof(f)));
	assert_int_equal(stat(f, &st), 0);
	assert_true(st.st_size > 2 * 32768); /* three blocks at least */
	assert_false(kvt__rdb_manifest_read_short(db));
	kvt_tier_rocksdb.close(t);

	/* an ordinary open; then, compacted (no compaction's edit left to come), a table more */
	assert_int_equal(kvt__rdb_open_conf(&env, &c, &t), 0);
	assert_int_equal(rdb_stats(t).repairs, 0);
	for (uint64_t i = 0; i < RECORDS; i++)
		assert_true(rdb_check(t, i, SMALL, buf, exp) > 0);
	assert_int_equal(kvt__rdb_compact(t), 0);
	assert_int_equal(rdb_write_waiting(t, buf, RECORDS, SMALL), 0);
	assert_int_equal(kvt__rdb_flush(t, true), 0);
	kvt_tier_rocksdb.close(t);

	/* the manifest's last edit cut short, as by a crash while it was written; then zeros after
	 * its last record (a region allocated and not written): each an ordinary open, no repair,
	 * every table before it there */
	for (int zeros = 0; zeros < 2; zeros++) {
		assert_true(kvt_test_rdb_manifest(db, f, sizeof(f)));
		assert_int_equal(stat(f, &st), 0);
		assert_int_equal(truncate(f, zeros ? st.st_size + 4096 : st.st_size - 3), 0);
		assert_false(kvt__rdb_manifest_read_short(db));
		assert_int_equal(kvt__rdb_open_conf(&env, &c, &t), 0);
		assert_int_equal(rdb_stats(t).repairs, 0);
		for (uint64_t i = 0; i < RECORDS; i++)
			assert_true(rdb_check(t, i, SMALL, buf, exp) > 0);
		ssize_t n = rdb_check(t, RECORDS, SMALL, buf, exp); /* the close may edit after */
		assert_true(n > 0 || n == -ENOENT);
		kvt_tier_rocksdb.close(t);
	}
	free(buf);
	free(exp);
}

/*
 * The same, met while the tier runs: a bit of a record flipped in the newest level-0 table. The
 * open does not read it; a compaction does and leaves a background error, and the write that
 * meets the error cannot drop the table (salvage.c: level 0, not the oldest). The database is
 * repaired instead of destroyed: that table's records are lost and reported dropped, every
 * other record is kept, and writes go on.
 */
static void test_rocksdb_repaired_running(void **state)
{
	struct rdb_drops d = {.seen = calloc(N + MORE, 1), .max_id = N + MORE};
	struct filled bed;
	struct kvt_tier *t = NULL;
	char f[1200];
	filled_make(&bed, &d);
	uint8_t *buf = bed.buf, *exp = bed.exp;
	newest_level0(bed.db, f, sizeof(f));
	struct stat st;
	assert_int_equal(stat(f, &st), 0);
	rdb_flip(f, st.st_size / 3);

	kvt_log_set(repair_log, KVT_LOG_INFO);
	repair_lines = 0;
	assert_int_equal(kvt__rdb_open_conf(&bed.env, &bed.c, &t), 0);
	assert_int_equal(rdb_stats(t).repairs, 0);
	assert_int_equal(rdb_stats(t).chunks, N + MORE);
	assert_int_equal(kvt__rdb_compact(t), 0);
	int rc, tries = 0;
	while ((rc = rdb_write_waiting(t, buf, N + MORE, PAYLOAD)) && tries < 3)
		tries++;
	assert_int_equal(rc, 0);
	struct kvt_tier_stats s = rdb_stats(t);
	int right = 0, missing = 0;
	for (uint64_t i = 0; i < N + MORE; i++) {
		ssize_t n = rdb_check(t, i, PAYLOAD, buf, exp); /* never a wrong byte */
		assert_true(n > 0 || n == -ENOENT || n == -EBADMSG);
		right += n > 0, missing += n <= 0;
		if (n == -ENOENT)
			assert_true(d.seen[i]); /* the daemon is told */
	}
	print_message("a damaged block in a newer level-0 table, met by a compaction: %d failed "
	              "writes, %llu repairs, %d of %d records kept, %llu reported dropped\n",
	              tries, (unsigned long long)s.repairs, right, N + MORE,
	              (unsigned long long)d.n);
	assert_int_equal(s.repairs, 1);
	assert_int_equal(repair_lines, 1);
	assert_true(missing > 0 && right >= N + MORE - (N + MORE) / 4);
	for (uint64_t i = N + MORE + 1; i < N + MORE + 20; i++) /* writes and compactions go on */
		assert_int_equal(rdb_write_waiting(t, buf, i, PAYLOAD), 0);
	assert_int_equal(kvt__rdb_flush(t, true), 0);
	assert_int_equal(kvt__rdb_compact(t), 0);
	for (uint64_t i = N + MORE; i < N + MORE + 20; i++)
		assert_true(rdb_check(t, i, PAYLOAD, buf, exp) > 0);
	assert_int_equal(rdb_stats(t).repairs, 1);
	kvt_tier_rocksdb.close(t);
	kvt_log_set(NULL, KVT_LOG_INFO);
	free(d.seen);
	free(buf);
	free(exp);
}

int main(void)
{
	const char *without = getenv("KVT_TEST_WITHOUT_EXEC");
	if (without)
		return without_exec(without);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_rocksdb_repaired, rdb_setup, rdb_teardown),
	    cmocka_unit_test_setup_teardown(test_rocksdb_manifest_lengths, rdb_setup, rdb_teardown),
	    cmocka_unit_test_setup_teardown(test_rocksdb_repaired_running, rdb_setup, rdb_teardown),
	    cmocka_unit_test_setup_teardown(test_rocksdb_zeroed_table, rdb_setup, rdb_teardown),
	    cmocka_unit_test_setup_teardown(test_rocksdb_repair_dies, rdb_setup, rdb_teardown),
	    cmocka_unit_test_setup_teardown(test_rocksdb_repair_without_exec, rdb_setup,
	                                    rdb_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
