# The reference engine (tools/minillm). Engine-only tests are unit; daemon ones integration.
add_library(kvt_mllm_testutil STATIC minillm/mllm_util.c)
kvt_target(kvt_mllm_testutil)
target_include_directories(kvt_mllm_testutil PUBLIC ${CMAKE_SOURCE_DIR}/tests/lib)
target_link_libraries(kvt_mllm_testutil PUBLIC kvt_minillm kvt_testlib)
set(KVT_MLLM_LIBS kvt_mllm_testutil kvt_minillm)
kvt_add_test(NAME test_minillm_model SOURCES minillm/test_minillm_model.c
  LIBS ${KVT_MLLM_LIBS} LABELS unit TIMEOUT 60)
kvt_add_test(NAME test_minillm_tokenizer SOURCES minillm/test_minillm_tokenizer.c
  LIBS ${KVT_MLLM_LIBS} LABELS unit TIMEOUT 30)
kvt_add_test(NAME test_minillm_kvcache SOURCES minillm/test_minillm_kvcache.c
  LIBS ${KVT_MLLM_LIBS} LABELS unit TIMEOUT 60)
kvt_add_test(NAME test_minillm_cli SOURCES minillm/test_minillm_cli.c
  LIBS ${KVT_MLLM_LIBS} LABELS unit TIMEOUT 60)
kvt_add_test(NAME test_minillm_json SOURCES minillm/test_minillm_json.c
  LIBS ${KVT_MLLM_LIBS} LABELS unit TIMEOUT 30)
kvt_add_test(NAME test_minillm_reuse SOURCES minillm/test_minillm_reuse.c
  LIBS ${KVT_MLLM_LIBS} kvt_sim LABELS integration TIMEOUT 120)
