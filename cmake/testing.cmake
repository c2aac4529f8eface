# kvt_add_test(NAME n SOURCES s... [LIBS l...] [TIMEOUT sec] [LABELS l...])
# One test program per behaviour group; exit 77 means skipped; every test has a timeout.
set(KVT_SHARED_DATA "${CMAKE_SOURCE_DIR}/../shared/data" CACHE PATH "the shared data folder")
function(kvt_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  if(KVT_TSAN) # ThreadSanitizer runs the daemon and its clients 5-15x slower, and where page
    # faults are dear (a paravirtualised VM: test_stress took 314 s on one day, 690-838 s of its
    # 960 s on another, mostly faults on TSan's shadow) more still
    math(EXPR T_TIMEOUT "${T_TIMEOUT} * 6")
  elseif(KVT_SANITIZE) # ASan runs CPU-bound tests up to 7x slower (test_policy_mrc: 3.5 s -> 24 s)
    math(EXPR T_TIMEOUT "${T_TIMEOUT} * 2")
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  kvt_target(${T_NAME})
  target_include_directories(${T_NAME} PRIVATE ${CMAKE_SOURCE_DIR}/tests/lib)
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} kvt_testlib PkgConfig::CMOCKA)
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
    LABELS "${T_LABELS}"
    ENVIRONMENT "KVT_BIN_DIR=${CMAKE_BINARY_DIR}/bin;KVT_SHARED_DATA=${KVT_SHARED_DATA};KVT_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endfunction()
