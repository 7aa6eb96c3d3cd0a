#include "sim/replay/snapshot.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/replay/pickle.h"

namespace memsim {
namespace {

Status Bad(const std::string& path, const std::string& what) {
  return Status::ParseError(path + ": " + what);
}

Result<int64_t> Int(const PyValue& d, const char* key, const std::string& path,
                    bool required = true, int64_t fallback = 0) {
  const PyValue* v = d.Get(key);
  if (v == nullptr) {
    if (!required) return fallback;
    return Bad(path, std::string("missing key '") + key + "'");
  }
  if (!v->is_int())
    return Bad(path + "." + key, std::string("expected int, got ") + std::string(v->TypeName()));
  return v->as_int();
}

Result<std::string> Str(const PyValue& d, const char* key, const std::string& path) {
  const PyValue* v = d.Get(key);
  if (v == nullptr) return Bad(path, std::string("missing key '") + key + "'");
  if (!v->is_str())
    return Bad(path + "." + key, std::string("expected str, got ") + std::string(v->TypeName()));
  return v->as_str();
}

TraceAction ActionFromName(const std::string& a) {
  if (a == "alloc") return TraceAction::kAlloc;
  if (a == "free_requested") return TraceAction::kFreeRequested;
  if (a == "free_completed" || a == "free") return TraceAction::kFreeCompleted;
  if (a == "segment_alloc") return TraceAction::kSegmentAlloc;
  if (a == "segment_free") return TraceAction::kSegmentFree;
  if (a == "segment_map") return TraceAction::kSegmentMap;
  if (a == "segment_unmap") return TraceAction::kSegmentUnmap;
  if (a == "oom") return TraceAction::kOom;
  if (a == "snapshot") return TraceAction::kSnapshot;
  return TraceAction::kOther;
}

// allocator_settings -> AllocatorConfig (the recorded run's options).
void ReadSettings(const PyValue* s, MemorySnapshot* out) {
  if (s == nullptr || !s->is_dict()) return;
  AllocatorConfig& c = out->recorded_config;
  if (const PyValue* v = s->Get("PYTORCH_CUDA_ALLOC_CONF"); v && v->is_str())
    out->recorded_conf = v->as_str();
  if (const PyValue* v = s->Get("max_split_size"); v && v->is_int() && v->as_int() > 0)
    c.max_split_size = v->as_int();
  if (const PyValue* v = s->Get("garbage_collection_threshold"))
    c.garbage_collection_threshold = v->as_float();
  if (const PyValue* v = s->Get("expandable_segments"); v && v->is_int())
    c.expandable_segments = v->as_bool();
  if (const PyValue* v = s->Get("roundup_power2_divisions"); v && v->is_dict()) {
    // Keys are interval starts in MiB ("1", "2", ... "32768") -> entry log2(key).
    for (const auto& [k, d] : v->entries()) {
      if (!k->is_str() || !d->is_int()) continue;
      const int64_t mb = std::atoll(k->as_str().c_str());
      int idx = 0;
      while (idx < kRoundupIntervals - 1 && (int64_t{1} << idx) < mb) ++idx;
      if (mb > 0 && (int64_t{1} << idx) == mb) c.roundup_power2_divisions[idx] = d->as_int();
    }
  }
}

Result<MemorySnapshot> FromPickle(const PyValue& root) {
  MemorySnapshot out;
  out.format = MemorySnapshot::Format::kPickle;
  const PyValue* segs = nullptr;
  const PyValue* traces = nullptr;
  if (root.is_dict()) {
    segs = root.Get("segments");
    traces = root.Get("device_traces");
    ReadSettings(root.Get("allocator_settings"), &out);
  } else if (root.kind() == PyValue::Kind::kList) {
    segs = &root;  // very old dumps: a bare list of segments
  } else {
    return Bad("snapshot", std::string("expected a dict, got ") + std::string(root.TypeName()));
  }
  if (segs == nullptr || !segs->is_sequence()) return Bad("snapshot", "missing list 'segments'");

  // Pick the device: the trace with the most events, else the first segment's device.
  int device = -1;
  if (traces != nullptr) {
    if (!traces->is_sequence()) return Bad("device_traces", "expected a list");
    size_t best = 0;
    for (size_t k = 0; k < traces->items().size(); ++k) {
      const PyValue* t = traces->items()[k];
      if (t->is_sequence() && t->items().size() > best) {
        best = t->items().size();
        device = static_cast<int>(k);
      }
    }
  }
  if (device < 0 && !segs->items().empty() && segs->items()[0]->is_dict()) {
    MEMSIM_ASSIGN_OR_RETURN(int64_t d, Int(*segs->items()[0], "device", "segments[0]", false, 0));
    device = static_cast<int>(d);
  }
  if (device < 0) device = 0;
  out.device = device;
  out.has_segments = true;

  for (size_t i = 0; i < segs->items().size(); ++i) {
    const std::string path = "segments[" + std::to_string(i) + "]";
    const PyValue& s = *segs->items()[i];
    if (!s.is_dict()) return Bad(path, "expected a dict");
    MEMSIM_ASSIGN_OR_RETURN(int64_t dev, Int(s, "device", path, false, device));
    if (dev != device) continue;
    SnapshotSegment seg;
    MEMSIM_ASSIGN_OR_RETURN(int64_t addr, Int(s, "address", path));
    MEMSIM_ASSIGN_OR_RETURN(seg.total_size, Int(s, "total_size", path));
    MEMSIM_ASSIGN_OR_RETURN(seg.stream, Int(s, "stream", path, false, 0));
    seg.address = static_cast<uint64_t>(addr);
    MEMSIM_ASSIGN_OR_RETURN(std::string type, Str(s, "segment_type", path));
    if (type != "small" && type != "large")
      return Bad(path + ".segment_type", "unknown '" + type + "'");
    seg.pool = type == "small" ? PoolKind::kSmall : PoolKind::kLarge;
    if (const PyValue* e = s.Get("is_expandable"); e && e->is_int()) seg.expandable = e->as_bool();
    const PyValue* blocks = s.Get("blocks");
    if (blocks == nullptr || !blocks->is_sequence()) return Bad(path, "missing list 'blocks'");
    for (size_t j = 0; j < blocks->items().size(); ++j) {
      const std::string bpath = path + ".blocks[" + std::to_string(j) + "]";
      const PyValue& b = *blocks->items()[j];
      if (!b.is_dict()) return Bad(bpath, "expected a dict");
      SnapshotBlock blk;
      MEMSIM_ASSIGN_OR_RETURN(int64_t baddr, Int(b, "address", bpath, false, -1));
      MEMSIM_ASSIGN_OR_RETURN(blk.size, Int(b, "size", bpath));
      MEMSIM_ASSIGN_OR_RETURN(blk.requested_size, Int(b, "requested_size", bpath, false, blk.size));
      MEMSIM_ASSIGN_OR_RETURN(std::string state, Str(b, "state", bpath));
      if (state == "active_allocated") {
        blk.state = BlockState::kActiveAllocated;
      } else if (state == "active_pending_free" || state == "active_awaiting_free") {
        blk.state = BlockState::kActivePendingFree;
      } else if (state == "inactive") {
        blk.state = BlockState::kInactive;
      } else {
        return Bad(bpath + ".state", "unknown '" + state + "'");
      }
      // Older dumps omit block addresses: they follow each other from the segment start.
      uint64_t expect = seg.address;
      if (!seg.blocks.empty())
        expect = seg.blocks.back().address + static_cast<uint64_t>(seg.blocks.back().size);
      blk.address = baddr >= 0 ? static_cast<uint64_t>(baddr) : expect;
      if (blk.address != expect || blk.size <= 0)
        return Bad(bpath, "blocks do not tile the segment");
      seg.blocks.push_back(blk);
    }
    if (seg.blocks.empty()) return Bad(path, "segment without blocks");
    const SnapshotBlock& last = seg.blocks.back();
    if (last.address + static_cast<uint64_t>(last.size) !=
        seg.address + static_cast<uint64_t>(seg.total_size))
      return Bad(path, "block sizes do not add up to total_size");
    out.segments.push_back(std::move(seg));
  }
  std::sort(
      out.segments.begin(), out.segments.end(),
      [](const SnapshotSegment& a, const SnapshotSegment& b) { return a.address < b.address; });

  if (traces != nullptr && static_cast<size_t>(device) < traces->items().size()) {
    const PyValue& t = *traces->items()[static_cast<size_t>(device)];
    if (!t.is_sequence())
      return Bad("device_traces[" + std::to_string(device) + "]", "expected a list");
    out.trace.reserve(t.items().size());
    for (size_t i = 0; i < t.items().size(); ++i) {
      const std::string path =
          "device_traces[" + std::to_string(device) + "][" + std::to_string(i) + "]";
      const PyValue& e = *t.items()[i];
      if (!e.is_dict()) return Bad(path, "expected a dict");
      TraceEvent ev;
      MEMSIM_ASSIGN_OR_RETURN(std::string action, Str(e, "action", path));
      ev.action = ActionFromName(action);
      const bool needs_addr = ev.action != TraceAction::kOom &&
                              ev.action != TraceAction::kSnapshot &&
                              ev.action != TraceAction::kOther;
      MEMSIM_ASSIGN_OR_RETURN(int64_t addr, Int(e, "addr", path, needs_addr, 0));
      MEMSIM_ASSIGN_OR_RETURN(ev.size, Int(e, "size", path, needs_addr, 0));
      MEMSIM_ASSIGN_OR_RETURN(ev.stream, Int(e, "stream", path, false, 0));
      if (needs_addr && ev.size < 0) return Bad(path + ".size", "negative");
      ev.addr = static_cast<uint64_t>(addr);
      out.trace.push_back(ev);
    }
  }
  return out;
}

// The alloc_data object of memory_viz's trace_plot: each action names an element; its first
// appearance allocates it, the second frees it (MemoryViz.js process_alloc_data).
Result<MemorySnapshot> FromAllocData(const nlohmann::json& j) {
  MemorySnapshot out;
  out.format = MemorySnapshot::Format::kAllocData;
  if (!j.is_object()) return Bad("alloc_data", "expected a JSON object");
  auto arr = [&](const char* key) -> Result<const nlohmann::json*> {
    auto it = j.find(key);
    if (it == j.end()) return Bad("alloc_data", std::string("missing key '") + key + "'");
    if (!it->is_array()) return Bad(std::string("/") + key, "expected an array");
    return &*it;
  };
  MEMSIM_ASSIGN_OR_RETURN(const nlohmann::json* actions, arr("actions"));
  MEMSIM_ASSIGN_OR_RETURN(const nlohmann::json* sizes, arr("elements_size"));
  const nlohmann::json* initial = nullptr;
  if (j.contains("initially_allocated")) {
    MEMSIM_ASSIGN_OR_RETURN(initial, arr("initially_allocated"));
  }
  std::vector<int64_t> size(sizes->size());
  for (size_t i = 0; i < sizes->size(); ++i) {
    const auto& v = (*sizes)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      return Bad("/elements_size/" + std::to_string(i), "expected a non-negative integer");
    size[i] = v.get<int64_t>();
  }
  auto element = [&](const nlohmann::json& v, const std::string& path) -> Result<size_t> {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<uint64_t>() >= size.size())
      return Bad(path, "element index out of range");
    return static_cast<size_t>(v.get<uint64_t>());
  };
  // Synthetic addresses: element index + 1 (no real addresses in this format).
  std::vector<uint8_t> live(size.size(), 0);
  if (initial != nullptr) {
    for (size_t i = 0; i < initial->size(); ++i) {
      MEMSIM_ASSIGN_OR_RETURN(size_t e,
                              element((*initial)[i], "/initially_allocated/" + std::to_string(i)));
      if (live[e]) return Bad("/initially_allocated/" + std::to_string(i), "element listed twice");
      live[e] = 1;
      out.initially_allocated.emplace_back(e + 1, size[e]);
    }
  }
  out.trace.reserve(actions->size());
  for (size_t i = 0; i < actions->size(); ++i) {
    MEMSIM_ASSIGN_OR_RETURN(size_t e, element((*actions)[i], "/actions/" + std::to_string(i)));
    TraceEvent ev;
    ev.action = live[e] ? TraceAction::kFreeCompleted : TraceAction::kAlloc;
    ev.addr = e + 1;
    ev.size = size[e];
    live[e] ^= 1;
    out.trace.push_back(ev);
  }
  return out;
}

// Finds `alloc_data = {...}` in a trace_plot HTML page and returns the object text.
Result<std::string_view> ExtractAllocData(std::string_view html) {
  size_t pos = 0;
  while ((pos = html.find("alloc_data", pos)) != std::string_view::npos) {
    pos += 10;
    size_t k = pos;
    while (k < html.size() && (html[k] == ' ' || html[k] == '\t')) ++k;
    if (k < html.size() && html[k] == '=') {
      ++k;
      while (k < html.size() && std::isspace(static_cast<unsigned char>(html[k]))) ++k;
      if (k >= html.size() || html[k] != '{') continue;
      // Match braces outside JSON strings.
      int depth = 0;
      bool in_str = false;
      for (size_t m = k; m < html.size(); ++m) {
        const char c = html[m];
        if (in_str) {
          if (c == '\\')
            ++m;
          else if (c == '"')
            in_str = false;
        } else if (c == '"') {
          in_str = true;
        } else if (c == '{') {
          ++depth;
        } else if (c == '}' && --depth == 0) {
          return html.substr(k, m - k + 1);
        }
      }
      return Status::ParseError("alloc_data object is not terminated");
    }
  }
  return Status::ParseError(
      "not a memory snapshot: no pickle header, JSON object or 'alloc_data = {' found");
}

}  // namespace

std::string_view FormatName(MemorySnapshot::Format f) {
  return f == MemorySnapshot::Format::kPickle ? "pickle" : "alloc_data";
}

Result<MemorySnapshot> ParseSnapshot(std::string_view bytes) {
  if (bytes.empty()) return Status::ParseError("empty file");
  if (static_cast<uint8_t>(bytes[0]) == 0x80) {
    MEMSIM_ASSIGN_OR_RETURN(PickleDocument doc, ParsePickle(bytes));
    return FromPickle(doc.root());
  }
  size_t first = 0;
  while (first < bytes.size() && std::isspace(static_cast<unsigned char>(bytes[first]))) ++first;
  std::string_view text = bytes.substr(first);
  if (text.empty() || text[0] != '{') {
    MEMSIM_ASSIGN_OR_RETURN(text, ExtractAllocData(bytes));
  }
  nlohmann::json j =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::ParseError("invalid JSON in alloc_data");
  return FromAllocData(j);
}

Result<MemorySnapshot> LoadSnapshotFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open file");
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string bytes = buf.str();
  Result<MemorySnapshot> r = ParseSnapshot(bytes);
  if (!r.ok()) return r.status().WithPrefix(path);
  return r;
}

}  // namespace memsim
