# Helpers shared by every CMakeLists.txt of memsim.

# memsim_warnings(TARGET): the project's warning set, per target (never CMAKE_CXX_FLAGS).
function(memsim_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(MEMSIM_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  target_compile_features(${target} PUBLIC cxx_std_20)
endfunction()
