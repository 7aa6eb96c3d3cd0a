#include "sim/report/sweep_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "sim/report/figures_report.h"
#include "sim/report/format.h"
#include "lib/util/option_check.h"
#include "lib/util/text_limits.h"

namespace memsim {
namespace {

/// "device used X" on the cuda profile, "peak reserved X" on cpu; "would need X" after an OOM.
std::string Used(const MemoryFigures& r) {
  return (r.oom ? "would need " : r.peak_device_used_bytes > 0 ? "device used " : "peak reserved ") +
         HumanBytes(r.used_bytes());
}

}  // namespace

nlohmann::ordered_json ToJson(const SweepRow& r) {
  nlohmann::ordered_json j;
  if (!r.status.ok()) {
    j["error"] = r.status.message();
    return j;
  }
  j = FiguresJson(r);
  j["oom_message"] = r.oom ? nlohmann::ordered_json(r.oom_message) : nlohmann::ordered_json();
  return j;
}

namespace {

/// The axes a text or CSV table shows: those that vary, and the batch.
std::vector<size_t> ShownAxes(const SweepSpec& spec) {
  std::vector<size_t> shown;
  for (size_t k = 0; k < spec.axes.size(); ++k)
    if (spec.axes[k].labels.size() > 1 || spec.axes[k].name == "batch") shown.push_back(k);
  return shown;
}

/// Whether a configuration has several ranks: rows then name the rank they are (LargestRankRow).
bool SeveralRanks(const SweepSpec& spec) {
  if (spec.base.sim.parallel.world > 1) return true;
  for (const SweepAxis& ax : spec.axes)
    if (ax.name == "world")
      for (const std::string& label : ax.labels)
        if (std::stoll(label) > 1) return true;
  return false;
}

/// Configuration |i|'s axis values and results as one JSON object (|index|: "index" first).
nlohmann::ordered_json RowObject(const SweepSpec& spec, size_t i, const SweepRow& r, bool index) {
  nlohmann::ordered_json row;
  if (index) row["index"] = i;
  std::vector<size_t> picks = spec.Picks(i);
  for (size_t k = 0; k < spec.axes.size(); ++k) {
    const std::string& label = spec.axes[k].labels[picks[k]];
    if (spec.axes[k].numeric) row[spec.axes[k].name] = std::stoll(label);
    else row[spec.axes[k].name] = label;
  }
  if (r.status.ok() && SeveralRanks(spec)) row["rank"] = r.rank;
  nlohmann::ordered_json result = ToJson(r);
  for (auto& [key, v] : result.items()) row[key] = v;
  return row;
}

uint64_t Fnv1a(uint64_t h, std::string_view s) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return (h ^ 0xff) * 0x100000001b3ULL;  // a separator, so ("ab","c") != ("a","bc")
}

}  // namespace

nlohmann::ordered_json ToJson(const SweepTable& t) {
  const SweepSpec& spec = *t.spec;
  nlohmann::ordered_json j;
  j["model"] = t.model;
  j["capacity_bytes"] = spec.base.alloc.capacity_bytes > 0 ? nlohmann::ordered_json(spec.base.alloc.capacity_bytes)
                                                           : nlohmann::ordered_json();
  j["configurations"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < t.rows.size(); ++i) j["configurations"].push_back(RowObject(spec, i, t.rows[i], false));
  return j;
}


std::string SweepHeaderLine(const SweepSpec& spec, SweepFormat f, bool index) {
  if (f == SweepFormat::kJsonl) return "";
  const char* sep = f == SweepFormat::kCsv ? "," : "  ";
  std::string o;
  if (index) o += std::string("index") + sep;
  for (size_t k : ShownAxes(spec)) o += (f == SweepFormat::kCsv ? CsvField(spec.axes[k].name) : spec.axes[k].name) + sep;
  if (SeveralRanks(spec)) o += std::string("rank") + sep;
  const std::vector<std::string> cols = FigureColumns();
  for (size_t k = 0; k < cols.size(); ++k) o += cols[k] + (k + 1 < cols.size() ? sep : "");
  return o + (f == SweepFormat::kCsv ? ",error\n" : "\n");  // CSV: an invalid configuration's message, quoted
}

