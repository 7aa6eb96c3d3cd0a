# The Slurm job-array path of `memsim sweep`, run on a single-node Slurm started for the test
# (tests/slurm/slurm_sweep_test.py; needs root and the packages `make deps` installs).
find_program(MEMSIM_SLURM_PYTHON3 NAMES python3 REQUIRED)
add_test(NAME slurm.sweep_job_array
         COMMAND ${MEMSIM_SLURM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/slurm_sweep_test.py $<TARGET_FILE:memsim> ${PROJECT_SOURCE_DIR})
set_tests_properties(slurm.sweep_job_array PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE)
