#include "sim/replay/snapshot.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "lib/util/text_limits.h"
#include "sim/replay/pickle.h"

namespace memsim {
namespace {

Status Bad(const std::string& path, const std::string& what) {
  return Status::ParseError(Excerpt(path, 160) + ": " + Excerpt(what, 300));
}

Result<int64_t> Int(const PyValue& d, const char* key, const std::string& path,
                    bool required = true, int64_t fallback = 0) {
  const PyValue* v = d.Get(key);
  if (v == nullptr) {
    if (!required) return fallback;
    return Bad(path, std::string("missing key '") + key + "'");
  }
  if (v->kind() == PyValue::Kind::kBigInt)
    return Bad(path + "." + key, "integer does not fit in 64 bits");
  if (!v->is_int())
    return Bad(path + "." + key, std::string("expected int, got ") + std::string(v->TypeName()));
  return v->as_int();
}

// A byte count read from the dump: in [0, kMaxRequestBytes] (requests and segments above 1 PiB
// are not real, and keeping them out keeps every sum of the replay far from overflow).
Result<int64_t> Bytes(const PyValue& d, const char* key, const std::string& path,
                      bool required = true, int64_t fallback = 0) {
  MEMSIM_ASSIGN_OR_RETURN(int64_t v, Int(d, key, path, required, fallback));
  if (v < 0 || v > kMaxRequestBytes)
    return Bad(path + "." + key, std::to_string(v) + " bytes is out of range [0, 2^50]");
  return v;
}

// Counts the segments, blocks and trace events read against a budget proportional to the file
// size: memo references let a small pickle name one segment millions of times.
class ElementBudget {
 public:
  explicit ElementBudget(size_t file_bytes) : left_(file_bytes / 4 + 1024) {}
  Status Take(const std::string& path) {
    if (left_ == 0)
      return Bad(path, "more segments, blocks and events than a file of this size can hold "
                       "(repeated references to one object?)");
    --left_;
    return Status::OK();
  }

