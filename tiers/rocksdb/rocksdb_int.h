/*
 * rocksdb_int.h -- folder-private: the rocksdb tier's state, its in-memory index and its DB handle.
 *
 * Layering inside the folder: index.c (identity -> dense slot, no RocksDB), db.c (options, open,
 * close, reopen, error mapping: every RocksDB object lives there), record.c (a record and its
 * metadata as values), tier.c (the ops table: write, read, eviction through the policy seam, TTL,
 * disk-full state), walk.c (the walks at open and after damage, and what mends it).
 *
 * Concurrency: one thread (the daemon's tier worker) drives a tier; only the counters in
 * struct kvt_tier's st (read with relaxed atomics by stats()) are shared with other threads.
 */
#ifndef KVT_TIERS_ROCKSDB_INT_H
#define KVT_TIERS_ROCKSDB_INT_H
#include "core/util.h"
#include "tiers/tier.h"
#include "policy/policy.h"

#include <limits.h>
#include <rocksdb/c.h>

#define KVT__RDB_KEY_BYTES 36u /* tenant (le32) | ns (2 x le64) | key (2 x le64) */
#define KVT__RDB_NIL       UINT32_MAX
/* A record's metadata (db.c): its 128-byte header and when it was written (Unix seconds,
 * le64), under 0xff x 36 | 0 | the record's key. */
#define KVT__RDB_META_BYTES     (KVT_CHUNK_HDR_BYTES + 8u)
#define KVT__RDB_META_KEY_BYTES (2 * KVT__RDB_KEY_BYTES + 1)
#define KVT__RDB_META_LO_BYTES  (KVT__RDB_KEY_BYTES + 1) /* 0xff x 36 | 0: the range's start */

/* ---- index.c: identity -> slot, an open-addressing table over a dense slot array ---- */

struct kvt__rdb_slot {
	struct kvt_tier_id id;
	uint64_t bytes;  /* record length: header + payload */
	uint32_t born_s; /* seconds since the tier opened, at write or recovery (TTL) */
	uint8_t live;
	uint8_t mark; /* scratch: chosen as a victim, or seen by a reconcile scan */
	uint16_t tix; /* the tenant's dense index (kvt_quota_key_ix), for rocksdb.quota */
};

struct kvt__rdb_index {
	struct kvt__rdb_slot *slots; /* owned; dense, slot number = policy id */
	uint32_t n_slots, cap_slots;
	uint32_t *free; /* owned; stack of dead slot numbers, cap_slots long */
	uint32_t n_free;
	uint32_t *table; /* owned; slot numbers, KVT__RDB_NIL when empty; mask + 1 long */
	uint32_t mask, n_live;
};

int kvt__rdb_index_init(struct kvt__rdb_index *ix);
void kvt__rdb_index_fini(struct kvt__rdb_index *ix);
/* @return : the slot of id, or KVT__RDB_NIL. */
uint32_t kvt__rdb_index_find(const struct kvt__rdb_index *ix, const struct kvt_tier_id *id);
/* Adds id (absent). @return : 0 and *slot, or -ENOMEM. */
int kvt__rdb_index_add(struct kvt__rdb_index *ix, const struct kvt_tier_id *id, uint64_t bytes,
                       uint32_t born_s, uint32_t *slot);
void kvt__rdb_index_del(struct kvt__rdb_index *ix, uint32_t slot);
uint64_t kvt__rdb_id_hash(const struct kvt_tier_id *id);
void kvt__rdb_key_encode(uint8_t out[KVT__RDB_KEY_BYTES], const struct kvt_tier_id *id);
/* @return : 0, or -EBADMSG when the key is not 36 bytes long. */
int kvt__rdb_key_decode(const void *k, size_t len, struct kvt_tier_id *id);

/* ---- db.c: the RocksDB handle and every RocksDB options object ---- */

enum { KVT__RDB_LEVEL = 0, KVT__RDB_UNIVERSAL = 1 };
#define KVT__RDB_BLOOM_BITS 10 /* per key, of every table's bloom filter (db.c) */
#define KVT__RDB_REFUSE_ALL 2000000u

