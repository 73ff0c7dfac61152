# Warning flags for every Vellum target (not for third-party code).
function(vellum_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
    -Wnon-virtual-dtor -Wno-missing-field-initializers)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wshadow=local)
  endif()
  if(VELLUM_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(VELLUM_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  if(VELLUM_FUZZ)
    # Coverage for libFuzzer in every library a fuzz target links (scripts/fuzz.sh, clang only).
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link,address,undefined
      -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  if(VELLUM_TSAN)
    # The threads of the engine client, the server and the bench-serve client are instrumented;
    # the compute layers (kernels, model, sampling) are not: their OpenMP regions synchronise inside libgomp, which TSan
    # cannot see, and would only report false races.
    if(NOT target MATCHES "^vellum_(cpu|kernels|model|sampling)")
      target_compile_options(${target} PRIVATE -fsanitize=thread -fno-omit-frame-pointer)
    endif()
    target_link_options(${target} PRIVATE -fsanitize=thread)
  endif()
endfunction()
