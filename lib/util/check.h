// MEMSIM_CHECK: the one macro for bugs in memsim's own code (never for bad input, which gets a
// Status and is validated before the code that checks). A failed check throws InternalError
// naming the file and line, never aborts: the CLI exits with kInternalErrorExit (not bad input's
// 2) and the Python module raises memsim.Error, so a notebook's kernel survives a memsim bug.
#ifndef MEMSIM_LIB_UTIL_CHECK_H_
#define MEMSIM_LIB_UTIL_CHECK_H_

#include <stdexcept>
#include <string>

namespace memsim {

/// A bug in memsim (a MEMSIM_CHECK that failed), as distinct from bad input.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// The CLI's exit code for an internal error (bad input: 2).
inline constexpr int kInternalErrorExit = 3;

[[noreturn]] inline void FailCheck(const char* file, int line, const char* cond) {
  throw InternalError(std::string(file) + ":" + std::to_string(line) + ": internal error: check failed: " + cond +
                      " (a bug in memsim: please report it with the command that gave it)");
}

}  // namespace memsim

#define MEMSIM_CHECK(cond)                                     \
  do {                                                         \
    if (!(cond)) ::memsim::FailCheck(__FILE__, __LINE__, #cond); \
  } while (0)

#endif  // MEMSIM_LIB_UTIL_CHECK_H_
