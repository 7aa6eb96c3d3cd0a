# `memsim sweep` at scale (tests/sweep/sweep_cli_test.py): thread-count independence, SIGKILL +
# --resume, --shard + merge, and memory bounded over 10 million rows.
find_program(MEMSIM_SWEEP_PYTHON3 NAMES python3 REQUIRED)
foreach(mode threads resume shards memory files)
  add_test(NAME sweep.${mode}
           COMMAND ${MEMSIM_SWEEP_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/sweep_cli_test.py $<TARGET_FILE:memsim>
                   ${PROJECT_SOURCE_DIR} ${mode})
endforeach()
set_tests_properties(sweep.memory PROPERTIES TIMEOUT 1500)
