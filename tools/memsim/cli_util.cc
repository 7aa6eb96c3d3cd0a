#include "tools/memsim/cli_util.h"

#include <cstdio>
#include <cstdlib>

#include "lib/io/graph_json.h"

namespace memsim::cli {

void Fail(const Status& s, int code) {
  std::fprintf(stderr, "memsim: %s\n", s.message().c_str());
  std::fflush(stdout);
  std::exit(code);
}

Graph LoadOrFail(const std::string& path) {
  auto g = LoadGraph(path);
  if (!g.ok()) Fail(g.status());
  return std::move(g).value();
}

Graph LoadConfigGraph(const ConfigOptions& options) {
  Graph g = LoadOrFail(options.graph);
  return ValueOrFail(options.Adapt(std::move(g)));
}

}  // namespace memsim::cli
