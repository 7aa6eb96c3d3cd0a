# Every hostile input of tests/data/robustness/ must make the CLI exit 2 with a short message in
# bounded time and memory (tools/robustness_report.py checks each; docs/robustness.md lists them).
find_program(MEMSIM_PYTHON3 NAMES python3)
if(MEMSIM_PYTHON3)
  add_test(NAME robustness.hostile_inputs
           COMMAND ${MEMSIM_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/robustness_report.py
                   --memsim $<TARGET_FILE:memsim>
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(robustness.hostile_inputs PROPERTIES TIMEOUT 300)
endif()
