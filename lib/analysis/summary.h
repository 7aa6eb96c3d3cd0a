// Per-layer summary (like Keras model.summary()): ops grouped by module path in execution
// order, with output shape, parameter count, bytes of new activations, and bytes the layer's
// autograd nodes save for backward. Pure function.
#ifndef MEMSIM_LIB_ANALYSIS_SUMMARY_H_
#define MEMSIM_LIB_ANALYSIS_SUMMARY_H_

#include <string>
#include <vector>

#include "lib/ops/bind.h"
#include "lib/ir/graph.h"

namespace memsim {

struct LayerRow {
  std::string module;
  std::string ops;            ///< op kinds, e.g. "conv2d" or "linear+relu"
  std::string output_shape;   ///< of the layer's last op
  int64_t params = 0;         ///< elements of parameters first used by this layer
  int64_t activation_bytes = 0;
  int64_t saved_bytes = 0;    ///< distinct storages its nodes keep for backward
};

struct LayerTable {
  std::vector<LayerRow> rows;
  int64_t total_params = 0, trainable_params = 0, param_bytes = 0;
  int64_t total_activation_bytes = 0, total_saved_bytes = 0;
};

LayerTable SummarizeLayers(const Graph& g, const BoundGraph& bound, const Profile& profile,
                           const std::vector<bool>& frozen);

}  // namespace memsim

#endif  // MEMSIM_LIB_ANALYSIS_SUMMARY_H_
