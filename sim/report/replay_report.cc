#include "sim/report/replay_report.h"

#include <cstdarg>
#include <cstdio>

namespace memsim {
namespace {

std::string MiB(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / 1048576.0);
  return buf;
}

std::string Hex(uint64_t a) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(a));
  return buf;
}

class Out {
 public:
  void operator()(const char* f, ...) __attribute__((format(printf, 2, 3))) {
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    s += buf;
  }
  std::string s;
};

void Comparison(const ReplayReport& r, Out& o) {
  o("%-28s %18s %18s\n", "", "recorded", "simulated");
  if (r.recorded_peak_reserved_bytes) {
    const double err = *r.recorded_peak_reserved_bytes
                           ? 100.0 * static_cast<double>(r.simulated_peak_reserved_bytes - *r.recorded_peak_reserved_bytes) /
                                 static_cast<double>(*r.recorded_peak_reserved_bytes)
                           : 0.0;
    o("%-28s %18s %18s  (%+.3f%%)\n", "peak reserved", MiB(*r.recorded_peak_reserved_bytes).c_str(),
      MiB(r.simulated_peak_reserved_bytes).c_str(), err);
  } else {
    o("%-28s %18s %18s\n", "peak reserved", "n/a", MiB(r.simulated_peak_reserved_bytes).c_str());
  }
  o("%-28s %18s %18s\n", "peak allocated (requested)", MiB(r.recorded_peak_allocated_bytes).c_str(),
    MiB(r.simulated_peak_requested_bytes).c_str());
  o("%-28s %18s %18s\n", "peak allocated (blocks)", "n/a", MiB(r.simulated_peak_allocated_bytes).c_str());
  if (r.segment_allocs_recorded) {
    o("segment allocations: %lld recorded, %lld simulated, %lld matched (%.1f%%)\n",
      static_cast<long long>(*r.segment_allocs_recorded), static_cast<long long>(r.segment_allocs_simulated.value_or(0)),
      static_cast<long long>(r.segment_allocs_matched.value_or(0)), 100.0 * SegmentMatchRate(r));
  } else {
    o("segment allocations: n/a (the file has no segment information)\n");
  }
  if (r.alloc_decisions_matched)
    o("allocations at the recorded address: %lld / %lld\n", static_cast<long long>(*r.alloc_decisions_matched),
      static_cast<long long>(r.allocs));
  if (r.final_layout_matches) o("final layout matches the dump: %s\n", *r.final_layout_matches ? "yes" : "no");
}

void AtPeak(const ReplayReport& r, const PeakFragmentation& f, Out& o) {
  if (r.trace_events == 0)
    o("\nin the dump (no trace history):\n");
  else if (f.event < 0)
    o("\nat the peak (the start of recording):\n");
  else
    o("\nat the peak (after trace[%lld]%s%s):\n", static_cast<long long>(f.event), f.where.empty() ? "" : ", ",
      f.where.c_str());
  o("  %-34s %14s\n", "reserved", MiB(f.reserved_bytes).c_str());
  o("  %-34s %14s  (requested %s)\n", "allocated (blocks)", MiB(f.allocated_bytes).c_str(),
    MiB(f.requested_bytes).c_str());
  o("  %-34s %14s  (%lld segments)\n", "reserved - allocated", MiB(f.free_bytes).c_str(),
    static_cast<long long>(f.segments));
  o("  %-34s %14s  in %lld free blocks inside split segments\n", "  inactive split", MiB(f.inactive_split_bytes).c_str(),
    static_cast<long long>(f.inactive_split_blocks));
  o("  %-34s %14s  (cache empty_cache() would release)\n", "  whole free segments", MiB(f.unsplit_free_bytes).c_str());
  o("  %-34s %14s\n", "largest free block", MiB(f.largest_free_block_bytes).c_str());
  if (f.top_segments.empty()) {
    o("no segment is split by an allocation with free space left\n");
    return;
  }
  o("the split segments with the most free space, block by block%s:\n",
    r.format == "alloc_data" ? " (the model's addresses: the file records none)" : "");
  for (const FragmentedSegment& s : f.top_segments) {
    o("  segment %s (%s pool%s, %s): %s free in %lld block%s, the largest %s\n", Hex(s.address).c_str(),
      s.pool == PoolKind::kSmall ? "small" : "large", s.expandable ? ", expandable" : "", MiB(s.total_bytes).c_str(),
      MiB(s.free_bytes).c_str(), static_cast<long long>(s.free_blocks), s.free_blocks == 1 ? "" : "s",
      MiB(s.largest_free_bytes).c_str());
    for (const SplitAllocation& a : s.blocks) {
      const std::string what = !a.allocated  ? "free"
                               : a.event < 0 ? "allocated before recording began"
                                             : "allocated at trace[" + std::to_string(a.event) + "]";
      o("    %s %14s  %s%s%s\n", Hex(a.address).c_str(), MiB(a.size).c_str(), what.c_str(),
        a.where.empty() ? "" : " by ", a.where.c_str());
    }
    if (s.more_blocks > 0) o("    ... and %lld more blocks\n", static_cast<long long>(s.more_blocks));
  }
}

void WhatIf(const std::vector<ReplayWhatIf>& rows, Out& o) {
  if (rows.empty()) return;
  o("\nwhat other settings would change (the same trace, a cold start from the blocks alive when recording "
    "began):\n");
  o("  %-28s %16s %14s %22s\n", "PYTORCH_CUDA_ALLOC_CONF", "peak reserved", "change", "reserved - allocated");
  for (size_t k = 0; k < rows.size(); ++k) {
    const ReplayWhatIf& w = rows[k];
    std::string change = "(baseline)";
    if (k > 0) change = (w.change_bytes > 0 ? std::string("+") : std::string()).append(MiB(w.change_bytes));
    o("  %-28s %16s %14s %22s\n", w.change.c_str(), MiB(w.peak_reserved_bytes).c_str(), change.c_str(),
      MiB(w.reserved_minus_allocated_bytes).c_str());
  }
}

}  // namespace

std::string ReplayText(const std::string& file, const ReplayReport& r) {
  Out o;
  for (const std::string& w : r.warnings) o("warning: %s\n", w.c_str());
  o("replay: %s (%s)\n", file.c_str(), r.format.c_str());
  o("alloc conf: %s%s\n", r.alloc_conf.empty() ? "(defaults)" : r.alloc_conf.c_str(),
    r.override_conf ? "  [override; cold start from the live blocks]" : "  [as recorded]");
  if (r.warm_start)
    o("start state: %lld segments, %lld live blocks rebuilt from the dump (%d restarts)\n",
      static_cast<long long>(r.initial_segments), static_cast<long long>(r.initial_live_blocks), r.restarts);
  o("trace: %lld events, %lld allocations\n", static_cast<long long>(r.trace_events), static_cast<long long>(r.allocs));
  Comparison(r, o);
  if (r.at_peak) AtPeak(r, *r.at_peak, o);
  WhatIf(r.what_if, o);
  return o.s;
}

nlohmann::ordered_json ReplayJson(const std::string& file, const ReplayReport& r) {
  nlohmann::ordered_json j;
  j["file"] = file;
  const nlohmann::ordered_json report = ReplayReportToJson(r);
  for (auto it = report.begin(); it != report.end(); ++it) j[it.key()] = it.value();
  return j;
}

}  // namespace memsim
