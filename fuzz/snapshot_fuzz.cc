// libFuzzer target: the snapshot reader (pickle, alloc_data JSON, trace_plot HTML) and, for
// inputs it accepts, the replay through the caching-allocator model.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/replay/replay.h"
#include "sim/replay/snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  memsim::Result<memsim::MemorySnapshot> s = memsim::ParseSnapshot(bytes);
  if (!s.ok()) {
    if (s.status().message().size() > 4096) __builtin_trap();  // messages stay short
    return 0;
  }
  (void)memsim::ReplaySnapshot(*s);
  return 0;
}
