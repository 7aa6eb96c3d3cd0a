# Runs two memsim commands and checks they print the same report: -DCMD_A="memsim;run;..."
# -DCMD_B="memsim;run;..." (e.g. `--config FILE` against the flags the file means).
execute_process(COMMAND ${CMD_A} OUTPUT_VARIABLE a ERROR_VARIABLE err_a RESULT_VARIABLE rc_a)
execute_process(COMMAND ${CMD_B} OUTPUT_VARIABLE b ERROR_VARIABLE err_b RESULT_VARIABLE rc_b)
if(NOT rc_a EQUAL 0 OR NOT rc_b EQUAL 0)
  message(FATAL_ERROR "a command failed (${rc_a}, ${rc_b}): ${err_a} ${err_b}")
endif()
if(NOT a STREQUAL b)
  message(FATAL_ERROR "the reports differ:\n--- ${CMD_A}\n${a}\n--- ${CMD_B}\n${b}")
endif()
if(DEFINED EXPECT_STDERR AND NOT err_a MATCHES "${EXPECT_STDERR}")
  message(FATAL_ERROR "stderr of ${CMD_A} does not match ${EXPECT_STDERR}: ${err_a}")
endif()