 private:
  size_t left_;
};

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

// allocator_settings -> AllocatorConfig (the recorded run's options), refusing values that
// --alloc-conf would refuse.
Status ReadSettings(const PyValue* s, MemorySnapshot* out) {
  if (s == nullptr) return Status::OK();
  const std::string path = "allocator_settings";
  if (!s->is_dict()) return Bad(path, "expected a dict");
  AllocatorConfig& c = out->recorded_config;
  // The options string, under its 2.x name or the older one (Note [Version profiles]).
  for (const char* key : {"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"}) {
    const PyValue* v = s->Get(key);
    if (v == nullptr || v->is_none()) continue;
    if (!v->is_str()) return Bad(path + "." + key, "expected str");
    out->recorded_conf = v->as_str();
    Result<AllocatorConfig> parsed = ParseAllocConf(out->recorded_conf);
    if (!parsed.ok()) return Bad(path + "." + key, parsed.status().message());
    break;
  }
  if (const PyValue* v = s->Get("max_split_size"); v && v->kind() != PyValue::Kind::kBigInt) {
    // -1 (or SIZE_MAX, a big int) means unlimited.
    if (!v->is_int()) return Bad(path + ".max_split_size", "expected int");
    if (v->as_int() > 0) {
      if (v->as_int() < kLargeBuffer)
        return Bad(path + ".max_split_size", std::to_string(v->as_int()) +
                                                 " bytes: --alloc-conf requires >= 20 MiB");
      c.max_split_size = v->as_int();
    } else if (v->as_int() != -1 && v->as_int() != 0) {
      return Bad(path + ".max_split_size", "negative size " + std::to_string(v->as_int()));
    }
  }
  if (const PyValue* v = s->Get("garbage_collection_threshold"); v && !v->is_none()) {
    if (v->kind() != PyValue::Kind::kFloat && !v->is_int())
      return Bad(path + ".garbage_collection_threshold", "expected float");
    const double t = v->as_float();
    if (!(t >= 0.0 && t < 1.0))
      return Bad(path + ".garbage_collection_threshold", "must be in [0.0, 1.0)");
    c.garbage_collection_threshold = t;
  }
  if (const PyValue* v = s->Get("expandable_segments"); v && v->is_int())
    c.expandable_segments = v->as_bool();
  if (const PyValue* v = s->Get("roundup_power2_divisions"); v && v->is_dict()) {
    // Keys are interval starts in MiB ("1", "2", ... "32768") -> entry log2(key).
    for (const auto& [k, d] : v->entries()) {
      if (!k->is_str() || !d->is_int()) continue;
      const int64_t n = d->as_int();
      if (n < 0 || (n & (n - 1)) != 0)
        return Bad(path + ".roundup_power2_divisions['" + Excerpt(k->as_str()) + "']",
                   "divisions " + std::to_string(n) + " must be a power of 2 (or 0)");
      const int64_t mb = std::atoll(k->as_str().c_str());
      int idx = 0;
      while (idx < kRoundupIntervals - 1 && (int64_t{1} << idx) < mb) ++idx;
      if (mb > 0 && (int64_t{1} << idx) == mb) c.roundup_power2_divisions[idx] = n;
    }
  }
  return Status::OK();
}

Result<BlockState> ParseBlockState(const std::string& state, const std::string& path) {
  if (state == "active_allocated") return BlockState::kActiveAllocated;
  if (state == "active_pending_free" || state == "active_awaiting_free")
    return BlockState::kActivePendingFree;
  if (state == "inactive") return BlockState::kInactive;
  return Bad(path + ".state", "unknown '" + Excerpt(state) + "'");
}

// One segment dict with its blocks, which must tile it exactly.
Result<SnapshotSegment> ReadSegment(const PyValue& s, const std::string& path,
                                    ElementBudget* budget) {
  SnapshotSegment seg;
  MEMSIM_ASSIGN_OR_RETURN(int64_t addr, Int(s, "address", path));
  MEMSIM_ASSIGN_OR_RETURN(seg.total_size, Bytes(s, "total_size", path));
  MEMSIM_ASSIGN_OR_RETURN(seg.stream, Int(s, "stream", path, false, 0));
  seg.address = static_cast<uint64_t>(addr);
  if (seg.total_size == 0) return Bad(path + ".total_size", "empty segment");
  if (seg.address > UINT64_MAX - static_cast<uint64_t>(seg.total_size))
    return Bad(path, "segment runs past the end of the address space");
  MEMSIM_ASSIGN_OR_RETURN(std::string type, Str(s, "segment_type", path));
  if (type != "small" && type != "large")
    return Bad(path + ".segment_type", "unknown '" + Excerpt(type) + "'");
  seg.pool = type == "small" ? PoolKind::kSmall : PoolKind::kLarge;
  if (const PyValue* e = s.Get("is_expandable"); e && e->is_int()) seg.expandable = e->as_bool();
  const PyValue* blocks = s.Get("blocks");
  if (blocks == nullptr || !blocks->is_sequence()) return Bad(path, "missing list 'blocks'");
  const uint64_t seg_end = seg.address + static_cast<uint64_t>(seg.total_size);
  for (size_t j = 0; j < blocks->items().size(); ++j) {
    const std::string bpath = path + ".blocks[" + std::to_string(j) + "]";
    MEMSIM_RETURN_IF_ERROR(budget->Take(bpath));
    const PyValue& b = *blocks->items()[j];
    if (!b.is_dict()) return Bad(bpath, "expected a dict");
    SnapshotBlock blk;
    MEMSIM_ASSIGN_OR_RETURN(int64_t baddr, Int(b, "address", bpath, false, -1));
    MEMSIM_ASSIGN_OR_RETURN(blk.size, Bytes(b, "size", bpath));
    MEMSIM_ASSIGN_OR_RETURN(blk.requested_size,
                            Bytes(b, "requested_size", bpath, false, blk.size));
    MEMSIM_ASSIGN_OR_RETURN(std::string state, Str(b, "state", bpath));
    MEMSIM_ASSIGN_OR_RETURN(blk.state, ParseBlockState(state, bpath));
    // Older dumps omit block addresses: they follow each other from the segment start.
    uint64_t expect = seg.address;
    if (!seg.blocks.empty())
      expect = seg.blocks.back().address + static_cast<uint64_t>(seg.blocks.back().size);
    blk.address = baddr >= 0 ? static_cast<uint64_t>(baddr) : expect;
    if (blk.address != expect || blk.size <= 0)
      return Bad(bpath, "blocks do not tile the segment");
    if (static_cast<uint64_t>(blk.size) > seg_end - blk.address)
      return Bad(bpath, "block runs past the end of its segment");
    seg.blocks.push_back(blk);
  }
  if (seg.blocks.empty()) return Bad(path, "segment without blocks");
  const SnapshotBlock& last = seg.blocks.back();
  if (last.address + static_cast<uint64_t>(last.size) != seg_end)
    return Bad(path, "block sizes do not add up to total_size");
  return seg;
}

// A file's last path component ("D:\\x\\model.py" and "/x/model.py" give "model.py").
std::string_view BaseName(std::string_view f) {
  const size_t k = f.find_last_of("/\\");
  return k == std::string_view::npos ? f : f.substr(k + 1);
}

// Whether a frame is PyTorch's or a library's rather than the user's code.
bool LibraryFrame(std::string_view f) {
  for (std::string_view part : {"site-packages", "dist-packages", "/torch/", "\\torch\\", "<frozen"})
    if (f.find(part) != std::string_view::npos) return true;
  return false;
}

// At most |max_bytes| of |s| as valid UTF-8 (each invalid byte becomes '?', control characters
// too; a sequence is never split): frames are shown in one-line reports and JSON.
std::string CleanText(std::string_view s, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    for (size_t k = 1; k < n; ++k)
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) n = 0;
    if (n == 2 && c < 0xc2) n = 0;  // overlong
    if (out.size() + std::max<size_t>(n, 1) > max_bytes) break;
    if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7f))) {
      out += '?';
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

// The event's place in the user's code ("model.py:54 forward"): the first Python frame outside
// the libraries, else the first Python frame, else the first frame with a file name; "" without
// usable frames (they are only shown, so malformed ones are skipped, never an error). Recordings
// with stacks="all" list the C++ frames (file "??", "*.cpp") first.
std::string UserFrame(const PyValue& e) {
  const PyValue* frames = e.Get("frames");
  if (frames == nullptr || !frames->is_sequence()) return "";
  const PyValue* pick = nullptr;
  int rank = 0;  // 3: user Python, 2: any Python, 1: any named file
  for (const PyValue* f : frames->items()) {
    if (!f->is_dict() || f->Get("filename") == nullptr || !f->Get("filename")->is_str()) continue;
    const std::string& file = f->Get("filename")->as_str();
    const bool py = file.size() > 3 && file.compare(file.size() - 3, 3, ".py") == 0;
    const int r = py ? (LibraryFrame(file) ? 2 : 3) : (file.empty() || file == "??" ? 0 : 1);
    if (r > rank || pick == nullptr) {
      pick = f;
      rank = r;
    }
    if (rank == 3) break;
  }
  if (pick == nullptr) return "";
  std::string out = CleanText(BaseName(pick->Get("filename")->as_str()), 120);
  if (const PyValue* line = pick->Get("line"); line != nullptr && line->is_int())
    out += ":" + std::to_string(line->as_int());
  if (const PyValue* name = pick->Get("name"); name != nullptr && name->is_str())
    out += " " + CleanText(name->as_str(), 80);
  return out;
}

// The device's trace entries, oldest first.
Status ReadTrace(const PyValue& t, const std::string& base, ElementBudget* budget,
                 MemorySnapshot* out) {
  if (!t.is_sequence()) return Bad(base, "expected a list");
  std::unordered_map<std::string, uint32_t> frame_ids;
  for (size_t i = 0; i < t.items().size(); ++i) {
    const std::string path = base + "[" + std::to_string(i) + "]";
    MEMSIM_RETURN_IF_ERROR(budget->Take(path));
    const PyValue& e = *t.items()[i];
    if (!e.is_dict()) return Bad(path, "expected a dict");
    TraceEvent ev;
    MEMSIM_ASSIGN_OR_RETURN(std::string action, Str(e, "action", path));
    ev.action = ActionFromName(action);
    const bool needs_addr = ev.action != TraceAction::kOom &&
                            ev.action != TraceAction::kSnapshot &&
                            ev.action != TraceAction::kOther;
    MEMSIM_ASSIGN_OR_RETURN(int64_t addr, Int(e, "addr", path, needs_addr, 0));
    MEMSIM_ASSIGN_OR_RETURN(ev.size, needs_addr ? Bytes(e, "size", path)
                                                : Int(e, "size", path, false, 0));
    MEMSIM_ASSIGN_OR_RETURN(ev.stream, Int(e, "stream", path, false, 0));
    ev.addr = static_cast<uint64_t>(addr);
    if (ev.action == TraceAction::kAlloc) {
      std::string where = UserFrame(e);
      if (!where.empty()) {
        auto [it, added] = frame_ids.emplace(std::move(where), static_cast<uint32_t>(out->frames.size()));
        if (added) out->frames.push_back(it->first);
        ev.where = it->second;
      }
    }
    out->trace.push_back(ev);
  }
  return Status::OK();
}

// Segments sorted by address must not overlap (a duplicated segment is an error).
Status CheckDisjoint(const std::vector<SnapshotSegment>& segs) {
  for (size_t i = 1; i < segs.size(); ++i) {
    const SnapshotSegment& a = segs[i - 1];
    if (segs[i].address - a.address < static_cast<uint64_t>(a.total_size)) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "segments at 0x%llx and 0x%llx overlap",
                    static_cast<unsigned long long>(a.address),
                    static_cast<unsigned long long>(segs[i].address));
      return Bad("segments", buf);
    }
  }
  return Status::OK();
}

