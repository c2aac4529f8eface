/*
 * options_list.h -- every kvtier setting, defined once (STYLE.md 19).
 * X(ID, "name", TYPE, "default", min, max, runtime-mutable, "help")
 * Sizes accept units (64MiB); "auto" is resolved at load time (see options.c).
 */
#define KVT_OPTIONS(X)                                                                             \
	X(HOST_BYTES, "host.bytes", SIZE, "auto", 1ull << 20, (1ull << 44) - (1ull << 20), 0,      \
	  "host tier capacity across all tenants (auto: 1/8 of RAM)")                              \
	X(HOST_POLICY, "host.policy", STR, "auto", 0, 0, 1,                                        \
	  "eviction policy of the host tier; auto: conv once every namespace's chunks are 64 KiB " \
	  "or more, lru until then")                                                               \
	X(HOST_POLICY_PARAMS, "host.policy_params", STR, "", 0, 0, 1,                              \
	  "parameters of host.policy, e.g. \"small_ratio=0.1\"")                                   \
	X(HOST_ADMIT, "host.admit", STR, "none", 0, 0, 1,                                          \
	  "admission of host puts: none, tinylfu or second_touch")                                 \
	X(MRC_SAMPLE_PPM, "mrc.sample_ppm", U64, "1000000", 1, 1000000, 0,                         \
	  "keys sampled for the miss-ratio curves, per million, to start with (1000000: all)")     \
	X(MRC_MAX_KEYS, "mrc.max_keys", U64, "32768", 64, 1ull << 30, 0,                           \
	  "most keys each miss-ratio curve tracks (<= 256 B each); the sampling rate drops to it") \
	X(MRC_MINISIM_ENTRIES, "mrc.minisim_entries", U64, "4096", 0, 1ull << 24, 0,               \
	  "a tier's policy's own curve (not lru's): mini-simulations, entries at 1x (0: off)")     \
	X(MRC_MINISIM_QUEUE, "mrc.minisim_queue", U64, "65536", 0, 1ull << 24, 0,                  \
	  "acquired keys waiting for the thread that replays host's mini-simulations (0: at "      \
	  "once, in the acquire)")                                                                 \
	X(TRACE_FILE, "trace.file", STR, "", 0, 0, 1,                                              \
	  "record the engines' requests (a get and the put of what it missed) to this absolute "   \
	  "path, a trace for kvtier sim --engine (appended; empty or none: off)")                  \
	X(TRACE_MAX_BYTES, "trace.max_bytes", SIZE, "1GiB", 4096, 1ull << 50, 1,                   \
	  "the recording stops before trace.file grows past this")                                 \
	X(TENANT_MAP, "tenant.map", STR, "", 0, 0, 0,                                              \
	  "uids/gids to named tenants: \"1000=teamA,@2000=teamB\" (default: one per uid)")         \
	X(TENANT_QUOTA, "tenant.quota", STR, "", 0, 0, 1,                                          \
	  "host bytes guaranteed/maximum per tenant: \"teamA=1GiB/4GiB,1001=0/2GiB\" (none: off)") \
	X(LEASE_TIMEOUT_MS, "lease.timeout_ms", U64, "30000", 1, 86400000, 1,                      \
	  "a lease older than this is revoked")                                                    \
	X(SHUTDOWN_TIMEOUT_MS, "shutdown.timeout_ms", U64, "5000", 0, 3600000, 1,                  \
	  "on SIGTERM, how long leases get to be released")                                        \
	X(CLIENT_STAGING_BYTES, "client.staging_bytes", SIZE, "64MiB", 1ull << 16, 1ull << 40, 0,  \
	  "private staging area of each client (puts)")                                            \
	X(CLIENT_MAX, "client.max", U64, "1024", 1, 65536, 0, "most connected clients")            \
	X(CLIENT_MAX_PER_UID, "client.max_per_uid", U64, "256", 1, 65536, 0,                       \
	  "most connected clients of one uid")                                                     \
	X(CLIENT_ALLOW, "client.allow", STR, "all", 0, 0, 1,                                       \
	  "uids and @gids that may attach, e.g. \"1000,@2000\"; all: who can open the socket "     \
	  "(root and the daemon's uid always may); a change closes who is no longer in it")        \
	X(CLIENT_HELLO_MS, "client.hello_ms", U64, "5000", 100, 600000, 1,                         \
	  "a connection that has not said hello by then is closed")                                \
	X(INDEX_MAX_CHUNKS, "index.max_chunks", U64, "16777216", 1024, 1ull << 31, 0,              \
	  "most chunks the index holds")                                                           \
	X(INDEX_SHM_SLOTS, "index.shm_slots", U64, "1048576", 0, 1ull << 30, 0,                    \
	  "slots of each tenant's shared lookup table (16 bytes each; 0: lookups ask the daemon)") \
	X(TIERS_ORDER, "tiers.order", STR, "auto", 0, 0, 0,                                        \
	  "tiers from fastest to slowest, comma separated (host,nvme,rocksdb); auto: host and "    \
	  "every tier built, a tier that cannot open left out with a warning")                     \
	X(TIERS_PLACEMENT, "tiers.placement", STR, "cascade", 0, 0, 0,                             \
	  "cascade: a put is written to the first tier below host, and a tier below it gets what " \
	  "that tier evicts; write-through: a put is written to every tier below host")            \
	X(DEMOTE_WAIT_MS, "demote.wait_ms", U64, "100", 0, 60000, 1,                               \
	  "how long a put waits for demotion to free host space before -EAGAIN")                   \
	X(PROMOTE_WAIT_MS, "promote.wait_ms", U64, "5000", 0, 60000, 1,                            \
	  "how long a get or acquire waits for chunks coming up from a lower tier; past it, what " \
	  "is at host is served and the rest is a miss (a slow device costs no more than this)")   \
	X(TIERS_COMMAND_WAIT_MS, "tiers.command_wait_ms", U64, "10000", 0, 20000, 1,               \
	  "how long an operator's command on a lower tier (tier enable, TIER.quota, TIER.policy) " \
	  "waits, parked, while the tier is busy with I/O; past it -EBUSY and nothing changed "    \
	  "(the daemon serves the engines meanwhile)")                                             \
	X(HOST_DIRTY_PCT, "host.dirty_pct", U64, "50", 1, 100, 1,                                  \
	  "most of host, in percent, that chunks still waiting for demotion may fill; a put past " \
	  "it waits as on a full host, so promotions and hits keep the rest")                      \
	X(HOST_EVICT_WAITS, "host.evict_waits", BOOL, "true", 0, 1, 1,                             \
	  "a put whose victim, host policy's first choice, is still being demoted waits for it "   \
	  "(demote.wait_ms at most) rather than evict the next chunk: the policy's order, as "     \
	  "kvtier sim replays it, for some put latency")                                           \
	X(HOST_KEEP_PCT, "host.keep_pct", U64, "25", 0, 90, 1,                                     \
	  "most of host, in percent, that chunks kept by kvt_keep may hold; 0 turns keeps off")    \
	X(HOST_KEEP_MAX_MS, "host.keep_max_ms", U64, "3600000", 0, 604800000, 1,                   \
	  "the longest keep kvt_keep may ask for, in milliseconds (longer ones are cut to it)")    \
	X(NVME_PATH, "nvme.path", STR, "", 0, 0, 0,                                                \
	  "nvme tier file or block device (default DATA_DIR/nvme.dat)")                            \
	X(NVME_BYTES, "nvme.bytes", SIZE, "auto", 1ull << 20, 1ull << 50, 0,                       \
	  "nvme tier capacity (auto: 1/8 of the data directory's free space)")                     \
	X(NVME_QUEUE_DEPTH, "nvme.queue_depth", U64, "32", 1, 4096, 0,                             \
	  "nvme io_uring queue depth")                                                             \
	X(NVME_ADMIT, "nvme.admit", STR, "all", 0, 0, 1,                                           \
	  "demotion into nvme: all, or second_touch (on the first access after the put)")          \
	X(NVME_POLICY, "nvme.policy", STR, "fifo", 0, 0, 1,                                        \
	  "nvme log reclaim: fifo, or clock (a record read since written is copied forward)")      \
	X(NVME_QUOTA, "nvme.quota", STR, "", 0, 0, 1,                                              \
	  "nvme bytes guaranteed/maximum per tenant, as tenant.quota (kept by copying forward)")   \
	X(ROCKSDB_PATH, "rocksdb.path", STR, "", 0, 0, 0,                                          \
	  "rocksdb directory (default DATA_DIR/rocksdb)")                                          \
	X(ROCKSDB_BYTES, "rocksdb.bytes", SIZE, "auto", 1ull << 20, 1ull << 50, 0,                 \
	  "rocksdb tier logical capacity (auto: 1/8 of the data directory's free space)")          \
	X(ROCKSDB_ADMIT, "rocksdb.admit", STR, "all", 0, 0, 1,                                     \
	  "demotion into rocksdb: all, or second_touch (on the first access after the put)")       \
	X(ROCKSDB_POLICY, "rocksdb.policy", STR, "auto", 0, 0, 1,                                  \
	  "eviction policy of the rocksdb tier (kvtier policy set rocksdb NAME); auto: conv once " \
	  "every namespace's chunks are 64 KiB or more, arc until then")                           \
	X(ROCKSDB_POLICY_PARAMS, "rocksdb.policy_params", STR, "", 0, 0, 1,                        \
	  "parameters of rocksdb.policy, e.g. \"max_count=1000\"")                                 \
	X(ROCKSDB_QUOTA, "rocksdb.quota", STR, "", 0, 0, 1,                                        \
	  "rocksdb bytes guaranteed/maximum per tenant, as tenant.quota: \"teamA=1GiB/4GiB\"")     \
	X(ROCKSDB_WAL, "rocksdb.wal", BOOL, "false", 0, 1, 0, "write-ahead log on")                \
	X(ROCKSDB_COMPRESSION, "rocksdb.compression", STR, "none", 0, 0, 0, "none, lz4 or zstd")   \
	X(ROCKSDB_TTL_S, "rocksdb.ttl_s", U64, "0", 0, 1ull << 32, 0,                              \
	  "drop chunks older than this (0: never)")                                                \
	X(ROCKSDB_BLOB_MIN_BYTES, "rocksdb.blob_min_bytes", SIZE, "0", 0, 1ull << 40, 0,           \
	  "values at least this large go to blob files (0: off)")                                  \
	X(ROCKSDB_BLOCK_CACHE_BYTES, "rocksdb.block_cache_bytes", SIZE, "8MiB", 0, 1ull << 40, 0,  \
	  "rocksdb block cache")                                                                   \
	X(ROCKSDB_REPAIR_MAX_BYTES, "rocksdb.repair_max_bytes", SIZE, "32GiB", 0, 1ull << 50, 0,   \
	  "a database too damaged to open is rebuilt from its tables up to this size, read and "   \
	  "maybe rewritten before the tier opens; larger ones start empty (0: never)")             \
	X(METRICS_LISTEN, "metrics.listen", STR, "127.0.0.1:9464", 0, 0, 0,                        \
	  "Prometheus metrics over HTTP (GET /metrics): ADDR:PORT (port 0: any free one), or "     \
	  "off; "                                                                                  \
	  "the default is skipped with a warning when taken")                                      \
	X(DAEMON_USER, "daemon.user", STR, "", 0, 0, 0,                                            \
	  "started as root: the user (NAME, UID, NAME:GROUP) kvtierd becomes before it opens "     \
	  "anything; it is handed the socket's and the data directory (empty: stay who started)")  \
	X(LOG_LEVEL, "log.level", STR, "info", 0, 0, 1, "error, warn, info or debug")
