// "Did you mean": the name nearest to a misspelt one by edit distance. One implementation, used
// by --gpu (sim/gpus.cc) and by the CLI's unknown commands and options (sim/options/parse_error.cc).
#ifndef MEMSIM_LIB_UTIL_NEAREST_H_
#define MEMSIM_LIB_UTIL_NEAREST_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace memsim {

/// Levenshtein distance (insertions, deletions, substitutions), case-insensitive.
size_t EditDistance(std::string_view a, std::string_view b);

/// The |candidates| entry nearest to |name| (the first of equally near ones), or "" when none is
/// at most |max_edits| away.
std::string NearestName(std::string_view name, const std::vector<std::string_view>& candidates,
                        size_t max_edits = 3);

}  // namespace memsim

#endif  // MEMSIM_LIB_UTIL_NEAREST_H_
