// NCCL's communicator buffers: device memory outside the caching allocator, per communicator a
// rank belongs to (one per data-parallel group or mesh dimension with more than one rank), sized
// from measurements per architecture and communicator kind (sim/data/nccl_buffers.json).
// nvidia-smi's device used = peak reserved + CUDA context + these. Note [NCCL buffers] in
// docs/device-memory.md.
#ifndef MEMSIM_SIM_NCCL_H_
#define MEMSIM_SIM_NCCL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lib/autodiff/setups/setups.h"

namespace memsim {

/// One communicator of a rank.
struct NcclCommunicator {
  std::string name;     ///< what uses it: "data parallel", "dp_shard", "tp", "pp", ...
  int64_t ranks = 1;    ///< its size
  std::string kind;     ///< "collective" or "p2p"
  int64_t peers = 0;    ///< p2p: the peers it connects to (all-to-all: ranks - 1; a pipeline: 1 or 2)
  int64_t bytes = 0, low = 0, high = 0;  ///< its buffers: point estimate and range
};

/// The communicators a rank of |p| uses (empty for one rank).
std::vector<NcclCommunicator> CommunicatorsOf(const ParallelOptions& p);

/// The NCCL buffers of |comms| on a GPU of architecture |arch| ("" unknown: the range over every
/// row): fills each communicator's bytes and range.
struct NcclBuffers {
  std::vector<NcclCommunicator> communicators;
  int64_t bytes = 0, low = 0, high = 0;  ///< sums over the communicators
  std::string source;                    ///< the rows of the point estimates
};
NcclBuffers EstimateNcclBuffers(std::vector<NcclCommunicator> comms, const std::string& arch);

}  // namespace memsim

#endif  // MEMSIM_SIM_NCCL_H_
