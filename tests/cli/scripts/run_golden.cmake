# Runs a memsim command and compares its stdout with a golden file.
# -DCMD="memsim;run;..." -DGOLDEN=path -DOUT=path ; set UPDATE=1 in the environment to rewrite.
execute_process(COMMAND ${CMD} OUTPUT_FILE ${OUT} ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "command failed (${rc}): ${err}")
endif()
if(DEFINED ENV{UPDATE})
  configure_file(${OUT} ${GOLDEN} COPYONLY)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT} ${GOLDEN} RESULT_VARIABLE diff)
if(NOT diff EQUAL 0)
  execute_process(COMMAND diff -u ${GOLDEN} ${OUT})
  message(FATAL_ERROR "output differs from ${GOLDEN}")
endif()
