#include "sim/report/sweep_report.h"

#include <cstdio>
#include <sstream>

#include "sim/report/format.h"

namespace memsim {
namespace {

/// "device used X, " on the cuda profile, "" on cpu.
std::string DeviceUsed(const SweepRow& r) {
  return r.peak_device_bytes > 0 ? "device used " + HumanBytes(r.peak_device_bytes) + ", " : "";
}

}  // namespace

nlohmann::ordered_json ToJson(const SweepRow& r) {
  nlohmann::ordered_json j;
  if (!r.status.ok()) {
    j["error"] = r.status.message();
    return j;
  }
  j["peak_live_bytes"] = r.peak_live_bytes;
  j["peak_phase"] = PhaseName(r.peak_phase);
  j["peak_allocated_bytes"] = r.peak_allocated_bytes;
  j["peak_reserved_bytes"] = r.peak_reserved_bytes;
  if (r.peak_device_bytes > 0) j["peak_device_used_bytes"] = r.peak_device_bytes;
  if (r.verdict != Verdict::kNoCapacity) j["verdict"] = VerdictName(r.verdict);
  j["oom"] = r.oom ? nlohmann::ordered_json(r.oom_message) : nlohmann::ordered_json();
  return j;
}

nlohmann::ordered_json ToJson(const SweepTable& t) {
  const SweepSpec& spec = *t.spec;
  nlohmann::ordered_json j;
  j["model"] = t.model;
  j["capacity_bytes"] = spec.base.alloc.capacity_bytes;
  j["configurations"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < t.rows.size(); ++i) {
    nlohmann::ordered_json row;
    std::vector<size_t> picks = spec.Picks(i);
    for (size_t k = 0; k < spec.axes.size(); ++k) {
      const std::string& label = spec.axes[k].labels[picks[k]];
      if (spec.axes[k].numeric) row[spec.axes[k].name] = std::stoll(label);
      else row[spec.axes[k].name] = label;
    }
    nlohmann::ordered_json result = ToJson(t.rows[i]);
    for (auto& [key, v] : result.items()) row[key] = v;
    j["configurations"].push_back(row);
  }
  return j;
}

std::string ToText(const SweepTable& t, bool csv) {
  const SweepSpec& spec = *t.spec;
  std::ostringstream o;
  std::vector<size_t> shown;
  for (size_t k = 0; k < spec.axes.size(); ++k)
    if (spec.axes[k].labels.size() > 1 || spec.axes[k].name == "batch") shown.push_back(k);
  const char* sep = csv ? "," : "  ";
  for (size_t k : shown) o << spec.axes[k].name << sep;
  o << "peak_live" << sep << "peak_allocated" << sep << "peak_reserved" << sep << "device_used" << sep << "fits\n";
  const bool cap = spec.base.alloc.capacity_bytes != 0;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    std::vector<size_t> picks = spec.Picks(i);
    for (size_t k : shown) {
      const std::string& label = spec.axes[k].labels[picks[k]];
      o << (label.empty() ? "-" : label) << sep;
    }
    const SweepRow& r = t.rows[i];
    if (!r.status.ok()) {
      o << "error: " << r.status.message() << "\n";
      continue;
    }
    auto bytes = [&](int64_t b) { return csv ? std::to_string(b) : HumanBytes(b); };
    o << bytes(r.peak_live_bytes) << sep << bytes(r.peak_allocated_bytes) << sep << bytes(r.peak_reserved_bytes) << sep
      << (r.peak_device_bytes > 0 ? bytes(r.peak_device_bytes) : "-") << sep << (!cap ? "-" : r.oom ? "no" : "yes") << "\n";
  }
  return o.str();
}

nlohmann::ordered_json ToJson(const FitReport& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["capacity_bytes"] = r.capacity_bytes;
  j["max_batch"] = r.fit.max_batch;
  j["at_max"] = r.fit.max_batch > 0 ? ToJson(r.fit.at_max) : nlohmann::ordered_json();
  j["next"] = r.fit.above.oom ? ToJson(r.fit.above) : nlohmann::ordered_json();
  j["evaluated"] = r.fit.evaluated;
  return j;
}

std::string ToText(const FitReport& r) {
  std::ostringstream o;
  if (r.fit.max_batch == 0) {
    o << r.model << ": batch 1 does not fit in " << HumanBytes(r.capacity_bytes) << ": " << r.fit.above.oom_message
      << "\n";
    return o.str();
  }
  o << r.model << ": largest batch that fits in " << HumanBytes(r.capacity_bytes) << ": " << r.fit.max_batch
    << " (" << DeviceUsed(r.fit.at_max) << "peak reserved " << HumanBytes(r.fit.at_max.peak_reserved_bytes) << ", allocated "
    << HumanBytes(r.fit.at_max.peak_allocated_bytes) << ")\n";
  if (r.fit.above.oom)
    o << "batch " << r.fit.max_batch + 1 << ": " << r.fit.above.oom_message << "\n";
  else
    o << "(the search stopped at --max-batch " << r.max_batch_limit << ")\n";
  return o.str();
}

nlohmann::ordered_json ToJson(const AdviseReport& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["baseline"] = ToJson(r.baseline);
  j["capacity_bytes"] = r.capacity_bytes;
  j["changes"] = nlohmann::ordered_json::array();
  for (const AdvisedChange& ch : r.changes) {
    nlohmann::ordered_json c = ToJson(ch.row);
    c["change"] = ch.what;
    c["changes_training"] = ch.changes_training;
    c["saves_reserved_bytes"] = r.baseline.peak_reserved_bytes - ch.row.peak_reserved_bytes;
    j["changes"].push_back(c);
  }
  if (r.max_batch) j["max_batch"] = *r.max_batch;
  return j;
}

std::string ToText(const AdviseReport& r) {
  std::ostringstream o;
  const SweepRow& b = r.baseline;
  const bool cap = r.capacity_bytes > 0;
  o << r.model << ": " << DeviceUsed(b) << "peak reserved " << HumanBytes(b.peak_reserved_bytes) << " (allocated "
    << HumanBytes(b.peak_allocated_bytes) << ")";
  if (cap) o << (b.oom ? ", does NOT fit in " : ", fits in ") << HumanBytes(r.capacity_bytes);
  o << "\n\nsingle changes, largest saving first:\n";
  for (const AdvisedChange& ch : r.changes) {
    if (!ch.row.status.ok()) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%+.1f %%",
                  100.0 * (ch.row.peak_reserved_bytes - b.peak_reserved_bytes) / std::max<int64_t>(b.peak_reserved_bytes, 1));
    o << "  " << HumanBytes(ch.row.peak_reserved_bytes) << "  (" << buf << ")  " << ch.what;
    if (ch.changes_training) o << "  [changes training]";
    if (cap) o << (ch.row.oom ? "  - still does not fit" : "  - fits");
    o << "\n";
  }
  if (r.max_batch) o << "\nlargest batch that fits as configured: " << *r.max_batch << "\n";
  return o.str();
}

}  // namespace memsim
