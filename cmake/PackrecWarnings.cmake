# Warnings for packrec's own targets. PRIVATE, so nothing is pushed onto consumers.
function(packrec_set_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wnon-virtual-dtor
    -Wold-style-cast -Woverloaded-virtual)
  if(PACKREC_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
