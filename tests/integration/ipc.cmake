kvt_add_test(NAME test_ipc SOURCES integration/test_ipc.c LIBS kvtier_static LABELS integration
  TIMEOUT 120)
kvt_add_test(NAME test_tenants SOURCES integration/test_tenants.c LIBS kvtier_static
  LABELS integration TIMEOUT 120)
kvt_add_test(NAME test_robust SOURCES integration/test_robust.c LIBS kvtier_static
  LABELS integration TIMEOUT 120)
kvt_add_test(NAME test_start SOURCES integration/test_start.c LIBS kvtier_static
  LABELS integration TIMEOUT 120)
# about 40 s; 170 s under ASan with two tests at once, so the limit leaves room for CI's
kvt_add_test(NAME test_tiers SOURCES integration/test_tiers.c LIBS kvtier_static
  LABELS integration TIMEOUT 480)
kvt_add_test(NAME test_policyctl SOURCES integration/test_policyctl.c LIBS kvtier_static
  LABELS integration TIMEOUT 60)
kvt_add_test(NAME test_stress SOURCES integration/test_stress.c LIBS kvtier_static
  LABELS integration TIMEOUT 300) # ~85 s here, 45 of them F3's 10^4 kills
kvt_add_test(NAME test_record SOURCES integration/test_record.c LIBS kvtier_static kvt_sim
  LABELS integration TIMEOUT 60)
kvt_add_test(NAME test_sim_daemon SOURCES integration/test_sim_daemon.c LIBS kvtier_static
  LABELS integration TIMEOUT 60)
kvt_add_test(NAME test_operator SOURCES integration/test_operator.c LIBS kvtier_static
  LABELS integration TIMEOUT 60)
# the metrics flattener on its own (a daemon file, compiled into the test)
kvt_add_test(NAME test_prom SOURCES unit/test_prom.c ${CMAKE_SOURCE_DIR}/ipc/daemon/prom.c
  LABELS unit)
kvt_add_test(NAME test_daemon_model SOURCES integration/test_daemon_model.c LIBS kvtier_static kvt_sim
  LABELS integration TIMEOUT 180)
# The slow-device tests time single gets to within 25 ms of promote.wait_ms on 2 cores; beside
# test_tiers or test_stress (each a daemon and several busy clients) one took 50.5 ms in CI, so
# they never run at once. Nor does test_robust, whose healthy client's p99 may not pass 2x idle
# + 1 ms: beside test_tiers its best of three windows read 1.357 ms against 0.070 idle in CI.
kvt_add_test(NAME test_tiers_devices SOURCES integration/test_tiers_devices.c
  LIBS kvtier_static LABELS integration TIMEOUT 480)
set_tests_properties(test_tiers test_tiers_devices test_stress test_robust
  PROPERTIES RESOURCE_LOCK busy_cpu)
