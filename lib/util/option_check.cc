#include "lib/util/option_check.h"

#include <charconv>

#include "lib/util/checked.h"
#include "lib/util/text_limits.h"

namespace memsim {
namespace {

Status OptionError(std::string_view option, std::string_view text, const std::string& why) {
  return Status::InvalidArgument(std::string(option) + ": '" + Excerpt(text) + "' " + why);
}

std::string Range(int64_t lo, int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

}  // namespace

Result<int64_t> ParseIntOption(std::string_view option, std::string_view text, int64_t lo,
                               int64_t hi) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range)
    return OptionError(option, text, "does not fit in 64 bits");
  if (ec != std::errc() || p != end || text.empty())
    return OptionError(option, text, "is not an integer");
  MEMSIM_RETURN_IF_ERROR(CheckIntOption(option, v, lo, hi));
  return v;
}

Status CheckIntOption(std::string_view option, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi)
    return OptionError(option, std::to_string(value), "is out of range " + Range(lo, hi));
  return Status::OK();
}

Result<std::vector<int64_t>> ParseIntListOption(std::string_view option, std::string_view text,
                                                int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) return OptionError(option, text, "has an empty item");
    MEMSIM_ASSIGN_OR_RETURN(int64_t v, ParseIntOption(option, item, lo, hi));
    out.push_back(v);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

Result<int64_t> CheckedCount(const std::vector<int64_t>& counts, int64_t limit,
                             std::string_view what) {
  int64_t n = 1;
  for (int64_t c : counts) {
    if (c <= 0) return Status::InvalidArgument(std::string(what) + ": an empty list");
    std::optional<int64_t> m = CheckedMul(n, c);
    if (!m || *m > limit)
      return Status::InvalidArgument(std::string(what) + ": more than " + std::to_string(limit) +
                                     " combinations");
    n = *m;
  }
  return n;
}

}  // namespace memsim
