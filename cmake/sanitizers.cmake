# ASan + UBSan on every kvtier target when KVT_SANITIZE is on.
function(kvt_target_sanitize tgt)
  if(KVT_SANITIZE)
    target_compile_options(${tgt} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined)
    target_link_options(${tgt} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
