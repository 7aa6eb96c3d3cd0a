// libFuzzer target: the whole run pipeline from text, as the CLI and the Python module run it.
// The input is one line of options ("--batch 4 --optimizer recorded --steps 2 ...") and then a
// graph file (JSON, with or without a recorded optimizer program). The options are parsed by the
// one option spec (sim/options/options.h), the graph by ParseGraph, adapted (--lora, --fp8, ...)
// and simulated by RunPipeline. Any input must give a result or a Status with a one-line message;
// a crash, an InternalError (a MEMSIM_CHECK reached from input), a hang or a sanitizer report is
// a finding (docs/robustness.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "lib/io/graph_json.h"
#include "sim/options/options.h"
#include "sim/options/parse_error.h"
#include "sim/pipeline.h"

namespace {

void CheckMessage(const memsim::Status& s) {
  const std::string& m = s.message();
  if (m.size() > 4096 || m.find('\n') != std::string::npos) __builtin_trap();  // one short line
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const size_t nl = text.find('\n');
  if (nl == std::string::npos || nl > 1024) return 0;
  std::vector<std::string> words;
  std::istringstream line(text.substr(0, nl));
  for (std::string w; line >> w && words.size() < 32;) words.push_back(w);
  memsim::Result<memsim::Graph> g = memsim::ParseGraph(text.substr(nl + 1), "fuzz.json");
  if (!g.ok()) return CheckMessage(g.status()), 0;
  CLI::App app{"fuzz"};
  memsim::cli::ConfigOptions options;
  options.Bind(&app, /*lists=*/false);
  memsim::cli::GuardIntegerText(&app);
  words.insert(words.begin(), "graph");
  std::reverse(words.begin(), words.end());  // CLI11 takes the vector reversed
  try {
    app.parse(words);
  } catch (const CLI::ParseError&) {
    return 0;
  }
  memsim::Result<memsim::RunConfig> c = options.Single("run");
  if (!c.ok()) return CheckMessage(c.status()), 0;
  // Keep each input fast: the work budget's limit is tested by the unit tests, not here.
  if (c->sim.steps > 3 || c->sim.accumulate > 3) return 0;
  memsim::Result<memsim::Graph> adapted = options.Adapt(*g);
  if (!adapted.ok()) return CheckMessage(adapted.status()), 0;
  memsim::Result<memsim::RunResult> r = memsim::RunPipeline(*adapted, *c);
  if (!r.ok()) CheckMessage(r.status());
  return 0;  // an InternalError propagates: libFuzzer reports the uncaught exception
}
