# The GPU interface; the device part skips where there is no GPU (cmocka skip).
kvt_add_test(NAME test_gpu SOURCES gpu/test_gpu.c LIBS kvt_gpu LABELS unit TIMEOUT 60)
