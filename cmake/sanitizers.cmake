# ASan + UBSan on every kvtier target when KVT_SANITIZE is on; TSan when KVT_TSAN is on (they
# cannot be combined). KVT_LIBFUZZER adds libFuzzer's coverage to every target (`make fuzz`).
function(kvt_target_sanitize tgt)
  if(KVT_SANITIZE)
    target_compile_options(${tgt} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined)
    target_link_options(${tgt} PRIVATE -fsanitize=address,undefined)
    if(KVT_LIBFUZZER)
      target_compile_options(${tgt} PRIVATE -fsanitize=fuzzer-no-link)
    endif()
  elseif(KVT_TSAN)
    target_compile_options(${tgt} PRIVATE -fsanitize=thread -fno-omit-frame-pointer)
    target_link_options(${tgt} PRIVATE -fsanitize=thread)
  endif()
endfunction()
