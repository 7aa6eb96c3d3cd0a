// Checked command-line values: every integer option is parsed from its text (no silent wrap,
// no sentinel such as "-1 = not given" that a user can type) and range-checked, and the error
// names the option. Used by tools/memsim for --batch, --set, workspace sizes and sweep lists.
#ifndef MEMSIM_LIB_UTIL_OPTION_CHECK_H_
#define MEMSIM_LIB_UTIL_OPTION_CHECK_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/util/status.h"

namespace memsim {

/// Parses |text| as a decimal integer in [lo, hi]. Errors (InvalidArgument) name |option|:
/// "--batch: '-5' is out of range [1, 1099511627776]", "--batch: 'x' is not an integer",
/// "--cublas-workspace: '9223372036854775808' does not fit in 64 bits".
Result<int64_t> ParseIntOption(std::string_view option, std::string_view text, int64_t lo,
                               int64_t hi);

/// Parses a byte count in [0, hi]: a plain integer (bytes) or a number with a unit, decimal
/// (KB, MB, GB, TB: powers of 1000) or binary (KiB, MiB, GiB, TiB: powers of 1024), case-
/// insensitive, e.g. "24GB", "80GiB", "1.5 GiB". Errors name |option| and the accepted forms.
Result<int64_t> ParseBytesOption(std::string_view option, std::string_view text, int64_t hi);

/// The largest count an option may give (ranks, shards, steps, accumulation passes, list items).
inline constexpr int64_t kMaxOptionCount = 1000000;

/// "K/N" (shard K of N, 1 <= K <= N <= kMaxOptionCount): digits only, no sign, no saturation.
/// Errors name |option| and quote an excerpt of |text|.
Result<std::pair<int64_t, int64_t>> ParseShardOption(std::string_view option, std::string_view text);

/// Range-checks an already parsed |value| of |option| the same way.
Status CheckIntOption(std::string_view option, int64_t value, int64_t lo, int64_t hi);

/// Parses a comma-separated list ("8,16,32") with ParseIntOption for each item; an empty item
/// or an empty list is an error.
Result<std::vector<int64_t>> ParseIntListOption(std::string_view option, std::string_view text,
                                                int64_t lo, int64_t hi);

/// The product of |counts| (a sweep's number of configurations), or an error naming |what|
/// when it exceeds |limit| or overflows; a zero count is an error too (nothing to run).
Result<int64_t> CheckedCount(const std::vector<int64_t>& counts, int64_t limit,
                             std::string_view what);

}  // namespace memsim

#endif  // MEMSIM_LIB_UTIL_OPTION_CHECK_H_
