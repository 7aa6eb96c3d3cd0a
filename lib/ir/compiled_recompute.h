// What a compiled region recomputes in backward (Note [Compiled regions] in docs/op-rules.md): the
// exporter names, in `bwd_recomputed`, each backward buffer that holds a forward value AOTAutograd's
// partitioner chose to recompute rather than save ("bwd.buf1=addmm bwd.buf2=pow_1,mean": the
// buffer's label in `bwd_names`, then the FX nodes of the backward graph it holds).
#ifndef MEMSIM_LIB_IR_COMPILED_RECOMPUTE_H_
#define MEMSIM_LIB_IR_COMPILED_RECOMPUTE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/ir/graph.h"

namespace memsim {

/// One backward buffer of a compiled region that holds recomputed forward values.
struct RecomputedBuffer {
  std::string buffer;              ///< its label in bwd_names ("bwd.buf1")
  int64_t bytes = 0;               ///< its bwd_bytes
  std::vector<std::string> nodes;  ///< the recomputed FX nodes it holds ("addmm")
};

/// The recomputed buffers of compiled op |op|, in the order the exporter wrote them (none for
/// another op or an export without `bwd_recomputed`).
std::vector<RecomputedBuffer> RecomputedBuffers(const Op& op);

/// The recomputed FX nodes held by the backward buffer labelled |buffer| of |op| (nullopt: not a
/// recomputed buffer), joined by ", ".
std::optional<std::string> RecomputedNodesOf(const Op& op, std::string_view buffer);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_COMPILED_RECOMPUTE_H_