/* Everything that shapes the database, resolved from the options table (or set by the bench). */
struct kvt__rdb_conf {
	char path[PATH_MAX];
	bool wal;
	int compression; /* rocksdb_no_compression, rocksdb_lz4_compression, ... */
	uint64_t blob_min_bytes;
	uint64_t repair_max_bytes; /* rocksdb.repair_max_bytes (salvage.c) */
	uint64_t block_cache_bytes;
	uint64_t write_buffer_bytes;
	int compaction;             /* KVT__RDB_LEVEL or KVT__RDB_UNIVERSAL */
	uint64_t target_file_bytes; /* tests only: table file size (0: RocksDB's 64 MiB) */
	uint32_t fault_ppm; /* tests only: injected faults per million calls, each kind (db.c);
	                     * KVT__RDB_REFUSE_ALL: every write refused, reads untouched */
};

struct kvt__rdb_db {
	rocksdb_t *db;   /* NULL while closed (a failed reopen) */
	bool meta_whole; /* the meta range holds every record's metadata (its marker was found) */
	bool created;    /* this open made the database (no CURRENT file before it) */
	bool quiet;      /* opens with automatic compactions off (evacuate.c) */
	uint64_t bad_table;          /* the table the last Corruption error named (0: none) */
	uint64_t tables_dropped;     /* damaged tables deleted (salvage.c) */
	uint64_t repairs;            /* RocksDB repairs run (kvt__rdb_repair) */
	bool blob_files;             /* values may live in blob files (no repair: salvage.c) */
	uint64_t repair_max_bytes;   /* conf.repair_max_bytes */
	int compression;             /* conf's, for the repair's own options (repair_child.c) */
	uint64_t write_buffer_bytes; /* the same */
	rocksdb_options_t *opts;
	rocksdb_block_based_table_options_t *bbto;
	rocksdb_cache_t *cache;     /* NULL when block_cache_bytes is 0 */
	rocksdb_writeoptions_t *wo; /* no_slowdown; WAL per conf */
	rocksdb_readoptions_t *ro;  /* point reads */
	/* walks, no block-cache fill, checksums verified: [0] of the records, up to the meta
	 * range; [1] of the meta range (db.c) */
	rocksdb_readoptions_t *walk[2];
	uint8_t meta_lo[KVT__RDB_META_LO_BYTES]; /* both walks' bound (kvt__rdb_meta_lo) */
	rocksdb_flushoptions_t *fo;              /* wait = false */
	char path[PATH_MAX];
	uint32_t fault_ppm; /* conf.fault_ppm */
	uint64_t fault_rng; /* the injector's xorshift state */
	uint64_t faults;    /* injected so far */
};

/* Fills c from the options table; path defaults to data_dir/rocksdb. @return : 0 or -EINVAL. */
int kvt__rdb_conf_from_opts(struct kvt__rdb_conf *c, const struct kvt_options *o,
                            const char *data_dir);
/* Builds the options objects and opens (creating) the database; one too damaged to open is
 * wiped (logged) and opened empty. @return : 0 or -errno. */
int kvt__rdb_db_open(struct kvt__rdb_db *d, const struct kvt__rdb_conf *c);
/* Closes the database and destroys every options object. Accepts a never-opened d. */
void kvt__rdb_db_close(struct kvt__rdb_db *d);
/* Closes and reopens the database with the same options (disk-full recovery). */
int kvt__rdb_db_reopen(struct kvt__rdb_db *d);
/* Closes the database, destroys its files and opens it again, empty (damage past reading). */
int kvt__rdb_db_wipe(struct kvt__rdb_db *d);
/* The key of the metadata of the record under key (KVT__RDB_KEY_BYTES long). */
void kvt__rdb_meta_key(uint8_t out[KVT__RDB_META_KEY_BYTES], const uint8_t *key);
/* Where the meta range starts (0xff x 36 | 0): every record's key sorts before it, every
 * metadata key and the marker at or after it. */
