// Export of a simulated step in the format of torch.cuda.memory._dump_snapshot(), so it opens in
// pytorch.org/memory_viz like a recorded run: the blocks are where the run's caching-allocator
// model placed them, giving real-looking addresses, segment allocations and the final segment layout; each
// trace entry's frames name the tensor, its category, op and module. `memsim replay` reads it.
#ifndef MEMSIM_SIM_REPORT_MEMVIZ_H_
#define MEMSIM_SIM_REPORT_MEMVIZ_H_

#include <nlohmann/json.hpp>
#include <string>

#include "lib/stream/events.h"
#include "lib/ir/graph.h"
#include "sim/allocator/simulate.h"

namespace memsim {

/// The snapshot as a value tree ({"segments": [...], "device_traces": [[...]]}) of where the
/// run's caching-allocator model placed each block (|place|, recorded by SimulateAllocator;
/// after a simulated OOM it covers the events before it).
nlohmann::ordered_json MemoryVizSnapshot(const Graph& g, const EventStream& s, const Placement& place);

/// Serialises a value tree (objects, arrays, strings, integers, floats, booleans, null) as a
/// pickle (protocol 2) of dicts, lists, str, int, float, bool and None — what _dump_snapshot
/// writes and what memory_viz reads.
std::string ToPickle(const nlohmann::ordered_json& value);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_MEMVIZ_H_
