// fit: the largest value of a symbol (the batch, a sequence length) whose training step fits a
// device. Searched on the compiled step's size schedule, guided by live bytes, and confirmed on
// the exact path around the answer (Note [Fit search] in docs/sweeps.md).
#ifndef MEMSIM_SIM_FIT_H_
#define MEMSIM_SIM_FIT_H_

#include <cstdint>
#include <string>

#include "sim/sweep.h"

namespace memsim {

/// The largest --max-batch (2^40).
inline constexpr int64_t kMaxFitLimit = int64_t{1} << 40;

/// Two answers (Note [Fit search]): the largest value that fits on the point estimate of the
/// device's overhead (`run` there says "fits", one more says "does not fit"), and the largest
/// that fits at the top of the device-used uncertainty range (`run` there says "fits at the top
/// of the uncertainty range too"; sim/device.h's context range, the cuDNN workspace bounds).
struct FitResult {
  std::string symbol = "batch";  ///< the symbol searched (fit --search)
  int64_t max_batch = 0;         ///< the largest value of |symbol| that fits; 0: not even 1 fits
  SweepRow at_max;               ///< the row for max_batch (if > 0)
  SweepRow above;                ///< the row for max_batch + 1 (the first that does not fit)
  int64_t max_batch_at_top = 0;  ///< the largest value that fits at the top of the range
  SweepRow at_top;               ///< the row for max_batch_at_top (if > 0)
  int evaluated = 0;             ///< configurations simulated
  int confirmed = 0;             ///< engine runs confirming the schedule's answer (0: exact path)
};

/// Largest value of the symbol "batch" in [1, limit] for which |base| (with a capacity) does not
/// run out of memory, assuming memory grows with the batch.
Result<FitResult> FitBatch(const Graph& g, const RunConfig& base, int64_t limit);
/// The same search over any symbol of |g| (`fit --search seq`: the longest sequence that fits),
/// the other symbols as |base| binds them. A value the graph cannot take (a sequence longer than
/// a learned position table) ends the search like an out-of-memory, with its message.
Result<FitResult> FitSymbol(const Graph& g, const RunConfig& base, const std::string& symbol, int64_t limit);

}  // namespace memsim

#endif  // MEMSIM_SIM_FIT_H_