void kvt__rdb_meta_lo(uint8_t out[KVT__RDB_META_LO_BYTES]);
/* Adds the marker's put to b (a batch that completes the meta range), or its delete. */
void kvt__rdb_marker_put(rocksdb_writebatch_t *b);
void kvt__rdb_marker_del(rocksdb_writebatch_t *b);
/* Whether a key of the meta range is the marker. */
bool kvt__rdb_is_marker(const void *k, size_t len);
/* Adds the delete of the whole meta range, marker included, to b. */
void kvt__rdb_meta_clear(rocksdb_writebatch_t *b);
/* Maps a RocksDB error string to -errno and frees it (NULL -> 0). */
int kvt__rdb_err(char *err);
/* What a RocksDB error string means, as -errno (-EIO when nothing more is known). */
int kvt__rdb_err_code(const char *err);
/* The same, noting in d->bad_table the table a Corruption error names. */
int kvt__rdb_err_db(struct kvt__rdb_db *d, char *err);
/* Closes and reopens without paranoid checks: tables that fail to load do not stop it. */
int kvt__rdb_db_reopen_lax(struct kvt__rdb_db *d);

/* ---- salvage.c: dropping damaged tables ---- */

/* The table number a RocksDB error message or file name names ("000123.sst"), or 0. */
uint64_t kvt__rdb_table_named(const char *msg);
/* After an open that failed with Corruption: drops every table a seek cannot read and opens
 * again. @return : 0, -EBADMSG (none found, or still failing: make it anew), or -errno. */
int kvt__rdb_salvage_open(struct kvt__rdb_db *d);
/* Whether a table of the open database says its blocks carry no checksums (its footer damaged:
 * salvage.c); kvt__rdb_salvage_open drops such tables. */
bool kvt__rdb_unchecked_table(struct kvt__rdb_db *d);
/* Drops table file_no (named by an error) and reopens. @return : as kvt__rdb_salvage_open. */
int kvt__rdb_drop_table(struct kvt__rdb_db *d, uint64_t file_no);
/* Damage past dropping tables (why: for the log): RocksDB's repair rebuilds the manifest from
 * the tables it can read, the rest deleted; then the database opens again. The metadata counts
 * as incomplete when a table went. @return : 0, -EBADMSG (not repairable: make it anew) or
 * -errno. */
int kvt__rdb_repair(struct kvt__rdb_db *d, const char *why);
/* ---- repair_child.c: RocksDB's repair in a process of its own ---- */

/* RocksDB's RepairDB on path with d's options, in a child process: a repair that dies (RocksDB
 * 7.8 dereferences null on some damaged tables) is one that failed. @return : 0, -EBADMSG
 * (RocksDB's Corruption, or the child died), or -errno. */
int kvt__rdb_repair_db(const struct kvt__rdb_db *d, const char *path);

/* ---- manifest.c ---- */

/* Whether the manifest that path's CURRENT names is damaged where RocksDB's open would read it
 * as its end, with no error (a record's length past its 32 KiB block, a zeroed header before
 * other records), and open an older version of the database (manifest.c). */
bool kvt__rdb_manifest_read_short(const char *path);

/* Whether path holds table files but no CURRENT (lost: an open would start a new database
 * over them and delete them). */
bool kvt__rdb_orphan_tables(const char *path);
/* Before an open of path: finishes a rebuild's swap that a crash cut short (salvage.c). */
void kvt__rdb_rebuild_finish(const char *path);
/* Applies batch b (not cleared). @return : 0 or -errno; -EAGAIN: refused, nothing applied;
 * any other error: the batch may have been applied. */
int kvt__rdb_write(struct kvt__rdb_db *d, rocksdb_writebatch_t *b);
/* Point read of key k. @return : the value (destroy it), or NULL with *rc 0 (absent) or
 * -errno. */
rocksdb_pinnableslice_t *kvt__rdb_get(struct kvt__rdb_db *d, const void *k, size_t klen, int *rc);
/* Point read of k for a walk that passed over damage: checksums verified, no fault injected, no
 * table noted. @return : the value at *v, *vlen long (destroy it), or NULL (absent, unreadable). */
