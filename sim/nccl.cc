#include "sim/nccl.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>

namespace memsim {

extern const std::string_view kNcclBuffersJson;  // generated from sim/data/nccl_buffers.json

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

struct NcclRow {
  std::string arch, kind, source;
  int64_t ranks_min = 0, ranks_max = 0, bytes = 0;
  bool is_default = false;
};

const std::vector<NcclRow>& Table() {
  static const std::vector<NcclRow> rows = [] {
    std::vector<NcclRow> out;
    const nlohmann::json table = nlohmann::json::parse(kNcclBuffersJson);  // alive through the loop
    for (const auto& e : table.at("rows")) {
      NcclRow r;
      r.arch = e.at("arch").get<std::string>();
      r.kind = e.at("kind").get<std::string>();
      r.ranks_min = e.at("ranks_min").get<int64_t>();
      r.ranks_max = e.at("ranks_max").get<int64_t>();
      r.bytes = e.at("mib").get<int64_t>() * kMiB;
      r.is_default = e.value("default", false);
      r.source = e.at("source").get<std::string>();
      out.push_back(std::move(r));
    }
    return out;
  }();
  return rows;
}

/// A p2p row is per peer; a collective row is the whole communicator.
int64_t Size(const NcclRow& r, const NcclCommunicator& c) { return r.kind == "p2p" ? r.bytes * c.peers : r.bytes; }

void Estimate(const std::string& arch, NcclCommunicator* c, std::string* source) {
  auto fits = [&](const NcclRow& r) { return r.kind == c->kind && c->ranks >= r.ranks_min && c->ranks <= r.ranks_max; };
  const auto& t = Table();
  const NcclRow* point = nullptr;
  for (const NcclRow& r : t)  // this architecture's default row, else any default row of the kind
    if (fits(r) && r.is_default && (point == nullptr || (r.arch == arch && point->arch != arch))) point = &r;
  bool first = true;
  for (const NcclRow& r : t) {
    if (!fits(r)) continue;
    const int64_t b = Size(r, *c);
    c->low = first ? b : std::min(c->low, b);
    c->high = first ? b : std::max(c->high, b);
    first = false;
  }
  if (point == nullptr) return;  // no measurement of this kind and size: 0, said in the source
  c->bytes = Size(*point, *c);
  const std::string note = point->arch == arch ? point->source : "no " + (arch.empty() ? std::string("GPU") : arch) +
                                                                     " row, " + point->arch + "'s: " + point->source;
  if (source->find(note) == std::string::npos) *source += (source->empty() ? "" : "; ") + note;
}

}  // namespace

std::vector<NcclCommunicator> CommunicatorsOf(const ParallelOptions& p) {
  std::vector<NcclCommunicator> out;
  auto collective = [&](const char* name, int64_t ranks) {
    if (ranks > 1) out.push_back({name, ranks, "collective", 0});
  };
  const MeshDims& m = p.mesh;
  if (m.enabled()) {
    collective("dp_replicate", m.dp_replicate);
    // FSDP2 with context parallelism shards over the flattened dp_shard_cp mesh (torchtitan;
    // Note [Context parallel]); the ring's all-gather and all-to-all use the cp group
    if (m.cp > 1 && m.dp_shard > 1) collective("dp_shard_cp", int64_t{m.dp_shard} * m.cp);
    else collective("dp_shard", m.dp_shard);
    collective("cp", m.cp);
    collective("tp", m.tp);
    if (m.pp > 1) {  // send/recv to the previous and the next stage (one for the first and last)
      const MeshCoord at = CoordOf(m, p.rank);
      out.push_back({"pp", m.pp, "p2p", (at.pp > 0 ? 1 : 0) + (at.pp + 1 < m.pp ? 1 : 0)});
    }
    if (m.ep > 1) out.push_back({"ep", m.ep, "p2p", m.ep - 1});  // all-to-all connects every peer
    return out;
  }
  if (p.world > 1 && p.enabled()) collective(p.data_parallel ? "DataParallel" : "data parallel", p.world);
  return out;
}

NcclBuffers EstimateNcclBuffers(std::vector<NcclCommunicator> comms, const std::string& arch) {
  NcclBuffers b;
  for (NcclCommunicator& c : comms) {
    Estimate(arch, &c, &b.source);
    b.bytes += c.bytes;
    b.low += c.low;
    b.high += c.high;
  }
  b.communicators = std::move(comms);
  return b;
}

}  // namespace memsim
