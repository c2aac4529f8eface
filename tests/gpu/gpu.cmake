# The GPU interface: test_gpu without a device (the host stand-in, -ENODEV), test_gpu_device on
# one (exit 77, skipped, where kvt_gpu_probe() finds none).
kvt_add_test(NAME test_gpu SOURCES gpu/test_gpu.c LIBS kvt_gpu LABELS unit TIMEOUT 60)
kvt_add_test(NAME test_gpu_device SOURCES gpu/test_gpu_device.c LIBS kvt_gpu LABELS unit TIMEOUT 120)
