# The GPU recording script (tests/oracle/gpu/record_gpu.py) is run on a lent GPU machine only; its
# --dry-run runs every case at tiny sizes on the CPU (the torch 2.x venv: transformers, peft), so the
# script stays working on the machines without a GPU.
set(MEMSIM_VENV ${PROJECT_SOURCE_DIR}/.venv CACHE PATH "the Python 2.x venv of `make deps` (requirements/torch2.txt)")
add_test(NAME oracle.gpu_record_dry_run
         COMMAND ${MEMSIM_VENV}/bin/python tests/oracle/gpu/record_gpu.py ${CMAKE_BINARY_DIR}/gpu_record_dry_run --dry-run
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(oracle.gpu_record_dry_run PROPERTIES TIMEOUT 300 LABELS export
                     PASS_REGULAR_EXPRESSION "record_gpu.py: 18 cases, failed: none")
# tests/oracle/gpu/record_ranks_gpu.py (rank 0 of FSDP2 / FSDP2 x TP through a fake process group):
# its --dry-run builds a tiny Llama on the meta device and steps it on the CPU.
add_test(NAME oracle.gpu_ranks_dry_run
         COMMAND ${MEMSIM_VENV}/bin/python tests/oracle/gpu/record_ranks_gpu.py ${CMAKE_BINARY_DIR}/gpu_ranks_dry_run --dry-run
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(oracle.gpu_ranks_dry_run PROPERTIES TIMEOUT 300 LABELS export
                     PASS_REGULAR_EXPRESSION "record_ranks_gpu.py: 7 runs, failed: none")
# tests/oracle/gpu/record_pp_gpu.py (the pipeline ranks of the 70B plan through a fake process group):
# its --dry-run cuts a tiny Llama into the 4 x 2 stages of the cases and steps each pp rank on the CPU.
add_test(NAME oracle.gpu_pp_dry_run
         COMMAND ${MEMSIM_VENV}/bin/python tests/oracle/gpu/record_pp_gpu.py ${CMAKE_BINARY_DIR}/gpu_pp_dry_run --dry-run
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(oracle.gpu_pp_dry_run PROPERTIES TIMEOUT 300 LABELS export
                     PASS_REGULAR_EXPRESSION "record_pp_gpu.py: 12 runs, failed: none")
# tests/oracle/gpu/record_ep_gpu.py (the expert-parallel ranks of the Mixtral plan through a fake process group):
# its --dry-run builds a tiny MoE decoder (8 experts, top 2) on the meta device, ExpertParallel + FSDP2 over each
# case's dp_shard ranks, steps each recorded rank on the CPU and checks that every layer routed balanced.
add_test(NAME oracle.gpu_ep_dry_run
         COMMAND ${MEMSIM_VENV}/bin/python tests/oracle/gpu/record_ep_gpu.py ${CMAKE_BINARY_DIR}/gpu_ep_dry_run --dry-run
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(oracle.gpu_ep_dry_run PROPERTIES TIMEOUT 300 LABELS export FIXTURES_SETUP gpu_ep_dry_run
                     PASS_REGULAR_EXPRESSION "record_ep_gpu.py: 5 runs, failed: none")
# tools/validate_gpu_ep.py on that dry run's summary (no device figures: memsim's side of every row, the plans found)
add_test(NAME oracle.gpu_ep_validate_dry_run
         COMMAND ${MEMSIM_VENV}/bin/python tools/validate_gpu_ep.py --memsim $<TARGET_FILE:memsim> --data ${CMAKE_BINARY_DIR}/gpu_ep_dry_run
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(oracle.gpu_ep_validate_dry_run PROPERTIES TIMEOUT 300 LABELS export FIXTURES_REQUIRED gpu_ep_dry_run
                     PASS_REGULAR_EXPRESSION "5 ranks \\(0 recorded on the device\\)")