rocksdb_pinnableslice_t *kvt__rdb_get_quiet(struct kvt__rdb_db *d, const void *k, size_t klen,
                                            const char **v, size_t *vlen);

/* Where a walk is: the last key it read. RocksDB 7.8 (Debian 12's) ends an iteration with no
 * error when Next() comes to a table whose first data block fails its checksum, and every key
 * after it is missed (test_rocksdb_tier meta_only_table: a walk of the metadata that met such
 * a table dropped every record whose metadata lay past it); a seek there reports the error. So
 * the end of a walk is confirmed by a seek just past the last key read.
 *
 * A walk given passed() goes on past a block it cannot read, instead of stopping: the next key
 * a seek can reach is searched for with seeks (db.c, pass_damage), and passed() is told the
 * stretch [lo, hi) of keys it did not read and RocksDB's error, which names the table.
 * Such a walk must verify checksums: Debian's RocksDB keeps its assertions, and a block whose
 * entry lengths are damaged, read unverified, aborts the process (test_rocksdb_tier
 * unparseable_entry). */
struct kvt__rdb_cursor {
	char *last; /* owned: the last key read, then a zero byte */
	size_t len, cap;
	bool confirmed; /* the seek past last was made */
	/* to pass over damage (NULL: a walk stops at it); the walk's database and read options */
	void (*passed)(void *arg, const char *lo, size_t lo_len, const char *hi, size_t hi_len,
	               const char *why);
	void *arg;
	rocksdb_t *db;
	const rocksdb_readoptions_t *ro;
	const char *lo; /* where the walk began (NULL: the first key) */
	size_t lo_len;
	unsigned stretches; /* passed over so far */
};
/* Stretches of keys a walk passed over, as [lo, hi) pairs cut down (lo) or rounded up (hi) to a
 * record key's length, so that they hold every record key the walk did not read; past
 * KVT__RDB_PASSED_MAX the last one widens. */
#define KVT__RDB_PASSED_MAX 16u
struct kvt__rdb_passed {
	uint8_t lo[KVT__RDB_PASSED_MAX][KVT__RDB_KEY_BYTES],
	    hi[KVT__RDB_PASSED_MAX][KVT__RDB_KEY_BYTES];
	unsigned n;
};
/* Notes [lo, hi) (a walk goes up: each stretch lies past the ones before). */
void kvt__rdb_passed_add(struct kvt__rdb_passed *p, const char *lo, size_t lo_len, const char *hi,
                         size_t hi_len);
/* Whether record key k (KVT__RDB_KEY_BYTES long) lies in a stretch of p. */
bool kvt__rdb_passed_has(const struct kvt__rdb_passed *p, const uint8_t *k);
/* The loop condition of a walk: whether *it is at a key (remembered in c); at what looks like
 * the end, the seek past the last key decides (its error, if any, stays on it). A walk that
 * passes over damage goes on with a new iterator in *it. */
bool kvt__rdb_iter_more(rocksdb_iterator_t **it, struct kvt__rdb_cursor *c);
void kvt__rdb_cursor_fini(struct kvt__rdb_cursor *c);
/* Applies b (then cleared; nothing when it is empty) to database to with options wo, not
 * through the fault injector. @return : 0 or -errno. */
int kvt__rdb_write_to(rocksdb_t *to, rocksdb_writeoptions_t *wo, rocksdb_writebatch_t *b);
/* Walks it on from where it stands (cur: its cursor, which may pass over damage) and writes
 * each entry keep() takes (it answers 1, 0 to pass over, or -errno to stop; NULL: every entry)
 * into to, 4 MiB a batch. @return : 0, -EBADMSG (the walk failed: what it read before is
 * written) or -errno. */
int kvt__rdb_copy_walk(rocksdb_iterator_t **it, struct kvt__rdb_cursor *cur, rocksdb_t *to,
                       rocksdb_writeoptions_t *wo,
                       int (*keep)(void *arg, const char *k, size_t klen), void *arg);

/* ---- evacuate.c: a damaged table dropped, its records written elsewhere first ---- */

