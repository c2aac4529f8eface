# The rocksdb tier's tests: a real database in a temporary directory (tiers/rocksdb/).
if(TARGET kvt_tier_rocksdb)
  kvt_add_test(NAME test_rocksdb_tier SOURCES rocksdb/test_rocksdb_tier.c
    LIBS kvt_tier_rocksdb LABELS unit TIMEOUT 180)
  kvt_add_test(NAME test_rocksdb_index SOURCES rocksdb/test_rocksdb_index.c
    LIBS kvt_tier_rocksdb LABELS unit TIMEOUT 180)
  kvt_add_test(NAME test_rocksdb_repair SOURCES rocksdb/test_rocksdb_repair.c
    LIBS kvt_tier_rocksdb LABELS unit TIMEOUT 180)
  kvt_add_test(NAME test_rocksdb_crash SOURCES rocksdb/test_rocksdb_crash.c
    LIBS kvt_tier_rocksdb LABELS integration TIMEOUT 60)
  # Mounts a tmpfs: needs root (CAP_SYS_ADMIN); exits 77 elsewhere.
  kvt_add_test(NAME test_rocksdb_full SOURCES rocksdb/test_rocksdb_full.c
    LIBS kvt_tier_rocksdb LABELS integration TIMEOUT 60)
endif()
