#include "lib/stream/events.h"

namespace memsim {

std::string_view PhaseName(Phase p) {
  switch (p) {
    case Phase::kSetup: return "setup";
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
  }
  return "?";
}

std::string_view CategoryName(Category c) {
  switch (c) {
    case Category::kParameter: return "parameter";
    case Category::kGradient: return "gradient";
    case Category::kOptimizerState: return "optimizer_state";
    case Category::kActivation: return "activation";
    case Category::kTemporary: return "temporary";
    case Category::kWorkspace: return "workspace";
    case Category::kInput: return "input";
  }
  return "?";
}

}  // namespace memsim
