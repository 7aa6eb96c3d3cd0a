# Exporter tests (tools/export_torch.py, graphs/): Python unittest under Debian's torch 1.13.
# /usr/bin/python3 explicitly: the python3 on PATH may be one without torch.
foreach(t seed_models torchvision symbols_and_errors generate aten_parity survey llm op_coverage rnn aten_rules)
  add_test(NAME export.${t}
           COMMAND /usr/bin/python3 -m unittest discover -s tests/export -p test_${t}.py -v
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(export.${t} PROPERTIES TIMEOUT 300 LABELS export)
endforeach()

# --trace run against torch.fx: same memsim peaks (needs the memsim binary).
add_test(NAME export.run_parity
         COMMAND ${CMAKE_COMMAND} -E env MEMSIM=$<TARGET_FILE:memsim>
                 /usr/bin/python3 -m unittest discover -s tests/export -p test_run_parity.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.run_parity PROPERTIES TIMEOUT 300 LABELS export)

# --loss FILE.py:FUNC: a user's loss function on the output (needs the memsim binary).
add_test(NAME export.user_loss
         COMMAND ${CMAKE_COMMAND} -E env MEMSIM=$<TARGET_FILE:memsim>
                 /usr/bin/python3 -m unittest discover -s tests/export -p test_user_loss.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.user_loss PROPERTIES TIMEOUT 300 LABELS export)

# --optimizer: recording a user's optimizer and replaying it (needs the memsim binary).
add_test(NAME export.optimizer
         COMMAND ${CMAKE_COMMAND} -E env MEMSIM=$<TARGET_FILE:memsim>
                 /usr/bin/python3 -m unittest discover -s tests/export -p test_optimizer.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.optimizer PROPERTIES TIMEOUT 300 LABELS export)

# Hugging Face decoders (export_torch.py hf:FAMILY): the torch 2.x venv of `make deps`, which has
# transformers (requirements/torch2.txt).
set(MEMSIM_VENV ${PROJECT_SOURCE_DIR}/.venv CACHE PATH "the Python 2.x venv of `make deps` (requirements/torch2.txt)")
add_test(NAME export.hf
         COMMAND ${MEMSIM_VENV}/bin/python -m unittest discover -s tests/export -p test_hf.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.hf PROPERTIES TIMEOUT 300 LABELS export)

# ATen ops of composite losses on explicit rules under torch 2.x (export.aten_rules: 1.13).
add_test(NAME export.aten_rules_2x
         COMMAND ${MEMSIM_VENV}/bin/python -m unittest discover -s tests/export -p test_aten_rules.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.aten_rules_2x PROPERTIES TIMEOUT 300 LABELS export)

# nn.LSTM on the CPU under torch 2.x: oneDNN's mkldnn_rnn_layer per layer and direction (Note [oneDNN
# LSTM]); the torch 2.x venv (1.13's nn.LSTM is the composite, test_rnn.py).
add_test(NAME export.rnn_onednn
         COMMAND ${MEMSIM_VENV}/bin/python -m unittest discover -s tests/export -p test_rnn_onednn.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.rnn_onednn PROPERTIES TIMEOUT 300 LABELS export)

# Mixture of experts (graphs/moe_models.py): the torch 2.x venv (1.13 has no meta kernel for a
# stable argsort).
add_test(NAME export.moe
         COMMAND ${MEMSIM_VENV}/bin/python -m unittest discover -s tests/export -p test_moe.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.moe PROPERTIES TIMEOUT 300 LABELS export)

# The fine-tuning keys from a real model: peft's adapter dtype, bitsandbytes layers as "quantize_base"
# (the torch 2.x venv: peft and bitsandbytes).
add_test(NAME export.finetune_keys
         COMMAND ${MEMSIM_VENV}/bin/python -m unittest discover -s tests/export -p test_finetune_keys.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.finetune_keys PROPERTIES TIMEOUT 300 LABELS export)

# torch.compile regions (export_torch.py --compile): the wrapper reading, and a fresh export of the
# MLP against the validated graph (the torch 2.x venv: Inductor compiles C++ with the host's g++).
add_test(NAME export.compiled
         COMMAND ${MEMSIM_VENV}/bin/python -m unittest discover -s tests/export -p test_compiled.py -v
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.compiled PROPERTIES TIMEOUT 600 LABELS export)

# tools/coverage.py --quick: a few rows of docs/coverage.md that must stay exported and run (torch
# 1.13 here: torchvision, torch.nn, functional; the 2.x venv: the same and Hugging Face).
add_test(NAME export.coverage
         COMMAND /usr/bin/python3 tools/coverage.py --quick --memsim $<TARGET_FILE:memsim>
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.coverage PROPERTIES TIMEOUT 600 LABELS export)
add_test(NAME export.coverage_hf
         COMMAND ${MEMSIM_VENV}/bin/python tools/coverage.py --quick --memsim $<TARGET_FILE:memsim>
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(export.coverage_hf PROPERTIES TIMEOUT 600 LABELS export)