std::string SweepRowLine(const SweepSpec& spec, size_t i, const SweepRow& r, SweepFormat f, bool index) {
  if (f == SweepFormat::kJsonl) return RowObject(spec, i, r, index).dump() + "\n";
  const bool csv = f == SweepFormat::kCsv;
  const char* sep = csv ? "," : "  ";
  std::string o;
  auto cell = [csv](const std::string& v) { return csv ? CsvField(v) : v; };  // RFC 4180 quoting
  if (index) o += std::to_string(i) + sep;
  std::vector<size_t> picks = spec.Picks(i);
  for (size_t k : ShownAxes(spec)) {
    const std::string& label = spec.axes[k].labels[picks[k]];
    o += cell(label.empty() ? "-" : label) + sep;
  }
  // Text: the message after the axes. CSV: every column, the figures empty, the message in `error`.
  if (!r.status.ok() && !csv) return o + "error: " + r.status.message() + "\n";
  if (!r.status.ok()) return o + (SeveralRanks(spec) ? "," : "") + std::string(FigureColumns().size(), ',') +
                             CsvField(r.status.message()) + "\n";
  if (SeveralRanks(spec)) o += std::to_string(r.rank) + sep;
  const std::vector<std::string> cells = FigureCells(r, csv);
  for (size_t k = 0; k < cells.size(); ++k) o += cell(cells[k]) + (k + 1 < cells.size() ? sep : "");
  return o + (csv ? ",\n" : "\n");
}

std::string ToText(const SweepTable& t, bool csv) {
  const SweepSpec& spec = *t.spec;
  const SweepFormat f = csv ? SweepFormat::kCsv : SweepFormat::kText;
  std::string o = SweepHeaderLine(spec, f, false);
  for (size_t i = 0; i < t.rows.size(); ++i) o += SweepRowLine(spec, i, t.rows[i], f, false);
  return o;
}

std::string SweepFingerprint(const std::string& graph_content, const std::string& options) {
  uint64_t h = Fnv1a(0xcbf29ce484222325ULL, graph_content);
  h = Fnv1a(h, "\n" + options);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

namespace {

std::vector<std::string> Words(const std::string& s) {
  std::vector<std::string> w;
  std::istringstream in(s);
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

}  // namespace

std::string SweepMetaMismatch(const SweepMeta& file, const SweepMeta& run) {
  if (file.model != run.model) return "model " + Excerpt(file.model) + ", this sweep's " + Excerpt(run.model);
  if (file.shards != run.shards || file.shard != run.shard)
    return "shard " + std::to_string(file.shard) + "/" + std::to_string(file.shards) + ", this run's " +
           std::to_string(run.shard) + "/" + std::to_string(run.shards);
  if (file.configurations != run.configurations)
    return std::to_string(file.configurations) + " configurations, this sweep's " + std::to_string(run.configurations);
  if (file.fingerprint == run.fingerprint) return "";
  if (file.options != run.options) {
    const std::vector<std::string> a = Words(file.options), b = Words(run.options);
    for (const std::string& w : a)
      if (std::find(b.begin(), b.end(), w) == b.end()) return "options: it has " + Excerpt(w) + ", this sweep does not";
    for (const std::string& w : b)
      if (std::find(a.begin(), a.end(), w) == a.end()) return "options: this sweep has " + Excerpt(w) + ", it does not";
  }
  return "the same options on a graph file whose content differs";
}

std::string SweepMetaLine(const SweepMeta& m, SweepFormat f) {
  if (f == SweepFormat::kJsonl) {
    nlohmann::ordered_json j;
    j["model"] = m.model;
    j["configurations"] = m.configurations;
    j["fingerprint"] = m.fingerprint;
    if (m.shards > 1) j["shard"] = std::to_string(m.shard) + "/" + std::to_string(m.shards);
    j["options"] = m.options;
    nlohmann::ordered_json line;
    line["memsim_sweep"] = j;
    return line.dump() + "\n";
  }
  std::string o = "# memsim sweep: model " + EscapeControl(m.model) + ", configurations " + std::to_string(m.configurations) +
                  ", fingerprint " + m.fingerprint;
  if (m.shards > 1) o += ", shard " + std::to_string(m.shard) + "/" + std::to_string(m.shards);
  return o + ", options " + nlohmann::json(m.options).dump() + "\n";
}

Result<SweepMeta> ParseSweepMetaLine(const std::string& line, SweepFormat f) {
  const Status bad = Status::InvalidArgument("not a memsim sweep file (its first line is not the sweep's metadata)");
  SweepMeta m;
  std::string shard;
  if (f == SweepFormat::kJsonl) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("memsim_sweep") || !j["memsim_sweep"].is_object()) return bad;
    const auto& s = j["memsim_sweep"];
    if (!s.contains("model") || !s["model"].is_string() || !s.contains("configurations") ||
        !s["configurations"].is_number_unsigned() || !s.contains("fingerprint") || !s["fingerprint"].is_string())
      return bad;
    m.model = s["model"].get<std::string>();
    m.configurations = s["configurations"].get<size_t>();
    m.fingerprint = s["fingerprint"].get<std::string>();
    if (s.contains("shard")) {
      if (!s["shard"].is_string()) return bad;
      shard = s["shard"].get<std::string>();
    }
    if (s.contains("options")) {
      if (!s["options"].is_string()) return bad;
      m.options = s["options"].get<std::string>();
    }
  } else {
    const std::string prefix = "# memsim sweep: model ";
    if (line.rfind(prefix, 0) != 0) return bad;
    size_t c = line.find(", configurations ", prefix.size());
    size_t fp = line.find(", fingerprint ", c == std::string::npos ? 0 : c);
    if (c == std::string::npos || fp == std::string::npos) return bad;
    m.model = line.substr(prefix.size(), c - prefix.size());
    std::string count = line.substr(c + 17, fp - c - 17);
    if (count.empty() || count.find_first_not_of("0123456789") != std::string::npos || count.size() > 18) return bad;
    m.configurations = std::stoull(count);
    // ", options " comes last: a JSON string (the options may hold any text).
    const size_t op = line.find(", options \"", fp);
    const std::string head = line.substr(0, op);
    if (op != std::string::npos) {
      auto j = nlohmann::json::parse(line.substr(op + 10), nullptr, /*allow_exceptions=*/false);
      if (!j.is_string()) return bad;
      m.options = j.get<std::string>();
    }
    size_t sh = head.find(", shard ", fp);
    m.fingerprint = head.substr(fp + 14, sh == std::string::npos ? std::string::npos : sh - fp - 14);
    if (sh != std::string::npos) shard = head.substr(sh + 8);
  }
  if (!shard.empty()) {
    auto kn = ParseShardOption("shard", shard);  // K/N, N at most 10^6: merge allocates one slot per shard
    if (!kn.ok()) return kn.status();
    m.shard = static_cast<size_t>(kn->first);
    m.shards = static_cast<size_t>(kn->second);
  }
  return m;
}

