// A user's own optimizer, recorded by `tools/export_torch.py --optimizer FILE.py:CLASS`: what
// one step allocates and frees for each parameter, in order, with sizes relative to the
// parameter. memsim replays it on every parameter of the model like a built-in optimizer.
// Note [Recorded optimizers] in docs/op-rules.md.
#ifndef MEMSIM_LIB_IR_OPTIMIZER_PROGRAM_H_
#define MEMSIM_LIB_IR_OPTIMIZER_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

namespace memsim {

/// An allocation's size: num/den × the parameter's bytes, or a fixed byte count (num == 0).
struct OptSize {
  int64_t num = 0, den = 1, bytes = 0;
  int64_t Of(int64_t param_bytes) const { return num ? param_bytes / den * num + param_bytes % den * num / den : bytes; }
};

/// Which object a free releases.
struct OptRef {
  enum class Owner : uint8_t { kCurrent, kPrevious, kGlobal };  ///< this / the previous parameter's, or made before the loop
  Owner owner = Owner::kCurrent;
  bool state = false;  ///< a state tensor held before the step (else made during it)
  uint32_t index = 0;  ///< in allocation order
};

struct OptOp {
  bool alloc = false;
  OptSize size;  ///< alloc
  OptRef ref;    ///< free
};

/// One step: state each parameter holds before it, the ops before the loop over the parameters
/// (scalars), the loop body (same for every parameter), and the frees after the loop.
struct OptProgram {
  std::vector<OptSize> resident;
  std::vector<OptOp> before, body, end;
  std::vector<bool> survives;  ///< per body allocation: still alive after the step (new state)
};

struct OptimizerProgram {
  std::string name;    ///< the class, e.g. "CS336AdamW"
  std::string source;  ///< how it was recorded
  OptProgram first;    ///< the first step (state created)
  OptProgram steady;   ///< every later step
};

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_OPTIMIZER_PROGRAM_H_
