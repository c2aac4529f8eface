kvt_add_test(NAME test_keys SOURCES unit/test_keys.c LIBS kvt_core LABELS unit)
kvt_add_test(NAME test_chunk SOURCES unit/test_chunk.c LIBS kvt_core LABELS unit)
kvt_add_test(NAME test_options SOURCES unit/test_options.c LIBS kvt_core LABELS unit)
kvt_add_test(NAME test_extent SOURCES unit/test_extent.c LIBS kvt_tiers LABELS unit)
