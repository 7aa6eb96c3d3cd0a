# Recorded rules (Note [Recorded rules]): the round trip against explicit rules and --trace auto on
# ops with no rule, under Debian's torch 1.13 and the 2.x venv (both need the memsim binary).
add_test(NAME export.recorded
         COMMAND ${CMAKE_COMMAND} -E env MEMSIM=$<TARGET_FILE:memsim>
                 /usr/bin/python3 -m unittest discover -s tests/export -p test_recorded.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.recorded PROPERTIES TIMEOUT 300 LABELS export)
add_test(NAME export.recorded_2x
         COMMAND ${CMAKE_COMMAND} -E env MEMSIM=$<TARGET_FILE:memsim>
                 ${MEMSIM_VENV}/bin/python -m unittest discover -s tests/export -p test_recorded.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.recorded_2x PROPERTIES TIMEOUT 300 LABELS export)

# Export by execution on CPU tensors (Note [Data-dependent sizes] in docs/exporter.md) under both torches.
add_test(NAME export.data_dependent
         COMMAND ${CMAKE_COMMAND} -E env MEMSIM=$<TARGET_FILE:memsim>
                 /usr/bin/python3 -m unittest discover -s tests/export -p test_data_dependent.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.data_dependent PROPERTIES TIMEOUT 300 LABELS export)
add_test(NAME export.data_dependent_2x
         COMMAND ${CMAKE_COMMAND} -E env MEMSIM=$<TARGET_FILE:memsim>
                 ${MEMSIM_VENV}/bin/python -m unittest discover -s tests/export -p test_data_dependent.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.data_dependent_2x PROPERTIES TIMEOUT 300 LABELS export)