nlohmann::ordered_json ToJson(const FitReport& r) {
  const FitResult& f = r.fit;
  const bool stopped = f.above.oom || !f.above.status.ok();  // an out-of-memory or a value the graph refuses
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["capacity_bytes"] = r.capacity_bytes;
  if (f.symbol != "batch") j["search"] = f.symbol;
  j["max_" + f.symbol] = f.max_batch;
  j["max_" + f.symbol + "_at_top"] = f.max_batch_at_top;
  j["at_max"] = f.max_batch > 0 ? ToJson(f.at_max) : nlohmann::ordered_json();
  j["at_top"] = f.max_batch_at_top > 0 ? ToJson(f.at_top) : nlohmann::ordered_json();
  j["next"] = stopped ? ToJson(f.above) : nlohmann::ordered_json();
  if (f.max_batch == 0 && f.above.oom) {
    nlohmann::ordered_json props = nlohmann::ordered_json::array();
    for (const FitProposal& p : r.proposals) {
      nlohmann::ordered_json c;
      c["change"] = p.change.what;
      c["args"] = p.change.args;
      c["changes_training"] = p.change.changes_training;
      c["max_batch"] = p.max_batch;
      c["at_1"] = ToJson(p.change.row);
      props.push_back(c);
    }
    j["proposals"] = props;  // the single changes with which batch 1 fits
  }
  j["evaluated"] = f.evaluated;
  j["confirmed"] = f.confirmed;  // engine runs confirming the size schedule around the answers
  return j;
}

std::string ToText(const FitReport& r) {
  const FitResult& f = r.fit;
  const std::string on = r.gpu.empty() ? "" : " on " + r.gpu;
  std::ostringstream o;
  if (f.max_batch == 0) {
    if (f.above.oom) {
      o << r.model << ": " << f.symbol << " 1 " << VerdictLine(f.above, r.gpu) << "\n  " << f.above.oom_message << "\n";
      if (!r.proposals.empty())
        o << "\nsingle changes with which batch 1 fits (memsim advise), the largest batch they fit first:\n";
      for (const FitProposal& p : r.proposals)
        o << "  batch " << p.max_batch << ": " << p.change.what << (p.change.changes_training ? "  [changes training]" : "")
          << "  (batch 1: " << Used(p.change.row) << ")\n      " << ShellJoin(p.change.args) << "\n";
      if (r.proposals.empty()) o << "\nno single change memsim advise knows makes batch 1 fit\n";
    } else
      o << r.model << ": " << f.symbol << " 1 does not fit" << on << " (" << HumanBytes(r.capacity_bytes)
        << "): " << f.above.oom_message << "\n";
    return o.str();
  }
  o << r.model << ": largest " << f.symbol << " that fits" << on << " (" << HumanBytes(r.capacity_bytes)
    << "): " << f.max_batch << "  (" << Used(f.at_max) << ", peak reserved " << HumanBytes(f.at_max.peak_reserved_bytes)
    << ", allocated " << HumanBytes(f.at_max.peak_allocated_bytes) << ")\n";
  if (f.at_max.peak_device_used_bytes > 0) {
    o << "largest " << f.symbol << " that fits at the top of the uncertainty range: ";
    if (f.max_batch_at_top > 0)
      o << f.max_batch_at_top << "  (range up to " << HumanBytes(f.at_top.device_high_bytes) << ")\n";
    else
      o << "none\n";
  }
  if (f.above.oom)
    o << f.symbol << " " << f.max_batch + 1 << ": " << VerdictLine(f.above, r.gpu) << "\n  " << f.above.oom_message
      << "\n";
  else if (!f.above.status.ok())
    o << f.symbol << " " << f.max_batch + 1 << " or more is not a valid value: " << f.above.status.message() << "\n";
  else
    o << "(the search stopped at --max-batch " << r.max_batch_limit << ")\n";
  return o.str();
}

