// The N-D device mesh of LLM parallelism (torch.distributed.device_mesh.init_device_mesh, as
// torchtitan's ParallelDims builds it): the degree of each parallel dimension, parsed from
// `--mesh dp_replicate=R,dp_shard=S,tp=T,pp=P,cp=C,ep=E`, and one rank's coordinates in it.
// Note [Device mesh] in docs/parallel.md.
#ifndef MEMSIM_LIB_AUTODIFF_SETUPS_MESH_H_
#define MEMSIM_LIB_AUTODIFF_SETUPS_MESH_H_

#include <string>
#include <string_view>

#include "lib/util/status.h"

namespace memsim {

/// Degrees of the mesh dimensions; 1 = the dimension is not used.
struct MeshDims {
  int dp_replicate = 1;  ///< HSDP / DDP replicas (all-reduce of grads across replicas)
  int dp_shard = 1;      ///< FSDP2 fully_shard ranks (parameters sharded on dim 0)
  int tp = 1;            ///< tensor (+ sequence) parallel ranks
  int pp = 1;            ///< pipeline stages
  int cp = 1;            ///< context-parallel ranks (the sequence split)
  /// expert-parallel ranks; borrowed from dp_shard·cp as torchtitan does, so it adds no ranks
  /// (alone, without dp_shard or cp, they are ranks of their own: Note [Expert parallel])
  int ep = 1;

  /// The ranks of the mesh: pp·dp_replicate·dp_shard·cp·tp (times ep when dp_shard·cp is 1).
  int64_t world() const;
  /// Any dimension above 1.
  bool enabled() const { return world() > 1 || ep > 1; }
  /// "dp_shard=8,tp=2": the dimensions above 1, in the order of kMeshDimNames ("" if none).
  std::string ToString() const;
  bool operator==(const MeshDims&) const = default;
};

/// A rank's index along each dimension.
struct MeshCoord {
  int pp = 0, dp_replicate = 0, dp_shard = 0, cp = 0, tp = 0;
  bool operator==(const MeshCoord&) const = default;
};

/// The dimension names --mesh accepts, in the mesh's order (outermost first) for ParseMesh's
/// messages; ep last, as it is not a mesh axis of its own.
inline constexpr std::string_view kMeshDimNames[] = {"pp", "dp_replicate", "dp_shard", "cp", "tp", "ep"};

/// Parses "dp_shard=8,tp=2" (any order, each name at most once, degrees 1 to 1,000,000). Errors
/// are one line naming |option| and the offending item: an unknown name (with the nearest one),
/// a repeated name, a degree that is not a positive integer, a world beyond 2^31, ep not
/// dividing dp_shard·cp (above 1).
Result<MeshDims> ParseMesh(std::string_view option, std::string_view text);

/// The coordinates of |rank| (0 ≤ rank < world) in torchtitan's row-major order, tp innermost:
/// rank = (((pp·R + dp_replicate)·S + dp_shard)·C + cp)·T + tp.
MeshCoord CoordOf(const MeshDims& dims, int64_t rank);

/// Expert parallelism borrowing dp_shard·cp (torchtitan's sparse mesh (efsdp, ep), ep innermost,
/// over the flattened dp_shard·cp ranks): the rank's index in its ep group and along efsdp, the
/// experts' FSDP dimension of dp_shard·cp / ep ranks. With ep alone the ep index is the rank.
struct EpCoord {
  int ep = 0, efsdp = 0;
};
EpCoord EpCoordOf(const MeshDims& dims, int64_t rank);
/// The ranks of the experts' FSDP dimension (efsdp): dp_shard·cp / ep (1 with ep alone).
int EfsdpDegree(const MeshDims& dims);
/// The dim FSDP2 shards the expert weights on over efsdp: 1 when efsdp·ep ranks exceed the
/// |experts| (torchtitan's apply_fsdp_to_decoder: Shard(1)), else 0.
int ExpertShardDim(int efsdp, int ep, int64_t experts);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_SETUPS_MESH_H_
