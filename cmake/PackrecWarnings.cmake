# Warnings for packrec's own targets. PRIVATE, so nothing is pushed onto consumers.
function(packrec_set_warnings target)
  # C++ only: nvcc takes its own flags (the .cu file is checked with -Werror=all-warnings).
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wnon-virtual-dtor
    -Wold-style-cast -Woverloaded-virtual>)
  if(PACKREC_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                             $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
endfunction()
