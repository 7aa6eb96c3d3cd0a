// The test data kept in the repository (tests/data/, see its README.md): a test that needs a
// file there fails when it is missing, it never skips.
#ifndef MEMSIM_TESTS_TESTING_TEST_DATA_H_
#define MEMSIM_TESTS_TESTING_TEST_DATA_H_

#include <string>

namespace memsim::test_data {

/// Absolute path of tests/data/|relative| in the source tree.
inline std::string TestDataPath(const std::string& relative) {
  return std::string(MEMSIM_SOURCE_DIR) + "/tests/data/" + relative;
}

}  // namespace memsim::test_data

#endif  // MEMSIM_TESTS_TESTING_TEST_DATA_H_
