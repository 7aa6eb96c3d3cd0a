# Runs a memsim command that writes FILE, and compares FILE with a golden file.
# -DCMD="memsim;run;...;--timeline;<FILE>" -DFILE=path -DGOLDEN=path ; UPDATE=1 rewrites.
execute_process(COMMAND ${CMD} OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "command failed (${rc}): ${err}")
endif()
if(DEFINED ENV{UPDATE})
  configure_file(${FILE} ${GOLDEN} COPYONLY)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${FILE} ${GOLDEN} RESULT_VARIABLE diff)
if(NOT diff EQUAL 0)
  message(FATAL_ERROR "${FILE} differs from ${GOLDEN}")
endif()
