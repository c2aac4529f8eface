# Warnings are set per target, never globally (STYLE.md 17).
function(kvt_target_warnings tgt)
  target_compile_options(${tgt} PRIVATE -Wall -Wextra -Wshadow -Wstrict-prototypes
    -Wmissing-prototypes -Wpointer-arith -Wformat=2 -Wvla -Wno-unused-parameter)
  target_compile_definitions(${tgt} PRIVATE _GNU_SOURCE)
  if(KVT_WERROR)
    target_compile_options(${tgt} PRIVATE -Werror)
  endif()
  kvt_target_sanitize(${tgt})
endfunction()

# A kvtier target: warnings, sanitizers, the include root.
function(kvt_target tgt)
  kvt_target_warnings(${tgt})
  target_include_directories(${tgt} PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/include)
endfunction()
