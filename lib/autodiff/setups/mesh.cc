#include "lib/autodiff/setups/mesh.h"

#include <cstdint>
#include <string>
#include <vector>

#include "lib/util/nearest.h"
#include "lib/util/option_check.h"

namespace memsim {
namespace {

int* Field(MeshDims* d, std::string_view name) {
  if (name == "pp") return &d->pp;
  if (name == "dp_replicate") return &d->dp_replicate;
  if (name == "dp_shard") return &d->dp_shard;
  if (name == "cp") return &d->cp;
  if (name == "tp") return &d->tp;
  if (name == "ep") return &d->ep;
  return nullptr;
}

int Get(const MeshDims& d, std::string_view name) { return *Field(const_cast<MeshDims*>(&d), name); }

}  // namespace

int64_t MeshDims::world() const {
  const int64_t w = int64_t{pp} * dp_replicate * dp_shard * cp * tp;
  return int64_t{dp_shard} * cp == 1 ? w * ep : w;  // ep alone: its own ranks (Note [Expert parallel])
}

std::string MeshDims::ToString() const {
  std::string out;
  for (std::string_view name : kMeshDimNames) {
    if (Get(*this, name) == 1) continue;
    if (!out.empty()) out += ',';
    out += std::string(name) + "=" + std::to_string(Get(*this, name));
  }
  return out;
}

Result<MeshDims> ParseMesh(std::string_view option, std::string_view text) {
  MeshDims d;
  const std::string opt(option);
  const std::string usage = " (expected NAME=DEGREE[,NAME=DEGREE...] with NAME one of pp, dp_replicate, "
                            "dp_shard, cp, tp, ep)";
  if (text.empty()) return Status::InvalidArgument(opt + ": empty" + usage);
  std::vector<std::string> seen;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return Status::InvalidArgument(opt + ": '" + std::string(item) + "' has no '='" + usage);
    std::string_view name = item.substr(0, eq);
    int* field = Field(&d, name);
    if (field == nullptr) {
      std::vector<std::string_view> names(std::begin(kMeshDimNames), std::end(kMeshDimNames));
      std::string near = NearestName(name, names);
      return Status::InvalidArgument(opt + ": unknown dimension '" + std::string(name) + "'" +
                                     (near.empty() ? usage : " (did you mean " + near + "?)"));
    }
    for (const std::string& s : seen)
      if (s == name) return Status::InvalidArgument(opt + ": '" + s + "' is given twice");
    seen.emplace_back(name);
    MEMSIM_ASSIGN_OR_RETURN(int64_t degree, ParseIntOption(opt + " " + std::string(name), item.substr(eq + 1), 1, 1'000'000));
    *field = static_cast<int>(degree);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (d.world() > (int64_t{1} << 31))
    return Status::InvalidArgument(opt + ": " + std::to_string(d.world()) + " ranks; at most 2^31");
  if (int64_t{d.dp_shard} * d.cp > 1 && (int64_t{d.dp_shard} * d.cp) % d.ep != 0)
    return Status::InvalidArgument(opt + ": ep=" + std::to_string(d.ep) + " must divide dp_shard*cp = " +
                                   std::to_string(int64_t{d.dp_shard} * d.cp) +
                                   " (expert parallelism borrows the data-parallel and context ranks)");
  return d;
}

MeshCoord CoordOf(const MeshDims& d, int64_t rank) {
  MeshCoord c;
  c.tp = static_cast<int>(rank % d.tp); rank /= d.tp;
  c.cp = static_cast<int>(rank % d.cp); rank /= d.cp;
  c.dp_shard = static_cast<int>(rank % d.dp_shard); rank /= d.dp_shard;
  c.dp_replicate = static_cast<int>(rank % d.dp_replicate); rank /= d.dp_replicate;
  c.pp = static_cast<int>(rank);
  return c;
}

EpCoord EpCoordOf(const MeshDims& d, int64_t rank) {
  if (int64_t{d.dp_shard} * d.cp == 1) return EpCoord{static_cast<int>(rank % d.ep), 0};
  const MeshCoord c = CoordOf(d, rank);
  const int flat = c.dp_shard * d.cp + c.cp;  // torchtitan's fsdp = (dp_shard, cp) flattened
  return EpCoord{flat % d.ep, flat / d.ep};
}

int EfsdpDegree(const MeshDims& d) {
  const int64_t f = int64_t{d.dp_shard} * d.cp;
  return f == 1 ? 1 : static_cast<int>(f / d.ep);
}

int ExpertShardDim(int efsdp, int ep, int64_t experts) {
  return int64_t{efsdp} * ep > experts ? 1 : 0;
}

}  // namespace memsim
