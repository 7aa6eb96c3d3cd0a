// MEMSIM_CHECK: the one macro for bugs in memsim's own code (never for bad input, which gets a
// Status). Aborts with file and line.
#ifndef MEMSIM_LIB_UTIL_CHECK_H_
#define MEMSIM_LIB_UTIL_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define MEMSIM_CHECK(cond)                                                        \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "%s:%d: internal error: check failed: %s\n", __FILE__, \
                   __LINE__, #cond);                                              \
      std::abort();                                                               \
    }                                                                             \
  } while (0)

#endif  // MEMSIM_LIB_UTIL_CHECK_H_
