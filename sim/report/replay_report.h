// `memsim replay`'s report (text and JSON) of a ReplayReport (sim/replay/replay.h): recorded vs
// simulated peaks and decisions, the fragmentation at the peak and the what-ifs. Shared by the
// CLI and the Python module (memsim.replay), so both give the same bytes.
#ifndef MEMSIM_SIM_REPORT_REPLAY_REPORT_H_
#define MEMSIM_SIM_REPORT_REPLAY_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>

#include "sim/replay/replay.h"

namespace memsim {

/// The text report of replaying |file|.
std::string ReplayText(const std::string& file, const ReplayReport& r);
/// The JSON document: {"file": ..., then ReplayReportToJson's keys}.
nlohmann::ordered_json ReplayJson(const std::string& file, const ReplayReport& r);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_REPLAY_REPORT_H_