// Picks the device: the trace with the most events, else the first segment's device.
Result<int> PickDevice(const PyValue* segs, const PyValue* traces) {
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
    if (d < 0 || d > 1024) return Bad("segments[0].device", "out of range");
    device = static_cast<int>(d);
  }
  return device < 0 ? 0 : device;
}

Result<MemorySnapshot> FromPickle(const PyValue& root, size_t file_bytes) {
  MemorySnapshot out;
  out.format = MemorySnapshot::Format::kPickle;
  const PyValue* segs = nullptr;
  const PyValue* traces = nullptr;
  if (root.is_dict()) {
    segs = root.Get("segments");
    traces = root.Get("device_traces");
    MEMSIM_RETURN_IF_ERROR(ReadSettings(root.Get("allocator_settings"), &out));
  } else if (root.kind() == PyValue::Kind::kList) {
    segs = &root;  // very old dumps: a bare list of segments
  } else {
    return Bad("snapshot", std::string("expected a dict, got ") + std::string(root.TypeName()));
  }
  if (segs == nullptr || !segs->is_sequence()) return Bad("snapshot", "missing list 'segments'");
  MEMSIM_ASSIGN_OR_RETURN(out.device, PickDevice(segs, traces));
  out.has_segments = true;
  ElementBudget budget(file_bytes);
  for (size_t i = 0; i < segs->items().size(); ++i) {
    const std::string path = "segments[" + std::to_string(i) + "]";
    MEMSIM_RETURN_IF_ERROR(budget.Take(path));
    const PyValue& s = *segs->items()[i];
    if (!s.is_dict()) return Bad(path, "expected a dict");
    MEMSIM_ASSIGN_OR_RETURN(int64_t dev, Int(s, "device", path, false, out.device));
    if (dev != out.device) continue;
    MEMSIM_ASSIGN_OR_RETURN(SnapshotSegment seg, ReadSegment(s, path, &budget));
    out.segments.push_back(std::move(seg));
  }
  std::sort(
      out.segments.begin(), out.segments.end(),
      [](const SnapshotSegment& a, const SnapshotSegment& b) { return a.address < b.address; });
  MEMSIM_RETURN_IF_ERROR(CheckDisjoint(out.segments));
  if (traces != nullptr && static_cast<size_t>(out.device) < traces->items().size()) {
    MEMSIM_RETURN_IF_ERROR(ReadTrace(*traces->items()[static_cast<size_t>(out.device)],
                                     "device_traces[" + std::to_string(out.device) + "]",
                                     &budget, &out));
  }
  return out;
}

