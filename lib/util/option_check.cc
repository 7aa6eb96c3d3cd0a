#include "lib/util/option_check.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

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

/// The factor of a byte unit ("" and "b": 1), case-insensitive; 0 for an unknown unit.
int64_t UnitFactor(std::string unit) {
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  static const struct { const char* name; int64_t factor; } kUnits[] = {
      {"", 1}, {"b", 1},
      {"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000}, {"tb", int64_t{1000} * 1000 * 1000 * 1000},
      {"kib", int64_t{1} << 10}, {"mib", int64_t{1} << 20}, {"gib", int64_t{1} << 30}, {"tib", int64_t{1} << 40}};
  for (const auto& u : kUnits)
    if (unit == u.name) return u.factor;
  return 0;
}

}  // namespace

Result<int64_t> ParseBytesOption(std::string_view option, std::string_view text, int64_t hi) {
  const std::string forms = "expected bytes, or a number with KB/MB/GB/TB (powers of 1000) or KiB/MiB/GiB/TiB "
                            "(powers of 1024), e.g. 24GB or 80GiB";
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
  std::string unit(text.substr(end));
  unit.erase(0, unit.find_first_not_of(' '));
  const int64_t factor = UnitFactor(unit);
  if (end == 0 || factor == 0) return OptionError(option, text, "is not a size: " + forms);
  if (factor == 1) return ParseIntOption(option, text.substr(0, end), 0, hi);
  double number = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + end, number);
  if (ec != std::errc() || ptr != text.data() + end) return OptionError(option, text, "is not a size: " + forms);
  const double bytes = std::round(number * static_cast<double>(factor));
  if (!(bytes <= static_cast<double>(hi)))
    return OptionError(option, text, "is more than " + std::to_string(hi) + " bytes");
  return static_cast<int64_t>(bytes);
}

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

Result<std::pair<int64_t, int64_t>> ParseShardOption(std::string_view option, std::string_view text) {
  const size_t slash = text.find('/');
  auto digits = [](std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  if (slash == std::string_view::npos || !digits(text.substr(0, slash)) || !digits(text.substr(slash + 1)))
    return OptionError(option, text, "is not K/N (shard K of N, e.g. 2/8)");
  MEMSIM_ASSIGN_OR_RETURN(int64_t n, ParseIntOption(option, text.substr(slash + 1), 1, kMaxOptionCount));
  MEMSIM_ASSIGN_OR_RETURN(int64_t k, ParseIntOption(option, text.substr(0, slash), 1, n));
  return std::make_pair(k, n);
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