/* Writes again the records under table no's keys (the newest version of each, passing over
 * the blocks it cannot read; the records ix (NULL: none) knows in what it passed are read one by
 * one), drops the table, and deletes what its deletes had hidden; the database is reopened (a
 * background error cleared). Logged either way. @return : 0 (dropped, nothing
 * lost but what the damage hit); the table is left by -EPERM (level 0: RocksDB would not drop
 * it), -E2BIG (more than 1 GiB of records under its keys), -EBADMSG (the drop failed; the
 * copies are harmless), -ENOENT (no such table) or -errno. */
int kvt__rdb_evacuate(struct kvt__rdb_db *d, const struct kvt__rdb_index *ix, uint64_t no);

/* ---- tier.c ---- */

extern const struct kvt_tier_ops kvt_tier_rocksdb;

struct kvt_tier {
	struct kvt_tier_env env;
	struct kvt__rdb_conf conf;
	struct kvt__rdb_db db;
	struct kvt__rdb_index ix;
	const struct kvt_policy_ops *pol_ops;
	struct kvt_policy *pol;
	/* owned; per-tenant accounts, NULL until rocksdb.quota is first set. Kept once made, so a
	 * tenant keeps its index (slot.tix; a policy sets entries aside by it) */
	struct kvt_quota *quota;
	bool quota_on; /* rocksdb.quota is set (not none): evictions go through it */
	uint64_t cap_bytes, used_bytes;
	uint64_t ttl_s;
	uint64_t open_ns, last_sweep_ns, last_flush_ns, last_probe_ns;
	bool full;         /* the last write met ENOSPC; probe before the next one */
	uint32_t exclude;  /* slot not to evict while making room for it */
	uint32_t *victims; /* owned; scratch for pick_victims, cap_victims long */
	uint32_t cap_victims;
	uint8_t *visited;            /* owned during iterate(): slots visited, n_slots long */
	rocksdb_writebatch_t *batch; /* owned; reused for every write */
	struct XXH3_state_s *xxh;    /* owned; read verification */
	/* owned; ids whose delete is still owed to the database (tier.c), cap_graves long */
	struct kvt_tier_id *graves;
	uint32_t n_graves, cap_graves;
	uint64_t buried, unburied; /* graves that landed; graves given up (logged) */
	struct kvt_tier_stats st;  /* counters: written by the worker, read atomically */
};

#define ST_ADD(t, f, v) __atomic_fetch_add(&(t)->st.f, (v), __ATOMIC_RELAXED)
#define ST_SET(t, f, v) __atomic_store_n(&(t)->st.f, (v), __ATOMIC_RELAXED)

/* The tier's clock: seconds since its open (records' ages, TTL). */
static inline uint32_t kvt__rdb_now_s(const struct kvt_tier *t)
{
	return (uint32_t)((kvt_now_ns() - t->open_ns) / 1000000000ull);
}

/* The usage stats() reports, from the tier's own counts. */
static inline void kvt__rdb_publish_usage(struct kvt_tier *t)
{
	ST_SET(t, used_bytes, t->used_bytes);
	ST_SET(t, chunks, (uint64_t)t->ix.n_live);
	ST_SET(t, full, t->full);
}

/* Drops slot s from the index, the policy and its tenant's account; report tells the daemon. */
void kvt__rdb_forget(struct kvt_tier *t, uint32_t s, bool report);
/* Slot s, just added to the index: into its tenant's account, the tier's usage and the policy. */
void kvt__rdb_adopt(struct kvt_tier *t, uint32_t s);

/* ---- record.c ---- */

bool kvt__rdb_same_id(const struct kvt_tier_id *a, const struct kvt_tier_id *b);
/* Checks a stored value against the identity it is stored under (its payload's checksum too
 * when payload), decoding its header into h. @return : 0 or -EBADMSG. */
int kvt__rdb_check_record(const struct kvt_tier_id *id, const void *val, size_t len, bool payload,
                          struct kvt_chunk_hdr *h);
/* Adds the put of the metadata of the record under key k (its header hdr, written age_s ago). */
void kvt__rdb_batch_put_meta(rocksdb_writebatch_t *b, const uint8_t *k, const void *hdr,
                             uint64_t age_s);
