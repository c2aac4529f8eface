# Policies, admission, quotas, miss-ratio curves and the trace simulator (issue 6).
kvt_add_test(NAME test_policy SOURCES policy/test_policy.c LIBS kvt_policy LABELS unit TIMEOUT 120)
kvt_add_test(NAME test_policy_conv SOURCES policy/test_policy_conv.c LIBS kvt_policy LABELS unit TIMEOUT 60)
kvt_add_test(NAME test_policy_quota SOURCES policy/test_policy_quota.c LIBS kvt_policy LABELS unit TIMEOUT 60)
kvt_add_test(NAME test_policy_prop SOURCES policy/test_policy_prop.c LIBS kvt_sim LABELS unit TIMEOUT 60)
kvt_add_test(NAME test_policy_mrc SOURCES policy/test_policy_mrc.c LIBS kvt_sim LABELS unit TIMEOUT 60)
# 95-112 s in CI (a daemon per policy and layout benched, each recording replayed twice since
# 2026-12-07, the second through kvtier sim --daemon); under ASan it passed in under 300 s once
# and timed out at 300 the next run: 240 (480 under ASan) leaves room
kvt_add_test(NAME test_policy_sim SOURCES policy/test_policy_sim.c LIBS kvt_sim LABELS integration TIMEOUT 240)
kvt_add_test(NAME test_policy_synth SOURCES policy/test_policy_synth.c LIBS kvt_sim LABELS unit TIMEOUT 240)
kvt_add_test(NAME test_policy_model SOURCES policy/test_policy_model.c LIBS kvt_policy LABELS unit TIMEOUT 120)
kvt_add_test(NAME test_conv_ends SOURCES policy/test_conv_ends.c LIBS kvt_policy LABELS unit TIMEOUT 60)
