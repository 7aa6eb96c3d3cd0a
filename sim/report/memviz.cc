#include "sim/report/memviz.h"

#include <algorithm>
#include <cstring>


namespace memsim {
namespace {

using nlohmann::ordered_json;

void PutLE(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void Pickle(const ordered_json& v, std::string* out) {
  switch (v.type()) {
    case ordered_json::value_t::null: out->push_back('N'); break;
    case ordered_json::value_t::boolean: out->push_back(v.get<bool>() ? '\x88' : '\x89'); break;
    case ordered_json::value_t::number_integer:
    case ordered_json::value_t::number_unsigned: {
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        out->push_back('\x8a');  // LONG1, 9 bytes (non-negative, top bit clear)
        out->push_back(9);
        PutLE(out, v.get<uint64_t>(), 8);
        out->push_back(0);
        break;
      }
      int64_t x = v.get<int64_t>();
      if (x >= INT32_MIN && x <= INT32_MAX) {
        out->push_back('J');  // BININT
        PutLE(out, static_cast<uint32_t>(static_cast<int32_t>(x)), 4);
      } else {
        out->push_back('\x8a');  // LONG1: 8-byte two's complement
        out->push_back(8);
        PutLE(out, static_cast<uint64_t>(x), 8);
      }
      break;
    }
    case ordered_json::value_t::number_float: {
      double d = v.get<double>();
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      out->push_back('G');  // BINFLOAT, big-endian
      for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
      break;
    }
    case ordered_json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      out->push_back('X');  // BINUNICODE
      PutLE(out, s.size(), 4);
      out->append(s);
      break;
    }
    case ordered_json::value_t::array:
      out->push_back(']');
      if (!v.empty()) {
        out->push_back('(');
        for (const auto& e : v) Pickle(e, out);
        out->push_back('e');  // APPENDS
      }
      break;
    case ordered_json::value_t::object:
      out->push_back('}');
      if (!v.empty()) {
        out->push_back('(');
        for (const auto& [k, e] : v.items()) {
          Pickle(ordered_json(k), out);
          Pickle(e, out);
        }
        out->push_back('u');  // SETITEMS
      }
      break;
    default:
      out->push_back('N');
  }
}

}  // namespace

std::string ToPickle(const ordered_json& value) {
  std::string out = "\x80\x02";
  Pickle(value, &out);
  out.push_back('.');
  return out;
}

ordered_json MemoryVizSnapshot(const Graph& g, const EventStream& s, const Placement& place) {
  ordered_json trace = ordered_json::array();
  auto frames = [&](const Buffer& b) {
    ordered_json f = ordered_json::array();
    std::string op = b.op < g.ops.size() ? g.ops[b.op].name : "";
    f.push_back({{"filename", b.module.empty() ? g.name : b.module}, {"line", b.op == kNoOp ? 0 : int64_t(b.op)},
                 {"name", b.name + " [" + std::string(CategoryName(b.category)) + (op.empty() ? "" : ", op " + op) + "]"}});
    return f;
  };
  const size_t n = std::min(place.address.size(), s.events.size());
  for (size_t i = 0; i < n; ++i) {
    const MemEvent& e = s.events[i];
    const Buffer& b = s.buffers[e.buffer];
    const uint64_t addr = place.address[i];
    if (e.kind == EventKind::kAlloc) {
      if (place.segment_bytes[i] > 0)
        trace.push_back({{"action", "segment_alloc"}, {"addr", addr}, {"size", place.segment_bytes[i]},
                         {"stream", 0}, {"frames", frames(b)}});
      trace.push_back({{"action", "alloc"}, {"addr", addr}, {"size", b.bytes}, {"stream", 0}, {"frames", frames(b)}});
    } else {
      for (const char* action : {"free_requested", "free_completed"})
        trace.push_back({{"action", action}, {"addr", addr}, {"size", b.bytes}, {"stream", 0}, {"frames", frames(b)}});
    }
  }
  ordered_json segments = ordered_json::array();
  for (const SegmentView& seg : place.final_segments) {
    ordered_json blocks = ordered_json::array();
    int64_t requested = 0;
    for (const BlockView& bv : seg.blocks) {
      blocks.push_back({{"address", bv.address}, {"size", bv.size}, {"requested_size", bv.requested_size},
                        {"state", bv.allocated ? "active_allocated" : "inactive"}, {"frames", ordered_json::array()}});
      if (bv.allocated) requested += bv.requested_size;
    }
    segments.push_back({{"device", 0}, {"address", seg.address}, {"total_size", seg.total_size}, {"stream", seg.stream},
                        {"segment_type", seg.pool == PoolKind::kSmall ? "small" : "large"},
                        {"allocated_size", seg.allocated_size}, {"active_size", seg.allocated_size},
                        {"requested_size", requested}, {"blocks", blocks}});
  }
  // The model's address space is arbitrary; memory_viz reads addresses as JavaScript numbers, so
  // move them to a realistic device range (exact below 2^53), keeping their order and spacing.
  uint64_t lo = UINT64_MAX;
  for (const auto& e : trace) lo = std::min(lo, e["addr"].get<uint64_t>());
  for (const auto& seg : segments) lo = std::min(lo, seg["address"].get<uint64_t>());
  constexpr uint64_t kBase = 0x7f0000000000;  // where CUDA maps device memory
  auto move = [&](ordered_json& v) { v = kBase + (v.get<uint64_t>() - lo); };
  for (auto& e : trace) move(e["addr"]);
  for (auto& seg : segments) {
    move(seg["address"]);
    for (auto& b : seg["blocks"]) move(b["address"]);
  }
  ordered_json snap;
  snap["segments"] = segments;
  snap["device_traces"] = ordered_json::array({trace});
  return snap;
}

}  // namespace memsim
