// libFuzzer target: the graph-file reader (lib/io/graph_json.h). Any input must give a Graph or a
// Status; a crash, hang or sanitizer report is a finding (docs/robustness.md).
#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/io/graph_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  memsim::Result<memsim::Graph> g = memsim::ParseGraph(text, "fuzz.json");
  if (!g.ok() && g.status().message().size() > 4096) __builtin_trap();  // messages stay short
  return 0;
}
