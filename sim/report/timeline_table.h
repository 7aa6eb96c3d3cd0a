// The memory timeline of a simulated step as a typed table, one row per event of the stream:
// the tensor, the op being run, its module, the phase and category, the bytes, the live bytes
// after the event, and the caching-allocator model's allocated and reserved bytes after it
// (torch.cuda.memory_allocated()/memory_reserved() at that point). The Python module turns it
// into a pandas DataFrame (Report.timeline()). Pure function.
#ifndef MEMSIM_SIM_REPORT_TIMELINE_TABLE_H_
#define MEMSIM_SIM_REPORT_TIMELINE_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/stream/events.h"
#include "lib/util/status.h"
#include "sim/allocator/simulate.h"

namespace memsim {

/// Column-wise: every vector has one entry per event, in stream order.
struct TimelineTable {
  std::vector<EventKind> kind;
  std::vector<Phase> phase;
  std::vector<Category> category;
  std::vector<std::string> tensor;   ///< the buffer's name
  std::vector<std::string> op;       ///< the op being run (its backward in the backward phase); "" if none
  std::vector<std::string> module;   ///< that op's module path
  std::vector<int64_t> bytes;        ///< requested bytes of the buffer
  std::vector<int64_t> live;         ///< live (requested) bytes after the event
  std::vector<int64_t> allocated;    ///< allocator model: allocated block bytes after the event
  std::vector<int64_t> reserved;     ///< allocator model: reserved segment bytes after the event
  /// Rows with allocated/reserved filled: all of them, fewer after a simulated OOM (the rows from
  /// the failed allocation on have none), 0 for the ideal model (it plans offline, no per-event
  /// state).
  size_t allocator_rows = 0;
};

/// The table of |s| (from graph |g|), with the allocator model of |opt| run over it event by
/// event: its peaks are the AllocatorReport's. Error: a bad alloc_conf.
Result<TimelineTable> MakeTimelineTable(const Graph& g, const EventStream& s, const AllocatorOptions& opt);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_TIMELINE_TABLE_H_
