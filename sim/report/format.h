// Formatting shared by the text renderings of every report.
#ifndef MEMSIM_SIM_REPORT_FORMAT_H_
#define MEMSIM_SIM_REPORT_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace memsim {

/// "1.23 GiB", "512 B".
std::string HumanBytes(int64_t bytes);

/// Ranks as ranges: "0", "1-7", "0,2".
std::string RankList(const std::vector<int>& ranks);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_FORMAT_H_
