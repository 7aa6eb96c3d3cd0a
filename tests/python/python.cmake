# The Python module's tests (pytest under Debian's /usr/bin/python3, which has torch 1.13): the
# module built into build/python, compared with the memsim CLI built next to it.
if(TARGET memsim_python)
  foreach(t estimate timeline sweep errors config notebook install docs plan replay plan_sac)
    add_test(NAME python.${t}
             COMMAND ${Python_EXECUTABLE} -m pytest -q -p no:cacheprovider tests/python/test_${t}.py
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(python.${t} PROPERTIES TIMEOUT 600 LABELS python
      ENVIRONMENT "PYTHONPATH=${PROJECT_BINARY_DIR}/python;MEMSIM_CLI=$<TARGET_FILE:memsim>;MEMSIM_BUILD=${PROJECT_BINARY_DIR};MPLBACKEND=Agg;PYDEVD_DISABLE_FILE_VALIDATION=1")
  endforeach()
endif()

# What needs torch 2.x (create_selective_checkpoint_contexts): the same module under the venv of
# `make deps` (requirements/torch2.txt; Debian's Python 3 too, so build/python loads there).
set(MEMSIM_VENV ${PROJECT_SOURCE_DIR}/.venv CACHE PATH "the Python 2.x venv of `make deps` (requirements/torch2.txt)")
if(TARGET memsim_python)
  foreach(t sac_policy)
    add_test(NAME python.${t}
             COMMAND ${MEMSIM_VENV}/bin/python -m pytest -q -p no:cacheprovider tests/python/test_${t}.py
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(python.${t} PROPERTIES TIMEOUT 600 LABELS python
      ENVIRONMENT "PYTHONPATH=${PROJECT_BINARY_DIR}/python;MEMSIM_CLI=$<TARGET_FILE:memsim>;MEMSIM_BUILD=${PROJECT_BINARY_DIR};MPLBACKEND=Agg")
  endforeach()
endif()
