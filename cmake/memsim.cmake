# Helpers shared by every CMakeLists.txt of memsim.

# memsim_warnings(TARGET): the project's warning set, per target (never CMAKE_CXX_FLAGS).
function(memsim_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(MEMSIM_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  target_compile_features(${target} PUBLIC cxx_std_20)
endfunction()

# memsim_fast_malloc(TARGET): link an executable with tcmalloc (libtcmalloc-minimal4) when it is
# installed. Simulating a configuration makes many small, short-lived allocations (shapes, plans,
# grads); tcmalloc's thread caches make one ResNet-50 configuration about 1.3x faster and keep two
# threads from contending (docs/benchmarks.md). Never for the Python module (the interpreter's
# malloc is already in use when it loads).
find_library(MEMSIM_TCMALLOC NAMES tcmalloc_minimal libtcmalloc_minimal.so.4)
function(memsim_fast_malloc target)
  if(MEMSIM_TCMALLOC AND NOT MEMSIM_SANITIZE AND NOT MEMSIM_FUZZ)
    target_link_libraries(${target} PRIVATE ${MEMSIM_TCMALLOC})
  endif()
endfunction()
