#include "lib/util/nearest.h"

#include <algorithm>
#include <cctype>

namespace memsim {

size_t EditDistance(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return std::tolower(static_cast<unsigned char>(c)); };
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (lower(a[i - 1]) != lower(b[j - 1]))});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string NearestName(std::string_view name, const std::vector<std::string_view>& candidates,
                        size_t max_edits) {
  std::string_view best;
  size_t best_d = max_edits + 1;
  for (std::string_view c : candidates)
    if (size_t d = EditDistance(name, c); d < best_d) best = c, best_d = d;
  return std::string(best);
}

}  // namespace memsim
