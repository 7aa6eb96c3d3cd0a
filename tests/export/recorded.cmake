# Exporter tests that need the memsim binary, each under Debian's torch 1.13 (export.NAME) and the
# 2.x venv (export.NAME_2x): recorded rules (Note [Recorded rules]: the round trip against explicit
# rules and --trace auto on ops with no rule) and export by execution on CPU tensors (Note
# [Data-dependent sizes] in docs/exporter.md).
function(memsim_export_test_both name)
  foreach(py /usr/bin/python3 ${MEMSIM_VENV}/bin/python)
    set(test export.${name})
    if(NOT py STREQUAL "/usr/bin/python3")
      set(test export.${name}_2x)
    endif()
    add_test(NAME ${test}
             COMMAND ${CMAKE_COMMAND} -E env MEMSIM=$<TARGET_FILE:memsim>
                     ${py} -m unittest discover -s tests/export -p test_${name}.py -v
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(${test} PROPERTIES TIMEOUT 300 LABELS export)
  endforeach()
endfunction()
memsim_export_test_both(recorded)
memsim_export_test_both(data_dependent)
