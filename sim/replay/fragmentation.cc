#include "sim/replay/fragmentation.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace memsim {

PeakFragmentation DescribeFragmentation(const CachingAllocator& a, int64_t event, const std::string& where,
                                        const BlockOrigin& origin) {
  PeakFragmentation f;
  f.event = event;
  f.where = where;
  const DeviceStats& st = a.stats();
  f.reserved_bytes = st.reserved_bytes.all().current;
  f.allocated_bytes = st.allocated_bytes.all().current;
  f.requested_bytes = st.requested_bytes.all().current;
  f.free_bytes = f.reserved_bytes - f.allocated_bytes;
  f.inactive_split_bytes = st.inactive_split_bytes.all().current;
  f.inactive_split_blocks = st.inactive_split.all().current;
  f.largest_free_block_bytes = a.LargestFreeBlock();
  std::vector<FragmentedSegment> segs;
  for (const SegmentView& v : a.Snapshot()) {
    ++f.segments;
    FragmentedSegment s;
    s.address = v.address;
    s.total_bytes = v.total_size;
    s.allocated_bytes = v.allocated_size;
    s.pool = v.pool;
    s.expandable = v.expandable;
    for (const BlockView& b : v.blocks) {
      if (!b.allocated) {
        s.free_bytes += b.size;
        s.largest_free_bytes = std::max(s.largest_free_bytes, b.size);
        ++s.free_blocks;
      }
      if (s.blocks.size() == PeakFragmentation::kListed) {
        ++s.more_blocks;
        continue;
      }
      if (!b.allocated) {
        s.blocks.push_back({false, b.address, b.size, 0, -1, ""});
        continue;
      }
      auto [ev, at] = origin(b.address);
      s.blocks.push_back({true, b.address, b.size, b.requested_size, ev, std::move(at)});
    }
    if (s.allocated_bytes == 0 && !v.expandable) f.unsplit_free_bytes += s.free_bytes;
    // Only segments an allocation splits: a wholly free one is cache, not fragmentation.
    if (s.free_bytes > 0 && s.allocated_bytes > 0) segs.push_back(std::move(s));
  }
  std::stable_sort(segs.begin(), segs.end(), [](const FragmentedSegment& x, const FragmentedSegment& y) {
    return x.free_bytes != y.free_bytes ? x.free_bytes > y.free_bytes : x.address < y.address;
  });
  if (segs.size() > PeakFragmentation::kSegments) segs.resize(PeakFragmentation::kSegments);
  f.top_segments = std::move(segs);
  return f;
}

nlohmann::ordered_json ToJson(const PeakFragmentation& f) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["event"] = f.event >= 0 ? ordered_json(f.event) : ordered_json(nullptr);
  j["where"] = f.where;
  j["reserved_bytes"] = f.reserved_bytes;
  j["allocated_bytes"] = f.allocated_bytes;
  j["requested_bytes"] = f.requested_bytes;
  j["reserved_minus_allocated_bytes"] = f.free_bytes;
  j["inactive_split_bytes"] = f.inactive_split_bytes;
  j["inactive_split_blocks"] = f.inactive_split_blocks;
  j["unsplit_free_bytes"] = f.unsplit_free_bytes;
  j["largest_free_block_bytes"] = f.largest_free_block_bytes;
  j["segments"] = f.segments;
  ordered_json top = ordered_json::array();
  for (const FragmentedSegment& s : f.top_segments) {
    ordered_json blocks = ordered_json::array();
    for (const SplitAllocation& a : s.blocks)
      blocks.push_back({{"address", a.address}, {"allocated", a.allocated}, {"bytes", a.size},
                        {"requested_bytes", a.requested_bytes},
                        {"event", a.event >= 0 ? ordered_json(a.event) : ordered_json(nullptr)}, {"where", a.where}});
    top.push_back({{"address", s.address}, {"pool", s.pool == PoolKind::kSmall ? "small" : "large"},
                   {"expandable", s.expandable}, {"total_bytes", s.total_bytes}, {"allocated_bytes", s.allocated_bytes},
                   {"free_bytes", s.free_bytes}, {"largest_free_bytes", s.largest_free_bytes},
                   {"free_blocks", s.free_blocks}, {"blocks", blocks}, {"more_blocks", s.more_blocks}});
  }
  j["top_segments"] = top;
  return j;
}

}  // namespace memsim
