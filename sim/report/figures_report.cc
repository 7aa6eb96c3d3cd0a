#include "sim/report/figures_report.h"

#include "sim/report/format.h"

namespace memsim {
namespace {

using nlohmann::ordered_json;

ordered_json BytesOrNull(int64_t b) { return b > 0 ? ordered_json(b) : ordered_json(nullptr); }

}  // namespace

ordered_json FiguresJson(const MemoryFigures& f) {
  ordered_json j;
  j["peak_live_bytes"] = f.peak_live_bytes;
  j["peak_phase"] = PhaseName(f.peak_phase);
  j["peak_allocated_bytes"] = f.peak_allocated_bytes;
  j["peak_reserved_bytes"] = f.peak_reserved_bytes;
  j["peak_device_used_bytes"] = BytesOrNull(f.peak_device_used_bytes);
  j["capacity_bytes"] = BytesOrNull(f.capacity_bytes);
  j["oom"] = f.oom;
  j["oom_op"] = f.oom ? ordered_json(f.oom_op) : ordered_json(nullptr);
  j["oom_phase"] = f.oom ? ordered_json(PhaseName(f.oom_phase)) : ordered_json(nullptr);
  j["verdict"] = f.verdict == Verdict::kNoCapacity ? ordered_json(nullptr) : ordered_json(VerdictName(f.verdict));
  return j;
}

std::vector<std::string> FigureColumns() {
  return {"peak_live_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "peak_device_used_bytes", "oom", "oom_op"};
}

std::vector<std::string> FigureCells(const MemoryFigures& f, bool csv) {
  auto bytes = [&](int64_t b) { return csv ? std::to_string(b) : HumanBytes(b); };
  const bool cap = f.capacity_bytes > 0;
  return {bytes(f.peak_live_bytes),
          bytes(f.peak_allocated_bytes),
          bytes(f.peak_reserved_bytes),
          f.peak_device_used_bytes > 0 ? bytes(f.peak_device_used_bytes) : "-",
          !cap ? "-" : f.oom ? "true" : "false",
          f.oom && !f.oom_op.empty() ? f.oom_op : "-"};
}

std::string VerdictLine(const MemoryFigures& f, const std::string& gpu) {
  if (f.capacity_bytes <= 0) return "";
  const std::string where = " on " + (gpu.empty() ? std::string("the device") : gpu) + ": ";
  const std::string what = f.peak_device_used_bytes > 0 ? "device used " : "peak reserved ";
  std::string o;
  if (!f.oom) {
    o = "fits" + where + what + HumanBytes(f.used_bytes()) + " of " + HumanBytes(f.capacity_bytes);
    if (f.peak_device_used_bytes > 0 && f.verdict == Verdict::kFits)
      o += "; fits at the top of the uncertainty range too (" + HumanBytes(f.device_high_bytes) + ")";
    else if (f.verdict == Verdict::kUncertain)
      o += "; does not fit at the top of the uncertainty range (" + HumanBytes(f.device_high_bytes) + ")";
    return o;
  }
  o = "does not fit" + where + "would need " + HumanBytes(f.used_bytes()) + " of " + HumanBytes(f.capacity_bytes) +
      ", OOM " + (f.oom_op.empty() ? std::string("in ") : "at op " + f.oom_op + " in ") +
      std::string(PhaseName(f.oom_phase));
  if (f.verdict == Verdict::kUncertain)
    o += "; fits at the bottom of the uncertainty range (" + HumanBytes(f.device_low_bytes) + ")";
  return o;
}

}  // namespace memsim
