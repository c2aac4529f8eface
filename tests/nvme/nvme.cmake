# The nvme tier's tests (tiers/nvme/): real files in a temp dir, real io_uring. Each program runs
# once per backend: "<name>" with io_uring (skips with 77 where io_uring is unavailable) and
# "<name>_pio" with the pread/pwrite thread pool.
if(TARGET kvt_tier_nvme)
  function(kvt_nvme_test name label timeout) # more arguments: libraries beside the tier's
    kvt_add_test(NAME ${name} SOURCES nvme/${name}.c LIBS kvt_tier_nvme ${ARGN} LABELS ${label}
      TIMEOUT ${timeout})
    add_test(NAME ${name}_pio COMMAND ${name} pio)
    get_test_property(${name} ENVIRONMENT env)
    set_tests_properties(${name}_pio PROPERTIES TIMEOUT ${timeout} SKIP_RETURN_CODE 77
      LABELS ${label} ENVIRONMENT "${env}")
  endfunction()
  kvt_nvme_test(test_nvme unit 60)
  kvt_nvme_test(test_nvme_fault unit 60)
  kvt_nvme_test(test_nvme_crash integration 60)
  kvt_nvme_test(test_nvme_corrupt unit 60)
  kvt_nvme_test(test_nvme_index unit 120)
  kvt_nvme_test(test_nvme_summary unit 120)
  kvt_nvme_test(test_nvme_batch unit 60)
  kvt_nvme_test(test_nvme_stream unit 60)
  kvt_nvme_test(test_nvme_blockdev unit 60)
  kvt_nvme_test(test_nvme_quota unit 60)
  kvt_nvme_test(test_nvme_replay integration 180 kvt_sim)
endif()
