# Decoder fuzzing: a fixed-seed run in every test pass (and under ASan in CI); `make fuzz`
# builds the same entry point as a libFuzzer target with clang.
add_executable(fuzz_decode fuzz/fuzz_decode.c)
kvt_target(fuzz_decode)
target_link_libraries(fuzz_decode PRIVATE kvt_proto kvt_core)
set_target_properties(fuzz_decode PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
add_test(NAME fuzz_decode COMMAND fuzz_decode 200000 ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus)
set_tests_properties(fuzz_decode PROPERTIES TIMEOUT 120 LABELS unit)

# Every policy against traces of any shape, through the simulator's loader and replay
# (hits <= OPT and the counts' invariants); `make fuzz` runs it under libFuzzer too.
add_executable(fuzz_sim fuzz/fuzz_sim.c)
kvt_target(fuzz_sim)
target_link_libraries(fuzz_sim PRIVATE kvt_sim)
set_target_properties(fuzz_sim PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
add_test(NAME fuzz_sim COMMAND fuzz_sim 3000 ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus-sim)
set_tests_properties(fuzz_sim PROPERTIES TIMEOUT 300 LABELS unit)

# kvtierd's dispatcher, tiers and restarts, in-process (the daemon's own start, loop and stop):
# clients that speak well, badly or not at all; `make fuzz` runs it under libFuzzer too.
add_executable(fuzz_daemon fuzz/fuzz_daemon.c)
kvt_target(fuzz_daemon)
target_link_libraries(fuzz_daemon PRIVATE kvtierd_lib)
if(KVT_LIBFUZZER)
  target_compile_definitions(fuzz_daemon PRIVATE KVT_LIBFUZZER)
  target_link_options(fuzz_daemon PRIVATE -fsanitize=fuzzer)
endif()
set_target_properties(fuzz_daemon PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
add_test(NAME fuzz_daemon COMMAND fuzz_daemon 200 ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus-daemon)
set_tests_properties(fuzz_daemon PROPERTIES TIMEOUT 600 LABELS unit)
