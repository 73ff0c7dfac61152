# Warning flags for every Vellum target (not for third-party code).
function(vellum_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
    -Wnon-virtual-dtor -Wno-missing-field-initializers)
  if(VELLUM_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(VELLUM_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