nlohmann::ordered_json ToJson(const AdviseReport& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["baseline"] = ToJson(r.baseline);
  if (r.world > 1) {  // several ranks: every row is the largest rank's
    j["world"] = r.world;
    j["baseline"]["rank"] = r.baseline_rank;
  }
  j["capacity_bytes"] = r.capacity_bytes > 0 ? nlohmann::ordered_json(r.capacity_bytes) : nlohmann::ordered_json();
  auto changes = [&r](const std::vector<AdvisedChange>& list) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const AdvisedChange& ch : list) {
      nlohmann::ordered_json c = ToJson(ch.row);
      c["change"] = ch.what;
      c["args"] = ch.args;
      c["changes_training"] = ch.changes_training;
      c["saves_reserved_bytes"] = r.baseline.peak_reserved_bytes - ch.row.peak_reserved_bytes;
      if (r.world > 1) c["rank"] = ch.rank;
      out.push_back(c);
    }
    return out;
  };
  j["changes"] = changes(r.changes);
  j["left_out"] = changes(r.left_out);  // changes that need more memory
  j["notes"] = r.notes;
  if (r.max_batch) j["max_batch"] = *r.max_batch;
  return j;
}

namespace {

/// " (rank N)" for a rank beyond 0 (DataParallel: device N).
std::string RankTag(int rank) { return rank > 0 ? " (rank " + std::to_string(rank) + ")" : ""; }

/// ", X to spare": the capacity left beside a fitting row's device used (or reserved, on the
/// cpu profile).
std::string Spare(const SweepRow& row) {
  const int64_t used = row.peak_device_used_bytes > 0 ? row.peak_device_used_bytes : row.peak_reserved_bytes;
  return row.capacity_bytes > used ? ", " + HumanBytes(row.capacity_bytes - used) + " to spare" : "";
}

}  // namespace

std::string ToText(const AdviseReport& r) {
  std::ostringstream o;
  const SweepRow& b = r.baseline;
  const bool cap = r.capacity_bytes > 0;
  o << r.model << ": ";
  if (cap) o << VerdictLine(b, r.gpu) << "\n  ";
  o << "peak reserved " << HumanBytes(b.peak_reserved_bytes) << " (allocated " << HumanBytes(b.peak_allocated_bytes)
    << ")" << (b.oom ? ", what it would need without the capacity limit" : "");
  if (!cap && b.peak_device_used_bytes > 0) o << ", device used " << HumanBytes(b.peak_device_used_bytes);
  if (r.world > 1)
    o << "\nper rank, " << r.world << " ranks: each figure is the largest rank's" << RankTag(r.baseline_rank);
  o << "\n\nsingle changes, largest saving of peak reserved first" << (cap ? " (those that still do not fit last)" : "")
    << ":\n";
  for (const AdvisedChange& ch : r.changes) {
    if (!ch.row.status.ok()) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%+.1f %%",
                  100.0 * (ch.row.peak_reserved_bytes - b.peak_reserved_bytes) / std::max<int64_t>(b.peak_reserved_bytes, 1));
    o << "  " << (ch.row.oom ? "would need " : "") << HumanBytes(ch.row.peak_reserved_bytes) << "  (" << buf << ")  "
      << ch.what;
    if (ch.changes_training) o << "  [changes training]";
    if (r.world > 1) o << RankTag(ch.rank);
    if (cap) o << (ch.row.oom ? "  - still does not fit" : "  - fits" + Spare(ch.row));
    o << "\n      " << ShellJoin(ch.args) << "\n";
  }
  if (!r.left_out.empty()) {
    o << "\nleft out (they need more memory than the baseline):";
    for (const AdvisedChange& ch : r.left_out) o << "\n  " << ch.what << ": " << ShellJoin(ch.args);
    o << "\n";
  }
  if (!r.notes.empty()) o << "\n";
  for (const std::string& n : r.notes) o << n << "\n";
  if (r.max_batch) o << "\nlargest batch that fits as configured: " << *r.max_batch << "\n";
  return o.str();
}

}  // namespace memsim