// Element sizes of an alloc_data object, in either layout memory_viz's trace_plot wrote:
// PyTorch 2.0 `elements: [{size, info}]`, 2.1+ `elements_size: [n]` (+ `elements_info`).
Result<std::vector<int64_t>> ElementSizes(const nlohmann::json& j) {
  const bool v20 = j.contains("elements") && !j.contains("elements_size");
  const char* key = v20 ? "elements" : "elements_size";
  auto it = j.find(key);
  if (it == j.end())
    return Bad("alloc_data", "missing key 'elements_size' (or 'elements' of PyTorch 2.0)");
  if (!it->is_array()) return Bad(std::string("/") + key, "expected an array");
  std::vector<int64_t> size(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string path = std::string("/") + key + "/" + std::to_string(i);
    const nlohmann::json* v = &(*it)[i];
    if (v20) {
      if (!v->is_object() || !v->contains("size"))
        return Bad(path, "expected an object {size, info}");
      v = &(*v)["size"];
    }
    if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX) ||
        v->get<int64_t>() < 0 || v->get<int64_t>() > kMaxRequestBytes)
      return Bad(v20 ? path + "/size" : path, "expected a byte count in [0, 2^50]");
    size[i] = v->get<int64_t>();
  }
  return size;
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
  MEMSIM_ASSIGN_OR_RETURN(std::vector<int64_t> size, ElementSizes(j));
  const nlohmann::json* initial = nullptr;
  if (j.contains("initially_allocated")) {
    MEMSIM_ASSIGN_OR_RETURN(initial, arr("initially_allocated"));
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

// The snapshot pickle that PyTorch >= 2.1's _memory_viz (trace_plot, segment_plot) embeds in its
// HTML page: `add_local_files([{"name": "snapshot.pickle", "base64": "gAJ9..."}], ...)`.
// Returns nullopt when the page has no such field; an error when its base64 is broken.
Result<std::optional<std::string>> ExtractEmbeddedPickle(std::string_view html) {
  const size_t key = html.find("\"base64\"");
  if (key == std::string_view::npos) return std::optional<std::string>();
  size_t k = html.find('"', key + 8 + 1);
  if (k == std::string_view::npos) return Status::ParseError("embedded snapshot: no base64 string");
  const size_t end = html.find('"', k + 1);
  if (end == std::string_view::npos)
    return Status::ParseError("embedded snapshot: base64 string is not terminated");
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve((end - k) / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t m = k + 1; m < end; ++m) {
    const char c = html[m];
    if (c == '=') break;
    const int v = value(c);
    if (v < 0)
      return Status::ParseError("embedded snapshot: invalid base64 character at offset " +
                                std::to_string(m));
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return std::optional<std::string>(std::move(out));
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
    return FromPickle(doc.root(), bytes.size());
  }
  size_t first = 0;
  while (first < bytes.size() && std::isspace(static_cast<unsigned char>(bytes[first]))) ++first;
  std::string_view text = bytes.substr(first);
  if (text.empty() || text[0] != '{') {
    MEMSIM_ASSIGN_OR_RETURN(std::optional<std::string> pickle, ExtractEmbeddedPickle(bytes));
    if (pickle) {
      if (pickle->empty() || static_cast<uint8_t>((*pickle)[0]) != 0x80)
        return Status::ParseError("embedded snapshot: the base64 data is not a pickle");
      MEMSIM_ASSIGN_OR_RETURN(PickleDocument doc, ParsePickle(*pickle));
      return FromPickle(doc.root(), pickle->size());
    }
    MEMSIM_ASSIGN_OR_RETURN(text, ExtractAllocData(bytes));
  }
  MEMSIM_RETURN_IF_ERROR(CheckJsonDepth(text, "alloc_data"));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e);
    const size_t at = pe != nullptr && pe->byte > 0 ? pe->byte - 1 : 0;
    std::string what = e.what();
    if (auto p = what.find("parse error"); p != std::string::npos) what = what.substr(p);
    return Status::ParseError("alloc_data:" + LineColumn(text, at) + ": invalid JSON: " +
                              Excerpt(what, 200));
  }
  return FromAllocData(j);
}

Result<MemorySnapshot> LoadSnapshotFile(const std::string& path) {
  MEMSIM_ASSIGN_OR_RETURN(const std::string bytes, ReadInputFile(path));
  Result<MemorySnapshot> r = ParseSnapshot(bytes);
  if (!r.ok() && bytes.find("\"memsim-graph\"") != std::string::npos) {
    const nlohmann::json j = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("format", "") == "memsim-graph")
      return Status::InvalidArgument(path + ": this is a memsim graph, not a memory snapshot: use memsim run " + path);
  }
  if (!r.ok()) return r.status().WithPrefix(path);
  return r;
}

}  // namespace memsim
