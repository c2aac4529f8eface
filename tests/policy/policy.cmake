# Policies, admission, quotas, miss-ratio curves and the trace simulator (issue 6).
kvt_add_test(NAME test_policy SOURCES policy/test_policy.c LIBS kvt_policy LABELS unit TIMEOUT 120)
kvt_add_test(NAME test_policy_prop SOURCES policy/test_policy_prop.c LIBS kvt_sim LABELS unit TIMEOUT 60)
kvt_add_test(NAME test_policy_mrc SOURCES policy/test_policy_mrc.c LIBS kvt_sim LABELS unit TIMEOUT 60)
kvt_add_test(NAME test_policy_sim SOURCES policy/test_policy_sim.c LIBS kvt_sim LABELS integration TIMEOUT 150)
kvt_add_test(NAME test_policy_synth SOURCES policy/test_policy_synth.c LIBS kvt_sim LABELS unit TIMEOUT 240)
kvt_add_test(NAME test_policy_model SOURCES policy/test_policy_model.c LIBS kvt_policy LABELS unit TIMEOUT 120)
kvt_add_test(NAME test_conv_ends SOURCES policy/test_conv_ends.c LIBS kvt_policy LABELS unit TIMEOUT 60)