/* Adds the puts of record k (value v, len bytes: header and payload) and its metadata to b. */
void kvt__rdb_batch_put(rocksdb_writebatch_t *b, const uint8_t *k, const void *v, size_t len);
/* Adds the deletes of the record under key k and of its metadata to b. */
void kvt__rdb_batch_delete(rocksdb_writebatch_t *b, const uint8_t *k);
/* The header, length and age a metadata value records, for the record under id. @return : 0,
 * or -EBADMSG (the header fails its checksum, names another record, or the size is wrong). */
int kvt__rdb_meta_decode(const struct kvt_tier_id *id, const char *v, size_t len,
                         struct kvt_chunk_hdr *h, uint64_t *bytes, uint32_t *age_s);

/* ---- walk.c ---- */

/* OPEN fills the index; RECONCILE and ITERATE mark what they find and drop the rest. */
enum kvt__rdb_scan_mode { SCAN_OPEN, SCAN_RECONCILE, SCAN_ITERATE };
/* One walk of the database (pass: a walk of the records passes over blocks it cannot read).
 * @return : 0, -EBADMSG (damage stopped it) or -errno. */
int kvt__rdb_scan(struct kvt_tier *t, enum kvt__rdb_scan_mode mode, bool pass,
                  kvt_tier_visit_fn visit, void *arg);
/* A walk that mends the damage it cannot read past and walks again. @return : 0, -EBADMSG
 * (nothing mended it) or -errno. */
int kvt__rdb_walk_mending(struct kvt_tier *t, enum kvt__rdb_scan_mode mode, kvt_tier_visit_fn visit,
                          void *arg, const char *why);
/* Damage a write or a walk met after the open: a table dropped and the index reconciled, or a
 * repair, or a database made anew. @return : 0 or -errno. */
int kvt__rdb_salvage_or_rebuild(struct kvt_tier *t, const char *why);
/* Makes the database anew, empty (every record dropped, reported when report). */
int kvt__rdb_rebuild(struct kvt_tier *t, bool report, const char *why);
/* The open's walk (without a saved index to trust), mending, else a database made anew. */
int kvt__rdb_open_scan(struct kvt_tier *t);

/* The index saved at a clean close (saved.c), "<db path>.index". write() saves ix for the
 * database just closed (its close flushed it; now_s: the tier's clock, for the records' ages);
 * @return : 0 or -errno (logged). read() calls each per record when the file matches the database
 * it was saved for, then removes the file; @return : 1 (applied), 0 (none, or not trusted: scan),
 * or what each returned (not 0: stopped there). */
typedef int (*kvt__rdb_saved_fn)(void *arg, const struct kvt_tier_id *id, uint64_t bytes,
                                 uint32_t age_s);
/* db_path: the database's folder, closed; seq: its latest sequence number before the close;
 * graves: deletes still owed, which read() hands back with bytes 0. ix NULL: the deletes alone
 * (a close without a database), which read() hands back whatever the database holds, and
 * then answers 0 (scan). */
int kvt__rdb_saved_write(const char *db_path, uint64_t seq, const struct kvt__rdb_index *ix,
                         uint32_t now_s, const struct kvt_tier_id *graves, uint32_t n_graves);
/* max_records: the most entries the tier can have saved (a bigger file is refused unread). */
int kvt__rdb_saved_read(const struct kvt__rdb_db *db, uint64_t max_records, kvt__rdb_saved_fn each,
                        void *arg);
/* Removes the file unread (the database lost tables since it was written: salvage.c). */
void kvt__rdb_saved_drop(const struct kvt__rdb_db *db);

/* Testing and operations: flushes the memtable; wait blocks until it is on disk. */
int kvt__rdb_flush(struct kvt_tier *t, bool wait);
/* Testing: compacts the whole key range (reads every table: damage surfaces here). */
int kvt__rdb_compact(struct kvt_tier *t);
/* Opens with an explicit configuration (the bench compares option sets). */
int kvt__rdb_open_conf(const struct kvt_tier_env *env, const struct kvt__rdb_conf *c,
                       struct kvt_tier **out);
#endif
